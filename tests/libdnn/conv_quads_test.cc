// tests/libdnn/conv_quads_test.cc — the int8 pointwise kernel in byte quads (PointwiseTile::k 4:
// MP_DPBUSD16 over 4 input channels per step; with ob, and its pair products, over one zip for
// several blocks of output channels) and the direct kernel in byte quads (ConvConfig
// kp 4, vw 16) bit-exact against ConvForwardReference, in the
// form the device compiles (vpdpbusd in a noinline AVX-512 VNNI helper on PoCL with avx512vnni)
// and forced into the portable form; weight zero points a signed byte cannot hold falling back
// to the pair products; and the profile rule that picks byte quads by default.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "codegen/target_profile.h"
#include "device/host_isa.h"
#include "device/settings.h"
#include "libdnn/conv.h"
#include "libdnn/conv_families.h"
#include "libdnn/conv_internal.h"
#include "quant/fixed_point.h"
#include "tests/libdnn/conv_run.h"
#include "tests/testing/host_isa_levels.h"

namespace mpcaffe::libdnn {
namespace {

using Bytes = std::vector<uint8_t>;

struct Case {
  int n, c, h, w, o;
  Convolution::PointwiseTile tile;
};

// Whole quads, then 1, 2 or 3 channels in the last one; planes of one block, of several and of
// a shifted last block; output channels past the last full channel block; several blocks of
// output channels per work-item over one zip (ob), the last group of blocks partial. Few
// programs: each case compiles one (seconds on a CPU runtime).
// clang-format off
const Case kCases[] = {
    {2, 13, 5, 6, 10, {3, 1, 16, 4}},
    {1, 7, 6, 6, 9, {5, 2, 16, 4}},
    {1, 6, 4, 5, 16, {16, 1, 16, 4}},
    {2, 13, 7, 5, 37, {16, 1, 16, 4, 2}},
    {1, 7, 6, 6, 9, {2, 2, 16, 4, 3}},
    {1, 13, 7, 5, 37, {8, 1, 16, 4, 64}},  // the default where 16 does not divide the outputs
};
// clang-format on

struct DirectCase {
  int n, c, h, w, o, k, stride, pad, dilation, groups;
};

/// The int8q description of a case: bias, ReLU, residual and signed weights by `variant`.
ConvDesc DirectDescOf(const DirectCase& c, int variant) {
  ConvDesc d;
  d.type = DataType::kInt8Q;
  d.batch = c.n, d.channels = c.c, d.height = c.h, d.width = c.w, d.out_channels = c.o;
  d.kernel_h = d.kernel_w = c.k;
  d.stride_h = d.stride_w = c.stride;
  d.pad_h = d.pad_w = c.pad;
  d.dilation_h = d.dilation_w = c.dilation;
  d.groups = c.groups;
  d.bias = variant % 4 != 3;
  d.relu = variant % 2 == 1;
  d.residual = variant % 3 == 0;
  d.weights_signed = variant % 2 == 0;
  return d;
}

ConvDesc DescOf(const Case& c, int variant) {
  return DirectDescOf({c.n, c.c, c.h, c.w, c.o, 1, 1, 0, 1, 1}, variant);
}

/// Quantization of `d` for these tests: `w_zero` −1 the symmetric weight zero point (128, or 0
/// for signed storage); outputs spread over about ±45 around c_zero (σ of a sum of K products of
/// uniform bytes: √K · 74²), so the requantization, not the clamps, decides most of them.
ConvQuant QuantOf(const ConvDesc& d, int w_zero) {
  ConvQuant q;
  q.x_zero = 118;
  q.c_zero = 131;
  q.res_zero = 120;
  q.res_multiplier = quant::QuantizeMultiplier(0.4);
  q.w_zero.assign(size_t(d.out_channels), w_zero >= 0 ? w_zero : d.weights_signed ? 0 : 128);
  const double sigma = std::sqrt(double(d.weight_count() / d.out_channels)) * 74.0 * 74.0;
  q.multiplier.clear();
  for (int o = 0; o < d.out_channels; ++o)
    q.multiplier.push_back(quant::QuantizeMultiplier((0.5 + 0.05 * o) * 45.0 / sigma));
  return q;
}

/// Runs `conv` (made for `d` and `q`) on random data (every fourth input and weight at the ends
/// of their ranges) and compares with the reference.
void CompareWithReference(const ConvDesc& d, const ConvQuant& q, Convolution& conv,
                          uint32_t seed) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(seed);
  auto bytes = [&](size_t n, bool extremes) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i)
      b[i] = extremes && i % 4 == 0 ? uint8_t(i % 8 ? 255 : 0) : uint8_t(rng());
    return b;
  };
  const Bytes x = bytes(d.input_count(), true), w = bytes(d.weight_count(), true);
  const Bytes res = bytes(d.output_count(), false);
  const double sigma = std::sqrt(double(d.weight_count() / d.out_channels)) * 74.0 * 74.0;
  std::vector<int32_t> bias(size_t(d.out_channels));
  for (int32_t& b : bias) b = int32_t(int(rng() % 2001) - 1000) * int32_t(sigma) / 1000;
  Bytes want(d.output_count());
  ConvForwardReference(d, q, x.data(), w.data(), d.bias ? bias.data() : nullptr, want.data(),
                       res.data());
  const Bytes got = test_conv::RunForward(dev, conv, x, w, bias, res, want.size());
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i] && bad++ < 5)
      ADD_FAILURE() << "output " << i << ": got " << int(got[i]) << " want " << int(want[i]);
  EXPECT_EQ(bad, 0);
}

/// The pointwise kernel of `d` with `tile` against the reference; returns the tile it ran.
Convolution::PointwiseTile CheckQuads(const ConvDesc& d, const Convolution::PointwiseTile& tile,
                                      uint32_t seed, int w_zero = -1) {
  const ConvQuant q = QuantOf(d, w_zero);
  Convolution conv = Convolution::Pointwise(DefaultDevice(), d, tile, q);
  EXPECT_TRUE(conv.forward_pointwise());
  CompareWithReference(d, q, conv, seed);
  return conv.pointwise_tile();
}

void SkipUnlessOpenCL(Device& dev) {
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the int8q pointwise kernel is OpenCL text";
}

const char* FormOf(Device& dev) {
  return KernelTarget::Of(dev).byte_quads_in_helper ? "vpdpbusd in a noinline AVX-512 VNNI helper"
                                                    : "portable byte quad products";
}

const char* TileFormOf(Device& dev) {
  return KernelTarget::Of(dev).byte_tiles_in_helper ? "AMX tiles in a noinline helper"
                                                    : "portable byte tile products";
}

/// Each case (its description by variant first_variant, first_variant + 1, …) with its tile
/// against the reference; the tile must run as given, a zipped one's blocks of output channels
/// per work-item as the device shares them (PointwiseZipBlocks).
template <size_t N>
void CheckCases(const Case (&cases)[N], int first_variant, uint32_t seed) {
  int variant = first_variant;
  for (const Case& c : cases) {
    const ConvDesc d = DescOf(c, variant);
    SCOPED_TRACE(d.ToString() + " tile " + c.tile.ToString());
    Convolution::PointwiseTile runs = c.tile;
    if (runs.ob > 1) runs.ob = conv_internal::PointwiseZipBlocks(d, runs, DefaultDevice().info());
    EXPECT_TRUE(CheckQuads(d, c.tile, seed + variant) == runs);
    ++variant;
  }
}

TEST(ConvByteQuads, MatchReference) {
  Device& dev = DefaultDevice();
  SkipUnlessOpenCL(dev);
  CheckCases(kCases, 0, 71);
  std::printf("[ quads    ] %s: %s\n", dev.Describe().c_str(), FormOf(dev));
}

// The pair products (k 2) over one zip for several blocks of output channels (ob): 16 pixels
// per work-item (two groups of 8: MP_MADD32 where the compiler targets AVX-512 BW) over an odd
// channel count and a partial last group, and one group of 8.
TEST(ConvByteQuads, PairsOverOneZipMatchReference) {
  Device& dev = DefaultDevice();
  SkipUnlessOpenCL(dev);
  const Case cases[] = {{2, 13, 7, 5, 37, {8, 1, 16, 2, 3}}, {1, 7, 6, 6, 9, {3, 1, 8, 2, 2}}};
  CheckCases(cases, 1, 33);
}

// The pointwise kernel in byte tiles (k 64: 16 output channels by one or two vectors of 16
// pixels over one zip): fewer than 64 input channels, two blocks with a partial last one and
// three, output channels past the last tile, a shifted last pixel block, two images; in AMX in a
// helper where the device compiles it (PoCL with AMX) and in the portable form.
TEST(ConvByteQuads, TilesMatchReference) {
  Device& dev = DefaultDevice();
  SkipUnlessOpenCL(dev);
  const Case cases[] = {{2, 13, 5, 6, 16, {16, 1, 16, 64, 64}},
                        {1, 70, 6, 6, 35, {16, 2, 16, 64, 64}},
                        {2, 130, 7, 5, 32, {16, 1, 16, 64, 2}}};
  // Each case is a program of its own (the shape is in the text): the portable form, which
  // Intel's runtime takes about 15 s to compile, runs the second case alone.
  if (KernelTarget::Of(dev).byte_tiles_in_helper) CheckCases(cases, 0, 47);
  {
    MPCAFFE_RUN_IN_PORTABLE_FORMS(dev);
    ASSERT_FALSE(KernelTarget::Of(dev).byte_tiles_in_helper);
    const Case portable[] = {cases[1]};
    CheckCases(portable, 1, 48);
  }
  EXPECT_FALSE(Convolution::PointwiseApplies(DescOf(cases[0], 0), {8, 1, 16, 64, 64}));
  EXPECT_FALSE(Convolution::PointwiseApplies(DescOf(cases[0], 0), {16, 1, 16, 64, 1}));
  std::printf("[ tiles    ] pointwise kernel, %s: %s\n", dev.Describe().c_str(), TileFormOf(dev));
}

// The same integers in the portable form (MPCAFFE_ISA=generic), whatever this device compiles.
TEST(ConvByteQuads, PortableFormMatchesReference) {
  Device& dev = DefaultDevice();
  SkipUnlessOpenCL(dev);
  MPCAFFE_RUN_IN_PORTABLE_FORMS(dev);
  ASSERT_FALSE(KernelTarget::Of(dev).byte_quads_in_helper);
  const ConvDesc d = DescOf(kCases[1], 2);
  SCOPED_TRACE(d.ToString() + " tile " + kCases[1].tile.ToString());
  EXPECT_EQ(CheckQuads(d, kCases[1].tile, 91).k, 4);
}

// w − z_w outside a signed byte (an asymmetric per-tensor zero point): the pair products run.
TEST(ConvByteQuads, OtherWeightZeroPointsTakePairs) {
  Device& dev = DefaultDevice();
  SkipUnlessOpenCL(dev);
  ConvDesc d = DescOf(kCases[0], 1);
  d.weights_signed = false;
  const Convolution::PointwiseTile ran = CheckQuads(d, kCases[0].tile, 5, 100);
  EXPECT_EQ(ran.k, 2);
  EXPECT_EQ(ran.ToString(), "oc3 px1 v16");
}

// The default tile takes byte quads exactly where the profile has them, and MPCAFFE_ISA below
// the CPU's level (avx2, generic) turns them off; fp32 and the row form never take them.
TEST(ConvByteQuads, DefaultTileFollowsTheProfile) {
  ConvDesc d = DescOf(kCases[0], 1);
  d.height = d.width = 8;  // 64 pixels
  TargetProfile p;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, p).k, 2);
  p.cpu_vectors = true;  // a CPU runtime's pairs: blocks of output channels over one zip
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, p).ToString(), "oc8 px1 v16 ob64");
  p.half_register_tiles = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, p).ToString(), "oc6 px2 v8 ob64");
  p = TargetProfile{};
  p.byte_quad_products = true;
  // 10 outputs: blocks of 8 over one zip (16 does not divide them).
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, p).ToString(), "oc8 px1 v16 k4 ob64");
  ConvDesc wide = d;
  wide.out_channels = 32;  // a multiple of 16: blocks of 16 output channels over one zip
  EXPECT_EQ(Convolution::DefaultPointwiseTile(wide, p).ToString(), "oc16 px1 v16 k4 ob64");
  wide.channels = 2049;  // its zipped column past kMaxZippedColumnBytes: a zip per block
  EXPECT_EQ(Convolution::DefaultPointwiseTile(wide, p).ToString(), "oc16 px1 v16 k4");
  ConvDesc deep = d;
  deep.channels = 2049;  // 10 outputs, no zip
  EXPECT_EQ(Convolution::DefaultPointwiseTile(deep, p).ToString(), "oc8 px1 v16 k4");
  // Byte tiles from 256 input channels where 16 divides the outputs: two vectors of pixels
  // while their zip fits, then one; fewer channels keep the quads.
  TargetProfile amx = p;
  amx.byte_tile_products = true;
  ConvDesc big = d;
  big.channels = 256, big.out_channels = 64;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(big, amx).ToString(), "oc16 px2 v16 k64 ob64");
  big.channels = 2048;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(big, amx).ToString(), "oc16 px1 v16 k64 ob64");
  big.channels = 192;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(big, amx).k, 4);
  big.channels = 256, big.out_channels = 40;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(big, amx).k, 4);
  EXPECT_FALSE(Convolution::PointwiseApplies(wide, {16, 1, 16, 4, 2}));
  ConvDesc f32 = d;
  f32.type = DataType::kFloat32;
  EXPECT_FALSE(Convolution::PointwiseApplies(f32, {8, 1, 16, 2, 2}));  // ob: int8q's zips only
  ConvDesc f = d;
  f.type = DataType::kFloat32;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(f, p).k, 2);
  EXPECT_FALSE(Convolution::PointwiseApplies(f, {8, 1, 16, 4}));
  EXPECT_FALSE(Convolution::PointwiseApplies(d, {8, 2, 8, 4}));  // quads need vx 16

  DeviceInfo info;
  info.byte_quad_products_in_helper = true;
  {
    // At the CPU's own level, whatever MPCAFFE_ISA the run was started with.
    test_support::ScopedHostIsa native(CpuHostIsa());
    EXPECT_EQ(TargetProfile::Of(info).byte_quad_products, true);
  }
  for (HostIsa isa : {HostIsa::kAvx2, HostIsa::kGeneric}) {
    if (!(isa < CpuHostIsa())) continue;
    test_support::ScopedHostIsa lowered(isa);
    EXPECT_FALSE(TargetProfile::Of(info).byte_quad_products) << Name(isa);
  }
  info.byte_quad_products_in_helper = false;
  EXPECT_FALSE(TargetProfile::Of(info).byte_quad_products);
  // What device/ said of the default device, and why.
  Device& dev = DefaultDevice();
  const DeviceInfo& di = dev.info();
  const bool expected = di.backend == Backend::kOpenCL && di.implementation == "pocl" &&
                        !di.is_gpu && CpuHasAvx512Vnni();
  EXPECT_EQ(di.byte_quad_products_in_helper, expected) << dev.Describe();
}

// The direct kernel in byte quads (ConvConfig kp 4, vw 16: ConvInput::kPackedQuads). The
// sizes are arguments of its one program per weight storage, so the cases cost runs, not
// compiles: Cg mod 4 = 0 … 3, 3×3 padded windows (border words of z_x), stride 2, a 1×1 stride-2
// projection, dilation, groups, a 7×7 stem-like window over 3 channels, output channels past
// the last full vector (the lane-by-lane epilogue) and pixels past the last full tile. Groups of
// fewer than 4 channels under a window take tap quads (QuadLayout; a program per weight storage
// too): 11×11 at stride 4 (a last quad of 3 taps), 5×5 dilated 2 over groups of one padded
// channel, 3×3 at stride 2 (a quad of 3 taps), two images of more packed bytes than a chunk
// (kPackChunkBytes: a pack and a launch per image).
// clang-format off
const DirectCase kDirectCases[] = {
    {2, 13, 9, 7, 20, 3, 1, 1, 1, 1},
    {1, 8, 10, 9, 32, 3, 2, 1, 1, 2},
    {2, 6, 7, 8, 18, 1, 2, 0, 1, 2},
    {1, 15, 8, 9, 16, 3, 1, 2, 2, 1},
    {1, 3, 12, 12, 16, 7, 2, 3, 1, 1},
    {1, 64, 6, 6, 48, 3, 1, 1, 1, 1},
    {1, 3, 27, 26, 20, 11, 4, 0, 1, 1},
    {2, 2, 11, 13, 18, 5, 1, 2, 2, 2},
    {1, 3, 9, 10, 33, 3, 2, 1, 1, 1},
    {2, 3, 120, 120, 16, 5, 3, 2, 1, 1},
};
// clang-format on
const ConvConfig kQuadTile = {1, 2, 3, 16, 4};

/// The direct kernel of `d` with `config` against the reference; returns the input it read.
ConvInput CheckDirect(const ConvDesc& d, const ConvConfig& config, uint32_t seed,
                      int w_zero = -1) {
  const ConvQuant q = QuantOf(d, w_zero);
  Convolution conv(DefaultDevice(), d, q, config);
  CompareWithReference(d, q, conv, seed);
  return conv.input();
}

/// CheckDirect of every case (variant `*variant` on, one more per run) in every config, each
/// expected to read its input as `want`.
void CheckEachDirect(std::initializer_list<ConvConfig> configs,
                     std::initializer_list<DirectCase> cases, ConvInput want, uint32_t seed,
                     int* variant) {
  for (const ConvConfig& config : configs)
    for (const DirectCase& c : cases) {
      const ConvDesc d = DirectDescOf(c, *variant);
      SCOPED_TRACE(d.ToString() + " config " + config.ToString());
      EXPECT_EQ(CheckDirect(d, config, seed + *variant), want);
      ++*variant;
    }
}

// The int8q row form (a first layer) at stride 2 in 16 lanes, the even bytes of 32 per load
// (RowFormKernel; not byte quads, but the same reference check): padded, a last block shifted
// back (21 columns), two images (the first and last rows gathered lane by lane), output
// channels that fill the block of 8 and that do not. PoCL's default for such rows.
TEST(ConvByteQuads, RowFormSixteenLanesAtStrideTwoMatchesReference) {
  Device& dev = DefaultDevice();
  SkipUnlessOpenCL(dev);
  int variant = 0;
  for (const Convolution::PointwiseTile tile : {Convolution::PointwiseTile{8, 1, 16}, {3, 1, 16}}) {
    ConvDesc d = DirectDescOf({2, 3, 20, 41, 10, 3, 2, 1, 1, 1}, variant);
    SCOPED_TRACE(d.ToString() + " tile " + tile.ToString());
    EXPECT_TRUE(CheckQuads(d, tile, 31 + variant) == tile);
    variant += 3;
  }
  const ConvDesc d = DirectDescOf({1, 3, 224, 224, 32, 3, 2, 1, 1, 1}, 1);
  TargetProfile p;
  p.cpu_vectors = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, p).ToString(), "oc8 px1 v16");
  p.strided_byte_rows_slow = true;  // Intel's CPU runtime: pairs of window columns
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, p).ToString(), "oc16 px1 v8 kx2");
}

// The int8q row form in pairs of window columns (kx 2: RowPairsLoop, 16-bit pair products) at
// strides 2 and 1: 3×3, 5×5 and 7×7 windows (the odd last column's pair half 0), a 4×4 one,
// padded, a last block shifted back, two images (edge rows gathered element by element), a
// block of output channels filled and not, weight zero points 0, 128 and an asymmetric 77, and
// a window over 4 channels of 11×11 (484 taps: past the float form's exact bound of 258).
TEST(ConvByteQuads, RowFormColumnPairsMatchReference) {
  Device& dev = DefaultDevice();
  SkipUnlessOpenCL(dev);
  struct Case {
    DirectCase shape;
    Convolution::PointwiseTile tile;
    int w_zero;
  };
  const Convolution::PointwiseTile t8{8, 1, 8, 2, 1, 2}, t3{3, 1, 8, 2, 1, 2};
  int variant = 0;
  for (const Case& c : {Case{{2, 3, 20, 41, 10, 3, 2, 1, 1, 1}, t8, -1},
                        Case{{1, 3, 23, 37, 8, 7, 2, 3, 1, 1}, t3, -1},
                        Case{{2, 4, 15, 26, 5, 4, 2, 1, 1, 1}, t8, 77},
                        Case{{1, 4, 30, 40, 9, 11, 2, 5, 1, 1}, t8, -1},
                        Case{{2, 3, 13, 19, 10, 3, 1, 1, 1, 1}, t8, -1},
                        Case{{1, 2, 17, 23, 6, 5, 1, 2, 1, 1}, t3, 77},
                        Case{{1, 3, 12, 30, 8, 4, 1, 0, 1, 1}, t8, -1}}) {
    const ConvDesc d = DirectDescOf(c.shape, variant);
    SCOPED_TRACE(d.ToString() + " tile " + c.tile.ToString());
    EXPECT_TRUE(CheckQuads(d, c.tile, 53 + variant, c.w_zero) == c.tile);
    ++variant;
  }
  // The float form's bound and the pairs' shapes.
  const ConvDesc wide = DirectDescOf({1, 4, 30, 40, 9, 11, 2, 5, 1, 1}, 0);
  EXPECT_FALSE(Convolution::PointwiseApplies(wide, {8, 1, 8}));
  EXPECT_FALSE(Convolution::PointwiseApplies(DirectDescOf({1, 3, 40, 40, 8, 3, 2, 1, 1, 1}, 0),
                                             {8, 1, 16, 2, 1, 2}));
}

TEST(ConvByteQuads, DirectKernelMatchesReference) {
  Device& dev = DefaultDevice();
  int variant = 0;
  for (const DirectCase& c : kDirectCases) {
    const ConvDesc d = DirectDescOf(c, variant);
    SCOPED_TRACE(d.ToString() + " config " + kQuadTile.ToString());
    EXPECT_EQ(CheckDirect(d, kQuadTile, 17 + variant), ConvInput::kPackedQuads);
    ++variant;
  }
  EXPECT_TRUE(conv_internal::QuadLayoutOf(DirectDescOf(kDirectCases[4], 0)).taps);   // 7×7, 3 channels
  EXPECT_FALSE(conv_internal::QuadLayoutOf(DirectDescOf(kDirectCases[2], 0)).taps);  // 1×1 at stride 2
  EXPECT_FALSE(conv_internal::QuadLayoutOf(DirectDescOf(kDirectCases[1], 0)).taps);  // 4 channels
  std::printf("[ quads    ] direct kernel, %s: %s\n", dev.Describe().c_str(), FormOf(dev));
}

// A channel whose right shift 31 − shift is below 34 (a multiplier of 0.3): the vector
// epilogue's 64-bit products (VectorWords::RequantWide) for the whole layer instead of the
// int32 lanes, and with a residual (variants 0 and 3) the long lanes; in byte quads of 3 and 4
// pixels and in channel pairs (vectors of 8), tap and channel quads.
TEST(ConvByteQuads, DirectKernelLargeMultipliersMatchReference) {
  int variant = 0;
  for (const int k : {0, 6}) {
    for (const ConvConfig& config :
         {kQuadTile, ConvConfig{1, 2, 4, 16, 4}, ConvConfig{1, 2, 3, 8, 1}}) {
      const ConvDesc d = DirectDescOf(kDirectCases[k], variant);
      ConvQuant q = QuantOf(d, -1);
      q.multiplier[1] = quant::QuantizeMultiplier(0.3);
      SCOPED_TRACE(d.ToString() + " config " + config.ToString());
      Convolution conv(DefaultDevice(), d, q, config);
      CompareWithReference(d, q, conv, 41 + variant);
      ++variant;
    }
  }
}

// Four pixels per work-item: the vector epilogue's word of four output bytes per channel (and
// the byte stores of a last partial tile), in tap and channel quads, with and without a
// residual.
TEST(ConvByteQuads, DirectKernelFourPixelWordsMatchReference) {
  const ConvConfig four = {1, 2, 4, 16, 4};
  int variant = 0;
  for (const int k : {0, 4, 6, 8, 9}) {
    const ConvDesc d = DirectDescOf(kDirectCases[k], variant);
    SCOPED_TRACE(d.ToString() + " config " + four.ToString());
    EXPECT_EQ(CheckDirect(d, four, 53 + variant), ConvInput::kPackedQuads);
    ++variant;
  }
}

// The same integers in the portable form, whatever this device compiles.
TEST(ConvByteQuads, DirectKernelPortableFormMatchesReference) {
  Device& dev = DefaultDevice();
  MPCAFFE_RUN_IN_PORTABLE_FORMS(dev);
  ASSERT_FALSE(KernelTarget::Of(dev).byte_quads_in_helper);
  const ConvDesc d = DirectDescOf(kDirectCases[0], 2);
  SCOPED_TRACE(d.ToString());
  EXPECT_EQ(CheckDirect(d, kQuadTile, 23), ConvInput::kPackedQuads);
}

// w − z_w outside a signed byte: the channel pairs in vectors of 8, the same tile otherwise.
TEST(ConvByteQuads, DirectKernelOtherWeightZeroPointsTakePairs) {
  ConvDesc d = DirectDescOf(kDirectCases[0], 1);
  d.weights_signed = false;
  const ConvQuant q = QuantOf(d, 100);
  Convolution conv(DefaultDevice(), d, q, kQuadTile);
  EXPECT_EQ(conv.config().ToString(), "l1 oc2 px3 v8");
  EXPECT_NE(conv.input(), ConvInput::kPackedQuads);
  CompareWithReference(d, q, conv, 29);
}

// The direct kernel in byte tiles (ConvConfig kp 64: ConvInput::kPackedTiles) in each tile
// shape: fewer than 64 channels (one block, mostly zero weights), three blocks with a partial
// last one, padded 3×3 windows (grid columns past the output dropped), dilation, groups, a 1×1
// window at stride 1 and a subsampled one at stride 2, output channels past the last full
// vector, three images of more packed bytes than a chunk; a 3×3 window at stride 2 takes byte
// quads in the same tile. One program per tile shape and weight storage.
TEST(ConvByteQuads, DirectKernelTilesMatchReference) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "byte tile products are OpenCL text";
  int variant = 0;
  // clang-format off
  CheckEachDirect({{1, 2, 32, 16, 64}, {1, 1, 48, 16, 64}, {1, 3, 16, 16, 64}},
                  {{2, 13, 9, 7, 20, 3, 1, 1, 1, 1},
                   {1, 130, 10, 11, 40, 3, 1, 1, 1, 1},
                   {1, 15, 8, 9, 16, 3, 1, 2, 2, 1},
                   {2, 6, 7, 8, 18, 1, 2, 0, 1, 2},
                   {1, 96, 5, 5, 33, 1, 1, 0, 1, 1},
                   {3, 64, 50, 50, 16, 3, 1, 1, 1, 1}},
                  ConvInput::kPackedTiles, 61, &variant);
  // clang-format on
  const ConvDesc strided = DirectDescOf({1, 8, 10, 9, 32, 3, 2, 1, 1, 1}, 1);
  EXPECT_EQ(CheckDirect(strided, {1, 1, 16, 16, 64}, 7), ConvInput::kPackedQuads);
  std::printf("[ tiles    ] direct kernel, %s: %s\n", dev.Describe().c_str(), TileFormOf(dev));
}

// The same integers in the portable form, whatever this device compiles; tile shapes past the
// eight tiles are refused.
TEST(ConvByteQuads, DirectKernelTilesPortableFormMatchesReference) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "byte tile products are OpenCL text";
  EXPECT_THROW(ConvConfig({1, 4, 16, 16, 64}).Validate(), Error);
  EXPECT_THROW(ConvConfig({1, 2, 24, 16, 64}).Validate(), Error);
  EXPECT_FALSE(ConvConfig({1, 2, 32, 16, 64}).Supports(Backend::kCuda));
  MPCAFFE_RUN_IN_PORTABLE_FORMS(dev);
  ASSERT_FALSE(KernelTarget::Of(dev).byte_tiles_in_helper);
  const ConvDesc d = DirectDescOf({1, 70, 6, 7, 20, 3, 1, 1, 1, 1}, 2);
  SCOPED_TRACE(d.ToString());
  EXPECT_EQ(CheckDirect(d, {1, 2, 32, 16, 64}, 23), ConvInput::kPackedTiles);
}

// The direct kernel's grid form (ConvConfig kp 4, px a multiple of 16: ConvInput::kQuadGrid)
// in each tile shape: Cg mod 4 = 0 … 3, padded 3×3 and 5×5 windows (vectors of 16 grid
// positions across rows and the padding columns, stored lane by lane), output rows of 16 and
// more (whole vectors, one 16-byte store), dilation, groups, 1×1, output channels past the last
// of a work-item's, three images of more packed bytes than a chunk, a residual and a channel
// whose multiplier takes the 64-bit and long lanes (RequantClamp's other paths); a strided
// layer of 4 channels or more takes the type's other path with the same tile; first layers (tap
// quads) at every stride.
TEST(ConvByteQuads, DirectKernelGridMatchesReference) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the grid form is OpenCL text";
  int variant = 0;
  // clang-format off
  CheckEachDirect({{1, 1, 16, 16, 4}, {1, 1, 32, 8, 4}, {1, 3, 32, 4, 4}},
                  {{2, 13, 9, 7, 20, 3, 1, 1, 1, 1},
                   {1, 130, 10, 11, 40, 3, 1, 1, 1, 1},
                   {1, 15, 8, 9, 16, 3, 1, 2, 2, 1},
                   {1, 16, 20, 37, 24, 5, 1, 2, 1, 1},
                   {1, 96, 5, 5, 33, 1, 1, 0, 1, 1},
                   {2, 6, 7, 8, 18, 3, 1, 1, 1, 2},
                   {3, 64, 50, 50, 16, 3, 1, 1, 1, 1}},
                  ConvInput::kQuadGrid, 71, &variant);
  // clang-format on
  for (const int v : {0, 1}) {  // with a residual (long lanes) and without (RequantWide)
    const ConvDesc d = DirectDescOf({1, 20, 9, 21, 18, 3, 1, 1, 1, 1}, v);
    ConvQuant q = QuantOf(d, -1);
    q.multiplier[1] = quant::QuantizeMultiplier(0.3);
    SCOPED_TRACE(d.ToString() + " large multiplier");
    Convolution conv(dev, d, q, {1, 1, 32, 8, 4});
    EXPECT_EQ(conv.input(), ConvInput::kQuadGrid);
    CompareWithReference(d, q, conv, 43 + v);
  }
  const ConvDesc strided = DirectDescOf({1, 8, 10, 9, 32, 3, 2, 1, 1, 1}, 1);
  EXPECT_NE(CheckDirect(strided, {1, 1, 16, 16, 4}, 7), ConvInput::kQuadGrid);
  // Fewer than 4 channels under a window wider than one column: tap quads at any stride —
  // 3×3 at stride 2 (a quad of 3 taps), 7×7 at 2 (two quads per window row, the second of 3),
  // 11×11 at 4, 5×5 dilated 2 over groups of one channel, a 4×4 window at stride 3, two images
  // of more packed bytes than a chunk; output rows of 16 and more and of fewer.
  const DirectCase taps[] = {
      {1, 3, 40, 41, 20, 3, 2, 1, 1, 1},  {2, 3, 23, 37, 18, 7, 2, 3, 1, 1},
      {1, 3, 27, 26, 20, 11, 4, 0, 1, 1}, {2, 2, 11, 13, 18, 5, 1, 2, 2, 2},
      {1, 2, 30, 70, 9, 4, 3, 1, 1, 1},   {2, 3, 120, 120, 16, 5, 3, 2, 1, 1},
  };
  for (const DirectCase& c : taps)
    EXPECT_TRUE(conv_internal::QuadGridLayoutOf(DirectDescOf(c, 0)).taps);
  CheckEachDirect({{1, 1, 16, 16, 4}, {1, 3, 32, 4, 4}},
                  {taps[0], taps[1], taps[2], taps[3], taps[4], taps[5]}, ConvInput::kQuadGrid, 71,
                  &variant);
  // The input packs' vector paths: channel quads on rows narrower than a vector (14 columns,
  // GoogLeNet's 14×14 planes; the second image's last rows word by word at the input's end)
  // and a row's last vector over its tail (28 columns); tap quads of 16 columns from rows wide
  // enough at strides 1, 2 (two images) and 4.
  // clang-format off
  CheckEachDirect({{1, 1, 32, 8, 4}},
                  {{2, 16, 14, 14, 24, 3, 1, 1, 1, 1}, {1, 20, 28, 28, 16, 5, 1, 2, 1, 1},
                   {1, 3, 9, 40, 16, 5, 1, 2, 1, 1},   {2, 3, 12, 100, 16, 3, 2, 1, 1, 1},
                   {1, 3, 15, 150, 16, 11, 4, 0, 1, 1}},
                  ConvInput::kQuadGrid, 83, &variant);
  // clang-format on
  EXPECT_THROW(ConvConfig({1, 2, 32, 8, 4}).Validate(), Error);  // 32 accumulators
  EXPECT_THROW(ConvConfig({1, 1, 32, 2, 4}).Validate(), Error);
  EXPECT_FALSE(ConvConfig({1, 1, 16, 16, 4}).Supports(Backend::kCuda));
}

// The grid form's same integers in the portable forms (no VNNI helper): channel and tap quads.
TEST(ConvByteQuads, DirectKernelGridPortableFormMatchesReference) {
  Device& dev = DefaultDevice();
  MPCAFFE_RUN_IN_PORTABLE_FORMS(dev);
  ASSERT_FALSE(KernelTarget::Of(dev).byte_quads_in_helper);
  int variant = 0;
  for (const DirectCase& c :
       {DirectCase{1, 13, 9, 21, 20, 3, 1, 1, 1, 1}, DirectCase{2, 3, 23, 37, 18, 7, 2, 3, 1, 1}}) {
    const ConvDesc d = DirectDescOf(c, variant++);
    SCOPED_TRACE(d.ToString());
    EXPECT_EQ(CheckDirect(d, {1, 1, 32, 8, 4}, 29 + variant), ConvInput::kQuadGrid);
  }
}

// The direct kernel's default takes byte quads for int8q exactly where the profile has them.
TEST(ConvByteQuads, DirectDefaultFollowsTheProfile) {
  TargetProfile p;
  p.cpu_vectors = true;
  EXPECT_NE(DefaultRowFor(DirectConvDefaults(), "conv", p, DataType::kInt8Q).config.kp, 4);
  p.byte_quad_products = true;
  const ConvConfig quads = DefaultRowFor(DirectConvDefaults(), "conv", p, DataType::kInt8Q).config;
  EXPECT_EQ(quads.kp, 4);
  EXPECT_EQ(quads.vw, 16);
  EXPECT_NE(DefaultRowFor(DirectConvDefaults(), "conv", p, DataType::kFloat32).config.kp, 4);
  EXPECT_NE(DefaultRowFor(DirectConvDefaults(), "conv", p, DataType::kInt16Q).config.kp, 4);
  // First layers: the grid form's tap quads where output rows have 32 columns or more
  // (AlexNet's 55, ResNet-50's 112); narrower ones in tap quads of 4 pixels, in 48-channel
  // blocks where 64-channel ones would pad (96 channels), else 64; only in byte quads.
  ConvDesc alexnet = DirectDescOf({1, 3, 227, 227, 96, 11, 4, 0, 1, 1}, 1);
  const ConvDesc resnet = DirectDescOf({1, 3, 224, 224, 64, 7, 2, 3, 1, 1}, 1);
  auto shape = [&](const TargetProfile& tp, const ConvDesc& d) {
    return DefaultRowFor(DirectShapeDefaults(), "conv", tp, d).config;
  };
  const std::string grid = "l1 oc1 px32 v8 k4";
  ASSERT_TRUE(shape(p, alexnet).has_value());
  EXPECT_EQ(shape(p, alexnet)->ToString(), grid);
  ASSERT_TRUE(shape(p, resnet).has_value());
  EXPECT_EQ(shape(p, resnet)->ToString(), grid);
  ConvDesc narrow = alexnet;
  narrow.height = narrow.width = 100;  // 23 output columns
  EXPECT_EQ(shape(p, narrow)->ToString(), "l1 oc3 px4 v16 k4");
  narrow.out_channels = 64;
  EXPECT_EQ(shape(p, narrow)->ToString(), "l1 oc4 px4 v16 k4");
  alexnet.channels = 4;  // channel quads at stride 4
  EXPECT_FALSE(shape(p, alexnet).has_value());
  alexnet.channels = 3;
  // Windows at stride 1 over channel quads: the grid form from 14 output columns.
  EXPECT_EQ(shape(p, DirectDescOf({1, 16, 28, 28, 32, 5, 1, 2, 1, 1}, 1))->ToString(), grid);
  EXPECT_EQ(shape(p, DirectDescOf({1, 64, 14, 14, 64, 3, 1, 1, 1, 1}, 1))->ToString(), grid);
  EXPECT_FALSE(shape(p, DirectDescOf({1, 64, 7, 7, 64, 3, 1, 1, 1, 1}, 1)).has_value());
  EXPECT_FALSE(shape(p, DirectDescOf({1, 64, 56, 56, 64, 1, 1, 0, 1, 1}, 1)).has_value());
  // The pointwise row form gives way to it on first layers of 32 columns or more.
  const ConvDesc mobilenet = DirectDescOf({1, 3, 224, 224, 32, 3, 2, 1, 1, 1}, 1);
  EXPECT_FALSE(DefaultRowFor(FirstLayerPointwiseDefaults(), "conv_pw", p, mobilenet).config);
  EXPECT_TRUE(DefaultRowFor(FirstLayerPointwiseDefaults(), "conv_pw", p,
                            DirectDescOf({1, 3, 40, 40, 32, 3, 2, 1, 1, 1}, 1))
                  .config);
  p.byte_quad_products = false;
  EXPECT_FALSE(shape(p, alexnet).has_value());
  EXPECT_TRUE(DefaultRowFor(FirstLayerPointwiseDefaults(), "conv_pw", p, mobilenet).config);
  // Byte tiles (AMX in a helper) for windows larger than 1×1 at stride 1 over at least 32
  // channels: 16 channels a tile where the grid is 7×7 outputs' (ResNet-50's res5), else 32.
  p.byte_quad_products = p.byte_tile_products = true;
  const ConvDesc res2 = DirectDescOf({1, 64, 56, 56, 64, 3, 1, 1, 1, 1}, 1);
  const ConvDesc res5 = DirectDescOf({1, 512, 7, 7, 512, 3, 1, 1, 1, 1}, 1);
  ASSERT_TRUE(shape(p, res2).has_value());
  EXPECT_EQ(shape(p, res2)->ToString(), "l1 oc2 px32 v16 k64");
  ASSERT_TRUE(shape(p, res5).has_value());
  EXPECT_EQ(shape(p, res5)->ToString(), "l1 oc1 px32 v16 k64");
  EXPECT_FALSE(shape(p, DirectDescOf({1, 64, 56, 56, 64, 3, 2, 1, 1, 1}, 1)).has_value());
  EXPECT_FALSE(shape(p, DirectDescOf({1, 64, 56, 56, 64, 1, 1, 0, 1, 1}, 1)).has_value());
  EXPECT_EQ(shape(p, resnet)->ToString(), grid);  // tap quads: 3 channels
  EXPECT_EQ(shape(p, DirectDescOf({1, 24, 14, 14, 64, 5, 1, 2, 1, 1}, 1))->ToString(), grid);
  EXPECT_FALSE(shape(p, DirectDescOf({1, 24, 7, 7, 64, 5, 1, 2, 1, 1}, 1)).has_value());
  // Fewer than 32 channels: the grid form where the rows are wide.
  EXPECT_EQ(shape(p, DirectDescOf({1, 16, 56, 56, 64, 3, 1, 1, 1, 1}, 1))->ToString(), grid);
  p.byte_tile_products = false;
  EXPECT_EQ(shape(p, res2)->ToString(), grid);
  // What device/ said of the default device's tiles.
  const DeviceInfo& di = DefaultDevice().info();
  EXPECT_EQ(di.byte_tile_products_in_helper,
            di.byte_quad_products_in_helper && HostAmxTilesUsable());
}

}  // namespace
}  // namespace mpcaffe::libdnn
