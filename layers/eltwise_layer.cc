// layers/eltwise_layer.cc — Eltwise: SUM with coefficients (every dtype; quantized through the
// requantizing scale / axpby kernels), PROD and MAX (float types).
#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"

namespace mpcaffe {
namespace {

class EltwiseLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Eltwise"; }
  bool SupportsType(DataType t) const override {
    return !IsQuantized(t) || param_.eltwise_param().operation() == caffe::EltwiseParameter::SUM;
  }
  int MinBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    const auto& p = param_.eltwise_param();
    if (p.coeff_size() && p.coeff_size() != static_cast<int>(bottom.size()))
      Fail("needs one coeff per bottom (" + std::to_string(bottom.size()) + "), got " +
           std::to_string(p.coeff_size()));
    if (p.coeff_size() && p.operation() != caffe::EltwiseParameter::SUM)
      Fail("coeff is only for SUM");
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    for (size_t i = 1; i < bottom.size(); ++i)
      if (bottom[i]->shape() != bottom[0]->shape())
        Fail("bottom " + std::to_string(i) + " shape " + bottom[i]->shape_string() +
             " differs from bottom 0 shape " + bottom[0]->shape_string());
    top[0]->ReshapeLike(*bottom[0]);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.eltwise_param();
    const int n = top[0]->count();
    if (n == 0) return;
    const DataType t = compute_type_;
    DeviceMemory* y = top[0]->mutable_device_data();
    if (top[0] == bottom[0]) Fail("cannot run in place");
    if (p.operation() == caffe::EltwiseParameter::SUM) {
      auto coeff = [&](size_t i) { return p.coeff_size() ? p.coeff(static_cast<int>(i)) : 1.0f; };
      const Affine yq = TopAffine(0);
      elementwise().Scale(t, n, coeff(0), *bottom[0]->device_data(), *y, BottomAffine(0), yq);
      for (size_t i = 1; i < bottom.size(); ++i)
        elementwise().Axpby(t, n, coeff(i), *bottom[i]->device_data(), 1.0f, *y,
                            BottomAffine(static_cast<int>(i)), yq);
      return;
    }
    const std::string op = p.operation() == caffe::EltwiseParameter::PROD ? "prod" : "max";
    device().CopyOnDevice(bottom[0]->device_data(), 0, y, 0, bottom[0]->bytes());
    Kernel k = GetKernel(EltwiseSource(target(), op, t), LayerKernelName("eltwise_" + op, t));
    for (size_t i = 1; i < bottom.size(); ++i) {
      k.Arg(int32_t{n}).ArgBuffer(bottom[i]->device_data(), 0, SizeOf(t)).ArgBuffer(y, 0, SizeOf(t));
      k.Launch1D(n);
    }
  }
};

}  // namespace

void RegisterEltwiseLayer() { RegisterLayerType<EltwiseLayer>("Eltwise"); }

}  // namespace mpcaffe
