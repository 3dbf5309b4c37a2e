// layers/normalization_layers.cc — BatchNorm (batch statistics with BVLC's moving averages in
// TRAIN, global statistics otherwise) and Scale (per-channel scale and bias, from a parameter or
// a second bottom): float types forward via the channel-affine kernel, quantized types (global
// statistics, a parameter's factors) via its quantized form with the factors in float, fp32
// backward, all on the device.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"
#include "layers/train_kernels.h"

namespace mpcaffe {
namespace {

/// The _v8 form (`vectors`: HasVectorChannelAffine) as ChannelPlanesVectorItems says. Else
/// groups of 64 along each plane, at most 16 of them, and as many planes as keep the grid
/// under Launch1D's cap (the kernel strides over the rest); planes of fewer than 64 values
/// (a BatchNorm after an InnerProduct: one value each) in groups of 64 planes.
void LaunchChannelPlanes(Kernel& k, int n, int inner, bool vectors) {
  if (vectors) {
    k.Launch1D(ChannelPlanesVectorItems(n));
    return;
  }
  const size_t cap = 65535 - 63;
  const size_t planes = size_t(std::max(1, n / std::max(1, inner)));
  if (inner >= 64) {
    const size_t across = std::min<size_t>((size_t(inner) + 63) / 64, 16) * 64;
    k.Launch({across, std::min(planes, cap / across), 1}, {64, 1, 1});
  } else {
    k.Launch({1, std::min(planes, cap), 1}, {1, 64, 1});
  }
}

/// y = x·scale[c] + bias[c] over an (outer, channels, inner) layout, then ReLU'd with `relu`.
void LaunchChannelAffine(Device& device, Kernel k, DataType t, int n, int channels, int inner,
                         DeviceMemory* x, DeviceMemory* y, DataType pt, DeviceMemory* scale,
                         DeviceMemory* bias, bool relu = false) {
  if (n <= 0 || inner <= 0) return;  // nothing to scale (and no plane to divide by)
  const size_t ps = SizeOf(pt);
  k.Arg(int32_t{n}).Arg(int32_t{channels}).Arg(int32_t{inner})
      .ArgBuffer(x, 0, SizeOf(t)).ArgBuffer(y, 0, SizeOf(t))
      .ArgBuffer(scale, 0, ps).ArgBuffer(bias ? bias : scale, 0, ps).Arg(int32_t{bias ? 1 : 0})
      .Arg(int32_t{relu ? 1 : 0});
  LaunchChannelPlanes(k, n, inner, HasVectorChannelAffine(KernelTarget::Of(device), t, pt));
}

/// The quantized channel_affine of a layer whose data are quantized (BatchNorm with global
/// statistics, a Scale of one bottom): its float factors composed with x's and y's quantization
/// on the host and uploaded again only when what they were made from changed.
class QuantizedChannelPass {
 public:
  /// y = a·x + b per channel (a ReLU after it with `relu`). `key` names what `factors`
  /// (a, b) derive from; a new key composes and uploads them again.
  void Run(Layer& layer, Kernel k, DataType t, int channels, int inner, Blob& x, Blob& y,
           Affine xq, Affine yq, bool relu, const std::string& key,
           const std::function<void(std::vector<float>*, std::vector<float>*)>& factors) {
    std::string full = key;
    for (float v : {xq.scale, yq.scale, float(xq.zero_point), float(yq.zero_point), relu ? 1.0f : 0.0f})
      full.append(reinterpret_cast<const char*>(&v), sizeof v);
    Device& device = layer.device();
    if (full != key_ || !scale_) {
      std::vector<float> a, b;
      factors(&a, &b);
      if (static_cast<int>(a.size()) != channels || static_cast<int>(b.size()) != channels)
        throw LayerError(layer.Describe() + ": per-channel factors for " + std::to_string(a.size()) +
                         " channels, the data have " + std::to_string(channels));
      f_ = QuantizedChannelAffineFactors(t, a, b, xq.scale, yq.scale, yq.zero_point, relu);
      if (!scale_ || scale_.size() < size_t(channels)) {
        scale_ = device.Alloc<float>(channels);
        bias_ = device.Alloc<float>(channels);
      }
      device.Write(scale_, f_.scale.data(), f_.scale.size());
      device.Write(bias_, f_.bias.data(), f_.bias.size());
      key_ = std::move(full);
    }
    const int n = x.count();
    if (n <= 0 || inner <= 0) return;
    const size_t es = SizeOf(t);
    k.Arg(int32_t{n}).Arg(int32_t{channels}).Arg(int32_t{inner})
        .ArgBuffer(x.device_data(), 0, es).ArgBuffer(y.mutable_device_data(), 0, es)
        .Arg(scale_).Arg(bias_).Arg(int32_t{xq.zero_point}).Arg(f_.lo).Arg(f_.hi);
    LaunchChannelPlanes(k, n, inner,
                        HasVectorChannelAffine(KernelTarget::Of(device), t, DataType::kFloat32));
  }

 private:
  std::string key_;
  QuantizedChannelFactors f_;
  vptr<float> scale_, bias_;
};

/// The parameter versions of `layers` as bytes (a key of what their factors are).
std::string ParamVersionsKey(const std::vector<Layer*>& layers) {
  std::string key;
  for (Layer* l : layers)
    for (int i = 0; i < l->num_params(); ++i) {
      const uint64_t v = l->param_blob(i).data_version();
      key.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
  return key;
}

class BatchNormLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "BatchNorm"; }
  // Quantized with global statistics (inference): the folded factors in float between the
  // layer's quantized input and output. Batch statistics (TRAIN without use_global_stats) stay
  // fp32; a net that asks for them in a quantized type fails at setup.
  bool SupportsType(DataType t) const override {
    const auto& p = param_.batch_norm_param();
    return !IsQuantized(t) || !p.has_use_global_stats() || p.use_global_stats();
  }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  bool ParamLearnable(int) const override { return false; }  // statistics, never gradients

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    channels_ = bottom[0]->num_axes() == 1 ? 1 : bottom[0]->shape(1);
    caffe::FillerParameter zero;
    zero.set_type("constant");
    zero.set_value(0.0f);
    // Quantized: the statistics in fp32 (8 bits would not hold a variance); float types keep
    // them in the compute type, as the fold kernel reads them.
    const bool q = IsQuantized(compute_type_);
    for (const std::vector<int>& shape : {std::vector<int>{channels_}, {channels_}, {1}})
      q ? AddFloatParam(shape, zero) : AddParam(shape, zero);
    const auto& p = param_.batch_norm_param();
    use_global_ = p.has_use_global_stats() ? p.use_global_stats() : phase() == caffe::TEST;
    if (p.eps() <= 0) Fail("eps must be positive, got " + std::to_string(p.eps()));
    if (IsQuantized(compute_type_) && !use_global_)
      Fail(std::string("batch statistics (TRAIN without use_global_stats: true) are computed "
                       "in fp32, not ") + Name(compute_type_));
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int c = bottom[0]->num_axes() == 1 ? 1 : bottom[0]->shape(1);
    if (c != channels_) Fail("bottom has " + std::to_string(c) + " channels, the statistics " + std::to_string(channels_));
    top[0]->ReshapeLike(*bottom[0]);
    if (!scale_) {
      scale_ = device().Alloc<float>(channels_);
      bias_ = device().Alloc<float>(channels_);
      mean_ = device().Alloc<float>(channels_);
      var_ = device().Alloc<float>(channels_);
      inv_std_ = device().Alloc<float>(channels_);
      s1_ = device().Alloc<float>(channels_);
      s2_ = device().Alloc<float>(channels_);
    }
  }
  void ParamsChanged() override { folded_ = false; }
  bool HasBackward() const override { return true; }
  // Inference with global statistics: the per-channel affine layers after it (a Scale) folded
  // into its factors and a ReLU in its kernel, where no Convolution or InnerProduct precedes it
  // to fold it (pre-activation blocks: DenseNet's BatchNorm, Scale, ReLU after each Concat ran
  // as three passes over the data; docs/BENCHMARKS.md, "Default configurations").
  EpilogueSupport FusionSupport() const override {
    if (!use_global_) return {};
    return {true, true, false};
  }
  bool AcceptsEpilogue(const FusedEpilogue& e) override { return use_global_ && !e.residual; }
  // With global statistics: scale = 1/√(var/sf + eps), shift = −mean/sf·scale, as the device
  // fold above computes them.
  bool ChannelAffine(int channels, std::vector<float>* scale, std::vector<float>* shift) override {
    if (!use_global_ || channels != channels_) return false;
    const std::vector<float> mean = ParamAsFloat(0), var = ParamAsFloat(1), sf = ParamAsFloat(2);
    const float f = sf[0] == 0.0f ? 0.0f : 1.0f / sf[0];
    const float eps = param_.batch_norm_param().eps();
    scale->resize(channels);
    shift->resize(channels);
    for (int c = 0; c < channels; ++c) {
      const float a = 1.0f / std::sqrt(var[c] * f + eps);
      (*scale)[c] = a;
      (*shift)[c] = -mean[c] * f * a;
    }
    return true;
  }

 protected:
  int Inner(const Blob& b) const { return b.num_axes() > 2 ? b.count(2) : 1; }

  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int n = bottom[0]->count();
    const DataType t = compute_type_;
    const int inner = Inner(*bottom[0]);
    if (IsQuantized(t)) {
      quantized_.Run(*this, GetKernel(ChannelAffineSource(target(), t, DataType::kFloat32),
                                      ChannelAffineLaunchName(target(), t, DataType::kFloat32)),
                     t, channels_, inner, *bottom[0], *top[0], BottomAffine(0),
                     AffineOf(OutputParams()), relu_fused(), FactorsKey(),
                     [this](std::vector<float>* a, std::vector<float>* b) { Factors(a, b); });
      return;
    }
    if (use_global_ && fused()) {
      if (n == 0) return;
      // Its own factors (from the statistics on the host) composed with the epilogue's, uploaded
      // again when a parameter of either changed.
      std::string key = FactorsKey();
      if (key != fused_key_ || fused_epilogue_ != fused()) {
        std::vector<float> a, b;
        Factors(&a, &b);
        device().Write(scale_, a.data(), a.size());
        device().Write(bias_, b.data(), b.size());
        fused_key_ = std::move(key);
        fused_epilogue_ = fused();
      }
      Kernel k = GetKernel(ChannelAffineSource(target(), t, DataType::kFloat32),
                           ChannelAffineLaunchName(target(), t, DataType::kFloat32));
      LaunchChannelAffine(device(), k, t, n, channels_, inner, bottom[0]->device_data(),
                          top[0]->mutable_device_data(), DataType::kFloat32, scale_.mem.get(),
                          bias_.mem.get(), relu_fused());
      return;
    }
    if (use_global_) {
      if (fused_epilogue_) {  // the factors hold a fused pass's composition: fold its own
        fused_epilogue_ = nullptr;
        fused_key_.clear();
        folded_ = false;
      }
      if (!folded_) {
        // Fold the statistics into y = a·x + b per channel, on the device.
        Kernel fold = GetKernel(BatchNormFoldSource(target(), t), BatchNormFoldKernelName(t));
        auto& b = blobs();
        const size_t ps = SizeOf(t);
        fold.Arg(int32_t{channels_}).ArgBuffer(b[0]->device_data(), 0, ps)
            .ArgBuffer(b[1]->device_data(), 0, ps).ArgBuffer(b[2]->device_data(), 0, ps)
            .Arg(scale_).Arg(bias_).Arg(param_.batch_norm_param().eps());
        fold.Launch1D(channels_);
        folded_ = true;
      }
      if (n == 0) return;
      Kernel k = GetKernel(ChannelAffineSource(target(), t, DataType::kFloat32),
                           ChannelAffineLaunchName(target(), t, DataType::kFloat32));
      LaunchChannelAffine(device(), k, t, n, channels_, inner, bottom[0]->device_data(),
                          top[0]->mutable_device_data(), DataType::kFloat32, scale_.mem.get(),
                          bias_.mem.get());
      return;
    }
    if (t != DataType::kFloat32)
      Fail(std::string("batch statistics (TRAIN without use_global_stats) are computed in fp32, "
                       "not ") + Name(t));
    if (n == 0) return;
    // BVLC: mean and biased variance over (num, spatial) per channel, moving averages in the
    // parameter blobs, y = (x − mean) / √(var + eps); x_norm kept for the backward pass.
    const int outer = n / (channels_ * inner);
    const int m = outer * inner;
    const std::string bn = BatchNormSource(target());
    Kernel sum = GetKernel(ChannelSumSource(target()), "channel_sum");
    DeviceMemory* x = bottom[0]->device_data();
    LaunchChannelSum(device(), sum, outer, channels_, inner, x, nullptr, mean_.mem.get(), 1.0f / m, 0.0f);
    DeviceMemory* y = top[0]->mutable_device_data();
    Kernel sub = GetKernel(bn, "bn_subtract");
    sub.Arg(int32_t{n}).Arg(int32_t{channels_}).Arg(int32_t{inner}).ArgBuffer(x, 0, 4).Arg(mean_)
        .ArgBuffer(y, 0, 4);
    sub.Launch1D(n);
    LaunchChannelSum(device(), sum, outer, channels_, inner, y, y, var_.mem.get(), 1.0f / m, 0.0f);
    auto& b = blobs();
    Kernel stats = GetKernel(bn, "bn_statistics");
    const float maf = param_.batch_norm_param().moving_average_fraction();
    stats.Arg(int32_t{channels_}).Arg(mean_).Arg(var_).ArgBuffer(b[0]->mutable_device_data(), 0, 4)
        .ArgBuffer(b[1]->mutable_device_data(), 0, 4).ArgBuffer(b[2]->mutable_device_data(), 0, 4)
        .Arg(inv_std_).Arg(maf).Arg(m > 1 ? static_cast<float>(m) / (m - 1) : 1.0f)
        .Arg(param_.batch_norm_param().eps());
    stats.Launch1D(channels_);
    folded_ = false;  // the moving averages changed
    Kernel k = GetKernel(ChannelAffineSource(target(), t, DataType::kFloat32),
                         ChannelAffineLaunchName(target(), t, DataType::kFloat32));
    LaunchChannelAffine(device(), k, t, n, channels_, inner, y, y, DataType::kFloat32,
                        inv_std_.mem.get(), nullptr);
    if (!x_norm_) x_norm_ = std::make_unique<Blob>(device(), t, std::vector<int>{}, name() + "/x_norm");
    x_norm_->ReshapeLike(*top[0]);
    device().CopyOnDevice(y, 0, x_norm_->mutable_device_data(), 0, top[0]->bytes());
  }

  // Global statistics: dx = dy·scale[c]. Batch statistics (BVLC):
  // dx = (dy − mean(dy) − mean(dy·y)·y) / √(var + eps), means per channel.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0]) return;
    const int n = top[0]->count();
    if (n == 0) return;
    const int inner = Inner(*top[0]);
    DeviceMemory* dy = top[0]->device_diff();
    if (use_global_) {
      Kernel k = GetKernel(ChannelAffineSource(target(), DataType::kFloat32, DataType::kFloat32),
                           ChannelAffineLaunchName(target(), DataType::kFloat32, DataType::kFloat32));
      LaunchChannelAffine(device(), k, DataType::kFloat32, n, channels_, inner, dy,
                          bottom[0]->mutable_device_diff(), DataType::kFloat32, scale_.mem.get(),
                          nullptr);
      return;
    }
    if (!x_norm_ || x_norm_->count() != n) Fail("Backward before a TRAIN Forward");
    const int outer = n / (channels_ * inner);
    const int m = outer * inner;
    Kernel sum = GetKernel(ChannelSumSource(target()), "channel_sum");
    DeviceMemory* y = x_norm_->device_data();
    LaunchChannelSum(device(), sum, outer, channels_, inner, dy, y, s1_.mem.get(), 1.0f / m, 0.0f);
    LaunchChannelSum(device(), sum, outer, channels_, inner, dy, nullptr, s2_.mem.get(), 1.0f / m, 0.0f);
    Kernel k = GetKernel(BatchNormSource(target()), "bn_backward");
    k.Arg(int32_t{n}).Arg(int32_t{channels_}).Arg(int32_t{inner}).ArgBuffer(dy, 0, 4).ArgBuffer(y, 0, 4)
        .Arg(s1_).Arg(s2_).Arg(inv_std_).ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4);
    k.Launch1D(n);
  }

 private:
  // Its own y = a·x + b with global statistics, composed with the fused epilogue's affine layers
  // when a chain runs in it: ea·(a·x + b) + eb.
  void Factors(std::vector<float>* a, std::vector<float>* b) {
    ChannelAffine(channels_, a, b);
    if (!fused()) return;
    std::vector<float> ea, eb;
    fused()->Affine(channels_, &ea, &eb);
    for (size_t c = 0; c < ea.size(); ++c) {
      (*a)[c] *= ea[c];
      (*b)[c] = ea[c] * (*b)[c] + eb[c];
    }
  }
  // The parameter versions Factors reads (its own blobs', then the epilogue's affine layers').
  std::string FactorsKey() {
    std::vector<Layer*> sources{this};
    if (fused()) sources.insert(sources.end(), fused()->affine.begin(), fused()->affine.end());
    return ParamVersionsKey(sources);
  }

  int channels_ = 0;
  bool use_global_ = true;
  bool folded_ = false;
  vptr<float> scale_, bias_;              // folded global statistics
  // scale_ and bias_ composed with this fused epilogue's factors, at these parameter versions
  // (FactorsKey); nullptr: its own factors alone.
  const FusedEpilogue* fused_epilogue_ = nullptr;
  std::string fused_key_;
  vptr<float> mean_, var_, inv_std_;      // batch statistics of the last TRAIN forward
  vptr<float> s1_, s2_;                   // backward's per-channel means
  std::unique_ptr<Blob> x_norm_;
  QuantizedChannelPass quantized_;        // the quantized types' forward
};

class ScaleLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Scale"; }
  // Quantized with its factors as a parameter (one bottom): float factors between quantized
  // input and output, as BatchNorm; a second bottom's factors stay fp32 data.
  bool SupportsType(DataType t) const override {
    return !IsQuantized(t) || param_.bottom_size() <= 1;
  }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  // Only the learned form over the channel axis: one bottom, a scale blob of `channels`.
  bool ChannelAffine(int channels, std::vector<float>* scale, std::vector<float>* shift) override {
    if (param_.bottom_size() != 1 || axis_ != 1 || blobs_.empty() ||
        blobs_[0]->shape() != std::vector<int>{channels})
      return false;
    *scale = ParamAsFloat(0);
    if (param_.scale_param().bias_term())
      *shift = ParamAsFloat(1);
    else
      shift->assign(channels, 0.0f);
    return true;
  }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    const auto& p = param_.scale_param();
    const bool quantized = IsQuantized(compute_type_);
    if (quantized && bottom.size() != 1)
      Fail(std::string("a Scale with its factors in a second bottom computes in float types, "
                       "not ") + Name(compute_type_));
    if (bottom.size() == 1) {
      const int axis = bottom[0]->CanonicalAxisIndex(p.axis());
      const int end = p.num_axes() == -1 ? bottom[0]->num_axes() : axis + p.num_axes();
      if (end > bottom[0]->num_axes()) Fail("num_axes " + std::to_string(p.num_axes()) + " too large for " + bottom[0]->shape_string());
      std::vector<int> shape(bottom[0]->shape().begin() + axis, bottom[0]->shape().begin() + end);
      caffe::FillerParameter filler = p.filler();
      if (!p.has_filler()) {
        filler.set_type("constant");
        filler.set_value(1.0f);
      }
      quantized ? AddFloatParam(shape, filler) : AddParam(shape, filler);
    }
    if (p.bias_term()) {
      const Blob& s = bottom.size() == 2 ? *bottom[1] : *blobs_[0];
      caffe::FillerParameter filler = p.bias_filler();
      if (!p.has_bias_filler()) filler.set_type("constant");
      quantized ? AddFloatParam(s.shape(), filler) : AddParam(s.shape(), filler);
    }
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.scale_param();
    const Blob& s = bottom.size() == 2 ? *bottom[1] : *blobs_[0];
    axis_ = s.num_axes() == 0 ? 0 : bottom[0]->CanonicalAxisIndex(p.axis());
    for (int i = 0; i < s.num_axes(); ++i)
      if (axis_ + i >= bottom[0]->num_axes() || bottom[0]->shape(axis_ + i) != s.shape(i))
        Fail("scale shape " + s.shape_string() + " does not match bottom " +
             bottom[0]->shape_string() + " from axis " + std::to_string(axis_));
    channels_ = s.count();
    inner_ = bottom[0]->count(axis_ + s.num_axes());
    top[0]->ReshapeLike(*bottom[0]);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int n = bottom[0]->count();
    if (n == 0) return;
    const DataType t = compute_type_;
    if (IsQuantized(t)) {
      quantized_.Run(*this, GetKernel(ChannelAffineSource(target(), t, DataType::kFloat32),
                                      ChannelAffineLaunchName(target(), t, DataType::kFloat32)),
                     t, channels_, inner_, *bottom[0], *top[0], BottomAffine(0), TopAffine(0),
                     false, ParamVersionsKey({this}),
                     [this](std::vector<float>* a, std::vector<float>* b) {
                       *a = ParamAsFloat(0);
                       if (param_.scale_param().bias_term())
                         *b = ParamAsFloat(1);
                       else
                         b->assign(a->size(), 0.0f);
                     });
      return;
    }
    Kernel k = GetKernel(ChannelAffineSource(target(), t, t), ChannelAffineLaunchName(target(), t, t));
    Blob& s = bottom.size() == 2 ? *bottom[1] : *blobs_[0];
    DeviceMemory* bias = nullptr;
    if (param_.scale_param().bias_term()) bias = blobs_.back()->device_data();
    if (top[0] == bottom[0] && t == DataType::kFloat32 && phase() == caffe::TRAIN) {
      // In place: keep x for the scale gradient (as BVLC's temp_).
      if (!x_copy_) x_copy_ = std::make_unique<Blob>(device(), t, std::vector<int>{}, name() + "/x");
      x_copy_->ReshapeLike(*bottom[0]);
      device().CopyOnDevice(bottom[0]->device_data(), 0, x_copy_->mutable_device_data(), 0,
                            bottom[0]->bytes());
    }
    DeviceMemory* x = bottom[0]->device_data();
    LaunchChannelAffine(device(), k, t, n, channels_, inner_, x, top[0]->mutable_device_data(), t,
                        s.device_data(), bias);
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // dx = dy·s; ds = Σ dy·x (a second bottom's diff is overwritten, a parameter's accumulates);
  // db += Σ dy — sums over the positions outside the scale's axes.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    const int n = top[0]->count();
    if (n == 0) return;
    const int outer = inner_ * channels_ != 0 ? n / (inner_ * channels_) : 0;
    const bool scale_is_bottom = bottom.size() == 2;
    Blob& s = scale_is_bottom ? *bottom[1] : *blobs_[0];
    const bool want_s = scale_is_bottom ? down[1] : param_propagate_down(0);
    const bool has_bias = param_.scale_param().bias_term();
    const int bias_index = static_cast<int>(blobs_.size()) - 1;
    const bool want_b = has_bias && param_propagate_down(bias_index);
    DeviceMemory* dy = top[0]->device_diff();
    // The sums first: in place, dx overwrites dy.
    Kernel sum = GetKernel(ChannelSumSource(target()), "channel_sum");
    if (want_s) {
      const Blob& xb = top[0] == bottom[0] ? *x_copy_ : *bottom[0];
      LaunchChannelSum(device(), sum, outer, channels_, inner_, dy, xb.device_data(),
                 s.mutable_device_diff(), 1.0f, scale_is_bottom ? 0.0f : 1.0f);
    }
    if (want_b)
      LaunchChannelSum(device(), sum, outer, channels_, inner_, dy, nullptr,
                 blobs_[bias_index]->mutable_device_diff(), 1.0f, 1.0f);
    if (down[0]) {
      Kernel k = GetKernel(ChannelAffineSource(target(), DataType::kFloat32, DataType::kFloat32),
                           ChannelAffineLaunchName(target(), DataType::kFloat32, DataType::kFloat32));
      LaunchChannelAffine(device(), k, DataType::kFloat32, n, channels_, inner_, dy,
                          bottom[0]->mutable_device_diff(), DataType::kFloat32, s.device_data(),
                          nullptr);
    }
  }

 private:
  int axis_ = 1, channels_ = 1, inner_ = 1;
  std::unique_ptr<Blob> x_copy_;
  QuantizedChannelPass quantized_;  // the quantized types' forward
};

}  // namespace

void RegisterNormalizationLayers() {
  RegisterLayerType<BatchNormLayer>("BatchNorm");
  RegisterLayerType<ScaleLayer>("Scale");
}

}  // namespace mpcaffe
