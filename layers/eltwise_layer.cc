// layers/eltwise_layer.cc — Eltwise: SUM with coefficients (every dtype; quantized through the
// requantizing scale / axpby kernels), PROD and MAX (float types).
#include "layers/layer_kernels.h"
#include "layers/host_math.h"
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

 public:
  bool HasBackward() const override { return true; }

 protected:
  // SUM: coeff·dy; PROD: dy·Π_{j≠i} x_j; MAX: dy where x_i was the first maximum (as BVLC).
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    const auto& p = param_.eltwise_param();
    const int n = top[0]->count();
    const float* dy = HostDiff(*top[0]);
    std::vector<const float*> x(bottom.size());
    for (size_t i = 0; i < bottom.size(); ++i) x[i] = HostData(*bottom[i]);
    for (size_t i = 0; i < bottom.size(); ++i) {
      if (!down[i]) continue;
      float* dx = MutableHostDiff(*bottom[i]);
      for (int e = 0; e < n; ++e) {
        if (p.operation() == caffe::EltwiseParameter::SUM) {
          dx[e] = dy[e] * (p.coeff_size() ? p.coeff(static_cast<int>(i)) : 1.0f);
        } else if (p.operation() == caffe::EltwiseParameter::PROD) {
          float prod = 1.0f;
          for (size_t j = 0; j < bottom.size(); ++j)
            if (j != i) prod *= x[j][e];
          dx[e] = dy[e] * prod;
        } else {
          size_t arg = 0;
          for (size_t j = 1; j < bottom.size(); ++j)
            if (x[j][e] > x[arg][e]) arg = j;
          dx[e] = arg == i ? dy[e] : 0.0f;
        }
      }
    }
  }
};

}  // namespace

void RegisterEltwiseLayer() { RegisterLayerType<EltwiseLayer>("Eltwise"); }

}  // namespace mpcaffe
