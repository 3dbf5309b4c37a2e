// layers/inner_product_layer.cc — InnerProduct (every dtype) on libdnn's GEMM with the bias
// and, for quantized types, the requantization fused into the kernel.
#include <cstring>

#include "device/settings.h"
#include "layers/layer_axis.h"
#include "layers/layer_registry.h"
#include "libdnn/gemm.h"
#include "libdnn/tuner.h"
#include "quant/accumulation.h"
#include "quant/weight_int4.h"

namespace mpcaffe {
namespace {

class InnerProductLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "InnerProduct"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    const auto& p = param_.inner_product_param();
    if (p.num_output() == 0) Fail("inner_product_param.num_output must be positive");
    axis_ = AxisOfField(*bottom[0], p.axis(), "inner_product_param.axis", [this](const std::string& m) { Fail(m); });
    n_ = static_cast<int>(p.num_output());
    k_ = bottom[0]->count(axis_);
    quant::CheckAccumulationDepth("layer '" + name() + "' (InnerProduct)", compute_type_, k_);
    // An int8 weight scale per output, as for convolutions (MPCAFFE_PER_CHANNEL_WEIGHTS=0 keeps
    // one): the rows of num_output × inputs weights. Transposed weights (inputs × num_output)
    // keep one scale: channel scales are kept along axis 0, which holds their inputs.
    if (p.transpose())
      AddParam({k_, n_}, p.weight_filler());
    else
      AddParam({n_, k_}, p.weight_filler(), false, GetSettings().per_channel_weights != "0");
    if (p.bias_term()) AddParam({n_}, p.bias_filler());
    if (blob_quantizer(0).weight_bits() == 4 && p.transpose())
      Fail("weight_bits 4 needs the weights stored num_output × inputs (transpose: false)");
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (bottom[0]->count(axis_) != k_)
      Fail("bottom " + bottom[0]->shape_string() + " has " + std::to_string(bottom[0]->count(axis_)) +
           " inputs per sample from axis " + std::to_string(axis_) + ", the weights expect " +
           std::to_string(k_));
    m_ = bottom[0]->count(0, axis_);
    std::vector<int> shape(bottom[0]->shape().begin(), bottom[0]->shape().begin() + axis_);
    shape.push_back(n_);
    top[0]->Reshape(shape);
  }
  void ParamsChanged() override { prepared_key_.clear(); }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (m_ == 0) return;
    Prepare();
    if (simulate_acc16() && Int4Weights(0)) {
      const auto* stored = static_cast<const uint8_t*>(blobs_[0]->host_data());
      std::vector<int8_t> w(blobs_[0]->count());
      for (size_t j = 0; j < w.size(); ++j) w[j] = static_cast<int8_t>(stored[j] - quant::kInt4StorageZero);
      acc16_overflow() += quant::Acc16InnerProduct(static_cast<const uint8_t*>(bottom[0]->host_data()),
                                                   m_, w.data(), n_, k_);
    }
    libdnn::GemmArgs args;
    args.a = libdnn::BufferRef(bottom[0]->device_data(), 0);
    args.b = packed_w_ ? libdnn::BufferRef(packed_w_.get(), 0)
                       : libdnn::BufferRef(folded_w_ ? folded_w_->device_data() : blobs_[0]->device_data(), 0);
    args.c = libdnn::BufferRef(top[0]->mutable_device_data(), 0);
    if (bias_) args.bias = libdnn::BufferRef(bias_.get(), 0);
    if (sums_) args.weight_sums = libdnn::BufferRef(sums_.get(), 0);
    gemm_->Run(args);
    if (release_param_copies()) gemm_->ReleaseScratch();  // reduced memory: the net's arena's
  }

 public:
  bool HasBackward() const override { return true; }
  // 4-bit weights run from their packed copy (Prepare): new values go to the host side only,
  // so that loading a caffemodel never holds the unpacked bytes on the device.
  bool DropsParamDeviceCopy(int i) const override { return i == 0 && Int4Weights(0); }
  // Float types fold a following BatchNorm / Scale into the weights and bias.
  EpilogueSupport FusionSupport() const override {
    return {true, !IsQuantized(compute_type_), false};
  }

 protected:
  // With W stored N×K (K×N when transposed): dX = dY·W, dW += dYᵀ·X (Xᵀ·dY), db += 1ᵀ·dY,
  // all on libdnn's fp32 GEMM.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (m_ == 0) return;
    const bool transpose = param_.inner_product_param().transpose();
    if (back_m_ != m_) {
      libdnn::GemmDesc dx;
      dx.M = m_, dx.N = k_, dx.K = n_, dx.trans_b = transpose;
      gemm_dx_ = std::make_unique<libdnn::Gemm>(device(), dx);
      libdnn::GemmDesc dw;
      dw.trans_a = true;
      if (transpose)
        dw.M = k_, dw.N = n_, dw.K = m_;  // Xᵀ·dY
      else
        dw.M = n_, dw.N = k_, dw.K = m_;  // dYᵀ·X
      dw.weights = libdnn::WeightOperand::kA;
      gemm_dw_ = std::make_unique<libdnn::Gemm>(device(), dw);
      libdnn::GemmDesc db;
      db.M = 1, db.N = n_, db.K = m_;
      gemm_db_ = std::make_unique<libdnn::Gemm>(device(), db);
      ones_ = device().Alloc<float>(m_);
      const std::vector<float> ones(m_, 1.0f);
      device().Write(ones_, ones.data(), m_);
      back_m_ = m_;
    }
    const libdnn::BufferRef dy(top[0]->device_diff(), 0);
    const libdnn::BufferRef x(bottom[0]->device_data(), 0);
    if (param_propagate_down(0)) {
      libdnn::GemmArgs a;
      a.a = transpose ? x : dy;
      a.b = transpose ? dy : x;
      a.c = libdnn::BufferRef(blobs_[0]->mutable_device_diff(), 0);
      a.beta = 1.0f;
      gemm_dw_->Run(a);
    }
    if (param_.inner_product_param().bias_term() && param_propagate_down(1)) {
      libdnn::GemmArgs a;
      a.a = ones_;
      a.b = dy;
      a.c = libdnn::BufferRef(blobs_[1]->mutable_device_diff(), 0);
      a.beta = 1.0f;
      gemm_db_->Run(a);
    }
    if (down[0]) {
      libdnn::GemmArgs a;
      a.a = dy;
      a.b = libdnn::BufferRef(blobs_[0]->device_data(), 0);
      a.c = libdnn::BufferRef(bottom[0]->mutable_device_diff(), 0);
      gemm_dx_->Run(a);
    }
  }

 private:
  /// (Re)builds the GEMM and the derived bias / weight sums when the shape, the parameters or
  /// the quantization changed.
  void Prepare() {
    if (!prepared_key_.empty() && PreparedFor(prepared_stamp_)) return;
    const PrepareStamp stamp = CurrentPrepareStamp();
    const auto& p = param_.inner_product_param();
    const DataType t = compute_type_;
    libdnn::GemmDesc d;
    d.type = t;
    d.out_type = t;
    d.M = m_;
    d.N = n_;
    d.K = k_;
    d.trans_b = !p.transpose();
    d.weights = libdnn::WeightOperand::kB;
    const bool packed4 = Int4Weights(0);  // packed signed 4-bit weights, zero point 0
    d.weight_bits = packed4 ? 4 : 8;
    d.weights_signed = packed4;
    d.weight_zero = !packed4;
    std::vector<float> scale, shift;  // folded BatchNorm / Scale: y = scale[n]·(W·x) + shift[n]
    if (fused()) fused()->Affine(n_, &scale, &shift);
    const bool folded = !scale.empty();
    d.bias = p.bias_term() || folded;
    d.relu = relu_fused();
    // What the GEMM is built from, as raw bytes (AppendKey): the shape, the quantization of the
    // input, weights and output, the folded factors. Everything below derives from these, so an
    // unchanged key skips it.
    std::string key = d.ToString();
    quant::QuantParams x, w, c;
    if (IsQuantized(t)) {
      x = BottomParams(0), w = BlobParams(0), c = OutputParams();
      AppendKey(&key, x);
      AppendKey(&key, w);
      AppendKey(&key, c);
    }
    AppendKey(&key, scale);
    AppendKey(&key, shift);
    if (key == prepared_key_) {
      prepared_stamp_ = stamp;
      return;
    }
    libdnn::GemmQuant q;
    double s_x = 1.0;
    std::vector<float> s_w{1.0f};
    if (IsQuantized(t)) {
      q.x_zero = x.zero_point[0];
      q.w_zero = packed4 ? 0 : w.zero_point[0];
      q.c_zero = c.zero_point[0];
      d.per_channel = w.per_channel();
      q.multiplier.clear();
      for (size_t o = 0; o < w.scale.size(); ++o)
        q.multiplier.push_back(quant::RequantizationMultiplier(x.scale[0], w.scale[o], c.scale[0]));
      s_x = x.scale[0];
      s_w = w.scale;
    }
    // 4-bit weights where no 4-bit kernel serves this device and shape (GemmDefaults: a compiler
    // without byte pair or quad products, or more activation rows than weight rows; or the
    // tuning table's choice): the int8 GEMM on the blob's own bytes (w + 128, zero point 128),
    // at int8's time and memory, no packed copy.
    const bool w4 =
        packed4 && libdnn::TunedGemmConfig(device(), d).kp == libdnn::GemmConfig::kU8S4;
    if (packed4 && !w4) {
      d.weight_bits = 8;
      d.weights_signed = false;
      d.weight_zero = true;
      q.w_zero = quant::kInt4StorageZero;
    }
    gemm_ = std::make_unique<libdnn::Gemm>(device(), d, q);
    gemm_->set_scratch_arena(scratch_arena());
    bias_.reset();
    sums_.reset();
    folded_w_.reset();
    packed_w_.reset();
    if (w4) packed_w_ = UploadInt4Weights(0);
    if (folded) {  // float types only (FusionSupport): W scaled per output on a device copy
      std::vector<float> w = ParamAsFloat(0);
      for (int k = 0; k < k_; ++k)
        for (int n = 0; n < n_; ++n) w[p.transpose() ? size_t(k) * n_ + n : size_t(n) * k_ + k] *= scale[n];
      folded_w_ = std::make_unique<Blob>(device(), t, blobs_[0]->shape(), name() + "/folded");
      folded_w_->FromFloat(w);
    }
    if (d.bias) {
      std::vector<float> b = p.bias_term() ? ParamAsFloat(1) : std::vector<float>(n_, 0.0f);
      if (folded)
        for (int n = 0; n < n_; ++n) b[n] = b[n] * scale[n] + shift[n];
      const std::vector<uint8_t> bytes = AccumulatorBias(b, t, s_x, s_w);
      bias_ = device().Allocate(bytes.size());
      device().CopyToDevice(bytes.data(), bias_.get(), 0, bytes.size());
    }
    if (IsQuantized(t)) {
      sums_ = device().Allocate(n_ * TraitsOf(t).acc_bytes());
      gemm_->ComputeWeightSums(packed_w_ ? libdnn::BufferRef(packed_w_.get(), 0)
                                         : libdnn::BufferRef(blobs_[0]->device_data(), 0),
                               libdnn::BufferRef(sums_.get(), 0));
    }
    // 4-bit weights on their own kernel: only the packed copy stays on the device.
    if (w4) blobs_[0]->ReleaseDeviceData();
    prepared_key_ = key;
    prepared_stamp_ = stamp;
  }

  int axis_ = 1, m_ = 0, n_ = 0, k_ = 0;
  std::string prepared_key_;
  PrepareStamp prepared_stamp_;  // of the last Prepare that built or checked the key
  std::unique_ptr<libdnn::Gemm> gemm_;
  std::shared_ptr<DeviceMemory> bias_, sums_;
  std::unique_ptr<Blob> folded_w_;  // the weights with a folded BatchNorm / Scale
  std::shared_ptr<DeviceMemory> packed_w_;  // 4-bit weights: the packed device copy
  int back_m_ = -1;  // the batch the backward GEMMs were built for
  std::unique_ptr<libdnn::Gemm> gemm_dx_, gemm_dw_, gemm_db_;
  vptr<float> ones_;
};

}  // namespace

void RegisterInnerProductLayer() { RegisterLayerType<InnerProductLayer>("InnerProduct"); }

}  // namespace mpcaffe
