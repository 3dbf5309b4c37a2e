// tests/oclgrind/kernel_sweep_test.cc — the generated GEMM (every candidate configuration of a
// CPU-, a GPU- and a CUDA-class device, local-memory tiles and 4-bit weights included),
// convolution (every candidate tile and input path, forward and fp32 backward), element-wise,
// conversion and quantizer kernels in every data type on tiny shapes against the host
// references. Written for scripts/oclgrind.sh (`make test-oclgrind`), which runs it under
// `oclgrind --data-races --check-api` and fails on any report; the shapes stay tiny because
// Oclgrind simulates every work-item. It runs on any device (MPCAFFE_DEVICE) as an ordinary test
// too, but the GEMM sweep builds ~1,400 kernel texts (~100 s under Oclgrind, well over half an
// hour of PoCL compiles), so it is not one of the ordinary CTest suites.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/datatype.h"
#include "device/device.h"
#include "layers/elementwise.h"
#include "libdnn/conv.h"
#include "libdnn/gemm.h"
#include "libdnn/gemm_config.h"
#include "quant/fixed_point.h"
#include "quant/int4.h"
#include "quant/quant_params.h"
#include "quant/quantizer.h"
#include "tests/testing/random_storage.h"
#include "tests/testing/sweep.h"
#include "device/settings.h"

namespace mpcaffe {
namespace {

using Bytes = std::vector<uint8_t>;
using libdnn::BufferRef;

std::string TypeName(const testing::TestParamInfo<DataType>& i) { return Name(i.param); }

std::shared_ptr<DeviceMemory> Upload(Device& dev, const Bytes& b) {
  auto m = dev.Allocate(std::max<size_t>(b.size(), 8));
  if (!b.empty()) dev.CopyToDevice(b.data(), m.get(), 0, b.size());
  return m;
}

Bytes Download(Device& dev, const DeviceMemory& m, size_t bytes) {
  Bytes b(bytes);
  if (bytes) dev.CopyToHost(&m, 0, b.data(), bytes);
  return b;
}

/// Storage of `n` elements of `t`: reals k/8, k in [−8, 8] for float types (exact in fp16, and
/// sums of their products are exact in fp32), uniform raw integers for quantized types
/// (`is_signed`: the signed range of the same width).
Bytes RandomStorage(DataType t, size_t n, bool is_signed, std::mt19937& rng) {
  Bytes b(n * SizeOf(t));
  std::uniform_int_distribution<int> eighths(-8, 8), raw(0, 65535);
  for (size_t i = 0; i < n; ++i) {
    if (t == DataType::kFloat32) {
      const float v = eighths(rng) / 8.0f;
      std::memcpy(b.data() + 4 * i, &v, 4);
    } else if (t == DataType::kFloat16) {
      const uint16_t h = FloatToHalf(eighths(rng) / 8.0f);
      std::memcpy(b.data() + 2 * i, &h, 2);
    } else if (t == DataType::kInt16Q) {
      const uint16_t v = static_cast<uint16_t>(raw(rng));
      std::memcpy(b.data() + 2 * i, &v, 2);
    } else {
      b[i] = static_cast<uint8_t>(raw(rng));
    }
  }
  (void)is_signed;  // the same bits, read as signed by the kernel
  return b;
}

/// Integer bias of `n` channels around ±`range` (int32 for int8q, int64 for int16q), or fp32.
Bytes RandomBias(DataType t, size_t n, double range, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-range, range);
  Bytes b(n * (t == DataType::kInt16Q ? 8 : 4));
  for (size_t i = 0; i < n; ++i) {
    if (t == DataType::kInt16Q) {
      const int64_t v = static_cast<int64_t>(u(rng));
      std::memcpy(b.data() + 8 * i, &v, 8);
    } else if (t == DataType::kInt8Q) {
      const int32_t v = static_cast<int32_t>(u(rng));
      std::memcpy(b.data() + 4 * i, &v, 4);
    } else {
      const float v = static_cast<float>(std::round(u(rng) * 8) / 8);
      std::memcpy(b.data() + 4 * i, &v, 4);
    }
  }
  return b;
}

float FloatAt(DataType t, const Bytes& b, size_t i) {
  if (t == DataType::kFloat16) {
    uint16_t h;
    std::memcpy(&h, b.data() + 2 * i, 2);
    return HalfToFloat(h);
  }
  float f;
  std::memcpy(&f, b.data() + 4 * i, 4);
  return f;
}

/// Counts elements of `n` of type `t` that differ: quantized bit-exact, floats within `tol`
/// relative (NaN equals NaN); reports the first few.
int Mismatches(DataType t, size_t n, const Bytes& got, const Bytes& want, double tol,
               const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    bool same;
    if (IsQuantized(t)) {
      same = std::memcmp(got.data() + i * SizeOf(t), want.data() + i * SizeOf(t), SizeOf(t)) == 0;
    } else {
      const float g = FloatAt(t, got, i), w = FloatAt(t, want, i);
      same = (std::isnan(g) && std::isnan(w)) ||
             std::fabs(double(g) - w) <= tol * std::max(1.0, std::fabs(double(w)));
    }
    if (!same && bad++ < 3) ADD_FAILURE() << what << ": element " << i << " of " << n << " differs";
  }
  return bad;
}

// ---- GEMM --------------------------------------------------------------------------------

/// A tiny problem with edge tiles everywhere: M, N not multiples of any tile, K two slabs of
/// GemmConfig::kLocalK and a partial one.
libdnn::GemmDesc TinyGemm(DataType t, bool k_contiguous) {
  libdnn::GemmDesc d;
  d.type = d.out_type = t;
  d.M = 9;
  d.N = 13;
  d.K = 37;
  d.bias = true;
  d.relu = true;
  // Weights as A (Caffe's convolution); K-contiguous operands (InnerProduct) for kDot.
  d.trans_b = k_contiguous;
  d.weights = k_contiguous ? libdnn::WeightOperand::kB : libdnn::WeightOperand::kA;
  if (IsQuantized(t)) {
    d.per_channel = true;
    d.weights_signed = k_contiguous;
    d.weight_zero = !d.weights_signed;
  }
  return d;
}

struct GemmProblem {
  libdnn::GemmDesc desc;
  libdnn::GemmQuant quant;
  Bytes a, b, c, bias;
};

GemmProblem MakeGemmProblem(const libdnn::GemmDesc& d, uint32_t seed) {
  std::mt19937 rng(seed);
  GemmProblem p;
  p.desc = d;
  const bool wa = d.weights == libdnn::WeightOperand::kA;
  const size_t na = size_t(d.trans_a ? d.K : d.M) * d.lda_or_packed();
  const size_t nb = size_t(d.trans_b ? d.N : d.K) * d.ldb_or_packed();
  p.a = RandomStorage(d.type, na, wa && d.weights_signed, rng);
  p.b = RandomStorage(d.type, nb, !wa && d.weights_signed, rng);
  p.c.assign(size_t(d.M) * d.ldc_or_packed() * SizeOf(d.out_type), 0);
  if (!IsQuantized(d.type)) {
    p.bias = RandomBias(d.type, d.channels(), 2.0, rng);
    return p;
  }
  const bool i8 = d.type == DataType::kInt8Q;
  const int64_t qmax = i8 ? 255 : 65535;
  std::uniform_int_distribution<int64_t> zero(0, qmax);
  p.quant.x_zero = static_cast<int32_t>(zero(rng));
  p.quant.w_zero = d.weight_zero ? static_cast<int32_t>(zero(rng)) : 0;
  p.quant.c_zero = static_cast<int32_t>(zero(rng));
  // The accumulator's typical size (√K·σ²) onto a quarter of the output range.
  const double sigma = (qmax + 1) / std::sqrt(12.0);
  const double typical = std::sqrt(double(d.K)) * sigma * sigma;
  std::uniform_real_distribution<double> jitter(0.5, 2.0);
  for (int i = 0; i < (d.per_channel ? d.channels() : 1); ++i) {
    const double m = (qmax / 4.0) / typical * jitter(rng);
    p.quant.multiplier.push_back(quant::QuantizeMultiplier(m));
    p.quant.scale.push_back(static_cast<float>(m));
  }
  p.bias = RandomBias(d.type, d.channels(), typical, rng);
  return p;
}

/// Runs `p` with `config` on `dev` (weight sums on the device for quantized types) and
/// expects the reference's C.
void ExpectGemm(Device& dev, const GemmProblem& p, const libdnn::GemmConfig& config) {
  const libdnn::GemmDesc& d = p.desc;
  SCOPED_TRACE(d.ToString() + " | " + config.ToString());
  Bytes want = p.c;
  libdnn::GemmReference(d, p.quant, p.a.data(), p.b.data(), want.data(), 1.0f, 0.0f, p.bias.data());
  auto a = Upload(dev, p.a), b = Upload(dev, p.b), c = Upload(dev, p.c), bias = Upload(dev, p.bias);
  libdnn::Gemm gemm(dev, d, p.quant, config);
  libdnn::GemmArgs args;
  args.a = BufferRef(a.get(), 0);
  args.b = BufferRef(b.get(), 0);
  args.c = BufferRef(c.get(), 0);
  args.bias = BufferRef(bias.get(), 0);
  std::shared_ptr<DeviceMemory> sums;
  if (IsQuantized(d.type)) {
    sums = dev.Allocate(size_t(d.channels()) * 8);
    gemm.ComputeWeightSums(d.weights == libdnn::WeightOperand::kA ? args.a : args.b,
                           BufferRef(sums.get(), 0));
    args.weight_sums = BufferRef(sums.get(), 0);
  }
  gemm.Run(args).Wait();
  const size_t n = size_t(d.M) * d.ldc_or_packed();
  EXPECT_EQ(Mismatches(d.out_type, n, Download(dev, *c, p.c.size()), want, 1e-5, "C"), 0);
}

/// Device classes whose candidate sets the sweep runs (whatever this device is): an OpenCL
/// CPU (wide vectors, one work-item per group, K pairs), an OpenCL GPU with 32 KiB of local
/// memory (work-groups of 32–128, lm = 1 tiles of vectors) and a CUDA device (vw = 1 tiles,
/// lm = 1 tiles of scalars: the same kernel body, spelled in this device's dialect).
std::vector<DeviceInfo> DeviceClasses(const Device& dev) {
  DeviceInfo cpu, gpu, cuda;
  cpu.is_gpu = false;
  gpu.is_gpu = true;
  gpu.local_mem_bytes = 32 * 1024;
  gpu.max_work_group_size = 1024;
  cuda.backend = Backend::kCuda;
  cuda.is_gpu = true;
  cuda.local_mem_bytes = 48 * 1024;
  cuda.max_work_group_size = 1024;
  return {dev.info(), cpu, gpu, cuda};
}

class GemmSweep : public testing::TestWithParam<DataType> {};

TEST_P(GemmSweep, EveryCandidateOfEveryDeviceClass) {
  Device& dev = DefaultDevice();
  int runs = 0, lm_runs = 0, candidates = 0;
  for (bool k_contiguous : {false, true}) {
    const GemmProblem p = MakeGemmProblem(TinyGemm(GetParam(), k_contiguous), 17 + k_contiguous);
    std::vector<libdnn::GemmConfig> seen;
    for (const DeviceInfo& info : DeviceClasses(dev))
      for (const libdnn::GemmConfig& c : libdnn::GemmCandidates(info, p.desc)) {
        if (!c.Supports(p.desc, dev.backend()) ||
            std::find(seen.begin(), seen.end(), c) != seen.end())
          continue;
        // lm = 1 within this device's local memory and work-group size.
        if (c.lm == 1 &&
            ((dev.info().local_mem_bytes && c.LocalBytes(p.desc) > dev.info().local_mem_bytes) ||
             (dev.info().max_work_group_size && size_t(c.wg) > dev.info().max_work_group_size)))
          continue;
        seen.push_back(c);
      }
    candidates += int(seen.size());
    // make test: a covering sample (every value of every field); make test-sweep: all.
    for (const libdnn::GemmConfig& c : test_support::SampleOf(libdnn::GemmConfig::Schema(), seen)) {
      ExpectGemm(dev, p, c);
      ++runs;
      lm_runs += c.lm;
    }
  }
  std::printf("%s: %d of %d GEMM configurations run, %d of them lm = 1\n", Name(GetParam()),
              runs, candidates, lm_runs);
  // Every class contributes: the CPU's vw = 8 tiles and one lm = 1 tile, the GPU's and CUDA's
  // work-groups of 32–128 with lm = 1 tiles (OpenCL devices have all of them).
  EXPECT_GE(candidates, dev.backend() == Backend::kOpenCL ? 100 : 20);
  EXPECT_GE(runs, test_support::ExhaustiveSweep() ? candidates : 8);
  EXPECT_GE(lm_runs, test_support::ExhaustiveSweep() ? 8 : 2);
}

TEST_P(GemmSweep, SmallWorkGroupsLayoutsAndPaddedStrides) {
  // lm = 1 with work-groups of 1, 2 × 1, 2 × 2, 4 × 2 and 8 × 8 (several elements per
  // work-item per slab), every transpose, padded leading dimensions, and α/β for floats.
  Device& dev = DefaultDevice();
  std::vector<libdnn::GemmConfig> configs;
  for (auto [tm, tn, vw, wg, ku, mf, lm] :
       {std::tuple{1, 1, 1, 1, 1, 0, 1}, std::tuple{3, 2, 1, 4, 2, 1, 1},
        std::tuple{2, 1, 4, 2, 1, 0, 1}, std::tuple{2, 2, 4, 8, 4, 0, 1},
        std::tuple{2, 2, 1, 64, 1, 1, 1}, std::tuple{2, 1, 16, 1, 1, 0, 1},
        std::tuple{3, 2, 1, 4, 2, 1, 0}, std::tuple{2, 1, 2, 8, 4, 0, 0}}) {
    libdnn::GemmConfig c;
    c.tm = tm, c.tn = tn, c.vw = vw, c.wg = wg, c.ku = ku, c.mf = mf, c.lm = lm;
    configs.push_back(c);
  }
  int runs = 0;
  for (int layout = 0; layout < 4; ++layout) {
    libdnn::GemmDesc d = TinyGemm(GetParam(), false);
    d.M = 11;
    d.N = 6;
    d.K = 17;
    d.trans_a = layout % 2 == 1;
    d.trans_b = layout / 2 == 1;
    d.weights = layout == 2 ? libdnn::WeightOperand::kB : libdnn::WeightOperand::kA;
    d.relu = layout != 3;
    d.lda = (d.trans_a ? d.M : d.K) + 2;
    d.ldb = (d.trans_b ? d.K : d.N) + 1;
    d.ldc = d.N + 3;
    if (IsQuantized(d.type)) {
      d.weights_signed = layout == 1;
      d.weight_zero = !d.weights_signed;
      d.per_channel = layout != 2;
      if (layout == 3) d.out_type = DataType::kFloat32;
    }
    const GemmProblem p = MakeGemmProblem(d, 40 + layout);
    for (const libdnn::GemmConfig& c : configs)
      if (c.Supports(d, dev.backend())) {
        ExpectGemm(dev, p, c);
        ++runs;
      }
  }
  EXPECT_GE(runs, 4 * 3);  // CUDA: the vw = 1 ones
}

TEST(GemmSweepInt8, PairsPackAWithManyColumnTiles) {
  // kp = 2 with weights A packed into pairs first (N ≥ 128 column tiles of 16) and odd K.
  Device& dev = DefaultDevice();
  libdnn::GemmConfig c;  // outer tm=6 tn=2 vw=8
  c.kp = 2;
  libdnn::GemmDesc d = TinyGemm(DataType::kInt8Q, false);
  d.M = 3;
  d.N = 130;
  d.K = 5;
  if (!c.Supports(d, dev.backend())) GTEST_SKIP() << "kp = 2 needs an OpenCL device";
  ExpectGemm(dev, MakeGemmProblem(d, 5), c);
}

// 4-bit weights (int8w4: GemmDesc::weight_bits 4, two weights per byte): every byte-pair candidate
// of every device class (a covering sample unless MPCAFFE_TEST_SWEEP=1) in both layouts the layers
// use (weights A, convolution; weights B transposed, inner product), K odd and past one 16-bit
// step of the pair sums, extreme values in one of the two.
TEST(GemmSweepInt4, EveryCandidateBothLayouts) {
  Device& dev = DefaultDevice();
  int runs = 0, byte_pairs = 0;
  for (bool weights_b : {false, true}) {
    libdnn::GemmDesc d = TinyGemm(DataType::kInt8Q, weights_b);
    d.weight_bits = 4;
    d.trans_a = false;
    d.trans_b = weights_b;
    d.weights_signed = true;
    d.weight_zero = false;
    d.K = 45;
    const bool extreme = weights_b;
    GemmProblem p = MakeGemmProblem(d, 61 + weights_b);
    std::mt19937 rng(7 + weights_b);
    std::uniform_int_distribution<int> w4(quant::kInt4Min, quant::kInt4Max), coin(0, 1);
    std::vector<int8_t> w8(size_t(d.channels()) * d.K);
    for (auto& v : w8) v = int8_t(extreme ? (coin(rng) ? quant::kInt4Max : quant::kInt4Min) : w4(rng));
    Bytes& packed = weights_b ? p.b : p.a;
    packed.assign(size_t(d.channels()) * quant::Int4RowBytes(size_t(d.K)), 0);
    quant::PackInt4(w8.data(), size_t(d.channels()), size_t(d.K), packed.data());
    if (extreme) {
      for (auto& v : weights_b ? p.a : p.b) v = 255;
      p.quant.x_zero = 0;
    }
    std::vector<libdnn::GemmConfig> seen;
    for (const DeviceInfo& info : DeviceClasses(dev))
      for (const libdnn::GemmConfig& c : libdnn::GemmCandidates(info, d))
        if (c.Supports(d, dev.backend()) && std::find(seen.begin(), seen.end(), c) == seen.end())
          seen.push_back(c);
    for (const libdnn::GemmConfig& c : test_support::SampleOf(libdnn::GemmConfig::Schema(), seen)) {
      ExpectGemm(dev, p, c);
      ++runs;
      byte_pairs += c.kp == libdnn::GemmConfig::kU8S4;
    }
  }
  std::printf("int8w4: %d GEMM configurations run, %d of them byte pairs\n", runs, byte_pairs);
  EXPECT_GE(runs, 2);
  if (dev.backend() == Backend::kOpenCL) {
    EXPECT_GE(byte_pairs, 2);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GemmSweep,
                         testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kInt16Q,
                                         DataType::kInt8Q),
                         TypeName);

// ---- Convolution -----------------------------------------------------------------------------

struct ConvShape {
  int n, c, h, w, o, k, stride, pad, dilation, groups;
};

libdnn::ConvDesc TinyConv(DataType t, const ConvShape& s, int index) {
  libdnn::ConvDesc d;
  d.type = t;
  d.batch = s.n, d.channels = s.c, d.height = s.h, d.width = s.w, d.out_channels = s.o;
  d.kernel_h = d.kernel_w = s.k;
  d.stride_h = d.stride_w = s.stride;
  d.pad_h = d.pad_w = s.pad;
  d.dilation_h = d.dilation_w = s.dilation;
  d.groups = s.groups;
  d.bias = true;
  d.relu = index % 2 == 0;
  d.weights_signed = IsQuantized(t) && index % 2 == 1;
  return d;
}

/// Zero points near the middle and multipliers that keep outputs mostly inside the range.
libdnn::ConvQuant TinyConvQuant(const libdnn::ConvDesc& d, std::mt19937& rng) {
  libdnn::ConvQuant q;
  if (!IsQuantized(d.type)) return q;
  const bool wide = d.type == DataType::kInt16Q;
  const double sigma = wide ? 18918.0 : 73.9;
  const double k = double(d.channels / d.groups) * d.kernel_h * d.kernel_w;
  std::uniform_int_distribution<int> zx(wide ? 30000 : 110, wide ? 36000 : 150);
  q.x_zero = zx(rng);
  q.c_zero = zx(rng);
  q.w_zero.assign(d.out_channels, 0);
  q.multiplier.assign(d.out_channels, {});
  for (int o = 0; o < d.out_channels; ++o) {
    q.w_zero[o] = d.weights_signed ? 0 : zx(rng);
    q.multiplier[o] =
        quant::QuantizeMultiplier((wide ? 12000.0 : 45.0) / (std::sqrt(k) * sigma * sigma));
  }
  return q;
}

// Groups, stride, dilation, padding, odd sizes, a 1×1 window (int8: channel pairs formed from
// bytes), 3×3 ones (int8: packed pair planes; int16: split pairs), more output channels than
// a work-group's tile, depthwise.
const ConvShape kConvShapes[] = {
    {2, 3, 7, 6, 5, 3, 1, 1, 1, 1},  {1, 4, 6, 7, 6, 3, 2, 1, 2, 2}, {2, 5, 4, 4, 3, 1, 1, 0, 1, 1},
    {1, 2, 3, 3, 70, 3, 1, 1, 1, 1},  // output channels past one work-group of every tile
    {1, 8, 5, 5, 8, 3, 1, 1, 1, 8},   // depthwise
};

class ConvSweep : public testing::TestWithParam<DataType> {};

TEST_P(ConvSweep, ForwardWithEveryCandidateTile) {
  Device& dev = DefaultDevice();
  const DataType t = GetParam();
  std::mt19937 rng(300 + int(t));
  std::vector<libdnn::ConvConfig> configs;
  for (const DeviceInfo& info : DeviceClasses(dev))
    for (const libdnn::ConvConfig& c : libdnn::ConvConfig::Candidates(info, t))
      if (c.Supports(dev.backend()) &&
          std::find(configs.begin(), configs.end(), c) == configs.end())
        configs.push_back(c);
  const size_t candidates = configs.size();
  configs = test_support::SampleOf(libdnn::ConvConfig::Schema(), configs);  // make test: covering
  int index = 0, runs = 0;
  for (const ConvShape& s : kConvShapes) {
    const libdnn::ConvDesc d = TinyConv(t, s, index++);
    const libdnn::ConvQuant quant = TinyConvQuant(d, rng);
    const Bytes x = RandomStorage(t, d.input_count(), false, rng);
    const Bytes w = RandomStorage(t, d.weight_count(), d.weights_signed, rng);
    const double k = double(d.channels / d.groups) * d.kernel_h * d.kernel_w;
    const Bytes bias = RandomBias(t, d.out_channels, IsQuantized(t) ? k * 500 : 2.0, rng);
    Bytes want(d.output_count() * SizeOf(t));
    libdnn::ConvForwardReference(d, quant, x.data(), w.data(), bias.data(), want.data());
    auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, bias);
    for (const libdnn::ConvConfig& c : configs) {
      SCOPED_TRACE(d.ToString() + " | " + c.ToString());
      libdnn::Convolution conv(dev, d, quant, c);
      auto ym = dev.Allocate(want.size());
      conv.SetWeights(BufferRef(wm.get(), 0));
      conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
      EXPECT_EQ(Mismatches(t, d.output_count(), Download(dev, *ym, want.size()), want,
                           t == DataType::kFloat16 ? 1e-3 : 1e-5, "output"),
                0);
      ++runs;
    }
  }
  EXPECT_GE(candidates, 5u);
  EXPECT_EQ(runs, int(std::size(kConvShapes) * configs.size()));
  EXPECT_GE(configs.size(), test_support::ExhaustiveSweep() ? candidates : 2u);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ConvSweep,
                         testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kInt16Q,
                                         DataType::kInt8Q),
                         TypeName);

TEST(ConvSweepDepthwise, EveryType) {
  // The depthwise kernel (one input and output channel per group), stride 1 and 2.
  Device& dev = DefaultDevice();
  std::mt19937 rng(10);
  int index = 0;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt16Q, DataType::kInt8Q}) {
    for (const ConvShape& s : {ConvShape{2, 3, 7, 9, 3, 3, 1, 1, 1, 3},
                               ConvShape{1, 4, 8, 6, 4, 3, 2, 1, 2, 4}}) {
      const libdnn::ConvDesc d = TinyConv(t, s, index++);
      SCOPED_TRACE(d.ToString());
      const libdnn::ConvQuant quant = TinyConvQuant(d, rng);
      const Bytes x = RandomStorage(t, d.input_count(), false, rng);
      const Bytes w = RandomStorage(t, d.weight_count(), d.weights_signed, rng);
      const Bytes bias = RandomBias(t, d.out_channels, IsQuantized(t) ? 4000 : 2.0, rng);
      Bytes want(d.output_count() * SizeOf(t));
      libdnn::ConvForwardReference(d, quant, x.data(), w.data(), bias.data(), want.data());
      auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, bias);
      libdnn::Convolution conv(dev, d, quant);
      ASSERT_TRUE(conv.forward_depthwise());
      auto ym = dev.Allocate(want.size());
      conv.SetWeights(BufferRef(wm.get(), 0));
      conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
      EXPECT_EQ(Mismatches(t, d.output_count(), Download(dev, *ym, want.size()), want,
                           t == DataType::kFloat16 ? 1e-3 : 1e-5, d.ToString()),
                0);
    }
  }
}

TEST(ConvSweepPointwise, Fp32AndInt8) {
  // The pointwise kernel: its plane form (1×1: odd channel count for int8's pairs and quads, a
  // shifted last block, a partial channel block) and its row form (3 input channels, 3×3
  // stride 2).
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the row form and int8 are OpenCL text";
  std::mt19937 rng(12);
  int index = 0;
  for (DataType t : {DataType::kFloat32, DataType::kInt8Q}) {
    for (const ConvShape& s : {ConvShape{2, 5, 4, 5, 11, 1, 1, 0, 1, 1},
                               ConvShape{1, 3, 7, 17, 4, 3, 2, 1, 1, 1}}) {
      const libdnn::ConvDesc d = TinyConv(t, s, index++);
      SCOPED_TRACE(d.ToString());
      const libdnn::ConvQuant quant = TinyConvQuant(d, rng);
      const Bytes x = RandomStorage(t, d.input_count(), false, rng);
      const Bytes w = RandomStorage(t, d.weight_count(), d.weights_signed, rng);
      const double k = double(d.channels) * d.kernel_h * d.kernel_w;
      const Bytes bias = RandomBias(t, d.out_channels, IsQuantized(t) ? k * 500 : 2.0, rng);
      Bytes want(d.output_count() * SizeOf(t));
      libdnn::ConvForwardReference(d, quant, x.data(), w.data(), bias.data(), want.data());
      auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, bias);
      libdnn::Convolution conv(dev, d, quant);
      ASSERT_TRUE(conv.forward_pointwise());
      auto ym = dev.Allocate(want.size());
      conv.SetWeights(BufferRef(wm.get(), 0));
      conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
      EXPECT_EQ(Mismatches(t, d.output_count(), Download(dev, *ym, want.size()), want, 1e-5,
                           d.ToString()),
                0);
      if (t != DataType::kInt8Q || !libdnn::Convolution::IsPointwise(d)) continue;
      // int8's byte quads in their portable form (Oclgrind compiles no x86 built-in; the VNNI
      // form runs on PoCL only), with the symmetric weight zero points they hold: a zip per
      // block of output channels, and one zip in private memory for blocks in turn (ob 2: 3
      // blocks, the last group partial), in quads and in pairs.
      libdnn::ConvQuant sym = quant;
      for (int32_t& z : sym.w_zero) z = d.weights_signed ? 0 : 128;
      libdnn::ConvForwardReference(d, sym, x.data(), w.data(), bias.data(), want.data());
      for (const libdnn::Convolution::PointwiseTile& tile :
           {libdnn::Convolution::PointwiseTile{4, 1, 16, 4}, {4, 1, 16, 4, 2}, {4, 1, 16, 2, 2}}) {
        libdnn::Convolution quads = libdnn::Convolution::Pointwise(dev, d, tile, sym);
        ASSERT_TRUE(quads.pointwise_tile() == tile);
        quads.SetWeights(BufferRef(wm.get(), 0));
        quads.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
        EXPECT_EQ(Mismatches(t, d.output_count(), Download(dev, *ym, want.size()), want, 0,
                             d.ToString() + " " + tile.ToString()),
                  0);
      }
    }
  }
}

TEST(ConvSweepGemmPath, Im2colGemmForward) {
  // MPCAFFE_CONV_GEMM=1: im2col + the LibDNN GEMM (fp32, int8q; one weight zero point).
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the GEMM forward is OpenCL only";
  std::mt19937 rng(8);
  for (DataType t : {DataType::kFloat32, DataType::kInt8Q}) {
    const libdnn::ConvDesc d = TinyConv(t, {2, 3, 8, 7, 5, 3, 2, 1, 1, 1}, 0);
    libdnn::ConvQuant quant = TinyConvQuant(d, rng);
    if (IsQuantized(t)) {
      quant.w_zero = {quant.w_zero[0]};
      quant.multiplier = {quant.multiplier[0]};
    }
    const Bytes x = RandomStorage(t, d.input_count(), false, rng);
    const Bytes w = RandomStorage(t, d.weight_count(), false, rng);
    const Bytes bias = RandomBias(t, d.out_channels, IsQuantized(t) ? 5000 : 2.0, rng);
    Bytes want(d.output_count() * SizeOf(t));
    libdnn::ConvForwardReference(d, quant, x.data(), w.data(), bias.data(), want.data());
    auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, bias);
    std::optional<ScopedSettings> forced;
    forced.emplace([](Settings& s) { s.conv_gemm = "1"; });
    libdnn::Convolution conv(dev, d, quant);
    forced.reset();
    ASSERT_TRUE(conv.forward_gemm()) << d.ToString();
    auto ym = dev.Allocate(want.size());
    conv.SetWeights(BufferRef(wm.get(), 0));
    conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
    EXPECT_EQ(
        Mismatches(t, d.output_count(), Download(dev, *ym, want.size()), want, 1e-5, d.ToString()),
        0);
  }
}

TEST(ConvSweepBackward, DataAndWeightsFp32) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(9);
  int index = 0;
  for (const ConvShape& s : kConvShapes) {
    libdnn::ConvDesc d = TinyConv(DataType::kFloat32, s, index++);
    d.relu = false;
    SCOPED_TRACE(d.ToString());
    const Bytes x = RandomStorage(d.type, d.input_count(), false, rng);
    const Bytes w = RandomStorage(d.type, d.weight_count(), false, rng);
    const Bytes top = RandomStorage(d.type, d.output_count(), false, rng);
    const Bytes dw0 = RandomStorage(d.type, d.weight_count(), false, rng);
    const Bytes db0 = RandomStorage(d.type, d.out_channels, false, rng);
    std::vector<float> want_dx(d.input_count()), want_dw(d.weight_count()), want_db(d.out_channels);
    std::memcpy(want_dw.data(), dw0.data(), dw0.size());
    std::memcpy(want_db.data(), db0.data(), db0.size());
    const float* topf = reinterpret_cast<const float*>(top.data());
    libdnn::ConvBackwardDataReference(d, topf, reinterpret_cast<const float*>(w.data()),
                                      want_dx.data());
    libdnn::ConvBackwardWeightsReference(d, topf, reinterpret_cast<const float*>(x.data()),
                                         want_dw.data(), want_db.data());
    libdnn::Convolution conv(dev, d);
    auto xm = Upload(dev, x), wm = Upload(dev, w), tm = Upload(dev, top), dwm = Upload(dev, dw0),
         dbm = Upload(dev, db0), dxm = dev.Allocate(x.size());
    conv.BackwardData(BufferRef(tm.get(), 0), BufferRef(wm.get(), 0), BufferRef(dxm.get(), 0));
    conv.BackwardWeights(BufferRef(tm.get(), 0), BufferRef(xm.get(), 0), BufferRef(dwm.get(), 0),
                         BufferRef(dbm.get(), 0));
    auto as_bytes = [](const std::vector<float>& v) {
      return Bytes(reinterpret_cast<const uint8_t*>(v.data()),
                   reinterpret_cast<const uint8_t*>(v.data() + v.size()));
    };
    EXPECT_EQ(Mismatches(d.type, want_dx.size(), Download(dev, *dxm, x.size()), as_bytes(want_dx),
                         1e-5, "bottom_diff"),
              0);
    EXPECT_EQ(Mismatches(d.type, want_dw.size(), Download(dev, *dwm, dw0.size()), as_bytes(want_dw),
                         1e-5, "weight_diff"),
              0);
    EXPECT_EQ(Mismatches(d.type, want_db.size(), Download(dev, *dbm, db0.size()), as_bytes(want_db),
                         1e-5, "bias_diff"),
              0);
  }
}

// ---- Element-wise operations and conversions ------------------------------------------------

// One element, a partial vector of 8, and several vectors with a tail.
const int kElementCounts[] = {1, 7, 37};

Affine InQ(DataType t) {
  return t == DataType::kInt8Q ? Affine{0.05f, 128} : Affine{0.0002f, 30000};
}
Affine OutQ(DataType t) {
  return t == DataType::kInt8Q ? Affine{0.03f, 10} : Affine{0.00015f, 1000};
}

/// Inputs for the element-wise kernels: reals in [−4, 4] for float types (not only eighths:
/// the conversions round), raw integers for quantized types.
Bytes ElementInput(DataType t, int n, std::mt19937& rng) {
  if (IsQuantized(t)) return RandomStorage(t, n, false, rng);
  return test_inputs::RandomRealStorage(t, n, -4.0f, 4.0f, rng);
}

class ElementwiseSweep : public testing::TestWithParam<DataType> {};

TEST_P(ElementwiseSweep, ReluScaleAxpbyAndConversionsToEveryType) {
  Device& dev = DefaultDevice();
  ElementwiseOps ops(dev);
  const DataType t = GetParam();
  std::mt19937 rng(55 + int(t));
  // fp16 results within one step of half (the kernel rounds once from fp32).
  const double tol = t == DataType::kFloat16 ? 1e-3 : 1e-5;
  for (int n : kElementCounts) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const Bytes x = ElementInput(t, n, rng), y0 = ElementInput(t, n, rng);
    auto xm = Upload(dev, x);
    Bytes want(x.size());
    {
      auto ym = dev.Allocate(x.size() + 8);
      const float slope = IsQuantized(t) ? 0.0f : 0.125f;
      ops.Relu(t, n, *xm, *ym, slope, InQ(t), OutQ(t));
      reference::Relu(t, n, x.data(), want.data(), slope, InQ(t), OutQ(t));
      EXPECT_EQ(Mismatches(t, n, Download(dev, *ym, x.size()), want, tol, "relu"), 0);
      ops.Scale(t, n, -1.75f, *xm, *ym, InQ(t), OutQ(t));
      reference::Scale(t, n, -1.75f, x.data(), want.data(), InQ(t), OutQ(t));
      EXPECT_EQ(Mismatches(t, n, Download(dev, *ym, x.size()), want, tol, "scale"), 0);
    }
    {
      auto ym = Upload(dev, y0);
      want = y0;
      ops.Axpby(t, n, 0.5f, *xm, -2.0f, *ym, InQ(t), OutQ(t));
      reference::Axpby(t, n, 0.5f, x.data(), -2.0f, want.data(), InQ(t), OutQ(t));
      EXPECT_EQ(Mismatches(t, n, Download(dev, *ym, x.size()), want, tol, "axpby"), 0);
    }
    for (DataType to : kAllDataTypes) {
      auto ym = dev.Allocate(n * SizeOf(to) + 8);
      Bytes want_to(n * SizeOf(to));
      ops.Convert(t, to, n, *xm, *ym, InQ(t), OutQ(to));
      reference::Convert(t, to, n, x.data(), want_to.data(), InQ(t), OutQ(to));
      EXPECT_EQ(
          Mismatches(to, n, Download(dev, *ym, want_to.size()), want_to,
                     to == DataType::kFloat16 ? 1e-3 : 1e-5, std::string("convert to ") + Name(to)),
          0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ElementwiseSweep, testing::ValuesIn(kAllDataTypes), TypeName);

// ---- Quantizer ---------------------------------------------------------------------------------

TEST(QuantizerSweep, ObserveReducesEveryGroupSize) {
  // The range reduction (local memory, then atomics across groups) on one element, one group
  // less one, one, one plus one, and several groups.
  Device& dev = DefaultDevice();
  std::mt19937 rng(3);
  for (size_t n : {size_t(1), size_t(63), size_t(64), size_t(65), size_t(300)}) {
    quant::Quantizer q(dev, "observe");
    q.set_mode(quant::QuantizerMode::kObserve);
    std::vector<float> v(n);
    std::normal_distribution<float> dist(1.0f, 3.0f);
    for (float& x : v) x = dist(rng);
    auto buf = dev.Alloc<float>(n);
    dev.Write(buf, v.data(), n);
    q.Forward(buf, n);
    EXPECT_EQ(q.observed_min(), *std::min_element(v.begin(), v.end())) << n;
    EXPECT_EQ(q.observed_max(), *std::max_element(v.begin(), v.end())) << n;
  }
}

TEST(QuantizerSweep, PseudoSnapsToEveryTargetGrid) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(4);
  for (DataType target : kAllDataTypes) {
    quant::Quantizer q(dev, std::string("pseudo_") + Name(target));
    q.set_mode(quant::QuantizerMode::kPseudo);
    q.set_pseudo_target_type(target);
    std::vector<float> v(77);
    std::uniform_real_distribution<float> dist(-3.0f, 7.0f);
    for (float& x : v) x = dist(rng);
    auto buf = dev.Alloc<float>(v.size());
    dev.Write(buf, v.data(), v.size());
    q.Forward(buf, v.size());
    std::vector<float> got(v.size());
    dev.Read(buf, got.data(), got.size());
    const double lo = *std::min_element(v.begin(), v.end()),
                 hi = *std::max_element(v.begin(), v.end());
    for (size_t i = 0; i < v.size(); ++i) {
      float want = v[i];
      if (IsQuantized(target)) {
        const quant::QuantParams p = quant::ChooseQuantParams(lo, hi, target);
        want = quant::SnapValue(v[i], p.scale[0], p.zero_point[0], p.qmin, p.qmax);
      } else if (target == DataType::kFloat16) {
        want = HalfToFloat(FloatToHalf(v[i]));
      }
      ASSERT_EQ(got[i], want) << Name(target) << " element " << i;
    }
  }
}

}  // namespace
}  // namespace mpcaffe
