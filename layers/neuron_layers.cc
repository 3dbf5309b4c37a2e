// layers/neuron_layers.cc — element-wise layers with quantized paths or state: ReLU (every
// dtype, negative_slope), Dropout (identity in TEST for every dtype; masked in TRAIN
// for float types), Noise (multiplicative Gaussian noise in TRAIN, its mean in TEST; float types).
#include <algorithm>
#include <random>
#include <string>

#include "layers/host_math.h"
#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"
#include "layers/train_kernels.h"

namespace mpcaffe {
namespace {

/// One bottom, one top of the same shape, in place allowed.
class NeuronLayer : public Layer {
 public:
  using Layer::Layer;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    top[0]->ReshapeLike(*bottom[0]);
  }
};

class ReLULayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "ReLU"; }
  bool SupportsType(DataType) const override { return true; }
  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    if (IsQuantized(compute_type_) && param_.relu_param().negative_slope() < 0)
      Fail("negative_slope must be >= 0 for quantized data");
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int n = bottom[0]->count();
    if (n == 0) return;
    DeviceMemory* x = bottom[0]->device_data();
    elementwise().Relu(compute_type_, n, *x, *top[0]->mutable_device_data(),
                       param_.relu_param().negative_slope(), BottomAffine(0), TopAffine(0));
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // dx = dy · (x > 0 ? 1 : slope); in place, x is y, which has the same sign for slope >= 0.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0]) return;
    const int n = bottom[0]->count();
    if (n == 0) return;
    Kernel k = GetKernel(ReluBackwardSource(target()), "relu_backward");
    DeviceMemory* x = bottom[0]->device_data();
    DeviceMemory* dy = top[0]->device_diff();
    k.Arg(int32_t{n}).ArgBuffer(x, 0, 4).ArgBuffer(dy, 0, 4)
        .ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4)
        .Arg(param_.relu_param().negative_slope());
    k.Launch1D(n);
  }
};

class DropoutLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Dropout"; }
  bool SupportsType(DataType) const override { return true; }
  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    ratio_ = param_.dropout_param().dropout_ratio();
    if (ratio_ < 0 || ratio_ >= 1) Fail("dropout_ratio must be in [0, 1), got " + std::to_string(ratio_));
    rng_.seed(StableHash(name() + "#mask", RandomSeed()));
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (phase() == caffe::TEST) {  // identity (Caffe scales during training instead)
      CopyOrRequant(*bottom[0], BottomAffine(0), *top[0], TopAffine(0));
      return;
    }
    if (IsQuantized(compute_type_))
      Fail(std::string("TRAIN-phase dropout is computed in float types only, not ") +
           Name(compute_type_));
    const int n = bottom[0]->count();
    if (n == 0) return;
    std::vector<uint32_t> mask(n);
    for (auto& m : mask) m = static_cast<uint32_t>(rng_());
    if (!mask_ || mask_.size() < static_cast<size_t>(n)) mask_ = device().Alloc<uint32_t>(n);
    device().Write(mask_, mask.data(), n);
    mask_count_ = n;
    const uint32_t threshold = static_cast<uint32_t>(ratio_ * 4294967295.0);
    Kernel k = GetKernel(DropoutSource(target(), compute_type_), LayerKernelName("dropout", compute_type_));
    const size_t es = SizeOf(compute_type_);
    DeviceMemory* x = bottom[0]->device_data();
    k.Arg(int32_t{n}).ArgBuffer(x, 0, es).Arg(mask_).ArgBuffer(top[0]->mutable_device_data(), 0, es)
        .Arg(threshold).Arg(1.0f / (1.0f - ratio_));
    k.Launch1D(n);
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // TRAIN: the mask of the last Forward, scaled as the forward scaled; TEST: identity.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0]) return;
    const int n = bottom[0]->count();
    if (n == 0) return;
    DeviceMemory* dy = top[0]->device_diff();
    if (phase() == caffe::TEST) {
      if (top[0] != bottom[0])
        device().CopyOnDevice(dy, 0, bottom[0]->mutable_device_diff(), 0, bottom[0]->bytes());
      return;
    }
    if (mask_count_ < n) Fail("Backward before a TRAIN Forward");
    // The forward kernel applied to the diff: dx = mask > threshold ? dy·scale : 0.
    const uint32_t threshold = static_cast<uint32_t>(ratio_ * 4294967295.0);
    Kernel k = GetKernel(DropoutSource(target(), DataType::kFloat32),
                         LayerKernelName("dropout", DataType::kFloat32));
    k.Arg(int32_t{n}).ArgBuffer(dy, 0, 4).Arg(mask_).ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4)
        .Arg(threshold).Arg(1.0f / (1.0f - ratio_));
    k.Launch1D(n);
  }

 private:
  int mask_count_ = 0;  // elements of mask_ drawn by the last TRAIN Forward
  float ratio_ = 0.5f;
  std::mt19937 rng_;
  vptr<uint32_t> mask_;
};

/// Noise: top = bottom · n with n ~ N(mu, sigma) drawn per element and Forward in TRAIN (the
/// multiplicative noise of eq. 1.9); in TEST top = bottom · mu (the noise's mean). Float types.
class NoiseLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Noise"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  bool HasBackward() const override { return true; }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.noise_param();
    const int n = bottom[0]->count();
    if (!n) return;
    const DataType t = compute_type_;
    if (phase() != caffe::TRAIN) {
      elementwise().Scale(t, n, p.mu(), *bottom[0]->device_data(), *top[0]->mutable_device_data());
      return;
    }
    std::mt19937_64 rng(StableHash(name() + "#" + std::to_string(draws_++), RandomSeed()));
    std::normal_distribution<float> dist(p.mu(), p.sigma());
    noise_.resize(n);
    for (auto& v : noise_) v = dist(rng);
    if (!mask_ || mask_->count() != n) mask_ = std::make_unique<Blob>(device(), t, std::vector<int>{n});
    mask_->FromFloat(noise_);
    if (top[0] != bottom[0])
      device().CopyOnDevice(bottom[0]->device_data(), 0, top[0]->mutable_device_data(), 0, bottom[0]->bytes());
    Kernel k = GetKernel(EltwiseSource(target(), "prod", t), LayerKernelName("eltwise_prod", t));
    k.Arg(int32_t{n}).ArgBuffer(mask_->device_data(), 0, SizeOf(t))
        .ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t));
    k.Launch1D(n);
  }
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0]) return;
    const int n = bottom[0]->count();
    const float* dy = HostDiff(*top[0]);
    float* dx = MutableHostDiff(*bottom[0]);
    const bool train = phase() == caffe::TRAIN;
    for (int i = 0; i < n; ++i) dx[i] = dy[i] * (train ? noise_[i] : param_.noise_param().mu());
  }

 private:
  uint64_t draws_ = 0;
  std::vector<float> noise_;
  std::unique_ptr<Blob> mask_;
};

}  // namespace

void RegisterNeuronLayers() {
  RegisterLayerType<ReLULayer>("ReLU");
  RegisterLayerType<DropoutLayer>("Dropout");
  RegisterLayerType<NoiseLayer>("Noise");
}

}  // namespace mpcaffe
