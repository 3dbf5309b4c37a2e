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

/// Shared by the generator (gemm.cc) and the launcher (gemm_launch.cc): whether kp = 2 packs
/// op(A) into 32-bit pairs first, whether the kernel takes 4-way int8 dot products, the
/// work-group size of a configuration, and the name of the weight-sum kernel.
bool PacksA(const GemmDesc& d, const GemmConfig& c);
bool UsesDot4(const GemmDesc& d, const GemmConfig& c);
Dim3 LocalSize(const GemmConfig& c);
std::string WeightSumsKernelName(const GemmDesc& d);

}  // namespace mpcaffe::libdnn::gemm_internal
