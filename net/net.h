// net/net.h — Net: a layer graph built from a NetParameter (phase/level/stage rules, in-place
// layers, automatic Split and Quantizer insertion), forward passes, quant_mode, trained-weight
// copy and caffemodel saving, and the reduced-memory planner for inference. One class, defined
// by concern: net_passes.cc (NetParameter passes), net_build.cc (layers, backward set-up),
// net_fusion.cc (ReLU fusion), net_memory.cc (memory plan and counts), net_run.cc (Forward,
// Backward), net_weights.cc (weight I/O, sharing), net_quantization.cc (modes, calibration).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "device/device.h"
#include "layers/blob.h"
#include "proto/caffe.pb.h"
#include "quant/quantizer_mode.h"

namespace mpcaffe {

// The layers a Net holds (layers/layer.h, internal: the public header set declares the class
// only; a program reaches a layer's definition through built_param()).
class Layer;
struct FusedEpilogue;

/// The net definition is inconsistent (unknown bottom, duplicate top, weights that do not fit).
/// Messages name the layer, the blob and the shapes involved.
class NetError : public Error {
 public:
  using Error::Error;
};

/// How to build a net beyond what its NetParameter says.
struct NetOptions {
  caffe::Phase phase = caffe::TEST;
  int level = 0;
  std::vector<std::string> stages;
  /// Replace every Data (and ImageData, MemoryData, WindowData) layer by an Input layer with the
  /// same tops, filled with seeded random data (benchmarks without the LMDB or the images). Top
  /// shapes come from `synthetic_shape` (C, H, W), else from an ImageData layer's new_height ×
  /// new_width (and is_color), memory_data_param, WindowData's crop (3×crop×crop), the mean file
  /// when it exists, crop_size (3×crop×crop) or the dataset name in the
  /// source path (mnist 1×28×28, cifar 3×32×32).
  bool synthetic_data = false;
  std::vector<int> synthetic_shape;
  /// Overrides NetParameter.reduced_memory_inference when set (-1: use the file's value).
  int reduced_memory = -1;
  /// Blobs the reduced-memory planner must keep readable after Forward (never shared).
  std::vector<std::string> keep_blobs;
  /// A net nested inside a layer (Layer::nested_nets): building it leaves the device's peak
  /// counter alone, so the outer net's peak_device_bytes covers it.
  bool nested = false;
  /// The output blobs receive gradients from outside (a net nested in a layer): the layers
  /// they depend on run in Backward, whose caller sets the outputs' diffs first.
  bool backward_from_outputs = false;
  /// Inference fusion of a ReLU (negative_slope 0) into the Convolution or InnerProduct whose
  /// top it alone consumes: 1 on, 0 off, -1 on unless the environment says MPCAFFE_FUSE=0.
  /// TEST phase only, never while quantizers observe; an in-place ReLU always qualifies, one
  /// writing a new blob only under reduced memory or in a nested net (whose intermediate
  /// blobs are not kept or not seen).
  int fuse_relu = -1;
  /// The inference graph optimizer (TEST phase), by level. 1: BatchNorm and Scale folded into
  /// the Convolution or InnerProduct before them, an Eltwise SUM with a residual input and a
  /// following ReLU run in the convolution's epilogue — through in-place layers, and through new
  /// blobs only where intermediate blobs are not kept (reduced memory, nested nets), so every
  /// blob a user can read after Forward holds what the unoptimized net writes (as pycaffe
  /// expects). 2: also through a new blob that only the chain's next layer reads (its value is
  /// not written, as ONNX Runtime drops what it fuses; keep_blobs keeps one), and no Split copies
  /// of float blobs (their consumers read the blob itself when none writes it in place). 0: off
  /// (also the ReLU fusion, unless fuse_relu is 1). -1: MPCAFFE_OPTIMIZE (0, 1 or 2), else 1.
  /// From level 1 on, Splits, TEST-phase Dropouts and Concats run as views where the copy would
  /// be exact (no work: tops share their bottom's data, producers write into their Concat
  /// slices; see runs_as_view and net_memory.cc).
  /// The command-line tools that only time or score a net (time, bench, test) ask for 2.
  int optimize = -1;
};

/// Applies BVLC's NetStateRule semantics: keeps the layers whose include rules (any) are met
/// and whose exclude rules (all) are not. Throws NetError for a layer with both.
caffe::NetParameter FilterNet(const caffe::NetParameter& param, const caffe::NetState& state);
bool StateMeetsRule(const caffe::NetState& state, const caffe::NetStateRule& rule);

/// The same net with every data type set to `type` (the fp32 variant used for calibration),
/// nested nets included.
caffe::NetParameter WithDataType(const caffe::NetParameter& param, DataType type);

/// The nets a layer definition holds (nested nets, e.g. a gating net and expert nets): every
/// NetParameter field of the layer's parameter messages, found by its type, in field order.
std::vector<caffe::NetParameter*> NestedNetParameters(caffe::LayerParameter* layer);

/// Registers the layer types net/ defines (layers that nest Nets) with the layer registry. The
/// file of the Net constructor adds it to the registry's built-in groups, so every program
/// that builds Nets knows them.
void RegisterNetLayers();
/// Registers BVLC's recurrent layers (RNN, LSTM: net/recurrent_layer.h), which nest an unrolled
/// Net; added to the built-in groups the same way.
void RegisterRecurrentLayers();

class Net {
 public:
  Net(const caffe::NetParameter& param, Device& device, const NetOptions& options = {});
  /// Reads a .prototxt (upgraded as BVLC does) and builds it.
  static std::unique_ptr<Net> FromFile(const std::string& prototxt, Device& device,
                                       const NetOptions& options = {});
  ~Net();  // defined where Layer is complete (net_build.cc)
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  const std::string& name() const { return param_.name(); }
  caffe::Phase phase() const { return state_.phase(); }
  Device& device() const { return *device_; }
  /// The net as built: filtered, with inserted Quantizer and Split layers.
  const caffe::NetParameter& built_param() const { return param_; }

  /// Runs every layer; returns the weighted sum of the loss tops.
  float Forward();
  /// Runs layers [start, end] (inclusive); returns their weighted loss.
  float ForwardFromTo(int start, int end);
  /// Reshapes every layer for the current input shapes (and re-plans shared memory).
  void Reshape();
  /// Reshapes layers [first, end) (and re-plans shared memory).
  void ReshapeFrom(int first);

  // ---- Training (fp32), BVLC's semantics ----
  /// Sets each loss top's diff to its loss weight and runs Backward of every layer that needs
  /// it, from the last to the first. Parameter diffs accumulate (ClearParamDiffs clears them).
  /// Throws NetError naming a layer that needs a backward pass it does not have.
  void Backward();
  /// Backward of layers [start, end] in reverse order (loss top diffs are set when the loss
  /// layers are in the range).
  void BackwardFromTo(int start, int end);
  /// Forward then Backward; returns the loss.
  float ForwardBackward();
  /// Whether layer i runs in Backward, and which of its bottoms receive a gradient
  /// (propagate_down, force_backward, only layers under a loss, lr_mult 0 parameters).
  bool layer_need_backward(int i) const { return layer_need_backward_.at(i); }
  const std::vector<std::vector<bool>>& bottom_need_backward() const { return bottom_need_backward_; }
  /// The learnable parameter blobs, each once (a parameter shared by ParamSpec.name belongs to
  /// the first layer naming it; later layers hold the same Blob, data and diff), with their
  /// lr_mult and decay_mult.
  const std::vector<Blob*>& learnable_params() const { return learnable_params_; }
  const std::vector<float>& params_lr() const { return params_lr_; }
  const std::vector<float>& params_weight_decay() const { return params_weight_decay_; }
  /// "<layer>/<index>" of each learnable parameter (for messages and the solver state).
  const std::vector<std::string>& learnable_param_names() const { return learnable_param_names_; }
  /// Zeroes every learnable parameter's diff.
  void ClearParamDiffs();
  /// Tells every layer its parameters changed (after a solver update or a restore), so
  /// derived device data (packed weights, bias buffers) is rebuilt before the next Forward.
  void ParamsUpdated();
  /// Makes every layer's parameter blobs the same as `other`'s (same net definition, e.g. the
  /// test net sharing the train net's weights as BVLC's ShareTrainedLayersWith does).
  void ShareTrainedLayersWith(const Net& other);

  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const std::vector<std::string>& layer_names() const { return layer_names_; }
  int layer_index(const std::string& name) const;
  Layer& layer(const std::string& name) { return *layers_[layer_index(name)]; }
  bool has_layer(const std::string& name) const { return layer_index_.count(name) > 0; }
  /// True for the Quantizer and Split layers the net inserted itself.
  bool inserted(int layer) const { return inserted_.count(layer_names_[layer]) > 0; }
  const std::vector<std::vector<Blob*>>& bottom_vecs() const { return bottom_vecs_; }
  const std::vector<std::vector<Blob*>>& top_vecs() const { return top_vecs_; }
  const std::vector<std::string>& blob_names() const { return blob_names_; }
  bool has_blob(const std::string& name) const { return blobs_.count(name) > 0; }
  /// A blob by name; throws NetError listing nothing but the name.
  Blob& blob(const std::string& name) const;
  /// Tops of the Input layers, and the blobs whose last written value no layer consumes
  /// (a blob overwritten in place by the net's last layer is an output).
  const std::vector<Blob*>& input_blobs() const { return input_blobs_; }
  const std::vector<Blob*>& output_blobs() const { return output_blobs_; }

  /// Sets the mode of every quantizer watching fp32 data (quantized sides stay active).
  void SetQuantMode(quant::QuantizerMode mode);
  quant::QuantizerMode quant_mode() const { return quant_mode_; }
  /// Nets nested inside layer i (Layer::nested_nets); empty for most layers. The net includes
  /// them in quant_mode, learnable parameters, ranges, saved weights, memory and sharing.
  std::vector<Net*> nested_nets(int layer) const;
  /// True when any layer computes in a quantized type.
  bool has_quantized_layers() const;
  /// Names of quantizers on quantized data that have no range (observed, loaded or explicit).
  std::vector<std::string> QuantizersWithoutRange();

  /// Copies weights by layer name (layers absent from the net are ignored, as BVLC does) and
  /// the quantizer ranges in NetParameter.quantizer (matched by name). A blob count or shape
  /// mismatch throws NetError naming the layer, the blob index and both shapes. fp32 `data`,
  /// `double_data`, and `packed_data` of any computed type are accepted; values are converted
  /// to the layer's type (quantized with the blob quantizer's range).
  void CopyTrainedLayersFrom(const caffe::NetParameter& weights);
  /// Reads a .caffemodel (binary) and copies it.
  void CopyTrainedLayersFrom(const std::string& caffemodel);
  /// The net's own layers (not the inserted ones) with their weights: fp32 blobs as `data`
  /// floats, others as `packed_data` + `data_type`; every quantizer range (observed or
  /// explicit) in `quantizer`, once per name, in layer order.
  void ToProto(caffe::NetParameter* out);
  /// Only the quantizer ranges of ToProto (and, for layers with nested nets, a layer entry
  /// holding those nets' ranges): what calibration copies, without serializing the weights.
  void RangesToProto(caffe::NetParameter* out);
  /// Writes ToProto to a .caffemodel (deterministic bytes).
  void Save(const std::string& caffemodel);

  /// The index of the ReLU layer fused into layer i, or -1 (see NetOptions::fuse_relu). The
  /// ReLU runs inside layer i whenever no quantizer of the chain observes or snaps fp32 data.
  int fused_relu_of(int layer) const { return fusions_.at(layer).relu; }
  /// The last layer of the chain fused into layer i (layers i+1 … that index run inside it),
  /// or i when none is.
  int fusion_end(int layer) const {
    return fusions_.at(layer).last < 0 ? layer : fusions_.at(layer).last;
  }
  /// The layer that layer j runs inside of, or -1.
  int fused_into(int layer) const { return fused_into_.at(layer); }
  /// The optimizer level this net was built with (NetOptions::optimize; 0 at TRAIN).
  int optimize_level() const { return optimize_; }
  bool optimized() const { return optimize_ > 0; }

  /// Whether layer i ran as a view in the last pass (no work): a Split or TEST-phase Dropout
  /// whose tops are its bottom's data, or a Concat whose producers wrote straight into their
  /// slices of its top (see Net::UpdateViews).
  bool runs_as_view(int layer) const { return !view_on_.empty() && view_on_.at(layer); }
  /// The Concat layers that run as views whenever their quantizers allow (optimizer level 1 and
  /// above, contiguous slices; those at offsets the device cannot place a buffer at copied into
  /// their slices): per Concat, its
  /// index and the layer last writing each of its inputs before it. A quantized one needs each
  /// producer to write with the Concat's output scale and zero point (see net_memory.cc).
  std::vector<std::pair<int, std::vector<int>>> ConcatViewCandidates() const;

  /// Whether blob memory is shared by lifetime (TEST phase with reduced memory asked for).
  bool reduced_memory() const { return reduced_memory_; }
  /// The most device memory held at once since the net started building (its device's peak
  /// counter minus the bytes in use before construction).
  uint64_t peak_device_bytes() const;
  /// Restarts the peak count from the bytes in use now (e.g. after a calibration net that
  /// shared the device was destroyed); peak_device_bytes stays relative to this net's start.
  void ResetPeakMemory() { device_->ResetPeak(); }
  /// Device bytes held now by the net's blobs and parameters (each allocation once).
  uint64_t blob_device_bytes() const;

 private:
  // Building (net_build.cc, the NetParameter passes in net_passes.cc).
  void Build(const caffe::NetParameter& param);
  /// Creates, connects and sets up the layer `lp` (the next one); records in `consumed` whether
  /// each blob's last written value is read by a later layer.
  void AddLayer(caffe::LayerParameter lp, std::map<std::string, bool>* consumed);
  void SetUpBackward();
  /// Layer i's parameters (and its nested nets'): propagate_down, sharing by ParamSpec name
  /// (`owners`: name -> (layer, blob)), the learnable list. Returns whether any needs a gradient.
  bool SetUpParams(int layer, std::map<std::string, std::pair<int, int>>* owners);
  /// BVLC's second pass: only layers under a loss (or a nested net's outputs) run backward.
  void KeepBackwardUnderLoss();
  void FillSyntheticInputs();
  // Fusion (net_fusion.cc) and memory (net_memory.cc).
  void PlanFusion();
  /// Reshape of layer i before its Forward (Layer::ReshapesEachPass); when a top's shape
  /// changed, the layers after it are reshaped too.
  void ReshapeBeforePass(int i);
  /// Whether a bottom of layer i has another shape than when the layer was last reshaped (a
  /// caller reshaped an input blob, or a Python layer its top): BVLC's Net::Forward reshapes
  /// every layer before it runs; this finds the first layer that needs it at the cost of a
  /// shape comparison per bottom.
  bool BottomsReshaped(int i) const;
  /// ReshapeFrom(first) in the middle of a pass: the values layers from `first` read are kept.
  void ReshapeKeepingInputs(int first);
  /// Records layer i's bottom shapes as the ones it was reshaped for.
  void NoteReshaped(int i);
  /// Whether layer i runs with its fused ReLU in this pass.
  bool FusionActive(int layer);
  void PlanMemory();
  /// Inference views (net_memory.cc), at optimizer level 1 and above: the layers that may run as
  /// no work because their tops are other blobs' memory. Planned from the graph once at build.
  void PlanViews();
  /// Whether view `v` can be on in this pass (quantizers not observing, equal quantization
  /// parameters, contiguous concat slices).
  bool ViewUsable(size_t v);
  /// Whether Concat layer i's inputs are contiguous slices of its top (for its current shapes).
  bool ConcatSlicesPlaceable(int layer) const;
  /// Per input of Concat layer i, whether its slice starts at an offset the device can place a
  /// buffer at (Device::SubMemory): a view; the others are copied into their slices.
  std::vector<char> ConcatSlicePlaced(int layer) const;
  /// Turns each view on or off for this pass; when that changes (or `force`, after a reshape),
  /// re-plans the reduced memory and makes the tops share their bottoms' data and the Concat
  /// inputs views of their slices.
  void UpdateViews(bool force);
  /// Whether layer i runs as a view now (its view still in place).
  bool SkipAsView(int layer);
  // Weights (net_weights.cc).
  /// Quantizer ranges from `weights` (by name, per layer, and nested nets' whole entries).
  void CopyRanges(const caffe::NetParameter& weights);
  /// The parameter blobs of the layer `src` names, converted to its types; `scaled` names the
  /// quantizers whose per-channel weight scales the weights file holds (net-level entries).
  void CopyParams(const caffe::LayerParameter& src, const std::set<std::string>& scaled);
  void AppendRanges(caffe::NetParameter* out);

  Device* device_;
  NetOptions options_;
  caffe::NetState state_;
  caffe::NetParameter param_;
  std::set<std::string> inserted_;
  std::set<std::string> synthetic_layers_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::string> layer_names_;
  std::map<std::string, int> layer_index_;
  std::map<std::string, std::shared_ptr<Blob>> blobs_;
  std::vector<std::string> blob_names_;
  std::vector<std::vector<Blob*>> bottom_vecs_, top_vecs_;
  /// Per layer, its bottoms' shapes when it was last reshaped (BottomsReshaped).
  std::vector<std::vector<std::vector<int>>> reshaped_bottoms_;
  /// BlobShapeGeneration() at the start of the last whole Forward pass that reshaped no blob:
  /// while it stands, every layer's bottoms have the shapes it was reshaped for.
  static constexpr uint64_t kNoShapesChecked = ~uint64_t{0};
  uint64_t shapes_checked_ = kNoShapesChecked;
  std::vector<std::vector<float>> loss_weights_;
  std::vector<Blob*> input_blobs_, output_blobs_;
  quant::QuantizerMode quant_mode_ = quant::QuantizerMode::kPassive;
  bool reduced_memory_ = false;
  uint64_t base_bytes_ = 0;
  std::vector<std::shared_ptr<DeviceMemory>> slots_;
  /// A chain of layers run inside the layer before them (its head).
  struct Fusion {
    int last = -1;  // the chain's last layer, or -1
    int relu = -1;  // the ReLU among them, or -1
    std::shared_ptr<FusedEpilogue> epilogue;  // (layers/layer.h)
  };
  std::vector<Fusion> fusions_;  // per head layer
  std::vector<int> fused_into_;  // per layer: its chain's head, or -1
  int optimize_ = 0;
  /// A layer that runs as no work at inference when its view is on.
  struct View {
    int layer = -1;
    bool concat = false;  // a Concat (bottoms are slices of its top), else Split / Dropout
    std::vector<int> writer;  // Concat: per bottom, the layer last writing it before the Concat
    std::vector<int> identity_after;  // Concat: in-place TEST-phase Dropouts on its top after it
    std::vector<std::shared_ptr<DeviceMemory>> slices;  // Concat: its bottoms' memory while on
  };
  std::vector<View> views_;
  std::vector<char> view_on_;  // per layer
  bool views_applied_ = false;
  /// QuantizerStateGeneration() and BlobShapeGeneration() when view_on_ was decided.
  uint64_t views_quant_gen_ = 0, views_shape_gen_ = 0;
  std::vector<bool> layer_need_backward_;
  std::vector<std::vector<bool>> bottom_need_backward_;
  std::vector<Blob*> learnable_params_;
  std::vector<float> params_lr_, params_weight_decay_;
  std::vector<std::string> learnable_param_names_;
};

/// Gives a reduced-precision net the ranges it lacks: builds the fp32 variant of `param` with
/// the same options, copies `net`'s trained layers (as real values) and float inputs into it,
/// runs `iterations` forward passes with quant_mode OBSERVE, and copies the observed ranges
/// (and weights) back into `net`. `before_forward` (when given) is called before each pass with
/// the fp32 net and the pass index, to fill its inputs (Data layers fill themselves). Returns
/// the number of quantizers that received a range (0: none lacked one, nothing ran).
/// `after_passes` (when given) is called with the fp32 net after the passes, before its ranges
/// are copied (e.g. ReduceObservedRanges over the ranks of an MPI job).
int CalibrateWithFloatVariant(Net& net, const caffe::NetParameter& param,
                              const NetOptions& options, int iterations = 1,
                              const std::function<void(Net& fp32, int pass)>& before_forward = {},
                              const std::function<void(Net& fp32)>& after_passes = {});

}  // namespace mpcaffe
