// tests/libdnn/defaults_tables_test.cc — the GEMM's, the pointwise launch's, pooling's and LRN's
// defaults tables (libdnn/gemm_config.h, conv_families.h, pool.h, lrn.h) and pooling's and LRN's
// forward families: every row says where it came from, each table ends in a row serving every
// device, the rows give each device class its configuration, and the first family that applies
// is the one each device and description runs. No kernel is compiled here.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "libdnn/conv_families.h"
#include "libdnn/defaults_listing.h"
#include "libdnn/gemm.h"
#include "libdnn/gemm_config.h"
#include "libdnn/kernel_families.h"
#include "libdnn/lrn.h"
#include "libdnn/pool.h"
#include "tests/testing/defaults_tables.h"

namespace mpcaffe::libdnn {
namespace {

using testing::ExpectRowsWithProvenance;

TEST(DefaultsTables, EveryRowHasProvenanceAndTheLastServesEveryDevice) {
  ExpectRowsWithProvenance(GemmDefaults(), "gemm");
  ExpectRowsWithProvenance(GemmOrderDefaults(), "gemm order");
  ExpectRowsWithProvenance(PointwiseSpreadDefaults(), "conv_pw spread");
  ExpectRowsWithProvenance(PointwisePrefetchDefaults(), "conv_pw prefetch");
  EXPECT_TRUE(PointwisePrefetchDefaults().back().serves(TargetProfile{}, ConvDesc{}));
  ExpectRowsWithProvenance(PoolVectorMaxDefaults(), "pool_vector_max");
  for (const LrnForwardFamily& f : LrnForwardFamilies()) {
    ExpectRowsWithProvenance(f.launch(), f.name);
    EXPECT_TRUE(f.launch().back().serves(TargetProfile{}, LrnDesc{})) << f.name;
  }
  for (const PoolForwardFamily& f : PoolForwardFamilies())
    if (f.launch) ExpectRowsWithProvenance(f.launch(), f.name);
  GemmDesc g;
  g.M = g.N = g.K = 8;
  EXPECT_TRUE(GemmDefaults().back().serves(TargetProfile{}, g));
  EXPECT_TRUE(GemmOrderDefaults().back().serves(TargetProfile{}, g));
  EXPECT_TRUE(PointwiseSpreadDefaults().back().serves(TargetProfile{}, ConvDesc{}));
  EXPECT_TRUE(PoolVectorMaxDefaults().back().serves(TargetProfile{}, PoolDesc{}));
  EXPECT_TRUE(PoolPlaneMaxDefaults().back().serves(TargetProfile{}, PoolDesc{}));
}

GemmDesc Shape(DataType t, int M, int N, int K, bool trans_b, WeightOperand w) {
  GemmDesc d;
  d.type = d.out_type = t;
  d.M = M, d.N = N, d.K = K, d.trans_b = trans_b, d.weights = w;
  return d;
}

TEST(DefaultsTables, GemmDefaultsPerDeviceClass) {
  DeviceInfo cpu;  // an OpenCL CPU runtime
  DeviceInfo gpu;
  gpu.is_gpu = true;
  DeviceInfo dp4a = gpu;
  dp4a.backend = Backend::kCuda;
  dp4a.dot_product = true;
  auto config = [](const DeviceInfo& d, const GemmDesc& g) {
    return DefaultGemmConfig(d, g).ToString();
  };
  // conv1 as a GEMM (weights A, M < N): the CPU register tile walking M tiles first.
  const GemmDesc conv1 = Shape(DataType::kFloat32, 96, 3025, 363, false, WeightOperand::kA);
  EXPECT_EQ(config(cpu, conv1), "outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=1 kp=1 lm=0");
  GemmDesc conv1q = conv1;
  conv1q.type = conv1q.out_type = DataType::kInt8Q;
  EXPECT_EQ(config(cpu, conv1q), "outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=1 kp=2 lm=0");
  EXPECT_EQ(config(gpu, conv1q), "outer tm=4 tn=4 vw=1 wg=64 ku=1 mf=0 kp=1 lm=0");
  EXPECT_EQ(config(dp4a, conv1q), "outer tm=4 tn=4 vw=1 wg=64 ku=1 mf=0 kp=4 lm=0");
  // A batch-1 inner product (weights B transposed, M = 1): vectors along K on CPUs, a tile one
  // row tall on CPUs and where work-items are lanes.
  const GemmDesc fc6 = Shape(DataType::kFloat32, 1, 4096, 9216, true, WeightOperand::kB);
  EXPECT_EQ(config(cpu, fc6), "dot tm=1 tn=8 vw=8 wg=1 ku=1 mf=0 kp=1 lm=0");
  EXPECT_EQ(config(gpu, fc6), "dot tm=1 tn=2 vw=1 wg=64 ku=1 mf=0 kp=1 lm=0");
  // int16 with K below 64 at a batch (the 784-30-10 net's output layer): 4 x 4 dot tiles, so
  // that dimension 0 has work-items to pack; K of 64 and more: the split pair products, with
  // neighbouring work-items on neighbouring activation rows (mf = 1), in 16 lanes where VNNI
  // runs in a helper and 4 weight rows at half the registers.
  const GemmDesc out16 = Shape(DataType::kInt16Q, 10000, 10, 30, true, WeightOperand::kB);
  EXPECT_EQ(config(cpu, out16), "dot tm=4 tn=4 vw=4 wg=1 ku=1 mf=0 kp=1 lm=0");
  GemmDesc hidden16 = out16;
  hidden16.N = 30, hidden16.K = 784;
  TargetProfile plain = TargetProfile::Of(cpu);
  plain.byte_quad_products = plain.half_register_tiles = false;
  EXPECT_EQ(DefaultRowFor(GemmDefaults(), "gemm", plain, hidden16).config.ToString(),
            "dot tm=1 tn=8 vw=8 wg=1 ku=1 mf=1 kp=2 lm=0");
  TargetProfile vnni = plain, half = plain;
  vnni.byte_quad_products = true;
  half.half_register_tiles = true;
  EXPECT_EQ(DefaultRowFor(GemmDefaults(), "gemm", vnni, hidden16).config.ToString(),
            "dot tm=1 tn=8 vw=16 wg=1 ku=1 mf=1 kp=2 lm=0");
  EXPECT_EQ(DefaultRowFor(GemmDefaults(), "gemm", half, hidden16).config.ToString(),
            "dot tm=1 tn=4 vw=8 wg=1 ku=1 mf=1 kp=2 lm=0");
  // At a batch of fewer activation rows than weight rows, neighbouring work-items walk the
  // activation rows (mf = 1) and share each weight row; where the activation rows are the
  // more (the 784-30-10 net's hidden layer in fp32) the tile's own order stays.
  GemmDesc fc6_16 = fc6;
  fc6_16.M = 16;
  EXPECT_EQ(DefaultGemmConfig(cpu, fc6_16).mf, 1);
  GemmDesc fc6_16q = fc6_16;
  fc6_16q.type = fc6_16q.out_type = DataType::kInt8Q;
  EXPECT_EQ(DefaultGemmConfig(cpu, fc6_16q).mf, 1);
  GemmDesc hidden32 = Shape(DataType::kFloat32, 10000, 30, 784, true, WeightOperand::kB);
  EXPECT_EQ(DefaultGemmConfig(cpu, hidden32).mf, 0);
  EXPECT_EQ(DefaultGemmConfig(gpu, fc6_16).mf, 0);
  GemmDesc fc6_2 = fc6;
  fc6_2.M = 2;
  EXPECT_EQ(config(gpu, fc6_2), "dot tm=2 tn=2 vw=1 wg=64 ku=1 mf=0 kp=1 lm=0");
  // 4-bit weights: their own kernel on a compiler with byte pair products; the outer tile on
  // one without (Intel's runtime) only while the activation columns are at most 4 × the rows,
  // the dot tile there never.
  GemmDesc w4 = conv1q;
  w4.weight_bits = 4, w4.weights_signed = true, w4.weight_zero = false;
  EXPECT_EQ(config(cpu, w4), "outer tm=4 tn=4 vw=8 wg=1 ku=1 mf=1 kp=8 lm=0");
  DeviceInfo no_pairs = cpu;
  no_pairs.byte_pair_products = false;
  EXPECT_EQ(config(no_pairs, w4), "outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=1 kp=2 lm=0");
  // Matrix × vector (the dot tile): 4 weight rows against the one column, in byte quads where
  // the device runs them, byte pairs where it makes them one instruction, else the int8 tile.
  GemmDesc mv = Shape(DataType::kInt8Q, 4096, 1, 9216, false, WeightOperand::kA);
  mv.weight_bits = 4, mv.weights_signed = true, mv.weight_zero = false;
  TargetProfile quads = TargetProfile::Of(cpu);  // VNNI in a helper, whatever this host has
  quads.byte_quad_products = true;
  EXPECT_EQ(DefaultRowFor(GemmDefaults(), "gemm", quads, mv).config.ToString(),
            "dot tm=4 tn=1 vw=16 wg=1 ku=1 mf=0 kp=8 lm=0");
  EXPECT_EQ(config(cpu, mv), "dot tm=4 tn=1 vw=8 wg=1 ku=1 mf=0 kp=8 lm=0");
  EXPECT_EQ(config(no_pairs, mv), "dot tm=4 tn=1 vw=8 wg=1 ku=1 mf=0 kp=2 lm=0");
}

TEST(DefaultsTables, LaunchDefaultsPerDeviceClass) {
  TargetProfile cpu;
  cpu.cpu_vectors = true;
  TargetProfile lanes;
  lanes.lane_defaults = true;
  EXPECT_EQ(DefaultRowFor(PointwiseSpreadDefaults(), "conv_pw", cpu, ConvDesc{}).config, 8);
  EXPECT_EQ(DefaultRowFor(PointwiseSpreadDefaults(), "conv_pw", lanes, ConvDesc{}).config, 0);
  LrnDesc plane;
  plane.height = plane.width = 13;
  const LrnForwardFamily& vector = LrnForwardFamilyFor(plane, cpu);
  EXPECT_STREQ(vector.name, "lrn_vector");
  EXPECT_EQ(vector.lanes, 8);
  EXPECT_EQ(DefaultRowFor(vector.launch(), vector.name, cpu, plane).config.width, 8);
  TargetProfile wide = cpu;  // 16 floats in a register (PoCL at AVX-512): 16 lanes
  wide.sixteen_lane_registers = true;
  EXPECT_STREQ(LrnForwardFamilyFor(plane, wide).name, "lrn_vector16");
  EXPECT_EQ(LrnForwardFamilyFor(plane, wide).lanes, 16);
  LrnDesc rows_of_15 = plane;  // fewer pixels than 16 lanes
  rows_of_15.height = 3, rows_of_15.width = 5;
  EXPECT_STREQ(LrnForwardFamilyFor(rows_of_15, wide).name, "lrn_vector");
  TargetProfile scalar_dialect = lanes;  // CUDA's dialect: no vector built-ins
  scalar_dialect.vector_builtins = false;
  const LrnForwardFamily& scalar = LrnForwardFamilyFor(plane, scalar_dialect);
  EXPECT_STREQ(scalar.name, "lrn");
  EXPECT_EQ(DefaultRowFor(scalar.launch(), scalar.name, cpu, plane).config.width,
            int(kLaunch1DLocalSize));
  LrnDesc narrow;  // fewer than 8 pixels a row: the scalar kernel
  narrow.height = narrow.width = 2;
  EXPECT_STREQ(LrnForwardFamilyFor(narrow, cpu).name, "lrn");
  PoolDesc pool1;
  pool1.channels = 96, pool1.height = pool1.width = 55;
  pool1.kernel_h = pool1.kernel_w = 3, pool1.stride_h = pool1.stride_w = 2;
  // fp32 and int8 3×3 stride-2 max pools: the column walk wherever the dialect has vector
  // built-ins; fp16 (half loads) the row form.
  EXPECT_STREQ(PoolForwardFamilyFor(pool1, cpu).name, "pool_walk_max");
  EXPECT_STREQ(PoolForwardFamilyFor(pool1, lanes).name, "pool_walk_max");
  EXPECT_STREQ(PoolForwardFamilyFor(pool1, scalar_dialect).name, "pool");
  PoolDesc half_pool = pool1;
  half_pool.type = DataType::kFloat16;
  EXPECT_STREQ(PoolForwardFamilyFor(half_pool, cpu).name, "pool_vector_max");
  PoolDesc wide_window = pool1;  // 5×5: the row form
  wide_window.kernel_h = wide_window.kernel_w = 5;
  EXPECT_STREQ(PoolForwardFamilyFor(wide_window, cpu).name, "pool_vector_max");
  PoolDesc average = pool1;
  average.method = PoolMethod::kAverage;
  EXPECT_STREQ(PoolForwardFamilyFor(average, cpu).name, "pool");
  PoolDesc pool5 = pool1;  // 6 outputs a row: one vector, its last 2 lanes unstored
  pool5.height = pool5.width = 13;
  EXPECT_STREQ(PoolForwardFamilyFor(pool5, cpu).name, "pool_walk_max");
  EXPECT_STREQ(PoolForwardFamilyFor(pool5, scalar_dialect).name, "pool");
  PoolDesc inception = pool5;  // 3×3 stride 1 padded: the plane keeps its size
  inception.type = DataType::kInt8Q, inception.height = inception.width = 14;
  inception.stride_h = inception.stride_w = inception.pad_h = inception.pad_w = 1;
  EXPECT_STREQ(PoolForwardFamilyFor(inception, cpu).name, "pool_plane_max");
  EXPECT_STREQ(PoolForwardFamilyFor(inception, scalar_dialect).name, "pool");
  inception.type = DataType::kFloat32;  // 14 outputs a row: a vector of 8 floats fills, the walk
  EXPECT_STREQ(PoolForwardFamilyFor(inception, cpu).name, "pool_walk_max");
  inception.height = inception.width = 7;  // rows under a vector: the plane form
  EXPECT_STREQ(PoolForwardFamilyFor(inception, cpu).name, "pool_plane_max");
  inception.type = DataType::kInt8Q, inception.height = inception.width = 28;  // 16 bytes fill
  EXPECT_STREQ(PoolForwardFamilyFor(inception, cpu).name, "pool_walk_max");
  inception.height = inception.width = 14;
  inception.type = DataType::kFloat16;  // half loads: the row form
  EXPECT_STREQ(PoolForwardFamilyFor(inception, cpu).name, "pool_vector_max");
  // A classifier's last pool (the window the whole plane): the whole-plane average on a CPU
  // runtime, in fp32 and the quantized types; fp16 (half loads) and other dialects the scalar.
  PoolDesc last = average;
  last.height = last.width = last.kernel_h = last.kernel_w = 7;
  last.stride_h = last.stride_w = 1, last.pad_h = last.pad_w = 0;
  for (DataType t : {DataType::kFloat32, DataType::kInt8Q, DataType::kInt16Q}) {
    last.type = t;
    EXPECT_STREQ(PoolForwardFamilyFor(last, cpu).name, "pool_plane_ave") << Name(t);
    EXPECT_STREQ(PoolForwardFamilyFor(last, scalar_dialect).name, "pool") << Name(t);
  }
  last.type = DataType::kFloat16;
  EXPECT_STREQ(PoolForwardFamilyFor(last, cpu).name, "pool");
  last.type = DataType::kFloat32, last.pad_h = 1;  // padded: windows of other sizes
  EXPECT_STREQ(PoolForwardFamilyFor(last, cpu).name, "pool");
  last.pad_h = 0, last.global = true, last.height = 13;
  EXPECT_STREQ(PoolForwardFamilyFor(last, cpu).name, "pool_plane_ave");
  EXPECT_EQ(DefaultRowFor(PoolVectorMaxDefaults(), "pool", cpu, PoolDesc{}).config.ToString(),
            "width=8 groups=1024");
  // int8 on a CPU runtime: a quarter of the groups; elsewhere, and fp32, the thousand.
  PoolDesc int8_pool = pool1;
  int8_pool.type = DataType::kInt8Q;
  EXPECT_EQ(DefaultRowFor(PoolVectorMaxDefaults(), "pool", cpu, int8_pool).config.ToString(),
            "width=8 groups=256");
  EXPECT_EQ(DefaultRowFor(PoolVectorMaxDefaults(), "pool", lanes, int8_pool).config.ToString(),
            "width=8 groups=1024");
  EXPECT_EQ(DefaultRowFor(PoolVectorMaxDefaults(), "pool", cpu, pool1).config.ToString(),
            "width=8 groups=1024");
}

// The printed listing (mpcaffe_defaults --markdown) holds every table's rows, each with its
// configuration and provenance.
TEST(DefaultsTables, ListingHoldsEveryTable) {
  const std::vector<DefaultsListingRow> rows = DefaultsListing();
  std::set<std::string> families;
  for (const DefaultsListingRow& r : rows) {
    families.insert(r.family);
    EXPECT_FALSE(r.config.empty()) << r.family << ": " << r.device_class;
    EXPECT_GT(r.provenance.size(), 10u) << r.family << ": " << r.device_class;
  }
  EXPECT_EQ(families, (std::set<std::string>{"gemm", "conv", "conv_pw", "conv_dw", "conv_gemm",
                                             "conv_wino", "pool_walk_max", "pool_plane_max",
                                             "pool_vector_max", "lrn_vector16", "lrn_vector",
                                             "lrn"}));
  EXPECT_EQ(rows.size(),
            GemmDefaults().size() + GemmOrderDefaults().size() + DirectConvDefaults().size() +
                DirectShapeDefaults().size() + PointwiseDefaults().size() +
                StridedPointwiseDefaults().size() + FirstLayerPointwiseDefaults().size() +
                PointwiseSpreadDefaults().size() + PointwisePrefetchDefaults().size() +
                DepthwiseRowDefaults().size() + DepthwiseQuadDefaults().size() +
                ConvGemmDefaults().size() + WinogradDefaults().size() +
                PoolVectorMaxDefaults().size() + PoolPlaneMaxDefaults().size() +
                PoolWalkMaxDefaults().size() +
                3);  // the LRN families' rows
  const std::string md = DefaultsMarkdown();
  EXPECT_EQ(md.rfind("| family | chooses | device class | default | measured by |\n", 0), 0u);
  size_t lines = 0;
  for (char c : md) lines += c == '\n';
  EXPECT_EQ(lines, rows.size() + 2);
  EXPECT_NE(md.find("`outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1 lm=0`"), std::string::npos) << md;
}

// Every kernel choice the registry names is a family row with a rule of application: the
// convolution's forward families, pooling's and LRN's, or the GEMM (which applies to every
// GemmDesc, its configuration from GemmDefaults).
TEST(DefaultsTables, EveryRegistryChoiceIsAFamilyRow) {
  std::set<std::string> rows = {"gemm"};
  for (const ConvForwardFamily& f : ConvForwardFamilies()) rows.insert(f.name);
  for (const PoolForwardFamily& f : PoolForwardFamilies()) rows.insert(f.name);
  for (const LrnForwardFamily& f : LrnForwardFamilies()) rows.insert(f.name);
  std::set<std::string> choices;
  for (const KernelFamilyEntry& e : KernelFamilyRegistry())
    for (const KernelChoiceName& c : e.choices) choices.insert(c.name);
  EXPECT_EQ(choices, rows);
}

}  // namespace
}  // namespace mpcaffe::libdnn
