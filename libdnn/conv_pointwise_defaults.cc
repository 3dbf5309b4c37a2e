// libdnn/conv_pointwise_defaults.cc — the pointwise family's defaults tables (conv_families.h):
// its tile per device class and shape, whether a strided 1×1 layer takes it, and how far its CPU
// launches spread. The rules of application and the choosers are in conv_families.cc.
#include "libdnn/conv_families.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn {

namespace {

using Tile = Convolution::PointwiseTile;

bool RowForm(const ConvDesc& d) { return conv_internal::PointwiseRowForm(d); }
// An int8q first layer whose output rows take the pairs of window columns' 8 lanes (kx2).
bool RowPairsFit(const ConvDesc& d) {
  return d.type == DataType::kInt8Q && RowForm(d) && d.out_w() >= 8;
}
long Pixels(const ConvDesc& d) { return long(d.out_h()) * d.out_w(); }
// int8q's plane form over planes of at least 16 pixels (a vector of 16 fills).
bool Int8Plane(const ConvDesc& d) {
  return d.type == DataType::kInt8Q && !RowForm(d) && Pixels(d) >= 16;
}
// A plane of 16 to 63 pixels (7×7) at stride 1, where blocks of 16 pixels leave lanes idle.
bool SmallPlane(const ConvDesc& d) {
  return Pixels(d) >= 16 && Pixels(d) < 64 && !Convolution::IsStridedPointwise(d);
}

// int8q's plane form over planes of at least 16 pixels whose 16-pixel columns of k-channel
// words fit in private memory (Convolution::PointwiseTile::ob).
bool Int8ColumnZips(const ConvDesc& d, int k) {
  return Int8Plane(d) && long(d.channels + k - 1) / k * 64 <= Convolution::kMaxZippedColumnBytes;
}

// Blocks of `oc` output channels pad the last block with zero weights: at most 1/32 of the
// channels computed are padding (64 channels in blocks of 12 compute 72).
bool BlocksFillChannels(const ConvDesc& d, int oc) {
  const long O = d.out_channels, padded = (O + oc - 1) / oc * oc;
  return (padded - O) * 32 <= O;
}

}  // namespace

const DefaultsTable<Tile, ConvDesc>& PointwiseDefaults() {
  // 8 channels × one vector of 16 pixels: 8 registers of accumulators at AVX-512 (of its 32),
  // 16 at AVX2 (all of its 16: 4 channels × 2 vectors of 8 where the compiler then slows).
  // At the AVX-512 level (PoCL and Intel's runtime alike) fp32 takes two vectors of 16 pixels
  // (16 accumulators): two 512-bit FMA pipes of latency 4 keep 8 multiply-adds in flight,
  // which one vector's 8 chains leave no slack for, and each step loads 2 vectors and 8
  // weights for 16 FMAs instead of 1 and 8 for 8; on a core of one 512-bit pipe (two 256-bit
  // halves) the same 19 registers fit and the loads per FMA fall as well.
  // The row form (a first layer) takes vectors along an output row: 16 at stride 1 where the row
  // has them, and int8q's 16 at stride 2 (the even bytes of 32 in one move, converted in one
  // step: 8 lanes left half of each float multiply-add unused), else 8. fp32 at stride 2 takes
  // the even lanes of 32 floats for 16 output channels where 16 floats are a register: each
  // window column's two loads and shuffle serve 16 multiply-adds of 16 lanes instead of 8 of 8.
  // At AVX2 16 lanes are two registers and every row form keeps 8 (two-register accumulators
  // of 8 channels fill the 16 registers). Planes of fewer than 16 pixels take one vector of 8
  // or 4 (under 4 pixels, int8q under 8, the pointwise kernel does not apply).
  // Where byte quad products run in a helper (PoCL, AVX-512 VNNI), int8q's plane form steps
  // 4 input channels per vpdpbusd (64 products) instead of 2 per vpmaddwd (32) and its add.
  // Each step zips 4 planes' 16 pixels into quads (4 widening loads, 3 shifts, an or) for the
  // tile's oc products, whose weight broadcasts fold into the vpdpbusd: 16 output channels
  // (16 of the 32 registers) spend half the zips per product that 8 do. An output channel count
  // that 16 does not divide keeps 8, not a block of unused channels. Where the work-item's
  // pixels' input channels fit in private memory as quads (kMaxZippedColumnBytes), it zips
  // them once and takes every block of 16 output channels in turn (up to 64 blocks): the zip's
  // loads and shifts compete with the vpdpbusd for the vector ports once per 16 products
  // otherwise, and the column and the blocks' weights stay in the L1 and L2 caches. The pair
  // products' zip (16-bit pairs of 8 pixels) likewise, where a CPU runtime keeps whole vector
  // registers; Intel's runtime at AVX2 (half-register tiles) measured no gain.
  // On planes of 56×56 pixels and more, two vectors of 16 pixels × 8 output channels (the same
  // 16 accumulators): each channel's requantization constants, bias and zero-point terms serve
  // two vectors, and a step loads 2 zipped vectors and 8 weights for 16 products instead of 1
  // and 16; such planes have work-items to spare for the two cores at 32 pixels each, where at
  // 28×28 and below fewer, wider work-items and a wider shifted last block cost what it saves.
  // Where byte tile products run in a helper (PoCL, AMX), layers of 256 input channels and more
  // multiply a 16-channel tile of weights by the zip's tiles of 16 pixels (16 × 16 × 64
  // products per tdpbsud); over fewer channels the K loop is too short for the tiles to pay
  // their loads, stores and setup, and the byte quads stay.
  static const DefaultsTable<Tile, ConvDesc> table = {
      {"int8q plane form, byte tile products in a helper (PoCL, AMX), at least 256 input "
       "channels, output channels a multiple of 16, two vectors of 16 pixels' input channels "
       "zipped in private memory (at most 1024 channels): tiles of 16 channels by 32 pixels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.byte_tile_products && Int8ColumnZips(d, 4) && d.channels >= 256 &&
                d.out_channels % 16 == 0 && Pixels(d) >= 32 &&
                long(conv_internal::PointwiseTileQuads(d.channels)) * 128 <=
                    Convolution::kMaxZippedColumnBytes;
       },
       {16, 2, 16, 64, 64},
       "ConvBench.DISABLED_PointwiseInt8Tiles (tests/libdnn/conv_tuner_test.cc), PW_BENCH_TILES="
       "'oc16 px1 v16 k4 ob64;oc16 px1 v16 k64 ob64;oc16 px2 v16 k64 ob64;oc8 px2 v16 k4 ob64', "
       "the zoo's 1x1 layers at batch 1, minimum of 5 rounds, PoCL, AVX-512 + AMX, 2026-12-01 "
       "(docs/BENCHMARKS.md, \"Default configurations\"): on the 18 layers of 256 input "
       "channels and more 0.44-0.98 x the byte quads' best (c1024 h14 o256 0.083 against 0.159 "
       "ms, c256 h56 o64 0.129 against 0.158); on 128-192 channels level, on 16-96 1.1-2.2 x"},
      {"int8q plane form, byte tile products in a helper (PoCL, AMX), at least 256 input "
       "channels, output channels a multiple of 16, one vector's input channels zipped in "
       "private memory (at most 2048 channels): tiles of 16 channels by 16 pixels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.byte_tile_products && Int8ColumnZips(d, 4) && d.channels >= 256 &&
                d.out_channels % 16 == 0 &&
                long(conv_internal::PointwiseTileQuads(d.channels)) * 64 <=
                    Convolution::kMaxZippedColumnBytes;
       },
       {16, 1, 16, 64, 64},
       "as the row above: c2048 h7 o512 0.137 ms against 0.289 for oc16 px1 v16 k4 ob64"},
      {"int8q plane form, planes of at least 56x56 pixels, byte quad products in a helper, "
       "output channels a multiple of 8, two vectors of input channels zipped in private memory",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.byte_quad_products && Int8ColumnZips(d, 4) && Pixels(d) >= 56 * 56 &&
                d.out_channels % 8 == 0 &&
                long(d.channels + 3) / 4 * 128 <= Convolution::kMaxZippedColumnBytes;
       },
       {8, 2, 16, 4, 64},
       "ConvBench.DISABLED_PointwiseInt8Tiles (tests/libdnn/conv_tuner_test.cc), PW_BENCH_TILES="
       "'oc16 px1 v16 k4 ob64;oc8 px2 v16 k4 ob64', the zoo's 1x1 layers at batch 1, PoCL, "
       "AVX-512, 3 runs, loaded, 2026-11-30 (docs/BENCHMARKS.md, \"Default configurations\"): on "
       "the 13 layers of 56x56 and 112x112 planes 0.62-1.00 x in 37 of 39 layer runs (c64 "
       "h56 o256 1.31, 1.13, 0.79); on "
       "28x28 and smaller planes 0.77-1.46 x, no gain"},
      {"int8q plane form, planes of at least 16 pixels, byte quad products in a helper, output "
       "channels a multiple of 16, input channels zipped in private memory",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.byte_quad_products && Int8ColumnZips(d, 4) && d.out_channels % 16 == 0;
       },
       {16, 1, 16, 4, 64},
       "mpcaffe time --synthetic --explain on ResNet-50, MobileNet v1 and v2 int8, PoCL, "
       "AVX-512, 3-4 alternating rounds against main's oc16 px1 v16 k4, loaded, 2026-11-30 "
       "(docs/BENCHMARKS.md, \"Default configurations\"): the 1x1 layers' sum 6-10% lower on "
       "ResNet-50 and 5-25% on MobileNet v1 in every round, v2 level; ob8 between the two"},
      {"int8q plane form, planes of at least 16 pixels, byte quad products in a helper, output "
       "channels not a multiple of 16, input channels zipped in private memory: blocks of 8",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.byte_quad_products && Int8ColumnZips(d, 4) && d.out_channels % 16 != 0;
       },
       {8, 1, 16, 4, 64},
       "mpcaffe time --synthetic --explain --json on SqueezeNet 1.1, GoogLeNet and MobileNet v2 "
       "int8 (bench/zoo_nets.py, not tuned on), PoCL, AVX-512 VNNI (Xeon), previous binary and "
       "this one alternating, 3 rounds, 2026-12-01 (docs/BENCHMARKS.md, \"Default "
       "configurations\"): SqueezeNet's conv10 (c512 h13 o1000) 0.718 -> 0.422 ms, GoogLeNet's two "
       "o24 layers 0.150 -> 0.140; MobileNet v2 has no such layer"},
      {"int8q plane form, planes of at least 16 pixels, byte quad products in a helper, output "
       "channels a multiple of 16",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.byte_quad_products && Int8Plane(d) && d.out_channels % 16 == 0;
       },
       {16, 1, 16, 4},
       "mpcaffe time --synthetic --explain on MobileNet v1 int8, PoCL, AVX-512, alternating "
       "rounds against oc8 and oc12, loaded, 2026-11-30 (docs/BENCHMARKS.md, \"Default "
       "configurations\"): the 1x1 layers' sum about a fifth lower than oc8's"},
      {"int8q plane form, planes of at least 16 pixels, byte quad products in a helper",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.byte_quad_products && Int8Plane(d);
       },
       {8, 1, 16, 4},
       "mpcaffe time --synthetic --explain on ResNet-50 and MobileNet v1 int8, PoCL, 3 alternating "
       "rounds, loaded, 2026-11-29: the 1x1 layers' sum 36.6 -> 20.4 ms and 10.2 -> 5.2 ms "
       "against the pair tile oc8 px1 v16; oc16 level with oc8 (20.7, 4.6)"},
      {"int8q plane form, planes of at least 16 pixels, a CPU runtime without half-register "
       "tiles, input channels zipped in private memory",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && !p.half_register_tiles && Int8ColumnZips(d, 2);
       },
       {8, 1, 16, 2, 64},
       "mpcaffe time --synthetic --explain on MobileNet v1 and ResNet-50 int8, 3-6 alternating "
       "rounds against main's oc8 px1 v16, loaded, 2026-11-30 (docs/BENCHMARKS.md, \"Default "
       "configurations\"): the 1x1 layers' sum lower in every round on Intel's runtime at "
       "AVX-512 and on PoCL with MPCAFFE_ISA=avx2 (PoCL still compiling AVX-512 code: the caps did "
       "not reach it then); mixed on Intel's runtime at AVX2, which keeps it"},
      {"int8q row form, output rows of at least 8 columns, a runtime whose strided byte rows "
       "are slow (Intel's CPU runtime): pairs of window columns in 16-bit pair products, 16 "
       "output channels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && p.strided_byte_rows_slow && RowPairsFit(d);
       },
       {16, 1, 8, 2, 1, 2},
       "the int8 conv1 of ResNet-50 (7x7) and MobileNet v1 (3x3) in mpcaffe time --explain, "
       "calibrated nets, MPCAFFE_KERNEL_CONFIG='conv_pw:oc<n> px1 v8 kx2' against the float "
       "form oc8 px1 v8, 2 alternating rounds, quiet, 2026-11-30 (docs/BENCHMARKS.md, \"Default "
       "configurations\"): at AVX2 ResNet-50 2.18-2.19 -> 1.15 ms, MobileNet v1 0.33-0.34 -> "
       "0.23 (oc8 1.32, 0.26-0.27; oc12 1.32, 0.25); at AVX-512 2.01-2.03 -> 0.93, 0.29-0.31 -> "
       "0.21; a stride-1 first layer (c3 h224 o64 k3x3, calibrated), 2 rounds: 2.97-3.02 -> "
       "2.22-2.34 at AVX-512, level at AVX2 (2.87-3.07 -> 2.75-2.95)"},
      {"int8q row form, output rows of at least 8 columns, half-register tiles (a CPU runtime "
       "at AVX2): pairs of window columns in 16-bit pair products",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && p.half_register_tiles && RowPairsFit(d);
       },
       {8, 1, 8, 2, 1, 2},
       "as the row above, PoCL with MPCAFFE_ISA=avx2: ResNet-50 2.64-4.01 -> 1.72-1.75 ms, "
       "MobileNet v1 0.47-0.60 -> 0.37-0.38 against the float form oc8 px1 v8 (oc16 1.64-3.12, "
       "0.37-0.53); the stride-1 layer of the row above 12.0 -> 4.8 ms (the float form's 16 "
       "lanes: two registers each)"},
      {"int8q row form, stride 2, output rows of at least 16 columns, a CPU runtime that runs "
       "16 stride-2 byte columns fast (PoCL) in whole registers (not at AVX2: 16 float lanes "
       "are two registers, 8 channels' sums all 16 of them)",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && !p.strided_byte_rows_slow && !p.half_register_tiles &&
                d.type == DataType::kInt8Q && RowForm(d) && d.stride_w == 2 && d.out_w() >= 16;
       },
       {8, 1, 16},
       "MobileNet v1's int8 conv1 (c3 h224 o32 k3x3 s2) in mpcaffe time --synthetic --explain, "
       "alternating tiles, loaded, 2026-11-30 (docs/BENCHMARKS.md, \"Default configurations\"): "
       "PoCL 16 lanes about a fifth faster than 8 at AVX-512; slower on Intel's runtime at "
       "AVX-512; PoCL at AVX2 (MPCAFFE_ISA=avx2, calibrated nets, 3 alternating rounds, "
       "2026-11-30): MobileNet v1's conv1 0.89-1.31 ms in 16 lanes against 0.60-0.74 in 8, "
       "ResNet-50's 7x7 conv1 2.34-2.66 against 2.64-2.65 (level)"},
      {"fp32 row form, stride 2, output rows of at least 16 columns, a CPU runtime at the "
       "AVX-512 level: 16 output channels x the even lanes of 32 input columns",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && !p.half_register_tiles && d.type == DataType::kFloat32 &&
                RowForm(d) && d.stride_w == 2 && d.out_w() >= 16;
       },
       {16, 1, 16},
       "ConvBench.DISABLED_PointwiseInt8Tiles with PW_BENCH_SHAPES=first PW_BENCH_TYPE=fp32, the "
       "zoo nets' first layers, minimum of 7 alternating rounds, 2026-12-01 (docs/BENCHMARKS.md, "
       "\"Default configurations\"): the three stride-2 layers summed, oc8 px1 v8 -> oc16 px1 "
       "v16, PoCL 3.86 -> 2.66 ms, Intel's runtime 3.13 -> 2.01; ResNet-50's 7x7 conv1 "
       "2.42 -> 1.50 and 2.19 -> 1.30"},
      {"row form, stride 1, output rows of at least 64 columns, not half-register tiles",
       [](const TargetProfile& p, const ConvDesc& d) {
         return !p.half_register_tiles && RowForm(d) && d.stride_w == 1 && d.out_w() >= 64;
       },
       {8, 1, 16},
       "the row form's tuner records on first layers (3x3 and 7x7, stride 1 and 2), both CPU "
       "runtimes, 2026-11-25"},
      {"row form",
       [](const TargetProfile&, const ConvDesc& d) { return RowForm(d); },
       {8, 1, 8},
       "the row form's tuner records on first layers, both CPU runtimes, 2026-11-25; at AVX2 "
       "(half-register tiles) also at stride 1: the tile bench as the stride-2 row above, "
       "both runtimes capped, 5 rounds, 2026-12-01: a 3x3 stride-1 first layer (c3 h224 o64) "
       "oc8 px1 v16 2.67 / 2.39 ms against v8 2.18 / 2.02 (PoCL / Intel's runtime)"},
      {"fp32 plane form, planes of at least 16 pixels, half-register tiles (a CPU runtime at "
       "AVX2), at least 128 output channels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.half_register_tiles && d.type == DataType::kFloat32 && !RowForm(d) &&
                Pixels(d) >= 16 && d.out_channels >= 128;
       },
       {6, 2, 8},
       "ConvBench.DISABLED_PointwiseInt8Tiles with PW_BENCH_TYPE=fp32, the 42 zoo 1x1 layers, "
       "oc4 px2 v8 and oc6 px2 v8 alternating (5 rounds, minimum per layer), AVX2 (MPCAFFE_ISA="
       "avx2), quiet, 2026-11-30, 2 runs per runtime: sums 11.04 / 9.71 and 11.09 / 9.93 ms on "
       "Intel's runtime, 11.91 / 10.65 and 11.23 / 10.03 on PoCL (c1024 h7 o1024 and c2048 h7 "
       "o512 about a fifth faster); slower only with fewer output channels (o16, o32, o64: up to "
       "19 %: the last block of 6 mostly empty), which keep oc4 px2 v8"},
      {"fp32 plane form, planes of at least 16 pixels, half-register tiles (a CPU runtime at "
       "AVX2)",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.half_register_tiles && d.type == DataType::kFloat32 && !RowForm(d) &&
                Pixels(d) >= 16;
       },
       {4, 2, 8},
       "ConvBench.DISABLED_MobileNetPointwise, MobileNet v1's 9 distinct 1x1 layers, Intel's "
       "runtime capped at AVX2, 2 runs (minimum per candidate), loaded, 2026-11-29: geometric mean "
       "1.27 x the best per layer against 2.17 x for oc8 px1 v16 (16 accumulators of two "
       "registers); at AVX-512 oc8 px1 v16 stays the best (1.14 x). PoCL compiling for haswell "
       "(MPCAFFE_ISA=avx2), ResNet-50 fp32 b1 in mpcaffe time --synthetic --explain, quiet, "
       "2026-11-30: the 1x1 layers' sum 50.2 -> 22.8 ms against oc8 px1 v16 (oc6 px2 v8 "
       "28.5-30.1)"},
      // A 7×7 plane (49 pixels) in blocks of 16 pixels computes 64 lanes for 49 (the last block
      // shifted back over the one before it), in blocks of 8 it computes 56. At AVX2 a vector of
      // 8 pixels is one register, so the narrower block costs no register tile: 8 (or 10)
      // channels × one vector keep the loads per pair product where 6 × 2 had them.
      {"int8q plane form, planes of 16 to 63 pixels (7x7), not strided, half-register tiles (a "
       "CPU runtime at AVX2), input channels zipped in private memory: 8 output channels x one "
       "vector of 8 pixels over one zip (56 lanes for a 7x7 plane's 49, not 64)",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.half_register_tiles && Int8ColumnZips(d, 2) && SmallPlane(d);
       },
       {8, 1, 8, 2, 64},
       "ConvBench.DISABLED_PointwiseInt8Tiles (tests/libdnn/conv_tuner_test.cc), PW_BENCH_LAYERS="
       "'h7 w7' (the zoo's 8 such layers), PW_BENCH_TILES='oc6 px2 v8 ob64;oc8 px1 v8 ob64;oc10 "
       "px1 v8 ob64;...', 5 alternating rounds (minimum per layer), MPCAFFE_ISA=avx2 with the "
       "runtimes' AVX2 caps, AMD EPYC (Zen 4), 2026-12-05 (docs/BENCHMARKS.md, \"Default "
       "configurations\"): geometric mean over oc6 px2 v8 ob64 Intel's runtime 0.94 (oc10 0.92), "
       "PoCL 0.87 (oc10 0.89); c512 h7 o2048 0.420 -> 0.368 ms, c1024 h7 o1024 0.404 -> 0.368 "
       "(Intel's runtime); oc12 spills (1.7 x); on 14x14 planes and larger mixed (0.95-1.15 x)"},
      {"int8q plane form, planes of 16 to 63 pixels (7x7), not strided, half-register tiles (a "
       "CPU runtime at AVX2), no residual, input channels too many to zip: 10 output channels x "
       "one vector of 8 pixels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.half_register_tiles && Int8Plane(d) && SmallPlane(d) && !d.residual;
       },
       {10, 1, 8},
       "as the row above without ob, PW_BENCH_TILES='oc8 px1 v16;oc6 px2 v8;oc8 px1 v8;oc10 px1 "
       "v8' (the 9 zoo 7x7 layers), 2026-12-05: c2048 h7 o512 (ResNet-50's res5 branch2a, "
       "channels past the zip) Intel's runtime 0.481 -> 0.418 ms against oc8 px1 v16, PoCL "
       "0.514 -> 0.410; geometric mean over the 9 layers 0.88 and 0.82 (oc8 px1 v8 0.91, 0.86; "
       "oc6 px2 v8 0.97, 0.88)"},
      {"int8q plane form, planes of at least 16 pixels, half-register tiles (a CPU runtime at "
       "AVX2), input channels zipped in private memory: 6 output channels x two vectors of 8 "
       "pixels over one zip",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.half_register_tiles && Int8ColumnZips(d, 2);
       },
       {6, 2, 8, 2, 64},
       "mpcaffe time --model <ResNet-50 and MobileNet v1 calibrated to int8> --iterations 10-20 "
       "--explain --json, MPCAFFE_ISA=avx2, MPCAFFE_KERNEL_CONFIG='conv_pw:oc6 px2 v8 ob64' "
       "against the rows below, alternating, quiet, 2026-11-30 (docs/BENCHMARKS.md, \"Default "
       "configurations\"): Intel's runtime ResNet-50 38.6 / 38.5 -> 33.6 / 33.5 ms (every kind of "
       "1x1 layer faster), MobileNet v1 7.1 / 7.2 -> 5.9 / 6.2; PoCL ResNet-50 36.9 / 38.3 -> "
       "36.0 / 35.4, MobileNet v1's 1x1 layers 11.2 / 12.0 / 10.5 -> 8.5 / 5.7 / 8.3 (whole pass "
       "noisy); oc8 px1 v16 ob64 and oc12 px1 v8 slower than the rows below"},
      {"int8q plane form with a fused residual or on a strided layer's subsampled input, "
       "planes of at least 16 pixels, half-register tiles (a CPU runtime at AVX2): 6 output "
       "channels x two vectors of 8 pixels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.half_register_tiles && Int8Plane(d) &&
                (d.residual || Convolution::IsStridedPointwise(d));
       },
       {6, 2, 8},
       "mpcaffe time --model <ResNet-50 calibrated to int8> --iterations 10 --explain --json, "
       "MPCAFFE_ISA=avx2, against oc8 px1 v16 (16 accumulators and the zipped pairs spill in the "
       "loop), alternating, quiet, 2026-11-30 (docs/BENCHMARKS.md, \"Default configurations\"): "
       "Intel's runtime, the 16 layers with a residual 12.6 -> 9.9 ms, the three stride-2 "
       "projections (the direct kernel before) 4.3 -> 3.5; PoCL level on the residual layers "
       "(10.2 / 10.4), 4.3 -> 3.5 on the projections; without a residual oc8 px1 v16 stays ahead "
       "(Intel's runtime 6.3 against 7.0 ms on the 13 others)"},
      {"fp32 plane form, planes of 32 to 196 pixels (14x14), 16-lane registers (PoCL at "
       "AVX-512), output channels that blocks of 12 fill (at most 1/32 padding): 12 output "
       "channels x two vectors of 16 pixels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.sixteen_lane_registers && d.type == DataType::kFloat32 && !RowForm(d) &&
                Pixels(d) >= 32 && Pixels(d) <= 196 && BlocksFillChannels(d, 12);
       },
       {12, 2, 16},
       "ConvBench.DISABLED_PointwiseInt8Tiles with PW_BENCH_TYPE=fp32, PoCL, AVX-512 (Xeon), "
       "launched in conv_launch.cc's groups, 2026-12-01: the 22 zoo 1x1 layers of 14x14 and 7x7 "
       "planes, 5 alternating rounds (minimum per layer), sum 6.41 -> 6.07 ms against oc8 px2 v16, "
       "geometric mean 0.97 (oc10 px2 1.00); c512 h14 o512 0.87 -> 0.79, c512 h7 o2048 0.70 -> "
       "0.62. A loop over many channels of a small plane: 24 accumulators take each pixel "
       "vector (from L2: the block's channels outgrow L1) for 12 FMAs instead of 8. Larger "
       "planes mixed (c512 h28 o128 0.54 -> 0.62, c128 h56 o128 0.91 -> 0.79). Few output "
       "channels that 12 does not divide lose their last block's padding: the same bench, PoCL, "
       "AVX-512 (AMD EPYC, Zen 4), 7 alternating rounds, 2026-12-06, ms oc12 / oc8 px2 v16: "
       "c192 h14 o64 0.040 / 0.033, c384 h14 o64 0.065 / 0.055, c512 h14 o64 0.078 / 0.068 "
       "(padding 1/8); c384 h14 o96 and c256 h14 o48 level (0.079, 0.033 both)"},
      {"fp32 plane form, planes of at least 32 pixels, a CPU runtime at the AVX-512 level: 8 "
       "output channels x two vectors of 16 pixels",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && !p.half_register_tiles && d.type == DataType::kFloat32 &&
                !RowForm(d) && Pixels(d) >= 32;
       },
       {8, 2, 16},
       "ConvBench.DISABLED_PointwiseInt8Tiles with PW_BENCH_TYPE=fp32, the 42 zoo 1x1 layers, "
       "PoCL, AVX-512 on a Xeon with two 512-bit FMA pipes, 3 alternating rounds (minimum per "
       "layer), 2026-12-01 (docs/BENCHMARKS.md, \"Default configurations\"): sum 14.33 -> 10.93 "
       "ms against oc8 px1 v16, geometric mean per layer 0.80 (oc16 px1 0.92, oc6 px2 0.93, "
       "oc12 px1 0.98, oc4 px4 0.99); c512 h14 o512 0.86 -> 0.62, c2048 h7 o512 1.02 -> 0.70. "
       "Intel's runtime at AVX-512, the same bench, Xeon (no AMX), 3 rounds, "
       "2026-12-04: sum 9.51 -> 6.81 ms against oc8 px1 v16, faster on all 42 layers (0.57-0.93 "
       "x, geometric mean 0.77; oc12 px2 0.79); c512 h14 o512 0.63 -> 0.41, c1024 h7 o1024 0.80 "
       "-> 0.47; whole passes (mpcaffe time --synthetic --iterations 20 --device 0, 3 "
       "alternating rounds) MobileNet v1 8.47-8.55 -> 6.22-7.23 ms, ResNet-50 43.7-46.6 -> "
       "36.4-36.8"},
      {"planes of at least 16 pixels",
       [](const TargetProfile&, const ConvDesc& d) { return Pixels(d) >= 16; },
       {8, 1, 16},
       "ConvBench.DISABLED_ZooPointwise, the 42 distinct 1x1 layers of MobileNet v1 / v2, "
       "SqueezeNet 1.1, GoogLeNet and ResNet-50 at batch 1, minimum of 5 runs per candidate, "
       "2026-11-25: fastest or within 13% at the median on both CPU runtimes (Intel's: best on "
       "22 of 42, median 1.00 x the best; PoCL: best on 12, 1.07 x); 4 x 2 x 8 1.15-1.70 x, the "
       "direct kernel 1.35-3.9 x"},
      {"planes of 8 to 15 pixels",
       [](const TargetProfile&, const ConvDesc& d) { return Pixels(d) >= 8; },
       {8, 1, 8},
       "the widest vector such a plane fills (not measured)"},
      {"smaller planes",
       [](const TargetProfile&, const ConvDesc&) { return true; },
       {8, 1, 4},
       "the widest vector such a plane fills (not measured)"},
  };
  return table;
}

const DefaultsTable<bool, ConvDesc>& FirstLayerPointwiseDefaults() {
  // The grid form's tap quads multiply 64 byte products per instruction over a pack of the
  // input at the layer's stride, where the row form converts every byte to float.
  static const DefaultsTable<bool, ConvDesc> table = {
      {"byte quad products in a helper (PoCL, AVX-512 VNNI), output rows of at least 32 "
       "columns: the direct kernel's grid form",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.cpu_vectors && p.byte_quad_products && d.out_w() >= 32;
       },
       false,
       "mpcaffe time on the int8 nets with bench/peers.py's weights, cec787c's binary and this one "
       "alternating, 4 rounds, PoCL, AVX-512, loaded, 2026-12-04 (docs/BENCHMARKS.md, \"Default "
       "configurations\"): SqueezeNet 1.1's conv1 (3x3 s2 o64) 0.53-0.60 -> 0.41-0.54 ms; "
       "MobileNet v1's and v2's (3x3 s2 o32) level in 20-pass medians (0.25-0.40 both), 40-pass "
       "medians 3 rounds v1 0.24-0.29 -> 0.21-0.23; alone (mpcaffe time --synthetic "
       "--iterations 200, 3 rounds): c3 h224 o32 p1 0.23-0.26 -> 0.21-0.22, h224 o64 0.42-0.51 -> "
       "0.31-0.53, h227 o32 p0 0.27-0.32 -> 0.23-0.35, h227 o64 0.51-0.61 -> 0.37-0.42"},
      {"every other device and description: the row form",
       [](const TargetProfile&, const ConvDesc&) { return true; }, true,
       "the row form's measurements (PointwiseDefaults)"},
  };
  return table;
}

const DefaultsTable<bool, ConvDesc>& StridedPointwiseDefaults() {
  // The subsampling pass costs what the plane form saves where the direct kernel already runs
  // these layers well.
  static const DefaultsTable<bool, ConvDesc> table = {
      {"int8q, half-register tiles (a CPU runtime at AVX2): the plane form on the subsampled "
       "input",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.half_register_tiles && d.type == DataType::kInt8Q;
       },
       true,
       "mpcaffe time --model <ResNet-50 calibrated to int8> --iterations 10 --explain --json, "
       "MPCAFFE_ISA=avx2, the plane form in oc6 px2 v8 against the direct kernel, alternating, "
       "quiet, 2026-11-30 (docs/BENCHMARKS.md, \"Default configurations\"): the three stride-2 "
       "projections 4.33 -> 3.47 ms on Intel's runtime, 4.31 -> 3.54 on PoCL; the three stride-2 "
       "reductions 1.41 -> 1.35 and 1.59 -> 1.36"},
      {"fp32, half-register tiles (a CPU runtime at AVX2): the direct kernel",
       [](const TargetProfile& p, const ConvDesc&) { return p.half_register_tiles; }, false,
       "ConvBench.DISABLED_ResNetStridedPointwise, ResNet-50's six stride-2 1x1 layers, Intel's "
       "runtime capped at AVX2, 2 runs, loaded, 2026-11-29: summed per-layer minima 8.3 ms direct "
       "against 11.1 ms for oc4 px2 v8 on the subsampled input; PoCL compiling for haswell "
       "(MPCAFFE_ISA=avx2): mpcaffe tune on ResNet-50 fp32 b1, quiet, 2026-11-30, the direct "
       "kernel the fastest on 4 of its 6 stride-2 1x1 shapes"},
      {"every other device: the plane form on the subsampled input",
       [](const TargetProfile&, const ConvDesc&) { return true; }, true,
       "ConvBench.DISABLED_ResNetStridedPointwise, as above, PoCL at AVX-512, 2 runs: 8.5 ms "
       "against 10.7 direct; ResNet-50 fp32 through mpcaffe time --synthetic --explain, base and "
       "this route alternating, 3-6 rounds per device and level, loaded: the six layers' time "
       "over the 3x3 layers' median 0.276 -> 0.217 (PoCL, AVX-512), 0.257 -> 0.217 (PoCL, AVX2), "
       "0.213 -> 0.181 (Intel's runtime, AVX-512); int8q (ResNet-50 converted to int8, the "
       "direct kernel's byte quads or pairs -> the plane form, 3 rounds, loaded, 2026-11-30): "
       "0.346/0.339/0.344 -> 0.330/0.327/0.283 (PoCL, AVX-512), 0.522/0.341/0.347 -> "
       "0.285/0.266/0.280 (PoCL, AVX2), 0.255/0.248/0.202 -> 0.207/0.141/0.188 (Intel's "
       "runtime, AVX-512)"},
  };
  return table;
}

const DefaultsTable<int, ConvDesc>& PointwisePrefetchDefaults() {
  // A work-item of the plane form walks down the input channels: one line or two of each
  // channel's plane, a plane apart. From 28x28 pixels on that stride (3 KB and more) is beyond
  // what a core's stride prefetcher follows and crosses a page at every step (12.5 KB at
  // 56x56), so each step waits for its lines; $prefetch asks for them 8 channels ahead. Over
  // fewer channels most of the fetches wrap to channels already read. Smaller planes stream
  // (the prefetchers follow their stride): fetching there only adds loads.
  static const DefaultsTable<int, ConvDesc> table = {
      {"fp32 plane form, software prefetch at the AVX-512 level (PoCL, Intel's CPU runtime), "
       "planes of at least 28x28 pixels, at least 32 input channels: 8 channels ahead",
       [](const TargetProfile& p, const ConvDesc& d) {
         return p.software_prefetch && !p.half_register_tiles && d.type == DataType::kFloat32 &&
                !RowForm(d) && Pixels(d) >= 28 * 28 && d.channels >= 32;
       },
       8,
       "ConvBench.DISABLED_PointwiseInt8Tiles with PW_BENCH_TYPE=fp32, the zoo's 1x1 layers, "
       "minimum of 5 alternating rounds per layer, Xeon (AVX-512), loaded host, 2026-12-02 "
       "(docs/BENCHMARKS.md, \"Default configurations\"): PoCL oc8 px2 v16 against pf8 on "
       "the 20 layers of 28x28 planes and more, sum 7.19 -> 6.52 ms, geometric mean 0.90 (c256 "
       "h56 o64 0.84 -> 0.70, c64 h56 o64 0.23 -> 0.16); Intel's runtime oc8 px1 v16, the 17 "
       "such layers of 32 channels and more 5.55 -> 5.21 ms (0.96, 13 of 17 faster); on 14x14 "
       "and 7x7 planes PoCL slower (c1024 h14 o256 0.88 -> 1.10 ms, c2048 h7 o512 0.96 -> "
       "1.21)"},
      {"every other device and layer: none",
       [](const TargetProfile&, const ConvDesc&) { return true; }, 0,
       "PoCL at AVX2 (MPCAFFE_ISA=avx2, POCL_LLVM_CPU_NAME=haswell), oc6 px2 v8 against pf8, the "
       "same 20 layers: sum 10.31 -> 11.69 ms (geometric mean 1.14), as the row above, "
       "2026-12-02; Intel's runtime at AVX2 gained (10.57 -> 9.22 ms, 0.88), but the profile "
       "does not tell its AVX2 compile from PoCL's; GPUs and rusticl: no $prefetch"},
  };
  return table;
}

const DefaultsTable<int, ConvDesc>& PointwiseSpreadDefaults() {
  // Where work-items are SIMD lanes (GPUs, llvmpipe) the runtime chooses: whole rows of pixel
  // blocks are no multiple of a warp. CPU runtimes get at least 8 groups per compute unit, so a
  // core delayed by anything else hands its work over (SpreadLocal, conv_launch.cc).
  static const DefaultsTable<int, ConvDesc> table = {
      {"work-items in lanes (GPUs, llvmpipe): the runtime's choice",
       [](const TargetProfile& p, const ConvDesc&) { return p.lane_defaults; }, 0,
       "not measured (the GPU default of every launch)"},
      {"every other device: at least 8 groups per compute unit",
       [](const TargetProfile&, const ConvDesc&) { return true; }, 8,
       "MobileNet v1 at batch 1, whole passes, fp32 and int8, both CPU runtimes, medians of 5 "
       "alternating runs, 2026-11-27 (docs/BENCHMARKS.md, \"Default configurations\")"},
  };
  return table;
}

}  // namespace mpcaffe::libdnn
