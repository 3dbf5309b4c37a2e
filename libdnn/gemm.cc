// libdnn/gemm.cc — the GEMM kernel generator: the kernel's declarations, operands and output
// pipeline, and the dot-product register tile, one body for every data type and both dialects
// (the outer-product tiles: gemm_outer.cc; gemm_launch.cc prepares the weights and launches).
#include "libdnn/gemm.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "codegen/vector_words.h"
#include "libdnn/gemm_internal.h"
#include "libdnn/int4_internal.h"
#include "libdnn/tuner.h"  // ChooseGemmConfig
#include "quant/fixed_point.h"
#include "quant/quant_params.h"

namespace mpcaffe::libdnn {

using namespace gemm_internal;  // NOLINT: the GEMM generators' shared vocabulary

namespace {

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

}  // namespace

namespace gemm_internal {

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
  return c.kp == GemmConfig::kPairs && d.type == DataType::kInt8Q && NeedActivationSums(d);
}
bool SplitsPairs(const GemmDesc& d, const GemmConfig& c) {
  return c.kp == GemmConfig::kPairs && d.type == DataType::kInt16Q;
}
/// kp = 2 with the weights as a not transposed A (convolution as GEMM, inner product): a small
/// kernel first writes op(A) as 32-bit pairs (w(m, k) − z_w, w(m, k + 1) − z_w), so each pair
/// step broadcasts one loaded int (no byte shuffle and no z_w subtraction per N tile; those
/// took a third of the vector instructions of the pair loop). Only when at least 8 column
/// tiles reuse each row of A: with fewer, writing and re-reading the pairs cost more than it
/// saved (docs/BENCHMARKS.md, "Default configurations").
bool PacksA(const GemmDesc& d, const GemmConfig& c) {
  return c.algorithm == GemmConfig::Algorithm::kOuter && c.kp == GemmConfig::kPairs &&
         d.weights == WeightOperand::kA && !d.trans_a && d.N >= 8 * c.cols_per_item();
}

/// Whether the kernel accumulates Σx beside the products (the Epilogue's `xs`).
bool KernelSumsActivations(const GemmDesc& d, const GemmConfig& c) {
  return NeedActivationSums(d) && !FoldsWeightZero(d, c);
}
bool SplitSumsActivations(const GemmDesc& d, const GemmConfig& c) {
  return !d.weights_signed || KernelSumsActivations(d, c);
}

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

std::string KLoopsTo(const GemmConfig& c,
                     const std::function<std::string(const std::string&)>& step, int stride,
                     const std::string& bound) {
  std::ostringstream s;
  const std::string ks = Str(stride);
  if (c.ku > 1) {
    s << "for (; k + " << stride * c.ku << " <= " << bound << "; k += " << stride * c.ku
      << ") {\n";
    for (int u = 0; u < c.ku; ++u) s << Indent(step("k + " + Str(u * stride)), 2);
    s << "}\n";
  }
  s << "for (; k + " << ks << " <= " << bound << "; k += " << ks << ") {\n"
    << Indent(step("k"), 2) << "}\n";
  return s.str();
}

std::string KLoops(const GemmConfig& c, const std::function<std::string(const std::string&)>& step,
                   int stride) {
  return "int k = 0;\n" + KLoopsTo(c, step, stride, "K");
}

/// Whether the kernel packs four int8 k values per 32-bit dot product (mp_dot4_*): kOuter with
/// kp = 4, and kDot with scalar lanes.
bool UsesDot4(const GemmDesc& d, const GemmConfig& c) {
  return d.type == DataType::kInt8Q && c.vw == 1 &&
         (c.algorithm == GemmConfig::Algorithm::kDot || c.kp == GemmConfig::kDot4);
}

std::string WeightSumsKernelName(const GemmDesc& d) { return Gemm::KernelName(d) + "_wsum"; }

/// (wg, 1, 1); lm = 1: group_n() work-items along the N tiles' dimension and group_m() along
/// the M tiles' (which dimension is which follows mf, as in the global size).
Dim3 LocalSize(const GemmConfig& c) {
  if (c.lm != 1) return {static_cast<size_t>(c.wg), 1, 1};
  const size_t n = c.group_n(), m = c.group_m();
  return c.mf ? Dim3{m, n, 1} : Dim3{n, m, 1};
}

}  // namespace gemm_internal

namespace {

/// int16q with kp = 2 (the dot tile): 16-bit pair products on 17-bit operands. The activation
/// x (0..65535) splits into bytes hi·256 + lo, the weight is held as w − WCENTER (int16 for
/// any stored value: WCENTER = 32768 unsigned, 0 signed), so Σx·w = 256·Σhi·w' + Σlo·w' +
/// WCENTER·Σx, two vpmaddwd (one vpdpwssd each with VNNI) per 16 products where 64-bit lanes
/// take a 32 × 32 → 64 multiply and an add per 4. Σx rides along as Σ(x − 32768) against ones.
std::string DotSplitBody(const GemmDesc& d, const GemmConfig& c) {
  const bool act_a = ActivationsAreA(d);
  const int nx = act_a ? c.tm : c.tn;
  const std::string xo = act_a ? "a" : "b", wo = act_a ? "b" : "a";
  const std::string xp = act_a ? "ap" : "bp", wp = act_a ? "bp" : "ap";
  const int nw = act_a ? c.tn : c.tm;
  auto acc = [&](int x, int w) { return act_a ? Str(x) + "_" + Str(w) : Str(w) + "_" + Str(x); };
  const int step = 2 * c.vw;
  // Σx: for the WCENTER term (unsigned weights) and for z_w's term in the epilogue.
  const bool sums = SplitSumsActivations(d, c);
  std::ostringstream s;
  s << DotTileStart(d, c);
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) s << "CV acc" << i << "_" << j << " = (CV)(0);\n";
  if (sums) {
    for (int q = 0; q < nx; ++q) s << "CV xs" << q << " = (CV)(0);\n";
    s << "const mp_short16 ones = (mp_short16)(1);\n";
  }
  s << "int k = 0;\n";
  s << "while (k + " << step << " <= K) {\n";
  s << "  const int kc = min(K, k + " << kSplitFlushSteps * step << ");\n";
  for (int x = 0; x < nx; ++x) {
    if (sums) s << "  mp_pair_acc xp" << x << " = (mp_pair_acc)(0);\n";
    for (int w = 0; w < nw; ++w)
      s << "  mp_pair_acc lo" << acc(x, w) << " = (mp_pair_acc)(0), hi" << acc(x, w)
        << " = (mp_pair_acc)(0);\n";
  }
  auto one = [&](const std::string& k) {
    std::ostringstream t;
    t << "{\n";
    for (int w = 0; w < nw; ++w)
      t << "  const mp_short16 w" << w << " = "
        << (d.weights_signed ? "MP_SHORT16_LOAD(" : "MP_SHORT16_CENTERED(") << wp << w << " + "
        << k << ");\n";
    for (int x = 0; x < nx; ++x) {
      t << "  const mp_short16 xl" << x << " = MP_SHORT16_SPLIT_LO(" << xp << x << " + " << k
        << "), xh" << x << " = MP_SHORT16_SPLIT_HI(" << xp << x << " + " << k << ");\n";
      if (sums)
        t << "  xp" << x << " += MP_MADD16(MP_SHORT16_CENTERED(" << xp << x << " + " << k
          << "), ones);\n";
    }
    for (int x = 0; x < nx; ++x)
      for (int w = 0; w < nw; ++w) {
        t << "  lo" << acc(x, w) << " += MP_MADD16(xl" << x << ", w" << w << ");\n";
        t << "  hi" << acc(x, w) << " += MP_MADD16(xh" << x << ", w" << w << ");\n";
      }
    t << "}\n";
    return t.str();
  };
  s << Indent(KLoopsTo(c, one, step, "kc"), 2);
  for (int x = 0; x < nx; ++x) {
    if (sums) s << "  MP_PAIR_FLUSH(xs" << x << ", xp" << x << ", (mp_pair_acc)(0));\n";
    for (int w = 0; w < nw; ++w)
      s << "  MP_PAIR_FLUSH(acc" << acc(x, w) << ", lo" << acc(x, w) << ", hi" << acc(x, w)
        << ");\n";
  }
  s << "}\n";
  // Horizontal sums: r = Σx·w' + WCENTER·Σx, s = Σx (Σ(x − 32768) + 32768 per k so far).
  s << "CS t[VW];\n";
  for (int q = 0; q < nx && sums; ++q) {
    s << "VTO(xs" << q << ", t);\n";
    s << "CS s" << q << " = (CS)32768 * k;\n";
    s << "for (int v = 0; v < VW; ++v) s" << q << " += t[v];\n";
  }
  for (int i = 0; i < c.tm; ++i)
    for (int j = 0; j < c.tn; ++j) {
      s << "VTO(acc" << i << "_" << j << ", t);\n";
      s << "CS r" << i << "_" << j << " = "
        << (d.weights_signed ? "0" : "(CS)32768 * s" + Str(act_a ? i : j)) << ";\n";
      s << "for (int v = 0; v < VW; ++v) r" << i << "_" << j << " += t[v];\n";
    }
  s << DotTail(d, c, sums, /*fold=*/false, KernelSumsActivations(d, c));
  return s.str();
}

std::string DotBody(const GemmDesc& d, const GemmConfig& c) {
  const bool sums = KernelSumsActivations(d, c);
  const bool fold = FoldsWeightZero(d, c);
  const bool act_a = ActivationsAreA(d);
  std::ostringstream s;
  s << DotTileStart(d, c);
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
  // int8 with kp = 2: 16 k per step as 16-bit pairs (KernelHelper::kPairProduct16), each
  // MP_MADD16 adding 16 products to the 8 int32 lanes of a tile vector (one vpmaddwd on AVX2,
  // where the one-k form's int32 lanes take a vpmulld per 8 products); z_w is subtracted from
  // the weights as they are loaded (FoldsWeightZero), so no Σx rides along.
  auto pair_step = [&](const std::string& k) {
    const std::string wz = fold ? " - (mp_short16)((short)w_zero)" : "";
    std::ostringstream t;
    t << "{\n";
    for (int j = 0; j < c.tn; ++j)
      t << "  const mp_short16 b" << j << " = MP_SHORT16_FROM(bp" << j << " + " << k << ")"
        << (act_a ? wz : "") << ";\n";
    for (int i = 0; i < c.tm; ++i)
      t << "  const mp_short16 a" << i << " = MP_SHORT16_FROM(ap" << i << " + " << k << ")"
        << (act_a ? "" : wz) << ";\n";
    for (int i = 0; i < c.tm; ++i)
      for (int j = 0; j < c.tn; ++j)
        t << "  acc" << i << "_" << j << " += MP_MADD16(a" << i << ", b" << j << ");\n";
    t << "}\n";
    return t.str();
  };
  if (UsesDot4(d, c))
    s << KLoops(c, dot4_step, 4);
  else if (SplitsPairs(d, c))
    return DotSplitBody(d, c);
  else if (c.kp == GemmConfig::kPairs)
    s << KLoops(c, pair_step, 2 * c.vw);
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
  s << DotTail(d, c, sums, fold, sums);
  return s.str();
}

}  // namespace

namespace gemm_internal {

std::string DotTileStart(const GemmDesc& d, const GemmConfig& c) {
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
  return s.str();
}

std::string DotTail(const GemmDesc& d, const GemmConfig& c, bool sums, bool fold,
                    bool epilogue_sums) {
  const bool act_a = ActivationsAreA(d);
  const int nsums = act_a ? c.tm : c.tn;
  std::ostringstream s;
  s << "for (; k < K; ++k) {\n";
  const std::string tail_wz = fold ? " - w_zero" : "";
  for (int j = 0; j < c.tn; ++j)
    s << "  const CS b" << j << " = LDS_B(bp" << j << ", k)" << (act_a ? tail_wz : "") << ";\n";
  for (int i = 0; i < c.tm; ++i)
    s << "  const CS a" << i << " = LDS_A(ap" << i << ", k)" << (act_a ? "" : tail_wz) << ";\n";
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
      const std::string xs = epilogue_sums ? "s" + Str(act_a ? i : j) : "0";
      s << Indent(Epilogue(d, "r" + Str(i) + "_" + Str(j), xs, fold), 4) << "  }\n}\n";
    }
  return s.str();
}

}  // namespace gemm_internal

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
  w.Define("MAC(a, b, c)", IsQuantized(d.type) ? "((c) + (a) * (b))" : "$fma((a), (b), (c))");
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
  if (UsesQuads(d, c)) {
    w.UseHelper(KernelHelper::kByteQuadProduct16);
    w.Function(QuadFunction(d, c));
  }
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
  const bool outer = c.algorithm == GemmConfig::Algorithm::kOuter;
  k.Body(Indent(UsesQuads(d, c) ? (outer ? QuadOuterBody(d, c) : QuadDotBody(d, c))
                : outer         ? OuterBody(d, c, w.dialect())
                                : DotBody(d, c),
                2));

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
  const Chosen<GemmConfig> chosen = ChooseGemmConfig(device, desc_);  // override, record, default
  config_ = chosen.config;
  if (KernelChoiceLogActive())
    NoteKernelChoice({"gemm", config_.ToString(), chosen.source, desc_.ToString()});
  Prepare(quant);
}

Gemm::Gemm(Device& device, const GemmDesc& desc, const GemmQuant& quant, const GemmConfig& config)
    : device_(&device), desc_(desc), config_(config) {
  desc_.Validate();
  Prepare(quant);
}

}  // namespace mpcaffe::libdnn
