// libdnn/gemm_int4.cc — GEMMs with 4-bit weights (GemmDesc::weight_bits = 4): the description's
// checks, the weight operand's size, and the kernel that unpacks the nibbles to int8 for the
// int8 kernels (the exact fallback every path has).
#include <functional>
#include <sstream>
#include <string>

#include "device/error.h"
#include "libdnn/gemm_internal.h"
#include "libdnn/int4_internal.h"
#include "quant/int4.h"

namespace mpcaffe::libdnn {

size_t GemmDesc::weight_bytes() const {
  if (weight_bits == 4) return size_t(channels()) * quant::Int4RowBytes(size_t(K));
  const bool wa = weights == WeightOperand::kA;
  const size_t rows = wa ? (trans_a ? K : M) : (trans_b ? N : K);
  const size_t ld = wa ? lda_or_packed() : ldb_or_packed();
  return rows * ld * SizeOf(type);
}

namespace int4 {

void ValidateWeightBits(const GemmDesc& d) {
  if (d.weight_bits == 8) return;
  auto fail = [&](const std::string& what) { throw Error("GEMM " + d.ToString() + ": " + what); };
  if (d.weight_bits != 4) fail("weight_bits must be 8 or 4");
  if (d.type != DataType::kInt8Q) fail("4-bit weights (weight_bits 4) need type int8q");
  if (!d.weights_signed) fail("4-bit weights are signed: set weights_signed");
  if (d.weight_zero) fail("4-bit weights are symmetric: set weight_zero to false (z_w = 0)");
  const bool wa = d.weights == WeightOperand::kA;
  if (wa ? d.trans_a : !d.trans_b)
    fail(std::string("4-bit weights need K contiguous per output channel: weights A not "
                     "transposed or weights B transposed (here weights ") +
         (wa ? "A transposed" : "B not transposed") + ")");
  const int ld = wa ? d.lda_or_packed() : d.ldb_or_packed();
  if (ld != d.K)
    fail(std::string(wa ? "lda" : "ldb") + " of packed 4-bit weights must be 0 or K (rows of " +
         "ceil(K/2) bytes), not " + std::to_string(ld));
}

void AddUnpackKernel(KernelWriter& w) {
  // A work-item per packed byte: its low nibble is the even k, its high nibble the odd k.
  w.Kernel(UnpackKernelName())
      .In("mp_u8", "packed")
      .Out("mp_i8", "out")
      .Value("int", "channels")
      .Value("int", "K")
      .Body(R"(  const int RB = (K + 1) / 2;
  $loop(i, channels * RB) {
    const int o = i / RB, b = i - o * RB;
    const int v = (int)packed[i];
    const int k = 2 * b;
    out[o * K + k] = (mp_i8)(((v & 15) ^ 8) - 8);
    if (k + 1 < K) out[o * K + k + 1] = (mp_i8)(((v >> 4) ^ 8) - 8);
  }
)");
}

std::string UnpackSource(const KernelTarget& target) {
  KernelWriter w(target, "int4_unpack");
  AddUnpackKernel(w);
  return w.Source();
}

Event Unpack(Kernel& kernel, const BufferRef& packed, DeviceMemory* out, int channels, int k,
             Queue* queue) {
  kernel.ArgBuffer(packed.mem, packed.byte_offset, 1)
      .ArgBuffer(out, 0, 1)
      .Arg(int32_t{channels})
      .Arg(int32_t{k});
  return kernel.Launch1D(size_t(channels) * quant::Int4RowBytes(size_t(k)), queue);
}

}  // namespace int4
}  // namespace mpcaffe::libdnn

// ---------------------------------------------------------------------------------------------
// The native kernels (GemmConfig::kU8S4), written once for both dialects: vectors, their loads,
// stores and bit-casts, the nibble unpack and the byte pair products are the names of
// KernelHelper::kBytePairProduct16, the quad dot tile's those of KernelHelper::
// kByteQuadProduct16 (codegen/dialect.cc and dialect_quads.cc spell them per dialect).

namespace mpcaffe::libdnn::int4 {
namespace {

std::string Str(int v) { return std::to_string(v); }

/// Steps of byte pair products summed in 16-bit lanes before widening: each lane adds one pair
/// per step, |pair| ≤ 2·255·8 = 4080, and 8·4080 = 32640 ≤ 32767.
constexpr int kSteps16 = 8;

/// Whether the kernel is the outer product (weights A, activations B packed in 4-k words).
bool Outer(const GemmConfig& c) { return c.algorithm == GemmConfig::Algorithm::kOuter; }

/// Rows of activations the dot kernel reads: M (weights B) or the one column of B (weights A).
int ActivationRows(const GemmDesc& d) { return d.weights == WeightOperand::kB ? d.M : 1; }

/// Whether the dot kernel multiplies byte quads (vw = 16: 64 k per MP_DPBUSD16) rather than
/// byte pairs (vw = 8: 32 k per MP_MADDUBS).
bool Quads(const GemmConfig& c) { return !Outer(c) && c.vw == 16; }

/// Columns of the outer kernel's packed activations: N rounded up to whole tiles.
int PaddedColumns(const GemmDesc& d, const GemmConfig& c) {
  const int tile = c.tn * 8;
  return (d.N + tile - 1) / tile * tile;
}

/// The GEMM epilogue for one element (m, n) of value `x`, guarded.
std::string Store(const GemmDesc& d, const std::string& m, const std::string& n,
                  const std::string& x) {
  std::string s = "{\n  const int m = " + m + ", n = " + n + ";\n  if (m < M && n < N) {\n";
  s += "    const int xv = " + x + ";\n";
  const std::string epi = gemm_internal::Epilogue(d, "xv", "0");
  size_t start = 0;
  while (start < epi.size()) {
    const size_t end = epi.find('\n', start);
    s += "    " + epi.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return s + "  }\n}\n";
}

/// Outer product: a work-item's tm rows of packed weights × tn vectors of 8 columns, K in
/// blocks of 32. Per block each row's 16 packed bytes unpack at once (MP_NIBBLES32_LOAD) to 8
/// words of 4 sign-extended bytes — word j < 4 holds k = 8j, 8j + 2, 8j + 4, 8j + 6 and word
/// j ≥ 4 the odd k after those of word j − 4 — and 8 steps each broadcast one word per row against
/// the activation words the pack kernel wrote in that same order. (The weights were once
/// expanded to 4-k words by a kernel per run, or unpacked nibble by nibble in scalar code:
/// both cost more than this in-register unpack.)
std::string OuterBody(const GemmDesc& d, const GemmConfig& c) {
  std::ostringstream s;
  s << "const int n0 = $global_id(" << (c.mf ? 1 : 0) << ") * " << c.tn * 8 << ";\n";
  s << "const int m0 = $global_id(" << (c.mf ? 0 : 1) << ") * " << c.tm << ";\n";
  s << "if (n0 >= N || m0 >= M) return;\n";
  s << "const int RB = (K + 1) / 2, KB = K / 32, KBC = (K + 31) / 32;\n";
  s << "const int NP = (N + " << c.tn * 8 - 1 << ") / " << c.tn * 8 << " * " << c.tn * 8 << ";\n";
  for (int i = 0; i < c.tm; ++i)
    s << "const $global mp_u8* w" << i << " = a + min(m0 + " << i << ", M - 1) * RB;\n";
  s << "const $global int* xp = xq + n0;\n";
  for (int i = 0; i < c.tm; ++i) s << "int ws" << i << "[8];\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) s << "mp_i32x8 acc" << i << "_" << j << " = (mp_i32x8)(0);\n";
  // One block: `tail` is the last block of a K that is not a multiple of 32 (its missing
  // bytes read as 0, and the steps whose four k all lie past K skipped).
  auto block = [&](bool tail) {
    std::ostringstream t;
    for (int i = 0; i < c.tm; ++i) {
      if (tail) {
        t << "  mp_u8 wb" << i << "[16];\n";
        t << "  for (int e = 0; e < 16; ++e) wb" << i << "[e] = 16 * blk + e < RB ? w" << i
          << "[16 * blk + e] : (mp_u8)0;\n";
        t << "  MP_I32X8_STORE(MP_NIBBLES32_LOAD(wb" << i << "), ws" << i << ");\n";
      } else {
        t << "  MP_I32X8_STORE(MP_NIBBLES32_LOAD(w" << i << " + 16 * blk), ws" << i << ");\n";
      }
    }
    for (int i = 0; i < c.tm; ++i)
      for (int j = 0; j < c.tn; ++j)
        t << "  mp_i16x16 p" << i << "_" << j << " = (mp_i16x16)(0);\n";
    t << "  for (int q = 0; q < 8; ++q) {\n";
    if (tail) t << "    if (32 * blk + (q < 4 ? 8 * q : 8 * q - 31) >= K) continue;\n";
    t << "    const $global int* xr = xp + (8 * blk + q) * NP;\n";
    for (int j = 0; j < c.tn; ++j)
      t << "    const mp_i32x8 x" << j << " = MP_I32X8_LOAD(xr + " << 8 * j << ");\n";
    for (int i = 0; i < c.tm; ++i)
      t << "    const mp_i32x8 v" << i << " = (mp_i32x8)(ws" << i << "[q]);\n";
    for (int i = 0; i < c.tm; ++i)
      for (int j = 0; j < c.tn; ++j)
        t << "    p" << i << "_" << j << " += MP_MADDUBS(x" << j << ", v" << i << ");\n";
    t << "  }\n";
    // 8 steps of one pair per 16-bit lane: within ±8·4080 = ±32640, then widened.
    for (int i = 0; i < c.tm; ++i)
      for (int j = 0; j < c.tn; ++j)
        t << "  acc" << i << "_" << j << " += MP_WIDEN16(p" << i << "_" << j << ");\n";
    return t.str();
  };
  s << "for (int blk = 0; blk < KB; ++blk) {\n" << block(false) << "}\n";
  s << "if (KB < KBC) {\n  const int blk = KB;\n" << block(true) << "}\n";
  s << "int t[8];\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) {
      s << "MP_I32X8_STORE(acc" << i << "_" << j << ", t);\n";
      s << "for (int v = 0; v < 8; ++v)\n";
      s << Store(d, "m0 + " + Str(i), "n0 + " + Str(8 * j) + " + v", "t[v]");
    }
  return s.str();
}

/// What the pair (vw = 8) and quad (vw = 16) dot tiles spell differently: k per block, the word,
/// the packed activations' pointer and one block's load, and the weight block's unpack.
struct DotWords {
  int block;           // k per block: 32 (pairs) or 64 (quads)
  const char* word;    // mp_i32x8 or mp_i32x16
  const char* x_type;  // element type of the packed activation pointer
  int x_step;          // its advance per block
  const char* x_load;  // one block of an activation row
  const char* unpack;  // one block of a weight row, its nibbles sign-extended to bytes
  const char* unpack_private;  // the same from a private copy
};
const DotWords kPairWords = {32, "mp_i32x8", "int", 8, "MP_I32X8_LOAD", "MP_NIBBLES32_LOAD",
                             "MP_NIBBLES32_LOAD"};
const DotWords kQuadWords = {64, "mp_i32x16", "mp_u8", 64, "MP_QUAD_LOAD_BYTES",
                             "MP_NIBBLES64_LOAD", "MP_NIBBLES64_LOAD_P"};
/// The words of `c`'s dot tile; their block is also the packed activation rows' (half of it the
/// block's even k, then its odd k, the order the weights' nibbles unpack in).
const DotWords& Words(const GemmConfig& c) { return Quads(c) ? kQuadWords : kPairWords; }

/// Declarations of a dot tile's K loop: RB (packed bytes per weight row), KB (whole blocks of
/// weight bytes) and KBC (blocks), the activation rows' pointers x<q>p into `xq` and the weight
/// rows' w<q>p into `weights` (activation rows: m with weights B, the one column with weights A;
/// weight rows: n or m), each line after `indent`.
std::string DotPointers(const GemmDesc& d, const GemmConfig& c, const DotWords& w,
                        const std::string& weights, const std::string& indent) {
  const bool wb = d.weights == WeightOperand::kB;
  const int acts = wb ? c.tm : c.tn, wts = wb ? c.tn : c.tm;
  std::ostringstream s;
  s << indent << "const int RB = (K + 1) / 2, KB = RB / " << w.block / 2 << ", KBC = (K + "
    << w.block - 1 << ") / " << w.block << ";\n";
  for (int q = 0; q < acts; ++q)
    s << indent << "const $global " << w.x_type << "* x" << q << "p = xq + "
      << (wb ? "min(m0 + " + Str(q) + ", M - 1)" : std::string("0")) << " * KBC * " << w.x_step
      << ";\n";
  for (int q = 0; q < wts; ++q)
    s << indent << "const $global mp_u8* w" << q << "p = " << weights << " + min("
      << (wb ? "n0" : "m0") << " + " << q << ", " << (wb ? "N" : "M") << " - 1) * RB;\n";
  return s.str();
}

/// One block `blk` of a dot tile: the activation words x<q>, the weight words v<q> (`last`: the
/// row's last block, which may be short: its missing bytes read as 0, weights 0), then
/// product(i, j, x, v) for each element of the tile; each line after `indent`.
std::string DotStep(const GemmDesc& d, const GemmConfig& c, const DotWords& w, bool last,
                    const std::string& indent,
                    const std::function<std::string(int, int, const std::string&,
                                                    const std::string&)>& product) {
  const bool wb = d.weights == WeightOperand::kB;
  const int acts = wb ? c.tm : c.tn, wts = wb ? c.tn : c.tm, bytes = w.block / 2;
  std::ostringstream t;
  for (int q = 0; q < acts; ++q)
    t << indent << "const " << w.word << " x" << q << " = " << w.x_load << "(x" << q << "p + "
      << w.x_step << " * blk);\n";
  for (int q = 0; q < wts; ++q) {
    if (last) {
      t << indent << "mp_u8 wb" << q << "[" << bytes << "];\n";
      t << indent << "for (int e = 0; e < " << bytes << "; ++e) wb" << q << "[e] = " << bytes
        << " * blk + e < RB ? w" << q << "p[" << bytes << " * blk + e] : (mp_u8)0;\n";
      t << indent << "const " << w.word << " v" << q << " = " << w.unpack_private << "(wb" << q
        << ");\n";
    } else {
      t << indent << "const " << w.word << " v" << q << " = " << w.unpack << "(w" << q << "p + "
        << bytes << " * blk);\n";
    }
  }
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      t << indent << product(i, j, "x" + Str(wb ? i : j), "v" + Str(wb ? j : i)) << "\n";
  return t.str();
}

/// Dot products along K in byte pairs: 32 k per vector, the activation rows permuted by the pack
/// kernel to the order the nibbles unpack in (16 even k, then 16 odd k of each block of 32).
std::string DotBody(const GemmDesc& d, const GemmConfig& c) {
  std::ostringstream s;
  s << "const int n0 = $global_id(" << (c.mf ? 1 : 0) << ") * " << c.tn << ";\n";
  s << "const int m0 = $global_id(" << (c.mf ? 0 : 1) << ") * " << c.tm << ";\n";
  s << "if (n0 >= N || m0 >= M) return;\n";
  s << DotPointers(d, c, kPairWords, d.weights == WeightOperand::kB ? "b" : "a", "");
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) s << "mp_i32x8 acc" << i << "_" << j << " = (mp_i32x8)(0);\n";
  auto step = [&](bool last) {
    return DotStep(d, c, kPairWords, last, "    ",
                   [](int i, int j, const std::string& x, const std::string& v) {
                     return "p" + Str(i) + "_" + Str(j) + " += MP_MADDUBS(" + x + ", " + v + ");";
                   });
  };
  s << "for (int kb = 0; kb < KBC; kb += " << kSteps16 << ") {\n";
  s << "  const int ke = min(kb + " << kSteps16 << ", KB);\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) s << "  mp_i16x16 p" << i << "_" << j << " = (mp_i16x16)(0);\n";
  s << "  for (int blk = kb; blk < ke; ++blk) {\n" << step(false) << "  }\n";
  s << "  if (ke < kb + " << kSteps16 << " && ke < KBC) {\n    const int blk = ke;\n"
    << step(true) << "  }\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      s << "  acc" << i << "_" << j << " += MP_WIDEN16(p" << i << "_" << j << ");\n";
  s << "}\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) {
      s << Store(d, "m0 + " + Str(i), "n0 + " + Str(j),
                 "MP_I32X8_SUM(acc" + Str(i) + "_" + Str(j) + ")");
    }
  return s.str();
}

/// The quad dot tile (vw = 16) where the device has byte quad products (vpdpbusd): per block of
/// 64 k one 64-byte load per activation row, one 32-byte load per weight row unpacked in
/// registers (MP_NIBBLES64_LOAD) and one MP_DPBUSD16 per pair, 4 × the k of a pair step at no
/// 16-bit widening. gemm_int4_quads(xq, w, m0, n0, M, N, K, r) runs the whole K loop and writes
/// the tile's sums r[i·tn + j]: a function of its own because PoCL compiles the VNNI built-in
/// only outside the work-group function (MP_QUAD_FN).
std::string QuadDotFunction(const GemmDesc& d, const GemmConfig& c) {
  std::ostringstream f;
  f << "MP_QUAD_FN void gemm_int4_quads(const $global mp_u8* xq, const $global mp_u8* w, "
    << "const int m0, const int n0, const int M, const int N, const int K, int* r) {\n";
  f << DotPointers(d, c, kQuadWords, "w", "  ");
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      f << "  mp_i32x16 acc" << i << "_" << j << " = MP_QUAD_WORD(0);\n";
  auto step = [&](bool last) {
    return DotStep(d, c, kQuadWords, last, "    ",
                   [](int i, int j, const std::string& x, const std::string& v) {
                     const std::string acc = "acc" + Str(i) + "_" + Str(j);
                     return acc + " = MP_DPBUSD16(" + acc + ", " + x + ", " + v + ");";
                   });
  };
  f << "  for (int blk = 0; blk < KB; ++blk) {\n" << step(false) << "  }\n";
  f << "  if (KB < KBC) {\n    const int blk = KB;\n" << step(true) << "  }\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      f << "  r[" << i * c.tn + j << "] = MP_QUAD_SUM(acc" << i << "_" << j << ");\n";
  f << "}\n";
  return f.str();
}

/// The quad dot tile's kernel body: the tile's K loop in gemm_int4_quads, then the epilogue.
std::string QuadDotBody(const GemmDesc& d, const GemmConfig& c) {
  const bool wb = d.weights == WeightOperand::kB;
  std::ostringstream s;
  s << "const int n0 = $global_id(" << (c.mf ? 1 : 0) << ") * " << c.tn << ";\n";
  s << "const int m0 = $global_id(" << (c.mf ? 0 : 1) << ") * " << c.tm << ";\n";
  s << "if (n0 >= N || m0 >= M) return;\n";
  s << "int r[" << c.tm * c.tn << "];\n";
  s << "gemm_int4_quads((const $global mp_u8*)xq, " << (wb ? "b" : "a")
    << ", m0, n0, M, N, K, r);\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      s << Store(d, "m0 + " + Str(i), "n0 + " + Str(j), "r[" + Str(i * c.tn + j) + "]");
  return s.str();
}

}  // namespace

std::string NativeSource(const KernelTarget& target, const GemmDesc& d, const GemmConfig& c) {
  KernelWriter w(target, "gemm_int4");
  w.AddType("Ctype", d.out_type);
  w.UseRequant(d.type);
  if (Quads(c)) {
    w.UseHelper(KernelHelper::kByteQuadProduct16);
    w.Function(QuadDotFunction(d, c));
  } else {
    w.UseHelper(KernelHelper::kBytePairProduct16);
  }
  const std::string name = Gemm::KernelName(d);
  auto& k = w.Kernel(name);
  k.Value("int", "M").Value("int", "N").Value("int", "K");
  k.In("mp_u8", "a").Value("int", "lda").In("mp_u8", "b").Value("int", "ldb");
  k.Out("Ctype", "c").Value("int", "ldc");
  if (d.bias) k.In("int", "bias");
  k.In("int", "wsum");
  if (d.out_type == DataType::kFloat32)
    k.In("float", "scale");
  else
    k.In("int", "mult").In("int", "shift");
  k.Value("int", "x_zero").Value("int", "w_zero").Value("int", "c_zero");
  k.In("int", "xq");
  std::string body = Outer(c) ? OuterBody(d, c) : Quads(c) ? QuadDotBody(d, c) : DotBody(d, c);
  std::string indented;
  for (size_t start = 0; start < body.size();) {
    const size_t end = body.find('\n', start);
    indented += "  " + body.substr(start, end - start) + "\n";
    start = end + 1;
  }
  k.Body(indented);

  if (Outer(c)) {
    // Per block of 32 k, 8 words per column in the order OuterBody's unpacked weights take
    // (word j < 4: k = 32·blk + 8j + {0, 2, 4, 6}; j ≥ 4: 32·blk + 8(j − 4) + {1, 3, 5, 7}; zero
    // past K), columns padded to tiles: a work-item per 8 columns of one word row (four 8-byte
    // row loads interleaved, MP_ZIP4_U8X8 with rows two apart; byte by byte at the edges).
    w.Kernel(name + "_xpack")
        .Value("int", "K")
        .Value("int", "N")
        .Value("int", "NP")
        .In("mp_u8", "x")
        .Value("int", "ldb")
        .Out("int", "xq")
        .Body(std::string("  const int NP8 = NP / 8;\n"
              "  $loop(i, (K + 31) / 32 * 8 * NP8) {\n"
              "    const int wr = i / NP8, n = (i - wr * NP8) * 8, j = wr & 7;\n"
              "    const int k0 = (wr - j) * 4 + (j < 4 ? 8 * j : 8 * j - 31);\n") +
              (d.trans_b ? "" :
              "    if (n + 8 <= N && k0 + 6 < K) {\n"
              "      MP_I32X8_STORE(MP_ZIP4_U8X8(x + k0 * ldb + n, 2 * ldb), xq + 8 * i);\n"
              "      continue;\n"
              "    }\n") +
              "    for (int e = 0; e < 8; ++e) {\n"
              "      mp_u32 t = 0u;\n"
              "      for (int q = 0; q < 4; ++q) {\n"
              "        const int k = k0 + 2 * q, nn = n + e;\n"
              "        if (nn < N && k < K) t |= (mp_u32)x[" + std::string(d.trans_b ? "nn * ldb + k" : "k * ldb + nn") + "] << (8 * q);\n"
              "      }\n"
              "      xq[8 * i + e] = (int)t;\n"
              "    }\n"
              "  }\n");
  } else {
    // Each activation row in blocks of Words(c).block k: its even k, then its odd k (zero past
    // K).
    const std::string b = Str(Words(c).block), h = Str(Words(c).block / 2);
    w.Kernel(name + "_xpack")
        .Value("int", "K")
        .Value("int", "R")
        .In("mp_u8", "x")
        .Value("int", "ld")
        .Out("mp_u8", "xq")
        .Body("  const int RL = (K + " + b + " - 1) / " + b + " * " + b + ";\n" +
              "  $loop(i, R * RL) {\n"
              "    const int r = i / RL, pos = i - r * RL, q = pos % " + b + ";\n" +
              "    const int k = (pos - q) + (q < " + h + " ? 2 * q : 2 * (q - " + h +
              ") + 1);\n" +
              "    xq[i] = k < K ? x[r * ld + k] : (mp_u8)0;\n"
              "  }\n");
  }
  w.Kernel(name + "_wsum")
      .Value("int", "channels")
      .Value("int", "K")
      .In("mp_u8", "wt")
      .Value("int", "ld")
      .Out("int", "sums")
      .Body("  const int RB = (K + 1) / 2;\n"
            "  $loop(ch, channels) {\n"
            "    int s = 0;\n"
            "    for (int k = 0; k < K; ++k) {\n"
            "      const int v = (int)wt[ch * RB + k / 2];\n"
            "      s += (((k & 1) ? (v >> 4) : (v & 15)) ^ 8) - 8;\n"
            "    }\n"
            "    sums[ch] = s;\n"
            "  }\n");
  return w.Source();
}

size_t PackedActivationBytes(const GemmDesc& d, const GemmConfig& c) {
  if (Outer(c)) return size_t((d.K + 31) / 32) * 8 * PaddedColumns(d, c) * 4;
  const int block = Words(c).block;
  return size_t(ActivationRows(d)) * ((d.K + block - 1) / block) * block;
}

Event PackActivations(Kernel& xpack, const GemmDesc& d, const GemmConfig& c, const GemmArgs& args,
                      DeviceMemory* xq, Queue* queue) {
  if (Outer(c)) {
    const int np = PaddedColumns(d, c);
    xpack.Arg(int32_t{d.K}).Arg(int32_t{d.N}).Arg(int32_t{np});
    xpack.ArgBuffer(args.b.mem, args.b.byte_offset, 1).Arg(int32_t(d.ldb_or_packed()));
    xpack.ArgBuffer(xq, 0, 4);
    return xpack.Launch1D(size_t((d.K + 31) / 32) * 8 * (np / 8), queue);
  }
  const bool wb = d.weights == WeightOperand::kB;
  const BufferRef& x = wb ? args.a : args.b;
  xpack.Arg(int32_t{d.K}).Arg(int32_t(ActivationRows(d)));
  xpack.ArgBuffer(x.mem, x.byte_offset, 1).Arg(int32_t(wb ? d.lda_or_packed() : 0));
  xpack.ArgBuffer(xq, 0, 1);
  return xpack.Launch1D(PackedActivationBytes(d, c), queue);
}

}  // namespace mpcaffe::libdnn::int4
