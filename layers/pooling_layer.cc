// layers/pooling_layer.cc — Pooling: max, average and global (every dtype) on libdnn's pooling
// kernels with Caffe's output geometry, stochastic (float types, libdnn's stochastic kernels); SPP
// (spatial pyramid pooling) on the same kernels.
#include <algorithm>
#include <cfloat>
#include <memory>
#include <string>

#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"
#include "layers/random_values.h"
#include "layers/train_kernels.h"
#include "libdnn/pool.h"
#include "libdnn/pool_stochastic.h"
#include "quant/quant_params.h"

namespace mpcaffe {
namespace {

class PoolingLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Pooling"; }
  // Stochastic pooling draws from the values' distribution, which has no meaning on a
  // quantization grid's codes: float types only (convert keeps it in the float type).
  bool SupportsType(DataType t) const override { return !stochastic() || !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    const auto& p = param_.pooling_param();
    global_ = p.global_pooling();
    if (!global_) {
      kh_ = p.has_kernel_h() ? p.kernel_h() : p.kernel_size();
      kw_ = p.has_kernel_w() ? p.kernel_w() : p.kernel_size();
      if (kh_ <= 0 || kw_ <= 0) Fail("kernel_size (or kernel_h/kernel_w) must be positive");
    } else if (p.has_kernel_size() || p.has_kernel_h() || p.has_kernel_w()) {
      Fail("pooling_param: global_pooling takes no kernel_size (the window is the bottom's extent)");
    }
    sh_ = p.has_stride_h() ? p.stride_h() : p.stride();
    sw_ = p.has_stride_w() ? p.stride_w() : p.stride();
    ph_ = p.has_pad_h() ? p.pad_h() : p.pad();
    pw_ = p.has_pad_w() ? p.pad_w() : p.pad();
    const std::string pad = std::to_string(ph_) + "x" + std::to_string(pw_);
    // BVLC's checks: a global window has nowhere to pad or stride to, and stochastic pooling
    // samples inside the image only.
    if (global_ && (ph_ || pw_ || sh_ != 1 || sw_ != 1))
      Fail("pooling_param: global_pooling needs pad 0 and stride 1, got pad " + pad + " stride " +
           std::to_string(sh_) + "x" + std::to_string(sw_));
    if (stochastic() && (ph_ || pw_))
      Fail("pooling_param.pad " + pad + ": padding is for MAX and AVE pooling only, not STOCHASTIC");
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    if (b.num_axes() != 4) Fail("needs a 4-d (NCHW) bottom, got " + b.shape_string());
    desc_ = libdnn::PoolDesc{};
    desc_.type = compute_type_;
    desc_.method = param_.pooling_param().pool() == caffe::PoolingParameter::AVE
                       ? libdnn::PoolMethod::kAverage
                       : libdnn::PoolMethod::kMax;  // STOCHASTIC: the geometry only
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
    stochastic_.reset();
    sampled_ = false;
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (desc_.batch == 0) return;
    if (stochastic()) return StochasticForward(*bottom[0], *top[0]);
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
    if (stochastic()) return StochasticBackward(*top[0], *bottom[0]);
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
  std::unique_ptr<libdnn::StochasticPooling> stochastic_;
  vptr<float> uniform_;    // stochastic, train: the uniform value of each output
  vptr<int32_t> chosen_;   // stochastic, train: the sampled bottom index of each output
  bool sampled_ = false;   // chosen_ holds the samples of a TRAIN Forward of this shape
  uint64_t draws_ = 0;     // stochastic: forward passes sampled (each draws anew)

  bool stochastic() const {
    return param_.pooling_param().pool() == caffe::PoolingParameter::STOCHASTIC;
  }

  // BVLC's stochastic pooling (Zeiler & Fergus) on libdnn's kernels (pool_stochastic.h):
  // training samples one element per window with probability x / Σx, from a uniform value per
  // output drawn here (counter-based: the same values on every device and in the references);
  // testing outputs the probability-weighted average Σx² / Σx.
  void StochasticForward(const Blob& bottom, Blob& top) {
    if (!stochastic_) stochastic_ = std::make_unique<libdnn::StochasticPooling>(device(), desc_);
    const libdnn::BufferRef x(bottom.device_data(), 0), y(top.mutable_device_data(), 0);
    if (phase() != caffe::TRAIN) {
      stochastic_->ForwardTest(x, y);
      return;
    }
    const size_t outputs = desc_.output_count();
    const uint64_t seed = StableHash(name() + "#stochastic" + std::to_string(draws_++), RandomSeed());
    std::vector<float> u(outputs);
    for (size_t o = 0; o < outputs; ++o) u[o] = static_cast<float>(Uniform01(seed, o));
    if (uniform_.size() < outputs) {
      uniform_ = device().Alloc<float>(outputs);
      chosen_ = device().Alloc<int32_t>(outputs);
    }
    device().Write(uniform_, u.data(), outputs);
    stochastic_->ForwardTrain(x, uniform_, y, chosen_);
    sampled_ = true;
  }

  // The gradient goes to the sampled element of each window (accumulated where windows overlap).
  void StochasticBackward(const Blob& top, Blob& bottom) {
    if (!sampled_)
      Fail("Backward of STOCHASTIC pooling needs a TRAIN-phase Forward first (the sampled indices)");
    stochastic_->Backward(libdnn::BufferRef(top.device_diff(), 0), chosen_,
                          libdnn::BufferRef(bottom.mutable_device_diff(), 0));
  }

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

/// SPP (BVLC's spatial pyramid pooling): level l of pyramid_height pools the bottom into
/// 2^l × 2^l bins (kernel = stride = ⌈H / 2^l⌉, pad = (kernel·2^l − H + 1) / 2, the same along
/// W; Caffe's pooling geometry), and the levels, each flattened to [N][C·bins], are concatenated
/// along axis 1 — BVLC's split, pooling, flatten and concat layers, here libdnn's pooling into a
/// blob per level and the concat kernel. pyramid_height 1 gives the pooled [N][C][1][1] itself,
/// as BVLC. Every type natively: quantized levels pool from the bottom's quantization straight
/// into the top's (libdnn's requantizing pooling), so the concatenation copies codes; backward
/// fp32.
class SPPLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "SPP"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    const auto& p = param_.spp_param();
    if (p.pool() == caffe::SPPParameter::STOCHASTIC) Fail("spp_param.pool: STOCHASTIC is not supported");
    if (p.pyramid_height() < 1 || p.pyramid_height() > 16)
      Fail("spp_param.pyramid_height must be in [1, 16], got " + std::to_string(p.pyramid_height()));
  }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Blob& b = *bottom[0];
    if (b.num_axes() != 4) Fail("needs a 4-d (NCHW) bottom, got " + b.shape_string());
    const auto& p = param_.spp_param();
    const int height = static_cast<int>(p.pyramid_height());
    levels_.resize(height);
    masks_valid_ = false;
    int total = 0;
    for (int l = 0; l < height; ++l) {
      Level& v = levels_[l];
      const int bins = 1 << l;
      libdnn::PoolDesc d;
      d.type = compute_type_;
      d.method = p.pool() == caffe::SPPParameter::MAX ? libdnn::PoolMethod::kMax
                                                       : libdnn::PoolMethod::kAverage;
      d.batch = b.shape(0), d.channels = b.shape(1), d.height = b.shape(2), d.width = b.shape(3);
      d.kernel_h = (d.height + bins - 1) / bins, d.kernel_w = (d.width + bins - 1) / bins;
      d.stride_h = d.kernel_h, d.stride_w = d.kernel_w;
      d.pad_h = (d.kernel_h * bins - d.height + 1) / 2;
      d.pad_w = (d.kernel_w * bins - d.width + 1) / 2;
      try {
        d.Validate();
      } catch (const Error& e) {
        Fail("pyramid level " + std::to_string(l) + " (" + std::to_string(bins) + "x" +
             std::to_string(bins) + " bins) of bottom " + b.shape_string() + ": " + e.what());
      }
      if (!v.pool || d.ToString() != v.desc.ToString()) v.pool.reset();
      v.desc = d;
      if (!v.out) v.out = std::make_unique<Blob>(device(), compute_type_, std::vector<int>{}, name() + "/level" + std::to_string(l));
      v.out->Reshape({d.batch, d.channels, d.out_h(), d.out_w()});
      v.offset = total;
      total += v.out->count(1);
    }
    if (height == 1)
      top[0]->ReshapeLike(*levels_[0].out);
    else
      top[0]->Reshape({b.shape(0), total});
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    RunLevels(*bottom[0], compute_type_ == DataType::kFloat32 && phase() == caffe::TRAIN);
    const DataType t = compute_type_;
    Kernel k = GetKernel(ConcatSource(target(), t), LayerKernelName("concat", t));
    const int top_axis = top[0]->count(1);
    // Quantized levels hold codes of the top's quantization already: the copy's requantization
    // is the identity.
    const Affine y = IsQuantized(t) ? TopAffine(0) : Affine{};
    quant::FixedPointMultiplier one;
    if (IsQuantized(t)) one = quant::RescaleMultiplier(y.scale, y.scale);
    for (Level& v : levels_) {
      const int n = v.out->count();
      if (n == 0) continue;
      k.Arg(int32_t{n}).ArgBuffer(v.out->device_data(), 0, SizeOf(t))
          .ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t)).Arg(int32_t{v.out->count(1)})
          .Arg(int32_t{top_axis}).Arg(int32_t{1}).Arg(int32_t{v.offset})
          .Arg(y.zero_point).Arg(y.zero_point).Arg(one.multiplier).Arg(one.shift);
      k.Launch1D(n);
    }
  }

  // The split's sum of the levels' bottom diffs (overwritten, as BVLC's split).
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0] || bottom[0]->count() == 0) return;
    if (!masks_valid_) RunLevels(*bottom[0], true);  // max pooling's argmax
    Kernel slice = GetKernel(ConcatBackwardSource(target()), "concat_backward");
    const int top_axis = top[0]->count(1);
    if (levels_.size() > 1) {
      if (!scratch_) scratch_ = std::make_unique<Blob>(device(), DataType::kFloat32, std::vector<int>{}, name() + "/diff");
      scratch_->ReshapeLike(*bottom[0]);
    }
    for (size_t l = 0; l < levels_.size(); ++l) {
      Level& v = levels_[l];
      const int n = v.out->count();
      slice.Arg(int32_t{n}).ArgBuffer(top[0]->device_diff(), 0, 4)
          .ArgBuffer(v.out->mutable_device_diff(), 0, 4).Arg(int32_t{v.out->count(1)})
          .Arg(int32_t{top_axis}).Arg(int32_t{1}).Arg(int32_t{v.offset});
      slice.Launch1D(n);
      DeviceMemory* dx = l == 0 ? bottom[0]->mutable_device_diff() : scratch_->mutable_device_diff();
      v.pool->Backward(libdnn::BufferRef(v.out->device_diff(), 0), v.mask,
                       libdnn::BufferRef(dx, 0));
      if (l > 0)
        elementwise().Axpby(DataType::kFloat32, bottom[0]->count(), 1.0f, *dx, 1.0f,
                            *bottom[0]->mutable_device_diff());
    }
  }

 private:
  struct Level {
    libdnn::PoolDesc desc;
    std::unique_ptr<libdnn::Pooling> pool;
    std::unique_ptr<Blob> out;  // [N][C][bins][bins] (flattened into the top at `offset`)
    vptr<int32_t> mask;         // max pooling's argmax (fp32, for Backward)
    int offset = 0;
  };

  void RunLevels(const Blob& bottom, bool masks) {
    const bool max = param_.spp_param().pool() == caffe::SPPParameter::MAX;
    masks = masks && max;
    libdnn::PoolQuant q;
    if (IsQuantized(compute_type_)) {
      const Affine x = BottomAffine(0), y = TopAffine(0);
      q = {x.scale, x.zero_point, y.scale, y.zero_point};
    }
    const bool requant = q.x_scale != quant_.x_scale || q.x_zero != quant_.x_zero ||
                         q.y_scale != quant_.y_scale || q.y_zero != quant_.y_zero;
    quant_ = q;
    for (Level& v : levels_) {
      if (v.desc.batch == 0) continue;
      if (!v.pool || requant) v.pool = std::make_unique<libdnn::Pooling>(device(), v.desc, q);
      libdnn::BufferRef mask;
      if (masks) {
        if (v.mask.size() < v.desc.output_count()) v.mask = device().Alloc<int32_t>(v.desc.output_count());
        mask = v.mask;
      }
      v.pool->Forward(libdnn::BufferRef(bottom.device_data(), 0),
                      libdnn::BufferRef(v.out->mutable_device_data(), 0), mask);
    }
    masks_valid_ = masks || !max;
  }

  std::vector<Level> levels_;
  std::unique_ptr<Blob> scratch_;  // one level's bottom diff
  libdnn::PoolQuant quant_;        // the quantization the levels' pooling was built for
  bool masks_valid_ = false;
};

}  // namespace

void RegisterPoolingLayer() {
  RegisterLayerType<PoolingLayer>("Pooling");
  RegisterLayerType<SPPLayer>("SPP");
}

}  // namespace mpcaffe
