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

}  // namespace mpcaffe::libdnn::gemm_internal
