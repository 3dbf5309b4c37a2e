// layers/activation_layers.cc — BVLC's element-wise neuron layers on the activation kernel
// family (layers/activation_kernels.h): Sigmoid, TanH, AbsVal, BNLL, Clip, ELU, Exp, Log, Power,
// Swish, Threshold, the learnable PReLU, and Bias (a learned or second-bottom bias broadcast over
// axis / num_axes). Forward in fp32 and fp16 (fp16 storage, float arithmetic), backward in fp32.
// Quantized types are not computed here: SupportsType says so, the tools' typed variants then run
// these layers in fp32 between the Quantizer layers the net inserts, and a prototxt that asks one
// of them to compute in int8 / int16 fails with "layer '<name>' (<type>): does not compute in …".
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "codegen/elementwise.h"
#include "layers/activation_kernels.h"
#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"
#include "layers/train_kernels.h"

namespace mpcaffe {
namespace {

/// The kernel parameters (a, b, c) of a row; see the table in activation_kernels.cc.
struct OpArgs {
  float a = 0, b = 0, c = 0;
};

/// In place, an fp32 layer whose backward reads x keeps a copy of x before the forward pass
/// overwrites it (BVLC's PReLU does the same; its AbsVal, ELU, … would read y as x instead).
void KeepInputInPlace(const Layer& layer, Blob& bottom, Blob& top, bool needed,
                      std::unique_ptr<Blob>* copy) {
  if (&bottom != &top || !needed || layer.compute_type() != DataType::kFloat32) return;
  if (!*copy)
    *copy = std::make_unique<Blob>(layer.device(), DataType::kFloat32, std::vector<int>{},
                                   layer.name() + "/x");
  (*copy)->ReshapeLike(bottom);
  layer.device().CopyOnDevice(bottom.device_data(), 0, (*copy)->mutable_device_data(), 0,
                              bottom.bytes());
}

/// One bottom, one top of its shape, in place allowed; the row `op` of the family computes it.
class ActivationLayer : public Layer {
 public:
  ActivationLayer(const caffe::LayerParameter& p, Device& d, const char* type, const char* op)
      : Layer(p, d), type_(type), op_(ActivationOpNamed(op)) {}
  const char* type() const override { return type_; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  bool HasBackward() const override { return op_.backward != nullptr; }
  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    args_ = Args();
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    top[0]->ReshapeLike(*bottom[0]);
  }

 protected:
  /// The row's parameters from the layer's *_param, checked (Fail names the field).
  virtual OpArgs Args() const { return {}; }

  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int n = bottom[0]->count();
    if (n == 0) return;
    const DataType t = compute_type_;
    KeepInputInPlace(*this, *bottom[0], *top[0], op_.backward && op_.backward_reads_x, &x_copy_);
    const bool vec = HasVectorActivation(target(), t);
    Kernel k = GetKernel(ActivationSource(target(), t), ActivationLaunchName(target(), op_.name, t));
    k.Arg(int32_t{n}).ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
        .ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t))
        .Arg(args_.a).Arg(args_.b).Arg(args_.c);
    k.Launch1D(vec ? EightLaneItems(n) : size_t(n));
  }

  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0]) return;
    const int n = bottom[0]->count();
    if (n == 0) return;
    if (top[0] == bottom[0] && op_.backward_reads_x && !x_copy_) Fail("Backward before Forward");
    // Rows that read only y get y in x's place (in place x is gone, and they do not need it).
    DeviceMemory* x = top[0] != bottom[0] ? bottom[0]->device_data()
                      : op_.backward_reads_x ? x_copy_->device_data() : top[0]->device_data();
    Kernel k = GetKernel(ActivationBackwardSource(target()), ActivationBackwardKernelName(op_.name));
    k.Arg(int32_t{n}).ArgBuffer(x, 0, 4).ArgBuffer(top[0]->device_data(), 0, 4)
        .ArgBuffer(top[0]->device_diff(), 0, 4).ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4)
        .Arg(args_.a).Arg(args_.b).Arg(args_.c);
    k.Launch1D(n);
  }

 private:
  const char* type_;
  const ActivationOp& op_;
  OpArgs args_;
  std::unique_ptr<Blob> x_copy_;
};

/// A row without parameters: Sigmoid, TanH, AbsVal, BNLL.
template <const char* kType, const char* kOp>
class PlainActivation : public ActivationLayer {
 public:
  PlainActivation(const caffe::LayerParameter& p, Device& d) : ActivationLayer(p, d, kType, kOp) {}
};
constexpr char kSigmoid[] = "Sigmoid", kSigmoidOp[] = "sigmoid";
constexpr char kTanH[] = "TanH", kTanHOp[] = "tanh";
constexpr char kAbsVal[] = "AbsVal", kAbsValOp[] = "absval";
constexpr char kBNLL[] = "BNLL", kBNLLOp[] = "bnll";

class ClipLayer : public ActivationLayer {
 public:
  ClipLayer(const caffe::LayerParameter& p, Device& d) : ActivationLayer(p, d, "Clip", "clip") {}

 protected:
  OpArgs Args() const override {
    const auto& p = param_.clip_param();
    if (!param_.has_clip_param() || !p.has_min() || !p.has_max())
      Fail("clip_param.min and clip_param.max are required");
    if (!(p.min() <= p.max()))
      Fail("clip_param.min (" + std::to_string(p.min()) + ") must not exceed clip_param.max (" +
           std::to_string(p.max()) + ")");
    return {p.min(), p.max(), 0};
  }
};

class ELULayer : public ActivationLayer {
 public:
  ELULayer(const caffe::LayerParameter& p, Device& d) : ActivationLayer(p, d, "ELU", "elu") {}

 protected:
  OpArgs Args() const override { return {param_.elu_param().alpha(), 0, 0}; }
};

/// ln(base) for Exp and Log: base −1 means e; other bases must be positive (BVLC's check).
double LogBase(float base, const char* field, const Layer& layer) {
  if (base == -1.0f) return 1.0;
  if (!(base > 0.0f))
    throw LayerError(layer.Describe() + ": " + field + " must be > 0 or -1 (e), got " +
                     std::to_string(base));
  return std::log(double(base));
}

class ExpLayer : public ActivationLayer {
 public:
  ExpLayer(const caffe::LayerParameter& p, Device& d) : ActivationLayer(p, d, "Exp", "exp") {}

 protected:
  // base^(shift + scale·x) = base^shift · e^(ln(base)·scale·x).
  OpArgs Args() const override {
    const auto& p = param_.exp_param();
    const double ln_base = LogBase(p.base(), "exp_param.base", *this);
    return {static_cast<float>(ln_base * p.scale()), static_cast<float>(std::exp(ln_base * p.shift())), 0};
  }
};

class LogLayer : public ActivationLayer {
 public:
  LogLayer(const caffe::LayerParameter& p, Device& d) : ActivationLayer(p, d, "Log", "log") {}

 protected:
  OpArgs Args() const override {
    const auto& p = param_.log_param();
    const double ln_base = LogBase(p.base(), "log_param.base", *this);
    if (ln_base == 0.0) Fail("log_param.base must not be 1");
    return {p.scale(), p.shift(), static_cast<float>(1.0 / ln_base)};
  }
};

class PowerLayer : public ActivationLayer {
 public:
  PowerLayer(const caffe::LayerParameter& p, Device& d) : ActivationLayer(p, d, "Power", "power") {}

 protected:
  OpArgs Args() const override {
    const auto& p = param_.power_param();
    return {p.power(), p.scale(), p.shift()};
  }
};

class SwishLayer : public ActivationLayer {
 public:
  SwishLayer(const caffe::LayerParameter& p, Device& d) : ActivationLayer(p, d, "Swish", "swish") {}

 protected:
  OpArgs Args() const override { return {param_.swish_param().beta(), 0, 0}; }
};

class ThresholdLayer : public ActivationLayer {
 public:
  ThresholdLayer(const caffe::LayerParameter& p, Device& d)
      : ActivationLayer(p, d, "Threshold", "threshold") {}

 protected:
  OpArgs Args() const override { return {param_.threshold_param().threshold(), 0, 0}; }
};

/// PReLU: y = max(x, 0) + a_c·min(x, 0) with a learned slope per channel (axis 1), or one
/// slope for all (channel_shared, a 0-axis blob as BVLC stores it); filler default 0.25.
class PReLULayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "PReLU"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  bool HasBackward() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    const auto& p = param_.prelu_param();
    if (bottom[0]->num_axes() < 2)
      Fail("needs a bottom with a channel axis (2 or more axes), got " + bottom[0]->shape_string());
    caffe::FillerParameter filler = p.filler();
    if (!p.has_filler()) {
      filler.set_type("constant");
      filler.set_value(0.25f);
    }
    if (p.channel_shared())
      AddParam({}, filler);
    else
      AddParam({bottom[0]->shape(1)}, filler);
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    const bool shared = param_.prelu_param().channel_shared();
    if (b.num_axes() < 2) Fail("needs a bottom with a channel axis, got " + b.shape_string());
    if (!shared && blobs_[0]->count() != b.shape(1))
      Fail("prelu_param: " + std::to_string(blobs_[0]->count()) + " slopes for " +
           std::to_string(b.shape(1)) + " channels (channel_shared is false)");
    channels_ = shared ? 1 : b.shape(1);
    inner_ = shared ? b.count() : b.count(2);
    outer_ = shared ? 1 : b.shape(0);
    top[0]->ReshapeLike(b);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int n = bottom[0]->count();
    if (n == 0) return;
    const DataType t = compute_type_;
    KeepInputInPlace(*this, *bottom[0], *top[0], true, &x_copy_);
    const bool vec = HasVectorActivation(target(), t);
    Kernel k = GetKernel(ActivationSource(target(), t), ActivationLaunchName(target(), "prelu", t));
    k.Arg(int32_t{n}).Arg(int32_t{channels_}).Arg(int32_t{inner_})
        .ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t)).ArgBuffer(blobs_[0]->device_data(), 0, SizeOf(t))
        .ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t));
    k.Launch1D(vec ? ChannelPlanesVectorItems(n) : size_t(n));
  }

  // dx = dy·(x > 0 ? 1 : a_c); da_c += Σ dy·min(x, 0) over the positions of channel c.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    const int n = bottom[0]->count();
    const bool want_slope = param_propagate_down(0);
    if (n == 0 || (!down[0] && !want_slope)) return;
    // Scratch: the slope terms t, then (when the bottom's gradient is not wanted) a dx to discard.
    const size_t need = static_cast<size_t>(n) * (down[0] ? 1 : 2);
    if (scratch_.size() < need) scratch_ = device().Alloc<float>(need);
    if (top[0] == bottom[0] && !x_copy_) Fail("Backward before Forward");
    DeviceMemory* x = top[0] == bottom[0] ? x_copy_->device_data() : bottom[0]->device_data();
    Kernel k = GetKernel(ActivationBackwardSource(target()), ActivationBackwardKernelName("prelu"));
    k.Arg(int32_t{n}).Arg(int32_t{channels_}).Arg(int32_t{inner_}).ArgBuffer(x, 0, 4)
        .ArgBuffer(blobs_[0]->device_data(), 0, 4).ArgBuffer(top[0]->device_diff(), 0, 4);
    if (down[0])
      k.ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4);
    else
      k.Arg(scratch_ + n);
    k.Arg(scratch_);
    k.Launch1D(n);
    if (want_slope)
      LaunchChannelSum(device(), GetKernel(ChannelSumSource(target()), "channel_sum"), outer_,
                       channels_, inner_, scratch_.mem.get(), nullptr,
                       blobs_[0]->mutable_device_diff(), 1.0f, 1.0f);
  }

 private:
  int channels_ = 1, inner_ = 1, outer_ = 1;
  std::unique_ptr<Blob> x_copy_;
  vptr<float> scratch_;
};

/// Bias: top = bottom[0] + b broadcast, b a learned parameter covering bottom[0]'s axes
/// [axis, axis + num_axes) (num_axes −1: to the last; 0: a scalar) or a second bottom whose
/// shape matches bottom[0]'s from `axis` (a 0-axis bottom adds a scalar).
class BiasLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Bias"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  bool HasBackward() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    if (bottom.size() == 2) return;
    const auto& p = param_.bias_param();
    const Blob& b = *bottom[0];
    const int axes = b.num_axes();
    if (p.axis() < -axes || p.axis() >= std::max(axes, 1))
      Fail("bias_param.axis " + std::to_string(p.axis()) + " out of range for " + b.shape_string());
    const int axis = axes == 0 ? 0 : b.CanonicalAxisIndex(p.axis());
    if (p.num_axes() < -1) Fail("bias_param.num_axes must be >= -1, got " + std::to_string(p.num_axes()));
    const int end = p.num_axes() == -1 ? axes : axis + p.num_axes();
    if (end > axes)
      Fail("bias_param.num_axes " + std::to_string(p.num_axes()) + " too large for " +
           b.shape_string() + " from axis " + std::to_string(axis));
    caffe::FillerParameter filler = p.filler();
    if (!p.has_filler()) filler.set_type("constant");
    AddParam(std::vector<int>(b.shape().begin() + axis, b.shape().begin() + end), filler);
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& x = *bottom[0];
    const Blob& b = bottom.size() == 2 ? *bottom[1] : *blobs_[0];
    const int p_axis = param_.bias_param().axis();
    if (b.num_axes() > 0 && (p_axis < -x.num_axes() || p_axis >= x.num_axes()))
      Fail("bias_param.axis " + std::to_string(p_axis) + " out of range for " + x.shape_string());
    const int axis = b.num_axes() == 0 ? 0 : x.CanonicalAxisIndex(p_axis);
    for (int i = 0; i < b.num_axes(); ++i)
      if (axis + i >= x.num_axes() || x.shape(axis + i) != b.shape(i))
        Fail("bias shape " + b.shape_string() + " does not match bottom " + x.shape_string() +
             " from bias_param.axis " + std::to_string(axis));
    dim_ = b.count();
    inner_ = x.count(axis + b.num_axes());
    outer_ = x.count(0, axis);
    top[0]->ReshapeLike(x);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int n = bottom[0]->count();
    if (n == 0) return;
    const DataType t = compute_type_;
    Blob& b = bottom.size() == 2 ? *bottom[1] : *blobs_[0];
    const bool vec = HasVectorActivation(target(), t);
    Kernel k = GetKernel(ActivationSource(target(), t), ActivationLaunchName(target(), "bias", t));
    k.Arg(int32_t{n}).Arg(int32_t{dim_}).Arg(int32_t{inner_})
        .ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t)).ArgBuffer(b.device_data(), 0, SizeOf(t))
        .ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t));
    k.Launch1D(vec ? ChannelPlanesVectorItems(n) : size_t(n));
  }

  // dx = dy; db = Σ dy over the positions outside the bias's axes (a second bottom's diff is
  // overwritten, the parameter's accumulates, as in BVLC).
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    const int n = top[0]->count();
    if (n == 0) return;
    const bool bias_is_bottom = bottom.size() == 2;
    Blob& b = bias_is_bottom ? *bottom[1] : *blobs_[0];
    if (bias_is_bottom ? down[1] : param_propagate_down(0))
      LaunchChannelSum(device(), GetKernel(ChannelSumSource(target()), "channel_sum"), outer_,
                       dim_, inner_, top[0]->device_diff(), nullptr, b.mutable_device_diff(), 1.0f,
                       bias_is_bottom ? 0.0f : 1.0f);
    if (down[0] && top[0] != bottom[0])
      device().CopyOnDevice(top[0]->device_diff(), 0, bottom[0]->mutable_device_diff(), 0,
                            bottom[0]->bytes());
  }

 private:
  int dim_ = 1, inner_ = 1, outer_ = 1;
};

}  // namespace

void RegisterActivationLayers() {
  RegisterLayerType<PlainActivation<kSigmoid, kSigmoidOp>>("Sigmoid");
  RegisterLayerType<PlainActivation<kTanH, kTanHOp>>("TanH");
  RegisterLayerType<PlainActivation<kAbsVal, kAbsValOp>>("AbsVal");
  RegisterLayerType<PlainActivation<kBNLL, kBNLLOp>>("BNLL");
  RegisterLayerType<ClipLayer>("Clip");
  RegisterLayerType<ELULayer>("ELU");
  RegisterLayerType<ExpLayer>("Exp");
  RegisterLayerType<LogLayer>("Log");
  RegisterLayerType<PowerLayer>("Power");
  RegisterLayerType<SwishLayer>("Swish");
  RegisterLayerType<ThresholdLayer>("Threshold");
  RegisterLayerType<PReLULayer>("PReLU");
  RegisterLayerType<BiasLayer>("Bias");
}

}  // namespace mpcaffe
