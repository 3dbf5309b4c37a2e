// layers/normalization_layers.cc — BatchNorm (global statistics) and Scale (per-channel scale
// and bias, from a parameter or a second bottom), float types, via the channel-affine kernel.
#include <cmath>

#include "layers/layer_kernels.h"
#include "layers/host_math.h"
#include "layers/layer_registry.h"

namespace mpcaffe {
namespace {

/// y = x·scale[c] + bias[c] over an (outer, channels, inner) layout.
void LaunchChannelAffine(Device& device, Kernel k, DataType t, int n, int channels, int inner,
                         DeviceMemory* x, DeviceMemory* y, DataType pt, DeviceMemory* scale,
                         DeviceMemory* bias) {
  const size_t ps = SizeOf(pt);
  k.Arg(int32_t{n}).Arg(int32_t{channels}).Arg(int32_t{inner})
      .ArgBuffer(x, 0, SizeOf(t)).ArgBuffer(y, 0, SizeOf(t))
      .ArgBuffer(scale, 0, ps).ArgBuffer(bias ? bias : scale, 0, ps).Arg(int32_t{bias ? 1 : 0});
  k.Launch1D(n);
}

class BatchNormLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "BatchNorm"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    channels_ = bottom[0]->num_axes() == 1 ? 1 : bottom[0]->shape(1);
    caffe::FillerParameter zero;
    zero.set_type("constant");
    zero.set_value(0.0f);
    AddParam({channels_}, zero);
    AddParam({channels_}, zero);
    AddParam({1}, zero);
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int c = bottom[0]->num_axes() == 1 ? 1 : bottom[0]->shape(1);
    if (c != channels_) Fail("bottom has " + std::to_string(c) + " channels, the statistics " + std::to_string(channels_));
    top[0]->ReshapeLike(*bottom[0]);
  }
  void ParamsChanged() override { folded_ = false; }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.batch_norm_param();
    const bool global = p.has_use_global_stats() ? p.use_global_stats() : phase() == caffe::TEST;
    if (!global)
      Fail("forward with batch statistics (TRAIN without use_global_stats) is not implemented; "
           "it comes with training");
    if (!folded_) {
      // Fold the statistics into y = a·x + b per channel (fp32 on the device).
      const std::vector<float> mean = ParamAsFloat(0), var = ParamAsFloat(1), sf = ParamAsFloat(2);
      const float f = sf[0] == 0.0f ? 0.0f : 1.0f / sf[0];
      std::vector<float> a(channels_), b(channels_);
      for (int c = 0; c < channels_; ++c) {
        a[c] = 1.0f / std::sqrt(var[c] * f + p.eps());
        b[c] = -mean[c] * f * a[c];
      }
      scale_ = device().Alloc<float>(channels_);
      bias_ = device().Alloc<float>(channels_);
      device().Write(scale_, a.data(), channels_);
      device().Write(bias_, b.data(), channels_);
      folded_ = true;
    }
    const int n = bottom[0]->count();
    if (n == 0) return;
    const DataType t = compute_type_;
    Kernel k = GetKernel(ChannelAffineSource(target(), t, DataType::kFloat32),
                         ChannelAffineKernelName(t, DataType::kFloat32));
    DeviceMemory* x = bottom[0]->device_data();
    LaunchChannelAffine(device(), k, t, n, channels_, bottom[0]->count(2 <= bottom[0]->num_axes() ? 2 : 1),
                        x, top[0]->mutable_device_data(), DataType::kFloat32, scale_.mem.get(),
                        bias_.mem.get());
  }

 private:
  int channels_ = 0;
  bool folded_ = false;
  vptr<float> scale_, bias_;
};

class ScaleLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Scale"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    const auto& p = param_.scale_param();
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
      AddParam(shape, filler);
    }
    if (p.bias_term()) {
      const Blob& s = bottom.size() == 2 ? *bottom[1] : *blobs_[0];
      caffe::FillerParameter filler = p.bias_filler();
      if (!p.has_bias_filler()) filler.set_type("constant");
      AddParam(s.shape(), filler);
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
    Kernel k = GetKernel(ChannelAffineSource(target(), t, t), ChannelAffineKernelName(t, t));
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
    const int outer = inner_ * channels_ ? n / (inner_ * channels_) : 0;
    const bool scale_is_bottom = bottom.size() == 2;
    Blob& s = scale_is_bottom ? *bottom[1] : *blobs_[0];
    const bool want_s = scale_is_bottom ? down[1] : param_propagate_down(0);
    const bool has_bias = param_.scale_param().bias_term();
    const int bias_index = static_cast<int>(blobs_.size()) - 1;
    const bool want_b = has_bias && param_propagate_down(bias_index);
    const std::vector<float> dy(HostDiff(*top[0]), HostDiff(*top[0]) + n);
    if (want_s || want_b) {
      const Blob& xb = top[0] == bottom[0] ? *x_copy_ : *bottom[0];
      const float* x = HostData(xb);
      std::vector<double> gs(channels_, 0.0), gb(channels_, 0.0);
      for (int o = 0; o < outer; ++o)
        for (int c = 0; c < channels_; ++c)
          for (int i = 0; i < inner_; ++i) {
            const size_t j = (static_cast<size_t>(o) * channels_ + c) * inner_ + i;
            gs[c] += static_cast<double>(dy[j]) * x[j];
            gb[c] += dy[j];
          }
      if (want_s) {
        float* ds = MutableHostDiff(s);
        for (int c = 0; c < channels_; ++c)
          ds[c] = static_cast<float>(scale_is_bottom ? gs[c] : ds[c] + gs[c]);
      }
      if (want_b) {
        float* db = MutableHostDiff(*blobs_[bias_index]);
        for (int c = 0; c < channels_; ++c) db[c] += static_cast<float>(gb[c]);
      }
    }
    if (down[0]) {
      const float* sv = HostData(s);
      float* dx = MutableHostDiff(*bottom[0]);
      for (int o = 0; o < outer; ++o)
        for (int c = 0; c < channels_; ++c)
          for (int i = 0; i < inner_; ++i) {
            const size_t j = (static_cast<size_t>(o) * channels_ + c) * inner_ + i;
            dx[j] = dy[j] * sv[c];
          }
    }
  }

 private:
  int axis_ = 1, channels_ = 1, inner_ = 1;
  std::unique_ptr<Blob> x_copy_;
};

}  // namespace

void RegisterNormalizationLayers() {
  RegisterLayerType<BatchNormLayer>("BatchNorm");
  RegisterLayerType<ScaleLayer>("Scale");
}

}  // namespace mpcaffe
