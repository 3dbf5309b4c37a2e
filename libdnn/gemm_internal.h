// libdnn/gemm_internal.h — pieces of the GEMM generator (gemm.cc) that its outer-product tiles
// (gemm_outer.cc) and the other GEMM generators (gemm_int4.cc) share.
#pragma once

#include <functional>
#include <string>

#include "codegen/kernel_writer.h"

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

// Shared by the configuration (gemm_config.cc: Supports, the tuner's candidates) and its
// defaults tables (gemm_defaults.cc).
/// Whether op(A) and op(B) are both contiguous along K, as kDot reads them.
bool DotLayout(const GemmDesc& d);
/// Whether the 4-bit dot product along K serves `desc`: its activations are the rows of A
/// (weights B, transposed: the inner product) or the one column of B (weights A, a matrix ×
/// vector); weights A with several columns of B take the outer product.
bool Int4DotLayout(const GemmDesc& desc);
/// One configuration: an algorithm and its register tile, vector width, work-group, work-group
/// order, K mode and K unroll (lm = 0).
GemmConfig Tile(GemmConfig::Algorithm algorithm, int tm, int tn, int vw, int wg, int mf,
                int kp = GemmConfig::kOneK, int ku = 1);
inline constexpr GemmConfig::Algorithm kOuterTile = GemmConfig::Algorithm::kOuter;

// The generators' vocabulary (gemm.cc), shared by the dot-product tile and gemm_outer.cc.
/// Index expressions of op(A)(m, k) and op(B)(k, n) in the stored matrices.
std::string AIndex(const GemmDesc& d, const std::string& m, const std::string& k);
std::string BIndex(const GemmDesc& d, const std::string& k, const std::string& n);
bool ActivationsAreA(const GemmDesc& d);
bool NeedActivationSums(const GemmDesc& d);
/// kp = 2 subtracts z_w from the weights as they are loaded (no activation sums needed).
bool FoldsWeightZero(const GemmDesc& d, const GemmConfig& c);
/// Whether the kernel accumulates Σx beside the products (the Epilogue's `xs`).
bool KernelSumsActivations(const GemmDesc& d, const GemmConfig& c);
/// Whether int16q's split pair products sum the activations: for the weights' centre
/// (unsigned weights held as w − 32768 add back 32768·Σx) or for the epilogue's z_w·Σx.
bool SplitSumsActivations(const GemmDesc& d, const GemmConfig& c);

/// Pair steps at most this many between flushes of the int16 split forms' int32 partial sums
/// (the GEMM's 8- and 16-lane tiles, the convolution's split path): a lane adds a pair of
/// products of a byte part of x (lo 0..255, hi at most ±256) and an int16 weight, at most
/// 2·256·32768 = 2^24 in magnitude per step, and 127·2^24 < 2^31.
constexpr int kSplitFlushSteps = 127;
/// Indents every line of `text` by `n` spaces.
std::string Indent(const std::string& text, int n);
/// The K loop: `step` per `stride` k (unrolled ku times) while a whole stride fits; the caller
/// handles the rest of K after it.
std::string KLoops(const GemmConfig& c, const std::function<std::string(const std::string&)>& step,
                   int stride);
/// KLoops' loops from the caller's `k` up to `bound` (an expression), without declaring k.
std::string KLoopsTo(const GemmConfig& c,
                     const std::function<std::string(const std::string&)>& step, int stride,
                     const std::string& bound);

/// The dot tile's first lines (gemm.cc): its tile origin m0, n0 (returning outside C), the
/// stride ldbk of op(B)'s columns and the row pointers ap<i> of op(A) and bp<j> of op(B).
std::string DotTileStart(const GemmDesc& d, const GemmConfig& c);
/// The dot tile's end: the K tail from `k` in scalars into r<i>_<j> (and s<q>, the activation
/// sums, with `sums`), then the output pipeline of each element (given s<q> as Σx with
/// `epilogue_sums`).
std::string DotTail(const GemmDesc& d, const GemmConfig& c, bool sums, bool fold,
                    bool epilogue_sums);

/// Whether the kernel multiplies byte quads (kp = 4 with vw = 16: KernelHelper::
/// kByteQuadProduct16; gemm_quads.cc), and its K loop as an MP_QUAD_FN function and body.
bool UsesQuads(const GemmDesc& d, const GemmConfig& c);
std::string QuadFunction(const GemmDesc& d, const GemmConfig& c);
std::string QuadDotBody(const GemmDesc& d, const GemmConfig& c);
std::string QuadOuterBody(const GemmDesc& d, const GemmConfig& c);

/// The body of a kOuter kernel (gemm_outer.cc): register tile, local-memory tile (lm = 1), the
/// product form of kp, and the output pipeline.
std::string OuterBody(const GemmDesc& d, const GemmConfig& c, const Dialect& dialect);

}  // namespace mpcaffe::libdnn::gemm_internal
