// layers/reduction_layers.cc — BVLC's reducing layers on the gather family's float kernels
// (layers/layer_kernels.h): Reduction (SUM, ASUM, SUMSQ, MEAN of the axes from
// reduction_param.axis to the end, times coeff), ArgMax (top_k values or indices, forward only)
// and MVN (mean / variance normalization). Forward in fp32 and fp16 (computed in float),
// backward in fp32. Quantized types are not computed here: SupportsType says so, so a typed net
// runs these layers in fp32 between the Quantizer layers it inserts, and a prototxt asking one
// to compute in int8 / int16 fails with "layer '<name>' (<type>): does not compute in …".
#include <algorithm>

#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"

namespace mpcaffe {
namespace {

class ReductionLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Reduction"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    const auto& p = param_.reduction_param();
    switch (p.operation()) {
      case caffe::ReductionParameter::SUM:
      case caffe::ReductionParameter::MEAN: op_ = 0; break;
      case caffe::ReductionParameter::ASUM: op_ = 1; break;
      case caffe::ReductionParameter::SUMSQ: op_ = 2; break;
      default: Fail("reduction_param.operation " + std::to_string(p.operation()) + " is unknown");
    }
  }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.reduction_param();
    const Blob& b = *bottom[0];
    if (p.axis() < -b.num_axes() || p.axis() >= b.num_axes())
      Fail("reduction_param.axis " + std::to_string(p.axis()) + " out of range for " +
           b.shape_string());
    const int axis = b.CanonicalAxisIndex(p.axis());
    outer_ = b.count(0, axis);
    inner_ = b.count(axis);
    coeff_ = p.coeff();
    if (p.operation() == caffe::ReductionParameter::MEAN && inner_ > 0) coeff_ /= inner_;
    top[0]->Reshape(std::vector<int>(b.shape().begin(), b.shape().begin() + axis));
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (outer_ == 0) return;
    const DataType t = compute_type_;
    Kernel k = GetKernel(GatherSource(target(), t), LayerKernelName("reduce", t));
    k.Arg(int32_t{outer_}).ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
        .ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t));
    for (int a : GatherIndex(0, {outer_}, {inner_}).Args()) k.Arg(int32_t{a});
    k.Arg(int32_t{inner_}).Arg(int32_t{1}).Arg(int32_t{op_}).Arg(coeff_);
    k.Launch1D(outer_);
  }

  // dx = coeff · dy (broadcast over the reduced axes) · d f(x)/dx.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    const int n = bottom[0]->count();
    if (!down[0] || n == 0) return;
    Kernel k = GetKernel(GatherSource(target(), DataType::kFloat32), "reduce_backward_fp32");
    k.Arg(int32_t{n}).ArgBuffer(bottom[0]->device_data(), 0, 4)
        .ArgBuffer(top[0]->device_diff(), 0, 4).ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4)
        .Arg(int32_t{inner_}).Arg(int32_t{op_}).Arg(coeff_);
    k.Launch1D(n);
  }

 private:
  int op_ = 0, outer_ = 1, inner_ = 1;
  float coeff_ = 1;
};

/// ArgMax (BVLC): the top_k largest values of each position along argmax_param.axis (or of each
/// item's count(1) values without an axis), as indices or, with out_max_val, values (without an
/// axis: indices then values). No backward pass, as in BVLC.
class ArgMaxLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "ArgMax"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.argmax_param();
    const Blob& b = *bottom[0];
    has_axis_ = p.has_axis();
    if (has_axis_ && (p.axis() < -b.num_axes() || p.axis() >= b.num_axes()))
      Fail("argmax_param.axis " + std::to_string(p.axis()) + " out of range for " +
           b.shape_string());
    const int axis = has_axis_ ? b.CanonicalAxisIndex(p.axis()) : 0;
    channels_ = has_axis_ ? b.shape(axis) : b.count(1);
    if (p.top_k() < 1 || p.top_k() > static_cast<uint32_t>(channels_))
      Fail("argmax_param.top_k " + std::to_string(p.top_k()) + " must lie in [1, " +
           std::to_string(channels_) + "] for " + b.shape_string());
    top_k_ = static_cast<int>(p.top_k());
    outer_ = has_axis_ ? b.count(0, axis) : (b.num_axes() > 0 ? b.shape(0) : 1);
    inner_ = has_axis_ ? b.count(axis + 1) : 1;
    std::vector<int> shape;
    if (has_axis_) {
      shape = b.shape();
      shape[axis] = top_k_;
    } else {
      shape.assign(std::max(b.num_axes(), 3), 1);
      shape[0] = outer_;
      shape[1] = p.out_max_val() ? 2 : 1;
      shape[2] = top_k_;
    }
    top[0]->Reshape(shape);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int n = outer_ * inner_;
    if (n == 0) return;
    const DataType t = compute_type_;
    Kernel k = GetKernel(GatherSource(target(), t), LayerKernelName("argmax", t));
    k.Arg(int32_t{n}).Arg(int32_t{channels_}).Arg(int32_t{inner_}).Arg(int32_t{top_k_})
        .Arg(int32_t{param_.argmax_param().out_max_val()}).Arg(int32_t{has_axis_})
        .ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
        .ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t));
    k.Launch1D(n);
  }

 private:
  bool has_axis_ = false;
  int channels_ = 1, top_k_ = 1, outer_ = 1, inner_ = 1;
};

/// MVN (BVLC): each item's (across_channels) or each channel's values made zero-mean and, with
/// normalize_variance, divided by their standard deviation plus eps.
class MVNLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "MVN"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.mvn_param();
    const Blob& b = *bottom[0];
    if (!(p.eps() >= 0)) Fail("mvn_param.eps " + std::to_string(p.eps()) + " must not be negative");
    if (b.num_axes() < 1) Fail("the bottom " + b.shape_string() + " has no item axis");
    groups_ = p.across_channels() || b.num_axes() < 2 ? b.shape(0) : b.shape(0) * b.shape(1);
    dim_ = groups_ ? b.count() / groups_ : 0;
    top[0]->ReshapeLike(b);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (groups_ == 0 || dim_ == 0) return;
    const DataType t = compute_type_;
    Kernel k = GetKernel(GatherSource(target(), t), LayerKernelName("mvn", t));
    k.Arg(int32_t{groups_}).Arg(int32_t{dim_}).Arg(param_.mvn_param().eps())
        .Arg(int32_t{param_.mvn_param().normalize_variance()})
        .ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
        .ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t));
    k.Launch1D(groups_);
  }

  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0] || groups_ == 0 || dim_ == 0) return;
    Kernel k = GetKernel(GatherSource(target(), DataType::kFloat32), "mvn_backward_fp32");
    k.Arg(int32_t{groups_}).Arg(int32_t{dim_}).Arg(param_.mvn_param().eps())
        .Arg(int32_t{param_.mvn_param().normalize_variance()})
        .ArgBuffer(bottom[0]->device_data(), 0, 4).ArgBuffer(top[0]->device_data(), 0, 4)
        .ArgBuffer(top[0]->device_diff(), 0, 4).ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4);
    k.Launch1D(groups_);
  }

 private:
  int groups_ = 1, dim_ = 1;
};

}  // namespace

void RegisterReductionLayers() {
  RegisterLayerType<ReductionLayer>("Reduction");
  RegisterLayerType<ArgMaxLayer>("ArgMax");
  RegisterLayerType<MVNLayer>("MVN");
}

}  // namespace mpcaffe
