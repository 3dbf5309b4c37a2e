// layers/softmax_layers.cc — Softmax, SoftmaxWithLoss, Accuracy, EuclideanLoss and
// SigmoidCrossEntropyLoss in float types (backward in fp32): per-position values and their
// reductions to the scalar top on the device.
#include <algorithm>
#include <cmath>
#include <string>

#include "codegen/target_profile.h"
#include "layers/layer_axis.h"
#include "layers/layer_kernels.h"
#include "layers/loss_kernels.h"
#include "layers/layer_registry.h"
#include "layers/loss_normalization.h"
#include "layers/train_kernels.h"

namespace mpcaffe {
namespace {

class SoftmaxLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Softmax"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    axis_ = AxisOfField(*bottom[0], param_.softmax_param().axis(), "softmax_param.axis", [this](const std::string& m) { Fail(m); });
    top[0]->ReshapeLike(*bottom[0]);
    // A classifier's few long rows (1000 classes at batch 1) by a work-group each where the
    // device's groups reduce in parallel (TargetProfile::group_reductions): a work-item per
    // row would leave all lanes but one idle and walk the row three times alone. Rows as many
    // as their channels or more keep a work-item each: enough of them for the cores, and no
    // barriers. Chosen per shape here, not per pass.
    const Blob& b = *bottom[0];
    const long rows = long(b.count(0, axis_)) * b.count(axis_ + 1), channels = b.shape(axis_);
    by_groups_ = TargetProfile::Of(device().info()).group_reductions &&
                 channels >= 4 * long(kLaunch1DLocalSize) && rows < channels;
    // Contiguous rows of at least two vectors on a CPU runtime: the row in vectors
    // (HasVectorSoftmax). Shorter rows keep a work-item each, which Intel's runtime packs into
    // its lanes (10 classes: 0.33 against 0.37 ms for 10000 rows, docs/BENCHMARKS.md).
    by_vectors_ = !by_groups_ && b.count(axis_ + 1) == 1 && channels >= 16 &&
                  HasVectorSoftmax(target(), compute_type_);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    const int outer = b.count(0, axis_), channels = b.shape(axis_), inner = b.count(axis_ + 1);
    if (outer * inner == 0) return;
    const DataType t = compute_type_;
    const long rows = long(outer) * inner;
    // The kernel kept from pass to pass: writing the program's text again for the device's
    // program table to look up cost the host more than the launch itself.
    Kernel& k = by_groups_ ? rows_kernel_ : by_vectors_ ? vector_kernel_ : row_kernel_;
    if (!k.device())
      k = GetKernel(SoftmaxSource(target(), t), by_groups_    ? SoftmaxRowsKernelName(t)
                                                : by_vectors_ ? SoftmaxVectorKernelName(t)
                                                              : LayerKernelName("softmax", t));
    DeviceMemory* x = bottom[0]->device_data();
    k.Arg(int32_t{outer}).Arg(int32_t{channels}).Arg(int32_t{inner})
        .ArgBuffer(x, 0, SizeOf(t)).ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t));
    if (by_groups_)
      k.Launch({size_t(rows) * kLaunch1DLocalSize, 1, 1}, {kLaunch1DLocalSize, 1, 1});
    else
      k.Launch1D(rows);
  }

 private:
  Kernel row_kernel_, rows_kernel_;  // a work-item per row; a work-group per row
  Kernel vector_kernel_;             // a work-item per contiguous row, in vectors
  bool by_groups_ = false;           // which of the three the current shape runs (Reshape)
  bool by_vectors_ = false;

 public:
  bool HasBackward() const override { return true; }

 protected:
  // dx = (dy − Σ_c dy·y) · y along the softmax axis.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0]) return;
    const Blob& b = *bottom[0];
    const int outer = b.count(0, axis_), channels = b.shape(axis_), inner = b.count(axis_ + 1);
    if (outer * inner == 0) return;
    Kernel k = GetKernel(SoftmaxBackwardSource(target()), "softmax_backward");
    DeviceMemory* y = top[0]->device_data();
    DeviceMemory* dy = top[0]->device_diff();
    k.Arg(int32_t{outer}).Arg(int32_t{channels}).Arg(int32_t{inner}).ArgBuffer(y, 0, 4)
        .ArgBuffer(dy, 0, 4).ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4);
    k.Launch1D(outer * inner);
  }

 private:
  int axis_ = 1;
};

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
    axis_ = AxisOfField(*bottom[0], param_.softmax_param().axis(), "softmax_param.axis", [this](const std::string& m) { Fail(m); });
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
    if (!norm_) norm_ = device().Alloc<float>(1);
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
    const auto mode = NormalizationOf(lp);
    MaskedMean(GetKernel(MaskedMeanSource(target(), top[0]->type()), MaskedMeanKernelName(top[0]->type())),
               outer_ * inner_, scratch_, *top[0], norm_, FixedNormalizer(mode, outer_, inner_),
               mode == caffe::LossParameter::VALID);
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // d scores = (prob − onehot(label)) · top_diff / normalizer; ignored labels get 0.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (down.size() > 1 && down[1]) Fail("cannot backpropagate to the labels");
    if (!down[0]) return;
    if (outer_ * inner_ == 0) return;
    const auto& lp = param_.loss_param();
    const int channels = bottom[0]->shape(axis_);
    Blob& prob = top.size() == 2 ? *top[1] : *prob_;
    Kernel k = GetKernel(SoftmaxLossBackwardSource(target()), "softmax_loss_backward");
    k.Arg(int32_t{outer_}).Arg(int32_t{channels}).Arg(int32_t{inner_})
        .ArgBuffer(prob.device_data(), 0, 4).ArgBuffer(bottom[1]->device_data(), 0, 4)
        .ArgBuffer(top[0]->device_diff(), 0, 4).Arg(norm_)
        .ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4)
        .Arg(int32_t{lp.ignore_label()}).Arg(int32_t{lp.has_ignore_label() ? 1 : 0});
    k.Launch1D(outer_ * inner_);
  }

 private:
  int axis_ = 1, outer_ = 0, inner_ = 0;
  std::unique_ptr<Blob> prob_;
  vptr<float> scratch_;
  vptr<float> norm_;  // the normalizer of the last Forward (VALID: counted on the device)
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
    if (!norm_) norm_ = device().Alloc<float>(1);
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
    // correct / counted (0 when nothing is counted), on the device.
    MaskedMean(GetKernel(MaskedMeanSource(target(), top[0]->type()), MaskedMeanKernelName(top[0]->type())),
               outer_ * inner_, scratch_, *top[0], norm_, 1.0f, true);
  }

 private:
  int axis_ = 1, outer_ = 0, inner_ = 0;
  vptr<float> scratch_;
  vptr<float> norm_;
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
    if (!norm_) norm_ = device().Alloc<float>(1);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    const int n = bottom[0]->count();
    if (n > 0) {
      Kernel k = GetKernel(SquaredDifferenceSource(target(), t), LayerKernelName("sqdiff", t));
      k.Arg(int32_t{n}).ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
          .ArgBuffer(bottom[1]->device_data(), 0, SizeOf(t)).Arg(scratch_);
      k.Launch1D(n);
    }
    // Σ (a − b)² / num / 2 on the device (all values count: squares are never negative).
    const int num = std::max(1, bottom[0]->shape(0));
    MaskedMean(GetKernel(MaskedMeanSource(target(), top[0]->type()), MaskedMeanKernelName(top[0]->type())),
               n, scratch_, *top[0], norm_, 2.0f * num, false);
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // d x0 = ±(x0 − x1) · top_diff / num.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    const int n = bottom[0]->count();
    if (n == 0) return;
    const float inv_num = 1.0f / std::max(1, bottom[0]->shape(0));
    Kernel k = GetKernel(EuclideanBackwardSource(target()), "euclidean_backward");
    for (int b = 0; b < 2; ++b) {
      if (!down[b]) continue;
      k.Arg(int32_t{n}).ArgBuffer(bottom[0]->device_data(), 0, 4)
          .ArgBuffer(bottom[1]->device_data(), 0, 4).ArgBuffer(top[0]->device_diff(), 0, 4)
          .ArgBuffer(bottom[b]->mutable_device_diff(), 0, 4).Arg(b == 0 ? inv_num : -inv_num);
      k.Launch1D(n);
    }
  }

 private:
  vptr<float> scratch_;
  vptr<float> norm_;
};

/// SigmoidCrossEntropyLoss: −Σ [t·log σ(x) + (1 − t)·log(1 − σ(x))] over every element of
/// bottom 0 against bottom 1 (targets in [0, 1], same count), normalized as loss_param says
/// (BVLC: outer = num, inner = count / num; VALID counts the elements whose target is not
/// ignore_label).
class SigmoidCrossEntropyLossLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "SigmoidCrossEntropyLoss"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  float DefaultLossWeight(int) const override { return 1.0f; }
  bool AllowForceBackward(int bottom) const override { return bottom != 1; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (bottom[0]->count() != bottom[1]->count())
      Fail("scores " + bottom[0]->shape_string() + " and targets " + bottom[1]->shape_string() +
           " must have the same count");
    outer_ = bottom[0]->num_axes() > 0 ? bottom[0]->shape(0) : 1;
    inner_ = bottom[0]->num_axes() > 0 ? bottom[0]->count(1) : 1;
    top[0]->Reshape({});
    const int n = std::max(1, bottom[0]->count());
    if (scratch_.size() < static_cast<size_t>(n)) scratch_ = device().Alloc<float>(n);
    if (!norm_) norm_ = device().Alloc<float>(1);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    const int n = bottom[0]->count();
    const auto& lp = param_.loss_param();
    if (n > 0) {
      Kernel k = GetKernel(SigmoidCrossEntropySource(target(), t), LayerKernelName("sigmoid_ce", t));
      k.Arg(int32_t{n}).ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
          .ArgBuffer(bottom[1]->device_data(), 0, SizeOf(t)).Arg(scratch_)
          .Arg(int32_t{lp.ignore_label()}).Arg(int32_t{lp.has_ignore_label() ? 1 : 0});
      k.Launch1D(n);
    }
    const auto mode = NormalizationOf(lp);
    MaskedMean(GetKernel(MaskedMeanSource(target(), top[0]->type()), MaskedMeanKernelName(top[0]->type())),
               n, scratch_, *top[0], norm_, FixedNormalizer(mode, outer_, inner_),
               mode == caffe::LossParameter::VALID);
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // d x = (σ(x) − t) · top_diff / normalizer; 0 where the target is ignored.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (down.size() > 1 && down[1]) Fail("cannot backpropagate to the targets");
    const int n = bottom[0]->count();
    if (!down[0] || n == 0) return;
    const auto& lp = param_.loss_param();
    Kernel k = GetKernel(SigmoidCrossEntropyBackwardSource(target()), "sigmoid_ce_backward");
    k.Arg(int32_t{n}).ArgBuffer(bottom[0]->device_data(), 0, 4)
        .ArgBuffer(bottom[1]->device_data(), 0, 4).ArgBuffer(top[0]->device_diff(), 0, 4)
        .Arg(norm_).ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4)
        .Arg(int32_t{lp.ignore_label()}).Arg(int32_t{lp.has_ignore_label() ? 1 : 0});
    k.Launch1D(n);
  }

 private:
  int outer_ = 1, inner_ = 1;
  vptr<float> scratch_;
  vptr<float> norm_;  // the normalizer of the last Forward (VALID: counted on the device)
};

}  // namespace

void RegisterSoftmaxLayers() {
  RegisterLayerType<SoftmaxLayer>("Softmax");
  RegisterLayerType<SoftmaxWithLossLayer>("SoftmaxWithLoss");
  RegisterLayerType<AccuracyLayer>("Accuracy");
  RegisterLayerType<EuclideanLossLayer>("EuclideanLoss");
  RegisterLayerType<SigmoidCrossEntropyLossLayer>("SigmoidCrossEntropyLoss");
}

}  // namespace mpcaffe
