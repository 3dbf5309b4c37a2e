// libdnn/gemm.cc — the GEMM kernel generator: outer-product and dot-product register tiles, one
// body for every data type and both dialects (gemm_launch.cc prepares the weights and launches).
#include "libdnn/gemm.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "codegen/vector_words.h"
#include "libdnn/gemm_internal.h"
#include "libdnn/int4_internal.h"
#include "libdnn/tuner.h"  // TunedGemmConfig
#include "quant/fixed_point.h"
#include "quant/quant_params.h"

namespace mpcaffe::libdnn {

namespace {

using gemm_internal::LocalSize;
using gemm_internal::PacksA;
using gemm_internal::UsesDot4;
using gemm_internal::WeightSumsKernelName;

std::string Str(int v) { return std::to_string(v); }

/// Scalar compute/accumulator spelling (the type table's): float, int (int8q), mp_i64 (int16q).
std::string ComputeScalar(DataType t) { return TraitsOf(t).acc_alias(); }

/// Vector spellings: the compute scalar (vw = 1: plain portable C) or the writer's vector
/// type CV of vw lanes (KernelWriter::AddVector: OpenCL vectors, a CUDA struct).
struct VectorText {
  std::string type;                          // CV
  std::string load_f32, load_f16, load_int;  // vector loads at a pointer
  std::string from_array, to_array;          // private array <-> vector
};

VectorText Vectors(KernelWriter& w, DataType t, int vw) {
  VectorText v;
  if (vw == 1) {
    v.type = ComputeScalar(t);
    v.from_array = "((t)[0])";
    v.to_array = "((t)[0] = (x))";
    return v;
  }
  w.AddVector("CV", TraitsOf(t).acctype, vw);
  v.load_f32 = "CV_LOAD(p)";
  v.load_f16 = "CV_LOAD_HALF(p)";
  v.load_int = "CV_LOAD_CONV(p)";
  v.from_array = "CV_LOAD(t)";
  v.to_array = "CV_STORE(x, t)";
  return v;
}

/// Declares the storage type and loads of operand `name` ("A" or "B") of a GEMM.
void DeclareOperand(KernelWriter& w, const std::string& name, const GemmDesc& d, bool is_weights,
                    const VectorText& vec, int vw) {
  const std::string t = name + "type";
  const std::string cs = ComputeScalar(d.type);
  if (is_weights && d.weights_signed) {
    w.Define(t, TraitsOf(d.type).signed_alias());
    w.Define(t + "_LOAD(p, i)", "((" + cs + ")(p)[i])");
  } else {
    w.AddType(t, d.type);
  }
  w.Define("LDS_" + name + "(p, i)", "((" + cs + ")" + t + "_LOAD(p, i))");
  std::string load;
  if (vw == 1)
    load = "LDS_" + name + "(p, 0)";
  else if (d.type == DataType::kFloat32)
    load = vec.load_f32;
  else if (d.type == DataType::kFloat16)
    load = vec.load_f16;
  else
    load = vec.load_int;
  w.Define("LDV_" + name + "(p)", load);
}

/// Index expressions of op(A)(m, k) and op(B)(k, n) in the stored matrices.
std::string AIndex(const GemmDesc& d, const std::string& m, const std::string& k) {
  return d.trans_a ? "(" + k + ") * lda + (" + m + ")" : "(" + m + ") * lda + (" + k + ")";
}
std::string BIndex(const GemmDesc& d, const std::string& k, const std::string& n) {
  return d.trans_b ? "(" + n + ") * ldb + (" + k + ")" : "(" + k + ") * ldb + (" + n + ")";
}

bool ActivationsAreA(const GemmDesc& d) { return d.weights == WeightOperand::kB; }
bool NeedActivationSums(const GemmDesc& d) { return IsQuantized(d.type) && d.weight_zero; }

/// kp = 2 subtracts z_w from the weights as they are loaded (w − z_w fits 16 bits), so the
/// kernel needs no activation sums: Σ(w − z_w)·x − z_x·(Σw − K·z_w) is the same value.
bool FoldsWeightZero(const GemmDesc& d, const GemmConfig& c) {
  return c.kp == GemmConfig::kPairs && NeedActivationSums(d);
}
/// kp = 2 with the weights as a not transposed A (convolution as GEMM, inner product): a small
/// kernel first writes op(A) as 32-bit pairs (w(m, k) − z_w, w(m, k + 1) − z_w), so each pair
/// step broadcasts one loaded int (no byte shuffle and no z_w subtraction per N tile; those
/// took a third of the vector instructions of the pair loop). Only when at least 8 column
/// tiles reuse each row of A: on 4096×64×9216 (4 tiles) writing and re-reading the 75 MB of
/// pairs cost more than it saved (37–47 against 43–87 GOP/s unpacked, PoCL).
}  // namespace
namespace gemm_internal {
bool PacksA(const GemmDesc& d, const GemmConfig& c) {
  return c.kp == GemmConfig::kPairs && d.weights == WeightOperand::kA && !d.trans_a && d.N >= 8 * c.cols_per_item();
}
}  // namespace gemm_internal
namespace {


/// Whether the kernel accumulates Σx beside the products (the Epilogue's `xs`).
bool KernelSumsActivations(const GemmDesc& d, const GemmConfig& c) {
  return NeedActivationSums(d) && !FoldsWeightZero(d, c);
}

}  // namespace

namespace gemm_internal {

/// The output pipeline for one element: `x` is the raw Σ product (compute scalar), `xs` the
/// activation sum (when needed), `m`/`n` the element's row and column. `folded`: `x` is
/// already Σ(w − z_w)·x (FoldsWeightZero), so there is no z_w·Σx term.
std::string Epilogue(const GemmDesc& d, const std::string& x, const std::string& xs,
                     bool folded) {
  const std::string ch = d.weights == WeightOperand::kA ? "m" : "n";
  const std::string idx = "m * ldc + n";
  std::string s;
  if (!IsQuantized(d.type)) {
    s += "float f = alpha * " + x + ";\n";
    s += "if (beta != 0.0f) f += beta * (float)Ctype_LOAD(c, " + idx + ");\n";
    if (d.bias) s += "f += bias[" + ch + "];\n";
    if (d.relu) s += "f = f > 0.0f ? f : 0.0f;\n";
    s += "Ctype_STORE(c, " + idx + ", f);\n";
    return s;
  }
  const std::string acc = ComputeScalar(d.type);
  s += acc + " val = " + x + " - (" + acc + ")x_zero * wsum[" + ch + "]";
  if (d.weight_zero && !folded) s += " - (" + acc + ")w_zero * " + xs;
  if (d.weight_zero) s += " + (" + acc + ")K * x_zero * w_zero";
  s += ";\n";
  if (d.bias) s += "val += bias[" + ch + "];\n";
  const std::string pc = d.per_channel ? ch : "0";
  if (d.out_type == DataType::kFloat32) {
    s += "float f = (float)val * scale[" + pc + "];\n";
    if (d.relu) s += "f = f > 0.0f ? f : 0.0f;\n";
    s += "Ctype_STORE(c, " + idx + ", f);\n";
  } else {
    // Clamped before adding z_c, so no sum can overflow.
    s += "mp_i64 r = MP_REQUANT(val, mult[" + pc + "], shift[" + pc + "]);\n";
    s += std::string("const mp_i64 lo = ") + (d.relu ? "0" : "(mp_i64)Ctype_QMIN - c_zero") +
         ", hi = (mp_i64)Ctype_QMAX - c_zero;\n";
    s += "r = r < lo ? lo : (r > hi ? hi : r);\n";
    s += "Ctype_STORE(c, " + idx + ", r + c_zero);\n";
  }
  return s;
}

}  // namespace gemm_internal

namespace {

using gemm_internal::Epilogue;

/// The output pipeline of Epilogue for the 8 columns n … n + 7 of row m at once (int8q with
/// vw = 8, a tile vector `x`; `xs` the activation-sum vector or scalar, when needed): the same
/// integers lane by lane, with the requantization specialized to an int32 accumulator
/// (VectorWords::Requant).
std::string VectorEpilogue(const VectorWords& v, const GemmDesc& d, const std::string& x,
                           const std::string& xs, bool folded) {
  const bool wa = d.weights == WeightOperand::kA;
  const std::string i8 = v.Type("int", 8), f8 = v.Type("float", 8);
  // A per-channel value: one per row (weights A) or a vector of 8 columns (weights B).
  auto per_channel = [&](const std::string& buf, const std::string& type, bool varies) {
    if (wa || !varies) return v.Splat(type, buf + "[" + (varies ? "m" : "0") + "]");
    return v.Load(8, buf + " + n");
  };
  std::string s = i8 + " val = " + x + " - x_zero * " + per_channel("wsum", i8, true);
  if (d.weight_zero && !folded) s += " - w_zero * " + xs;
  if (d.weight_zero) s += " + K * x_zero * w_zero";
  s += ";\n";
  if (d.bias) s += "val += " + per_channel("bias", i8, true) + ";\n";
  if (d.out_type == DataType::kFloat32) {
    s += f8 + " f = " + v.Convert(f8, "val") + " * " + per_channel("scale", f8, d.per_channel) +
         ";\n";
    if (d.relu) s += "f = " + v.Select(v.Splat(f8, "0.0f"), "f", "f > " + v.Splat(f8, "0.0f")) + ";\n";
    s += v.Store(8, "f", "c + m * ldc + n") + ";\n";
    return s;
  }
  s += v.Requant(8, "r", "val", per_channel("mult", i8, d.per_channel),
                 per_channel("shift", i8, d.per_channel));
  s += std::string("const mp_i64 lo = ") + (d.relu ? "0" : "(mp_i64)Ctype_QMIN - c_zero") +
       ", hi = (mp_i64)Ctype_QMAX - c_zero;\n";
  const std::string l8 = v.Type("long", 8);
  s += "r = " + v.Select(v.Select("r", v.Splat(l8, "hi"), "r > hi"), v.Splat(l8, "lo"), "r < lo") +
       ";\n";
  s += "MP_STORE_UCHAR8(" + v.Convert(v.Type("uchar", 8), v.Convert(i8, "r + c_zero")) +
       ", c + m * ldc + n);\n";
  return s;
}

/// Indents every line of `text` by `n` spaces.
std::string Indent(const std::string& text, int n) {
  std::string out, pad(n, ' ');
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += pad + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

/// One k step of the outer-product tile; `gather` loads B lane by lane (edge tiles,
/// transposed B).
std::string OuterStep(const GemmDesc& d, const GemmConfig& c, const std::string& k, bool gather) {
  const bool sums = KernelSumsActivations(d, c);
  const bool fold = FoldsWeightZero(d, c);
  std::ostringstream s;
  s << "{\n";
  for (int j = 0; j < c.tn; ++j) {
    if (gather) {
      s << "  CS g" << j << "[VW];\n";
      s << "  for (int v = 0; v < VW; ++v) g" << j << "[v] = LDS_B(b, "
        << BIndex(d, k, "min(n0 + " + Str(j * c.vw) + " + v, N - 1)") << ");\n";
      s << "  const CV b" << j << " = VFROM(g" << j << ");\n";
    } else {
      s << "  const CV b" << j << " = LDV_B(b + " << BIndex(d, k, "n0 + " + Str(j * c.vw))
        << ");\n";
    }
    if (sums && !ActivationsAreA(d)) s << "  xs" << j << " += b" << j << ";\n";
  }
  const std::string bz = fold && ActivationsAreA(d) ? " - (CV)(w_zero)" : "";
  const std::string az = fold && !ActivationsAreA(d) ? " - w_zero" : "";
  for (int i = 0; i < c.tm; ++i) {
    s << "  { const CS as = LDS_A(a, " << AIndex(d, "r" + Str(i), k) << ")" << az << ";\n";
    if (sums && ActivationsAreA(d)) s << "    xs" << i << " += as;\n";
    s << "    const CV av = (CV)(as);\n";
    for (int j = 0; j < c.tn; ++j)
      s << "    acc" << i << "_" << j << " = MAC(av, b" << j << bz << ", acc" << i << "_" << j
        << ");\n";
    s << "  }\n";
  }
  s << "}\n";
  return s.str();
}

std::string KLoops(const GemmConfig& c, const std::function<std::string(const std::string&)>& step,
                   int stride) {
  std::ostringstream s;
  const std::string ks = Str(stride);
  s << "int k = 0;\n";
  if (c.ku > 1) {
    s << "for (; k + " << stride * c.ku << " <= K; k += " << stride * c.ku << ") {\n";
    for (int u = 0; u < c.ku; ++u) s << Indent(step("k + " + Str(u * stride)), 2);
    s << "}\n";
  }
  s << "for (; k + " << ks << " <= K; k += " << ks << ") {\n" << Indent(step("k"), 2) << "}\n";
  return s.str();
}

bool ASigned(const GemmDesc& d) { return d.weights == WeightOperand::kA && d.weights_signed; }

/// One step of two k (k, k + 1) of the kp = 2 outer-product tile. op(B) rows k and k + 1 are
/// interleaved into 16-lane vectors (MP_ZIP16: b(k, n), b(k + 1, n), …; KernelHelper::
/// kPairProduct16 spells them per dialect) and each op(A) pair is broadcast,
/// so one MP_MADD16 adds 16 products to the 8 int32 lanes of a tile vector. (A step over four
/// k sharing one 4-byte load of A kept six broadcasts live and spilled accumulators.)
std::string OuterPairStep(const GemmDesc& d, const GemmConfig& c, const std::string& k,
                          bool gather) {
  const bool fold = FoldsWeightZero(d, c), act_a = ActivationsAreA(d);
  const std::string bz = fold && act_a ? " - (mp_short16)((short)w_zero)" : "";
  const std::string az = fold && !act_a ? " - (mp_short16)((short)w_zero)" : "";
  const std::string k1 = "(" + k + ") + 1";
  std::ostringstream s;
  s << "{\n";
  for (int j = 0; j < c.tn; ++j) {
    const std::string col = "n0 + " + Str(j * c.vw);
    const std::string rows =
        "MP_ZIP16(b + " + BIndex(d, k, col) + ", b + " + BIndex(d, k1, col) + ")";
    if (!gather) {
      s << "  const mp_short16 b" << j << " = " << rows << bz << ";\n";
      continue;
    }
    // Edge tile: vectors wholly inside N still load rows; the rest element by element.
    s << "  mp_short16 b" << j << ";\n";
    if (!d.trans_b) s << "  if (" << col << " + 8 <= N) b" << j << " = " << rows << ";\n  else ";
    s << "  {\n    CS g[16];\n";
    s << "    for (int v = 0; v < 8; ++v) {\n";
    s << "      const int n = min(" << col << " + v, N - 1);\n";
    s << "      g[2 * v] = LDS_B(b, " << BIndex(d, k, "n") << ");\n";
    s << "      g[2 * v + 1] = LDS_B(b, " << BIndex(d, k1, "n") << ");\n";
    s << "    }\n";
    s << "    b" << j << " = MP_SHORT16_FROM(g);\n  }\n";
    if (!bz.empty()) s << "  b" << j << " = b" << j << bz << ";\n";
  }
  for (int i = 0; i < c.tm; ++i) {
    const std::string r = "r" + Str(i);
    s << "  { const mp_short16 ap = ";
    if (PacksA(d, c))
      s << "MP_PAIR16_WORD(ap" << i << "[(" << k << ") >> 1])";
    else if (d.trans_a)
      s << "MP_PAIR16(LDS_A(a, " << AIndex(d, r, k) << "), LDS_A(a, " << AIndex(d, r, k1) << "))";
    else
      s << "MP_APAIR_P(a + " << AIndex(d, r, k) << ")";
    s << (PacksA(d, c) ? "" : az) << ";\n";
    for (int j = 0; j < c.tn; ++j)
      s << "    acc" << i << "_" << j << " += MP_MADD16(ap, b" << j << ");\n";
    s << "  }\n";
  }
  s << "}\n";
  return s.str();
}

/// The K loop of kp = 2: steps of two k (unrolled ku times), then the one-k step of an odd K.
std::string PairLoops(const GemmDesc& d, const GemmConfig& c, bool gather) {
  auto step = [&](const std::string& k) { return OuterPairStep(d, c, k, gather); };
  return KLoops(c, step, 2) + "if (k < K) {\n" + Indent(OuterStep(d, c, "k", gather), 2) + "}\n";
}

/// The output pipeline of a kOuter tile held in acc<i>_<j>: row i of the work-item is
/// m0 + i·`row_step`, vector j starts at column n0 + j·`col_step` (1 and vw when a work-item
/// owns a contiguous tile; lm = 1 strides them across the work-group). The accumulators (and
/// activation sums) go into private arrays and the pipeline is written once, in a loop over
/// the tile: written out once per accumulator it was most of the kernel's text and of its
/// compile time, for code that runs once per work-item.
std::string OuterEpilogue(const GemmDesc& d, const GemmConfig& c, const Dialect& dialect,
                          int row_step, int col_step) {
  const bool sums = KernelSumsActivations(d, c);
  const bool act_a = ActivationsAreA(d);
  const int tiles = c.tm * c.tn;
  std::ostringstream s;
  s << "CV tile[" << tiles << "];\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      s << "tile[" << i * c.tn + j << "] = acc" << i << "_" << j << ";\n";
  // Row sums (activations A: one scalar per row) or column sums (a vector per column vector).
  std::string xs = "0";
  if (sums) {
    const int n = act_a ? c.tm : c.tn;
    s << (act_a ? "CS" : "CV") << " tile_xs[" << n << "];\n";
    for (int q = 0; q < n; ++q) s << "tile_xs[" << q << "] = xs" << q << ";\n";
    xs = act_a ? "tile_xs[ti]" : "tile_xs[tj]";
  }
  const std::string loop = "for (int e = 0; e < " + Str(tiles) + "; ++e) {\n  const int ti = e / " +
                           Str(c.tn) + ", tj = e - ti * " + Str(c.tn) + ";\n";
  // int8 with vectors of 8: full column tiles take the output pipeline 8 columns at a time.
  // (The lane-by-lane pipeline below gives the same integers where the dialect has no
  // vector built-ins.)
  const bool vector_epilogue = d.type == DataType::kInt8Q && c.vw == 8 && dialect.vector_builtins;
  if (vector_epilogue) {
    s << "if (n0 + " << (c.tn - 1) * col_step + c.vw << " <= N) {\n" << Indent(loop, 2);
    s << "    if (m0 + ti * " << row_step << " < M) {\n      const int m = m0 + ti * " << row_step
      << ";\n      const int n = n0 + tj * " << col_step << ";\n"
      << Indent(VectorEpilogue(VectorWords(dialect), d, "tile[e]", xs, FoldsWeightZero(d, c)), 6) << "    }\n  }\n";
    s << "  return;\n}\n";
  }
  // Lanes to private arrays, then the output pipeline per element.
  s << loop << "  CS t[VW];\n  VTO(tile[e], t);\n";
  if (sums && !act_a) {
    s << "  CS ts[VW];\n  VTO(tile_xs[tj], ts);\n";
    xs = "ts[v]";
  }
  s << "  for (int v = 0; v < VW; ++v) {\n";
  s << "    const int m = m0 + ti * " << row_step << ";\n";
  s << "    const int n = n0 + tj * " << col_step << " + v;\n";
  s << "    if (m < M && n < N) {\n"
    << Indent(Epilogue(d, "t[v]", xs, FoldsWeightZero(d, c)), 6) << "    }\n";
  s << "  }\n}\n";
  return s.str();
}

/// The accumulators (and activation sums) of a kOuter tile, zeroed.
std::string OuterAccumulators(const GemmDesc& d, const GemmConfig& c) {
  std::ostringstream s;
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) s << "CV acc" << i << "_" << j << " = (CV)(0);\n";
  if (KernelSumsActivations(d, c)) {
    if (ActivationsAreA(d))
      for (int i = 0; i < c.tm; ++i) s << "CS xs" << i << " = 0;\n";
    else
      for (int j = 0; j < c.tn; ++j) s << "CV xs" << j << " = (CV)(0);\n";
  }
  return s.str();
}

/// kOuter with lm = 1. The work-group (group_n() × group_m() work-items) owns a block of
/// TM = group_m()·tm rows and TN = group_n()·tn·vw columns of C. Per slab of KB = kLocalK
/// rows of K, every work-item copies its share of op(A)'s TM × KB and op(B)'s KB × TN block
/// into local memory (in the compute type, zero outside M, N and K: zeros add nothing to the
/// products nor to the activation sums, so edge blocks need no other care), then each
/// work-item accumulates its rows lm + i·group_m() and vectors ln + j·group_n() from there.
/// The copy walks the stored matrix's contiguous axis fastest, so neighbouring work-items read
/// neighbouring global words. No work-item may return before the last barrier.
std::string OuterLocalBody(const GemmDesc& d, const GemmConfig& c, const Dialect& dialect) {
  const bool sums = KernelSumsActivations(d, c);
  const int gn = c.group_n(), gm = c.group_m(), kb = GemmConfig::kLocalK;
  const int tmg = gm * c.tm, tng = gn * c.cols_per_item(), wg = c.wg;
  // Row strides of the slabs: one word of padding where the copy walks k fastest, so the
  // work-items storing one slab row apart hit different banks (GPU local memory).
  const int sa = GemmConfig::LocalStrideA(d, tmg), sb = GemmConfig::LocalStrideB(d, tng);
  const int dn = c.mf ? 1 : 0, dm = c.mf ? 0 : 1;
  std::ostringstream s;
  s << "$shared CS As[" << kb * sa << "];  // As[kk * " << sa << " + row]\n";
  s << "$shared CS Bs[" << kb * sb << "];  // Bs[kk * " << sb << " + column]\n";
  s << "const int ln = $local_id(" << dn << "), lm = $local_id(" << dm << ");\n";
  s << "const int lid = lm * " << gn << " + ln;\n";
  s << "const int gm0 = $group_id(" << dm << ") * " << tmg << ";\n";
  s << "const int gn0 = $group_id(" << dn << ") * " << tng << ";\n";
  s << "const int m0 = gm0 + lm, n0 = gn0 + ln * VW;\n";
  s << OuterAccumulators(d, c);
  s << "for (int k0 = 0; k0 < K; k0 += " << kb << ") {\n";
  // op(A)(row, kk): not transposed, A is contiguous along k.
  s << "  for (int e = lid; e < " << kb * tmg << "; e += " << wg << ") {\n";
  if (d.trans_a)
    s << "    const int r = e % " << tmg << ", kk = e / " << tmg << ";\n";
  else
    s << "    const int kk = e % " << kb << ", r = e / " << kb << ";\n";
  s << "    const int gm = gm0 + r, gk = k0 + kk;\n";
  s << "    As[kk * " << sa << " + r] = gm < M && gk < K ? LDS_A(a, " << AIndex(d, "gm", "gk")
    << ") : (CS)(0);\n  }\n";
  // op(B)(kk, column): not transposed, B is contiguous along n.
  s << "  for (int e = lid; e < " << kb * tng << "; e += " << wg << ") {\n";
  if (d.trans_b)
    s << "    const int kk = e % " << kb << ", q = e / " << kb << ";\n";
  else
    s << "    const int q = e % " << tng << ", kk = e / " << tng << ";\n";
  s << "    const int gn = gn0 + q, gk = k0 + kk;\n";
  s << "    Bs[kk * " << sb << " + q] = gn < N && gk < K ? LDS_B(b, " << BIndex(d, "gk", "gn")
    << ") : (CS)(0);\n  }\n";
  s << "  $barrier;\n";
  auto step = [&](const std::string& k) {
    std::ostringstream t;
    t << "{\n";
    for (int j = 0; j < c.tn; ++j) {
      t << "  const CV b" << j << " = LDV_L(Bs + (" << k << ") * " << sb << " + n0 - gn0 + "
        << j * gn * c.vw << ");\n";
      if (sums && !ActivationsAreA(d)) t << "  xs" << j << " += b" << j << ";\n";
    }
    for (int i = 0; i < c.tm; ++i) {
      t << "  { const CS as = As[(" << k << ") * " << sa << " + lm + " << i * gm << "];\n";
      if (sums && ActivationsAreA(d)) t << "    xs" << i << " += as;\n";
      t << "    const CV av = (CV)(as);\n";
      for (int j = 0; j < c.tn; ++j)
        t << "    acc" << i << "_" << j << " = MAC(av, b" << j << ", acc" << i << "_" << j
          << ");\n";
      t << "  }\n";
    }
    t << "}\n";
    return t.str();
  };
  s << "  for (int kk = 0; kk < " << kb << "; kk += " << c.ku << ") {\n";
  for (int u = 0; u < c.ku; ++u) s << Indent(step(u ? "kk + " + Str(u) : "kk"), 4);
  s << "  }\n  $barrier;\n}\n";
  s << OuterEpilogue(d, c, dialect, gm, gn * c.vw);
  return s.str();
}

/// Whether the kernel packs four int8 k values per 32-bit dot product (mp_dot4_*): kOuter with
/// kp = 4, and kDot with scalar lanes.
}  // namespace
namespace gemm_internal {
bool UsesDot4(const GemmDesc& d, const GemmConfig& c) {
  return d.type == DataType::kInt8Q && c.vw == 1 &&
         (c.algorithm == GemmConfig::Algorithm::kDot || c.kp == GemmConfig::kDot4);
}
}  // namespace gemm_internal
namespace {


/// The 4-way dot product of one activation word and one weight word (activations unsigned).
std::string Dot4Call(const GemmDesc& d, const std::string& act, const std::string& wts,
                     const std::string& acc) {
  return std::string(d.weights_signed ? "mp_dot4_u8s8(" : "mp_dot4_u8u8(") + act + ", " + wts +
         ", " + acc + ")";
}

/// One step of four k (k … k + 3) of the kp = 4 outer-product tile (vw = 1): op(B)'s four rows
/// of a column and op(A)'s four columns of a row packed into 32-bit words (byte q = k + q), one
/// dot product per accumulator; Σx rides along as a dot with 0x01010101. `gather` clamps the
/// columns to N − 1 (edge tiles).
std::string OuterDot4Step(const GemmDesc& d, const GemmConfig& c, const std::string& k,
                          bool gather) {
  const bool sums = KernelSumsActivations(d, c), act_a = ActivationsAreA(d);
  const std::string sa = d.trans_a ? "lda" : "1", sb = d.trans_b ? "1" : "ldb";
  std::ostringstream s;
  s << "{\n";
  for (int j = 0; j < c.tn; ++j) {
    const std::string col = gather ? "min(n0 + " + Str(j) + ", N - 1)" : "n0 + " + Str(j);
    s << "  const mp_u32 b" << j << " = PACK4(b, " << BIndex(d, k, col) << ", " << sb << ");\n";
    if (sums && !act_a)
      s << "  xs" << j << " = mp_dot4_u8u8(b" << j << ", 0x01010101u, xs" << j << ");\n";
  }
  for (int i = 0; i < c.tm; ++i) {
    s << "  { const mp_u32 aw = PACK4(a, " << AIndex(d, "r" + Str(i), k) << ", " << sa << ");\n";
    if (sums && act_a) s << "    xs" << i << " = mp_dot4_u8u8(aw, 0x01010101u, xs" << i << ");\n";
    for (int j = 0; j < c.tn; ++j) {
      const std::string acc = "acc" + Str(i) + "_" + Str(j);
      s << "    " << acc << " = "
        << (act_a ? Dot4Call(d, "aw", "b" + Str(j), acc) : Dot4Call(d, "b" + Str(j), "aw", acc))
        << ";\n";
    }
    s << "  }\n";
  }
  s << "}\n";
  return s.str();
}

/// The K loop of kp = 4: steps of four k (unrolled ku times), then one-k steps for K mod 4.
std::string Dot4Loops(const GemmDesc& d, const GemmConfig& c, bool gather) {
  auto step = [&](const std::string& k) { return OuterDot4Step(d, c, k, gather); };
  return KLoops(c, step, 4) + "for (; k < K; ++k) {\n" + Indent(OuterStep(d, c, "k", gather), 2) +
         "}\n";
}

std::string OuterBody(const GemmDesc& d, const GemmConfig& c, const Dialect& dialect) {
  if (c.lm == 1) return OuterLocalBody(d, c, dialect);
  std::ostringstream s;
  s << "const int n0 = $global_id(" << (c.mf ? 1 : 0) << ") * " << c.cols_per_item() << ";\n";
  s << "const int m0 = $global_id(" << (c.mf ? 0 : 1) << ") * " << c.tm << ";\n";
  s << "if (n0 >= N || m0 >= M) return;\n";
  for (int i = 0; i < c.tm; ++i) s << "const int r" << i << " = min(m0 + " << i << ", M - 1);\n";
  s << OuterAccumulators(d, c);
  auto fast = [&](const std::string& k) { return OuterStep(d, c, k, false); };
  auto gathered = [&](const std::string& k) { return OuterStep(d, c, k, true); };
  if (c.kp == GemmConfig::kPairs) {
    s << PairBroadcast16Define("MP_APAIR_P(p)", "MP_PAIR16(LDS_A(p, 0), LDS_A(p, 1))", ASigned(d));
    if (PacksA(d, c))
      for (int i = 0; i < c.tm; ++i)
        s << "const $global int* ap" << i << " = apk + r" << i << " * (K / 2);\n";
    if (!d.trans_b) {
      s << "if (n0 + " << c.cols_per_item() << " <= N) {\n" << Indent(PairLoops(d, c, false), 2);
      s << "} else {\n" << Indent(PairLoops(d, c, true), 2) << "}\n";
    } else {
      s << "{\n" << Indent(PairLoops(d, c, true), 2) << "}\n";
    }
  } else if (c.kp == GemmConfig::kDot4) {
    if (!d.trans_b) {
      s << "if (n0 + " << c.cols_per_item() << " <= N) {\n" << Indent(Dot4Loops(d, c, false), 2);
      s << "} else {\n" << Indent(Dot4Loops(d, c, true), 2) << "}\n";
    } else {
      s << "{\n" << Indent(Dot4Loops(d, c, true), 2) << "}\n";
    }
  } else if (!d.trans_b) {
    s << "if (n0 + " << c.cols_per_item() << " <= N) {\n" << Indent(KLoops(c, fast, 1), 2);
    s << "} else {\n" << Indent(KLoops(c, gathered, 1), 2) << "}\n";
  } else {
    s << "{\n" << Indent(KLoops(c, gathered, 1), 2) << "}\n";
  }
  s << OuterEpilogue(d, c, dialect, 1, c.vw);
  return s.str();
}

std::string DotBody(const GemmDesc& d, const GemmConfig& c) {
  const bool sums = NeedActivationSums(d);
  const bool act_a = ActivationsAreA(d);
  std::ostringstream s;
  s << "const int n0 = $global_id(" << (c.mf ? 1 : 0) << ") * " << c.tn << ";\n";
  s << "const int m0 = $global_id(" << (c.mf ? 0 : 1) << ") * " << c.tm << ";\n";
  s << "if (n0 >= N || m0 >= M) return;\n";
  // op(B)(k, n) = b[n * ldbk + k]: B transposed, or a single packed column.
  s << "const int ldbk = " << (d.trans_b ? "ldb" : "0") << ";\n";
  for (int i = 0; i < c.tm; ++i)
    s << "const $global Atype* ap" << i << " = a + min(m0 + " << i << ", M - 1) * lda;\n";
  for (int j = 0; j < c.tn; ++j)
    s << "const $global Btype* bp" << j << " = b + min(n0 + " << j << ", N - 1) * ldbk;\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) s << "CV acc" << i << "_" << j << " = (CV)(0);\n";
  const int nsums = act_a ? c.tm : c.tn;
  if (sums)
    for (int q = 0; q < nsums; ++q) s << "CV xs" << q << " = (CV)(0);\n";
  auto step = [&](const std::string& k) {
    std::ostringstream t;
    t << "{\n";
    for (int j = 0; j < c.tn; ++j)
      t << "  const CV b" << j << " = LDV_B(bp" << j << " + " << k << ");\n";
    for (int i = 0; i < c.tm; ++i)
      t << "  const CV a" << i << " = LDV_A(ap" << i << " + " << k << ");\n";
    if (sums)
      for (int q = 0; q < nsums; ++q)
        t << "  xs" << q << " += " << (act_a ? "a" : "b") << q << ";\n";
    for (int i = 0; i < c.tm; ++i)
      for (int j = 0; j < c.tn; ++j)
        t << "  acc" << i << "_" << j << " = MAC(a" << i << ", b" << j << ", acc" << i << "_" << j
          << ");\n";
    t << "}\n";
    return t.str();
  };
  // int8 with scalar lanes: four k at a time through the 4-way byte dot product (dp4a on
  // CUDA sm_61+, portable shifts elsewhere); Σx rides along as a dot with 0x01010101.
  auto dot4_step = [&](const std::string& k) {
    const std::string dot = d.weights_signed ? "mp_dot4_u8s8" : "mp_dot4_u8u8";
    std::ostringstream t;
    t << "{\n";
    for (int j = 0; j < c.tn; ++j)
      t << "  const mp_u32 b" << j << " = PACK4(bp" << j << ", " << k << ", 1);\n";
    for (int i = 0; i < c.tm; ++i)
      t << "  const mp_u32 a" << i << " = PACK4(ap" << i << ", " << k << ", 1);\n";
    if (sums)
      for (int q = 0; q < nsums; ++q)
        t << "  xs" << q << " = mp_dot4_u8u8(" << (act_a ? "a" : "b") << q << ", 0x01010101u, xs"
          << q << ");\n";
    for (int i = 0; i < c.tm; ++i)
      for (int j = 0; j < c.tn; ++j)
        t << "  acc" << i << "_" << j << " = " << dot << "(" << (act_a ? "a" : "b")
          << (act_a ? i : j) << ", " << (act_a ? "b" : "a") << (act_a ? j : i) << ", acc" << i
          << "_" << j << ");\n";
    t << "}\n";
    return t.str();
  };
  if (UsesDot4(d, c))
    s << KLoops(c, dot4_step, 4);
  else
    s << KLoops(c, step, c.vw);
  // Horizontal sums, then the K tail in scalars.
  s << "CS t[VW];\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) {
      s << "VTO(acc" << i << "_" << j << ", t);\n";
      s << "CS r" << i << "_" << j << " = t[0];\n";
      s << "for (int v = 1; v < VW; ++v) r" << i << "_" << j << " += t[v];\n";
    }
  if (sums)
    for (int q = 0; q < nsums; ++q) {
      s << "VTO(xs" << q << ", t);\n";
      s << "CS s" << q << " = t[0];\n";
      s << "for (int v = 1; v < VW; ++v) s" << q << " += t[v];\n";
    }
  s << "for (; k < K; ++k) {\n";
  for (int j = 0; j < c.tn; ++j) s << "  const CS b" << j << " = LDS_B(bp" << j << ", k);\n";
  for (int i = 0; i < c.tm; ++i) s << "  const CS a" << i << " = LDS_A(ap" << i << ", k);\n";
  if (sums)
    for (int q = 0; q < nsums; ++q) s << "  s" << q << " += " << (act_a ? "a" : "b") << q << ";\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j)
      s << "  r" << i << "_" << j << " = MAC(a" << i << ", b" << j << ", r" << i << "_" << j
        << ");\n";
  s << "}\n";
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) {
      s << "{\n  const int m = m0 + " << i << ";\n  const int n = n0 + " << j << ";\n";
      s << "  if (m < M && n < N) {\n";
      const std::string xs = sums ? "s" + Str(act_a ? i : j) : "0";
      s << Indent(Epilogue(d, "r" + Str(i) + "_" + Str(j), xs), 4) << "  }\n}\n";
    }
  return s.str();
}

}  // namespace


namespace {

}  // namespace
namespace gemm_internal {
std::string WeightSumsKernelName(const GemmDesc& d) { return Gemm::KernelName(d) + "_wsum"; }
}  // namespace gemm_internal
namespace {


/// (wg, 1, 1); lm = 1: group_n() work-items along the N tiles' dimension and group_m() along
/// the M tiles' (which dimension is which follows mf, as in the global size).
}  // namespace
namespace gemm_internal {
Dim3 LocalSize(const GemmConfig& c) {
  if (c.lm != 1) return {static_cast<size_t>(c.wg), 1, 1};
  const size_t n = c.group_n(), m = c.group_m();
  return c.mf ? Dim3{m, n, 1} : Dim3{n, m, 1};
}
}  // namespace gemm_internal
namespace {


}  // namespace

std::string GemmDesc::ToString() const {
  std::ostringstream s;
  s << Name(type) << "->" << Name(out_type) << " M=" << M << " N=" << N << " K=" << K
    << " ta=" << trans_a << " tb=" << trans_b << " lda=" << lda_or_packed()
    << " ldb=" << ldb_or_packed() << " ldc=" << ldc_or_packed()
    << " w=" << (weights == WeightOperand::kA ? "A" : "B") << " bias=" << bias << " relu=" << relu;
  if (IsQuantized(type))
    s << " wsigned=" << weights_signed << " perch=" << per_channel << " wzero=" << weight_zero;
  if (weight_bits != 8) s << " wbits=" << weight_bits;
  return s.str();
}

void GemmDesc::Validate() const {
  auto fail = [&](const std::string& what) { throw Error("GEMM " + ToString() + ": " + what); };
  if (M < 1 || N < 1 || K < 1) fail("M, N and K must be at least 1");
  const int min_lda = trans_a ? M : K, min_ldb = trans_b ? K : N;
  if (lda_or_packed() < min_lda) fail("lda below " + std::to_string(min_lda));
  if (ldb_or_packed() < min_ldb) fail("ldb below " + std::to_string(min_ldb));
  if (ldc_or_packed() < N) fail("ldc below N");
  if (IsQuantized(type)) {
    if (out_type != type && out_type != DataType::kFloat32)
      fail("a quantized GEMM writes its own type or fp32");
  } else {
    if (out_type != type) fail("a float GEMM writes its own type");
    if (weights_signed || per_channel) fail("weights_signed/per_channel apply to quantized types");
  }
  int4::ValidateWeightBits(*this);
}


std::string Gemm::KernelName(const GemmDesc& desc) {
  return std::string("gemm_") + Name(desc.type) +
         (desc.out_type != desc.type ? std::string("_") + Name(desc.out_type) : std::string());
}

std::string Gemm::Source(const KernelTarget& target, const GemmDesc& desc, const GemmConfig& c) {
  desc.Validate();
  if (int4::Native(desc, c)) {
    if (!c.Supports(desc, target.backend))
      throw Error("GEMM " + desc.ToString() + ": configuration '" + c.ToString() +
                  "' does not support this layout or backend");
    return int4::NativeSource(target, desc, c);
  }
  // 4-bit weights otherwise: the int8 kernels on weights unpacked by int4_unpack.
  GemmDesc d = desc;
  d.weight_bits = 8;
  if (!c.Supports(d, target.backend))
    throw Error("GEMM " + d.ToString() + ": configuration '" + c.ToString() +
                "' does not support this layout or backend");
  KernelWriter w(target, "gemm");
  const VectorText vec = Vectors(w, d.type, c.vw);
  const bool weights_a = d.weights == WeightOperand::kA;
  w.Define("VW", Str(c.vw));
  w.Define("CS", ComputeScalar(d.type));
  if (c.vw == 1) w.Define("CV", vec.type);
  w.Define("VFROM(t)", vec.from_array);
  w.Define("VTO(x, t)", vec.to_array);
  if (c.lm == 1)  // a vector of the compute type from local memory
    w.Define("LDV_L(p)", c.vw == 1 ? "((p)[0])" : "CV_LOAD(p)");
  w.Define("MAC(a, b, c)", IsQuantized(d.type) ? "((c) + (a) * (b))" : "fma((a), (b), (c))");
  DeclareOperand(w, "A", d, weights_a, vec, c.vw);
  DeclareOperand(w, "B", d, !weights_a, vec, c.vw);
  w.AddType("Ctype", d.out_type);
  const std::string acc = ComputeScalar(d.type);
  if (IsQuantized(d.type)) {
    w.UseRequant(d.type);
  }
  // OuterEpilogue's vector form stores int8 outputs 8 at a time.
  if (d.type == DataType::kInt8Q && d.out_type != DataType::kFloat32 && c.vw == 8 &&
      w.dialect().vector_builtins)
    w.UseHelper(KernelHelper::kByteVectorStore);
  if (c.kp == GemmConfig::kPairs) w.UseHelper(KernelHelper::kPairProduct16);
  if (UsesDot4(d, c)) {
    w.UseHelper(KernelHelper::kDot4);
    // Bytes p[i], p[i + s], p[i + 2s], p[i + 3s] as one little-endian word.
    w.Define(
        "PACK4(p, i, s)",
        "((mp_u32)(mp_u8)(p)[i] | ((mp_u32)(mp_u8)(p)[(i) + (s)] << 8) | "
        "((mp_u32)(mp_u8)(p)[(i) + 2 * (s)] << 16) | ((mp_u32)(mp_u8)(p)[(i) + 3 * (s)] << 24))");
  }
  auto& k = w.Kernel(KernelName(d));
  k.Value("int", "M").Value("int", "N").Value("int", "K");
  k.In("Atype", "a").Value("int", "lda").In("Btype", "b").Value("int", "ldb");
  k.Out("Ctype", "c").Value("int", "ldc");
  if (IsQuantized(d.type)) {
    if (d.bias) k.In(acc, "bias");
    k.In(acc, "wsum");
    if (d.out_type == DataType::kFloat32)
      k.In("float", "scale");
    else
      k.In("int", "mult").In("int", "shift");
    k.Value("int", "x_zero").Value("int", "w_zero").Value("int", "c_zero");
    if (PacksA(d, c)) k.In("int", "apk");
  } else {
    k.Value("float", "alpha").Value("float", "beta");
    if (d.bias) k.In("float", "bias");
  }
  k.Body(Indent(c.algorithm == GemmConfig::Algorithm::kOuter ? OuterBody(d, c, w.dialect())
                                                                 : DotBody(d, c), 2));

  if (PacksA(d, c))
    w.Kernel(KernelName(d) + "_apack")
        .Value("int", "M")
        .Value("int", "K")
        .In("Atype", "a")
        .Value("int", "lda")
        .Value("int", "w_zero")
        .Out("int", "apk")
        .Body(R"(  const int KP = K / 2;
  $loop(i, M * KP) {
    const int m = i / KP, kk = i - m * KP;
    const int a0 = LDS_A(a, m * lda + 2 * kk) - w_zero;
    const int a1 = LDS_A(a, m * lda + 2 * kk + 1) - w_zero;
    apk[i] = (a0 & 0xffff) | (int)((mp_u32)a1 << 16);
  }
)");
  if (IsQuantized(d.type)) {
    // Σ_k W(ch, k) per output channel of the weight operand.
    const std::string wt = weights_a ? "Atype" : "Btype";
    const std::string idx = weights_a ? AIndex(d, "ch", "kk") : BIndex(d, "kk", "ch");
    w.Kernel(WeightSumsKernelName(d))
        .Value("int", "channels")
        .Value("int", "K")
        .In(wt, weights_a ? "a" : "b")
        .Value("int", weights_a ? "lda" : "ldb")
        .Out(acc, "sums")
        .Body(
            "  $loop(ch, channels) {\n    CS s = 0;\n    for (int kk = 0; kk < K; ++kk) s += LDS_" +
            std::string(weights_a ? "A(a, " : "B(b, ") + idx + ");\n    sums[ch] = s;\n  }\n");
  }
  if (desc.weight_bits == 4) int4::AddUnpackKernel(w);
  return w.Source();
}

Gemm::Gemm(Device& device, const GemmDesc& desc, const GemmQuant& quant)
    : device_(&device), desc_(desc) {
  desc_.Validate();
  config_ = TunedGemmConfig(device, desc_);  // tuning table, else the device default
  Prepare(quant);
}

Gemm::Gemm(Device& device, const GemmDesc& desc, const GemmQuant& quant, const GemmConfig& config)
    : device_(&device), desc_(desc), config_(config) {
  desc_.Validate();
  Prepare(quant);
}


}  // namespace mpcaffe::libdnn
