// layers/lrn_layer.cc — LRN: ACROSS_CHANNELS on libdnn's LRN kernel (every type: quantized
// codes in and out of its float arithmetic), WITHIN_CHANNEL (BVLC's cifar10_full, float types)
// on its own kernels in layer_kernels / train_kernels.
#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"
#include "layers/train_kernels.h"
#include "libdnn/lrn.h"

namespace mpcaffe {
namespace {

class LRNLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "LRN"; }
  // Quantized across channels: the bottom's codes and the top's (a calibrated AlexNet's norm1
  // between two int8 layers) without the conversions to fp32 and back around it.
  bool SupportsType(DataType t) const override {
    return !IsQuantized(t) ||
           (param_.lrn_param().norm_region() == caffe::LRNParameter::ACROSS_CHANNELS &&
            (t == DataType::kInt8Q || t == DataType::kInt16Q));
  }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    const auto& p = param_.lrn_param();
    within_ = p.norm_region() == caffe::LRNParameter::WITHIN_CHANNEL;
    if (p.local_size() % 2 == 0)
      Fail("lrn_param.local_size must be odd, got " + std::to_string(p.local_size()));
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    if (b.num_axes() != 4) Fail("needs a 4-d (NCHW) bottom, got " + b.shape_string());
    const auto& p = param_.lrn_param();
    desc_ = libdnn::LrnDesc{};
    desc_.type = compute_type_;
    desc_.batch = b.shape(0), desc_.channels = b.shape(1);
    desc_.height = b.shape(2), desc_.width = b.shape(3);
    desc_.local_size = static_cast<int>(p.local_size());
    desc_.alpha = p.alpha(), desc_.beta = p.beta(), desc_.k = p.k();
    top[0]->ReshapeLike(b);
    lrn_.reset();
  }

 private:
  // WITHIN_CHANNEL: BVLC composes it of layers (square, average pooling of size × size with pad
  // (size − 1)/2, power with shift 1 and scale alpha, product), so k is not used; one kernel
  // here computes the same.
  void ForwardWithin(const Blob& x, Blob& y) {
    const int n = x.count();
    const DataType t = compute_type_;
    const bool keep = t == DataType::kFloat32;
    if (keep && scale_.size() < static_cast<size_t>(n)) scale_ = device().Alloc<float>(n);
    if (!keep && !scale_) scale_ = device().Alloc<float>(1);  // a valid, unused argument
    Kernel k = GetKernel(LrnWithinChannelSource(target(), t), LayerKernelName("lrn_within", t));
    k.Arg(int32_t{n}).Arg(int32_t{desc_.height}).Arg(int32_t{desc_.width})
        .Arg(int32_t{desc_.local_size}).Arg(desc_.alpha).Arg(desc_.beta)
        .ArgBuffer(x.device_data(), 0, SizeOf(t)).ArgBuffer(y.mutable_device_data(), 0, SizeOf(t))
        .Arg(scale_).Arg(int32_t{keep ? 1 : 0});
    k.Launch1D(n);
  }
  void BackwardWithin(const Blob& top, Blob& bottom) {
    const int n = bottom.count();
    Kernel k = GetKernel(LrnWithinChannelBackwardSource(target()), "lrn_within_backward");
    k.Arg(int32_t{n}).Arg(int32_t{desc_.height}).Arg(int32_t{desc_.width})
        .Arg(int32_t{desc_.local_size}).Arg(desc_.alpha).Arg(desc_.beta)
        .ArgBuffer(bottom.device_data(), 0, 4).ArgBuffer(top.device_data(), 0, 4)
        .ArgBuffer(top.device_diff(), 0, 4).Arg(scale_)
        .ArgBuffer(bottom.mutable_device_diff(), 0, 4);
    k.Launch1D(n);
  }

 public:

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (desc_.batch == 0) return;
    if (within_) return ForwardWithin(*bottom[0], *top[0]);
    if (IsQuantized(compute_type_)) {
      const Affine x = BottomAffine(0), y = TopAffine(0);
      const libdnn::LrnQuant q{x.scale, x.zero_point, y.scale, y.zero_point};
      if (lrn_ && (q.x_scale != desc_.quant.x_scale || q.x_zero != desc_.quant.x_zero ||
                   q.y_scale != desc_.quant.y_scale || q.y_zero != desc_.quant.y_zero))
        lrn_.reset();
      desc_.quant = q;
    }
    AcrossForward(*bottom[0], *top[0], KeepsScale());
  }

 private:
  // The scale is kept for Backward when training; an inference pass writes none (a Backward
  // there runs the forward again first).
  bool KeepsScale() const { return compute_type_ == DataType::kFloat32 && phase() == caffe::TRAIN; }
  void AcrossForward(const Blob& x, Blob& y, bool keep_scale) {
    if (!lrn_) lrn_ = std::make_unique<libdnn::Lrn>(device(), desc_);
    libdnn::BufferRef scale;
    if (keep_scale) {
      const size_t n = static_cast<size_t>(x.count());
      if (scale_.size() < n) scale_ = device().Alloc<float>(n);
      scale = scale_;
    }
    lrn_->Forward(libdnn::BufferRef(x.device_data(), 0),
                  libdnn::BufferRef(y.mutable_device_data(), 0), scale);
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0] || desc_.batch == 0) return;
    if (within_) {
      if (scale_.size() < static_cast<size_t>(bottom[0]->count())) Fail("Backward before Forward");
      return BackwardWithin(*top[0], *bottom[0]);
    }
    if (IsQuantized(compute_type_)) Fail("LRN backward computes in fp32 only");
    if (!lrn_) Fail("Backward before Forward");
    if (!KeepsScale()) AcrossForward(*bottom[0], *top[0], true);
    lrn_->Backward(libdnn::BufferRef(bottom[0]->device_data(), 0),
                   libdnn::BufferRef(top[0]->device_data(), 0),
                   libdnn::BufferRef(top[0]->device_diff(), 0), scale_,
                   libdnn::BufferRef(bottom[0]->mutable_device_diff(), 0));
  }

 private:
  bool within_ = false;
  libdnn::LrnDesc desc_;
  std::unique_ptr<libdnn::Lrn> lrn_;
  vptr<float> scale_;
};

}  // namespace

void RegisterLRNLayer() { RegisterLayerType<LRNLayer>("LRN"); }

}  // namespace mpcaffe
