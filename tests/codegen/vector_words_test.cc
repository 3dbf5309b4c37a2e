// tests/codegen/vector_words_test.cc — VectorWords without a device: the OpenCL C forms of the
// vector words, the error a dialect without a row gives, and KernelTarget::vector_builtins
// following the dialect row.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "codegen/kernel_writer.h"
#include "codegen/vector_words.h"

namespace mpcaffe {
namespace {

TEST(VectorWords, OpenCLSpellsTheBuiltIns) {
  const VectorWords v(KernelTarget{});
  EXPECT_EQ(v.Type("int", 8), "int8");
  EXPECT_EQ(v.Load(16, "x + i"), "vload16(0, x + i)");
  EXPECT_EQ(v.LoadHalf(8, "(p)"), "vload_half8(0, (p))");
  EXPECT_EQ(v.Store(8, "f", "c + n"), "vstore8(f, 0, c + n)");
  EXPECT_EQ(v.StoreHalf(8, "out", "y + at"), "vstore_half8_rte(out, 0, y + at)");
  EXPECT_EQ(v.Convert("uchar4", "r"), "convert_uchar4(r)");
  EXPECT_EQ(v.As("uint8", "m"), "as_uint8(m)");
  EXPECT_EQ(v.Select("a", "b", "c > 0"), "select(a, b, c > 0)");
  EXPECT_EQ(v.Clamp("x", "lo", "hi"), "clamp(x, lo, hi)");
  EXPECT_EQ(v.Abs("x"), "abs(x)");
  EXPECT_EQ(v.Even(v.Load(16, "(p)")), "vload16(0, (p)).even");
  EXPECT_EQ(v.Odd("rqv"), "rqv.odd");
  // Stride-2 columns: one load where 2·lanes is a vector type, two loads of 16 beyond.
  EXPECT_EQ(v.LoadEven("float", 8, "x + c"), "vload16(0, x + c).even");
  EXPECT_EQ(v.LoadEven("float", 16, "x + c"),
            "(float16)(vload16(0, x + c).even, vload16(0, (x + c) + 16).even)");
  EXPECT_THROW(v.LoadEven("float", 17, "x"), std::invalid_argument);
  EXPECT_EQ(v.Splat("long8", "hi"), "(long8)(hi)");
  EXPECT_EQ(v.Of("int4", "a, b, c, d"), "(int4)(a, b, c, d)");
  EXPECT_EQ(v.Lane("ix0", 11), "ix0.sb");
  EXPECT_EQ(v.Lanes("o", 8, 4), "o.s89ab");
  EXPECT_THROW(v.Lanes("o", 14, 4), std::invalid_argument);
}

// A row's last, partial vector: one move per power of two in the count, each from the lanes
// left after the larger ones (numerics on a device: ConvByteQuads.DirectKernelGrid*, whose
// output rows end in 1 … 15 columns).
TEST(VectorWords, MoveStoreFirstTakesEachPowerOfTwoFromTheLanesLeft) {
  const VectorWords v(KernelTarget{});
  const std::string s = v.MoveStoreFirst("uchar", 8, "q", "y + at", "cols");
  EXPECT_NE(s.find("if ((cols) & 4) {\n    MP_STORE_UCHAR4(q.s0123, (y + at) + mp_at);"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("const uchar4 mp_left4 = ((cols) & 4) ? q.s4567 : q.s0123;"), std::string::npos)
      << s;
  EXPECT_NE(s.find("MP_STORE_UCHAR2(mp_left4.s01, (y + at) + mp_at);"), std::string::npos) << s;
  EXPECT_NE(s.find("((y + at) + mp_at)[0] = mp_left2.s0;"), std::string::npos) << s;
  EXPECT_EQ(s.find("MP_STORE_UCHAR8"), std::string::npos) << s;  // 8 lanes: at most 7 left
  EXPECT_THROW(v.MoveStoreFirst("uchar", 12, "q", "y", "n"), std::invalid_argument);
  EXPECT_THROW(v.MoveStoreFirst("uchar", 32, "q", "y", "n"), std::invalid_argument);
}

TEST(VectorWords, ADialectWithoutARowNamesTheWord) {
  const KernelTarget cuda = KernelTarget::Cuda(80);
  EXPECT_FALSE(cuda.vector_builtins);
  EXPECT_TRUE(KernelTarget{}.vector_builtins);
  const VectorWords v(cuda);
  try {
    v.Load(8, "p");
    FAIL() << "CUDA has no vector load row";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cuda dialect has no vector word 'load'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(v.Requant(8, "r", "val", "m", "s"), std::invalid_argument);
}

// The requantization's one definition, in the words: 64-bit lanes, $long_of_int for the
// comparisons with constants, the int32 fast path of RequantClamp (numerics are checked on a
// device by tests/libdnn/gemm_test.cc's VectorRequant and VectorRequantClamp).
TEST(VectorWords, RequantIsWrittenInTheWords) {
  const VectorWords v(KernelTarget{});
  const std::string r = v.Requant(4, "r", "val", "m", "s");
  EXPECT_NE(r.find("const long4 r_rr = $long_of_int(31 - (s), 4);"), std::string::npos) << r;
  EXPECT_NE(r.find("convert_ulong4(abs(val)) * convert_ulong4(as_uint4(m))"), std::string::npos)
      << r;
  const std::string c = v.RequantClamp(8, "q", "acc", "m", "s", "z", nullptr, "0", "255", 2);
  EXPECT_NE(c.find("if (q_rr >= 34 && q_rr <= 62) {"), std::string::npos) << c;
  EXPECT_NE(c.find("q = clamp(q, (int8)(0), (int8)(255));"), std::string::npos) << c;
}

}  // namespace
}  // namespace mpcaffe
