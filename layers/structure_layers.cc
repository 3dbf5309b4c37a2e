// layers/structure_layers.cc — layers that move data without arithmetic: Concat, Slice, Crop,
// Tile, Split, Flatten, Reshape (every dtype; quantized tops with other parameters than their
// bottoms are requantized on the way), Silence (consumes its bottoms) and Parameter (its
// parameter blob as its top).
#include <algorithm>

#include "layers/layer_axis.h"
#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"
#include "layers/train_kernels.h"
#include "quant/quant_params.h"

namespace mpcaffe {
namespace {

class ConcatLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Concat"; }
  bool SupportsType(DataType) const override { return true; }
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.concat_param();
    const int raw_axis = p.has_concat_dim() ? static_cast<int>(p.concat_dim()) : p.axis();
    axis_ = AxisOfField(*bottom[0], raw_axis, p.has_concat_dim() ? "concat_param.concat_dim" : "concat_param.axis",
                        [this](const std::string& m) { Fail(m); });
    std::vector<int> shape = bottom[0]->shape();
    for (size_t i = 1; i < bottom.size(); ++i) {
      if (bottom[i]->num_axes() != bottom[0]->num_axes())
        Fail("bottom " + std::to_string(i) + " has " + std::to_string(bottom[i]->num_axes()) +
             " axes, bottom 0 has " + std::to_string(bottom[0]->num_axes()));
      for (int a = 0; a < bottom[0]->num_axes(); ++a) {
        if (a == axis_) continue;
        if (bottom[i]->shape(a) != bottom[0]->shape(a))
          Fail("bottom " + std::to_string(i) + " shape " + bottom[i]->shape_string() +
               " differs from bottom 0 shape " + bottom[0]->shape_string() +
               " outside the concat axis " + std::to_string(axis_));
      }
      shape[axis_] += bottom[i]->shape(axis_);
    }
    top[0]->Reshape(shape);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    const bool vec = HasVectorConcat(target(), t);
    Kernel k = GetKernel(ConcatSource(target(), t), LayerKernelName("concat", t) + (vec ? "_v16" : ""));
    const int inner = top[0]->count(axis_ + 1);
    const int top_axis = top[0]->shape(axis_);
    const Affine yq = TopAffine(0);
    DeviceMemory* y = top[0]->mutable_device_data();
    int offset = 0;
    for (size_t i = 0; i < bottom.size(); ++i) {
      const int n = bottom[i]->count();
      const int axis = bottom[i]->shape(axis_);
      const Affine xq = BottomAffine(static_cast<int>(i));
      quant::FixedPointMultiplier m;
      if (IsQuantized(t)) m = quant::RescaleMultiplier(xq.scale, yq.scale);
      if (n > 0) {
        k.Arg(int32_t{n}).ArgBuffer(bottom[i]->device_data(), 0, SizeOf(t)).ArgBuffer(y, 0, SizeOf(t))
            .Arg(int32_t{axis}).Arg(int32_t{top_axis}).Arg(int32_t{inner}).Arg(int32_t{offset})
            .Arg(xq.zero_point).Arg(yq.zero_point).Arg(m.multiplier).Arg(m.shift);
        k.Launch1D(vec ? size_t(n + 15) / 16 : size_t(n));
      }
      offset += axis;
    }
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // Each bottom's diff is its slice of the top's diff along the concat axis.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    const int inner = top[0]->count(axis_ + 1);
    const int top_axis = top[0]->shape(axis_);
    Kernel k = GetKernel(ConcatBackwardSource(target()), "concat_backward");
    int offset = 0;
    for (size_t i = 0; i < bottom.size(); ++i) {
      const int axis = bottom[i]->shape(axis_);
      const int n = bottom[i]->count();
      if (down[i] && n > 0) {
        k.Arg(int32_t{n}).ArgBuffer(top[0]->device_diff(), 0, 4)
            .ArgBuffer(bottom[i]->mutable_device_diff(), 0, 4).Arg(int32_t{axis})
            .Arg(int32_t{top_axis}).Arg(int32_t{inner}).Arg(int32_t{offset});
        k.Launch1D(n);
      }
      offset += axis;
    }
  }

 private:
  int axis_ = 1;
};

/// Slice: BVLC's inverse of Concat — bottom 0 cut along `axis` (or the deprecated slice_dim) at
/// slice_point (one fewer points than tops, increasing), or into equal parts without points.
/// Every dtype; each quantized top is requantized to its own parameters.
class SliceLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Slice"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.slice_param();
    const Blob& b = *bottom[0];
    const int raw_axis = p.has_slice_dim() ? static_cast<int>(p.slice_dim()) : p.axis();
    if (raw_axis < -b.num_axes() || raw_axis >= b.num_axes())
      Fail("slice_param.axis " + std::to_string(raw_axis) + " out of range for " + b.shape_string());
    axis_ = b.CanonicalAxisIndex(raw_axis);
    const int dim = b.shape(axis_), tops = static_cast<int>(top.size());
    sizes_.clear();
    if (p.slice_point_size() > 0) {
      if (p.slice_point_size() != tops - 1)
        Fail("slice_param.slice_point has " + std::to_string(p.slice_point_size()) +
             " points for " + std::to_string(tops) + " tops (needs one fewer)");
      int prev = 0;
      for (int i = 0; i <= p.slice_point_size(); ++i) {
        const int point = i < p.slice_point_size() ? static_cast<int>(p.slice_point(i)) : dim;
        if (point <= prev || point > dim)
          Fail("slice_param.slice_point must increase within (0, " + std::to_string(dim) +
               "), got " + std::to_string(point) + " after " + std::to_string(prev));
        sizes_.push_back(point - prev);
        prev = point;
      }
    } else {
      if (dim % tops != 0)
        Fail("axis " + std::to_string(axis_) + " of " + b.shape_string() + " does not split into " +
             std::to_string(tops) + " equal parts (give slice_param.slice_point)");
      sizes_.assign(tops, dim / tops);
    }
    for (int i = 0; i < tops; ++i) {
      std::vector<int> shape = b.shape();
      shape[axis_] = sizes_[i];
      top[i]->Reshape(shape);
    }
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    Kernel k = GetKernel(ConcatSource(target(), t), LayerKernelName("slice", t));
    const int inner = bottom[0]->count(axis_ + 1), bottom_axis = bottom[0]->shape(axis_);
    const Affine xq = BottomAffine(0);
    int offset = 0;
    for (size_t i = 0; i < top.size(); ++i) {
      const int n = top[i]->count();
      const Affine yq = TopAffine(static_cast<int>(i));
      quant::FixedPointMultiplier m;
      if (IsQuantized(t)) m = quant::RescaleMultiplier(xq.scale, yq.scale);
      if (n > 0) {
        k.Arg(int32_t{n}).ArgBuffer(bottom[0]->device_data(), 0, SizeOf(t))
            .ArgBuffer(top[i]->mutable_device_data(), 0, SizeOf(t)).Arg(int32_t{bottom_axis})
            .Arg(int32_t{sizes_[i]}).Arg(int32_t{inner}).Arg(int32_t{offset})
            .Arg(xq.zero_point).Arg(yq.zero_point).Arg(m.multiplier).Arg(m.shift);
        k.Launch1D(n);
      }
      offset += sizes_[i];
    }
  }

  // The bottom's diff is the tops' diffs concatenated back along the axis (fp32 concat kernel).
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0]) return;
    const DataType f = DataType::kFloat32;
    Kernel k = GetKernel(ConcatSource(target(), f), LayerKernelName("concat", f));
    const int inner = bottom[0]->count(axis_ + 1), bottom_axis = bottom[0]->shape(axis_);
    int offset = 0;
    for (size_t i = 0; i < top.size(); ++i) {
      const int n = top[i]->count();
      if (n > 0) {
        k.Arg(int32_t{n}).ArgBuffer(top[i]->device_diff(), 0, 4)
            .ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4).Arg(int32_t{sizes_[i]})
            .Arg(int32_t{bottom_axis}).Arg(int32_t{inner}).Arg(int32_t{offset})
            .Arg(int32_t{0}).Arg(int32_t{0}).Arg(int32_t{0}).Arg(int32_t{0});
        k.Launch1D(n);
      }
      offset += sizes_[i];
    }
  }

 private:
  int axis_ = 1;
  std::vector<int> sizes_;
};

/// Launches gather_<t> (layers/layer_kernels.h) over the n elements of `y`, requantizing from
/// xq to yq for quantized types.
void LaunchGather(Kernel k, DataType t, int n, DeviceMemory* x, DeviceMemory* y,
                  const GatherIndex& index, Affine xq, Affine yq) {
  if (n == 0) return;
  quant::FixedPointMultiplier m;
  if (IsQuantized(t)) m = quant::RescaleMultiplier(xq.scale, yq.scale);
  k.Arg(int32_t{n}).ArgBuffer(x, 0, SizeOf(t)).ArgBuffer(y, 0, SizeOf(t));
  for (int a : index.Args()) k.Arg(int32_t{a});
  k.Arg(xq.zero_point).Arg(yq.zero_point).Arg(m.multiplier).Arg(m.shift);
  k.Launch1D(n);
}

/// Crop (BVLC): bottom 0 cut to bottom 1's shape on the axes from crop_param.axis on, starting at
/// crop_param.offset (none: 0; one: every cropped axis; else one per cropped axis). Bottom 1 only
/// gives the shape and gets no gradient. Every dtype.
class CropLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Crop"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.crop_param();
    const Blob &a = *bottom[0], &b = *bottom[1];
    const int axes = a.num_axes();
    if (b.num_axes() != axes)
      Fail("bottom 1 " + b.shape_string() + " has other axes than bottom 0 " + a.shape_string());
    if (p.axis() < -axes || p.axis() >= axes)
      Fail("crop_param.axis " + std::to_string(p.axis()) + " out of range for " + a.shape_string());
    const int axis = a.CanonicalAxisIndex(p.axis());
    const int cropped = axes - axis;
    if (p.offset_size() > 1 && p.offset_size() != cropped)
      Fail("crop_param.offset has " + std::to_string(p.offset_size()) + " values for " +
           std::to_string(cropped) + " cropped axes (give none, one, or one per axis)");
    // The axes before `axis` are one outer index of the gather (none from axis 0).
    const int outer = axis > 0 ? 1 : 0;
    if (cropped + outer > kGatherAxes)
      Fail("crop_param.axis " + std::to_string(p.axis()) + " crops " + std::to_string(cropped) +
           " axes; at most " + std::to_string(kGatherAxes - outer) + " are supported");
    std::vector<int> shape = a.shape(), dims, strides;
    if (outer) dims.push_back(a.count(0, axis)), strides.push_back(a.count(axis));
    int base = 0;
    for (int i = axis; i < axes; ++i) {
      const int off = p.offset_size() == 0 ? 0
                      : static_cast<int>(p.offset(p.offset_size() == 1 ? 0 : i - axis));
      if (off < 0 || off + b.shape(i) > a.shape(i))
        Fail("crop_param.offset " + std::to_string(off) + " on axis " + std::to_string(i) +
             " does not fit a crop of " + std::to_string(b.shape(i)) + " into " + a.shape_string());
      shape[i] = b.shape(i);
      dims.push_back(b.shape(i));
      strides.push_back(a.count(i + 1));
      base += off * a.count(i + 1);
    }
    index_ = GatherIndex(base, dims, strides);
    top[0]->Reshape(shape);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    LaunchGather(GetKernel(GatherSource(target(), t), LayerKernelName("gather", t)), t,
                 top[0]->count(), bottom[0]->device_data(), top[0]->mutable_device_data(), index_,
                 BottomAffine(0), TopAffine(0));
  }

  // The top's diff lands in its window of a zeroed bottom diff.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    for (int i = 0; i < 2; ++i)
      if (down[i] && bottom[i]->count())
        device().Zero(bottom[i]->mutable_device_diff(), 0, bottom[i]->bytes());
    const int n = top[0]->count();
    if (!down[0] || n == 0) return;
    Kernel k = GetKernel(GatherSource(target(), DataType::kFloat32), "scatter_fp32");
    k.Arg(int32_t{n}).ArgBuffer(top[0]->device_diff(), 0, 4)
        .ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4);
    for (int a : index_.Args()) k.Arg(int32_t{a});
    k.Launch1D(n);
  }

 private:
  GatherIndex index_{0, {}, {}};
};

/// Tile (BVLC): the bottom repeated tile_param.tiles times along tile_param.axis — top shape
/// (outer, tiles·A, inner) of a bottom (outer, A, inner). Every dtype.
class TileLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Tile"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.tile_param();
    const Blob& b = *bottom[0];
    if (!p.has_tiles() || p.tiles() < 1)
      Fail("tile_param.tiles must be given and positive (got " + std::to_string(p.tiles()) + ")");
    if (p.axis() < -b.num_axes() || p.axis() >= b.num_axes())
      Fail("tile_param.axis " + std::to_string(p.axis()) + " out of range for " + b.shape_string());
    const int axis = b.CanonicalAxisIndex(p.axis());
    tiles_ = p.tiles();
    outer_ = b.count(0, axis);
    run_ = b.count(axis);
    std::vector<int> shape = b.shape();
    shape[axis] *= tiles_;
    top[0]->Reshape(shape);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const DataType t = compute_type_;
    LaunchGather(GetKernel(GatherSource(target(), t), LayerKernelName("gather", t)), t,
                 top[0]->count(), bottom[0]->device_data(), top[0]->mutable_device_data(),
                 GatherIndex(0, {outer_, tiles_, run_}, {run_, 0, 1}), BottomAffine(0),
                 TopAffine(0));
  }

  // Each bottom element's diff is the sum of its tiles' diffs.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    const int n = bottom[0]->count();
    if (!down[0] || n == 0) return;
    const DataType f = DataType::kFloat32;
    Kernel k = GetKernel(GatherSource(target(), f), LayerKernelName("reduce", f));
    k.Arg(int32_t{n}).ArgBuffer(top[0]->device_diff(), 0, 4)
        .ArgBuffer(bottom[0]->mutable_device_diff(), 0, 4);
    for (int a : GatherIndex(0, {outer_, run_}, {tiles_ * run_, 1}).Args()) k.Arg(int32_t{a});
    k.Arg(int32_t{tiles_}).Arg(int32_t{run_}).Arg(int32_t{0}).Arg(1.0f);
    k.Launch1D(n);
  }

 private:
  int tiles_ = 1, outer_ = 1, run_ = 1;
};

class SplitLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Split"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    for (Blob* t : top) t->ReshapeLike(*bottom[0]);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const Affine xq = BottomAffine(0);
    for (size_t i = 0; i < top.size(); ++i)
      CopyOrRequant(*bottom[0], xq, *top[i], TopAffine(static_cast<int>(i)));
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // The bottom's diff is the sum of the tops' diffs.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0]) return;
    const int n = bottom[0]->count();
    if (n == 0) return;
    DeviceMemory* dx = bottom[0]->mutable_device_diff();
    if (top[0] != bottom[0]) device().CopyOnDevice(top[0]->device_diff(), 0, dx, 0, bottom[0]->bytes());
    for (size_t t = 1; t < top.size(); ++t)
      elementwise().Axpby(DataType::kFloat32, n, 1.0f, *top[t]->device_diff(), 1.0f, *dx);
  }
};

/// Flatten and Reshape: a new shape over the same values.
class ReshapingLayer : public Layer {
 public:
  using Layer::Layer;
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    CopyOrRequant(*bottom[0], BottomAffine(0), *top[0], TopAffine(0));
  }

 public:
  bool HasBackward() const override { return true; }

 protected:
  // The same values in a new shape: the diff is copied back.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0] || top[0] == bottom[0]) return;
    if (bottom[0]->count() == 0) return;
    device().CopyOnDevice(top[0]->device_diff(), 0, bottom[0]->mutable_device_diff(), 0,
                          bottom[0]->bytes());
  }
};

class FlattenLayer : public ReshapingLayer {
 public:
  using ReshapingLayer::ReshapingLayer;
  const char* type() const override { return "Flatten"; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.flatten_param();
    const int start = bottom[0]->CanonicalAxisIndex(p.axis());
    const int end = bottom[0]->CanonicalAxisIndex(p.end_axis());
    std::vector<int> shape;
    for (int i = 0; i < start; ++i) shape.push_back(bottom[0]->shape(i));
    shape.push_back(bottom[0]->count(start, end + 1));
    for (int i = end + 1; i < bottom[0]->num_axes(); ++i) shape.push_back(bottom[0]->shape(i));
    top[0]->Reshape(shape);
  }
};

class ReshapeLayer : public ReshapingLayer {
 public:
  using ReshapingLayer::ReshapingLayer;
  const char* type() const override { return "Reshape"; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    // BVLC semantics: 0 copies the bottom's dimension, one -1 is inferred; axis/num_axes select
    // the part of the bottom shape that is replaced.
    const auto& p = param_.reshape_param();
    const Blob& b = *bottom[0];
    const int in_axes = b.num_axes();
    const int start = p.axis() < 0 ? p.axis() + in_axes + 1 : p.axis();
    if (start < 0 || start > in_axes) Fail("axis " + std::to_string(p.axis()) + " out of range for " + b.shape_string());
    const int end = p.num_axes() == -1 ? in_axes : start + p.num_axes();
    if (end > in_axes || p.num_axes() < -1)
      Fail("num_axes " + std::to_string(p.num_axes()) + " out of range for " + b.shape_string());
    std::vector<int> shape(b.shape().begin(), b.shape().begin() + start);
    int infer = -1;
    for (int i = 0; i < p.shape().dim_size(); ++i) {
      const int64_t d = p.shape().dim(i);
      if (d == 0) {
        if (start + i >= in_axes) Fail("dim " + std::to_string(i) + " is 0 but the bottom has no such axis");
        shape.push_back(b.shape(start + i));
      } else if (d == -1) {
        if (infer >= 0) Fail("at most one dimension may be -1");
        infer = static_cast<int>(shape.size());
        shape.push_back(1);
      } else if (d < 0) {
        Fail("dimension " + std::to_string(d) + " is invalid");
      } else {
        shape.push_back(static_cast<int>(d));
      }
    }
    shape.insert(shape.end(), b.shape().begin() + end, b.shape().end());
    int64_t known = 1;
    for (size_t i = 0; i < shape.size(); ++i)
      if (static_cast<int>(i) != infer) known *= shape[i];
    if (infer >= 0) {
      if (known == 0 || b.count() % known) Fail("cannot infer -1 of the new shape from " + b.shape_string());
      shape[infer] = static_cast<int>(b.count() / known);
    } else if (known != b.count()) {
      Fail("new shape " + ShapeString(shape) + " has a different count than bottom " + b.shape_string());
    }
    top[0]->Reshape(shape);
  }
};

/// Silence (BVLC): consumes its bottoms; backward gives them zero gradients.
class SilenceLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Silence"; }
  bool SupportsType(DataType) const override { return true; }
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 0; }
  bool HasBackward() const override { return true; }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}
  void BackwardImpl(const std::vector<Blob*>&, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    for (size_t i = 0; i < bottom.size(); ++i)
      if (down[i] && bottom[i]->count()) device().Zero(bottom[i]->mutable_device_diff(), 0, bottom[i]->bytes());
  }
};

/// Parameter (BVLC): no bottom; its one top is the layer's parameter blob, of
/// parameter_param.shape (zeros until a model's weights are loaded, as in BVLC, which fills
/// nothing). Backward adds the top's diff to the parameter's. Float types.
class ParameterLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Parameter"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasBackward() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    if (!param_.parameter_param().has_shape()) Fail("parameter_param.shape is required");
    std::vector<int> shape;
    for (int64_t d : param_.parameter_param().shape().dim()) {
      if (d < 0) Fail("parameter_param.shape has a negative dimension " + std::to_string(d));
      shape.push_back(static_cast<int>(d));
    }
    caffe::FillerParameter zeros;
    zeros.set_type("constant");
    AddParam(shape, zeros);
  }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    top[0]->ReshapeLike(*blobs_[0]);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    if (blobs_[0]->count())
      device().CopyOnDevice(blobs_[0]->device_data(), 0, top[0]->mutable_device_data(), 0,
                            top[0]->bytes());
  }
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>&,
                    const std::vector<Blob*>&) override {
    const int n = blobs_[0]->count();
    if (n == 0 || !param_propagate_down(0)) return;
    elementwise().Axpby(DataType::kFloat32, n, 1.0f, *top[0]->device_diff(), 1.0f,
                        *blobs_[0]->mutable_device_diff());
  }
};

}  // namespace

void RegisterStructureLayers() {
  RegisterLayerType<ConcatLayer>("Concat");
  RegisterLayerType<SliceLayer>("Slice");
  RegisterLayerType<CropLayer>("Crop");
  RegisterLayerType<TileLayer>("Tile");
  RegisterLayerType<SplitLayer>("Split");
  RegisterLayerType<FlattenLayer>("Flatten");
  RegisterLayerType<ReshapeLayer>("Reshape");
  RegisterLayerType<SilenceLayer>("Silence");
  RegisterLayerType<ParameterLayer>("Parameter");
}

}  // namespace mpcaffe
