// layers/pooling_layer.cc — Pooling: max, average and global (every dtype) on libdnn's pooling
// kernels with Caffe's output geometry.
#include "layers/layer_registry.h"
#include "libdnn/pool.h"

namespace mpcaffe {
namespace {

class PoolingLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Pooling"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    const auto& p = param_.pooling_param();
    if (p.pool() == caffe::PoolingParameter::STOCHASTIC) Fail("STOCHASTIC pooling is not supported");
    global_ = p.global_pooling();
    if (!global_) {
      kh_ = p.has_kernel_h() ? p.kernel_h() : p.kernel_size();
      kw_ = p.has_kernel_w() ? p.kernel_w() : p.kernel_size();
      if (kh_ <= 0 || kw_ <= 0) Fail("kernel_size (or kernel_h/kernel_w) must be positive");
    }
    sh_ = p.has_stride_h() ? p.stride_h() : p.stride();
    sw_ = p.has_stride_w() ? p.stride_w() : p.stride();
    ph_ = p.has_pad_h() ? p.pad_h() : p.pad();
    pw_ = p.has_pad_w() ? p.pad_w() : p.pad();
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    if (b.num_axes() != 4) Fail("needs a 4-d (NCHW) bottom, got " + b.shape_string());
    desc_ = libdnn::PoolDesc{};
    desc_.type = compute_type_;
    desc_.method = param_.pooling_param().pool() == caffe::PoolingParameter::MAX
                       ? libdnn::PoolMethod::kMax
                       : libdnn::PoolMethod::kAverage;
    desc_.batch = b.shape(0), desc_.channels = b.shape(1);
    desc_.height = b.shape(2), desc_.width = b.shape(3);
    desc_.kernel_h = kh_, desc_.kernel_w = kw_;
    desc_.stride_h = sh_, desc_.stride_w = sw_;
    desc_.pad_h = ph_, desc_.pad_w = pw_;
    desc_.global = global_;
    try {
      desc_.Validate();
    } catch (const Error& e) {
      Fail(std::string("bottom ") + b.shape_string() + ": " + e.what());
    }
    top[0]->Reshape({desc_.batch, desc_.channels, desc_.out_h(), desc_.out_w()});
    pool_.reset();
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (desc_.batch == 0) return;
    libdnn::PoolQuant q;
    if (IsQuantized(compute_type_)) {
      const Affine x = BottomAffine(0), y = TopAffine(0);
      q = {x.scale, x.zero_point, y.scale, y.zero_point};
    }
    if (!pool_ || q.x_scale != quant_.x_scale || q.x_zero != quant_.x_zero ||
        q.y_scale != quant_.y_scale || q.y_zero != quant_.y_zero) {
      pool_ = std::make_unique<libdnn::Pooling>(device(), desc_, q);
      quant_ = q;
    }
    // Argmax indices for Backward when training (fp32, max pooling). An inference net goes
    // without (its vector kernel writes none); a Backward there runs the forward again first.
    const bool mask = compute_type_ == DataType::kFloat32 &&
                      desc_.method == libdnn::PoolMethod::kMax && phase() == caffe::TRAIN;
    RunForward(*bottom[0], *top[0], mask);
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0] || desc_.batch == 0) return;
    if (!pool_) Fail("Backward before Forward");
    if (desc_.method == libdnn::PoolMethod::kMax && !mask_valid_) RunForward(*bottom[0], *top[0], true);
    pool_->Backward(libdnn::BufferRef(top[0]->device_diff(), 0), mask_,
                    libdnn::BufferRef(bottom[0]->mutable_device_diff(), 0));
  }

 private:
  bool global_ = false;
  int kh_ = 0, kw_ = 0, sh_ = 1, sw_ = 1, ph_ = 0, pw_ = 0;
  libdnn::PoolDesc desc_;
  libdnn::PoolQuant quant_;
  std::unique_ptr<libdnn::Pooling> pool_;
  vptr<int32_t> mask_;
  bool mask_valid_ = false;  // mask_ holds the argmax of the last Forward

  void RunForward(Blob& bottom, Blob& top, bool with_mask) {
    libdnn::BufferRef mask;
    if (with_mask) {
      if (mask_.size() < desc_.output_count()) mask_ = device().Alloc<int32_t>(desc_.output_count());
      mask = mask_;
    }
    pool_->Forward(libdnn::BufferRef(bottom.device_data(), 0),
                   libdnn::BufferRef(top.mutable_device_data(), 0), mask);
    mask_valid_ = with_mask;
  }
};

}  // namespace

void RegisterPoolingLayer() { RegisterLayerType<PoolingLayer>("Pooling"); }

}  // namespace mpcaffe
