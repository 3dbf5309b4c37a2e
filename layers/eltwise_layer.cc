// layers/eltwise_layer.cc — Eltwise: SUM with coefficients (every dtype; quantized through the
// requantizing scale / axpby kernels), PROD and MAX (float types).
#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"
#include "layers/train_kernels.h"

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
      Fail("eltwise_param.coeff: one per bottom (" + std::to_string(bottom.size()) + "), got " +
           std::to_string(p.coeff_size()));
    if (p.coeff_size() && p.operation() != caffe::EltwiseParameter::SUM)
      Fail("eltwise_param.coeff is only for operation SUM");
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
      if (!IsQuantized(t)) {
        elementwise().Scale(t, n, coeff(0), *bottom[0]->device_data(), *y, BottomAffine(0), yq);
        for (size_t i = 1; i < bottom.size(); ++i)
          elementwise().Axpby(t, n, coeff(i), *bottom[i]->device_data(), 1.0f, *y,
                              BottomAffine(static_cast<int>(i)), yq);
        return;
      }
      // Quantized: the sum in fp32, rounded once into the output's range (a partial sum stored
      // in that range would saturate where later terms cancel, e.g. a residual branch).
      const size_t bytes = size_t(n) * sizeof(float);
      if (!sum_ || sum_->bytes() < bytes) {
        sum_ = device().Allocate(bytes);
        term_ = device().Allocate(bytes);
      }
      const DataType f = DataType::kFloat32;
      for (size_t i = 0; i < bottom.size(); ++i) {
        DeviceMemory& dst = i == 0 ? *sum_ : *term_;
        elementwise().Convert(t, f, n, *bottom[i]->device_data(), dst,
                              BottomAffine(static_cast<int>(i)), {});
        if (i == 0) {
          if (coeff(0) != 1.0f) elementwise().Scale(f, n, coeff(0), *sum_, *sum_);
        } else {
          elementwise().Axpby(f, n, coeff(i), *term_, 1.0f, *sum_);
        }
      }
      elementwise().Convert(f, t, n, *sum_, *y, {}, yq);
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
    if (n == 0) return;
    DeviceMemory* dy = top[0]->device_diff();
    const size_t bytes = top[0]->bytes();
    if (p.operation() == caffe::EltwiseParameter::SUM) {
      for (size_t i = 0; i < bottom.size(); ++i)
        if (down[i])
          elementwise().Scale(DataType::kFloat32, n, p.coeff_size() ? p.coeff(static_cast<int>(i)) : 1.0f,
                              *dy, *bottom[i]->mutable_device_diff());
    } else if (p.operation() == caffe::EltwiseParameter::PROD && !p.stable_prod_grad()) {
      // stable_prod_grad false (BVLC's faster form): dx_i = dy·y / x_i, which divides by zero
      // where x_i is 0 as BVLC's does.
      Kernel quotient = GetKernel(EltwiseProdBackwardSource(target()), "prod_quotient");
      for (size_t i = 0; i < bottom.size(); ++i) {
        if (!down[i]) continue;
        quotient.Arg(int32_t{n}).ArgBuffer(dy, 0, 4).ArgBuffer(top[0]->device_data(), 0, 4)
            .ArgBuffer(bottom[i]->device_data(), 0, 4)
            .ArgBuffer(bottom[i]->mutable_device_diff(), 0, 4);
        quotient.Launch1D(n);
      }
    } else if (p.operation() == caffe::EltwiseParameter::PROD) {
      // dx_i = dy·Π_{j≠i} x_j (stable_prod_grad, the default): the diff times every other bottom,
      // with the forward's product kernel.
      Kernel prod = GetKernel(EltwiseSource(target(), "prod", DataType::kFloat32),
                              LayerKernelName("eltwise_prod", DataType::kFloat32));
      for (size_t i = 0; i < bottom.size(); ++i) {
        if (!down[i]) continue;
        DeviceMemory* dx = bottom[i]->mutable_device_diff();
        device().CopyOnDevice(dy, 0, dx, 0, bytes);
        for (size_t j = 0; j < bottom.size(); ++j) {
          if (j == i) continue;
          prod.Arg(int32_t{n}).ArgBuffer(bottom[j]->device_data(), 0, 4).ArgBuffer(dx, 0, 4);
          prod.Launch1D(n);
        }
      }
    } else {
      // MAX: the index of each element's first maximum, then dy where it is this bottom.
      if (best_.size() < static_cast<size_t>(n)) {
        best_ = device().Alloc<float>(n);
        arg_ = device().Alloc<int32_t>(n);
      }
      const std::string source = EltwiseMaxBackwardSource(target());
      Kernel update = GetKernel(source, "argmax_update");
      for (size_t j = 0; j < bottom.size(); ++j) {
        update.Arg(int32_t{n}).ArgBuffer(bottom[j]->device_data(), 0, 4).Arg(best_).Arg(arg_)
            .Arg(static_cast<int32_t>(j));
        update.Launch1D(n);
      }
      Kernel select = GetKernel(source, "max_select");
      for (size_t i = 0; i < bottom.size(); ++i) {
        if (!down[i]) continue;
        select.Arg(int32_t{n}).ArgBuffer(dy, 0, 4).Arg(arg_)
            .ArgBuffer(bottom[i]->mutable_device_diff(), 0, 4).Arg(static_cast<int32_t>(i));
        select.Launch1D(n);
      }
    }
  }

 private:
  vptr<float> best_;
  vptr<int32_t> arg_;
  std::shared_ptr<DeviceMemory> sum_, term_;  // quantized SUM: the fp32 sum and one term
};

}  // namespace

void RegisterEltwiseLayer() { RegisterLayerType<EltwiseLayer>("Eltwise"); }

}  // namespace mpcaffe
