// libdnn/conv_families.cc — the convolution's forward families (conv_families.h): their rules of
// application, their choosers and their defaults tables, and the plan a Convolution follows.
#include "libdnn/conv_families.h"

#include "device/settings.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn {

namespace {

// The grid form against the channel-lane quads and the pointwise row form (the measurements
// FirstLayerPointwiseDefaults and DirectShapeDefaults cite).
constexpr const char* kGridFirstLayerEvidence =
    "mpcaffe time --model <net converted to int8> --weights <bench/peers.py's> --iterations 20 "
    "--json --explain --device 1, cec787c's binary and this one alternating, 4 rounds, PoCL, "
    "AVX-512 (AMD EPYC, Zen 4), loaded, 2026-12-04 (docs/BENCHMARKS.md, \"Default "
    "configurations\"), ms per layer, ranges of the rounds, before -> after: conv1 of ResNet-50 "
    "(7x7 s2, tap quads l1 oc4 px4 v16 k4 before) 0.75-0.89 -> "
    "0.64-0.69, GoogLeNet (the same shape) 0.72-0.74 -> 0.61-0.67, AlexNet (11x11 s4, l1 oc3 px4 "
    "v16 k4) 0.57-0.95 -> 0.54-0.76, SqueezeNet 1.1 (3x3 s2, the pointwise row form before) "
    "0.53-0.60 -> 0.41-0.54, MobileNet v1 and v2 (3x3 s2 o32, the row form) level (0.25-0.40 "
    "both; 40-pass medians, 3 rounds: v1 0.24-0.29 -> 0.21-0.23)";
constexpr const char* kGridStrideOneEvidence =
    "mpcaffe time --model <net converted to int8> --weights <bench/peers.py's> --iterations 20 "
    "--json --explain --device 1, cec787c's binary and this one alternating, 4 rounds, PoCL, "
    "AVX-512 (AMD EPYC, Zen 4), loaded, 2026-12-04 (docs/BENCHMARKS.md, \"Default "
    "configurations\"), ms per layer, ranges of the rounds, before -> after: DenseNet-121's 3x3 "
    "layers of 32 outputs (a 64-channel quad tile half empty) "
    "c128 h56 0.93-1.05 -> 0.47-0.50, c128 h28 0.29-0.34 -> 0.20-0.22; ResNet-50 res2 (c64 h56 "
    "o64) 0.48-0.61 -> 0.43-0.46, res3 (c128 h28) 0.40-0.46 -> 0.41-0.44; GoogLeNet conv2 (c64 h56 "
    "o192) 1.20-1.22 -> 1.11-1.17, inception_3a/3b 5x5 (c16/c32 h28) 0.14-0.16 -> 0.11-0.12 and "
    "0.30-0.31 -> 0.25-0.26, 3x3 (c96/c128 h28) level; SqueezeNet 1.1 expand3x3 c16 h56 "
    "0.23-0.27 -> 0.21-0.26, c32 h28 0.18-0.20 -> 0.19-0.23 (the one loss). 14x14 outputs (2 of "
    "16 lanes idle), MPCAFFE_KERNEL_CONFIG='conv:l1 oc1 px32 v8 k4' against the default l1 oc4 "
    "px3 v16 k4, 4 alternating rounds, medians: GoogLeNet 4a-4e's 3x3 0.27-0.41 -> 0.21-0.37, "
    "5x5 0.12-0.17 -> 0.09-0.14, ResNet-50 res4 0.449 -> 0.443, SqueezeNet fire6-9 0.182 / 0.220 "
    "-> 0.171 / 0.225; 7x7 and 8x8 outputs (9 and 8 of 16 idle) 1.1-1.9 x slower: not taken";

bool RowForm(const ConvDesc& d) { return conv_internal::PointwiseRowForm(d); }

bool DepthwiseApplies(const ConvDesc& d, const ConvQuant&, const TargetProfile&) {
  return Convolution::IsDepthwise(d) && GetSettings().conv_depthwise != "0";
}

// fp32 1×1 convolutions (strided ones on their subsampled input), and with the dialect's vectors
// the row form (a first layer) and int8q with an input zero point its pair planes and float sums
// hold exactly. MPCAFFE_CONV_GEMM=1 gives these descriptions to im2col + GEMM. Where byte quad
// products run in a helper, int8q's first layers of 7×7 windows or larger go to the direct
// kernel's byte quads (DirectConvDefaults): 64 byte products per instruction against the row
// form's 16 float multiply-adds pay over many taps; over fewer the row form's whole-vector stores
// and unpacked input cost less than the quads' packing and epilogue (docs/BENCHMARKS.md,
// "Default configurations").
bool PointwiseApplies(const ConvDesc& d, const ConvQuant& q, const TargetProfile& p) {
  return GetSettings().conv_gemm != "1" &&
         Convolution::PointwiseApplies(d, Convolution::DefaultPointwiseTile(d)) &&
         (!RowForm(d) || p.vector_builtins) &&
         (d.type != DataType::kInt8Q || (p.vector_builtins && q.x_zero >= 0 && q.x_zero <= 255)) &&
         !(d.type == DataType::kInt8Q && RowForm(d) && p.byte_quad_products &&
           d.kernel_h * d.kernel_w >= 49);
}

// fp32 and int8q; the GEMM's epilogue adds no residual and takes one weight zero point.
bool GemmApplies(const ConvDesc& d, const ConvQuant& q, const TargetProfile& p) {
  if (!p.conv_gemm) return false;
  if (d.type != DataType::kFloat32 && d.type != DataType::kInt8Q) return false;
  if (d.residual) return false;
  for (int32_t z : q.w_zero)
    if (z != q.w_zero[0]) return false;
  return GetSettings().conv_gemm != "0";
}

bool WinogradFamilyApplies(const ConvDesc& d, const ConvQuant& q, const TargetProfile&) {
  // int8q: input codes minus a zero point within [0, 255] stay within ±255 (V's 16-bit bound).
  return WinogradApplies(d) &&
         (d.type != DataType::kInt8Q || (q.x_zero >= 0 && q.x_zero <= 255));
}

bool DirectApplies(const ConvDesc&, const ConvQuant&, const TargetProfile&) { return true; }

ConvFamilyChoice ChooseDepthwise(const Device& device, const ConvDesc& d) {
  ConvFamilyChoice c;
  if (DepthwiseOff()) {
    c.off = true;
    c.source = ConfigSource::kOverride;
    return c;
  }
  const Chosen<int> rows = ChooseDepthwiseRows(device, d);
  c.rows = rows.config;
  c.source = rows.source;
  return c;
}

/// The choice of a family whose chooser gives a configuration or nothing (off), the
/// configuration kept in `field`.
template <typename Config>
ConvFamilyChoice ChoiceOf(const Chosen<std::optional<Config>>& chosen,
                          Config ConvFamilyChoice::*field) {
  ConvFamilyChoice c;
  c.source = chosen.source;
  c.off = !chosen.config;
  if (chosen.config) c.*field = *chosen.config;
  return c;
}

ConvFamilyChoice ChoosePointwiseTile(const Device& device, const ConvDesc& d) {
  const Chosen<PointwiseChoice> tile = ChoosePointwise(device, d);
  ConvFamilyChoice c = ChoiceOf(tile, &ConvFamilyChoice::tile);
  if (!c.off && tile.source == ConfigSource::kDefault && Convolution::IsStridedPointwise(d))
    c.off = !DefaultRowFor(StridedPointwiseDefaults(), "conv_pw",
                           TargetProfile::Of(device.info()), d)
                 .config;
  if (!c.off && tile.source == ConfigSource::kDefault && d.type == DataType::kInt8Q && RowForm(d))
    c.off = !DefaultRowFor(FirstLayerPointwiseDefaults(), "conv_pw",
                           TargetProfile::Of(device.info()), d)
                 .config;
  return c;
}

ConvFamilyChoice ChooseGemm(const Device& device, const ConvDesc& d) {
  ConvFamilyChoice c;
  if (GetSettings().conv_gemm == "1") {
    c.source = ConfigSource::kOverride;
    return c;
  }
  c.off =
      !DefaultRowFor(ConvGemmDefaults(), "conv_gemm", TargetProfile::Of(device.info()), d).config;
  return c;
}

ConvFamilyChoice ChooseWinogradConfig(const Device& device, const ConvDesc& d) {
  return ChoiceOf(ChooseWinograd(device, d), &ConvFamilyChoice::wino);
}

ConvFamilyChoice ChooseDirect(const Device& device, const ConvDesc& d) {
  const Chosen<ConvConfig> config = ChooseConvConfig(device, d);
  ConvFamilyChoice c;
  c.direct = config.config;
  c.source = config.source;
  return c;
}

}  // namespace

const DefaultsTable<ConvConfig, DataType>& DirectConvDefaults() {
  // OpenCL CPU runtimes take register tiles of wide vectors in one-work-item groups; int16q's
  // split pairs keep two int32 sums per accumulator, so its smaller tile does not spill. A
  // native dot product (kp = 4) is not the CPU default: on Intel's runtime its dot_4x8packed_*
  // calls stay scalar (see DefaultGemmConfig). Where per-lane loads are expensive (llvmpipe),
  // one work-item per group makes each vector load one address for all lanes. Elsewhere scalar
  // lanes in larger work-groups, four channels per step where a 4-way dot product is native.
  static const DefaultsTable<ConvConfig, DataType> table = {
      {"OpenCL CPU runtime, int16q",
       [](const TargetProfile& p, const DataType& t) {
         return p.cpu_vectors && t == DataType::kInt16Q;
       },
       {1, 2, 2, 8},
       "ConvBench (tests/libdnn/conv_test.cc) at batch 1 and 16, four interleaved runs, PoCL, "
       "2026-11-23: 15-25% ahead of l1 oc4 px3 v8 (spilled); 4 x 2 and 6 x 2 level"},
      {"OpenCL CPU runtime, int8q, byte quad products in a helper",
       [](const TargetProfile& p, const DataType& t) {
         return p.cpu_vectors && p.byte_quad_products && t == DataType::kInt8Q;
       },
       {1, 4, 3, 16, 4},
       "mpcaffe time --model <ResNet-50 converted to int8> --synthetic --iterations 10 --json, "
       "PoCL, AVX-512, 3 alternating rounds against the pair tile l1 oc4 px3 v8, loaded, "
       "2026-11-29 (docs/BENCHMARKS.md, \"Default configurations\"): the 3x3 layers' sum "
       "42.9 -> 12.5 ms, the 1x1 stride-2 layers' 15.5 -> 6.1; oc2 px6, oc4 px4, oc2 px4 and "
       "oc3 px4 within the noise of oc4 px3"},
      {"OpenCL CPU runtime with 16 vector registers (AVX2), int8q in 16-bit pairs",
       [](const TargetProfile& p, const DataType& t) {
         return p.cpu_vectors && p.half_register_tiles && t == DataType::kInt8Q;
       },
       {1, 4, 2, 8},
       "mpcaffe time --model <net converted to int8> --weights <bench/peers.py's> --iterations "
       "20 --json --explain, the direct kernel's layers summed, MPCAFFE_KERNEL_CONFIG='conv:l1 "
       "oc4 px2 v8' against l1 oc4 px3 v8, 3 alternating rounds, AVX2 caps, AMD EPYC, "
       "2026-12-04: GoogLeNet 2.26 -> 2.07 ms (Intel's runtime) and 2.87 -> 2.27 (PoCL), "
       "ResNet-50 3.72 -> 3.41 and 3.64 -> 3.14, AlexNet 3.97 -> 3.76 and 3.81 -> 3.74; 4 x 3's "
       "12 accumulators, 3 broadcasts and a weight vector spill an accumulator at 16 registers "
       "(PoCL's assembly); fp32 keeps 4 x 3 (4 x 2 lost 4-6% on AlexNet's whole pass)"},
      {"OpenCL CPU runtime, fp32, vectors of 16 floats in one register (PoCL at AVX-512)",
       [](const TargetProfile& p, const DataType& t) {
         return p.sixteen_lane_registers && t == DataType::kFloat32;
       },
       {1, 4, 4, 16},
       "ConvBench.DISABLED_ResNet3x3 (tests/libdnn/conv_tuner_test.cc), ResNet-50's four 3x3 "
       "layers at batch 1, minimum of 5 per candidate, PoCL, AVX-512, loaded, 2026-11-30: best "
       "on 3 of 4, 1.1-1.7 x l1 oc4 px3 v8; in the whole pass (docs/BENCHMARKS.md, \"Default "
       "configurations\") the 3x3 layers' time over the 1x1 layers' 0.97 -> 0.84; Intel's runtime "
       "(AVX-512 and AVX2) lost with it in the whole pass, PoCL at AVX2 level with l1 oc4 px3 v8"},
      {"OpenCL CPU runtime",
       [](const TargetProfile& p, const DataType&) { return p.cpu_vectors; },
       {1, 4, 3, 8},
       "ConvBench on AlexNet's convolutions, PoCL, 2026-11-22: at or near the top of the "
       "candidates; int8 on Intel's runtime (ConvBench.DISABLED_AlexNetBatch1, best of 6, "
       "2026-11-24): geometric mean 28.3 GFLOP/s against 5.2-5.5 for the kp = 4 tiles"},
      {"per-lane loads expensive (llvmpipe), fp32 / fp16 / int8q",
       [](const TargetProfile& p, const DataType& t) {
         return p.lane_loads_expensive && t != DataType::kInt16Q;
       },
       {1, 2, 6, 8},
       "mpcaffe tune --model <AlexNet's convolutions> --device 2 --max 0 [--dtypes int8], "
       "rusticl, 2026-11-29 (docs/BENCHMARKS.md, \"Default configurations\")"},
      {"native 4-way dot product, int8q",
       [](const TargetProfile& p, const DataType& t) {
         return p.dot_product && t == DataType::kInt8Q;
       },
       {32, 2, 4, 1, 4},
       "not measured (no GPU on the build machine); the tuner times kp = 1 beside it"},
      {"every other device",
       [](const TargetProfile&, const DataType&) { return true; },
       {32, 2, 4, 1},
       "not measured on a GPU (none on the build machine); the tuner's candidates cover it"},
  };
  return table;
}

int DepthwiseRowRange::RowsFor(const ConvDesc& d) const {
  // A divisor of the output height leaves no half-empty last block (MobileNet's 112, 56, 28, 14
  // and 7 rows all divide by 7).
  const int oh = d.out_h();
  for (int r = most; r >= least; --r)
    if (oh % r == 0) return r;
  return oh < 8 ? oh : 8;
}

std::string DepthwiseRowRange::ToString() const {
  return "rows: a divisor of the output height in [" + std::to_string(least) + ", " +
         std::to_string(most) + "], else 8";
}

const DefaultsTable<DepthwiseRowRange, ConvDesc>& DepthwiseRowDefaults() {
  // Taller blocks reuse each loaded input row for more output rows (stride 1 most of all) until
  // the accumulators and the block's rows no longer stay in registers and cache; at 112 rows a
  // work-item's block of 14 left too few work-items per core.
  // Where per-lane loads are expensive (llvmpipe) each accumulator of a work-item's vectors is a
  // register of the lanes, and creating a kernel of tall blocks of 16-lane vectors takes its
  // compiler minutes: short blocks there.
  static const DefaultsTable<DepthwiseRowRange, ConvDesc> table = {
      {"per-lane loads expensive (llvmpipe)",
       [](const TargetProfile& p, const ConvDesc&) { return p.lane_loads_expensive; },
       {2, 4},
       "mpcaffe time --model mobilenet_v1_deploy.prototxt --device 2 --synthetic --iterations 3, "
       "rusticl, MPCAFFE_KERNEL_CONFIG=conv_dw:rows<N> against the default, empty caches, AVX-512, "
       "loaded, 2026-11-30: first pass 211 s (rows 8 and 14) -> 44 s (4) / 27 s (2); forward "
       "1.28-1.48 s -> 0.68 s (4) / 0.92-1.05 s (2); this row's 2-4 rows: 30 s, 0.46 s"},
      {"stride-1 outputs of at most 56 rows",
       [](const TargetProfile&, const ConvDesc& d) { return d.stride_h == 1 && d.out_h() <= 56; },
       {4, 14},
       "ConvBench.DISABLED_MobileNetDepthwiseRows (tests/libdnn/conv_tuner_test.cc), MobileNet "
       "v1's depthwise layers at batch 1, both CPU runtimes, two runs each, 2026-11-24: 14-row "
       "blocks 1.0-2.0 x faster than 7 at 56, 28 and 14 rows"},
      {"every other description", [](const TargetProfile&, const ConvDesc&) { return true; },
       {4, 8},
       "as the row above, 2026-11-24: 14-row blocks 2-12 x slower at 112 rows; stride 2 had 7 or 8 "
       "rows within the noise of the best"},
  };
  return table;
}

const DefaultsTable<bool, ConvDesc>& DepthwiseQuadDefaults() {
  // Byte quads multiply a 3×3 window row for 16 outputs in one instruction from one row load and
  // a byte shuffle, where the float form converts three loads per input row and multiplies nine
  // times per output row; the form exists only where the quads are the VNNI instruction. Its
  // vectors are 16 columns: on output rows where more than a fifth of them would be empty (7
  // columns: 9 of 16) the 8-column float and pair forms do less work per output.
  static const DefaultsTable<bool, ConvDesc> table = {
      {"byte quad products in a helper (PoCL, AVX-512 VNNI), outputs at most a fifth of whose "
       "16-column vectors are empty",
       [](const TargetProfile& p, const ConvDesc& d) {
         const int ow = d.out_w(), empty = (ow + 15) / 16 * 16 - ow;
         return p.byte_quad_products && 4 * empty <= ow;
       },
       true,
       "ConvDepthwiseBench.DISABLED_MobileNetDepthwiseLayers (tests/libdnn/conv_depthwise_test.cc), "
       "MobileNet v1 and v2's int8 depthwise layers at batch 1, the byte-quad and the float / pair "
       "form alternating, medians of 15 batches of 20, PoCL, AVX-512, loaded, 2026-11-30 "
       "(docs/BENCHMARKS.md, \"Default configurations\"): 1.06-1.72 x on 14 to 112 output "
       "columns (c32 h112 stride 1: 0.77 x in that run, 1.10 x in 3 runs of it alone)"},
      {"byte quad products in a helper, narrower outputs: the float and pair forms",
       [](const TargetProfile& p, const ConvDesc&) { return p.byte_quad_products; }, false,
       "as the row above: the byte-quad form 0.68-0.72 x on 7 output columns"},
      {"every other device: the float and pair forms",
       [](const TargetProfile&, const ConvDesc&) { return true; }, false,
       "not measured: the byte-quad form needs the VNNI instruction in a helper"},
  };
  return table;
}

const DefaultsTable<std::optional<ConvConfig>, ConvDesc>& DirectShapeDefaults() {
  // The grid form (vectors of 16 pixels of one channel) requantizes and stores whole vectors
  // where the channel-lane quads take each output byte alone: it pays where the window loop is
  // short against the epilogue (first layers, few input channels) and the output rows fill its
  // vectors (at 14 columns 2 of 16 lanes are computed for nothing, at 7 columns 9).
  // Tap quads (first layers) run few steps per output, so the epilogue and the channels a
  // tile pads count: 48-channel blocks where 64-channel ones would pad a quarter or more, and 4
  // pixels per work-item, whose output bytes leave as one word per channel.
  static const DefaultsTable<std::optional<ConvConfig>, ConvDesc> table = {
      {"OpenCL CPU runtime, byte quad products in a helper, int8q first layers (fewer than 4 "
       "input channels per group under a window wider than one column, any stride), output "
       "rows of at least 32 columns: the grid form, 8 channels x two vectors of 16 pixels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && p.byte_quad_products && d.type == DataType::kInt8Q &&
                conv_internal::GridTapQuads(d) && d.out_w() >= 32;
       },
       ConvConfig{1, 1, 32, 8, 4}, kGridFirstLayerEvidence},
      {"OpenCL CPU runtime, byte quad products in a helper, int8q in tap quads (fewer than 4 "
       "input channels per group under a window), output channels per group a multiple of 48 "
       "and not of 64",
       [](const TargetProfile& p, const ConvDesc& d) {
         const int ocg = d.out_channels / d.groups;
         return p.cpu_vectors && p.byte_quad_products && d.type == DataType::kInt8Q &&
                conv_internal::QuadLayoutOf(d).taps && ocg % 48 == 0 && ocg % 64 != 0;
       },
       ConvConfig{1, 3, 4, 16, 4},
       "AlexNet's int8 conv1 alone (n1 c3 h227 o96 k11x11 s4), mpcaffe time --synthetic "
       "--iterations 40, PoCL, AVX-512, 4 alternating rounds, loaded, 2026-11-30 "
       "(docs/BENCHMARKS.md, \"Default configurations\"): l1 oc3 px4 v16 k4 0.89-0.93 ms, "
       "oc4 px3 1.10-1.12 (and one 0.79), oc6 px2 0.95-1.05, oc2 px6 0.98-1.03"},
      {"OpenCL CPU runtime, byte quad products in a helper, int8q in tap quads: 4 pixels (a word "
       "of output bytes per channel in the vector epilogue)",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && p.byte_quad_products && d.type == DataType::kInt8Q &&
                conv_internal::QuadLayoutOf(d).taps;
       },
       ConvConfig{1, 4, 4, 16, 4},
       "ResNet-50's int8 conv1 forward kernel (c3 h224 o64 k7x7 s2) in a pyopencl harness on the "
       "dumped texts, 60 interleaved launches, PoCL, AVX-512, 2026-11-30 (docs/BENCHMARKS.md, "
       "\"Default configurations\"): 10th percentile 0.62 ms against 0.69 for l1 oc4 px3 v16 k4; "
       "mpcaffe time on the layer alone within the noise (two sets of 5 rounds, one each way)"},
      {"OpenCL CPU runtime, byte tile products in a helper (PoCL, AMX), int8q, a window larger "
       "than 1x1 at stride 1, at least 32 input channels per group, a grid of at most 100 "
       "positions (7x7 outputs): tiles of 16 channels by 32 pixels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && p.byte_tile_products && d.type == DataType::kInt8Q &&
                conv_internal::TilesApply(d) && d.channels / d.groups >= 32 &&
                d.kernel_h * d.kernel_w > 1 &&
                conv_internal::TileLayoutOf(d).grid <= 100;
       },
       ConvConfig{1, 1, 32, 16, 64},
       "ConvBench.DISABLED_ResNet3x3 with PW_BENCH_TYPE=int8 (tests/libdnn/conv_tuner_test.cc), "
       "ResNet-50's 3x3 layers at batch 1, minimum of 5 per candidate, PoCL, AVX-512 + AMX, "
       "2026-12-01: c512 h7 l1 oc1 px32 v16 k64 0.275 ms, oc2 px32 0.42, oc2 px16 0.30, byte "
       "quads l1 oc4 px4 v16 k4 0.54"},
      {"OpenCL CPU runtime, byte tile products in a helper (PoCL, AMX), int8q, a window larger "
       "than 1x1 at stride 1, at least 32 input channels per group (a 64-channel block at least "
       "half full): tiles of 32 channels by 32 pixels (1x1 windows: the pointwise kernel, "
       "ConvBench.DISABLED_ZooPointwiseInt8)",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && p.byte_tile_products && d.type == DataType::kInt8Q &&
                conv_internal::TilesApply(d) && d.channels / d.groups >= 32 &&
                d.kernel_h * d.kernel_w > 1;
       },
       ConvConfig{1, 2, 32, 16, 64},
       "as the row above: ms l1 oc2 px32 v16 k64 / byte quads l1 oc4 px4 v16 k4, c64 h56 0.66 / "
       "0.82, c128 h28 0.22 / 0.54, c256 h14 0.23 / 0.42. GoogLeNet's and SqueezeNet 1.1's "
       "int8 5x5 and 3x3 layers in the nets (mpcaffe time --explain, against "
       "MPCAFFE_KERNEL_CONFIG='conv:l1 oc4 px3 v16 k4', 3 alternating rounds): 16-24 channels "
       "mixed (0.197 / 0.156 ms on 14x14, 0.908 / 1.052 on 55x55), 32-64 ahead or level"},
      {"OpenCL CPU runtime, byte quad products in a helper, int8q, a window wider than 1x1 at "
       "stride 1, output rows of at least 14 columns: the grid form, 8 channels x two vectors "
       "of 16 pixels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && p.byte_quad_products && d.type == DataType::kInt8Q &&
                d.stride_h == 1 && d.stride_w == 1 && d.kernel_h * d.kernel_w > 1 &&
                d.out_w() >= 14;
       },
       ConvConfig{1, 1, 32, 8, 4}, kGridStrideOneEvidence},
      {"everything else: the data type's row (DirectConvDefaults)",
       [](const TargetProfile&, const ConvDesc&) { return true; }, std::nullopt,
       "the data type's row's measurement"},
  };
  return table;
}

const DefaultsTable<bool, ConvDesc>& ConvGemmDefaults() {
  // Never a default: the columns cost about what the GEMM saves. Even int8 first layers of 3
  // channels, whose channel pairs are half empty one step in two, run faster or level in the
  // direct kernel on both CPU runtimes at both levels (the evidence below; one 7x7 stride-4
  // shape on PoCL at AVX2 excepted). Groups with 4-bit weights: the columns, the GEMM's
  // activation packing and weight expansion cost more than its byte-pair products save.
  // MPCAFFE_CONV_GEMM=1 still forces it.
  static const DefaultsTable<bool, ConvDesc> table = {
      {"every device: the direct kernel (byte quads, tap quads or channel pairs) or the row form",
       [](const TargetProfile&, const ConvDesc&) { return true; }, false,
       "ResNet-50's int8 conv1 alone (n1 c3 h224 o64 k7x7 s2), mpcaffe time --synthetic "
       "--iterations 20, PoCL, AVX-512, 3 alternating rounds, loaded, 2026-11-29: the direct "
       "kernel's byte quads 2.45-2.52 ms, the row form 4.3-8.4, im2col + GEMM 4.1-10.5. "
       "int8 first layers at batch 1 (3-4 channels, strides 3-4, where the row form does not "
       "apply), mpcaffe time --synthetic --iterations 20-40, MPCAFFE_CONV_GEMM=0 against "
       "im2col + GEMM, 2-4 alternating rounds, 2026-12-01, ms direct / GEMM: AlexNet conv1 "
       "Intel's runtime AVX2 1.86 / 2.26, AVX-512 1.57-1.61 / 1.63, PoCL AVX2 1.74-2.23 / "
       "1.77-3.44 (batch 16: Intel's AVX2 31.0-32.5 / 37.4-38.8, PoCL 27.7-28.3 / 28.0-30.7); "
       "3x3 stride 3 of 4 channels Intel's AVX2 0.21-0.39 / 0.38, PoCL AVX2 0.22-0.27 / "
       "0.32-0.48; 7x7 stride 4 Intel's AVX2 0.73-0.75 / 0.82-0.89, PoCL AVX2 0.70-0.85 / "
       "0.62-0.66 (the GEMM's one win). Grouped 4-bit weights: "
       "ConvInt4Bench.DISABLED_AlexNetGroupedConvs, medians of 5-7 alternating rounds, "
       "2026-11-24: grouped 4-bit GEMM path 0.33-0.95 x the direct kernel's speed"},
  };
  return table;
}

const DefaultsTable<WinogradChoice, ConvDesc>& WinogradDefaults() {
  // F(2×2) only (F(4×4)'s rounding: conv_winograd.h). 8 output channels × one vector of 16
  // tiles, the pointwise kernel's tile: the element-wise products are the same GEMM shape.
  static const DefaultsTable<WinogradChoice, ConvDesc> table = {
      // At AVX2 a 7×7 output (one 16-tile block of 2×2 tiles per plane, a quarter of it past the
      // output) leaves the transforms and the 16/9 larger transformed weights unpaid for.
      {"int8q on CPU runtimes without byte quads at AVX2 (half-register tiles), output planes "
       "of at most 64 pixels (ResNet-50's res5, GoogLeNet's 7x7 inceptions): off, the direct "
       "kernel's pairs",
       [](const TargetProfile& p, const ConvDesc& d) {
         return d.type == DataType::kInt8Q && p.winograd_launches && !p.byte_quad_products &&
                p.vector_builtins && p.half_register_tiles && d.out_h() * d.out_w() <= 64;
       },
       std::nullopt,
       "mpcaffe time --model <ResNet-50 converted to int8> --weights <bench/peers.py's> "
       "--iterations 10 --device 0|1 at the AVX2 caps, MPCAFFE_KERNEL_CONFIG=conv_wino:off "
       "against the default, 2 alternating rounds, quiet, 2026-12-02 (docs/BENCHMARKS.md, "
       "\"Default configurations\"): res5's three 3x3 layers, ms each, Intel's runtime "
       "1.88-2.02 -> 1.58-1.66, PoCL 2.12-2.19 -> 1.44-1.48; res4's 14x14 stay in the transformed "
       "tiles (Intel's runtime 0.89 against 1.24); at AVX-512 Intel's runtime keeps them at 7x7 "
       "too (0.92-1.05 against 1.21-1.31)"},
      // Without byte quads (Intel's CPU runtime at either level, PoCL below VNNI) the direct
      // kernel multiplies 16-bit pairs; the transformed tiles' products need 2.25 times fewer
      // of them, in vectors of 8 tiles at both levels (16-tile vectors lost at AVX-512 too).
      {"int8q on CPU runtimes without byte quads: 16-bit pair products of the transformed "
       "tiles, 6 output channels x two vectors of 8 tiles",
       [](const TargetProfile& p, const ConvDesc& d) {
         return d.type == DataType::kInt8Q && p.winograd_launches && !p.byte_quad_products &&
                p.vector_builtins;
       },
       WinogradConfig{2, 6, 2, 8},
       "mpcaffe time --model <ResNet-50 converted to int8> --synthetic --iterations 10 "
       "--explain --json --device 1 with MPCAFFE_ISA=avx2 (PoCL compiling for haswell), quiet, "
       "2026-11-30 (docs/BENCHMARKS.md, \"Default configurations\"); Intel's runtime at AVX2 "
       "(--device 0, forced, 3 alternating rounds): the 3x3 layers 18.4-19.8 -> 14.3-15.3 ms, "
       "the whole pass 48.5-50.5 -> 44.5-46.3; Intel's runtime at AVX-512 (the direct kernel in "
       "512-bit pairs before), forced, 3 alternating rounds, loaded host, 2026-12-02: ResNet-50's "
       "3x3 layers 32.1-32.6 -> 16.1-18.0 ms, the whole pass 68.3-70.4 -> 48.0-54.3 (oc8 px2 v8, "
       "oc4 px4 v8, oc12 px1 v8 within the noise of it; oc4 px2 v16 and oc6 px1 v16 29-32 ms); "
       "GoogLeNet 26.5-32.3 -> 23.9-26.5, SqueezeNet 1.1 9.9-10.6 -> 9.2-10.2, BVLC AlexNet (batch "
       "10) 128-160 -> 113-140"},
      {"int8q elsewhere: off (the direct kernel's byte quads or AMX tiles where VNNI runs)",
       [](const TargetProfile&, const ConvDesc& d) { return d.type == DataType::kInt8Q; },
       std::nullopt,
       "at AVX-512 VNNI the direct kernel's byte quads take 64 products per instruction against "
       "the pairs' 32, and its AMX tiles more (not measured against the transformed tiles)"},
      {"CPU runtimes, half-register tiles (AVX2): 6 output channels x one vector of 16 tiles (12 "
       "of the 16 registers)",
       [](const TargetProfile& p, const ConvDesc&) {
         return p.winograd_launches && p.half_register_tiles;
       },
       WinogradConfig{2, 6, 1, 16},
       "mpcaffe time --model resnet50_deploy.prototxt --synthetic --iterations 10 --explain "
       "--json --device 1 with MPCAFFE_ISA=avx2 (PoCL compiling for haswell), 2 alternating "
       "rounds per tile, quiet, 2026-11-30 (docs/BENCHMARKS.md, \"Default configurations\"): "
       "the 3x3 layers' sum 32.5 ms with oc8 px1 v16 (16 two-register accumulators spill), "
       "17.0-17.2 with oc6 px1 v16, 16.9-17.3 oc6 px2 v8, 17.4-25.0 oc4 px1 v16, 26.4 the direct "
       "kernel; Intel's runtime (--device 0, forced, 3 alternating rounds): 22.3-25.1 -> "
       "16.6-17.6 ms, whole pass 53.6-57.1 -> 46.5-49.8"},
      {"CPU runtimes, AVX-512",
       [](const TargetProfile& p, const ConvDesc&) { return p.winograd_launches; },
       WinogradConfig{2, 8, 1, 16},
       "mpcaffe time --model resnet50_deploy.prototxt --synthetic --iterations 20 --explain "
       "--json --device 1, main's binary and this one alternating, AVX-512, loaded, 2026-11-30 "
       "(docs/BENCHMARKS.md, \"Default configurations\"); Intel's runtime (--device 0, forced, "
       "3 alternating rounds, quiet, 2026-11-30): the 3x3 layers 23.7-27.7 -> 17.8-18.4 ms, the "
       "whole pass 47.3-52.9 -> 41.5-44.2 (an earlier measurement under load 6-7 had it slower)"},
      {"every other device (devices of lanes: GPUs, llvmpipe): off (the direct kernel)",
       [](const TargetProfile&, const ConvDesc&) { return true; }, std::nullopt,
       "not measured (no GPU on the build machine; llvmpipe runs every kernel far slower than "
       "the CPU runtimes)"},
  };
  return table;
}

const std::vector<ConvForwardFamily>& ConvForwardFamilies() {
  static const std::vector<ConvForwardFamily> families = {
      {ConvFamily::kDepthwise, "conv_dw", DepthwiseApplies, ChooseDepthwise},
      {ConvFamily::kPointwise, "conv_pw", PointwiseApplies, ChoosePointwiseTile},
      {ConvFamily::kGemm, "conv_gemm", GemmApplies, ChooseGemm},
      {ConvFamily::kWinograd, "conv_wino", WinogradFamilyApplies, ChooseWinogradConfig},
      {ConvFamily::kDirect, "conv", DirectApplies, ChooseDirect},
  };
  return families;
}

const ConvForwardFamily& ConvForwardFamilyOf(ConvFamily family) {
  for (const ConvForwardFamily& f : ConvForwardFamilies())
    if (f.family == family) return f;
  throw Error("convolution: no forward family " + std::to_string(int(family)));
}

ConvPlan PlanConvolution(const Device& device, const ConvDesc& d, const ConvQuant& q,
                         std::optional<ConvFamily> skip) {
  ConvPlan plan;
  const ConvFamilyChoice direct = ChooseDirect(device, d);
  plan.direct = {direct.direct, direct.source};
  const TargetProfile profile = TargetProfile::Of(device.info());
  for (const ConvForwardFamily& f : ConvForwardFamilies()) {
    if ((skip && f.family == *skip) || !f.applies(d, q, profile)) continue;
    const ConvFamilyChoice c = f.family == ConvFamily::kDirect ? direct : f.choose(device, d);
    if (c.off) continue;
    plan.family = &f;
    plan.choice = c;
    return plan;
  }
  throw Error("convolution " + d.ToString() + ": no forward family applies");
}

}  // namespace mpcaffe::libdnn
