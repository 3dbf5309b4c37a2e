// tests/cuda/byte_pairs_host_test.cc — the CUDA row of KernelHelper::kBytePairProduct16 (the
// int8w4 byte-pair kernels' vectors, nibble unpack and pair products) runs on no GPU here, so
// its arithmetic is executed on the host instead: the generated CUDA text, with __device__ and
// __forceinline__ defined away, is compiled by the C++ compiler that built this suite
// (MPCAFFE_HOST_CXX) together with a checker that compares every helper against plain integer
// arithmetic — random bytes and the extremes (activations 255, weights −8 / 7) through the
// 8 steps the kernels sum in 16 bits. The OpenCL row is checked on the devices by
// tests/libdnn/gemm_int4_test.cc.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "codegen/kernel_writer.h"

namespace mpcaffe {
namespace {

const char* kChecker = R"(
#include <cstdint>
#include <cstdio>
#include <random>
int main() {
  std::mt19937 rng(7);
  long lanes = 0, bad = 0;
  for (int it = 0; it < 20000; ++it) {
    const bool extreme = it % 5 == 0;
    uint8_t xb[32], wb[32];
    int8_t ws[32];
    for (int i = 0; i < 32; ++i) {
      xb[i] = extreme ? 255 : uint8_t(rng());
      ws[i] = extreme ? ((rng() & 1) ? 7 : -8) : int8_t(int(rng() % 16) - 8);
      wb[i] = uint8_t(ws[i]);
    }
    int xw[8], ww[8];
    for (int l = 0; l < 8; ++l) {
      xw[l] = int(uint32_t(xb[4 * l]) | uint32_t(xb[4 * l + 1]) << 8 |
                  uint32_t(xb[4 * l + 2]) << 16 | uint32_t(xb[4 * l + 3]) << 24);
      ww[l] = int(uint32_t(wb[4 * l]) | uint32_t(wb[4 * l + 1]) << 8 |
                  uint32_t(wb[4 * l + 2]) << 16 | uint32_t(wb[4 * l + 3]) << 24);
    }
    // 8 steps summed in 16-bit lanes (the kernels' kSteps16), widened, accumulated twice.
    const mp_i32x8 x = MP_I32X8_LOAD(xw), w = MP_I32X8_LOAD(ww);
    mp_i16x16 p = (mp_i16x16)(0);
    for (int s = 0; s < 8; ++s) p += MP_MADDUBS(x, w);
    for (int l = 0; l < 16; ++l) {
      const int want = 8 * (xb[2 * l] * ws[2 * l] + xb[2 * l + 1] * ws[2 * l + 1]);
      bad += p.s[l] != want;
    }
    mp_i32x8 acc = (mp_i32x8)(-5);
    acc += MP_WIDEN16(p);
    acc += MP_WIDEN16(p);
    int out[8];
    MP_I32X8_STORE(acc, out);
    int total = 0;
    for (int l = 0; l < 8; ++l) {
      int want = -5;
      for (int b = 0; b < 4; ++b) want += 16 * xb[4 * l + b] * ws[4 * l + b];
      bad += out[l] != want;
      total += want;
      ++lanes;
    }
    bad += MP_I32X8_SUM(acc) != total;
    // 16 packed bytes: byte j holds k = 2j (low nibble) and 2j + 1 (high nibble).
    mp_u8 packed[16];
    int8_t v[32];
    for (int j = 0; j < 16; ++j) {
      v[2 * j] = int8_t(int(rng() % 16) - 8);
      v[2 * j + 1] = int8_t(int(rng() % 16) - 8);
      packed[j] = mp_u8((v[2 * j] & 15) | (v[2 * j + 1] & 15) << 4);
    }
    int words[8];
    MP_I32X8_STORE(MP_NIBBLES32_LOAD(packed), words);
    for (int j = 0; j < 16; ++j) {
      bad += int8_t(uint32_t(words[j / 4]) >> (8 * (j % 4))) != v[2 * j];
      bad += int8_t(uint32_t(words[4 + j / 4]) >> (8 * (j % 4))) != v[2 * j + 1];
    }
    // Four rows of 8 bytes, ld 11, interleaved into words.
    mp_u8 rows[44];
    for (auto& r : rows) r = mp_u8(rng());
    MP_I32X8_STORE(MP_ZIP4_U8X8(rows, 11), words);
    for (int e = 0; e < 8; ++e)
      for (int q = 0; q < 4; ++q) bad += mp_u8(uint32_t(words[e]) >> (8 * q)) != rows[11 * q + e];
  }
  std::printf("byte pair helpers: %ld accumulator lanes, %ld mismatches\n", lanes, bad);
  return bad == 0 ? 0 : 1;
}
)";

#ifdef MPCAFFE_HOST_CXX
/// Compiles `source` (CUDA text, __device__ and __forceinline__ defined away) followed by
/// `checker` with the host C++ compiler, runs it and returns its output; fails the test when it
/// does not build or does not exit 0.
std::string RunOnHost(const std::string& source, const char* checker, const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mpcaffe_" + tag + "_" +
                    std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                    std::to_string(std::rand()));
  std::filesystem::create_directories(dir);
  const auto cc = dir / "check.cc", exe = dir / "check", log = dir / "log.txt";
  {
    std::ofstream out(cc);
    out << "#include <math.h>\n#define __device__\n#define __forceinline__ inline\n" << source << checker;
  }
  const std::string compile = std::string(MPCAFFE_HOST_CXX) + " -std=c++17 -O1 -o " +
                              exe.string() + " " + cc.string() + " > " + log.string() + " 2>&1";
  const int built = std::system(compile.c_str());
  auto read_log = [&] {
    std::ifstream in(log);
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
  };
  EXPECT_EQ(built, 0) << compile << "\n" << read_log() << "\n" << source;
  if (built != 0) return "";
  const int ran = std::system((exe.string() + " > " + log.string() + " 2>&1").c_str());
  const std::string result = read_log();
  std::printf("%s", result.c_str());
  EXPECT_EQ(ran, 0) << result;
  if (!std::getenv("MPCAFFE_KEEP_HOST_CHECK")) std::filesystem::remove_all(dir);
  return result;
}

TEST(CudaBytePairs, CudaRowGivesTheSameIntegersOnTheHost) {
  KernelWriter w(KernelTarget::Cuda(80), "test_byte_pairs");
  w.UseHelper(KernelHelper::kBytePairProduct16);
  const std::string result = RunOnHost(w.Source(), kChecker, "byte_pairs");
  EXPECT_NE(result.find(", 0 mismatches"), std::string::npos) << result;
}

// KernelHelper::kByteQuadProduct16's CUDA row in its arithmetic below sm_61 (the host compiler
// has no __CUDA_ARCH__; the dp4a branch is compiled by NVRTC in generated_kernels_test.cc): random
// and extreme bytes (activations 255, weights −128 / 127), 4 steps, against plain integers; and
// the GEMM dot tile's MP_QUAD_LOAD_BYTES, MP_QUAD_XOR and MP_QUAD_SUM.
const char* kQuadChecker = R"(
#include <cstdint>
#include <cstdio>
#include <random>
int main() {
  std::mt19937 rng(11);
  long bad = 0;
  for (int it = 0; it < 20000; ++it) {
    const bool extreme = it % 5 == 0;
    mp_u8 x[4][64];
    int w[4];
    for (int s = 0; s < 4; ++s) {
      for (int i = 0; i < 64; ++i) x[s][i] = extreme ? 255 : mp_u8(rng());
      w[s] = extreme ? int(it % 2 ? 0x80808080u : 0x7f7f7f7fu) : int(rng());
    }
    mp_i32x16 acc(it - 7);
    for (int s = 0; s < 4; ++s)
      acc = MP_DPBUSD16(acc, MP_ZIP4X16(x[s], x[s] + 16, x[s] + 32, x[s] + 48), MP_QUAD_WORD(w[s]));
    for (int l = 0; l < 16; ++l) {
      int want = it - 7;
      for (int s = 0; s < 4; ++s)
        for (int j = 0; j < 4; ++j) want += x[s][16 * j + l] * int8_t(uint32_t(w[s]) >> (8 * j));
      bad += acc.s[l] != want;
    }
    // The dot tile's words: 64 bytes as 16 lanes, the weights' top-bit flip, the lane sum.
    const mp_i32x16 v = MP_QUAD_LOAD_BYTES(x[0]), f = MP_QUAD_XOR(v, (-0x7f7f7f7f - 1));
    uint32_t sum = 0;
    for (int l = 0; l < 16; ++l) {
      const uint32_t word = x[0][4 * l] | uint32_t(x[0][4 * l + 1]) << 8 |
                            uint32_t(x[0][4 * l + 2]) << 16 | uint32_t(x[0][4 * l + 3]) << 24;
      bad += uint32_t(v.s[l]) != word || uint32_t(f.s[l]) != (word ^ 0x80808080u);
      sum += uint32_t(acc.s[l]);
    }
    bad += MP_QUAD_SUM(acc) != int(sum);
  }
  std::printf("byte quads: 320000 lanes, %ld mismatches\n", bad);
  return bad == 0 ? 0 : 1;
}
)";

TEST(CudaBytePairs, CudaByteQuadRowGivesTheSameIntegersOnTheHost) {
  KernelWriter w(KernelTarget::Cuda(80), "test_byte_quads");
  w.UseHelper(KernelHelper::kByteQuadProduct16);
  const std::string result = RunOnHost(w.Source(), kQuadChecker, "byte_quads");
  EXPECT_NE(result.find(", 0 mismatches"), std::string::npos) << result;
}

// AddVector's CUDA structs: vectors of whole 16-byte words load and store whole words at
// 16-byte-aligned addresses and lane by lane elsewhere (Dialect::vector_words); both must move
// the same lanes, and loads from another storage type still convert lane by lane.
const char* kVectorChecker = R"chk(
#include <cstdio>
#include <cstring>
// Loads N lanes at every offset 0 … N − 1 of an aligned array (offset 0 aligned, the others
// not), stores them back at the same offset, and compares lanes and untouched neighbours.
#define CHECK(V, S, N, what)                                                      \
  {                                                                               \
    alignas(16) S src[3 * N], dst[3 * N];                                         \
    for (int i = 0; i < 3 * N; ++i) src[i] = S(i * 7 - 11);                       \
    long b = 0;                                                                   \
    for (int off = 0; off < N; ++off) {                                           \
      std::memset(dst, 0, sizeof dst);                                            \
      const V v = V##_LOAD(src + off);                                            \
      for (int l = 0; l < N; ++l) b += v.s[l] != src[off + l];                    \
      V##_STORE(v, dst + off);                                                    \
      for (int i = 0; i < 3 * N; ++i)                                             \
        b += dst[i] != (i >= off && i < off + N ? src[i] : S(0));                 \
    }                                                                             \
    std::printf("%s: %ld mismatches\n", what, b);                                 \
    bad += b;                                                                     \
  }
int main() {
  long bad = 0;
  CHECK(vf8, float, 8, "8 x float (2 words)")
  CHECK(vi4, int, 4, "4 x int (1 word)")
  CHECK(vs16, short, 16, "16 x short (2 words)")
  CHECK(vb16, mp_u8, 16, "16 x uchar (1 word)")
  CHECK(vf2, float, 2, "2 x float (lane by lane)")
  // A load from another storage type converts each lane (the template, not the word copy).
  alignas(16) mp_u8 bytes[8] = {1, 2, 3, 250, 5, 6, 7, 255};
  const vf8 c = vf8_LOAD_CONV(bytes);
  for (int l = 0; l < 8; ++l) bad += c.s[l] != float(bytes[l]);
  std::printf("vector words: %ld mismatches\n", bad);
  return bad == 0 ? 0 : 1;
}
)chk";

TEST(CudaVectors, WordLoadsAndStoresMoveTheSameLanesOnTheHost) {
  KernelWriter w(KernelTarget::Cuda(80), "test_vector_words");
  w.AddVector("vf8", Scalar::kF32, 8)
      .AddVector("vi4", Scalar::kI32, 4)
      .AddVector("vs16", Scalar::kI16, 16)
      .AddVector("vf2", Scalar::kF32, 2)
      .AddVector("vb16", Scalar::kU8, 16);
  const std::string source = w.Source();
  EXPECT_NE(source.find("struct alignas(16) vf8"), std::string::npos) << source;
  EXPECT_EQ(source.find("struct alignas(16) vf2"), std::string::npos) << source;
  const std::string result = RunOnHost(source, kVectorChecker, "vector_words");
  EXPECT_NE(result.find("vector words: 0 mismatches"), std::string::npos) << result;
}
#else
TEST(CudaBytePairs, Skipped) {
  GTEST_SKIP() << "no host C++ compiler path given at build time (MPCAFFE_HOST_CXX)";
}
TEST(CudaVectors, Skipped) {
  GTEST_SKIP() << "no host C++ compiler path given at build time (MPCAFFE_HOST_CXX)";
}
#endif

}  // namespace
}  // namespace mpcaffe
