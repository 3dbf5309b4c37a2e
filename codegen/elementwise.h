// codegen/elementwise.h — kernel texts of the element-wise operations (ReLU, scale, axpby,
// data-type conversion) for every data type and both dialects. Each algorithm has one body
// for float types and one for quantized types; quantization parameters are kernel arguments.
#pragma once

#include <string>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"

namespace mpcaffe {

/// relu_<dt>(int n, In x, Out y, float slope, int x_zero, int y_zero,
///           int mult, int shift, int neg_mult, int neg_shift)
/// float: y = x > 0 ? x : slope·x.  quantized: d = x − x_zero; y = clamp(y_zero +
/// requant(d, d >= 0 ? (mult, shift) : (neg_mult, neg_shift))) — the negative multiplier is 0
/// for a plain ReLU.
std::string ReluSource(const KernelTarget& target, DataType type);

/// scale_<dt>(int n, In x, Out y, float alpha, int x_zero, int y_zero, int mult, int shift,
///            int sign)
/// float: y = alpha·x (in float).  quantized: y = clamp(y_zero + sign·requant(x − x_zero)),
/// with mult/shift the fixed-point form of |alpha|·s_x/s_y.
std::string ScaleSource(const KernelTarget& target, DataType type);

/// axpby_<dt>(int n, In x, Out y, float a, float b, int x_zero, int y_zero,
///            int mult_a, int shift_a, int sign_a, int mult_b, int shift_b, int sign_b)
/// float: y = a·x + b·y (in float).  quantized (y keeps its own parameters):
/// y = clamp(y_zero + sign_a·requant(x − x_zero, a) + sign_b·requant(y − y_zero, b)).
std::string AxpbySource(const KernelTarget& target, DataType type);

/// convert_<from>_<to>(int n, In x, Out y, float x_scale, int x_zero, float y_scale,
///                     int y_zero, int mult, int shift)
/// float→float: rounding to nearest even; quantized→float: x_scale·(x − x_zero);
/// float→quantized: round-half-even(x / y_scale) + y_zero saturated, NaN → y_zero;
/// quantized→quantized: clamp(y_zero + requant(x − x_zero)) with mult/shift = s_x/s_y.
std::string ConvertSource(const KernelTarget& target, DataType from, DataType to);

/// One value's conversion between float and a quantized type as the convert kernels compute it,
/// for kernels that read or write quantized values around float arithmetic (LRN): the same
/// operations, so the same bits as a convert kernel before or after them. `alias` names the
/// quantized type as KernelWriter::AddType declared it ("Dtype": its _LOAD, _STORE, _QMIN and
/// _QMAX).
/// Dequantized: x_scale·(float)(q − x_zero), the float expression of a stored integer `q`.
std::string DequantizeText(const std::string& q, const std::string& scale,
                           const std::string& zero);
/// Statements storing float `v` at `alias`_STORE(`dst`, `at`): round-half-even(v / scale) +
/// zero, saturated; NaN → zero.
std::string QuantizeStoreText(const std::string& alias, const std::string& v,
                              const std::string& scale, const std::string& zero,
                              const std::string& dst, const std::string& at);
/// The same on `lanes` lanes, 8 or 16 (a dialect with vector built-ins): the float vector
/// expression of the stored integers at `p`, and the statements storing float vector `v` at
/// `p` (`to` int8q or int16q; uses KernelHelper::kByteVectorStore).
std::string VectorDequantizeText(const KernelTarget& target, const std::string& p,
                                 const std::string& scale, const std::string& zero,
                                 int lanes = 8);
std::string VectorQuantizeStoreText(KernelWriter& w, DataType to, const std::string& alias,
                                    const std::string& v, const std::string& scale,
                                    const std::string& zero, const std::string& p,
                                    int lanes = 8);

/// The walk of the element-wise "_v8" kernels over int n values: `vec` for each vector `index`
/// (its 8 values from 8·index on; $vector_loop: a contiguous range of vectors per work-item where
/// work-items are threads), then `one` for each value i of the n % 8 tail. Launched with
/// EightLaneItems(n) work-items.
std::string EightLaneLoop(const std::string& index, const std::string& vec,
                          const std::string& one);
size_t EightLaneItems(int n);

/// Kernel names: "relu_int8q", "convert_fp32_int8q", ...
std::string ElementwiseKernelName(const std::string& op, DataType type);
std::string ConvertKernelName(DataType from, DataType to);
/// Whether ConvertSource also holds "<ConvertKernelName>_v8", the same conversion 8 elements
/// per step (a dialect with vector built-ins: every pair with a float side, fp32 <-> fp16 too).
bool HasVectorConvert(const KernelTarget& target, DataType from, DataType to);
/// Whether ReluSource also holds "<ElementwiseKernelName(relu)>_v8", the same ReLU 8 elements per
/// step (a dialect with vector built-ins: quantized types, and fp32 where work-items are threads).
bool HasVectorRelu(const KernelTarget& target, DataType type);

}  // namespace mpcaffe
