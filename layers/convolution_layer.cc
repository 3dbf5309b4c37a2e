// layers/convolution_layer.cc — Convolution (every dtype; groups, stride, pad, dilation) on
// libdnn's implicit-GEMM convolution with fused bias and requantization, and Deconvolution (fp32)
// on the same convolution's backward-data and forward passes; both over any number of spatial
// axes but two in fp32 through libdnn's N-d convolution (BVLC's num_spatial_axes).
#include <array>
#include <cmath>
#include <cstdint>

#include "device/settings.h"
#include "layers/activation_kernels.h"
#include "layers/conv_geometry.h"
#include "layers/layer_registry.h"
#include "layers/train_kernels.h"
#include "libdnn/conv.h"
#include "libdnn/conv_nd.h"
#include "quant/accumulation.h"
#include "quant/fixed_point.h"

namespace mpcaffe {
namespace {

using conv_layers::ChannelAxis;
using conv_layers::ConvGeometry;
using conv_layers::Window;

libdnn::BufferRef Ref(DeviceMemory* m) { return libdnn::BufferRef(m, 0); }

/// top += bias[c] over its `channels` channels of `inner` elements each (the activation
/// family's fp32 "bias" kernel `k`).
void AddBias(Kernel k, Blob* top, const Blob& bias, int channels, int64_t inner) {
  const int n = top->count();
  k.Arg(int32_t{n})
      .Arg(int32_t{channels})
      .Arg(static_cast<int32_t>(inner))
      .ArgBuffer(top->device_data(), 0, 4)
      .ArgBuffer(bias.device_data(), 0, 4)
      .ArgBuffer(top->mutable_device_data(), 0, 4);
  k.Launch1D(n);
}

class ConvolutionLayer : public Layer, ConvGeometry {
 public:
  using Layer::Layer;
  const char* type() const override { return "Convolution"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  // Float types fold BatchNorm / Scale into the weights and bias, integer types into each
  // channel's weight scale (positive scales only); every type adds a residual in the epilogue
  // (integer types: requantized from the residual's scale to the output's).
  // The N-d convolution fuses nothing.
  EpilogueSupport FusionSupport() const override {
    return spatial_ == 2 ? EpilogueSupport{true, true, true} : EpilogueSupport{};
  }
  bool AcceptsEpilogue(const FusedEpilogue& e) override {
    if (spatial_ != 2) return false;
    if (e.affine.empty() || !IsQuantized(compute_type_)) return true;
    std::vector<float> scale, shift;
    e.Affine(out_, &scale, &shift);
    for (float a : scale)
      if (!(a > 0.0f) || !std::isfinite(a)) return false;
    return true;
  }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    const auto& p = param_.convolution_param();
    SetGeometry(p, *bottom[0], [this](const std::string& m) { Fail(m); });
    if (spatial_ != 2) {
      if (compute_type_ != DataType::kFloat32)
        Fail(std::to_string(spatial_) +
             " spatial axes: the N-d convolution computes in fp32 only, " + Name(compute_type_) +
             " is refused (2 spatial axes compute in every type)");
      std::vector<int> shape{out_, channels_ / groups_};
      shape.insert(shape.end(), nd_.kernel.begin(), nd_.kernel.end());
      AddParam(shape, p.weight_filler());
      if (p.bias_term()) AddParam({out_}, p.bias_filler());
      return;
    }
    quant::CheckAccumulationDepth("layer '" + name() + "' (Convolution)", compute_type_,
                                  int64_t{channels_ / groups_} * kh_ * kw_);
    // int8 weights get a symmetric scale per output channel: one scale for a layer rounds the
    // small channels of trained weights to a few steps, and halves to thirds of the logit error
    // are lost with it (docs/BENCHMARKS.md, "Accuracy per data type"). Depthwise layers, whose
    // channels differ most, keep theirs unless MPCAFFE_DEPTHWISE_PER_CHANNEL=0; the other
    // convolutions unless MPCAFFE_PER_CHANNEL_WEIGHTS=0.
    const bool depthwise = groups_ > 1 && groups_ == channels_ && out_ == groups_;
    const Settings& settings = GetSettings();
    AddParam({out_, channels_ / groups_, kh_, kw_}, p.weight_filler(), false,
             depthwise ? settings.depthwise_per_channel != "0"
                       : settings.per_channel_weights != "0");
    if (p.bias_term()) AddParam({out_}, p.bias_filler());
  }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    if (spatial_ != 2) {
      const int batch = Batch(b, [this](const std::string& m) { Fail(m); });
      const libdnn::ConvNdDesc d = CheckedNd(
          NdDesc(batch, channels_, out_, {b.shape().begin() + axis_ + 1, b.shape().end()}));
      if (nd_conv_ && nd_conv_->desc().ToString() != d.ToString()) nd_conv_.reset();
      nd_desc_ = d;
      std::vector<int> extents;
      for (int a = 0; a < d.axes(); ++a) extents.push_back(d.out(a));
      top[0]->Reshape(TopShape(b, out_, extents));
      return;
    }
    desc_ = libdnn::ConvDesc{};
    desc_.type = compute_type_;
    desc_.batch = Batch(b, [this](const std::string& m) { Fail(m); });
    desc_.channels = channels_;
    desc_.height = b.shape(axis_ + 1);
    desc_.width = b.shape(axis_ + 2);
    desc_.out_channels = out_;
    SetWindowOf(&desc_);
    desc_.bias = param_.convolution_param().bias_term();
    // Padded extents and dilated kernels in 64 bits: ConvDesc computes them in int.
    for (auto [size, pad, kernel, dilation] : {std::array<int64_t, 4>{desc_.height, ph_, kh_, dh_},
                                               std::array<int64_t, 4>{desc_.width, pw_, kw_, dw_}})
      if (size + 2 * pad > INT32_MAX || dilation * (kernel - 1) + 1 > INT32_MAX)
        Fail("bottom " + b.shape_string() + ": padded input or dilated kernel beyond 2^31");
    if (desc_.out_h() <= 0 || desc_.out_w() <= 0)
      Fail("the kernel does not fit the padded input " + b.shape_string());
    top[0]->Reshape(TopShape(b, out_, desc_.out_h(), desc_.out_w()));
  }
  void ParamsChanged() override { prepared_key_.clear(); }
  bool DropsParamDeviceCopy(int i) const override {
    return i == 0 && (release_param_copies() || Int4Weights(0));  // as Prepare releases it
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (spatial_ != 2) return ForwardNd(*bottom[0], top[0]);
    if (desc_.batch == 0) return;
    Prepare();
    if (simulate_acc16() && Int4Weights(0)) SimulateAcc16(*bottom[0]);
    const Blob* residual = fused() ? fused()->residual : nullptr;
    conv_->Forward(libdnn::BufferRef(bottom[0]->device_data(), 0),
                   bias_ ? libdnn::BufferRef(bias_.get(), 0) : libdnn::BufferRef(),
                   libdnn::BufferRef(top[0]->mutable_device_data(), 0), nullptr,
                   residual ? libdnn::BufferRef(residual->device_data(), 0) : libdnn::BufferRef());
    if (release_param_copies()) conv_->ReleaseScratch();  // reduced memory: no idle scratch
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // libdnn's fp32 backward: bottom diff overwritten, weight and bias diffs accumulated.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (spatial_ != 2) return BackwardNd(*top[0], down[0], bottom[0]);
    if (desc_.batch == 0) return;
    Prepare();
    const libdnn::BufferRef dy(top[0]->device_diff(), 0);
    const bool dw = param_propagate_down(0);
    const bool db = desc_.bias && param_propagate_down(1);
    if (db && !dw) Fail("a bias gradient without the weight gradient is not supported");
    using libdnn::BufferRef;
    conv_->BackwardDataAndWeights(
        dy, BufferRef(bottom[0]->device_data(), 0), BufferRef(blobs_[0]->device_data(), 0),
        dw ? BufferRef(blobs_[0]->mutable_device_diff(), 0) : BufferRef(),
        db ? BufferRef(blobs_[1]->mutable_device_diff(), 0) : BufferRef(),
        down[0] ? BufferRef(bottom[0]->mutable_device_diff(), 0) : BufferRef());
  }

 private:
  void Prepare() {
    if (!prepared_key_.empty() && PreparedFor(prepared_stamp_)) return;
    const PrepareStamp stamp = CurrentPrepareStamp();
    desc_.relu = relu_fused();
    desc_.residual = fused() && fused()->residual;
    // Folded BatchNorm / Scale: y = scale[o]·conv(x) + shift[o].
    std::vector<float> scale, shift;
    if (fused()) fused()->Affine(out_, &scale, &shift);
    const bool folded = !scale.empty();
    desc_.bias = param_.convolution_param().bias_term() || folded;
    const bool w4 = Int4Weights(0);  // packed signed 4-bit weights, zero point 0
    desc_.weight_bits = w4 ? 4 : 8;
    desc_.weights_signed = w4;
    // What the kernels are built from, as raw bytes (AppendKey): the shape, the quantization of
    // the input, weights, output and residual, the folded factors. Everything below derives
    // from these, so an unchanged key skips it.
    std::string key = desc_.ToString();
    quant::QuantParams x, w, c, r;
    if (IsQuantized(compute_type_)) {
      x = BottomParams(0), w = BlobParams(0), c = OutputParams();
      AppendKey(&key, x);
      AppendKey(&key, w);
      AppendKey(&key, c);
      if (desc_.residual) {
        r = fused()->eltwise->BottomParams(fused()->residual_bottom);
        AppendKey(&key, r);
      }
    }
    AppendKey(&key, scale);
    AppendKey(&key, shift);
    if (key == prepared_key_) {
      prepared_stamp_ = stamp;
      return;
    }
    libdnn::ConvQuant q;
    double s_x = 1.0;
    std::vector<float> s_w{1.0f};
    if (IsQuantized(compute_type_)) {
      if (folded) {  // the integer weights stay; each channel's scale takes the factor
        quant::QuantParams pc = w;
        pc.axis = 0;
        pc.scale.resize(out_);
        pc.zero_point.resize(out_);
        for (int o = 0; o < out_; ++o) {
          pc.scale[o] = w.scale_of(o) * scale[o];
          pc.zero_point[o] = w.zero_point_of(o);
        }
        w = pc;
      }
      q = libdnn::ConvQuant::From(x, w, c);
      if (w4) q.w_zero.assign(q.w_zero.size(), 0);
      if (desc_.residual) {
        q.res_zero = r.zero_point_of(0);
        q.res_multiplier = quant::QuantizeMultiplier(double(r.scale_of(0)) / c.scale_of(0));
      }
      s_x = x.scale[0];
      s_w = w.scale;
    }
    conv_ = std::make_unique<libdnn::Convolution>(device(), desc_, q);
    conv_->set_scratch_arena(scratch_arena());
    if (folded && !IsQuantized(compute_type_)) {
      // Float weights: W·scale[o] in fp32, stored in the compute type on a device copy (the
      // parameter blob keeps the user's weights).
      std::vector<float> w = ParamAsFloat(0);
      const size_t per = w.size() / out_;
      for (int o = 0; o < out_; ++o)
        for (size_t k = 0; k < per; ++k) w[o * per + k] *= scale[o];
      Blob folded_w(device(), compute_type_, blobs_[0]->shape(), name() + "/folded");
      folded_w.FromFloat(w);
      conv_->SetWeights(libdnn::BufferRef(folded_w.device_data(), 0));
      device().Finish();  // the packing launch reads folded_w before it goes
    } else if (w4) {
      // Only the packed weights go to the device (half of int8; the blob's uint8 copy stays
      // on the host).
      const std::shared_ptr<DeviceMemory> packed = UploadInt4Weights(0);
      conv_->SetWeights(libdnn::BufferRef(packed.get(), 0));
      device().Finish();  // the repacking launch reads `packed` before it goes
    } else {
      conv_->SetWeights(libdnn::BufferRef(blobs_[0]->device_data(), 0));
    }
    bias_.reset();
    if (desc_.bias) {
      std::vector<float> b = param_.convolution_param().bias_term() ? ParamAsFloat(1)
                                                                     : std::vector<float>(out_, 0.0f);
      if (folded)
        for (int o = 0; o < out_; ++o) b[o] = b[o] * scale[o] + shift[o];
      const std::vector<uint8_t> bytes = AccumulatorBias(b, compute_type_, s_x, s_w);
      bias_ = device().Allocate(bytes.size());
      device().CopyToDevice(bytes.data(), bias_.get(), 0, bytes.size());
    }
    // The forward pass reads only the repacked copy; the blob's device copy comes back when
    // the weights change (or a backward pass needs it).
    if (release_param_copies() || w4) blobs_[0]->ReleaseDeviceData();
    prepared_key_ = key;
    prepared_stamp_ = stamp;
  }

  /// The 16-bit accumulator of the Arm paper over this pass's activations (host simulation).
  void SimulateAcc16(const Blob& bottom) {
    quant::Acc16ConvShape s;
    s.batch = desc_.batch, s.channels = channels_, s.height = desc_.height, s.width = desc_.width;
    s.out_channels = out_, s.groups = groups_;
    s.kernel_h = kh_, s.kernel_w = kw_, s.stride_h = sh_, s.stride_w = sw_, s.pad_h = ph_;
    s.pad_w = pw_, s.dilation_h = dh_, s.dilation_w = dw_;
    const auto* stored = static_cast<const uint8_t*>(blobs_[0]->host_data());
    std::vector<int8_t> w(blobs_[0]->count());
    for (size_t j = 0; j < w.size(); ++j) w[j] = static_cast<int8_t>(stored[j] - quant::kInt4StorageZero);
    const int32_t x_zero = BottomParams(0).zero_point_of(0);
    acc16_overflow() += quant::Acc16Convolution(static_cast<const uint8_t*>(bottom.host_data()),
                                                static_cast<uint8_t>(x_zero), w.data(), s);
  }

  // N-d: y = W ∗ x, then the bias per channel.
  void ForwardNd(const Blob& bottom, Blob* top) {
    if (nd_desc_.batch == 0) return;
    if (!nd_conv_) nd_conv_ = std::make_unique<libdnn::ConvolutionNd>(device(), nd_desc_);
    nd_conv_->Forward(Ref(bottom.device_data()), Ref(blobs_[0]->device_data()),
                      Ref(top->mutable_device_data()));
    if (param_.convolution_param().bias_term())
      AddBias(GetKernel(ActivationSource(target(), DataType::kFloat32),
                        ActivationKernelName("bias", DataType::kFloat32)),
              top, *blobs_[1], out_, nd_desc_.out_size());
  }
  // N-d, BVLC's order: bias diff, weight diff (accumulated), bottom diff (overwritten).
  void BackwardNd(const Blob& top, bool down, Blob* bottom) {
    if (nd_desc_.batch == 0) return;
    if (!nd_conv_) nd_conv_ = std::make_unique<libdnn::ConvolutionNd>(device(), nd_desc_);
    if (param_.convolution_param().bias_term() && param_propagate_down(1))
      LaunchChannelSum(device(), GetKernel(ChannelSumSource(target()), "channel_sum"),
                       nd_desc_.batch, out_, static_cast<int>(nd_desc_.out_size()),
                       top.device_diff(), nullptr, blobs_[1]->mutable_device_diff(), 1.0f, 1.0f);
    if (param_propagate_down(0))
      nd_conv_->BackwardWeights(Ref(top.device_diff()), Ref(bottom->device_data()),
                                Ref(blobs_[0]->mutable_device_diff()));
    if (down)
      nd_conv_->BackwardData(Ref(top.device_diff()), Ref(blobs_[0]->device_data()),
                             Ref(bottom->mutable_device_diff()));
  }
  libdnn::ConvNdDesc CheckedNd(const libdnn::ConvNdDesc& d) {
    try {
      d.Check();
    } catch (const Error& e) {
      Fail(e.what());
    }
    return d;
  }

  libdnn::ConvNdDesc nd_desc_;
  std::unique_ptr<libdnn::ConvolutionNd> nd_conv_;
  libdnn::ConvDesc desc_;
  std::string prepared_key_;
  PrepareStamp prepared_stamp_;  // of the last Prepare that built or checked the key
  std::unique_ptr<libdnn::Convolution> conv_;
  std::shared_ptr<DeviceMemory> bias_;
};

/// Deconvolution (BVLC's transposed convolution), fp32: the convolution that maps the
/// deconvolution's top back to its bottom (the "dual": channels = num_output, out_channels = the
/// bottom's channels, the same kernel, stride, pad, dilation and groups) runs backwards —
/// forward = the dual's BackwardData (+ bias per output channel), bottom diff = the dual's
/// Forward of the top diff, weight diff = the dual's BackwardWeights with the roles of data and
/// diff swapped. Caffe's weight layout [channels][num_output/group][kh][kw] is the dual's OIHW.
/// Output size: stride·(in − 1) + dilation·(kernel − 1) + 1 − 2·pad.
class DeconvolutionLayer : public Layer, ConvGeometry {
 public:
  using Layer::Layer;
  const char* type() const override { return "Deconvolution"; }
  // The other types run in fp32 between the conversions the net inserts (libdnn's
  // backward-data pass, which is this layer's forward, is fp32 only).
  bool SupportsType(DataType t) const override { return t == DataType::kFloat32; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    const auto& p = param_.convolution_param();
    SetGeometry(p, *bottom[0], [this](const std::string& m) { Fail(m); });
    std::vector<int> shape{channels_, out_ / groups_, kh_, kw_};
    if (spatial_ != 2) {
      shape.resize(2);
      shape.insert(shape.end(), nd_.kernel.begin(), nd_.kernel.end());
    }
    AddParam(shape, p.weight_filler());
    if (p.bias_term()) AddParam({out_}, p.bias_filler());
  }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    const int batch = Batch(b, [this](const std::string& m) { Fail(m); });
    if (spatial_ != 2) return ReshapeNd(b, batch, top[0]);
    const int h = b.shape(axis_ + 1), w = b.shape(axis_ + 2);
    const int64_t oh = int64_t{sh_} * (h - 1) + int64_t{dh_} * (kh_ - 1) + 1 - 2 * int64_t{ph_};
    const int64_t ow = int64_t{sw_} * (w - 1) + int64_t{dw_} * (kw_ - 1) + 1 - 2 * int64_t{pw_};
    if (oh <= 0 || ow <= 0 || oh + 2 * ph_ > INT32_MAX || ow + 2 * pw_ > INT32_MAX)
      Fail("bottom " + b.shape_string() + " gives an output of " + std::to_string(oh) + "x" +
           std::to_string(ow) + " (stride·(in − 1) + dilated kernel − 2·pad): not positive or beyond 2^31");
    libdnn::ConvDesc d;
    d.type = DataType::kFloat32;
    d.batch = batch;
    d.channels = out_;
    d.height = static_cast<int>(oh);
    d.width = static_cast<int>(ow);
    d.out_channels = channels_;
    SetWindowOf(&d);
    if (d.out_h() != h || d.out_w() != w)  // the dual maps the top back
      Fail("internal: the dual convolution of " + b.shape_string() + " does not invert it");
    if (!dual_ || d.ToString() != desc_.ToString()) dual_.reset();
    desc_ = d;
    top[0]->Reshape(TopShape(b, out_, d.height, d.width));
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (spatial_ != 2) return ForwardNd(*bottom[0], top[0]);
    if (desc_.batch == 0) return;
    libdnn::Convolution& conv = Dual();
    conv.BackwardData(libdnn::BufferRef(bottom[0]->device_data(), 0),
                      libdnn::BufferRef(blobs_[0]->device_data(), 0),
                      libdnn::BufferRef(top[0]->mutable_device_data(), 0));
    if (param_.convolution_param().bias_term()) {
      const int n = top[0]->count();
      Kernel k = GetKernel(ActivationSource(target(), DataType::kFloat32),
                           ActivationKernelName("bias", DataType::kFloat32));
      k.Arg(int32_t{n}).Arg(int32_t{out_}).Arg(int32_t{desc_.height * desc_.width})
          .ArgBuffer(top[0]->device_data(), 0, 4).ArgBuffer(blobs_[1]->device_data(), 0, 4)
          .ArgBuffer(top[0]->mutable_device_data(), 0, 4);
      k.Launch1D(n);
    }
  }

  // BVLC's order: bias diff (Σ top diff per output channel), weight diff (accumulated), bottom
  // diff (overwritten) = the convolution of the top diff with the same weights.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (spatial_ != 2) return BackwardNd(*top[0], down[0], bottom[0]);
    if (desc_.batch == 0) return;
    libdnn::Convolution& conv = Dual();
    const libdnn::BufferRef dy(top[0]->device_diff(), 0);
    if (param_.convolution_param().bias_term() && param_propagate_down(1))
      LaunchChannelSum(device(), GetKernel(ChannelSumSource(target()), "channel_sum"), desc_.batch,
                       out_, desc_.height * desc_.width, top[0]->device_diff(), nullptr,
                       blobs_[1]->mutable_device_diff(), 1.0f, 1.0f);
    if (param_propagate_down(0))
      conv.BackwardWeights(libdnn::BufferRef(bottom[0]->device_data(), 0), dy,
                           libdnn::BufferRef(blobs_[0]->mutable_device_diff(), 0),
                           libdnn::BufferRef());
    if (down[0]) {
      conv.SetWeights(libdnn::BufferRef(blobs_[0]->device_data(), 0));
      conv.Forward(dy, libdnn::BufferRef(), libdnn::BufferRef(bottom[0]->mutable_device_diff(), 0));
    }
  }

 private:
  libdnn::Convolution& Dual() {
    if (!dual_) dual_ = std::make_unique<libdnn::Convolution>(device(), desc_);
    return *dual_;
  }

  // N-d: the dual maps the top's extents stride·(in − 1) + dilated kernel − 2·pad back.
  void ReshapeNd(const Blob& b, int batch, Blob* top) {
    std::vector<int> extents;
    for (int a = 0; a < spatial_; ++a) {
      const int64_t in = b.shape(axis_ + 1 + a);
      const int64_t o = int64_t{nd_.stride[a]} * (in - 1) +
                        int64_t{nd_.dilation[a]} * (nd_.kernel[a] - 1) + 1 -
                        2 * int64_t{nd_.pad[a]};
      if (o <= 0 || o + 2 * nd_.pad[a] > INT32_MAX)
        Fail("bottom " + b.shape_string() + " gives an output extent of " + std::to_string(o) +
             " on spatial axis " + std::to_string(a) +
             " (stride·(in − 1) + dilated kernel − 2·pad): not positive or beyond 2^31");
      extents.push_back(static_cast<int>(o));
    }
    libdnn::ConvNdDesc d = NdDesc(batch, out_, channels_, extents);
    try {
      d.Check();
    } catch (const Error& e) {
      Fail(e.what());
    }
    if (nd_dual_ && nd_dual_->desc().ToString() != d.ToString()) nd_dual_.reset();
    nd_desc_ = d;
    top->Reshape(TopShape(b, out_, extents));
  }
  libdnn::ConvolutionNd& DualNd() {
    if (!nd_dual_) nd_dual_ = std::make_unique<libdnn::ConvolutionNd>(device(), nd_desc_);
    return *nd_dual_;
  }
  void ForwardNd(const Blob& bottom, Blob* top) {
    if (nd_desc_.batch == 0) return;
    DualNd().BackwardData(Ref(bottom.device_data()), Ref(blobs_[0]->device_data()),
                          Ref(top->mutable_device_data()));
    if (param_.convolution_param().bias_term())
      AddBias(GetKernel(ActivationSource(target(), DataType::kFloat32),
                        ActivationKernelName("bias", DataType::kFloat32)),
              top, *blobs_[1], out_, nd_desc_.in_size());
  }
  void BackwardNd(const Blob& top, bool down, Blob* bottom) {
    if (nd_desc_.batch == 0) return;
    if (param_.convolution_param().bias_term() && param_propagate_down(1))
      LaunchChannelSum(device(), GetKernel(ChannelSumSource(target()), "channel_sum"),
                       nd_desc_.batch, out_, static_cast<int>(nd_desc_.in_size()),
                       top.device_diff(), nullptr, blobs_[1]->mutable_device_diff(), 1.0f, 1.0f);
    if (param_propagate_down(0))
      DualNd().BackwardWeights(Ref(bottom->device_data()), Ref(top.device_diff()),
                               Ref(blobs_[0]->mutable_device_diff()));
    if (down)
      DualNd().Forward(Ref(top.device_diff()), Ref(blobs_[0]->device_data()),
                       Ref(bottom->mutable_device_diff()));
  }

  libdnn::ConvDesc desc_;  // the dual convolution: top → bottom
  std::unique_ptr<libdnn::Convolution> dual_;
  libdnn::ConvNdDesc nd_desc_;  // N-d: the dual convolution
  std::unique_ptr<libdnn::ConvolutionNd> nd_dual_;
};

/// Im2col (BVLC): the columns a convolution of the same window multiplies, as a blob
/// [N][C·kh·kw][out_h][out_w] (row (c·kh + ky)·kw + kx holds channel c at window offset (ky, kx),
/// 0 outside the padded input); libdnn's im2col kernel, per image. Every type natively: quantized
/// columns are the bottom's codes with its zero point (real 0) as the padding, requantized in
/// the same pass when the top's scale or zero point differs; backward (fp32) is libdnn's col2im.
class Im2colLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Im2col"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    auto fail = [this](const std::string& m) { Fail(m); };
    win_ = Window::Of(param_.convolution_param(), *bottom[0], fail);
    if (ChannelAxis(param_.convolution_param(), *bottom[0], fail) != 1)
      Fail("convolution_param.axis: Im2col takes the channel axis 1 only");
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    if (b.num_axes() != 4) Fail("needs a 4-d (NCHW) bottom, got " + b.shape_string());
    const int64_t oh = win_.OutH(b.shape(2)), ow = win_.OutW(b.shape(3));
    const int64_t rows = int64_t{b.shape(1)} * win_.kh * win_.kw;
    if (oh <= 0 || ow <= 0) Fail("the kernel does not fit the padded input " + b.shape_string());
    if (rows * oh * ow > INT32_MAX || b.count(1) > INT32_MAX)
      Fail("bottom " + b.shape_string() + ": an image's columns beyond 2^31 elements");
    top[0]->Reshape({b.shape(0), static_cast<int>(rows), static_cast<int>(oh), static_cast<int>(ow)});
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    const DataType t = compute_type_;
    const Affine xq = BottomAffine(0), yq = TopAffine(0);  // float types: {1, 0}
    // Equal quantizations (a calibrated net's, where the windows reach the bottom's extremes)
    // copy the codes; the top's own range otherwise takes them requantized.
    const bool requant = xq.scale != yq.scale || xq.zero_point != yq.zero_point;
    using libdnn::Convolution;
    Kernel k = requant ? GetKernel(Convolution::Im2colRequantSource(target(), t),
                                   Convolution::Im2colRequantKernelName(t))
                       : GetKernel(Convolution::Im2colSource(target(), t),
                                   Convolution::Im2colKernelName(t));
    quant::FixedPointMultiplier m;
    if (requant) m = quant::RescaleMultiplier(xq.scale, yq.scale);
    const int oh = top[0]->shape(2), ow = top[0]->shape(3);
    const int rows = b.shape(1) * win_.kh * win_.kw;  // one image's column rows
    const size_t in = b.count(1), out = top[0]->count(1), e = SizeOf(t);
    for (int n = 0; n < b.shape(0); ++n) {
      k.ArgBuffer(b.device_data(), n * in * e, e).ArgBuffer(top[0]->mutable_device_data(), n * out * e, e);
      for (int v : {b.shape(2), b.shape(3), win_.kh, win_.kw, win_.sh, win_.sw, win_.ph, win_.pw,
                    win_.dh, win_.dw, oh, ow, 1, 0, rows, int(xq.zero_point)})
        k.Arg(int32_t{v});
      if (requant) k.Arg(yq.zero_point).Arg(m.multiplier).Arg(m.shift);
      k.Launch1D(size_t(rows));
    }
  }
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0]) return;
    const Blob& b = *bottom[0];
    Kernel k = GetKernel(libdnn::Convolution::BackwardSource(target()), "conv_bwd_col2im");
    const size_t in = b.count(1), out = top[0]->count(1);
    for (int n = 0; n < b.shape(0); ++n) {
      k.ArgBuffer(top[0]->device_diff(), n * out * 4, 4)
          .ArgBuffer(bottom[0]->mutable_device_diff(), n * in * 4, 4);
      // One image a launch (NC = 1): the layer's columns are image-major.
      for (int v : {b.shape(1), b.shape(2), b.shape(3), win_.kh, win_.kw, win_.sh, win_.sw,
                    win_.ph, win_.pw, win_.dh, win_.dw, top[0]->shape(2), top[0]->shape(3), 1,
                    int(in)})
        k.Arg(int32_t{v});
      k.Launch1D(size_t(b.shape(1)) * b.shape(2));
    }
  }

 private:
  Window win_;
};

}  // namespace

void RegisterConvolutionLayer() {
  RegisterLayerType<ConvolutionLayer>("Convolution");
  RegisterLayerType<DeconvolutionLayer>("Deconvolution");
  RegisterLayerType<Im2colLayer>("Im2col");
}

}  // namespace mpcaffe
