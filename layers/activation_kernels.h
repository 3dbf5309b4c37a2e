// layers/activation_kernels.h — the element-wise activation family (BVLC's neuron layers:
// Sigmoid, TanH, AbsVal, BNLL, Clip, ELU, Exp, Log, Power, Swish, Threshold) as one table of
// forward / backward expressions, plus the per-channel PReLU and Bias kernels. All forward
// kernels of one data type are one program, all fp32 backward kernels another, so a net (or a
// test) with several of these layers compiles two programs, not one per layer type.
#pragma once

#include <string>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"

namespace mpcaffe {

/// One row of the family: the expressions a layer's kernels compute, in float.
struct ActivationOp {
  const char* name;      ///< kernel stem: "elu" → "elu_fp32", "elu_backward"
  /// y from v = x and the layer's parameters a, b, c (see the row's comment in the .cc).
  const char* forward;
  /// dx from v = x, y, g = dy and a, b, c; nullptr when the layer has no backward pass
  /// (Threshold, as in BVLC).
  const char* backward;
  /// Whether `backward` reads v (x); false when it needs y only, so an in-place layer need not
  /// keep a copy of its input.
  bool backward_reads_x;
  /// `forward` for v a vector of 8 floats (MP_F8(x): x as one), where the scalar text is not
  /// OpenCL C for vectors (a scalar first operand of fmax, a vector pow's exponent, scalar
  /// choices); nullptr: `forward` itself.
  const char* vector_forward = nullptr;
};

/// The rows, in table order. Throws std::invalid_argument for an unknown name.
const ActivationOp& ActivationOpNamed(const std::string& name);
const std::vector<ActivationOp>& ActivationOps();

/// Every forward kernel of the family for `type` (float types):
///   <op>_<dt>(int n, In Dtype x, Out Dtype y, float a, float b, float c) for each row, and
///   prelu_<dt>(int n, int channels, int inner, In Dtype x, In Dtype slope, Out Dtype y):
///     y = x > 0 ? x : slope[(i / inner) % channels]·x;
///   bias_<dt>(int n, int channels, int inner, In Dtype x, In Dtype bias, Out Dtype y):
///     y = x + bias[(i / inner) % channels].
/// Values are loaded and stored in the type's storage and computed in float.
/// Where HasVectorActivation each kernel also has a "_v8" form with the same arguments and
/// values: the rows' in vectors of 8 floats over a contiguous range per work-item and the n % 8
/// tail one by one (launch max(n / 8, n % 8) work-items), prelu's and bias's plane by plane
/// (ChannelPlanesVectorLoop; launch ChannelPlanesVectorItems(n)). PoCL runs the scalar forms'
/// exp, log, tanh and pow as a scalar call per value (TanH 3.9 ms for 800 K values, Power 57).
std::string ActivationSource(const KernelTarget& target, DataType type);
/// fp32 on a CPU runtime with vector built-ins (work-items are threads).
bool HasVectorActivation(const KernelTarget& target, DataType type);
/// The forward kernel a layer launches: "<op>_<dt>" or its "_v8" form.
std::string ActivationLaunchName(const KernelTarget& target, const std::string& op, DataType type);

/// Every fp32 backward kernel of the family:
///   <op>_backward(int n, In float x, In float y, In float dy, Out float dx, float a, float b,
///                 float c) for each row with a backward expression (dx may be dy: in place), and
///   prelu_backward(int n, int channels, int inner, In float x, In float slope, In float dy,
///                  Out float dx, Out float t): dx = dy·(x > 0 ? 1 : slope[c]) and
///     t = dy·min(x, 0), whose per-channel sum (channel_sum) is the slope's gradient.
std::string ActivationBackwardSource(const KernelTarget& target);

/// "elu_fp16", "prelu_fp32", …, and "elu_backward".
std::string ActivationKernelName(const std::string& op, DataType type);
std::string ActivationBackwardKernelName(const std::string& op);

}  // namespace mpcaffe
