// libdnn/gemm_quads.cc — the int8 GEMM's byte-quad tiles (kp = 4 with vw = 16): four k per
// 32-bit lane, 64 products per MP_DPBUSD16 (one vpdpbusd where the device runs AVX-512 VNNI in a
// helper function, dp4a per lane on CUDA, the same integers in portable code elsewhere).
#include <sstream>
#include <string>

#include "libdnn/gemm_internal.h"

namespace mpcaffe::libdnn::gemm_internal {

namespace {

std::string Str(int v) { return std::to_string(v); }

/// The byte quad product multiplies unsigned by signed bytes. Unsigned weights (0 … 255, any zero
/// point) enter it as w − 128 (their top bit flipped: a signed byte), and the kernel adds back
/// 128·Σx, which it then needs beside the products.
bool FlipsWeights(const GemmDesc& d) { return !d.weights_signed; }

/// Whether the quad loop sums the activations: for the output pipeline's z_w·Σx term or for the
/// flipped weights' 128·Σx.
bool QuadSums(const GemmDesc& d, const GemmConfig& c) {
  return KernelSumsActivations(d, c) || FlipsWeights(d);
}

constexpr const char* kFlipWord = "(-0x7f7f7f7f - 1)";  // 0x80808080 as an int
constexpr const char* kOnesWord = "0x01010101";
constexpr const char* kPairFlipWord = "(-0x7fff7fff - 1)";  // 0x80008000 as an int
constexpr const char* kPairOnesWord = "0x00010001";
constexpr const char* kLowBytesWord = "0x00ff00ff";

}  // namespace

/// int16q's split pairs in 16 lanes (kp = 2, vw = 16, the dot tile): 32 k per step, two 16-bit
/// values per 32-bit lane, MP_DPWSSD16 (one 512-bit vpdpwssd in the VNNI helper).
bool SplitsPairQuads(const GemmDesc& d, const GemmConfig& c) {
  return d.type == DataType::kInt16Q && c.kp == GemmConfig::kPairs && c.vw == 16 &&
         c.algorithm == GemmConfig::Algorithm::kDot;
}

bool UsesQuads(const GemmDesc& d, const GemmConfig& c) {
  return (d.type == DataType::kInt8Q && c.kp == GemmConfig::kDot4 && c.vw == 16) ||
         SplitsPairQuads(d, c);
}

namespace {

/// The dot tile's gemm_quads signature (returning `ret`, its sums in `word`s: r, and s with
/// `sums`) and the row pointers ap<i> of op(A) and bp<j> of op(B).
std::string QuadDotHead(const GemmConfig& c, const char* ret, const char* word, bool sums) {
  std::ostringstream f;
  f << "MP_QUAD_FN " << ret << " gemm_quads(const $global Atype* a, const int lda, "
    << "const $global Btype* b, const int ldbk, const int m0, const int n0, const int M, "
    << "const int N, const int K, " << word << "* r";
  if (sums) f << ", " << word << "* s";
  f << ") {\n";
  for (int i = 0; i < c.tm; ++i)
    f << "  const $global Atype* ap" << i << " = a + min(m0 + " << i << ", M - 1) * lda;\n";
  for (int j = 0; j < c.tn; ++j)
    f << "  const $global Btype* bp" << j << " = b + min(n0 + " << j << ", N - 1) * ldbk;\n";
  return f.str();
}

/// kDot: gemm_quads(a, lda, b, ldbk, m0, n0, M, N, K, r, s) runs the tile's K loop over whole
/// blocks of 64 k (op(A)'s and op(B)'s rows are contiguous in K, so a block of each row is one
/// 64-byte load whose lanes hold four neighbouring k) and writes the tile's sums r[i·tn + j]
/// (and the activation rows' or columns' sums s[q]); the kernel takes the rest of K. A function
/// of its own because PoCL compiles the VNNI built-in only outside the work-group function.
std::string QuadDotFunction(const GemmDesc& d, const GemmConfig& c) {
  const bool act_a = ActivationsAreA(d), sums = QuadSums(d, c), flip = FlipsWeights(d);
  const int nsums = act_a ? c.tm : c.tn;
  std::ostringstream f;
  f << QuadDotHead(c, "void", "int", sums);
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      f << "  mp_i32x16 acc" << i << "_" << j << " = MP_QUAD_WORD(0);\n";
  if (sums)
    for (int q = 0; q < nsums; ++q) f << "  mp_i32x16 xs" << q << " = MP_QUAD_WORD(0);\n";
  auto load = [&](const std::string& p, bool weights) {
    const std::string l = "MP_QUAD_LOAD_BYTES(" + p + ")";
    return weights && flip ? "MP_QUAD_XOR(" + l + ", " + kFlipWord + ")" : l;
  };
  auto step = [&](const std::string& k) {
    std::ostringstream t;
    t << "{\n";
    for (int j = 0; j < c.tn; ++j)
      t << "  const mp_i32x16 b" << j << " = " << load("bp" + Str(j) + " + " + k, act_a) << ";\n";
    for (int i = 0; i < c.tm; ++i)
      t << "  const mp_i32x16 a" << i << " = " << load("ap" + Str(i) + " + " + k, !act_a)
        << ";\n";
    if (sums)
      for (int q = 0; q < nsums; ++q)
        t << "  xs" << q << " = MP_DPBUSD16(xs" << q << ", " << (act_a ? "a" : "b") << q
          << ", MP_QUAD_WORD(" << kOnesWord << "));\n";
    for (int i = 0; i < c.tm; ++i)
      for (int j = 0; j < c.tn; ++j) {
        const std::string ai = "a" + Str(i), bj = "b" + Str(j);
        t << "  acc" << i << "_" << j << " = MP_DPBUSD16(acc" << i << "_" << j << ", "
          << (act_a ? ai : bj) << ", " << (act_a ? bj : ai) << ");\n";
      }
    t << "}\n";
    return t.str();
  };
  f << Indent(KLoops(c, step, 64), 2);
  if (sums)
    for (int q = 0; q < nsums; ++q) f << "  s[" << q << "] = MP_QUAD_SUM(xs" << q << ");\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) {
      f << "  r[" << i * c.tn + j << "] = ";
      const std::string sum = "MP_QUAD_SUM(acc" + Str(i) + "_" + Str(j) + ")";
      if (flip)  // Σx·(w − 128) + 128·Σx, wrapping like int32
        f << "(int)((mp_u32)" << sum << " + 128u * (mp_u32)s[" << (act_a ? i : j) << "]);\n";
      else
        f << sum << ";\n";
    }
  f << "}\n";
  return f.str();
}

/// int16q, kDot with vw = 16: gemm_quads(a, lda, b, ldbk, m0, n0, M, N, K, r, s) runs the tile's
/// K loop over whole blocks of 32 k and writes r[i·tn + j] = Σx·w and s[q] = Σx of those k. The
/// 8-lane split form's arithmetic (DotSplitBody) in 16 lanes of two k each: the activation x
/// (0..65535) splits into bytes hi·256 + lo (both 0..255, one AND and one shift for 32 values),
/// the weight enters as w' = w − WCENTER (WCENTER 32768 for unsigned weights, their top bit
/// flipped; 0 for signed), so Σx·w = 256·Σhi·w' + Σlo·w' + WCENTER·Σx in two MP_DPWSSD16 per
/// 32 products; Σx rides along as Σ(x − 32768) against pairs of ones.
std::string PairQuadDotFunction(const GemmDesc& d, const GemmConfig& c) {
  const bool act_a = ActivationsAreA(d);
  const bool sums = SplitSumsActivations(d, c);
  const int nx = act_a ? c.tm : c.tn, nw = act_a ? c.tn : c.tm;
  const std::string xp = act_a ? "ap" : "bp", wp = act_a ? "bp" : "ap";
  auto acc = [&](int x, int w) { return act_a ? Str(x) + "_" + Str(w) : Str(w) + "_" + Str(x); };
  std::ostringstream f;
  f << QuadDotHead(c, "int", "CS", sums);
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) f << "  CS r" << i << "_" << j << " = 0;\n";
  if (sums)
    for (int q = 0; q < nx; ++q) f << "  CS s" << q << " = 0;\n";
  f << "  int k = 0;\n";
  f << "  while (k + 32 <= K) {\n";
  f << "    const int kc = min(K, k + " << kSplitFlushSteps * 32 << ");\n";
  for (int x = 0; x < nx; ++x) {
    if (sums) f << "    mp_i32x16 xp" << x << " = MP_QUAD_WORD(0);\n";
    for (int w = 0; w < nw; ++w)
      f << "    mp_i32x16 lo" << acc(x, w) << " = MP_QUAD_WORD(0), hi" << acc(x, w)
        << " = MP_QUAD_WORD(0);\n";
  }
  // One step of 32 k, or of 16 (`half`: lanes 8..15 zero, their products 0).
  auto step = [&](const std::string& k, bool half) {
    const std::string load = half ? "MP_QUAD_LOAD_HALF_BYTES(" : "MP_QUAD_LOAD_BYTES(";
    std::ostringstream t;
    t << "{\n";
    for (int w = 0; w < nw; ++w) {
      const std::string l = load + wp + Str(w) + " + " + k + ")";
      t << "  const mp_i32x16 w" << w << " = "
        << (d.weights_signed ? l : "MP_QUAD_XOR(" + l + ", " + kPairFlipWord + ")") << ";\n";
    }
    for (int x = 0; x < nx; ++x) {
      t << "  const mp_i32x16 x" << x << " = " << load << xp << x << " + " << k << ");\n";
      t << "  const mp_i32x16 xl" << x << " = MP_QUAD_AND(x" << x << ", " << kLowBytesWord
        << "), xh" << x << " = MP_QUAD_AND(MP_QUAD_SRL(x" << x << ", 8), " << kLowBytesWord
        << ");\n";
      if (sums)
        t << "  xp" << x << " = MP_DPWSSD16(xp" << x << ", MP_QUAD_XOR(x" << x << ", "
          << kPairFlipWord << "), " << (half ? "MP_QUAD_HALF_WORD(" : "MP_QUAD_WORD(")
          << kPairOnesWord << "));\n";
    }
    for (int x = 0; x < nx; ++x)
      for (int w = 0; w < nw; ++w) {
        t << "  lo" << acc(x, w) << " = MP_DPWSSD16(lo" << acc(x, w) << ", xl" << x << ", w" << w
          << ");\n";
        t << "  hi" << acc(x, w) << " = MP_DPWSSD16(hi" << acc(x, w) << ", xh" << x << ", w" << w
          << ");\n";
      }
    t << "}\n";
    return t.str();
  };
  f << Indent(KLoopsTo(
                  c, [&](const std::string& k) { return step(k, false); }, 32, "kc"),
              4);
  // A last 16 k in the lower lanes (the loads stay inside the rows). After 127 whole steps a
  // lane then holds 128 steps' pairs: here both parts are 0..255, so at most
  // 128·2·255·32768 = 2,139,095,040 < 2^31 in magnitude.
  f << "    if (kc == K && K - k >= 16) {\n";
  f << Indent(step("k", true), 6) << "      k += 16;\n    }\n";
  for (int x = 0; x < nx; ++x) {
    if (sums) f << "    s" << x << " += MP_QUAD_SUM64(xp" << x << ");\n";
    for (int w = 0; w < nw; ++w)
      f << "    r" << acc(x, w) << " += 256 * MP_QUAD_SUM64(hi" << acc(x, w)
        << ") + MP_QUAD_SUM64(lo" << acc(x, w) << ");\n";
  }
  f << "  }\n";
  // s = Σ(x − 32768) + 32768 per k so far; r = Σx·w' + WCENTER·Σx.
  for (int q = 0; q < nx && sums; ++q) f << "  s[" << q << "] = s" << q << " + (CS)32768 * k;\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      f << "  r[" << i * c.tn + j << "] = r" << i << "_" << j
        << (d.weights_signed ? "" : " + (CS)32768 * s[" + Str(act_a ? i : j) + "]") << ";\n";
  f << "  return k;\n}\n";
  return f.str();
}

/// kOuter (weights A, neither operand transposed: the convolution's GEMM): gemm_quads(a, lda, b,
/// ldb, m0, n0, M, N, K, t, xs) runs the tile's whole K loop. Per four k, each vector of 16
/// columns of op(B) is 4 rows zipped into byte quads (MP_ZIP4X16) and each row of op(A)
/// contributes one word of its 4 weights (broadcast, MP_QUAD_WORD): one MP_DPBUSD16 per
/// accumulator, 64 products; the last K mod 4 k repeat a row of op(B) against weight bytes 0.
/// Vector j reads columns from min(n0 + 16j, N − 16) (N ≥ 16), so an edge tile's loads stay
/// inside B; the kernel stores only its own columns. Lanes go to t[(i·tn + j)·16 + v] (and the
/// column sums to xs[j·16 + v]).
std::string QuadOuterFunction(const GemmDesc& d, const GemmConfig& c) {
  const bool sums = QuadSums(d, c), flip = FlipsWeights(d);
  std::ostringstream f;
  f << "MP_QUAD_FN void gemm_quads(const $global Atype* a, const int lda, const $global Btype* b,"
    << " const int ldb, const int m0, const int n0, const int M, const int N, const int K, "
    << "int* t" << (sums ? ", int* xs" : "") << ") {\n";
  for (int i = 0; i < c.tm; ++i)
    f << "  const $global mp_u8* ar" << i << " = (const $global mp_u8*)(a + min(m0 + " << i
      << ", M - 1) * lda);\n";
  for (int j = 0; j < c.tn; ++j)
    f << "  const int col" << j << " = min(n0 + " << 16 * j << ", N - 16);\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      f << "  mp_i32x16 acc" << i << "_" << j << " = MP_QUAD_WORD(0);\n";
  if (sums)
    for (int j = 0; j < c.tn; ++j) f << "  mp_i32x16 xs" << j << " = MP_QUAD_WORD(0);\n";
  // One step: `rows` valid k from k (4, or K mod 4 for the last).
  auto step = [&](const std::string& k, int rows) {
    std::ostringstream t;
    t << "{\n";
    for (int j = 0; j < c.tn; ++j) {
      t << "  const $global mp_u8* bc" << j << " = (const $global mp_u8*)(b + (" << k
        << ") * ldb + col" << j << ");\n";
      std::string ptrs;
      for (int q = 0; q < 4; ++q)
        ptrs += std::string(q ? ", " : "") + "bc" + Str(j) + " + " +
                (q < rows ? Str(q) + " * ldb" : "0");
      t << "  const mp_i32x16 v" << j << " = MP_ZIP4X16(" << ptrs << ");\n";
      if (sums) {
        int ones = 0;  // a 1 in each valid k's byte
        for (int q = 0; q < rows; ++q) ones |= 1 << (8 * q);
        t << "  xs" << j << " = MP_DPBUSD16(xs" << j << ", v" << j << ", MP_QUAD_WORD(" << ones
          << "));\n";
      }
    }
    for (int i = 0; i < c.tm; ++i) {
      std::string word;
      for (int q = 0; q < rows; ++q) {
        const std::string byte = "(mp_u32)ar" + Str(i) + "[(" + k + ") + " + Str(q) + "]";
        word += std::string(q ? " | " : "") + "(" + (flip ? "(" + byte + " ^ 0x80u)" : byte) +
                " << " + Str(8 * q) + ")";
      }
      t << "  const mp_i32x16 w" << i << " = MP_QUAD_WORD((int)(" << word << "));\n";
      for (int j = 0; j < c.tn; ++j)
        t << "  acc" << i << "_" << j << " = MP_DPBUSD16(acc" << i << "_" << j << ", v" << j
          << ", w" << i << ");\n";
    }
    t << "}\n";
    return t.str();
  };
  f << Indent(KLoops(c, [&](const std::string& k) { return step(k, 4); }, 4), 2);
  for (int rows = 1; rows < 4; ++rows)
    f << "  if (K - k == " << rows << ")\n" << Indent(step("k", rows), 2);
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      f << "  MP_QUAD_STORE(acc" << i << "_" << j << ", t + " << (i * c.tn + j) * 16 << ");\n";
  if (sums)
    for (int j = 0; j < c.tn; ++j) f << "  MP_QUAD_STORE(xs" << j << ", xs + " << 16 * j << ");\n";
  f << "}\n";
  return f.str();
}

std::string OuterBodyText(const GemmDesc& d, const GemmConfig& c) {
  const bool sums = QuadSums(d, c), flip = FlipsWeights(d);
  const int tiles = c.tm * c.tn;
  std::ostringstream s;
  s << "const int n0 = $global_id(" << (c.mf ? 1 : 0) << ") * " << c.cols_per_item() << ";\n";
  s << "const int m0 = $global_id(" << (c.mf ? 0 : 1) << ") * " << c.tm << ";\n";
  s << "if (n0 >= N || m0 >= M) return;\n";
  s << "int t[" << tiles * 16 << "];\n";
  if (sums) s << "int xq[" << c.tn * 16 << "];\n";
  s << "gemm_quads(a, lda, b, ldb, m0, n0, M, N, K, t" << (sums ? ", xq" : "") << ");\n";
  s << "for (int e = 0; e < " << tiles << "; ++e) {\n";
  s << "  const int ti = e / " << c.tn << ", tj = e - ti * " << c.tn << ";\n";
  s << "  const int own = n0 + tj * 16, col = min(own, N - 16);\n";
  s << "  for (int v = 0; v < 16; ++v) {\n";
  s << "    const int m = m0 + ti, n = col + v;\n";
  s << "    if (m < M && n >= own && n < N) {\n";
  // Σx·(w − 128) + 128·Σx for flipped weights, wrapping like int32.
  s << "      const CS x = " << (flip ? "(int)((mp_u32)t[e * 16 + v] + 128u * (mp_u32)xq[tj * 16 + v])"
                                      : "t[e * 16 + v]")
    << ";\n";
  s << Indent(Epilogue(d, "x", sums ? "xq[tj * 16 + v]" : "0", false), 6);
  s << "    }\n  }\n}\n";
  return s.str();
}

}  // namespace

std::string QuadFunction(const GemmDesc& d, const GemmConfig& c) {
  if (SplitsPairQuads(d, c)) return PairQuadDotFunction(d, c);
  return c.algorithm == GemmConfig::Algorithm::kDot ? QuadDotFunction(d, c)
                                                    : QuadOuterFunction(d, c);
}

std::string QuadOuterBody(const GemmDesc& d, const GemmConfig& c) { return OuterBodyText(d, c); }

std::string QuadDotBody(const GemmDesc& d, const GemmConfig& c) {
  const bool act_a = ActivationsAreA(d), sums = KernelSumsActivations(d, c);
  const int nsums = act_a ? c.tm : c.tn;
  const bool pairs = SplitsPairQuads(d, c);
  const bool fn_sums = pairs ? SplitSumsActivations(d, c) : QuadSums(d, c);
  const std::string word = pairs ? "CS" : "int";
  std::ostringstream s;
  s << DotTileStart(d, c);
  s << word << " rq[" << c.tm * c.tn << "];\n";
  if (fn_sums) s << word << " sq[" << nsums << "];\n";
  s << (pairs ? "int k = " : "") << "gemm_quads(a, lda, b, ldbk, m0, n0, M, N, K, rq"
    << (fn_sums ? ", sq" : "") << ");\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      s << "CS r" << i << "_" << j << " = rq[" << i * c.tn + j << "];\n";
  if (sums)
    for (int q = 0; q < nsums; ++q) s << "CS s" << q << " = sq[" << q << "];\n";
  if (!pairs) s << "int k = K - K % 64;\n";
  s << DotTail(d, c, sums, /*fold=*/false, sums);
  return s.str();
}

}  // namespace mpcaffe::libdnn::gemm_internal
