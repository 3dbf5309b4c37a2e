// layers/index_layers.cc — BVLC's layers that pick rows by an index read from a blob: Filter
// (the rows whose selector is not 0), BatchReindex (rows in the order of an index list) and
// Embed (rows of a weight matrix, a one-hot InnerProduct). The indices are read on the host, as
// BVLC reads them, checked, and handed to the gather family's rows kernels (layers/layer_kernels.h).
#include <algorithm>
#include <cmath>
#include <functional>

#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"
#include "quant/quant_params.h"

namespace mpcaffe {
namespace {

/// The layers of this file: an index list on the device and the rows kernels.
class IndexedRowsLayer : public Layer {
 public:
  using Layer::Layer;

 protected:
  /// Real values of bottom `i` (quantized types dequantized with the bottom's parameters).
  std::vector<float> BottomReals(Blob& b, int i) {
    std::vector<float> v = b.ToFloat();
    if (IsQuantized(b.type())) {
      const Affine q = BottomAffine(i);
      for (float& x : v) x = q.scale * (x - static_cast<float>(q.zero_point));
    }
    return v;
  }

  /// Copies `idx` into the device buffer `buffer` (grown as needed).
  void Upload(const std::vector<int32_t>& idx, vptr<int32_t>* buffer, size_t* capacity) {
    if (idx.size() > *capacity || !buffer->mem) {
      *capacity = std::max<size_t>(idx.size(), 1);
      *buffer = device().Alloc<int32_t>(*capacity);
    }
    device().Write(*buffer, idx.data(), idx.size());
  }

  /// y's rows = x's rows idx[0..rows), `inner` values each, requantized from bottom `b` to top `t`.
  void GatherRows(Blob& x, Blob& y, const vptr<int32_t>& idx, int rows, int inner, int b, int t) {
    const int n = rows * inner;
    if (n == 0) return;
    const DataType dt = compute_type_;
    Kernel k = GetKernel(GatherSource(target(), dt), LayerKernelName("rows", dt));
    const Affine xq = BottomAffine(b), yq = TopAffine(t);
    quant::FixedPointMultiplier m;
    if (IsQuantized(dt)) m = quant::RescaleMultiplier(xq.scale, yq.scale);
    k.Arg(int32_t{n}).Arg(int32_t{inner}).Arg(idx).ArgBuffer(x.device_data(), 0, SizeOf(dt))
        .ArgBuffer(y.mutable_device_data(), 0, SizeOf(dt)).Arg(xq.zero_point).Arg(yq.zero_point)
        .Arg(m.multiplier).Arg(m.shift);
    k.Launch1D(n);
  }

  /// dx (rows_out rows of `inner`) = Σ of the dy rows m < count with idx[m] = its row; added
  /// to dx when `accumulate`. fp32.
  void ScatterRows(DeviceMemory* dy, DeviceMemory* dx, const vptr<int32_t>& idx, int count,
                   int rows_out, int inner, bool accumulate) {
    const int n = rows_out * inner;
    if (n == 0) return;
    Kernel k = GetKernel(GatherSource(target(), DataType::kFloat32), "rows_backward_fp32");
    k.Arg(int32_t{n}).Arg(int32_t{inner}).Arg(int32_t{count}).Arg(idx).ArgBuffer(dy, 0, 4)
        .ArgBuffer(dx, 0, 4).Arg(int32_t{accumulate ? 1 : 0});
    k.Launch1D(n);
  }

  /// BVLC refuses gradients for index inputs; so do these layers.
  void RefuseIndexGradient(const std::vector<bool>& down, int bottom, const char* what) const {
    if (bottom < static_cast<int>(down.size()) && down[bottom])
      Fail(std::string("cannot backpropagate to ") + what + " (bottom " + std::to_string(bottom) +
           "); set propagate_down: false for it");
  }

  vptr<int32_t> idx_;
  size_t idx_capacity_ = 0;
};

/// Filter (BVLC): bottoms 0..K−1 are filtered along axis 0 by bottom K, the selector (shape
/// (N) or (N, 1, ...)): top t holds the rows of bottom t whose selector is not 0. The row count
/// follows the selector's values, so the layer reshapes before every pass (BVLC reshapes in
/// Forward); the first reshape, at set-up, keeps all N rows as BVLC's does. Every dtype: a
/// quantized selector is 0 where it holds its zero point (0 is exactly representable).
class FilterLayer : public IndexedRowsLayer {
 public:
  using IndexedRowsLayer::IndexedRowsLayer;
  const char* type() const override { return "Filter"; }
  bool SupportsType(DataType) const override { return true; }
  int MinBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }
  bool ReshapesEachPass() const override { return true; }
  bool AllowForceBackward(int bottom) const override {
    return bottom + 1 < static_cast<int>(param_.bottom_size());
  }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int sel = static_cast<int>(bottom.size()) - 1;
    if (top.size() != bottom.size() - 1)
      Fail("needs one top per filtered bottom: " + std::to_string(sel) + " bottoms and the "
           "selector, " + std::to_string(top.size()) + " tops");
    Blob& s = *bottom[sel];
    if (s.num_axes() == 0) Fail("the selector (last bottom) needs a first axis");
    for (int a = 1; a < s.num_axes(); ++a)
      if (s.shape(a) != 1)
        Fail("the selector (last bottom) " + s.shape_string() +
             " must have singleton axes after the first");
    const int n = s.shape(0);
    for (int i = 0; i < sel; ++i)
      if (bottom[i]->num_axes() == 0 || bottom[i]->shape(0) != n)
        Fail("bottom " + std::to_string(i) + " " + bottom[i]->shape_string() +
             " must have the selector's " + std::to_string(n) + " rows on axis 0");
    rows_.clear();
    if (first_reshape_) {
      for (int r = 0; r < n; ++r) rows_.push_back(r);
      first_reshape_ = false;
    } else {
      const std::vector<float> v = s.ToFloat();
      const float zero = IsQuantized(s.type()) ? static_cast<float>(BottomAffine(sel).zero_point) : 0;
      for (int r = 0; r < n; ++r)
        if (v[r] != zero) rows_.push_back(r);
    }
    for (int t = 0; t < sel; ++t) {
      std::vector<int> shape = bottom[t]->shape();
      shape[0] = static_cast<int>(rows_.size());
      top[t]->Reshape(shape);
    }
    Upload(rows_, &idx_, &idx_capacity_);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    for (size_t t = 0; t < top.size(); ++t)
      GatherRows(*bottom[t], *top[t], idx_, static_cast<int>(rows_.size()),
                 bottom[t]->count(1), static_cast<int>(t), static_cast<int>(t));
  }

  // A selected row's diff is its top row's diff; the other rows' diffs are 0 (BVLC).
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    RefuseIndexGradient(down, static_cast<int>(bottom.size()) - 1, "the selector");
    for (size_t t = 0; t < top.size(); ++t) {
      if (!down[t] || bottom[t]->count() == 0) continue;
      ScatterRows(top[t]->device_diff(), bottom[t]->mutable_device_diff(), idx_,
                  static_cast<int>(rows_.size()), bottom[t]->shape(0), bottom[t]->count(1), false);
    }
  }

 private:
  std::vector<int32_t> rows_;
  bool first_reshape_ = true;
};

/// The integer indices a blob of reals holds, each checked to lie in [0, limit) (and, for float
/// types, to be an integer, as BVLC checks). Quantized values are rounded: exact when the
/// quantization step is at most 1, which BatchReindex requires.
std::vector<int32_t> IndicesOf(const std::vector<float>& reals, int limit, bool quantized,
                               const std::string& what, const std::function<void(std::string)>& fail) {
  std::vector<int32_t> idx(reals.size());
  for (size_t i = 0; i < reals.size(); ++i) {
    const float v = quantized ? std::nearbyint(reals[i]) : reals[i];
    if (!(v >= 0 && v < static_cast<float>(limit)) || v != std::floor(v))
      fail(what + "[" + std::to_string(i) + "] = " + std::to_string(reals[i]) +
           (v != std::floor(v) ? " is not an integer" : " is outside [0, " + std::to_string(limit) + ")"));
    idx[i] = static_cast<int32_t>(v);
  }
  return idx;
}

/// BatchReindex (BVLC): top row r is row idx[r] of bottom 0, idx the 1-D bottom 1 (integers in
/// [0, N)); rows may repeat or be left out. Backward sums the top rows' diffs into the rows they
/// came from. Every dtype; quantized indices are dequantized and rounded, which needs bottom 1's
/// quantization step to be at most 1 (checked).
class BatchReindexLayer : public IndexedRowsLayer {
 public:
  using IndexedRowsLayer::IndexedRowsLayer;
  const char* type() const override { return "BatchReindex"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }
  bool AllowForceBackward(int bottom) const override { return bottom == 0; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (bottom[1]->num_axes() != 1)
      Fail("the indices (bottom 1) must be 1-D, got " + bottom[1]->shape_string());
    if (bottom[0]->num_axes() == 0) Fail("bottom 0 needs a first (batch) axis");
    std::vector<int> shape = bottom[0]->shape();
    shape[0] = bottom[1]->shape(0);
    top[0]->Reshape(shape);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    // Dequantized indices are within half a step of the integers they stand for: exact after
    // rounding while the step is at most 1.
    if (IsQuantized(bottom[1]->type()) && BottomAffine(1).scale > 1.0f)
      Fail("the indices (bottom 1) are quantized with step " +
           std::to_string(BottomAffine(1).scale) +
           ", too coarse to hold integers exactly (an index range of at most 255 in int8); run "
           "the layer in a float type");
    rows_ = IndicesOf(BottomReals(*bottom[1], 1), bottom[0]->shape(0), IsQuantized(compute_type_),
                      "index", [this](const std::string& m) { Fail(m + " (bottom 0 has " +
                                                                   "that many rows on axis 0)"); });
    Upload(rows_, &idx_, &idx_capacity_);
    GatherRows(*bottom[0], *top[0], idx_, static_cast<int>(rows_.size()), bottom[0]->count(1), 0, 0);
  }

  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    RefuseIndexGradient(down, 1, "the indices");
    if (!down[0] || bottom[0]->count() == 0) return;
    ScatterRows(top[0]->device_diff(), bottom[0]->mutable_device_diff(), idx_,
                static_cast<int>(rows_.size()), bottom[0]->shape(0), bottom[0]->count(1), false);
  }

 private:
  std::vector<int32_t> rows_;
};

/// Embed (BVLC): each value of the bottom (an integer in [0, input_dim)) picks a row of the
/// input_dim × num_output weights (BVLC's layout, so trained models load), plus the bias; top
/// shape = bottom shape + (num_output). Backward: the weight rows and the bias get the sums of
/// the top's diffs (no gradient for the indices, as BVLC). fp32 and fp16; quantized nets run it
/// in fp32 between the conversions the net inserts (the indices would not survive int8).
class EmbedLayer : public IndexedRowsLayer {
 public:
  using IndexedRowsLayer::IndexedRowsLayer;
  const char* type() const override { return "Embed"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }
  bool AllowForceBackward(int) const override { return false; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    const auto& p = param_.embed_param();
    if (p.num_output() == 0) Fail("embed_param.num_output must be positive");
    if (p.input_dim() == 0) Fail("embed_param.input_dim must be positive");
    k_ = static_cast<int>(p.input_dim());
    n_ = static_cast<int>(p.num_output());
    AddParam({k_, n_}, p.weight_filler());
    if (p.bias_term()) AddParam({n_}, p.bias_filler());
  }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    std::vector<int> shape = bottom[0]->shape();
    shape.push_back(n_);
    top[0]->Reshape(shape);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    rows_ = IndicesOf(bottom[0]->ToFloat(), k_, false, "index",
                      [this](const std::string& m) { Fail(m + " (embed_param.input_dim " +
                                                          std::to_string(k_) + ")"); });
    Upload(rows_, &idx_, &idx_capacity_);
    const int n = static_cast<int>(rows_.size()) * n_;
    if (n == 0) return;
    const DataType t = compute_type_;
    const bool bias = param_.embed_param().bias_term();
    Kernel k = GetKernel(GatherSource(target(), t), LayerKernelName("embed", t));
    k.Arg(int32_t{n}).Arg(int32_t{n_}).Arg(idx_).ArgBuffer(blobs_[0]->device_data(), 0, SizeOf(t))
        .ArgBuffer((bias ? blobs_[1] : blobs_[0])->device_data(), 0, SizeOf(t))
        .Arg(int32_t{bias ? 1 : 0}).ArgBuffer(top[0]->mutable_device_data(), 0, SizeOf(t));
    k.Launch1D(n);
  }

  // dW[k] += Σ_{m: idx[m] = k} dy[m]; db += Σ_m dy[m] (the rows kernel over an all-zero index).
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    RefuseIndexGradient(down, 0, "the indices");
    const int m = static_cast<int>(rows_.size());
    if (param_propagate_down(0))
      ScatterRows(top[0]->device_diff(), blobs_[0]->mutable_device_diff(), idx_, m, k_, n_, true);
    if (param_.embed_param().bias_term() && param_propagate_down(1)) {
      if (zeros_capacity_ < static_cast<size_t>(m) || !zeros_.mem)
        Upload(std::vector<int32_t>(std::max(m, 1), 0), &zeros_, &zeros_capacity_);
      ScatterRows(top[0]->device_diff(), blobs_[1]->mutable_device_diff(), zeros_, m, 1, n_, true);
    }
  }

 private:
  int k_ = 0, n_ = 0;
  std::vector<int32_t> rows_;
  vptr<int32_t> zeros_;
  size_t zeros_capacity_ = 0;
};

}  // namespace

void RegisterIndexLayers() {
  RegisterLayerType<FilterLayer>("Filter");
  RegisterLayerType<BatchReindexLayer>("BatchReindex");
  RegisterLayerType<EmbedLayer>("Embed");
}

}  // namespace mpcaffe
