// tests/codegen/helper_forms_test.cc — every form of the x86-specific helpers of the OpenCL kernel
// text (KernelTarget::helper_forms: the built-ins the compiler targets, the 256-bit ones at most,
// the portable ones) against plain integer arithmetic on the host, on the device: 16-bit pair
// products (MP_MADD16; MP_MADD32 with its zip and word broadcast, where the form defines it) and
// byte pair products (MP_MADDUBS, MP_WIDEN16). One small program per form; each test says which
// branches the device's compiler took, and which it could not take.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"

namespace mpcaffe {
namespace {

using Forms = KernelTarget::HelperForms;

const char* FormName(Forms f) {
  switch (f) {
    case Forms::kNative:
      return "native";
    case Forms::kUpTo256Bit:
      return "upTo256Bit";
    case Forms::kPortable:
      return "portable";
  }
  return "?";
}

/// Which branch the compiler took, written to flags[0..2] by work-item 0: the AVX2 built-ins,
/// the AVX-512 BW built-in, MP_MADD32 defined in any form.
const char* kBranchFlags = R"(  if ($global_id(0) == 0) {
#if defined(__AVX2__) && !defined(MP_PORTABLE_FORMS)
    flags[0] = 1;
#endif
#if defined(__AVX512BW__) && !defined(MP_PORTABLE_FORMS) && !defined(MP_NO_512BIT_FORMS)
    flags[1] = 1;
#endif
#if defined(MP_MADD32)
    flags[2] = 1;
#endif
  }
)";

std::string Describe(const std::vector<int32_t>& flags) {
  std::string s = flags[0] ? "AVX2 built-ins" : "portable 256-bit forms";
  s += flags[1] ? ", the 512-bit built-in" : flags[2] ? ", the portable 512-bit form" : "";
  return s;
}

class HelperFormsTest : public testing::TestWithParam<Forms> {
 protected:
  void SetUp() override {
    if (DefaultDevice().backend() != Backend::kOpenCL)
      GTEST_SKIP() << "the x86 branches are OpenCL text (CUDA's forms: test_cuda's host checks)";
  }
  KernelTarget Target() const {
    KernelTarget t = KernelTarget::Of(DefaultDevice());
    t.helper_forms = GetParam();
    return t;
  }
};

// MP_MADD16 on 8 lanes and, where the form defines it, MP_MADD32 on 16 (x0[j]·lo + x1[j]·hi of
// two byte rows zipped and a word's 16-bit halves broadcast), over the whole ranges: 16-bit
// operands with one side kept within ±32767 (the helpers' contract: pair sums fit int32).
TEST_P(HelperFormsTest, PairProductsMatchTheHost) {
  Device& dev = DefaultDevice();
  const int groups = 256;
  std::mt19937 rng(31);
  std::vector<int16_t> xs(groups * 16), ys(groups * 16);
  std::vector<uint8_t> xa(groups * 16), xb(groups * 16);
  std::vector<int32_t> words(groups);
  for (int i = 0; i < groups * 16; ++i) {
    const bool extreme = (i / 16) % 4 == 0;
    xs[i] = extreme ? (i % 2 ? 32767 : -32768) : int16_t(rng());
    ys[i] = extreme ? (i % 3 ? -32767 : 32767) : int16_t(int(rng() % 65535) - 32767);
    xa[i] = extreme ? 255 : uint8_t(rng());
    xb[i] = extreme ? 255 : uint8_t(rng());
  }
  for (int g = 0; g < groups; ++g)
    words[g] = g % 4 == 0
                   ? int32_t((g % 8 ? 0x8000u : 0x7fffu) | (g % 16 ? 0x80000000u : 0x7fff0000u))
                   : int32_t(rng());
  KernelWriter w(Target(), "test_helper_forms");
  w.UseHelper(KernelHelper::kPairProduct16);
  w.Kernel("pair_products")
      .In("mp_i16", "xs")
      .In("mp_i16", "ys")
      .In("mp_u8", "xa")
      .In("mp_u8", "xb")
      .In("int", "wp")
      .Out("int", "y16")
      .Out("int", "y32")
      .Out("int", "flags")
      .Body(std::string(kBranchFlags) +
            "  const int g = $global_id(0);\n"
            "  int8 acc = (int8)(g);\n"
            "  acc += MP_MADD16(MP_SHORT16_LOAD(xs + g * 16), MP_SHORT16_LOAD(ys + g * 16));\n"
            "  vstore8(acc, 0, y16 + g * 8);\n"
            "#if defined(MP_MADD32)\n"
            "  int16 z = (int16)(g);\n"
            "  z += MP_MADD32(MP_ZIP32(xa + g * 16, xb + g * 16), MP_PAIR32_WORD(wp[g]));\n"
            "  vstore16(z, 0, y32 + g * 16);\n"
            "#endif\n");
  Kernel k = dev.BuildProgram(w.Source())->GetKernel("pair_products");
  auto dxs = dev.Alloc<int16_t>(xs.size()), dys = dev.Alloc<int16_t>(ys.size());
  auto dxa = dev.Alloc<uint8_t>(xa.size()), dxb = dev.Alloc<uint8_t>(xb.size());
  auto dw = dev.Alloc<int32_t>(groups), d16 = dev.Alloc<int32_t>(groups * 8),
       d32 = dev.Alloc<int32_t>(groups * 16), dflags = dev.Alloc<int32_t>(3);
  const std::vector<int32_t> zeros(3, 0);
  dev.Write(dxs, xs.data(), xs.size()), dev.Write(dys, ys.data(), ys.size());
  dev.Write(dxa, xa.data(), xa.size()), dev.Write(dxb, xb.data(), xb.size());
  dev.Write(dw, words.data(), words.size()), dev.Write(dflags, zeros.data(), 3);
  k.Arg(dxs).Arg(dys).Arg(dxa).Arg(dxb).Arg(dw).Arg(d16).Arg(d32).Arg(dflags);
  k.Launch({size_t(groups), 1, 1});
  std::vector<int32_t> got16(groups * 8), got32(groups * 16), flags(3);
  dev.Read(d16, got16.data(), got16.size());
  dev.Read(d32, got32.data(), got32.size());
  dev.Read(dflags, flags.data(), 3);

  int bad = 0;
  for (int g = 0; g < groups && bad < 10; ++g)
    for (int l = 0; l < 8; ++l) {
      const int i = g * 16 + 2 * l;
      const int64_t want = g + int64_t(xs[i]) * ys[i] + int64_t(xs[i + 1]) * ys[i + 1];
      if (got16[g * 8 + l] != want && ++bad)
        ADD_FAILURE() << "MP_MADD16 group " << g << " lane " << l << ": want " << want << ", got "
                      << got16[g * 8 + l];
    }
  // The portable form defines MP_MADD32 wherever the compiler takes 32-lane vectors; the
  // 256-bit cap never; native where the compiler targets AVX-512 BW.
  if (GetParam() == Forms::kPortable && DefaultDevice().info().vectors_beyond_16_lanes)
    EXPECT_EQ(flags[2], 1) << "portable MP_MADD32 undefined";
  if (GetParam() == Forms::kUpTo256Bit) EXPECT_EQ(flags[2], 0) << "MP_MADD32 past the cap";
  if (GetParam() == Forms::kPortable) EXPECT_EQ(flags[0], 0) << "a built-in in the portable form";
  if (flags[2])
    for (int g = 0; g < groups && bad < 10; ++g)
      for (int j = 0; j < 16; ++j) {
        const int32_t lo = int16_t(uint32_t(words[g]) & 0xffff);
        const int32_t hi = int16_t(uint32_t(words[g]) >> 16);
        const int32_t want = g + xa[g * 16 + j] * lo + xb[g * 16 + j] * hi;
        if (got32[g * 16 + j] != want && ++bad)
          ADD_FAILURE() << "MP_MADD32 group " << g << " lane " << j << ": want " << want << ", got "
                        << got32[g * 16 + j];
      }
  std::printf("[ forms    ] %s on %s: %s\n", FormName(GetParam()), dev.Describe().c_str(),
              Describe(flags).c_str());
}

// MP_MADDUBS (unsigned activation bytes × signed weight bytes in [−8, 7]) summed over 8 steps in
// 16-bit lanes, then MP_WIDEN16 into the int32 lanes, as the int8w4 GEMMs use them; activations
// 255 with weights −8 / 7 in every fourth group.
TEST_P(HelperFormsTest, BytePairProductsMatchTheHost) {
  Device& dev = DefaultDevice();
  const int groups = 256;
  std::mt19937 rng(37);
  std::vector<uint8_t> xb(groups * 32), wb(groups * 32);
  for (int i = 0; i < groups * 32; ++i) {
    const bool extreme = (i / 32) % 4 == 0;
    xb[i] = extreme ? 255 : uint8_t(rng());
    wb[i] = uint8_t(int8_t(extreme ? ((rng() & 1) ? 7 : -8) : int(rng() % 16) - 8));
  }
  KernelWriter w(Target(), "test_helper_forms");
  w.UseHelper(KernelHelper::kBytePairProduct16);
  w.Kernel("byte_pair_products")
      .In("int", "x")
      .In("int", "wt")
      .Out("int", "y")
      .Out("int", "flags")
      .Body(std::string(kBranchFlags) +
            "  const int g = $global_id(0);\n"
            "  const mp_i32x8 a = MP_I32X8_LOAD(x + g * 8), b = MP_I32X8_LOAD(wt + g * 8);\n"
            "  mp_i16x16 p = (mp_i16x16)(0);\n"
            "  for (int s = 0; s < 8; ++s) p += MP_MADDUBS(a, b);\n"
            "  mp_i32x8 acc = (mp_i32x8)(g);\n"
            "  acc += MP_WIDEN16(p);\n"
            "  MP_I32X8_STORE(acc, y + g * 8);\n");
  Kernel k = dev.BuildProgram(w.Source())->GetKernel("byte_pair_products");
  std::vector<int32_t> xw(groups * 8), ww(groups * 8);  // the bytes as little-endian words
  std::memcpy(xw.data(), xb.data(), xb.size());
  std::memcpy(ww.data(), wb.data(), wb.size());
  auto dx = dev.Alloc<int32_t>(xw.size()), dw = dev.Alloc<int32_t>(ww.size());
  auto dy = dev.Alloc<int32_t>(groups * 8), dflags = dev.Alloc<int32_t>(3);
  const std::vector<int32_t> zeros(3, 0);
  dev.Write(dx, xw.data(), xw.size()), dev.Write(dw, ww.data(), ww.size());
  dev.Write(dflags, zeros.data(), 3);
  k.Arg(dx).Arg(dw).Arg(dy).Arg(dflags);
  k.Launch({size_t(groups), 1, 1});
  std::vector<int32_t> got(groups * 8), flags(3);
  dev.Read(dy, got.data(), got.size());
  dev.Read(dflags, flags.data(), 3);
  int bad = 0;
  for (int g = 0; g < groups && bad < 10; ++g)
    for (int l = 0; l < 8; ++l) {
      int32_t want = g;
      for (int b = 4 * l; b < 4 * l + 4; ++b)
        want += 8 * int32_t(xb[g * 32 + b]) * int8_t(wb[g * 32 + b]);
      if (got[g * 8 + l] != want && ++bad)
        ADD_FAILURE() << "group " << g << " lane " << l << ": want " << want << ", got "
                      << got[g * 8 + l];
    }
  if (GetParam() == Forms::kPortable) EXPECT_EQ(flags[0], 0) << "a built-in in the portable form";
  std::printf("[ forms    ] %s on %s: %s\n", FormName(GetParam()), dev.Describe().c_str(),
              flags[0] ? "vpmaddubsw / vpmaddwd built-ins" : "portable byte pair products");
}

// MP_DPBUSD16 on MP_ZIP4X16's quads of 4 byte rows (activations 0..255) and broadcast weight
// words (signed bytes, −128 and 127 in every fourth group), summed over 8 steps inside an
// MP_QUAD_FN function as the int8 pointwise kernel's K loop does: the VNNI built-in in the
// native form where the device runs it in a helper (KernelTarget::byte_quads_in_helper), the
// portable arithmetic otherwise.
TEST_P(HelperFormsTest, ByteQuadProductsMatchTheHost) {
  Device& dev = DefaultDevice();
  const int groups = 256, steps = 8;  // a multiple of any work-group size the launch picks
  std::mt19937 rng(41);
  std::vector<uint8_t> xb(size_t(groups) * steps * 64);
  std::vector<int32_t> words(size_t(groups) * steps);
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = (i / 64) % 4 == 0 ? 255 : uint8_t(rng());
  for (size_t i = 0; i < words.size(); ++i)
    words[i] = i % 4 == 0 ? int32_t(i % 8 ? 0x80808080u : 0x7f7f807fu) : int32_t(rng());
  KernelWriter w(Target(), "test_helper_forms");
  w.UseHelper(KernelHelper::kByteQuadProduct16);
  w.Function(
      "MP_QUAD_FN void quad_steps(const $global mp_u8* x, const $global int* wt, mp_i32x16* acc) {\n"
      "  mp_i32x16 a = acc[0];\n"
      "  for (int s = 0; s < 8; ++s)\n"
      "    a = MP_DPBUSD16(a, MP_ZIP4X16(x + 64 * s, x + 64 * s + 16, x + 64 * s + 32,\n"
      "                                  x + 64 * s + 48), MP_QUAD_WORD(wt[s]));\n"
      "  acc[0] = a;\n"
      "}\n");
  w.Kernel("byte_quad_products")
      .In("mp_u8", "x")
      .In("int", "wt")
      .Out("int", "y")
      .Out("int", "flags")
      .Body(
          "  const int g = $global_id(0);\n"
          "  if (g == 0) {\n"
          "#if defined(MP_BYTE_QUADS_VNNI) && !defined(MP_PORTABLE_FORMS) && "
          "!defined(MP_NO_512BIT_FORMS)\n"
          "    flags[0] = 1;\n"
          "#endif\n"
          "  }\n"
          "  mp_i32x16 acc[1];\n"
          "  acc[0] = (mp_i32x16)(g - 1000000);\n"
          "  quad_steps(x + g * 512, wt + g * 8, acc);\n"
          "  vstore16(acc[0], 0, y + g * 16);\n");
  const std::string text = w.Source();
  Kernel k = dev.BuildProgram(text)->GetKernel("byte_quad_products");
  auto dx = dev.Alloc<uint8_t>(xb.size());
  auto dw = dev.Alloc<int32_t>(words.size());
  auto dy = dev.Alloc<int32_t>(size_t(groups) * 16), dflags = dev.Alloc<int32_t>(1);
  const int32_t zero = 0;
  dev.Write(dx, xb.data(), xb.size()), dev.Write(dw, words.data(), words.size());
  dev.Write(dflags, &zero, 1);
  k.Arg(dx).Arg(dw).Arg(dy).Arg(dflags);
  k.Launch({size_t(groups), 1, 1});
  std::vector<int32_t> got(size_t(groups) * 16);
  int32_t vnni = 0;
  dev.Read(dy, got.data(), got.size());
  dev.Read(dflags, &vnni, 1);
  int bad = 0;
  for (int g = 0; g < groups && bad < 10; ++g)
    for (int l = 0; l < 16; ++l) {
      int32_t want = g - 1000000;
      for (int s = 0; s < steps; ++s)
        for (int j = 0; j < 4; ++j)
          want += int32_t(xb[size_t(g) * 512 + 64 * s + 16 * j + l]) *
                  int8_t(uint32_t(words[size_t(g) * 8 + s]) >> (8 * j));
      if (got[g * 16 + l] != want && ++bad)
        ADD_FAILURE() << "group " << g << " lane " << l << ": want " << want << ", got "
                      << got[g * 16 + l];
    }
  const bool vnni_expected =
      GetParam() == Forms::kNative && KernelTarget::Of(dev).byte_quads_in_helper;
  EXPECT_EQ(vnni != 0, vnni_expected);
  EXPECT_EQ(text.find("#define MP_BYTE_QUADS_VNNI") != std::string::npos,
            KernelTarget::Of(dev).byte_quads_in_helper);
  std::printf("[ forms    ] %s on %s: %s\n", FormName(GetParam()), dev.Describe().c_str(),
              vnni ? "vpdpbusd in a noinline AVX-512 VNNI helper"
                   : "portable byte quad products");
}

// MP_QUAD_SLIDE16 at strides 1 and 2, first bytes 0 and 4, inside an MP_QUAD_FN function as the
// int8 depthwise kernel's byte-quad form calls it, with MP_QUAD_KEEP64 ranges that start before
// the row, inside it, and end inside or past its 64 bytes, and replacement bytes 0 … 255: the
// shuffle of the VNNI form where the device runs it, the portable loop otherwise.
TEST_P(HelperFormsTest, SlidingByteQuadsMatchTheHost) {
  Device& dev = DefaultDevice();
  const int groups = 256;  // a multiple of any work-group size the launch picks
  const int slides[4][2] = {{1, 0}, {1, 4}, {2, 0}, {2, 4}};
  std::mt19937 rng(43);
  std::vector<uint8_t> xb(size_t(groups + 1) * 64);
  for (auto& b : xb) b = uint8_t(rng());
  KernelWriter w(Target(), "test_helper_forms");
  w.UseHelper(KernelHelper::kByteQuadSlide16);
  std::string f =
      "MP_QUAD_FN void slides(const $global mp_u8* p, int lo, int hi, int z, int* out) {\n"
      "  const mp_quad_keep keep = MP_QUAD_KEEP64(lo, hi);\n";
  for (int i = 0; i < 4; ++i)
    f += "  MP_QUAD_STORE(MP_QUAD_SLIDE16(p, keep, z, " + std::to_string(slides[i][0]) + ", " +
         std::to_string(slides[i][1]) + "), out + " + std::to_string(16 * i) + ");\n";
  w.Function(f + "}\n");
  w.Kernel("sliding_byte_quads")
      .In("mp_u8", "x")
      .Out("int", "y")
      .Body(
          "  const int g = $global_id(0);\n"
          "  int out[64];\n"
          "  slides(x + 64 * g, g % 5 - 2, 70 - g % 45, (g * 37) & 255, out);\n"
          "  for (int i = 0; i < 64; ++i) y[64 * g + i] = out[i];\n");
  Kernel k = dev.BuildProgram(w.Source())->GetKernel("sliding_byte_quads");
  auto dx = dev.Alloc<uint8_t>(xb.size());
  auto dy = dev.Alloc<int32_t>(size_t(groups) * 64);
  dev.Write(dx, xb.data(), xb.size());
  k.Arg(dx).Arg(dy);
  k.Launch({size_t(groups), 1, 1});
  std::vector<int32_t> got(size_t(groups) * 64);
  dev.Read(dy, got.data(), got.size());
  int bad = 0;
  for (int g = 0; g < groups; ++g) {
    const int lo = g % 5 - 2, hi = 70 - g % 45, z = (g * 37) & 255;
    for (int i = 0; i < 4; ++i)
      for (int l = 0; l < 16; ++l) {
        uint32_t want = 0;
        for (int b = 0; b < 4; ++b) {
          const int at = slides[i][0] * l + slides[i][1] + b;
          want |= uint32_t(at >= lo && at < hi ? xb[size_t(g) * 64 + at] : z) << (8 * b);
        }
        if (uint32_t(got[size_t(g) * 64 + 16 * i + l]) != want && ++bad <= 10)
          ADD_FAILURE() << "group " << g << " slide " << i << " lane " << l << ": want " << want
                        << ", got " << uint32_t(got[size_t(g) * 64 + 16 * i + l]);
      }
  }
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(Forms, HelperFormsTest,
                         testing::Values(Forms::kNative, Forms::kUpTo256Bit, Forms::kPortable),
                         [](const testing::TestParamInfo<Forms>& info) {
                           return std::string(FormName(info.param));
                         });

}  // namespace
}  // namespace mpcaffe
