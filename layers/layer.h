// layers/layer.h — Layer: the base of every layer (data types, quantizers on each bottom, top and
// parameter blob, parameter blobs with fillers, Reshape/Forward), plus the shared helpers layers
// use to hand quantization parameters to kernels.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/datatype.h"
#include "device/device.h"
#include "layers/blob.h"
#include "layers/elementwise.h"
#include "libdnn/scratch.h"
#include "proto/caffe.pb.h"
#include "quant/quant_params.h"
#include "quant/quantizer.h"

namespace mpcaffe {

class Net;
class Layer;
class ElementFiller;

/// What the net's inference optimizer runs inside a producer (Convolution, InnerProduct) in place
/// of the layers after it (see Net's fusion plan): per-channel affine layers (BatchNorm, Scale)
/// folded into the weights and bias, a residual blob added (an Eltwise SUM), a ReLU, in that
/// order. The producer writes `output`'s top 0 with that layer's top quantization.
struct FusedEpilogue {
  std::vector<Layer*> affine;  ///< BatchNorm / Scale layers, in net order
  Blob* residual = nullptr;    ///< the Eltwise SUM's other bottom (added before the ReLU)
  Layer* eltwise = nullptr;    ///< that Eltwise (its bottom quantizer gives the residual's)
  int residual_bottom = -1;    ///< which of its bottoms the residual is
  Layer* relu = nullptr;       ///< a ReLU with negative_slope 0
  Layer* output = nullptr;     ///< the last fused layer
  /// The composed per-channel y = scale·x + shift of `affine` over `channels` channels (empty
  /// vectors when there are none). Throws LayerError when a layer is not per-channel affine.
  /// Composed again only when a parameter of `affine` changed (its data_version): the fused
  /// layer asks at every forward pass, and reading the factors from the device each time
  /// would cost a host synchronisation per folded layer and pass.
  void Affine(int channels, std::vector<float>* scale, std::vector<float>* shift) const;
  /// Whether the factors Affine composed last still hold: no parameter of `affine` changed
  /// since (their data_versions compared with the ones it composed from).
  bool AffineCurrent() const;

 private:
  mutable int cached_channels_ = -1;
  mutable std::vector<uint64_t> cached_versions_;
  mutable std::vector<float> cached_scale_, cached_shift_;
};

/// Whatever a producer's kernels are prepared from (Prepare: its shapes, its quantizers, the
/// epilogue fused into it) can only have changed when one of these moved: every quantizer's
/// state (quant::QuantizerStateGeneration), every blob's shape (BlobShapeGeneration), the
/// fused epilogue it runs — and its folded layers' parameters (FusedEpilogue::AffineCurrent).
/// Layer::PreparedFor lets Prepare skip building its key at every pass (the layer's own
/// parameters: Layer::ParamsChanged).
struct PrepareStamp {
  uint64_t quantizers = 0, shapes = 0;
  const FusedEpilogue* fused = nullptr;
  bool operator==(const PrepareStamp& o) const {
    return quantizers == o.quantizers && shapes == o.shapes && fused == o.fused;
  }
};

/// What a producer can take into its epilogue for its compute type (the optimizer's planning).
struct EpilogueSupport {
  bool relu = false, affine = false, residual = false;
};

/// A layer's configuration or its blobs do not fit: the message names the layer, its type and
/// what is wrong.
class LayerError : public Error {
 public:
  using Error::Error;
};

/// The data type of a proto DataType (CAFFE_FLOAT, CAFFE_HALF, CAFFE_INT16/INT8_QUANTIZED);
/// throws LayerError naming `where` for the types mpcaffe does not compute in.
DataType DataTypeFromProto(caffe::DataType type, const std::string& where);
caffe::DataType DataTypeToProto(DataType type);

/// The seed of every filler and random mask (default 1701). Fillers draw from a generator
/// seeded by (seed, layer name, blob index), so a blob's initial values do not depend on the
/// order layers are built in, and the fp32 and reduced-precision variants of a net start equal.
void SetRandomSeed(uint64_t seed);
uint64_t RandomSeed();
/// A deterministic 64-bit hash (FNV-1a) of `text` mixed with `seed`.
uint64_t StableHash(const std::string& text, uint64_t seed);

/// Appends to `key` the raw bytes of what a layer's kernels are built from — the sizes, then the
/// values, no formatting — for Prepare's change check at every forward pass (formatting every
/// channel's scale and multiplier as text cost more than small layers: docs/BENCHMARKS.md).
void AppendKeyBytes(std::string* key, const void* data, size_t bytes);
void AppendKey(std::string* key, const std::vector<float>& values);
/// Every field of `params` (type, range, axis, scales, zero points).
void AppendKey(std::string* key, const quant::QuantParams& params);

/// Fills `n` floats as a Caffe FillerParameter says (constant, uniform, gaussian, xavier, msra,
/// positive_unitball, bilinear), with fan-in/fan-out from `shape` as BVLC computes them. The
/// random values come from a counter-based generator (value i depends only on the seed and i),
/// drawn on every core for large blobs: the same values for a seed on every machine.
/// Throws LayerError naming `where` for an unknown filler type.
std::vector<float> FillValues(const caffe::FillerParameter& filler, const std::vector<int>& shape,
                              uint64_t seed, const std::string& where);

/// The affine parameters of a quantized side as kernels take them (float types: {1, 0}).
Affine AffineOf(const quant::QuantParams& params);

/// The bias vector a libdnn GEMM / convolution of `type` adds: fp32 values for float types;
/// for quantized types round(bias / (s_x·s_w[c])) (ties away from zero, saturated) as int32
/// (int8q) or int64 (int16q), with s_w per channel or one for all. Returned as raw bytes.
std::vector<uint8_t> AccumulatorBias(const std::vector<float>& bias, DataType type, double s_x,
                                     const std::vector<float>& s_w);

/// The name of a layer's quantizer: the name in LayerParameter.<side>_quantizer(i) when given,
/// else "<layer>/<side><i>". `side` is "bottom", "top" or "blob" (LayerParameter.blobs_quantizer).
std::string QuantizerNameOf(const caffe::LayerParameter& param, const std::string& side, int i);

class Layer {
 public:
  Layer(const caffe::LayerParameter& param, Device& device);
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  virtual const char* type() const = 0;
  const caffe::LayerParameter& layer_param() const { return param_; }
  const std::string& name() const { return param_.name(); }
  Device& device() const { return *device_; }
  caffe::Phase phase() const { return param_.phase(); }
  /// "layer 'conv1' (Convolution)" for messages.
  std::string Describe() const;

  /// The type the layer computes in (compute_data_type; Input: top_data_type).
  DataType compute_type() const { return compute_type_; }
  /// The type each bottom must have and each top is written in. Regular layers use their
  /// compute type on both sides; Quantizer layers convert.
  virtual DataType bottom_type(int i) const { return compute_type_; }
  virtual DataType top_type(int i) const { return compute_type_; }
  /// True when the layer can compute in `type` (the constructor checks compute_type()).
  virtual bool SupportsType(DataType type) const = 0;

  /// Checks blob counts and types, creates the quantizers, calls LayerSetUp then Reshape.
  void SetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  /// Layer-specific one-time set-up (parameter blobs, kernels).
  virtual void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {}
  /// Shapes the tops (and internal buffers) for the bottoms' shapes.
  virtual void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;
  /// Runs the quantizer hooks (observe / pseudo on fp32 sides) around ForwardImpl.
  void Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  /// Training (fp32 only, as BVLC): writes each bottom's diff whose propagate_down is true
  /// (overwritten) from the tops' diffs and adds the parameter gradients to the parameter
  /// blobs' diffs (accumulated: the solver clears them) for the blobs whose
  /// param_propagate_down is true. Throws LayerError for a layer without a backward pass or a
  /// compute type other than fp32. Quantizers in PSEUDO mode pass gradients straight through.
  void Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom);
  /// True when the layer implements Backward.
  virtual bool HasBackward() const { return false; }
  /// True for layers whose Reshape must run before every Forward, as BVLC calls it (Python
  /// layers: a data layer may change its tops' shapes from one pass to the next). The net
  /// reshapes the layers after it when a top's shape changed.
  virtual bool ReshapesEachPass() const { return false; }
  /// Whether force_backward may ask for bottom `i`'s gradient (false for labels).
  virtual bool AllowForceBackward(int bottom) const { return true; }
  /// Whether Backward computes the gradient of parameter blob `i` (default true; the net sets
  /// it false for lr_mult 0).
  bool param_propagate_down(int i) const;
  /// Whether parameter blob `i` is trained from its gradient (false for statistics a layer
  /// updates itself, such as BatchNorm's moving averages): solvers leave the others untouched.
  virtual bool ParamLearnable(int i) const { return true; }
  void set_param_propagate_down(int i, bool value);

  /// Blob counts the layer accepts (-1: any).
  virtual int ExactNumBottomBlobs() const { return -1; }
  virtual int MinBottomBlobs() const { return -1; }
  virtual int MaxBottomBlobs() const { return -1; }
  virtual int ExactNumTopBlobs() const { return -1; }
  virtual int MinTopBlobs() const { return -1; }
  virtual int MaxTopBlobs() const { return -1; }
  /// Whether top i may be the same blob as bottom i.
  virtual bool AllowsInPlace() const { return false; }
  /// Loss layers: the default loss weight of top i.
  virtual float DefaultLossWeight(int top) const { return 0.0f; }

  /// Parameter blobs (weights, biases, statistics) in the layer's compute type. Filler values
  /// are drawn lazily: the first access to the values (this, Forward, ParamAsFloat) draws the
  /// ones no weights have replaced, so loading trained weights never pays for the fillers.
  std::vector<std::shared_ptr<Blob>>& blobs() {
    DrawPendingFills();
    return blobs_;
  }
  int num_params() const { return static_cast<int>(blobs_.size()); }
  /// Parameter blob `i` for its shape and type, without drawing pending filler values.
  Blob& param_blob(int i) { return *blobs_.at(i); }
  /// Replaces parameter blob `i` by raw storage bytes of its type (bytes() of them).
  void SetParamStorage(int i, const void* bytes);
  /// Writes real values into parameter blob `i`: converted to the blob's type; quantized blobs
  /// use the range of their quantizer, observed from `values` when none is known yet; 4-bit
  /// weights take per-channel scales chosen from `values` every time.
  void SetParamFromFloat(int i, const std::vector<float>& values);
  /// Real values of parameter blob `i` (quantized blobs dequantized with their parameters).
  std::vector<float> ParamAsFloat(int i);
  /// SetParamFromFloat(i, src.ParamAsFloat(i)) for a blob of the same shape; a quantized source
  /// dequantizes straight into an fp32 blob (no intermediate copy: calibrating AlexNet copies
  /// 61 M weights this way). A quantized source (one scale, or 8-bit per-channel weights) whose
  /// filler values are not drawn yet gets them through this fp32 blob: drawn once into it,
  /// quantized from it, and the blob then holds their dequantized values — what drawing the
  /// source first and copying would give.
  void CopyParamValuesFrom(int i, Layer& src);
  /// Called after parameter blobs or quantizer ranges changed (drops derived device data).
  virtual void ParamsChanged() {}
  /// Reduced-memory inference: a layer that keeps a parameter on the device in a derived form
  /// (repacked convolution weights) frees the parameter's own device copy once derived (the
  /// host copy stays for deriving again after a change), and scratch buffers after each pass.
  void set_release_param_copies(bool release) { release_param_copies_ = release; }
  bool release_param_copies() const { return release_param_copies_; }
  /// Reduced-memory inference: the net's scratch arena, from which layers with scratch of a
  /// pass (Convolution) take their buffers instead of holding their own (nullptr: their own).
  void set_scratch_arena(std::shared_ptr<libdnn::ScratchArena> arena) {
    scratch_arena_ = std::move(arena);
  }
  const std::shared_ptr<libdnn::ScratchArena>& scratch_arena() const { return scratch_arena_; }
  /// Whether the layer frees parameter i's own device copy once it has derived the form it runs
  /// on (release_param_copies): new values of it are then written on the host side, so that only
  /// the derived copy ever occupies the device. Other parameters are written straight into their
  /// device memory (Blob::OverwriteData).
  virtual bool DropsParamDeviceCopy(int i) const { return false; }

  /// Inference fusion: which layers after it a producer (Convolution, InnerProduct) can run in
  /// its epilogue, for its compute type.
  virtual EpilogueSupport FusionSupport() const { return {}; }
  /// Whether this pass can run `epilogue` (e.g. an integer layer folds a BatchNorm only while
  /// every channel's scale is positive); the net runs the layers unfused otherwise.
  virtual bool AcceptsEpilogue(const FusedEpilogue& epilogue) { return true; }
  /// While set, ForwardImpl runs the epilogue and writes its output layer's top: the net passes
  /// that top blob as this layer's top and skips the fused layers.
  void set_fused(const FusedEpilogue* epilogue) { fused_ = epilogue; }
  /// A per-channel affine layer (BatchNorm with global statistics, Scale with one bottom over
  /// the channel axis) gives y = scale[c]·x + shift[c] over `channels` channels; false when the
  /// layer is not one.
  virtual bool ChannelAffine(int channels, std::vector<float>* scale, std::vector<float>* shift) {
    return false;
  }

  /// Nets nested inside the layer (built in LayerSetUp; empty for most layers). The net holding
  /// the layer treats them as parts of itself: quant_mode, learnable parameters, ranges to
  /// calibrate, saved and loaded weights, memory, and sharing with another net.
  virtual std::vector<Net*> nested_nets() const { return {}; }
  /// The name of nested net `k` in parameter names and messages ("gating", "expert0").
  virtual std::string nested_net_name(int k) const { return std::to_string(k); }
  /// Where the nested nets' weights and ranges live in `saved`, a copy of this layer's
  /// LayerParameter in a caffemodel: one NetParameter per nested_nets() entry, in that order.
  /// The mutable form makes `saved` hold exactly those entries (replacing the definition's
  /// nested nets); the const form gives the entries `saved` holds (nullptr for a missing one),
  /// nothing when it holds no nested nets, and throws when it holds another number of them.
  virtual std::vector<caffe::NetParameter*> SavedNestedNets(caffe::LayerParameter* saved) const {
    return {};
  }
  virtual std::vector<const caffe::NetParameter*> SavedNestedNets(
      const caffe::LayerParameter& saved) const {
    return {};
  }

  quant::Quantizer& bottom_quantizer(int i) { return *bottom_quantizers_.at(i); }
  quant::Quantizer& top_quantizer(int i) { return *top_quantizers_.at(i); }
  quant::Quantizer& blob_quantizer(int i) { return *blob_quantizers_.at(i); }
  int num_bottom_quantizers() const { return static_cast<int>(bottom_quantizers_.size()); }
  int num_top_quantizers() const { return static_cast<int>(top_quantizers_.size()); }
  int num_blob_quantizers() const { return static_cast<int>(blob_quantizers_.size()); }
  /// Every quantizer of the layer: bottoms, tops, parameter blobs.
  std::vector<quant::Quantizer*> quantizers();
  /// Whether a quantizer of the layer observes or snaps fp32 data (OBSERVE or PSEUDO mode): a
  /// pass must then see the values between layers. Asked of every layer on every pass, so it
  /// allocates nothing.
  bool WatchesFloatData() const;
  /// Sets the mode of every quantizer that watches fp32 data (quantized sides stay ACTIVE).
  void SetQuantMode(quant::QuantizerMode mode);

  /// Quantization parameters of bottom i / top i / parameter blob i for their (quantized) type;
  /// throws LayerError naming the layer and quantizer when no range is known.
  quant::QuantParams BottomParams(int i);
  quant::QuantParams TopParams(int i);
  quant::QuantParams BlobParams(int i);
  /// Whether parameter blob i holds 4-bit weights (an int8 blob whose quantizer says
  /// weight_bits 4): values w + 128 with w in [−8, 7], BlobParams per output channel (axis 0).
  bool Int4Weights(int i) const;
  /// Parameter blob i's 4-bit weights packed two per byte (quant/int4.h) in a new device buffer.
  std::shared_ptr<DeviceMemory> UploadInt4Weights(int i);
  /// The Arm paper's 16-bit accumulator as a measured option (mpcaffe test --acc16-overflow):
  /// while set, a Convolution / InnerProduct with 4-bit weights simulates each forward pass's
  /// Σ x·w in a 16-bit accumulator on the host (quant::Acc16Dot) and adds the counts here.
  void set_simulate_acc16(bool on) { simulate_acc16_ = on; }
  bool simulate_acc16() const { return simulate_acc16_; }
  quant::Acc16Overflow& acc16_overflow() { return acc16_overflow_; }
  /// The same as kernel arguments ({1, 0} for float types).
  Affine BottomAffine(int i);
  Affine TopAffine(int i);

  /// Default quantizer names ("<layer>/bottom<i>", "<layer>/top<i>", "<layer>/blob<i>"),
  /// overridden by the names in LayerParameter.bottom_quantizer / top_quantizer /
  /// blobs_quantizer. Quantizers with one name share a range when a model is loaded.
  std::string BottomQuantizerName(int i) const;
  std::string TopQuantizerName(int i) const;
  std::string BlobQuantizerName(int i) const;

 protected:
  virtual void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;
  /// The layer's fp32 backward (called by Backward after the checks).
  virtual void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom);

  /// Adds parameter blob `blobs_[index]` of `shape` in the compute type, filled from `filler`
  /// unless the LayerParameter carries blobs (those are copied in). Symmetric quantization
  /// for weights when `symmetric`; one symmetric scale per output channel (axis 0) when
  /// `per_channel` and the layer computes in int8 with 8-bit weights
  /// (Quantizer::per_channel_weights).
  Blob* AddParam(const std::vector<int>& shape, const caffe::FillerParameter& filler,
                 bool symmetric = false, bool per_channel = false);
  /// AddParam in fp32 whatever the compute type: factors a quantized layer applies in float
  /// (a BatchNorm's statistics, a Scale's factors), which 8 bits would not hold.
  Blob* AddFloatParam(const std::vector<int>& shape, const caffe::FillerParameter& filler);

  /// Throws LayerError "<layer>: <message>".
  [[noreturn]] void Fail(const std::string& message) const;
  /// The writer target of the layer's device.
  KernelTarget target() const { return KernelTarget::Of(*device_); }
  /// A kernel of a generated program (memoized per device through Device::GetProgram).
  Kernel GetKernel(const std::string& source, const std::string& name,
                   const ProgramHints& hints = ProgramHints::OneDimensional());
  ElementwiseOps& elementwise() { return elementwise_; }
  /// y = x as values: a device copy for float types (nothing when in place); for quantized
  /// types requantized from x's to y's parameters (nothing when in place with equal ones).
  void CopyOrRequant(Blob& x, Affine xq, Blob& y, Affine yq);
  /// The epilogue fused into this pass, or null (see set_fused).
  const FusedEpilogue* fused() const { return fused_; }
  /// Whether a ReLU is fused into this pass.
  bool relu_fused() const { return fused_ && fused_->relu; }
  /// This pass's PrepareStamp.
  PrepareStamp CurrentPrepareStamp() const {
    return {quant::QuantizerStateGeneration(), BlobShapeGeneration(), fused_};
  }
  /// Whether nothing Prepare reads moved since it took `last` (and composed the fused
  /// epilogue's factors).
  bool PreparedFor(const PrepareStamp& last) const {
    return CurrentPrepareStamp() == last && (!fused_ || fused_->AffineCurrent());
  }
  /// Quantization of what ForwardImpl stores in top 0: TopParams(0), or the fused output's.
  quant::QuantParams OutputParams() {
    return fused_ ? fused_->output->TopParams(0) : TopParams(0);
  }

  caffe::LayerParameter param_;
  Device* device_;
  DataType compute_type_;
  std::vector<std::shared_ptr<Blob>> blobs_;
  std::vector<bool> param_propagate_down_;  // per parameter blob; missing entries are true

 private:
  void DrawPendingFills();
  Blob* AddTypedParam(const std::vector<int>& shape, const caffe::FillerParameter& filler,
                      bool symmetric, bool per_channel, DataType type);
  /// Whether parameter i still waits for filler values drawn one at a time (elementwise) into a
  /// quantized blob of one scale or of 8-bit per-channel ones (what CopyParamValuesFrom can
  /// draw through an fp32 blob).
  bool FillsQuantizedElementwise(int i) const;
  /// Parameter i's per-channel int8 weights from `values` in one pass (DrawChannelsQuantized):
  /// their scales and, when it has none, the quantizer's observed range set as
  /// SetParamFromFloat sets them; with `real`, the dequantized values written there too.
  void DrawQuantizedChannels(int i, const ElementFiller& values, float* real);
  /// Where new values of parameter i go (see DropsParamDeviceCopy): returns the view of its
  /// device side to write through and release, or null with `*out` the host side.
  std::unique_ptr<HostView> ParamWriteView(int i, void** out);
  void CheckBlobs(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const;
  std::unique_ptr<quant::Quantizer> MakeQuantizer(
      const google::protobuf::RepeatedPtrField<caffe::QuantizerParameter>& configs, int i,
      const std::string& name, DataType in, DataType out);

  ElementwiseOps elementwise_;
  std::vector<std::unique_ptr<quant::Quantizer>> bottom_quantizers_, top_quantizers_,
      blob_quantizers_;
  bool set_up_ = false;
  bool release_param_copies_ = false;
  std::shared_ptr<libdnn::ScratchArena> scratch_arena_;
  bool simulate_acc16_ = false;
  quant::Acc16Overflow acc16_overflow_;
  const FusedEpilogue* fused_ = nullptr;
  std::vector<std::unique_ptr<caffe::FillerParameter>> pending_fill_;  // per parameter blob
  std::vector<uint64_t> param_versions_;  // data_version() of each parameter at the last Forward
};

}  // namespace mpcaffe
