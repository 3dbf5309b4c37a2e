// layers/layer_kernels.h — kernel texts of the layers that do not use libdnn (softmax, concat,
// channel-wise affine; activations are in activation_kernels.h, losses in loss_kernels.h), one
// body per algorithm emitted through KernelWriter for any data type and either dialect.
#pragma once

#include <string>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"

namespace mpcaffe {

/// Throws std::invalid_argument naming kernel `op` when `type` is quantized (the kernels that
/// compute in float only).
void RequireFloat(DataType type, const std::string& op);

/// softmax_<dt>(int outer, int channels, int inner, In x, Out y): softmax over the channel
/// axis of an (outer, channels, inner) array, max-subtracted, in float; a work-item per row
/// (outer · inner of them). Float types only. The same program holds softmax_rows_<dt> (the
/// same arguments): a work-group of kLaunch1DLocalSize work-items per row, its maximum and sum
/// reduced in local memory, launched with a work-group per row.
/// Where HasVectorSoftmax (fp32 on a CPU runtime with vector built-ins) also softmax_v8_<dt>
/// (the same arguments, inner 1 only): a work-item per row, in vectors of 8 floats and a tail.
std::string SoftmaxSource(const KernelTarget& target, DataType type);
std::string SoftmaxRowsKernelName(DataType type);
std::string SoftmaxVectorKernelName(DataType type);
bool HasVectorSoftmax(const KernelTarget& target, DataType type);

/// concat_<dt>(int n, In x, Out y, int bottom_axis, int top_axis, int inner, int offset,
///             int x_zero, int y_zero, int mult, int shift)
/// Copies an (outer, bottom_axis, inner) bottom into channels [offset, offset + bottom_axis)
/// of an (outer, top_axis, inner) top. Quantized: y = clamp(y_zero + requant(x − x_zero)).
/// With HasVectorConcat also concat_<dt>_v16 (the same arguments, launched over ⌈n / 16⌉
/// work-items): 16 elements per step, requantized in vector lanes wherever they lie in one
/// contiguous run of the top, the others one by one.
/// The same program holds slice_<dt> (the same arguments, n = the top's count): top element i
/// from channel offset + (its channel) of an (outer, bottom_axis, inner) bottom into an
/// (outer, top_axis, inner) top, requantized like concat.
std::string ConcatSource(const KernelTarget& target, DataType type);
bool HasVectorConcat(const KernelTarget& target, DataType type);

/// The strided-gather family (Crop, Tile, Reduction). kGatherAxes index dimensions d0..d5 (d5
/// innermost) with strides s0..s5 map an output element to an input position:
///   gather_<dt>(int n, In x, Out y, int base, int d0..d5, int s0..s5, int x_zero, int y_zero,
///               int mult, int shift): y[i] = x[base + Σ coord_k(i)·s_k], every data type,
///     quantized values requantized like concat (a stride 0 repeats: Tile).
/// Float types also have
///   reduce_<dt>(int n, In x, Out y, int base, int d0..d5, int s0..s5, int count, int step,
///               int op, float coeff): y[j] = coeff·Σ_{k<count} f(x[start_j + k·step]) with
///     start_j = base + Σ coord_k(j)·s_k and f = x (op 0), |x| (1), x² (2), summed in float;
/// and the fp32 program holds the backward kernels
///   scatter_fp32(int n, In x, Out y, int base, int d0..d5, int s0..s5): y[base + Σ…] = x[i];
///   reduce_backward_fp32(int n, In x, In dy, Out dx, int inner, int op, float coeff):
///     dx[i] = coeff·dy[i / inner]·f'(x[i]) (1, sign(x), 2x).
/// Every program also holds the indexed-rows kernel of Filter, BatchReindex and Embed:
///   rows_<dt>(int n, int inner, In int idx, In x, Out y, int x_zero, int y_zero, int mult,
///             int shift): y[r·inner + c] = x[idx[r]·inner + c] over the n elements of y,
///     requantized like gather;
/// the float programs embed_<dt>(int n, int dim, In int idx, In w, In bias, int has_bias, Out y):
///     y[r·dim + d] = w[idx[r]·dim + d] (+ bias[d]), in float;
/// and the fp32 program rows_backward_fp32(int n, int inner, int count, In int idx, In dy,
///     Out dx, int accumulate): dx[k·inner + c] (+)= Σ_{m<count, idx[m] = k} dy[m·inner + c].
/// The float programs also hold ArgMax and MVN, reductions of the same shape:
///   argmax_<dt>(int n, int channels, int inner, int top_k, int out_max_val, int has_axis,
///               In x, Out y): for each of the n = outer·inner positions the top_k largest of
///     its `channels` values (ties: the larger index first, as BVLC's sort of (value, index)
///     pairs). With has_axis y[(o·top_k + j)·inner + r] = value or index (out_max_val); without
///     (inner 1) y[o·top_k + j] = index, or indices then values in a row of 2·top_k.
///   mvn_<dt>(int groups, int dim, float eps, int normalize_variance, In x, Out y): per group of
///     dim consecutive values y = x − mean, divided by (√(mean of (x − mean)²) + eps) when
///     normalize_variance; in float.
///   mvn_backward_fp32(int groups, int dim, float eps, int normalize_variance, In x, In y, In dy,
///     Out dx): dx = dy − mean(dy), or (dy − mean(dy) − y·mean(y·dy)) / (σ + eps).
constexpr int kGatherAxes = 6;
std::string GatherSource(const KernelTarget& target, DataType type);

/// The base, dimensions and strides a gather-family kernel takes: `dims` / `strides` given
/// outermost first (at most kGatherAxes), right-aligned, the unused outer ones 1 and 0.
struct GatherIndex {
  int base = 0;
  int dims[kGatherAxes] = {1, 1, 1, 1, 1, 1};
  int strides[kGatherAxes] = {0, 0, 0, 0, 0, 0};
  GatherIndex(int base_, const std::vector<int>& d, const std::vector<int>& s) : base(base_) {
    const int skip = kGatherAxes - static_cast<int>(d.size());
    for (size_t k = 0; k < d.size(); ++k) dims[skip + k] = d[k], strides[skip + k] = s[k];
  }
  /// base, d0..d5, s0..s5: the kernel arguments in order.
  std::vector<int> Args() const {
    std::vector<int> a{base};
    a.insert(a.end(), dims, dims + kGatherAxes);
    a.insert(a.end(), strides, strides + kGatherAxes);
    return a;
  }
};

/// eltwise_<op>_<dt>(int n, In x, Out y): y = y·x ("prod") or max(y, x) ("max"), in float.
/// Float types only (sum goes through the element-wise scale / axpby kernels).
std::string EltwiseSource(const KernelTarget& target, const std::string& op, DataType type);

/// channel_affine_<dt>_<pt>(int n, int channels, int inner, In Dtype x, Out Dtype y,
///                          In Ptype scale, In Ptype bias, int has_bias, int relu)
/// y = x·scale[c] + (has_bias ? bias[c] : 0) with c = (i / inner) % channels, in float, then
/// max(y, 0) with `relu`. For a quantized `type` (param_type a float type) the arguments after
/// bias are (int x_zero, float lo, float hi) and
/// q_y = clamp(rint(fma(q_x − x_zero, scale[c], bias[c])), lo, hi): the factors already hold
/// x's and y's quantization (QuantizedChannelFactors), lo and hi the type's limits (lo raised
/// to y's zero point for a ReLU).
/// Where HasVectorChannelAffine the program also holds channel_affine_<dt>_<pt>_v8, the same
/// arguments and values: each work-item one contiguous range of the values (a whole number of
/// vectors of 8, launched with ChannelPlanesVectorItems), its planes' vectors of 8 and
/// each plane's inner % 8 tail one by one.
std::string ChannelAffineSource(const KernelTarget& target, DataType type, DataType param_type);
/// fp32 or a quantized type with float factors, on a CPU runtime with vector built-ins (its
/// work-items are threads): there the scalar kernel's work-groups of 64 along each plane cost
/// PoCL more than the values (DenseNet-121's BatchNorms, docs/BENCHMARKS.md "Default
/// configurations").
bool HasVectorChannelAffine(const KernelTarget& target, DataType type, DataType param_type);
/// The name the layers launch: the _v8 form's where HasVectorChannelAffine.
std::string ChannelAffineLaunchName(const KernelTarget& target, DataType type, DataType param_type);
/// Work-items for the _v8 form over n values: a range of at least 1024 values each.
size_t ChannelPlanesVectorItems(int n);
/// The _v8 channel kernels' walk over (outer, channels, inner) values (channel_affine, prelu,
/// bias): each work-item one contiguous range of the n values (a whole number of vectors of 8),
/// plane by plane: `plane` sets the plane's factors from its channel c, `vec` computes the 8
/// values from i, `one` the value i of the plane's inner % 8 tail. A range per work-item rather
/// than a grid stride: a CPU thread then streams from one place. The kernel's arguments include
/// int n, channels and inner.
std::string ChannelPlanesVectorLoop(const std::string& plane, const std::string& vec,
                                    const std::string& one);

/// The quantized channel_affine's factors for y = a[c]·x + b[c] from x's quantization to y's:
/// scale[c] = a[c]·x.scale / y.scale, bias[c] = b[c] / y.scale + y.zero_point; and its clamp
/// (lo, hi): `type`'s limits, lo at least y's zero point with `relu`.
struct QuantizedChannelFactors {
  std::vector<float> scale, bias;
  float lo = 0.0f, hi = 0.0f;
};
QuantizedChannelFactors QuantizedChannelAffineFactors(DataType type, const std::vector<float>& a,
                                                      const std::vector<float>& b, float x_scale,
                                                      float y_scale, int y_zero, bool relu);
/// The plain C++ reference of the quantized channel_affine (the same float operations).
void QuantizedChannelAffineReference(DataType type, int n, int channels, int inner,
                                     const void* x, void* y, const QuantizedChannelFactors& f,
                                     int x_zero);

/// dropout_<dt>(int n, In x, In mp_u32 mask, Out y, mp_u32 threshold, float scale):
/// y = mask[i] > threshold ? x·scale : 0. Float types only.
std::string DropoutSource(const KernelTarget& target, DataType type);

/// lrn_within_<dt>(int n, int height, int width, int size, float alpha, float beta, In Dtype x,
///                  Out Dtype y, Out float scale, int keep_scale): Caffe's WITHIN_CHANNEL LRN of
/// NCHW planes: s = 1 + alpha/size² · Σ x² over the size × size window centred on the pixel
/// (clipped to the plane; BVLC's average pooling divides by size² for odd sizes all the same),
/// y = x · s^(−beta); scale = s when keep_scale. Float types, in float.
std::string LrnWithinChannelSource(const KernelTarget& target, DataType type);

/// BVLC's LSTMUnit, gates in the order i, f, o, g of each (N, 4·dim) row of x:
///   lstm_unit_<dt>(int n, int dim, In Dtype c_prev, In Dtype x, In Dtype cont, Out Dtype c,
///                  Out Dtype h): for each of the n = N·dim cells, i = σ(x_i), f = cont·σ(x_f)
///     (0 where cont is 0), o = σ(x_o), g = tanh(x_g); c = f·c_prev + i·g, h = o·tanh(c); cont
///     has one value per row. Float types, in float.
/// The fp32 program also holds the backward pass:
///   lstm_unit_backward_fp32(int n, int dim, In c_prev, In x, In cont, In c, In dc, In dh,
///                           Out dc_prev, Out dx): with dĉ = dc + dh·o·(1 − tanh²(c)),
///     dc_prev = dĉ·f and dx = (dĉ·g·i(1−i), dĉ·c_prev·cont·σ_f(1−σ_f), dh·tanh(c)·o(1−o),
///     dĉ·i·(1−g²)) in gate order.
std::string LstmUnitSource(const KernelTarget& target, DataType type);

/// Kernel names: "<op>_<dt>", "channel_affine_<dt>_<pt>".
std::string LayerKernelName(const std::string& op, DataType type);
std::string ChannelAffineKernelName(DataType type, DataType param_type);

}  // namespace mpcaffe
