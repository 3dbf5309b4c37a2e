// layers/lrn_layer.cc — LRN across channels (float types) on libdnn's LRN kernel.
#include "layers/layer_registry.h"
#include "libdnn/lrn.h"

namespace mpcaffe {
namespace {

class LRNLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "LRN"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    const auto& p = param_.lrn_param();
    if (p.norm_region() != caffe::LRNParameter::ACROSS_CHANNELS)
      Fail("only ACROSS_CHANNELS normalization is supported");
    if (p.local_size() % 2 == 0) Fail("local_size must be odd, got " + std::to_string(p.local_size()));
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

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (desc_.batch == 0) return;
    if (!lrn_) lrn_ = std::make_unique<libdnn::Lrn>(device(), desc_);
    libdnn::BufferRef scale;
    if (compute_type_ == DataType::kFloat32) {  // kept for Backward
      const size_t n = static_cast<size_t>(bottom[0]->count());
      if (scale_.size() < n) scale_ = device().Alloc<float>(n);
      scale = scale_;
    }
    lrn_->Forward(libdnn::BufferRef(bottom[0]->device_data(), 0),
                  libdnn::BufferRef(top[0]->mutable_device_data(), 0), scale);
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0] || desc_.batch == 0) return;
    if (!lrn_) Fail("Backward before Forward");
    lrn_->Backward(libdnn::BufferRef(bottom[0]->device_data(), 0),
                   libdnn::BufferRef(top[0]->device_data(), 0),
                   libdnn::BufferRef(top[0]->device_diff(), 0), scale_,
                   libdnn::BufferRef(bottom[0]->mutable_device_diff(), 0));
  }

 private:
  libdnn::LrnDesc desc_;
  std::unique_ptr<libdnn::Lrn> lrn_;
  vptr<float> scale_;
};

}  // namespace

void RegisterLRNLayer() { RegisterLayerType<LRNLayer>("LRN"); }

}  // namespace mpcaffe
