// libdnn/gemm_defaults.cc — the GEMM's defaults tables: the configuration per device class and
// shape (GemmDefaults, each row with the command and date that measured it), the work-group order
// (GemmOrderDefaults), and the two combined (DefaultGemmConfig).
#include "libdnn/gemm.h"
#include "libdnn/gemm_config.h"
#include "libdnn/gemm_internal.h"

namespace mpcaffe::libdnn {

namespace {

using gemm_internal::DotLayout;
using gemm_internal::Int4DotLayout;
using gemm_internal::kOuterTile;
using gemm_internal::Tile;

/// Whether 4-bit weights take their own kernel rather than the int8 kernels on the weights
/// unpacked to bytes (once, by Gemm::ComputeWeightSums): the nibbles are unpacked in registers
/// at every use, which pays where the weights are most of the bytes moved. The dot tile unpacks
/// a weight row once per row tile of activations, so it keeps 4 bits only while the activation
/// rows are no more than the weight rows, and only where the compiler makes byte pair or quad
/// products single instructions (TargetProfile::byte_pair_products, byte_quad_products): on
/// Intel's CPU runtime the int8 tiles won AlexNet's inner products at batch 1, 4 and 10, at
/// AVX-512 and AVX2. The outer tile, on a compiler without byte pair products, keeps 4 bits while
/// the activation columns are at most 4 × the weight rows. Figures: docs/BENCHMARKS.md, "Default
/// configurations".
bool Int4KernelPays(const TargetProfile& profile, const GemmDesc& desc) {
  const bool weights_a = desc.weights == WeightOperand::kA;
  const int64_t activations = weights_a ? desc.N : desc.M, rows = weights_a ? desc.M : desc.N;
  if (Int4DotLayout(desc))
    return (profile.byte_pair_products || profile.byte_quad_products) && activations <= rows;
  return profile.byte_pair_products || activations <= 4 * rows;
}

/// Where 4-bit weights take their own kernel by default: an OpenCL CPU runtime, where they pay.
bool Int4Own(const TargetProfile& p, const GemmDesc& d) {
  return p.cpu_vectors && d.weight_bits == 4 && Int4KernelPays(p, d);
}
/// The 4-bit dot tile's activation rows (a batch shares each weight row among them): M with
/// weights B, the one column of B with weights A (Int4DotLayout).
int Int4Rows(const GemmDesc& d) { return d.weights == WeightOperand::kB ? d.M : d.N; }
/// The 4-bit dot tile: the device's own kernel that pays, K-contiguous, with or without quads.
bool Int4Dot(const TargetProfile& p, const GemmDesc& d, bool quads) {
  return Int4Own(p, d) && Int4DotLayout(d) && p.byte_quad_products == quads;
}
/// The dot product along K is the default form: matrix × vector and K-contiguous operands.
bool DotForm(const GemmDesc& d) { return DotLayout(d) && (d.N <= 4 || d.trans_b); }
/// The dot form with a K below 64 and many rows and columns (an output layer at a batch): its
/// vectors along K barely fill there.
bool ShortK(const GemmDesc& d) { return DotForm(d) && d.K < 64 && d.M >= 8 && d.N > 4; }
bool Int8(const GemmDesc& d) { return d.type == DataType::kInt8Q; }
/// int16q in the dot form with K of 64 and more: the split pair products' tiles.
bool Int16SplitDot(const GemmDesc& d) {
  return DotForm(d) && d.type == DataType::kInt16Q && d.K >= 64;
}
/// One activation row against weight rows B: a batch-1 inner product, where a taller tile would
/// only repeat the one row's loads and products.
bool OneActivationRow(const GemmDesc& d) { return d.weights == WeightOperand::kB && d.M == 1; }

}  // namespace

const DefaultsTable<GemmConfig, GemmDesc>& GemmDefaults() {
  using P = const TargetProfile&;
  using D = const GemmDesc&;
  constexpr GemmConfig::Algorithm kDotTile = GemmConfig::Algorithm::kDot;
  constexpr int kPairs = GemmConfig::kPairs, kU8S4 = GemmConfig::kU8S4;
  // 4-bit weights (kp = kU8S4, libdnn/gemm_int4.cc) on OpenCL CPU runtimes, where they pay
  // (Int4KernelPays): vectors along K where Int4DotLayout, in byte quads (vw = 16) where the
  // device runs them (twice the pairs' speed and more: ahead of int8 there), else byte pairs;
  // one activation row against 4 (quads) or 8 (pairs) weight rows, one column against 4 weight
  // rows, batches 4 × 2 (2 × 2 below 4 rows; quads 4 × 4 against 8 weight rows and more). Else
  // the outer product with weights A, 4 rows × 4 vectors of 8 columns, the work-group order
  // streaming the larger operand once. Elsewhere the int8 kernels run on the weights unpacked to
  // bytes (an InnerProduct's blob bytes; Gemm::ComputeWeightSums unpacks packed ones once).
  //
  // Matrix × vector and K-contiguous operands take vectors along K (kDot). On OpenCL CPU runtimes
  // 4 × 2 (× 1 for N ≤ 4) tiles of vectors of 8 in one-work-item groups; int8 multiplies 16-bit
  // pairs, 16 k per step (one vpmaddwd per 16 products where the int32 lanes of the one-k step
  // take a vpmulld per 8). A batch-1 fp32 or int8 inner product (one activation row) takes one
  // row against 8 weight rows: a 4-row tile repeated the one row's products four times. Where the
  // device runs VNNI's byte quads in a helper (TargetProfile::byte_quad_products), 4 weight rows
  // in quads instead, 64 k per vpdpbusd: the loop then keeps pace with the weights' stream; the
  // quads' portable form (Intel's runtime, AVX2) lost to the pairs. Batches of 4 rows and more
  // take 4 × 2 tiles of such quads there too. Where work-items are lanes,
  // scalar work-items in groups of 64 with a
  // tile no taller than op(A), whose extra rows would only repeat the last row's loads and
  // multiply-adds (a batch-1 InnerProduct has M = 1). int16 (N > 4, K >= 64) splits each
  // activation vector into bytes once for 8 weight rows and multiplies 16-bit pairs (kp = 2,
  // DotSplitBody); below 64 k the split's pair loop barely runs, and the one-k tile in vectors
  // of 4 (64-bit lanes) measured faster there.
  //
  // Otherwise outer products (kOuter). On OpenCL CPU runtimes 6 rows × 2 vectors of 8 floats (12
  // accumulators in 16 vector registers) in one-work-item groups, walking M tiles first where
  // M < N so one B panel stays in cache while the smaller A is re-read; int8 multiplies 16-bit
  // pairs (vpmaddwd: 16 MACs per instruction against 8 for int32 lanes). A native 4-way dot
  // product (kp = 4) is not the CPU default: on Intel's runtime (AVX-512 VNNI) its
  // dot_4x8packed_* built-ins stay scalar calls the work-item vectorizer cannot widen ("call
  // instruction cannot be vectorized"). Elsewhere 4 × 4 scalar tiles in groups of 64, with
  // kp = 4 for int8 where the dot product is native (dp4a, cl_khr_integer_dot_product).
  static const char* const kInt4Bench =
      "GemmInt4Bench.DISABLED_AlexNetShapes, GEMM_INT4_CANDIDATES=1, 3 / 7 / 9 alternating "
      "rounds, PoCL, 2026-11-24; where they pay: mpcaffe time on the 784-30-10 net with "
      "4-bit weights against MPCAFFE_KERNEL_CONFIG forcing the int8 tile, both CPU runtimes, "
      "2026-11-29";
  static const char* const kInt4Quads =
      "GemmInt4Bench.DISABLED_AlexNetShapes, GEMM_INT4_CANDIDATES=1 GEMM_INT4_SHAPES=45689, 5 "
      "rounds, PoCL, AVX-512 VNNI, Xeon, 2026-12-02, ms of the pair default -> this tile: "
      "1x4096x9216 0.91 -> 0.48, 1x4096x4096 0.40 -> 0.23, 1x1000x4096 0.15 -> 0.09, 4096x1x9216 "
      "0.80 -> 0.46, 10x4096x9216 4.02 -> 1.81, 4x4096x4096 0.97 -> 0.43 (int8: 0.88, 0.39, "
      "0.12, 1.32, 2.38, 0.49)";
  static const char* const kInt4QuadsOneRow =
      "MPCAFFE_KERNEL_CONFIG='gemm:dot tm=1 tn=1|2|4 vw=16 wg=1 ku=1 mf=0 kp=8' mpcaffe time "
      "--model <the paper's imagenet_caffenet net_float_1 converted to int8w4> --synthetic "
      "--iterations 30 --explain --device 1, PoCL, AVX-512 VNNI, AMD EPYC (Zen 4), 2 rounds, "
      "2026-12-05 (docs/BENCHMARKS.md, \"Default configurations\"): fc6+fc7+fc8 1.48 / 1.47 ms "
      "(tn=4) -> 0.99 / 1.00 (tn=1; tn=2 1.91 / 1.84), whole pass 3.99 / 4.00 -> 3.46-3.52";
  static const char* const kInt4Quads4x4 =
      "MPCAFFE_KERNEL_CONFIG='gemm:dot tm=4 tn=2|4 vw=16 wg=1 ku=1 mf=0 kp=8', mpcaffe time on "
      "BVLC AlexNet int8w4 at batch 10, 3 alternating rounds, PoCL, AVX-512 VNNI, Xeon, "
      "2026-12-02: fc6-fc8 summed 6.48 / 5.32, 5.47 / 4.90, 6.21 / 5.20 ms (4x2 / 4x4)";
  static const char* const kInt4Pairs =
      "GemmInt4Bench.DISABLED_AlexNetShapes, GEMM_INT4_CANDIDATES=1 GEMM_INT4_SHAPES=589, 3 "
      "rounds, PoCL at AVX2 (MPCAFFE_ISA=avx2) and Intel's runtime at both levels, Xeon, "
      "2026-12-02: the best pair tile or within 16% of it on 1x4096x9216 (1x8), 10x4096x9216 "
      "and 4x4096x4096 (4x2), against tm=1 tn=1 and tm=2 tn=2; 4096x1x9216 (4x1) on PoCL at "
      "AVX-512 only";
  static const char* const kCpuShortK =
      "the 784-30-10 net's output layer (10000x10x30) in mpcaffe time, MPCAFFE_KERNEL_CONFIG "
      "forcing the dot default against this tile, 3 alternating rounds, Xeon, 2026-12-02, ms: "
      "fp32 PoCL 0.36-0.39 -> 0.23-0.28, Intel's runtime 0.37-0.43 -> 0.21-0.22; int8 Intel's "
      "runtime 0.59-0.60 -> 0.44-0.48 (PoCL's byte quads 0.56-0.59 -> 0.57-0.62: kept); at AVX2 "
      "(MPCAFFE_ISA=avx2) fp32 PoCL 0.36 -> 0.29-0.33, Intel's 0.35 -> 0.19-0.22, int8 PoCL "
      "0.74-0.78 -> 0.63-0.64, Intel's 0.49-0.54 -> 0.38-0.40; fp16 and int16 lost on PoCL "
      "(0.5 -> 0.8, 0.53 -> 1.13): kept";
  static const char* const kCpuShortKHalf =
      "mpcaffe tune gemm 10000 10 30 --dtype fp16 --tb --weights B --device 0 (the 784-30-10 "
      "net's output layer), Intel's runtime, AVX-512, Xeon, 2026-12-02, twice: outer tm=8 tn=2 "
      "0.244 and 0.234 ms against the default dot tm=4 tn=2 vw=8 0.725 and 0.380 (tm=6 tn=2 "
      "0.274); in the net (mpcaffe time --json, MPCAFFE_KERNEL_CONFIG, 3 alternating rounds) "
      "0.41 -> 0.31 (6x2) -> 0.28 ms (8x2); PoCL's fp16 (half storage only) lost with the outer "
      "tile (kCpuShortK)";
  static const char* const kCpuHalfDot =
      "mpcaffe tune gemm 1 4096 4096 --dtype fp16 --tb --weights B --device 0 --max 0, Intel's "
      "runtime, Xeon, 2026-12-02, ms the former default dot tm=4 tn=2 vw=8 -> this tile (the "
      "tuner's best): AVX-512 1.151 -> 0.659; AVX2 (MPCAFFE_ISA=avx2) 1.107 -> 0.635 (tm=1 tn=4 "
      "vw=8 0.621)";
  static const char* const kCpuWideDot =
      "mpcaffe tune gemm M N K --dtype fp32|fp16 --tb --weights B --device 0|1 --max 0, Xeon, "
      "2026-12-02, ms the former default dot tm=4 tn=2 vw=8 -> this tile: fp32 Intel's runtime "
      "16x1000x4096 1.034 -> 0.691, 10000x30x784 3.472 -> 2.707; fp32 PoCL 1.279 -> 1.073, "
      "3.266 -> 2.902; fp16 Intel's runtime 4x1000x4096 0.295 -> 0.202, 16x1000x4096 1.845 -> "
      "0.701, 64x1000x2048 1.914 -> 1.403, 10000x30x784 3.98-4.05 -> 3.35-3.53. At AVX2 "
      "(MPCAFFE_ISA=avx2) it lost on Intel's runtime: fp32 0.984 -> 1.319 and 3.688 -> 4.545, "
      "fp16 0.984 -> 1.187 and 4.058 -> 4.761";
  static const char* const kCpuPairs4x4 =
      "mpcaffe tune gemm M N K --dtype int8 --tb --weights B --device 0|1 --max 0, Xeon, "
      "2026-12-02, ms the former default dot tm=4 tn=2 vw=8 kp=2 -> this tile: Intel's runtime "
      "at AVX-512 10000x30x784 2.380 -> 2.228, 16x4096x9216 4.122 -> 3.370, 64x1000x4096 "
      "1.797 -> 1.507, 16x1000x4096 0.469 -> 0.384, 100x500x800 0.404 -> 0.344 (the tuner's "
      "best on all five). At AVX2 (MPCAFFE_ISA=avx2) it lost or tied: Intel's runtime 2.996 -> "
      "3.316, 6.033 -> 5.803, 2.499 -> 2.583, 0.633 -> 0.641, 0.519 -> 0.532; PoCL 3.720 -> "
      "4.164, 5.848 -> 6.083, 2.701 -> 2.807, 0.761 -> 0.730, 0.614 -> 0.661. PoCL on an "
      "AVX-512 CPU without VNNI takes it too: not measured (this Xeon has VNNI)";
  static const char* const kCpuDot =
      "the int8 tile: MPCAFFE_KERNEL_CONFIG='gemm:dot tm=4 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1' (and "
      "kp=2) mpcaffe time --model <784-30-10 net, int8> --synthetic --iterations 10, both CPU "
      "runtimes, 2026-11-29; the float tile: no measurement recorded, the tuner times the "
      "other dot tiles beside it";
  static const char* const kCpuQuads =
      "GemmBenchmark.DISABLED_QuadsVersusPairs (AlexNet fc6, fc7, fc8 at batch 1), 15-21 "
      "alternating rounds, PoCL and Intel's runtime at AVX-512 and at AVX2, loaded machine, "
      "2026-11-29";
  static const char* const kCpuQuadsOneRow =
      "MPCAFFE_KERNEL_CONFIG='gemm:dot tm=1 tn=1|4 vw=16 wg=1 ku=1|2 mf=0 kp=4' mpcaffe time "
      "--model <net converted to int8, batch 1> --synthetic --iterations 30 --explain, PoCL, "
      "AVX-512 VNNI, AMD EPYC (Zen 4), 2 rounds, 2026-12-05 (docs/BENCHMARKS.md, \"Default "
      "configurations\"): BVLC AlexNet fc6+fc7+fc8 2.04 / 1.93 ms (tm=1 tn=4 ku=1) -> 1.58 / "
      "1.51 (tn=1 ku=2; tn=1 ku=1 1.88 / 1.54), whole pass 4.62 / 4.46 -> 4.22 / 3.98; the "
      "1000-way classifiers of MobileNet v2, ResNet-50 and GoogLeNet 0.15 / 0.09, 0.15 / 0.16, "
      "0.12 / 0.09 -> 0.11 / 0.06, 0.14 / 0.12, 0.10 / 0.07. mpcaffe tune gemm (weights hot in "
      "the cache, unlike a net's pass) ranks tn=4 first on 1x1000xK, tn=1 on 1x4096x9216 (0.69 "
      "against 0.99 ms)";
  static const char* const kCpuQuadsBatch =
      "mpcaffe tune gemm M N K --dtype int8 --tb --weights B --device 1, PoCL, AVX-512 VNNI, "
      "Xeon, 2026-12-02, ms dot tm=4 tn=2 vw=8 kp=2 (the pair tile) -> this tile: 10000x30x784 "
      "6.48 -> 3.61, 16x4096x9216 16.08 -> 7.04, 16x1000x4096 1.32 -> 1.05, 64x1000x2048 "
      "3.88 -> 2.52 (tm=4 tn=1 1.91), 4x4096x4096 1.99 -> 1.34 (tm=2 tn=2 1.27)";
  static const char* const kCpuQuads4x4 =
      "MPCAFFE_KERNEL_CONFIG='gemm:dot tm=4 tn=2|4 vw=16 wg=1 ku=1 mf=0 kp=4', mpcaffe time, 3 "
      "alternating rounds, PoCL, AVX-512 VNNI, Xeon, 2026-12-02, ms 4x2 -> 4x4: the 784-30-10 "
      "net's hidden layer (10000x30x784) 2.33-2.58 -> 2.13-2.16, AlexNet at batch 10 fc6-fc8 "
      "summed 8.0-9.1 -> 6.4-7.4; mpcaffe tune gemm (one run): 64x1000x2048 0.77 -> 0.62, "
      "16x1000x4096 0.50 -> 0.32, 4x4096x4096 0.50 -> 0.41, 16x4096x9216 2.99 -> 3.05";
  static const char* const kCpuOneRow =
      "MPCAFFE_KERNEL_CONFIG='gemm:dot tm=1 tn=8 vw=8 wg=1 ku=1 mf=0 kp=1' (and tn=4) against "
      "the default, mpcaffe time --model <AlexNet b1 fp32> --synthetic --iterations 10, fc6-fc8, "
      "3 alternating rounds, both CPU runtimes, loaded machine, 2026-11-29";
  static const char* const kCpuInt16 =
      "vw 4 against vw 8: MPCAFFE_KERNEL_CONFIG='gemm:dot tm=4 tn=2 vw=4 wg=1 ku=1 mf=0 kp=1' "
      "(and vw=8) mpcaffe time --model <784-30-10 net, int16> --synthetic --iterations 10, 3 "
      "alternating rounds, whole-pass medians 0.83x (PoCL) and 0.88x (Intel's runtime) the vw 8 "
      "time, loaded machine, 2026-11-29";
  static const char* const kCpuInt16SplitOrder =
      "mpcaffe tune gemm M N K --dtype int16 --tb --weights B --device 0|1 on 10000x30x784, "
      "16x4096x9216, 64x1000x4096 and 1x4096x9216, AVX-512 and AVX2, 2026-11-30: the tile the "
      "best or within 20% of it on each, 1.5-2.6x the former default (dot tm=4 tn=2 vw=4; "
      "10000x10x30: no gain, K below 64 keeps that tile). The order, AMD EPYC (Zen 4), "
      "2026-12-05, ms: AVX-512, Intel's runtime, dot tm=1 tn=8 vw=8 mf=1 against mf=0: "
      "10000x30x784 4.14 / 4.51, 16x4096x9216 8.12 / 9.58, 1x4096x9216 1.91 / 2.00, "
      "64x1000x4096 3.85 (4x2 mf=1: 3.60) / 4.52: neighbouring work-items share a row of the "
      "weights in cache instead of each reading its own";
  static const char* const kCpuInt16SplitQuads =
      "mpcaffe tune gemm M N K --dtype int16 --tb --weights B --device 1 (PoCL, the VNNI "
      "helper), AMD EPYC (Zen 4, AVX-512), 2026-12-05, ms, dot tm=1 tn=8 vw=16 mf=1 against "
      "the former default (tm=1 tn=8 vw=8 mf=0): 10000x30x784 3.90 / 5.97, 16x4096x9216 "
      "8.07 / 33.3, 1x4096x9216 1.93 / 2.20, 64x1000x4096 3.30 / 4.19; the best candidate on "
      "all four";
  static const char* const kCpuInt16SplitHalfRegisters =
      "mpcaffe tune gemm M N K --dtype int16 --tb --weights B --device 0|1 at AVX2 "
      "(MPCAFFE_ISA=avx2 CL_CONFIG_CPU_TARGET_ARCH=core-avx2 POCL_KERNELLIB_NAME=avx2), AMD EPYC "
      "(Zen 4), 2026-12-05, ms, dot tm=1 tn=4 vw=8 mf=1 against tm=1 tn=8 vw=8 mf=0: Intel's "
      "runtime 10000x30x784 5.70-5.83 / 6.02-7.40, 16x4096x9216 11.09 / 12.26, 64x1000x4096 "
      "4.98-5.04 / 5.90-6.34 (the best, tn=4 mf=0, 4.89-4.90); PoCL 5.24 / 7.19, 11.09 / 33.04, 4.62 / 8.08 "
      "(the best on each): tn=8's 16 pair accumulators spill 16 registers";
  static const char* const kCpuInt16ShortK =
      "mpcaffe tune gemm M N K --dtype int16 --tb --weights B --device 0|1, 2 runs each, AMD "
      "EPYC (Zen 4, AVX-512), 2026-12-03, dot 4x4 vw 4 against the former default dot 4x2 vw 4 "
      "(ms, Intel's runtime / PoCL): 10000x10x30 (the 784-30-10 net's output layer) "
      "0.58-0.70 / 0.62-0.70 against 1.03-1.36 / 0.70-0.78, 10000x10x50 0.65-0.89 / 0.59-0.67 "
      "against 1.47-1.52 / 0.60-0.76, 1000x32x48 0.18-0.24 / 0.21-0.25 against 0.36-0.41 / "
      "0.24-0.29, 256x10x30 0.023-0.031 / 0.060-0.073 against 0.062-0.067 / 0.060-0.068: "
      "5 work-items of 2 columns along dimension 0 leave most of the lanes Intel's runtime "
      "packs from them empty";
  static const char* const kLaneDot =
      "the tile's height: mpcaffe time --model <AlexNet fc6 net / AlexNet b1> --device 2 "
      "--synthetic, the configuration forced, rusticl, 2026-11-29; vw 1 wg 64: not measured "
      "on a GPU (none on the build machine)";
  static const char* const kCpuOuter =
      "prototype kernels on 512^3 and AlexNet's conv1 GEMM (the order), PoCL, 2026-11-22; "
      "int8 pairs: GemmBenchmark side by side on PoCL, 2026-11-23; no kp = 4: "
      "GemmBenchmark.DISABLED_Dot4VersusPairs, 7 alternating rounds, Intel's runtime, "
      "2026-11-24";
  static const DefaultsTable<GemmConfig, GemmDesc> table = {
      {"OpenCL CPU runtime with byte quads, 4-bit weights B that pay, 4 rows and 8 columns",
       [](P p, D d) { return Int4Dot(p, d, true) && Int4Rows(d) >= 4 && d.N >= 8; },
       Tile(kDotTile, 4, 4, 16, 1, 0, kU8S4), kInt4Quads4x4},
      {"OpenCL CPU runtime with byte quads, 4-bit weights that pay, dot layout, 4 rows or more",
       [](P p, D d) { return Int4Dot(p, d, true) && Int4Rows(d) >= 4; },
       Tile(kDotTile, 4, 2, 16, 1, 0, kU8S4), kInt4Quads},
      {"OpenCL CPU runtime with byte quads, 4-bit weights that pay, dot layout, a batch",
       [](P p, D d) { return Int4Dot(p, d, true) && Int4Rows(d) >= 2; },
       Tile(kDotTile, 2, 2, 16, 1, 0, kU8S4), kInt4Quads},
      // One weight row per work-item, as int8's one-row default (kCpuQuadsOneRow).
      {"OpenCL CPU runtime with byte quads, 4-bit weights B that pay, dot layout, one row: one "
       "weight row per work-item",
       [](P p, D d) { return Int4Dot(p, d, true) && d.weights == WeightOperand::kB; },
       Tile(kDotTile, 1, 1, 16, 1, 0, kU8S4), kInt4QuadsOneRow},
      {"OpenCL CPU runtime with byte quads, 4-bit weights A that pay, dot layout",
       [](P p, D d) { return Int4Dot(p, d, true); }, Tile(kDotTile, 4, 1, 16, 1, 0, kU8S4),
       kInt4Quads},
      {"OpenCL CPU runtime, 4-bit weights that pay, dot layout, 4 activation rows or more",
       [](P p, D d) { return Int4Dot(p, d, false) && Int4Rows(d) >= 4; },
       Tile(kDotTile, 4, 2, 8, 1, 0, kU8S4), kInt4Pairs},
      {"OpenCL CPU runtime, 4-bit weights that pay, dot layout, a batch",
       [](P p, D d) { return Int4Dot(p, d, false) && Int4Rows(d) >= 2; },
       Tile(kDotTile, 2, 2, 8, 1, 0, kU8S4), kInt4Bench},
      {"OpenCL CPU runtime, 4-bit weights B that pay, dot layout, one activation row",
       [](P p, D d) { return Int4Dot(p, d, false) && d.weights == WeightOperand::kB; },
       Tile(kDotTile, 1, 8, 8, 1, 0, kU8S4), kInt4Pairs},
      {"OpenCL CPU runtime, 4-bit weights A that pay, dot layout, one activation column",
       [](P p, D d) { return Int4Dot(p, d, false); }, Tile(kDotTile, 4, 1, 8, 1, 0, kU8S4),
       kInt4Pairs},
      {"OpenCL CPU runtime, 4-bit weights A that pay, M < N",
       [](P p, D d) { return Int4Own(p, d) && d.weights == WeightOperand::kA && d.M < d.N; },
       Tile(kOuterTile, 4, 4, 8, 1, 1, kU8S4), kInt4Bench},
      {"OpenCL CPU runtime, 4-bit weights A that pay",
       [](P p, D d) { return Int4Own(p, d) && d.weights == WeightOperand::kA; },
       Tile(kOuterTile, 4, 4, 8, 1, 0, kU8S4), kInt4Bench},
      {"OpenCL CPU runtime, fp32, K below 64, M >= 8, N > 4",
       [](P p, D d) { return p.cpu_vectors && d.type == DataType::kFloat32 && ShortK(d); },
       Tile(kOuterTile, 6, 2, 8, 1, 0), kCpuShortK},
      {"OpenCL CPU runtime with half arithmetic (cl_khr_fp16: Intel's runtime), fp16, K below "
       "64, M >= 8, N > 4",
       [](P p, D d) {
         return p.cpu_vectors && p.half_arithmetic && d.type == DataType::kFloat16 && ShortK(d);
       },
       Tile(kOuterTile, 8, 2, 8, 1, 0), kCpuShortKHalf},
      {"OpenCL CPU runtime without byte quads, int8q, K below 64, M >= 8, N > 4",
       [](P p, D d) { return p.cpu_vectors && !p.byte_quad_products && Int8(d) && ShortK(d); },
       Tile(kOuterTile, 6, 2, 8, 1, 0, kPairs), kCpuShortK},
      // One weight row per work-item, its K loop unrolled twice: at batch 1 the weights are
      // read once from memory, and a work-item streaming 4 rows at once ran the large layers
      // (AlexNet's fc6: 38 MB) at two thirds of the bandwidth.
      {"OpenCL CPU runtime with byte quads, dot form, int8q, one activation row: one weight row "
       "per work-item, K unrolled twice",
       [](P p, D d) {
         return p.cpu_vectors && p.byte_quad_products && DotForm(d) && Int8(d) &&
                OneActivationRow(d);
       },
       Tile(kDotTile, 1, 1, 16, 1, 0, GemmConfig::kDot4, 2), kCpuQuadsOneRow},
      {"OpenCL CPU runtime, dot form, int8q, one activation row",
       [](P p, D d) { return p.cpu_vectors && DotForm(d) && Int8(d) && OneActivationRow(d); },
       Tile(kDotTile, 1, 8, 8, 1, 0, kPairs), kCpuQuads},
      {"OpenCL CPU runtime, dot form, fp32, one activation row",
       [](P p, D d) {
         return p.cpu_vectors && DotForm(d) && d.type == DataType::kFloat32 &&
                OneActivationRow(d);
       },
       Tile(kDotTile, 1, 8, 8, 1, 0), kCpuOneRow},
      {"OpenCL CPU runtime with half arithmetic (Intel's runtime), dot form, fp16, one "
       "activation row",
       [](P p, D d) {
         return p.cpu_vectors && p.half_arithmetic && DotForm(d) &&
                d.type == DataType::kFloat16 && OneActivationRow(d);
       },
       Tile(kDotTile, 1, 4, 16, 1, 0), kCpuHalfDot},
      {"OpenCL CPU runtime at AVX-512 (no half-register tiles), dot form, fp32 or fp16 in half "
       "(Intel's runtime), M >= 4, N >= 8",
       [](P p, D d) {
         const bool half = d.type == DataType::kFloat16 && p.half_arithmetic;
         return p.cpu_vectors && !p.half_register_tiles && DotForm(d) &&
                (d.type == DataType::kFloat32 || half) && d.M >= 4 && d.N >= 8;
       },
       Tile(kDotTile, 4, 4, 16, 1, 0), kCpuWideDot},
      {"OpenCL CPU runtime with byte quads, dot form, int8q, M >= 4, N >= 8",
       [](P p, D d) {
         return p.cpu_vectors && p.byte_quad_products && DotForm(d) && Int8(d) && d.M >= 4 &&
                d.N >= 8;
       },
       Tile(kDotTile, 4, 4, 16, 1, 0, GemmConfig::kDot4), kCpuQuads4x4},
      {"OpenCL CPU runtime with byte quads, dot form, int8q, M >= 4, N > 4",
       [](P p, D d) {
         return p.cpu_vectors && p.byte_quad_products && DotForm(d) && Int8(d) && d.M >= 4 &&
                d.N > 4;
       },
       Tile(kDotTile, 4, 2, 16, 1, 0, GemmConfig::kDot4), kCpuQuadsBatch},
      {"OpenCL CPU runtime at AVX-512 (no half-register tiles) without byte quads (Intel's "
       "runtime), dot form, int8q, M >= 4, N >= 8: 16-bit pairs in 4 x 4 tiles",
       [](P p, D d) {
         return p.cpu_vectors && !p.half_register_tiles && !p.byte_quad_products && DotForm(d) &&
                Int8(d) && d.M >= 4 && d.N >= 8;
       },
       Tile(kDotTile, 4, 4, 8, 1, 0, kPairs), kCpuPairs4x4},
      {"OpenCL CPU runtime, dot form, int8q, N <= 4",
       [](P p, D d) { return p.cpu_vectors && DotForm(d) && Int8(d) && d.N <= 4; },
       Tile(kDotTile, 4, 1, 8, 1, 0, kPairs), kCpuDot},
      {"OpenCL CPU runtime, dot form, int8q",
       [](P p, D d) { return p.cpu_vectors && DotForm(d) && Int8(d); },
       Tile(kDotTile, 4, 2, 8, 1, 0, kPairs), kCpuDot},
      {"OpenCL CPU runtime, dot form, N <= 4",
       [](P p, D d) { return p.cpu_vectors && DotForm(d) && d.N <= 4; },
       Tile(kDotTile, 4, 1, 8, 1, 0), kCpuDot},
      {"OpenCL CPU runtime with byte quads in a helper (AVX-512 VNNI), dot form, int16q, "
       "K >= 64",
       [](P p, D d) { return p.cpu_vectors && p.byte_quad_products && Int16SplitDot(d); },
       Tile(kDotTile, 1, 8, 16, 1, 1, kPairs), kCpuInt16SplitQuads},
      {"OpenCL CPU runtime at half the registers, dot form, int16q, K >= 64",
       [](P p, D d) { return p.cpu_vectors && p.half_register_tiles && Int16SplitDot(d); },
       Tile(kDotTile, 1, 4, 8, 1, 1, kPairs), kCpuInt16SplitHalfRegisters},
      {"OpenCL CPU runtime, dot form, int16q, K >= 64",
       [](P p, D d) { return p.cpu_vectors && Int16SplitDot(d); },
       Tile(kDotTile, 1, 8, 8, 1, 1, kPairs), kCpuInt16SplitOrder},
      {"OpenCL CPU runtime, int16q, K below 64, M >= 8, N > 4",
       [](P p, D d) { return p.cpu_vectors && d.type == DataType::kInt16Q && ShortK(d); },
       Tile(kDotTile, 4, 4, 4, 1, 0), kCpuInt16ShortK},
      {"OpenCL CPU runtime, dot form, int16q",
       [](P p, D d) { return p.cpu_vectors && DotForm(d) && d.type == DataType::kInt16Q; },
       Tile(kDotTile, 4, 2, 4, 1, 0), kCpuInt16},
      {"OpenCL CPU runtime, dot form", [](P p, D d) { return p.cpu_vectors && DotForm(d); },
       Tile(kDotTile, 4, 2, 8, 1, 0), kCpuDot},
      {"every other device, dot form, M >= 4, N <= 4",
       [](P, D d) { return DotForm(d) && d.M >= 4 && d.N <= 4; }, Tile(kDotTile, 4, 1, 1, 64, 0),
       kLaneDot},
      {"every other device, dot form, M >= 4", [](P, D d) { return DotForm(d) && d.M >= 4; },
       Tile(kDotTile, 4, 2, 1, 64, 0), kLaneDot},
      {"every other device, dot form, M 2 or 3, N <= 4",
       [](P, D d) { return DotForm(d) && d.M >= 2 && d.N <= 4; }, Tile(kDotTile, 2, 1, 1, 64, 0),
       kLaneDot},
      {"every other device, dot form, M 2 or 3", [](P, D d) { return DotForm(d) && d.M >= 2; },
       Tile(kDotTile, 2, 2, 1, 64, 0), kLaneDot},
      {"every other device, dot form, M = 1, N <= 4", [](P, D d) { return DotForm(d) && d.N <= 4; },
       Tile(kDotTile, 1, 1, 1, 64, 0), kLaneDot},
      {"every other device, dot form, M = 1", [](P, D d) { return DotForm(d); },
       Tile(kDotTile, 1, 2, 1, 64, 0), kLaneDot},
      {"OpenCL CPU runtime, int8q, M < N",
       [](P p, D d) { return p.cpu_vectors && Int8(d) && d.M < d.N; },
       Tile(kOuterTile, 6, 2, 8, 1, 1, kPairs), kCpuOuter},
      {"OpenCL CPU runtime, int8q", [](P p, D d) { return p.cpu_vectors && Int8(d); },
       Tile(kOuterTile, 6, 2, 8, 1, 0, kPairs), kCpuOuter},
      {"OpenCL CPU runtime, M < N", [](P p, D d) { return p.cpu_vectors && d.M < d.N; },
       Tile(kOuterTile, 6, 2, 8, 1, 1), kCpuOuter},
      {"OpenCL CPU runtime", [](P p, D) { return p.cpu_vectors; }, Tile(kOuterTile, 6, 2, 8, 1, 0),
       kCpuOuter},
      {"native 4-way dot product, int8q", [](P p, D d) { return p.dot_product && Int8(d); },
       Tile(kOuterTile, 4, 4, 1, 64, 0, GemmConfig::kDot4),
       "not measured (no GPU on the build machine); the tuner times kp = 1 beside it"},
      {"every other device", [](P, D) { return true; }, Tile(kOuterTile, 4, 4, 1, 64, 0),
       "not measured on a GPU (none on the build machine); the tuner's candidates cover it"},
  };
  return table;
}

const DefaultsTable<int, GemmDesc>& GemmOrderDefaults() {
  using P = const TargetProfile&;
  using D = const GemmDesc&;
  static const char* const kBatchOrder =
      "mpcaffe tune gemm M N K --dtype fp32|int8 --tb --weights B --device 0|1, the default tile "
      "with mf=1 against mf=0, AMD EPYC (Zen 4), 2026-12-05, ms. AVX-512: fp32 PoCL "
      "16x4096x9216 9.28 / 23.48, 64x1000x4096 3.56 / 5.19; Intel's runtime 10.52 / 11.32, "
      "3.21 / 3.17; int8 PoCL (byte quads) 3.36 / 5.76, 1.05 / 1.21, 16x1000x4096 0.274 / "
      "0.260; Intel's runtime 4.53 / 4.36, 1.84 / 1.88, 0.469 / 0.468. AVX2 (MPCAFFE_ISA=avx2 "
      "CL_CONFIG_CPU_TARGET_ARCH=core-avx2 POCL_KERNELLIB_NAME=avx2): fp32 PoCL 13.33 / 26.91, "
      "4.63 / 5.37; Intel's runtime 13.00 / 14.01, 4.25 / 4.20; int8 PoCL 6.22 / 9.10, 2.38 / "
      "2.65; Intel's runtime 6.70 / 6.87, 2.50 / 4.61. Where activation rows outnumber weight "
      "rows (10000x30x784) mf=1 lost: fp32 PoCL 9.67 / 4.17 (AVX2 14.18 / 3.88), Intel's "
      "runtime at AVX2 4.72 / 4.04";
  static const DefaultsTable<int, GemmDesc> table = {
      {"OpenCL CPU runtime, dot form, fp32 or int8q inner product at a batch of fewer "
       "activation rows than weight rows (2 <= M < N)",
       [](P p, D d) {
         return p.cpu_vectors && DotForm(d) && d.weights == WeightOperand::kB &&
                d.weight_bits == 8 &&
                (d.type == DataType::kFloat32 || d.type == DataType::kInt8Q) && d.M >= 2 &&
                d.M < d.N;
       },
       1, kBatchOrder},
      {"every other device and shape", [](P, D) { return true; }, -1,
       "the configuration row's own order"},
  };
  return table;
}

GemmConfig DefaultGemmConfig(const DeviceInfo& device, const GemmDesc& desc) {
  const GemmFamily& f = GemmForwardFamily();
  const TargetProfile profile = TargetProfile::Of(device);
  GemmConfig c = DefaultRowFor(f.defaults(), f.name, profile, desc).config;
  const int mf = DefaultRowFor(GemmOrderDefaults(), "gemm order", profile, desc).config;
  if (mf >= 0) c.mf = mf;
  return c;
}

}  // namespace mpcaffe::libdnn
