// tests/cuda/candidates_test.cc — CUDA gets the configurations OpenCL gets: the CUDA tuner's
// GEMM and convolution candidates of every data type (enumerated by GemmCandidates and
// ConvConfig::Candidates, not listed here) compile with NVRTC, vector widths included, and the
// int8 candidates that multiply four k at a time contain dp4a in their PTX. No GPU needed.
//
// Run time: one compile per kernel shape. Candidates that differ only in their tile sizes
// (GEMM tm, tn, wg, ku, mf; convolution lanes, oc, px) generate the same constructs with other
// constants, so the first of each shape stands for the rest: every shape as compute_75 PTX,
// and the first vector shape of each data type and every 4-way dot product as sm_80 and sm_90
// cubin as well (GEMM; convolutions: fp32's and int8's). Signed int8/int16 convolution
// weights change only the weight load: their vector and dot-product shapes only. The full
// cross product (1260 GEMM candidates × 3 targets) would take about 20 minutes here.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "libdnn/conv.h"
#include "libdnn/gemm.h"
#include "libdnn/int4_internal.h"
#ifdef MPCAFFE_HAVE_CUDA
#include "device/cuda/nvrtc.h"
#include "tests/testing/nvrtc_once.h"
#endif

namespace mpcaffe::libdnn {
namespace {

#ifdef MPCAFFE_HAVE_CUDA

/// A CUDA GPU with dp4a (sm_61+), as the tuner sees one.
DeviceInfo CudaGpu() {
  DeviceInfo info;
  info.backend = Backend::kCuda;
  info.is_gpu = true;
  info.dot_product = true;
  return info;
}

int ComputeCapability(const std::string& arch) {
  return std::stoi(arch.substr(arch.find('_') + 1));
}

/// The targets one shape is compiled for: PTX always; the cubins for the first vector shape of
/// a data type (`first`) and for every 4-way dot product.
std::vector<std::string> Archs(bool first, bool dot4) {
  std::vector<std::string> archs = {cuda::OldestPtxArch()};
  if (first || dot4) archs.insert(archs.end(), {"sm_80", "sm_90"});
  return archs;
}

TEST(CudaCandidates, EveryGemmCandidateShapeOfEveryTypeCompiles) {
  size_t candidates = 0;
  int compiles = 0, shapes = 0, dot4 = 0;
  std::set<int> widths;
  int fp32_vector_ptx = 0, wide_loads = 0;
  const auto start = std::chrono::steady_clock::now();
  for (DataType t : kAllDataTypes) {
    std::set<std::tuple<int, int, int, int>> seen;  // (algorithm, vw, kp, lm)
    bool first_vector = true;
    for (int n : {48, 1}) {  // outer-product and matrix × vector layouts
      GemmDesc d;
      d.type = d.out_type = t;
      d.M = 64, d.N = n, d.K = 100, d.bias = true, d.relu = true;
      d.weights = WeightOperand::kA;
      d.per_channel = d.weight_zero = IsQuantized(t);
      for (const GemmConfig& c : GemmCandidates(CudaGpu(), d)) {
        ++candidates;
        ASSERT_TRUE(c.Supports(d, Backend::kCuda)) << c.ToString();
        if (!seen.insert({int(c.algorithm), c.vw, c.kp, c.lm}).second) continue;
        ++shapes;
        widths.insert(c.vw);
        const bool four_k = t == DataType::kInt8Q && c.vw == 1 &&
                            (c.kp == GemmConfig::kDot4 || c.algorithm == GemmConfig::Algorithm::kDot);
        const bool first = c.vw > 1 && first_vector;
        first_vector = first_vector && !first;
        for (const std::string& arch : Archs(first, four_k)) {
          try {
            const cuda::NvrtcOutput& out = test_support::CompileCudaOnce(
                Gemm::Source(KernelTarget::Cuda(ComputeCapability(arch)), d, c), arch, "gemm.cu");
            ++compiles;
            if (arch.rfind("compute_", 0) != 0) {
              EXPECT_FALSE(out.cubin.empty()) << d.ToString() << " " << c.ToString() << " " << arch;
              continue;
            }
            EXPECT_NE(out.ptx.find(".entry " + Gemm::KernelName(d)), std::string::npos);
            if (four_k) {
              ++dot4;
              EXPECT_NE(out.ptx.find("dp4a"), std::string::npos) << d.ToString() << " " << c.ToString();
            }
            // fp32 vectors of whole 16-byte words load them 128 bits at a time where aligned
            // (Dialect::vector_words).
            if (t == DataType::kFloat32 && c.vw >= 4) {
              ++fp32_vector_ptx;
              if (out.ptx.find("ld.global.v4") != std::string::npos ||
                  out.ptx.find("ld.global.nc.v4") != std::string::npos)
                ++wide_loads;
            }
          } catch (const std::exception& e) {
            ADD_FAILURE() << d.ToString() << " " << c.ToString() << " for " << arch << ":\n"
                          << e.what();
          }
        }
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("GEMM NVRTC: %zu CUDA candidates of 4 types, %d kernel shapes, %d compiles "
              "(%d int8 PTX with dp4a; %d of %d fp32 vector PTX with 128-bit global loads) in %.1f s\n",
              candidates, shapes, compiles, dot4, wide_loads, fp32_vector_ptx, seconds);
  EXPECT_GT(fp32_vector_ptx, 0);
  EXPECT_GT(wide_loads, 0) << "no fp32 vector GEMM loads 128 bits at a time";
  // Every vector width the OpenCL candidates have, and scalar tiles.
  for (int vw : {1, 4, 8, 16}) EXPECT_TRUE(widths.count(vw)) << "no CUDA candidate with vw = " << vw;
  EXPECT_GT(dot4, 0);
}

TEST(CudaCandidates, EveryConvolutionCandidateShapeOfEveryTypeCompiles) {
  int candidates = 0, compiles = 0, vectors = 0, dot4 = 0;
  const auto start = std::chrono::steady_clock::now();
  for (DataType t : kAllDataTypes)
    for (bool sw : {false, true}) {
      if (sw && !IsQuantized(t)) continue;
      ConvDesc d;
      d.type = t;
      d.weights_signed = sw;
      d.channels = 16;
      d.height = d.width = 9;
      d.out_channels = 24;
      d.kernel_h = d.kernel_w = 3;
      d.pad_h = d.pad_w = 1;
      std::set<std::pair<int, int>> seen;  // (vw, kp)
      bool first_vector = true;
      for (const ConvConfig& c : ConvConfig::Candidates(CudaGpu(), t)) {
        ++candidates;
        ASSERT_TRUE(c.Supports(Backend::kCuda)) << c.ToString();
        if (!seen.insert({c.vw, c.kp}).second) continue;
        const bool first = c.vw > 1 && first_vector;
        first_vector = first_vector && !first;
        if (sw && !first && c.kp != 4) continue;
        vectors += c.vw > 1;
        const bool cubin = first && !sw && (t == DataType::kFloat32 || t == DataType::kInt8Q);
        for (const std::string& arch : Archs(cubin, c.kp == 4)) {
          try {
            const cuda::NvrtcOutput& out = test_support::CompileCudaOnce(
                Convolution::ForwardSource(KernelTarget::Cuda(ComputeCapability(arch)), d, c), arch,
                "conv.cu");
            ++compiles;
            if (arch.rfind("compute_", 0) != 0) {
              EXPECT_FALSE(out.cubin.empty()) << Name(t) << " " << c.ToString() << " " << arch;
            } else if (c.kp == 4) {
              ++dot4;
              EXPECT_NE(out.ptx.find("dp4a"), std::string::npos) << Name(t) << " " << c.ToString();
            }
          } catch (const std::exception& e) {
            ADD_FAILURE() << Name(t) << (sw ? " signed " : " ") << c.ToString() << " for " << arch
                          << ":\n" << e.what();
          }
        }
      }
    }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Convolution NVRTC: %d CUDA candidates, %d compiles (%d vector shapes, %d int8 PTX "
              "with dp4a) in %.1f s\n", candidates, compiles, vectors, dot4, seconds);
  EXPECT_GT(vectors, 0);
  EXPECT_GT(dot4, 0);
}

/// Compiles `source` as compute_75 PTX (which must define `entry`) and, with `cubin`, as sm_80
/// cubin.
void CompilePtxAndCubin(const std::string& what, const std::function<std::string(int)>& source,
                        const std::string& entry, bool cubin) {
  std::vector<std::string> archs = {cuda::OldestPtxArch()};
  if (cubin) archs.push_back("sm_80");
  for (const std::string& arch : archs) {
    try {
      const cuda::NvrtcOutput& out =
          test_support::CompileCudaOnce(source(ComputeCapability(arch)), arch, "pairs.cu");
      if (arch.rfind("compute_", 0) == 0)
        EXPECT_NE(out.ptx.find(".entry " + entry), std::string::npos) << what;
      else
        EXPECT_FALSE(out.cubin.empty()) << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << " for " << arch << ":\n" << e.what();
    }
  }
}

// The 16-bit pair products (kp = 2 GEMMs, the convolution's pair inputs) in every layout that
// changes their text: op(A) packed into pairs (a wide N), gathered edge tiles, a transposed
// op(B) or op(A), the weights as B (z_w folded into op(B)), signed weights; the convolution's
// two-load pairs (1×1 stride 2: too little reuse to pack), packed pairs and int16's split, and
// int16's split in the GEMM's dot tile.
// (Each compile takes seconds — 16-lane struct loops — so PTX for all, sm_80 cubin for two.)
TEST(CudaCandidates, PairProductPathsCompileInEveryLayout) {
  const DeviceInfo gpu = CudaGpu();
  int compiled = 0;
  // The first kp = 2 GEMM candidate of d: PTX (and the very first program's sm_80 cubin), its
  // text holding `marker`.
  auto CompileFirstPairCandidate = [&](const GemmDesc& d, const std::string& marker) {
    int pairs = 0;
    for (const GemmConfig& c : GemmCandidates(gpu, d)) {
      if (c.kp != GemmConfig::kPairs || pairs++ > 0) continue;
      const std::string what = d.ToString() + " " + c.ToString();
      CompilePtxAndCubin(
          what, [&](int cc) { return Gemm::Source(KernelTarget::Cuda(cc), d, c); },
          Gemm::KernelName(d), compiled == 0);
      EXPECT_NE(Gemm::Source(KernelTarget::Cuda(80), d, c).find(marker), std::string::npos)
          << what;
      ++compiled;
    }
    EXPECT_GT(pairs, 0) << "no kp = 2 CUDA candidate for " << d.ToString();
  };
  struct Layout {
    int n;
    bool trans_a, trans_b, weights_b, weights_signed, weight_zero;
  };
  for (const Layout& l :
       {Layout{512, false, false, false, false, true}, Layout{48, false, false, false, true, true},
        Layout{45, true, false, false, false, true}, Layout{48, false, true, true, false, true},
        Layout{45, false, false, true, true, false}}) {
    GemmDesc d;
    d.type = d.out_type = DataType::kInt8Q;
    d.M = 64, d.N = l.n, d.K = 99, d.bias = true;
    d.trans_a = l.trans_a, d.trans_b = l.trans_b;
    d.weights = l.weights_b ? WeightOperand::kB : WeightOperand::kA;
    d.weights_signed = l.weights_signed, d.weight_zero = l.weight_zero, d.per_channel = true;
    CompileFirstPairCandidate(d, "MP_MADD16(");
  }
  // int16q's split pairs in the dot tile: the inner product's weights B, unsigned (held as
  // w − 32768, Σx beside) and signed.
  for (bool weights_signed : {false, true}) {
    GemmDesc d;
    d.type = d.out_type = DataType::kInt16Q;
    d.M = 16, d.N = 30, d.K = 784, d.bias = true, d.trans_b = true;
    d.weights = WeightOperand::kB;
    d.weights_signed = weights_signed, d.weight_zero = !weights_signed, d.per_channel = true;
    CompileFirstPairCandidate(d, "MP_SHORT16_SPLIT_HI(");
  }
  for (auto [t, kernel, stride, sw] : {std::tuple{DataType::kInt8Q, 1, 2, false},
                                       {DataType::kInt8Q, 3, 1, false},
                                       {DataType::kInt8Q, 3, 1, true},
                                       {DataType::kInt16Q, 3, 1, false}}) {
    ConvDesc d;
    d.type = t;
    d.weights_signed = sw;
    d.channels = 15;  // odd: the last pair half empty
    d.height = d.width = 9;
    d.out_channels = 8;
    d.kernel_h = d.kernel_w = kernel;
    d.stride_h = d.stride_w = stride;
    d.pad_h = d.pad_w = kernel / 2;
    for (const ConvConfig& c : ConvConfig::Candidates(gpu, t)) {
      if (c.vw != 8 || c.kp != 1) continue;
      const std::string what = std::string(Name(t)) + " " + std::to_string(kernel) + "x" +
                               std::to_string(kernel) + " " + c.ToString();
      CompilePtxAndCubin(
          what, [&](int cc) { return Convolution::ForwardSource(KernelTarget::Cuda(cc), d, c); },
          Convolution::ForwardKernelName(d), t == DataType::kInt16Q);
      EXPECT_NE(Convolution::ForwardSource(KernelTarget::Cuda(80), d, c).find("MP_MADD16("),
                std::string::npos)
          << what;
      ++compiled;
      break;
    }
  }
  EXPECT_EQ(compiled, 11);
  std::printf(
      "Pair products: %d CUDA programs compiled (PTX; the first GEMM and int16's split "
      "convolution also as sm_80 cubin)\n",
      compiled);
}

// The direct convolution in byte quads (ConvConfig kp 4, vw 16: ConvInput::kPackedQuads, the
// CPU default where AVX-512 VNNI runs in a helper): its window function's MP_DPBUSD16 is dp4a per
// lane in CUDA. Unsigned weights (signed ones change only the packing kernel's load), PTX with
// dp4a and sm_80 cubin; channel quads, and tap quads (a first layer of 3 channels: their own
// packing kernels). Never run: no NVIDIA GPU on the build machine.
TEST(CudaCandidates, ConvolutionByteQuadsCompile) {
  for (bool taps : {false, true}) {
    const bool sw = false;
    ConvDesc d;
    d.type = DataType::kInt8Q;
    d.weights_signed = sw;
    d.channels = taps ? 3 : 13;  // channel quads: a last quad of one channel
    d.height = d.width = taps ? 20 : 9;
    d.out_channels = 20;
    d.kernel_h = d.kernel_w = taps ? 7 : 3;
    d.pad_h = d.pad_w = taps ? 3 : 1;
    d.stride_h = d.stride_w = taps ? 2 : 1;
    const ConvConfig c = {1, 2, 3, 16, 4};
    const std::string what = std::string(taps ? "tap " : "channel ") + "byte quads " + c.ToString();
    CompilePtxAndCubin(
        what, [&](int cc) { return Convolution::ForwardSource(KernelTarget::Cuda(cc), d, c); },
        Convolution::ForwardKernelName(d), !sw);
    const std::string text = Convolution::ForwardSource(KernelTarget::Cuda(80), d, c);
    EXPECT_NE(text.find("MP_DPBUSD16("), std::string::npos) << what;
    const cuda::NvrtcOutput& out = test_support::CompileCudaOnce(
        Convolution::ForwardSource(KernelTarget::Cuda(ComputeCapability(cuda::OldestPtxArch())),
                                   d, c),
        cuda::OldestPtxArch(), "pairs.cu");
    EXPECT_NE(out.ptx.find("dp4a.u32.s32"), std::string::npos) << what;
  }
}

// The int8 GEMM's byte-quad tiles (kp = 4, vw = 16): the dot tile in the inner product's layout
// with unsigned weights (flipped to signed bytes, Σx beside) and with signed weights, and matrix
// × vector; the outer tile of a convolution's GEMM (K mod 4 = 2: the tail step); PTX
// for each (dp4a per lane: NVRTC's oldest target is past sm_61), sm_80 cubin for the first.
TEST(CudaCandidates, ByteQuadTilesCompileWithDp4a) {
  const DeviceInfo gpu = CudaGpu();
  int compiled = 0;
  for (auto [weights_b, weights_signed, n] : {std::tuple{true, false, 40}, {true, true, 40},
                                              {false, false, 1}, {false, false, 48}}) {
    GemmDesc d;
    d.type = d.out_type = DataType::kInt8Q;
    d.M = weights_b ? 3 : 64, d.N = n, d.K = 202, d.bias = true;
    d.trans_b = weights_b;
    d.weights = weights_b ? WeightOperand::kB : WeightOperand::kA;
    d.weights_signed = weights_signed, d.weight_zero = !weights_signed, d.per_channel = true;
    bool found = false;
    for (const GemmConfig& c : GemmCandidates(gpu, d)) {
      if (c.kp != GemmConfig::kDot4 || c.vw != 16 || found) continue;
      found = true;
      const std::string what = d.ToString() + " " + c.ToString();
      CompilePtxAndCubin(
          what, [&](int cc) { return Gemm::Source(KernelTarget::Cuda(cc), d, c); },
          Gemm::KernelName(d), compiled == 0);
      const std::string arch = cuda::OldestPtxArch();  // compiled above (sm_61 or later)
      const std::string ptx =
          test_support::CompileCudaOnce(
              Gemm::Source(KernelTarget::Cuda(ComputeCapability(arch)), d, c), arch, "pairs.cu")
              .ptx;
      EXPECT_NE(ptx.find("dp4a"), std::string::npos) << what;
      ++compiled;
    }
    EXPECT_TRUE(found) << "no byte-quad CUDA candidate for " << d.ToString();
  }
  EXPECT_EQ(compiled, 4);
}

// The 4-bit weight (int8w4) byte-pair kernels (GemmConfig::kU8S4, KernelHelper::
// kBytePairProduct16's CUDA structs) in every layout that changes their text: the outer product
// (weights unpacked in the kernel) with its activations packed from B rows or from a transposed
// B, and the dot product along K, in byte pairs and in byte quads, with weights A (matrix ×
// vector) or weights B (the inner product). Each such shape of the CUDA candidates compiles as
// compute_75 PTX holding the GEMM, _xpack and _wsum entries; the first also as sm_80 cubin.
TEST(CudaCandidates, EveryInt4CandidateShapeCompiles) {
  const DeviceInfo gpu = CudaGpu();
  struct Layout {
    int m, n;
    bool trans_b, weights_b;
  };
  std::set<std::tuple<int, int, bool, bool>> seen;  // (algorithm, vw, trans_b, weights B)
  int native = 0, compiles = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const Layout& l : {Layout{64, 45, false, false}, Layout{64, 45, true, false},
                          Layout{64, 1, false, false},
                          Layout{3, 64, true, true}}) {
    GemmDesc d;
    d.type = d.out_type = DataType::kInt8Q;
    d.weight_bits = 4, d.weights_signed = true, d.weight_zero = false;
    d.M = l.m, d.N = l.n, d.K = 99, d.bias = true, d.per_channel = true;
    d.trans_b = l.trans_b;
    d.weights = l.weights_b ? WeightOperand::kB : WeightOperand::kA;
    int layout_native = 0;
    for (const GemmConfig& c : GemmCandidates(gpu, d)) {
      if (!int4::Native(d, c)) continue;
      ++native, ++layout_native;
      ASSERT_TRUE(c.Supports(d, Backend::kCuda)) << c.ToString();
      if (!seen.insert({int(c.algorithm), c.vw, l.trans_b, l.weights_b}).second) continue;
      const std::string what = d.ToString() + " " + c.ToString();
      const std::string name = Gemm::KernelName(d);
      // Byte pairs, or byte quads in the dot tile of vw 16 (dp4a per lane).
      EXPECT_NE(Gemm::Source(KernelTarget::Cuda(80), d, c).find(c.vw == 16 ? "MP_DPBUSD16("
                                                                            : "MP_MADDUBS("),
                std::string::npos)
          << what;
      std::vector<std::string> archs = {cuda::OldestPtxArch()};
      if (compiles == 0) archs.push_back("sm_80");
      for (const std::string& arch : archs) {
        try {
          const cuda::NvrtcOutput& out = test_support::CompileCudaOnce(
              Gemm::Source(KernelTarget::Cuda(ComputeCapability(arch)), d, c), arch, "int4.cu");
          ++compiles;
          if (arch.rfind("compute_", 0) != 0) {
            EXPECT_FALSE(out.cubin.empty()) << what << " " << arch;
            continue;
          }
          const std::vector<std::string> entries = {name, name + "_xpack", name + "_wsum"};
          for (const std::string& e : entries)
            EXPECT_NE(out.ptx.find(".entry " + e + "("), std::string::npos) << what << ": " << e;
        } catch (const std::exception& e) {
          ADD_FAILURE() << what << " for " << arch << ":\n" << e.what();
        }
      }
    }
    EXPECT_GT(layout_native, 0) << "no byte-pair CUDA candidate for " << d.ToString();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("int8w4 byte pairs and quads: %d CUDA candidates, %zu kernel shapes, %d compiles "
              "(PTX, one sm_80 cubin) in %.1f s\n", native, seen.size(), compiles, seconds);
  EXPECT_EQ(seen.size(), 6u)
      << "outer: B rows, transposed B; dot: weights A and B, each in pairs and in quads";
}

#else
TEST(CudaCandidates, Skipped) { GTEST_SKIP() << "CUDA backend not built: no NVRTC"; }
#endif

}  // namespace
}  // namespace mpcaffe::libdnn
