// tests/codegen/pair32_layout_host_test.cc — the 512-bit row of KernelHelper::kPairProduct16 (the
// int8 pointwise kernel's loop where OpenCL's compiler targets AVX-512 BW) runs only on such a
// CPU, so its lane layout is executed on the host instead: the zip and broadcast of the generated
// OpenCL text (MP_ZIP32's shuffle, MP_PAIR32_WORD's reinterpretation of a word as 16-bit lanes)
// feed an emulation of vpmaddwd on 512 bits (Intel SDM: each int32 lane the sum of two products
// of sign-extended 16-bit lanes, wrapping), and the lanes must give, half by half, what the
// 256-bit row (MP_ZIP16, vpmaddwd on 256 bits) gives for the two 8-pixel groups the kernel reads
// from them (the .lo and .hi accumulators) and what plain arithmetic gives. The portable forms of
// both rows run on the devices (tests/codegen/helper_forms_test.cc).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"

namespace mpcaffe {
namespace {

/// The OpenCL text of the 16-bit pair products, in its native forms.
std::string PairProductText() {
  KernelTarget t;
  t.backend = Backend::kOpenCL;
  KernelWriter w(t, "test_pair32_layout");
  w.UseHelper(KernelHelper::kPairProduct16);
  w.Kernel("k").Out("int", "y").Body("  y[0] = 0;\n");
  return w.Source();
}

/// The shuffle indices of `macro`'s __builtin_shufflevector, after its two vector operands
/// (each ending in "(p0))," and "(p1)),").
std::vector<int> ShuffleIndices(const std::string& text, const std::string& macro) {
  const size_t def = text.find("#define " + macro + "(p0, p1)");
  if (def == std::string::npos) return {};
  const size_t line_end = text.find('\n', def);
  const size_t at = text.find("(p1)),", def);
  if (at == std::string::npos || at > line_end) return {};
  std::istringstream in(text.substr(at + 6, line_end - at - 6));
  std::vector<int> indices;
  for (int v; in >> v;) {
    indices.push_back(v);
    char comma;
    if (!(in >> comma) || comma != ',') break;
  }
  return indices;
}

/// vpmaddwd over `lanes` 16-bit lanes: lanes / 2 int32 sums of adjacent products, wrapping.
std::vector<int32_t> Pmaddwd(const std::vector<int16_t>& a, const std::vector<int16_t>& b) {
  std::vector<int32_t> out(a.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t sum =
        uint32_t(int32_t(a[2 * i]) * b[2 * i]) + uint32_t(int32_t(a[2 * i + 1]) * b[2 * i + 1]);
    out[i] = int32_t(sum);
  }
  return out;
}

/// __builtin_shufflevector of two byte vectors, converted to 16-bit lanes (zero-extended).
std::vector<int16_t> Zip(const std::vector<int>& indices, const uint8_t* p0, const uint8_t* p1,
                         int width) {
  std::vector<int16_t> out;
  for (int i : indices) out.push_back(int16_t(i < width ? p0[i] : p1[i - width]));
  return out;
}

/// __builtin_astype of `lanes` / 2 copies of the int `word` as 16-bit lanes (little-endian).
std::vector<int16_t> WordLanes(int32_t word, int lanes) {
  std::vector<int16_t> out(lanes);
  std::vector<int32_t> words(lanes / 2, word);
  std::memcpy(out.data(), words.data(), out.size() * 2);
  return out;
}

TEST(Pair32LayoutHost, HalvesGiveThe256BitGroupsAndThePlainSums) {
  const std::string text = PairProductText();
  ASSERT_NE(text.find("__builtin_ia32_pmaddwd512"), std::string::npos) << text;
  ASSERT_NE(text.find("#define MP_PAIR32_WORD(w) __builtin_astype((int16)(w), mp_short32)"),
            std::string::npos)
      << "MP_PAIR32_WORD is no longer a reinterpretation of 16 copies of the word: "
         "update WordLanes";
  ASSERT_NE(text.find("#define MP_PAIR16_WORD(w) __builtin_astype((int8)(w), short16)"),
            std::string::npos);
  const std::vector<int> zip32 = ShuffleIndices(text, "MP_ZIP32");
  const std::vector<int> zip16 = ShuffleIndices(text, "MP_ZIP16");
  ASSERT_EQ(zip32.size(), 32u) << "MP_ZIP32's shuffle not found in the text";
  ASSERT_EQ(zip16.size(), 16u) << "MP_ZIP16's shuffle not found in the text";

  std::mt19937 rng(41);
  long lanes = 0;
  for (int it = 0; it < 4000; ++it) {
    const bool extreme = it % 4 == 0;
    uint8_t x0[16], x1[16];
    for (int j = 0; j < 16; ++j) {
      x0[j] = extreme ? 255 : uint8_t(rng());
      x1[j] = extreme ? 255 : uint8_t(rng());
    }
    const int32_t word =
        extreme ? int32_t((it % 8 ? 0x8000u : 0x7fffu) | (it % 16 ? 0x80000000u : 0x7fff0000u))
                : int32_t(rng());
    const int32_t lo = int16_t(uint32_t(word) & 0xffff), hi = int16_t(uint32_t(word) >> 16);
    // The kernel's wide step: one 512-bit product over pixels 0..15; its .lo accumulates the
    // first 8-pixel group, .hi the second.
    const std::vector<int32_t> wide = Pmaddwd(Zip(zip32, x0, x1, 16), WordLanes(word, 32));
    ASSERT_EQ(wide.size(), 16u);
    for (int half = 0; half < 2; ++half) {
      // The 256-bit step of the same group: MP_ZIP16(xc + 8·half, x1 + 8·half).
      const std::vector<int32_t> narrow =
          Pmaddwd(Zip(zip16, x0 + 8 * half, x1 + 8 * half, 8), WordLanes(word, 16));
      ASSERT_EQ(narrow.size(), 8u);
      for (int l = 0; l < 8; ++l) {
        const int j = 8 * half + l;
        const int32_t plain = x0[j] * lo + x1[j] * hi;
        ASSERT_EQ(wide[j], narrow[l]) << "pixel " << j << " word " << word;
        ASSERT_EQ(wide[j], plain) << "pixel " << j << ": " << int(x0[j]) << "·" << lo << " + "
                                  << int(x1[j]) << "·" << hi;
        ++lanes;
      }
    }
  }
  EXPECT_EQ(lanes, 4000 * 16);
}

}  // namespace
}  // namespace mpcaffe
