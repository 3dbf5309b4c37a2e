// layers/loss_layers.cc — BVLC's HingeLoss, MultinomialLogisticLoss, ContrastiveLoss and
// InfogainLoss in float types (backward in fp32): per-row or per-position loss values on the
// device, reduced to the scalar top by masked_mean.
#include <algorithm>
#include <memory>
#include <string>

#include "layers/layer_kernels.h"
#include "layers/loss_kernels.h"
#include "layers/layer_registry.h"
#include "layers/loss_normalization.h"
#include "layers/train_kernels.h"
#include "proto/model_io.h"

namespace mpcaffe {
namespace {

/// The part the (num, dim) losses share: bottom 0 holds num rows of dim = count / num values,
/// bottom 1 one label per row; the per-element (or per-row) values reduce to Σ / fixed norm.
class RowLossLayer : public Layer {
 public:
  using Layer::Layer;
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  float DefaultLossWeight(int) const override { return 1.0f; }
  bool AllowForceBackward(int bottom) const override { return bottom != 1; }
  bool HasBackward() const override { return true; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (bottom[0]->num_axes() == 0) Fail("the scores need a first (num) axis");
    num_ = bottom[0]->shape(0);
    dim_ = num_ > 0 ? bottom[0]->count() / num_ : 0;
    if (bottom[1]->count() != num_)
      Fail("labels " + bottom[1]->shape_string() + " must hold one label per row of the " +
           std::to_string(num_) + " rows of " + bottom[0]->shape_string());
    top[0]->Reshape({});
    const int n = std::max(1, bottom[0]->count());
    if (scratch_.size() < static_cast<size_t>(n)) scratch_ = device().Alloc<float>(n);
    if (!norm_) norm_ = device().Alloc<float>(1);
  }

 protected:
  /// top = Σ of the first n scratch values / num.
  void Reduce(int n, Blob& top) {
    MaskedMean(GetKernel(MaskedMeanSource(target(), top.type()), MaskedMeanKernelName(top.type())),
               n, scratch_, top, norm_, static_cast<float>(num_), false);
  }
  void RefuseLabels(const std::vector<bool>& down) const {
    if (down.size() > 1 && down[1]) Fail("cannot backpropagate to the labels");
  }
  float InvNum() const { return 1.0f / std::max(1, num_); }

  int num_ = 0, dim_ = 0;
  vptr<float> scratch_;
  vptr<float> norm_;
};

/// HingeLoss: Σ_rows Σ_classes max(0, 1 ± x)^p / num with − at the labelled class, p = 1 (L1)
/// or 2 (L2), as BVLC's one-vs-all hinge.
class HingeLossLayer : public RowLossLayer {
 public:
  using RowLossLayer::RowLossLayer;
  const char* type() const override { return "HingeLoss"; }

 protected:
  bool L2() const { return param_.hinge_loss_param().norm() == caffe::HingeLossParameter::L2; }

  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    const int n = num_ * dim_;
    if (n > 0) {
      Kernel k = GetKernel(HingeLossSource(target(), t), LayerKernelName("hinge", t));
      k.Arg(int32_t{num_}).Arg(int32_t{dim_}).ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
          .ArgBuffer(bottom[1]->device_data(), 0, SizeOf(t)).Arg(scratch_)
          .Arg(int32_t{L2() ? 1 : 0});
      k.Launch1D(n);
    }
    Reduce(n, *top[0]);
  }

  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    RefuseLabels(down);
    if (!down[0] || num_ * dim_ == 0) return;
    Kernel k = GetKernel(HingeLossBackwardSource(target()), "hinge_backward");
    k.Arg(int32_t{num_}).Arg(int32_t{dim_}).ArgBuffer(bottom[0]->device_data(), 0, 4)
        .ArgBuffer(bottom[1]->device_data(), 0, 4).ArgBuffer(top[0]->device_diff(), 0, 4)
        .ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4).Arg(int32_t{L2() ? 1 : 0}).Arg(InvNum());
    k.Launch1D(num_ * dim_);
  }
};

/// MultinomialLogisticLoss: −Σ_rows log(max(prob[label], 1e-20)) / num over probabilities
/// (not scores: BVLC's layer takes a Softmax's output).
class MultinomialLogisticLossLayer : public RowLossLayer {
 public:
  using RowLossLayer::RowLossLayer;
  const char* type() const override { return "MultinomialLogisticLoss"; }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    if (num_ > 0 && dim_ > 0) {
      Kernel k = GetKernel(MultinomialLogisticLossSource(target(), t),
                           LayerKernelName("multinomial_logistic", t));
      k.Arg(int32_t{num_}).Arg(int32_t{dim_}).ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
          .ArgBuffer(bottom[1]->device_data(), 0, SizeOf(t)).Arg(scratch_);
      k.Launch1D(num_);
    }
    Reduce(dim_ > 0 ? num_ : 0, *top[0]);
  }

  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    RefuseLabels(down);
    if (!down[0] || num_ * dim_ == 0) return;
    Kernel k =
        GetKernel(MultinomialLogisticLossBackwardSource(target()), "multinomial_logistic_backward");
    k.Arg(int32_t{num_}).Arg(int32_t{dim_}).ArgBuffer(bottom[0]->device_data(), 0, 4)
        .ArgBuffer(bottom[1]->device_data(), 0, 4).ArgBuffer(top[0]->device_diff(), 0, 4)
        .ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4).Arg(InvNum());
    k.Launch1D(num_ * dim_);
  }
};

/// ContrastiveLoss (Hadsell et al. 2006): bottoms a, b (num rows of dim values each) and the
/// similarity y (one per row); Σ_rows [y ? d² : max(0, margin − d)²] / (2·num) with d = ‖a − b‖
/// (legacy_version: max(0, margin − d²)).
class ContrastiveLossLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "ContrastiveLoss"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 1; }
  float DefaultLossWeight(int) const override { return 1.0f; }
  bool AllowForceBackward(int bottom) const override { return bottom != 2; }
  bool HasBackward() const override { return true; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (bottom[0]->num_axes() == 0 || bottom[0]->shape() != bottom[1]->shape())
      Fail("the two feature bottoms " + bottom[0]->shape_string() + " and " +
           bottom[1]->shape_string() + " must have the same shape with a first (num) axis");
    num_ = bottom[0]->shape(0);
    dim_ = bottom[0]->count(1);
    if (bottom[2]->count() != num_)
      Fail("the similarity bottom " + bottom[2]->shape_string() +
           " must hold one value per row of the " + std::to_string(num_) + " rows of " +
           bottom[0]->shape_string());
    top[0]->Reshape({});
    const int n = std::max(1, num_);
    if (scratch_.size() < static_cast<size_t>(n)) scratch_ = device().Alloc<float>(n);
    if (dist_sq_.size() < static_cast<size_t>(n)) dist_sq_ = device().Alloc<float>(n);
    if (!norm_) norm_ = device().Alloc<float>(1);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    const auto& p = param_.contrastive_loss_param();
    if (num_ > 0) {
      Kernel k = GetKernel(ContrastiveLossSource(target(), t), LayerKernelName("contrastive", t));
      k.Arg(int32_t{num_}).Arg(int32_t{dim_}).ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
          .ArgBuffer(bottom[1]->device_data(), 0, SizeOf(t))
          .ArgBuffer(bottom[2]->device_data(), 0, SizeOf(t)).Arg(scratch_).Arg(dist_sq_)
          .Arg(p.margin()).Arg(int32_t{p.legacy_version() ? 1 : 0});
      k.Launch1D(num_);
    }
    MaskedMean(
        GetKernel(MaskedMeanSource(target(), top[0]->type()), MaskedMeanKernelName(top[0]->type())),
        num_, scratch_, *top[0], norm_, 2.0f * num_, false);
  }

  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (down.size() > 2 && down[2]) Fail("cannot backpropagate to the similarity labels");
    if (num_ * dim_ == 0) return;
    const auto& p = param_.contrastive_loss_param();
    const float inv_num = 1.0f / num_;
    Kernel k = GetKernel(ContrastiveLossBackwardSource(target()), "contrastive_backward");
    for (int i = 0; i < 2; ++i) {
      if (!down[i]) continue;
      k.Arg(int32_t{num_}).Arg(int32_t{dim_}).ArgBuffer(bottom[0]->device_data(), 0, 4)
          .ArgBuffer(bottom[1]->device_data(), 0, 4).ArgBuffer(bottom[2]->device_data(), 0, 4)
          .Arg(dist_sq_).ArgBuffer(top[0]->device_diff(), 0, 4)
          .ArgBuffer(bottom[i]->mutable_device_diff(), 0, 4).Arg(i == 0 ? inv_num : -inv_num)
          .Arg(p.margin()).Arg(int32_t{p.legacy_version() ? 1 : 0});
      k.Launch1D(num_ * dim_);
    }
  }

 private:
  int num_ = 0, dim_ = 0;
  vptr<float> scratch_, dist_sq_;
  vptr<float> norm_;
};

/// InfogainLoss, BVLC's generalization of SoftmaxWithLoss: softmax of bottom 0 along
/// infogain_loss_param.axis, then −Σ_c H[label, c]·log(prob_c) per position, normalized as
/// loss_param says. H (channels × channels) is bottom 2 or the binaryproto
/// infogain_loss_param.source; an optional second top holds the probabilities.
class InfogainLossLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "InfogainLoss"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 3; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  float DefaultLossWeight(int top) const override { return top == 0 ? 1.0f : 0.0f; }
  bool AllowForceBackward(int bottom) const override { return bottom == 0; }
  bool HasBackward() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    if (bottom.size() == 3) return;
    const auto& p = param_.infogain_loss_param();
    if (!p.has_source())
      Fail("without a third bottom the infogain matrix needs infogain_loss_param.source");
    caffe::BlobProto proto;
    try {
      proto = ReadBlobProtoBinary(p.source());
    } catch (const std::exception& e) {
      Fail(std::string("infogain_loss_param.source: ") + e.what());
    }
    std::vector<float> values(proto.data().begin(), proto.data().end());
    if (values.empty()) values.assign(proto.double_data().begin(), proto.double_data().end());
    if (values.empty())
      Fail("infogain_loss_param.source " + p.source() + " holds no float or double data");
    h_values_ = std::move(values);
  }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    axis_ = bottom[0]->CanonicalAxisIndex(param_.infogain_loss_param().axis());
    outer_ = bottom[0]->count(0, axis_);
    inner_ = bottom[0]->count(axis_ + 1);
    channels_ = bottom[0]->shape(axis_);
    if (outer_ * inner_ != bottom[1]->count())
      Fail("label count " + std::to_string(bottom[1]->count()) + " must equal outer·inner " +
           std::to_string(outer_ * inner_) + " of the scores " + bottom[0]->shape_string());
    const size_t h_count =
        bottom.size() == 3 ? static_cast<size_t>(bottom[2]->count()) : h_values_.size();
    if (h_count != static_cast<size_t>(channels_) * channels_)
      Fail("the infogain matrix (" +
           std::string(bottom.size() == 3 ? "bottom 2" : "infogain_loss_param.source") +
           ") holds " + std::to_string(h_count) + " values, not " + std::to_string(channels_) +
           "² for the " + std::to_string(channels_) + " classes of axis " + std::to_string(axis_));
    if (bottom.size() == 2 && !h_) {
      h_ = std::make_unique<Blob>(device(), compute_type_, std::vector<int>{channels_, channels_},
                                  name() + "/H");
      h_->FromFloat(h_values_);
    }
    if (!prob_)
      prob_ = std::make_unique<Blob>(device(), compute_type_, std::vector<int>{}, name() + "/prob");
    prob_->ReshapeLike(*bottom[0]);
    top[0]->Reshape({});
    if (top.size() == 2) top[1]->ReshapeLike(*bottom[0]);
    const int n = std::max(1, outer_ * inner_);
    if (scratch_.size() < static_cast<size_t>(n)) scratch_ = device().Alloc<float>(n);
    if (!norm_) norm_ = device().Alloc<float>(1);
  }

 protected:
  const Blob& H(const std::vector<Blob*>& bottom) const {
    return bottom.size() == 3 ? *bottom[2] : *h_;
  }

  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    Blob& prob = top.size() == 2 ? *top[1] : *prob_;
    const int positions = outer_ * inner_;
    if (positions > 0) {
      Kernel sm = GetKernel(SoftmaxSource(target(), t), LayerKernelName("softmax", t));
      sm.Arg(int32_t{outer_}).Arg(int32_t{channels_}).Arg(int32_t{inner_})
          .ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
          .ArgBuffer(prob.mutable_device_data(), 0, SizeOf(t));
      sm.Launch1D(positions);
      const auto& lp = param_.loss_param();
      Kernel k = GetKernel(InfogainLossSource(target(), t), LayerKernelName("infogain", t));
      k.Arg(int32_t{outer_}).Arg(int32_t{channels_}).Arg(int32_t{inner_})
          .ArgBuffer(prob.device_data(), 0, SizeOf(t))
          .ArgBuffer(bottom[1]->device_data(), 0, SizeOf(t))
          .ArgBuffer(H(bottom).device_data(), 0, SizeOf(t)).Arg(scratch_)
          .Arg(int32_t{lp.ignore_label()}).Arg(int32_t{lp.has_ignore_label() ? 1 : 0});
      k.Launch1D(positions);
    }
    const auto mode = NormalizationOf(param_.loss_param());
    // Infogain values may be negative (H is any matrix): only the −3.4e38 mark is ignored.
    MaskedMean(
        GetKernel(MaskedMeanSource(target(), top[0]->type()), MaskedMeanKernelName(top[0]->type())),
        positions, scratch_, *top[0], norm_, FixedNormalizer(mode, outer_, inner_),
        mode == caffe::LossParameter::VALID, -3.0e38f);
  }

  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (down.size() > 1 && down[1]) Fail("cannot backpropagate to the labels");
    if (down.size() > 2 && down[2]) Fail("cannot backpropagate to the infogain matrix");
    if (!down[0] || outer_ * inner_ == 0) return;
    const auto& lp = param_.loss_param();
    Blob& prob = top.size() == 2 ? *top[1] : *prob_;
    Kernel k = GetKernel(InfogainLossBackwardSource(target()), "infogain_backward");
    k.Arg(int32_t{outer_}).Arg(int32_t{channels_}).Arg(int32_t{inner_})
        .ArgBuffer(prob.device_data(), 0, 4).ArgBuffer(bottom[1]->device_data(), 0, 4)
        .ArgBuffer(H(bottom).device_data(), 0, 4).ArgBuffer(top[0]->device_diff(), 0, 4).Arg(norm_)
        .ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4).Arg(int32_t{lp.ignore_label()})
        .Arg(int32_t{lp.has_ignore_label() ? 1 : 0});
    k.Launch1D(outer_ * inner_);
  }

 private:
  int axis_ = 1, outer_ = 0, inner_ = 0, channels_ = 0;
  std::vector<float> h_values_;  // the matrix read from infogain_loss_param.source
  std::unique_ptr<Blob> h_, prob_;
  vptr<float> scratch_;
  vptr<float> norm_;  // the normalizer of the last Forward (VALID: counted on the device)
};

}  // namespace

void RegisterLossLayers() {
  RegisterLayerType<HingeLossLayer>("HingeLoss");
  RegisterLayerType<MultinomialLogisticLossLayer>("MultinomialLogisticLoss");
  RegisterLayerType<ContrastiveLossLayer>("ContrastiveLoss");
  RegisterLayerType<InfogainLossLayer>("InfogainLoss");
}

}  // namespace mpcaffe
