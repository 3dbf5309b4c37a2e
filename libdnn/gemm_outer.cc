// libdnn/gemm_outer.cc — the GEMM generator's outer-product register tiles (kOuter): the k steps
// of every product form (multiply-add, byte pairs, 4-way dot products), the local-memory tile
// and the tile's output pipeline; gemm.cc declares the kernel and writes the dot-product tile.
#include <functional>
#include <sstream>
#include <string>

#include "codegen/vector_words.h"
#include "libdnn/gemm_internal.h"

namespace mpcaffe::libdnn::gemm_internal {

namespace {

std::string Str(int v) { return std::to_string(v); }


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

}  // namespace


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

}  // namespace mpcaffe::libdnn::gemm_internal
