// layers/softmax_layers.cc — Softmax, SoftmaxWithLoss, Accuracy and EuclideanLoss forward in
// float types: per-position values on the device, the scalar reduction on the host.
#include <cmath>
#include <algorithm>
#include <string>

#include "layers/host_math.h"
#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"

namespace mpcaffe {
namespace {

/// Runs a kernel writing one float per position into `scratch` and returns them.
std::vector<float> ReadScratch(Device& device, vptr<float>& scratch, int n) {
  std::vector<float> v(n);
  device.Read(scratch, v.data(), n);
  return v;
}

class SoftmaxLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Softmax"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    axis_ = bottom[0]->CanonicalAxisIndex(param_.softmax_param().axis());
    top[0]->ReshapeLike(*bottom[0]);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    const int outer = b.count(0, axis_), channels = b.shape(axis_), inner = b.count(axis_ + 1);
    if (outer * inner == 0) return;
    const DataType t = compute_type_;
    Kernel k = GetKernel(SoftmaxSource(target(), t), LayerKernelName("softmax", t));
    DeviceMemory* x = bottom[0]->device_data();
    k.Arg(int32_t{outer}).Arg(int32_t{channels}).Arg(int32_t{inner})
        .ArgBuffer(x, 0, SizeOf(t)).ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t));
    k.Launch1D(outer * inner);
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // dx = (dy − Σ_c dy·y) · y along the softmax axis.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0]) return;
    const Blob& b = *bottom[0];
    const int outer = b.count(0, axis_), channels = b.shape(axis_), inner = b.count(axis_ + 1);
    const std::vector<float> y(HostData(*top[0]), HostData(*top[0]) + b.count());
    const std::vector<float> dy(HostDiff(*top[0]), HostDiff(*top[0]) + b.count());
    float* dx = MutableHostDiff(*bottom[0]);
    for (int o = 0; o < outer; ++o)
      for (int i = 0; i < inner; ++i) {
        const size_t base = static_cast<size_t>(o) * channels * inner + i;
        double dot = 0;
        for (int c = 0; c < channels; ++c) dot += dy[base + c * inner] * y[base + c * inner];
        for (int c = 0; c < channels; ++c)
          dx[base + c * inner] = (dy[base + c * inner] - static_cast<float>(dot)) * y[base + c * inner];
      }
  }

 private:
  int axis_ = 1;
};

/// Caffe's normalizer of a loss over `outer`·`inner` positions with `valid` of them counted.
float Normalizer(const caffe::LossParameter& p, int outer, int inner, int valid) {
  caffe::LossParameter::NormalizationMode mode = p.normalization();
  if (!p.has_normalization() && p.has_normalize())
    mode = p.normalize() ? caffe::LossParameter::VALID : caffe::LossParameter::BATCH_SIZE;
  float n = 1.0f;
  switch (mode) {
    case caffe::LossParameter::FULL: n = static_cast<float>(outer * inner); break;
    case caffe::LossParameter::VALID: n = static_cast<float>(valid); break;
    case caffe::LossParameter::BATCH_SIZE: n = static_cast<float>(outer); break;
    case caffe::LossParameter::NONE: n = 1.0f; break;
  }
  return std::max(1.0f, n);
}

class SoftmaxWithLossLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "SoftmaxWithLoss"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  float DefaultLossWeight(int top) const override { return top == 0 ? 1.0f : 0.0f; }
  bool AllowForceBackward(int bottom) const override { return bottom != 1; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    axis_ = bottom[0]->CanonicalAxisIndex(param_.softmax_param().axis());
    outer_ = bottom[0]->count(0, axis_);
    inner_ = bottom[0]->count(axis_ + 1);
    if (outer_ * inner_ != bottom[1]->count())
      Fail("label count " + std::to_string(bottom[1]->count()) + " must equal outer·inner " +
           std::to_string(outer_ * inner_) + " of the scores " + bottom[0]->shape_string());
    if (!prob_) prob_ = std::make_unique<Blob>(device(), compute_type_, std::vector<int>{}, name() + "/prob");
    prob_->ReshapeLike(*bottom[0]);
    top[0]->Reshape({});
    if (top.size() == 2) top[1]->ReshapeLike(*bottom[0]);
    const int n = std::max(1, outer_ * inner_);
    if (scratch_.size() < static_cast<size_t>(n)) scratch_ = device().Alloc<float>(n);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    const int channels = bottom[0]->shape(axis_);
    Blob& prob = top.size() == 2 ? *top[1] : *prob_;
    Kernel sm = GetKernel(SoftmaxSource(target(), t), LayerKernelName("softmax", t));
    sm.Arg(int32_t{outer_}).Arg(int32_t{channels}).Arg(int32_t{inner_})
        .ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t)).ArgBuffer(prob.mutable_device_data(), 0, SizeOf(t));
    sm.Launch1D(outer_ * inner_);
    const auto& lp = param_.loss_param();
    Kernel k = GetKernel(SoftmaxLossSource(target(), t), LayerKernelName("softmax_loss", t));
    k.Arg(int32_t{outer_}).Arg(int32_t{channels}).Arg(int32_t{inner_})
        .ArgBuffer(prob.device_data(), 0, SizeOf(t)).ArgBuffer(bottom[1]->device_data(), 0, SizeOf(t))
        .Arg(scratch_).Arg(int32_t{lp.ignore_label()}).Arg(int32_t{lp.has_ignore_label() ? 1 : 0});
    k.Launch1D(outer_ * inner_);
    double loss = 0;
    int valid = 0;
    for (float v : ReadScratch(device(), scratch_, outer_ * inner_))
      if (v >= 0) loss += v, ++valid;
    top[0]->FromFloat({static_cast<float>(loss / Normalizer(lp, outer_, inner_, valid))});
    valid_ = valid;
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // d scores = (prob − onehot(label)) · top_diff / normalizer; ignored labels get 0.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (down.size() > 1 && down[1]) Fail("cannot backpropagate to the labels");
    if (!down[0]) return;
    const auto& lp = param_.loss_param();
    const int channels = bottom[0]->shape(axis_);
    const Blob& prob = top.size() == 2 ? *top[1] : *prob_;
    const float* p = HostData(prob);
    const float* label = HostData(*bottom[1]);
    const float scale = HostDiff(*top[0])[0] / Normalizer(lp, outer_, inner_, valid_);
    float* dx = MutableHostDiff(*bottom[0]);
    for (int o = 0; o < outer_; ++o)
      for (int i = 0; i < inner_; ++i) {
        const size_t base = static_cast<size_t>(o) * channels * inner_ + i;
        const int l = static_cast<int>(label[o * inner_ + i]);
        const bool ignored = lp.has_ignore_label() && l == lp.ignore_label();
        if (!ignored && (l < 0 || l >= channels))
          Fail("label " + std::to_string(l) + " outside [0, " + std::to_string(channels) + ")");
        for (int c = 0; c < channels; ++c) {
          const size_t j = base + static_cast<size_t>(c) * inner_;
          dx[j] = ignored ? 0.0f : (p[j] - (c == l ? 1.0f : 0.0f)) * scale;
        }
      }
  }

 private:
  int valid_ = 0;
  int axis_ = 1, outer_ = 0, inner_ = 0;
  std::unique_ptr<Blob> prob_;
  vptr<float> scratch_;
};

class AccuracyLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Accuracy"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.accuracy_param();
    axis_ = bottom[0]->CanonicalAxisIndex(p.axis());
    outer_ = bottom[0]->count(0, axis_);
    inner_ = bottom[0]->count(axis_ + 1);
    if (outer_ * inner_ != bottom[1]->count())
      Fail("label count " + std::to_string(bottom[1]->count()) + " must equal outer·inner " +
           std::to_string(outer_ * inner_) + " of the scores " + bottom[0]->shape_string());
    if (static_cast<int>(p.top_k()) > bottom[0]->shape(axis_))
      Fail("top_k " + std::to_string(p.top_k()) + " exceeds the " +
           std::to_string(bottom[0]->shape(axis_)) + " classes");
    top[0]->Reshape({});
    const int n = std::max(1, outer_ * inner_);
    if (scratch_.size() < static_cast<size_t>(n)) scratch_ = device().Alloc<float>(n);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    const auto& p = param_.accuracy_param();
    Kernel k = GetKernel(AccuracySource(target(), t), LayerKernelName("accuracy", t));
    k.Arg(int32_t{outer_}).Arg(int32_t{bottom[0]->shape(axis_)}).Arg(int32_t{inner_})
        .ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t)).ArgBuffer(bottom[1]->device_data(), 0, SizeOf(t))
        .Arg(scratch_).Arg(static_cast<int32_t>(p.top_k())).Arg(int32_t{p.ignore_label()})
        .Arg(int32_t{p.has_ignore_label() ? 1 : 0});
    k.Launch1D(outer_ * inner_);
    int correct = 0, counted = 0;
    for (float v : ReadScratch(device(), scratch_, outer_ * inner_))
      if (v >= 0) correct += v > 0.5f, ++counted;
    top[0]->FromFloat({counted ? static_cast<float>(correct) / counted : 0.0f});
  }

 private:
  int axis_ = 1, outer_ = 0, inner_ = 0;
  vptr<float> scratch_;
};

class EuclideanLossLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "EuclideanLoss"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  float DefaultLossWeight(int) const override { return 1.0f; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (bottom[0]->count(1) != bottom[1]->count(1) || bottom[0]->shape(0) != bottom[1]->shape(0))
      Fail("bottoms " + bottom[0]->shape_string() + " and " + bottom[1]->shape_string() +
           " must have the same num and inner count");
    top[0]->Reshape({});
    const int n = std::max(1, bottom[0]->count());
    if (scratch_.size() < static_cast<size_t>(n)) scratch_ = device().Alloc<float>(n);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    const int n = bottom[0]->count();
    double sum = 0;
    if (n > 0) {
      Kernel k = GetKernel(SquaredDifferenceSource(target(), t), LayerKernelName("sqdiff", t));
      k.Arg(int32_t{n}).ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
          .ArgBuffer(bottom[1]->device_data(), 0, SizeOf(t)).Arg(scratch_);
      k.Launch1D(n);
      for (float v : ReadScratch(device(), scratch_, n)) sum += v;
    }
    const int num = std::max(1, bottom[0]->shape(0));
    top[0]->FromFloat({static_cast<float>(sum / num / 2.0)});
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // d x0 = ±(x0 − x1) · top_diff / num.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    const int n = bottom[0]->count();
    const float alpha = HostDiff(*top[0])[0] / std::max(1, bottom[0]->shape(0));
    const std::vector<float> a(HostData(*bottom[0]), HostData(*bottom[0]) + n);
    const std::vector<float> b(HostData(*bottom[1]), HostData(*bottom[1]) + n);
    for (int k = 0; k < 2; ++k) {
      if (!down[k]) continue;
      float* dx = MutableHostDiff(*bottom[k]);
      const float sign = k == 0 ? 1.0f : -1.0f;
      for (int i = 0; i < n; ++i) dx[i] = sign * alpha * (a[i] - b[i]);
    }
  }

 private:
  vptr<float> scratch_;
};

}  // namespace

void RegisterSoftmaxLayers() {
  RegisterLayerType<SoftmaxLayer>("Softmax");
  RegisterLayerType<SoftmaxWithLossLayer>("SoftmaxWithLoss");
  RegisterLayerType<AccuracyLayer>("Accuracy");
  RegisterLayerType<EuclideanLossLayer>("EuclideanLoss");
}

}  // namespace mpcaffe
