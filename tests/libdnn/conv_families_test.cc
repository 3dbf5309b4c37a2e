// tests/libdnn/conv_families_test.cc — the convolution's forward families and defaults tables as
// data (libdnn/conv_families.h) and libdnn's family registry (libdnn/kernel_families.h): the
// tables end in a row serving every device, each row says where it came from, the families are
// tried in their documented order and named as the registry names their choices, and the
// defaults read from the tables are the configurations of each device class. No kernel is
// compiled here.
#include "libdnn/conv_families.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "device/host_isa.h"
#include "device/settings.h"
#include "libdnn/kernel_families.h"
#include "tests/testing/defaults_tables.h"

namespace mpcaffe::libdnn {
namespace {

using testing::ExpectRowsWithProvenance;

// The depthwise rows rule on MobileNet v1's depthwise shapes and shapes without a divisor in
// range: 14 rows at stride 1 up to 56 output rows, at most 8 elsewhere, 8 (or the whole output
// when shorter) without a divisor; 2 to 4 where per-lane loads are expensive.
TEST(ConvFamilies, DepthwiseRowDefaultsGiveTheMeasuredRows) {
  auto rows = [](int size, int stride, const TargetProfile& profile = {}) {
    ConvDesc d;
    d.channels = d.out_channels = d.groups = 32;
    d.height = d.width = size;
    d.kernel_h = d.kernel_w = 3;
    d.stride_h = d.stride_w = stride;
    d.pad_h = d.pad_w = 1;
    return Convolution::DefaultDepthwiseRows(d, profile);
  };
  EXPECT_EQ(rows(112, 1), 8);
  EXPECT_EQ(rows(56, 1), 14);
  EXPECT_EQ(rows(28, 1), 14);
  EXPECT_EQ(rows(14, 1), 14);
  EXPECT_EQ(rows(7, 1), 7);
  EXPECT_EQ(rows(112, 2), 8);  // 56 output rows
  EXPECT_EQ(rows(56, 2), 7);   // 28
  EXPECT_EQ(rows(14, 2), 7);
  EXPECT_EQ(rows(17, 1), 8);   // 17: no divisor in [4, 14]
  EXPECT_EQ(rows(5, 1), 5);
  EXPECT_EQ(DepthwiseRowDefaults()[1].config.ToString(),
            "rows: a divisor of the output height in [4, 14], else 8");
  // Where per-lane loads are expensive (llvmpipe): blocks of 2 to 4 rows.
  TargetProfile llvmpipe;
  llvmpipe.lane_loads_expensive = true;
  EXPECT_EQ(rows(112, 1, llvmpipe), 4);
  EXPECT_EQ(rows(14, 1, llvmpipe), 2);
  EXPECT_EQ(rows(7, 1, llvmpipe), 7);
  EXPECT_EQ(rows(112, 2, llvmpipe), 4);
}

// The int8 depthwise byte-quad form by default only where the quads run in a helper, and only on
// outputs whose 16-column vectors are at most a fifth empty: MobileNet's 14, 28, 56 and 112
// columns, not 7 (9 of 16 lanes empty).
TEST(ConvFamilies, DepthwiseQuadDefaultsTakeWideEnoughOutputs) {
  TargetProfile quads;
  quads.cpu_vectors = true;
  quads.byte_quad_products = true;
  auto takes = [](const TargetProfile& p, int width, int stride) {
    ConvDesc d;
    d.type = DataType::kInt8Q;
    d.channels = d.out_channels = d.groups = 8;
    d.height = d.width = width;
    d.kernel_h = d.kernel_w = 3;
    d.pad_h = d.pad_w = 1;
    d.stride_h = d.stride_w = stride;
    return DefaultRowFor(DepthwiseQuadDefaults(), "conv_dw", p, d).config;
  };
  for (int w : {14, 28, 56, 112}) EXPECT_TRUE(takes(quads, w, 1)) << w;
  EXPECT_TRUE(takes(quads, 112, 2));
  EXPECT_TRUE(takes(quads, 28, 2));
  EXPECT_FALSE(takes(quads, 7, 1));
  EXPECT_FALSE(takes(quads, 14, 2));  // 7 output columns
  TargetProfile cpu;
  cpu.cpu_vectors = true;
  EXPECT_FALSE(takes(cpu, 56, 1));
}

TEST(ConvFamilies, DefaultsTablesEndInARowServingEveryDevice) {
  ExpectRowsWithProvenance(DirectConvDefaults(), "conv");
  ExpectRowsWithProvenance(DirectShapeDefaults(), "conv");
  EXPECT_TRUE(DirectShapeDefaults().back().serves(TargetProfile{}, ConvDesc{}));
  ExpectRowsWithProvenance(PointwiseDefaults(), "conv_pw");
  ExpectRowsWithProvenance(StridedPointwiseDefaults(), "conv_pw");
  ExpectRowsWithProvenance(ConvGemmDefaults(), "conv_gemm");
  ExpectRowsWithProvenance(DepthwiseRowDefaults(), "conv_dw");
  ExpectRowsWithProvenance(DepthwiseQuadDefaults(), "conv_dw");
  ExpectRowsWithProvenance(WinogradDefaults(), "conv_wino");
  for (bool lanes : {false, true})
    for (bool dot : {false, true}) {
      TargetProfile p;
      p.lane_defaults = lanes;
      p.cpu_vectors = !lanes;
      p.dot_product = dot;
      for (DataType t : kAllDataTypes)
        EXPECT_NO_THROW(DefaultRowFor(DirectConvDefaults(), "conv", p, t));
      ConvDesc d;
      EXPECT_NO_THROW(DefaultRowFor(PointwiseDefaults(), "conv_pw", p, d));
      EXPECT_NO_THROW(DefaultRowFor(ConvGemmDefaults(), "conv_gemm", p, d));
    }
  EXPECT_TRUE(DirectConvDefaults().back().serves(TargetProfile{}, DataType::kInt16Q));
  EXPECT_TRUE(PointwiseDefaults().back().serves(TargetProfile{}, ConvDesc{}));
  EXPECT_TRUE(ConvGemmDefaults().back().serves(TargetProfile{}, ConvDesc{}));
  EXPECT_TRUE(DepthwiseRowDefaults().back().serves(TargetProfile{}, ConvDesc{}));
  EXPECT_TRUE(DepthwiseQuadDefaults().back().serves(TargetProfile{}, ConvDesc{}));
  // A table without a row for the device is a library bug, named.
  const DefaultsTable<int, DataType> empty;
  try {
    DefaultRowFor(empty, "nothing", TargetProfile{}, DataType::kFloat32);
    ADD_FAILURE() << "no error for a table without a row";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing"), std::string::npos) << e.what();
  }
}

TEST(ConvFamilies, DirectDefaultsPerDeviceClass) {
  DeviceInfo cpu;  // an OpenCL CPU runtime (PoCL, Intel's)
  DeviceInfo llvmpipe;
  llvmpipe.work_items_in_simd_lanes = llvmpipe.lane_loads_expensive = true;
  DeviceInfo gpu;
  gpu.is_gpu = gpu.dot_product = true;
  // fp32 on a CPU runtime: 4 × 16 channels × 4 pixels where vectors of 16 floats are whole
  // registers (PoCL at AVX-512), else 4 × 8 × 3.
  TargetProfile cpu_profile = TargetProfile::Of(cpu);
  cpu_profile.sixteen_lane_registers = true;
  EXPECT_EQ(DefaultRowFor(DirectConvDefaults(), "conv", cpu_profile, DataType::kFloat32).config,
            (ConvConfig{1, 4, 4, 16}));
  cpu_profile.sixteen_lane_registers = false;
  EXPECT_EQ(DefaultRowFor(DirectConvDefaults(), "conv", cpu_profile, DataType::kFloat32).config,
            (ConvConfig{1, 4, 3, 8}));
  DeviceInfo intel = cpu;
  intel.wide_tiles_slow_at_256_bits = true;
  EXPECT_FALSE(TargetProfile::Of(intel).sixteen_lane_registers);
  EXPECT_EQ(DefaultConvConfig(intel, DataType::kFloat32), (ConvConfig{1, 4, 3, 8}));
  // int8q in 16-bit pairs: 4 × 8 channels × 3 pixels, × 2 pixels where 16 registers are all
  // there are (AVX2: 4 × 3 spilled an accumulator).
  cpu_profile.half_register_tiles = false;
  EXPECT_EQ(DefaultRowFor(DirectConvDefaults(), "conv", cpu_profile, DataType::kInt8Q).config,
            (ConvConfig{1, 4, 3, 8}));
  cpu_profile.half_register_tiles = true;
  EXPECT_EQ(DefaultRowFor(DirectConvDefaults(), "conv", cpu_profile, DataType::kInt8Q).config,
            (ConvConfig{1, 4, 2, 8}));
  EXPECT_EQ(DefaultRowFor(DirectConvDefaults(), "conv", cpu_profile, DataType::kFloat32).config,
            (ConvConfig{1, 4, 3, 8}));
  EXPECT_EQ(DefaultConvConfig(cpu, DataType::kInt16Q), (ConvConfig{1, 2, 2, 8}));
  EXPECT_EQ(DefaultConvConfig(llvmpipe, DataType::kInt8Q), (ConvConfig{1, 2, 6, 8}));
  EXPECT_EQ(DefaultConvConfig(llvmpipe, DataType::kInt16Q), (ConvConfig{32, 2, 4, 1}));
  EXPECT_EQ(DefaultConvConfig(gpu, DataType::kInt8Q), (ConvConfig{32, 2, 4, 1, 4}));
  EXPECT_EQ(DefaultConvConfig(gpu, DataType::kFloat16), (ConvConfig{32, 2, 4, 1}));
}

// fp32 plane-form 1×1 layers take 4 channels × 2 vectors of 8 pixels where the profile asks for
// half-register tiles (a CPU runtime at a 256-bit level: MPCAFFE_ISA below AVX-512), else
// 8 × one vector of 16; strided layers on their subsampled planes likewise follow. int8q there
// takes 6 channels × 2 vectors of 8 over one zip where the column fits, else 6 × 2 with a
// residual or a stride and 8 × 16 without.
TEST(ConvFamilies, PointwiseDefaultsFollowHalfRegisterTiles) {
  ConvDesc d;
  d.channels = d.out_channels = 64, d.height = d.width = 56;
  TargetProfile p;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, p).ToString(), "oc8 px1 v16");
  p.half_register_tiles = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, p).ToString(), "oc4 px2 v8");
  ConvDesc strided = d;  // 28 × 28 subsampled
  strided.stride_h = strided.stride_w = 2;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(strided, p).ToString(), "oc4 px2 v8");
  ConvDesc q = d;
  q.type = DataType::kInt8Q;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(q, p).ToString(), "oc6 px2 v8 ob64");
  q.channels = 2049;  // its zipped column past kMaxZippedColumnBytes
  EXPECT_EQ(Convolution::DefaultPointwiseTile(q, p).ToString(), "oc8 px1 v16");
  q.residual = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(q, p).ToString(), "oc6 px2 v8");
  q.residual = false;
  q.stride_h = q.stride_w = 2;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(q, p).ToString(), "oc6 px2 v8");
  EXPECT_EQ(Convolution::DefaultPointwiseTile(q, TargetProfile{}).ToString(), "oc8 px1 v16");
  // A 7×7 plane at AVX2: one vector of 8 pixels (56 lanes for 49, not 64).
  ConvDesc q7 = d;
  q7.type = DataType::kInt8Q;
  q7.height = q7.width = 7;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(q7, p).ToString(), "oc8 px1 v8 ob64");
  q7.residual = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(q7, p).ToString(), "oc8 px1 v8 ob64");
  q7.channels = 2049;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(q7, p).ToString(), "oc6 px2 v8");
  q7.residual = false;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(q7, p).ToString(), "oc10 px1 v8");
  EXPECT_EQ(Convolution::DefaultPointwiseTile(q7, TargetProfile{}).ToString(), "oc8 px1 v16");
  // fp32 on a CPU runtime at AVX-512 (Intel's runtime): 8 channels × 2 vectors of 16.
  TargetProfile avx512;
  avx512.cpu_vectors = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, avx512).ToString(), "oc8 px2 v16");
  // Where 16 floats are a whole register (PoCL at AVX-512): 12 channels × 2 vectors on
  // planes up to 14 × 14 where blocks of 12 leave at most 1/32 of the channels padding, 8 × 2
  // on larger planes and where they would pad more (64 channels: 72 computed).
  TargetProfile wide;
  wide.cpu_vectors = wide.sixteen_lane_registers = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, wide).ToString(), "oc8 px2 v16");
  ConvDesc plane14 = d;
  plane14.height = plane14.width = 14;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(plane14, wide).ToString(), "oc8 px2 v16");
  for (const int o : {96, 512}) {  // a multiple of 12; 516 for 512 (4 padding channels)
    plane14.out_channels = o;
    EXPECT_EQ(Convolution::DefaultPointwiseTile(plane14, wide).ToString(), "oc12 px2 v16") << o;
  }
  plane14.height = plane14.width = 7;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(plane14, wide).ToString(), "oc12 px2 v16");
  plane14.out_channels = 160;  // 168 computed: 1/20 padding
  EXPECT_EQ(Convolution::DefaultPointwiseTile(plane14, wide).ToString(), "oc8 px2 v16");
  // An int8q first layer at stride 2 (the row form): 16 float lanes only in whole registers;
  // pairs of window columns (kx2) at AVX2 and on Intel's runtime, at either stride.
  ConvDesc first;
  first.type = DataType::kInt8Q;
  first.channels = 3, first.out_channels = 32, first.height = first.width = 224;
  first.kernel_h = first.kernel_w = 3, first.stride_h = first.stride_w = 2;
  first.pad_h = first.pad_w = 1;
  TargetProfile cpu;
  cpu.cpu_vectors = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first, cpu).ToString(), "oc8 px1 v16");
  cpu.half_register_tiles = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first, cpu).ToString(), "oc8 px1 v8 kx2");
  cpu.strided_byte_rows_slow = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first, cpu).ToString(), "oc16 px1 v8 kx2");
  cpu.half_register_tiles = false;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first, cpu).ToString(), "oc16 px1 v8 kx2");
  first.stride_h = first.stride_w = 1;  // stride 1 too; PoCL above AVX2: the float form
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first, cpu).ToString(), "oc16 px1 v8 kx2");
  TargetProfile pocl_cpu;
  pocl_cpu.cpu_vectors = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first, pocl_cpu).ToString(), "oc8 px1 v16");
  pocl_cpu.half_register_tiles = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first, pocl_cpu).ToString(), "oc8 px1 v8 kx2");
  // An fp32 first layer at stride 2: 16 channels × the even lanes of 32 columns at the AVX-512
  // level on either CPU runtime, 8 × 8 at AVX2; at stride 1 16 lanes only above AVX2.
  ConvDesc first32 = first;
  first32.type = DataType::kFloat32;
  first32.stride_h = first32.stride_w = 2;
  TargetProfile native;
  native.cpu_vectors = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first32, native).ToString(), "oc16 px1 v16");
  native.strided_byte_rows_slow = true;  // Intel's runtime: the same tile
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first32, native).ToString(), "oc16 px1 v16");
  TargetProfile avx2 = native;
  avx2.half_register_tiles = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first32, avx2).ToString(), "oc8 px1 v8");
  first32.stride_h = first32.stride_w = 1;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first32, native).ToString(), "oc8 px1 v16");
  EXPECT_EQ(Convolution::DefaultPointwiseTile(first32, avx2).ToString(), "oc8 px1 v8");
  ConvDesc small = d;  // 9 pixels: the 8-pixel row whatever the profile
  small.height = small.width = 3;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(small, p).ToString(), "oc8 px1 v8");

  // Strided fp32 1×1 layers keep the direct kernel there (ChoosePointwiseTile); int8q's take
  // the plane form on their subsampled planes.
  EXPECT_FALSE(DefaultRowFor(StridedPointwiseDefaults(), "conv_pw", p, strided).config);
  EXPECT_TRUE(DefaultRowFor(StridedPointwiseDefaults(), "conv_pw", p, q).config);
  EXPECT_TRUE(
      DefaultRowFor(StridedPointwiseDefaults(), "conv_pw", TargetProfile{}, strided).config);

  // Every CPU runtime below the AVX-512 level (16 registers of 256 bits); never a GPU.
  DeviceInfo pocl, intel, gpu;
  intel.wide_tiles_slow_at_256_bits = true;
  gpu.is_gpu = true;
  for (HostIsa isa : AllHostIsas()) {
    if (CpuHostIsa() < isa) continue;
    ScopedSettings level([&](Settings& s) { s.isa = Name(isa); });
    for (const DeviceInfo& cpu : {pocl, intel})
      EXPECT_EQ(TargetProfile::Of(cpu).half_register_tiles, isa < HostIsa::kAvx512) << Name(isa);
    EXPECT_FALSE(TargetProfile::Of(gpu).half_register_tiles) << Name(isa);
  }
}

TEST(ConvFamilies, ConvGemmIsNoDefaultForFirstLayers) {
  ConvDesc conv1;  // AlexNet's conv1: the direct kernel is faster or level on both CPU runtimes
  conv1.type = DataType::kInt8Q;
  conv1.channels = 3, conv1.height = conv1.width = 227, conv1.out_channels = 96;
  conv1.kernel_h = conv1.kernel_w = 11, conv1.stride_h = conv1.stride_w = 4;
  TargetProfile cpu, lanes, avx2, quads;
  lanes.lane_defaults = true;
  avx2.cpu_vectors = avx2.half_register_tiles = true;
  quads.cpu_vectors = quads.byte_quad_products = true;
  ConvDesc fp32 = conv1;
  fp32.type = DataType::kFloat32;
  for (const TargetProfile& p : {cpu, lanes, avx2, quads})
    for (const ConvDesc& d : {conv1, fp32})
      EXPECT_FALSE(DefaultRowFor(ConvGemmDefaults(), "conv_gemm", p, d).config) << d.ToString();
}

// Winograd F(2×2) by default on the CPU runtimes (PoCL and Intel's) at every level, int8 where
// they have no byte quads (at AVX2 not on outputs of 64 pixels or fewer); off on devices of
// lanes (GPUs, llvmpipe); never F(4×4) (its rounding).
TEST(ConvFamilies, WinogradDefaultsOnCpuRuntimes) {
  ConvDesc d;
  d.channels = d.out_channels = 64, d.height = d.width = 56;
  d.kernel_h = d.kernel_w = 3, d.pad_h = d.pad_w = 1;
  DeviceInfo pocl, intel, gpu, llvmpipe;
  intel.wide_tiles_slow_at_256_bits = intel.strided_byte_rows_slow = true;
  gpu.is_gpu = true;
  llvmpipe.work_items_in_simd_lanes = llvmpipe.lane_loads_expensive = true;
  for (const DeviceInfo& cpu : {pocl, intel}) {
    EXPECT_TRUE(TargetProfile::Of(cpu).winograd_launches);
    // 8 output channels × 16 tiles in 32 registers; 6 × 16 in 16 (half-register tiles).
    TargetProfile wide = TargetProfile::Of(cpu), half = wide;
    wide.half_register_tiles = false;
    half.half_register_tiles = true;
    half.byte_quad_products = wide.byte_quad_products = false;
    const WinogradChoice chosen = DefaultRowFor(WinogradDefaults(), "conv_wino", wide, d).config;
    ASSERT_TRUE(chosen);
    EXPECT_EQ(chosen->ToString(), "m2 oc8 px1 v16");
    const WinogradChoice at_avx2 = DefaultRowFor(WinogradDefaults(), "conv_wino", half, d).config;
    ASSERT_TRUE(at_avx2);
    EXPECT_EQ(at_avx2->ToString(), "m2 oc6 px1 v16");
    EXPECT_EQ(WinogradCandidates(*chosen).size(), WinogradCandidates(*at_avx2).size());
    for (const WinogradConfig& c : WinogradCandidates(*chosen)) EXPECT_EQ(c.m, 2) << c.ToString();
    // int8: without byte quads at either level, in vectors of 8 tiles; never with them.
    ConvDesc q = d;
    q.type = DataType::kInt8Q;
    for (TargetProfile* level : {&wide, &half}) {
      const WinogradChoice int8 = DefaultRowFor(WinogradDefaults(), "conv_wino", *level, q).config;
      ASSERT_TRUE(int8);
      EXPECT_EQ(int8->ToString(), "m2 oc6 px2 v8");
      for (const WinogradConfig& c : WinogradCandidates(*int8, q.type))
        EXPECT_TRUE(WinogradConfigFits(q, c)) << c.ToString();
      // 7×7 outputs (ResNet-50's res5): the direct kernel at AVX2, the tiles at AVX-512.
      ConvDesc small = q;
      small.height = small.width = 7;
      EXPECT_EQ(bool(DefaultRowFor(WinogradDefaults(), "conv_wino", *level, small).config),
                level == &wide);
      small.height = small.width = 9;  // 81 outputs
      EXPECT_TRUE(DefaultRowFor(WinogradDefaults(), "conv_wino", *level, small).config);
      level->byte_quad_products = true;
      EXPECT_FALSE(DefaultRowFor(WinogradDefaults(), "conv_wino", *level, q).config);
    }
  }
  for (const DeviceInfo& lanes : {gpu, llvmpipe})
    EXPECT_FALSE(
        DefaultRowFor(WinogradDefaults(), "conv_wino", TargetProfile::Of(lanes), d).config);
}

TEST(ConvFamilies, FamiliesInOrderNamedAsTheRegistryNamesTheirChoices) {
  std::vector<std::string> names;
  for (const ConvForwardFamily& f : ConvForwardFamilies()) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv_dw", "conv_pw", "conv_gemm", "conv_wino", "conv"}));
  EXPECT_EQ(ConvForwardFamilies().back().family, ConvFamily::kDirect);
  std::set<std::string> choices;
  for (const KernelFamilyEntry& e : KernelFamilyRegistry())
    for (const KernelChoiceName& c : e.choices) choices.insert(c.name);
  for (const std::string& n : names) EXPECT_TRUE(choices.count(n)) << n;
  // The direct family applies to any description on any device; im2col + GEMM not where the
  // profile does not offer it (CUDA).
  TargetProfile cuda = TargetProfile::Of([] {
    DeviceInfo i;
    i.backend = Backend::kCuda;
    i.is_gpu = true;
    return i;
  }());
  EXPECT_FALSE(cuda.conv_gemm);
  EXPECT_EQ(cuda.vendor_blas, VendorBlas::kCuBLAS);
  EXPECT_EQ(TargetProfile::Of(DeviceInfo{}).vendor_blas, VendorBlas::kCLBlast);
  ConvDesc d;
  d.type = DataType::kFloat32;
  d.kernel_h = d.kernel_w = 3;
  const ConvQuant q;
  EXPECT_TRUE(ConvForwardFamilyOf(ConvFamily::kDirect).applies(d, q, cuda));
  EXPECT_FALSE(ConvForwardFamilyOf(ConvFamily::kGemm).applies(d, q, cuda));
  EXPECT_TRUE(
      ConvForwardFamilyOf(ConvFamily::kGemm).applies(d, q, TargetProfile::Of(DeviceInfo{})));
}

}  // namespace
}  // namespace mpcaffe::libdnn
