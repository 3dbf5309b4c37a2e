// libdnn/gemm_internal.h — pieces of the GEMM generator (gemm.cc) the other GEMM generators
// (gemm_int4.cc) share.
#pragma once

#include <string>

#include "libdnn/gemm.h"

namespace mpcaffe::libdnn::gemm_internal {

/// The output pipeline for one element: `x` is the raw Σ product (compute scalar), `xs` the
/// activation sum (when needed), `m`/`n` the element's row and column. `folded`: `x` is
/// already Σ(w − z_w)·x, so there is no z_w·Σx term.
std::string Epilogue(const GemmDesc& d, const std::string& x, const std::string& xs,
                     bool folded = false);

/// OpenCL text declaring `long<lanes> out`: mp_requant32 lane by lane of the int<lanes> `val`
/// with the int<lanes> multipliers `mult` and shifts `shift` (the same integers, saturated to
/// int32; the product of an int32 accumulator fits 64 bits, so mp_requant64's 128-bit steps
/// reduce to one rounding shift). Temporaries are named `out` + "_…"; each line is indented by
/// `indent` spaces.
std::string VectorRequant(int lanes, const std::string& out, const std::string& val,
                          const std::string& mult, const std::string& shift, int indent = 0);

/// A residual input of VectorRequantClamp: its int<lanes> value (x − z_res) and the scalar
/// multiplier and shift taking it to the output's scale.
struct VectorResidual {
  std::string value, mult, shift;
};

/// OpenCL text declaring `int<lanes> out`: the int<lanes> `val` requantized with one scalar
/// multiplier and shift for every lane (a channel's), plus `zero`, plus the requantized
/// residual when `res` is given, clamped to [lo, hi] — the same integers as VectorRequant's
/// long lanes summed and clamped, but in int32 lanes (a high multiply) when the shift allows it,
/// which is every calibrated layer of the zoo nets.
std::string VectorRequantClamp(int lanes, const std::string& out, const std::string& val,
                               const std::string& mult, const std::string& shift,
                               const std::string& zero, const VectorResidual* res,
                               const std::string& lo, const std::string& hi, int indent = 0);

/// Shared by the generator (gemm.cc) and the launcher (gemm_launch.cc): whether kp = 2 packs
/// op(A) into 32-bit pairs first, whether the kernel takes 4-way int8 dot products, the
/// work-group size of a configuration, and the name of the weight-sum kernel.
bool PacksA(const GemmDesc& d, const GemmConfig& c);
bool UsesDot4(const GemmDesc& d, const GemmConfig& c);
Dim3 LocalSize(const GemmConfig& c);
std::string WeightSumsKernelName(const GemmDesc& d);

}  // namespace mpcaffe::libdnn::gemm_internal
