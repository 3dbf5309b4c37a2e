// libdnn/conv_winograd_int8_source.cc — the Winograd family's int8q kernels: F(2×2, 3×3) in
// integers (2G for G, 16-bit pair products, the sums shifted right by 2) and their output
// transform in vectors of tiles.
#include <optional>
#include <string>

#include "codegen/vector_words.h"
#include "libdnn/conv_winograd_internal.h"

namespace mpcaffe::libdnn::winograd_internal {

namespace {


/// int8q's output kernel body in vectors of 8 tiles of one output channel (OpenCL): the products
/// of 8 neighbouring tiles are one load per element, Aᵀ·M·A and the requantization (VectorWords::
/// RequantClamp, the paths `known` keeps) run in int32 lanes, and each lane's m×m outputs (and
/// residual inputs) are stored (loaded) at its tile's place; lanes past the last tile and outputs
/// past the plane's edge are skipped. The scalar form per tile took the 64-bit requantization per
/// output: ResNet-50's int8 output transforms 3.2 ms of a pass at AVX2 against fp32's 1.05.
std::string Int8VectorOutput(const KernelTarget& target, const ConvDesc& d, const Shape& s,
                             RequantKnown known) {
  const VectorWords v(target);
  const int L = 8, m = s.m, ow = d.out_w();
  const long tt = long(s.th) * s.tw;
  const std::string I = v.Type("int", L);
  const Transforms& f = TransformsOf(m);
  std::string out = "  const int pb = $global_id(0), o = $global_id(1);\n";
  out += "  if (pb >= " + Num(s.padded / L) + " || o >= " + Num(d.out_channels) + ") return;\n";
  out += "  const $global int* mp = prod + (long)o * " + Num(s.padded) + " + pb * " + Num(L) +
         ";\n  {\n";
  for (int i = 0; i < s.n; ++i)
    for (int j = 0; j < s.n; ++j)
      out += "    const " + I + " s" + Num(i) + "_" + Num(j) + " = " +
             v.Load(L, "mp + " + Num(long(i * s.n + j) * s.m_plane) + "L") + ";\n";
  out += Sandwich(f.at, f.at, "s", s.n, "t", "r", I);
  // Each lane's tile: its first output (`base`), corner and whether it is a tile at all.
  out += "    long base[" + Num(L) + "];\n    int oy[" + Num(L) + "], ox[" + Num(L) + "], live[" +
         Num(L) + "];\n";
  out += "    for (int k = 0; k < " + Num(L) + "; ++k) {\n";
  out += "      const int p = pb * " + Num(L) + " + k;\n      live[k] = p < " + Num(s.tiles) +
         ";\n";
  out += "      const int q = live[k] ? p : 0, img = q / " + Num(tt) + ", t = q % " + Num(tt) +
         ";\n";
  out += "      oy[k] = t / " + Num(s.tw) + " * " + Num(m) + ", ox[k] = t % " + Num(s.tw) +
         " * " + Num(m) + ";\n";
  out += "      base[k] = ((long)img * " + Num(s.img_out) + " + o) * " +
         Num(long(d.out_h()) * ow) + " + oy[k] * " + Num(ow) + " + ox[k];\n    }\n";
  out += "    const int bo = " + std::string(d.bias ? "bias[o]" : "0") +
         ", rqm = rq[2 * o], rqs = rq[2 * o + 1];\n";
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) {
      const std::string e = Num(i) + "_" + Num(j), off = Num(long(i) * ow + j);
      // A lane writes where its tile is real and the output inside the plane.
      auto inside = [&](int k) {
        const std::string lane = "[" + Num(k) + "]";
        const std::string edge = OutputInside(d, m, i, j, "oy" + lane, "ox" + lane);
        return "live" + lane + (edge.empty() ? "" : " && " + edge);
      };
      std::optional<VectorResidual> res;
      if (d.residual) {
        std::string lanes;
        for (int k = 0; k < L; ++k)
          lanes += std::string(k ? ", " : "") + "(" + inside(k) + ") ? (int)Dtype_LOAD(res, base[" +
                   Num(k) + "] + " + off + ") : res_zero";
        res = conv_internal::ResidualOf(target, v.Of(I, lanes), known);
      }
      out += "    {\n";
      out += v.RequantClamp(L, "q" + e, "(r" + e + " >> 2) + bo", "rqm", "rqs", "c_zero",
                            res ? &*res : nullptr, d.relu ? "c_zero" : "Dtype_QMIN", "Dtype_QMAX",
                            6, "", known.high);
      for (int k = 0; k < L; ++k)
        out += "      if (" + inside(k) + ") Dtype_STORE(y, base[" + Num(k) + "] + " + off + ", " +
               v.Lane("q" + e, k) + ");\n";
      out += "    }\n";
    }
  return out + "  }\n";
}

/// int8q's input kernel body a tile per work-item (CUDA): V[e][cp][p] = (Bᵀ·(d − z_x)·B)[e] of
/// input channels 2cp (low half) and 2cp + 1 (high half; 0 past C) and tile p (0 past P), one
/// word per element, neighbouring tiles in neighbouring words.
std::string Int8ScalarInput(const ConvDesc& d, const Shape& s) {
  const Transforms& f = TransformsOf(s.m);
  const int n = s.n, C = d.channels, H = d.height, W = d.width, CP = s.cp;
  const long PP = s.padded;
  std::string in = "  const int p = $global_id(0), cp = $global_id(1);\n";
  in += "  if (p >= " + Num(PP) + " || cp >= " + Num(CP) + ") return;\n";
  in += TileWindow(d, s);
  for (int h = 0; h < 2; ++h) {
    const std::string hs = h ? "b" : "a";
    in += "  const int c" + hs + " = 2 * cp + " + Num(h) + ", live" + hs + " = c" + hs + " < " +
          Num(C) + ";\n";
    in += "  const $global Dtype* x" + hs + " = x + ((long)img * " + Num(s.img_in) + " + min(c" +
          hs + ", " + Num(C - 1) + ")) * " + Num(long(H) * W) + ";\n";
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        in += "  const int " + hs + Num(i) + "_" + Num(j) + " = live" + hs + " && ry" + Num(i) +
              " && rx" + Num(j) + " ? (int)x" + hs + "[cy" + Num(i) + " + cx" + Num(j) +
              "] - x_zero : 0;\n";
    in += Sandwich(f.bt, f.bt, hs, n, "t" + hs, "r" + hs, "int");
  }
  in += "  $global int* vc = v + (long)cp * " + Num(PP) + " + p;\n";
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const std::string e = Num(a) + "_" + Num(b);
      in += "  vc[" + Num(long(a * n + b) * (s.v_plane / 2)) + "L] = (int)(((mp_u32)ra" + e +
            " & 0xffffu) | ((mp_u32)rb" + e + " << 16));\n";
    }
  return in;
}

/// int8q's input kernel body in vectors of 8 neighbouring tiles of one row (OpenCL): a
/// work-item takes a chunk of up to 8 tiles of one tile row (InputChunks) and a pair of input
/// channels; where the chunk's windows lie inside the plane, each window row of the 8 tiles is
/// two loads of 16 bytes, its 4 columns their even and odd lanes (the windows overlap by 2),
/// else each lane is read alone with the scalar form's bounds. The 16 words of V are stores of
/// 8 neighbouring tiles. Work-items past the rows write zeros to V's tiles past P. The scalar
/// form per tile (a work-item per tile reading 16 bytes per channel at computed addresses)
/// spent 0.26–0.49 ms of ResNet-50's res3 input transform at AVX2 in its loads.
std::string Int8VectorInput(const KernelTarget& target, const ConvDesc& d, const Shape& s) {
  const VectorWords v(target);
  const int L = 8, n = s.n, m = s.m, C = d.channels, H = d.height, W = d.width;
  const Transforms& f = TransformsOf(m);
  const std::string I = v.Type("int", L), U = v.Type("uint", L), B = v.Type("uchar", 2 * L);
  const long rows = long(d.batch) * s.th, chunks = rows * InputChunksPerRow(s);
  const int span = m * (L - 1) + n;  // columns the windows of L tiles cover
  std::string in = "  const int g = $global_id(0), cp = $global_id(1);\n";
  in += "  if (g >= " + Num(InputChunks(d, s)) + " || cp >= " + Num(s.cp) + ") return;\n";
  in += "  $global int* vc = v + (long)cp * " + Num(s.padded) + ";\n";
  // V's tiles past P (the products kernel's whole blocks) are zeros.
  in += "  if (g >= " + Num(chunks) + ") {\n";
  in += "    const long p0 = " + Num(s.tiles) + " + (long)(g - " + Num(chunks) + ") * " + Num(L) +
        ";\n";
  in += "    for (int k = 0; k < " + Num(L) + " && p0 + k < " + Num(s.padded) + "; ++k) {\n";
  for (int e = 0; e < s.elements(); ++e)
    in += "      vc[" + Num(long(e) * (s.v_plane / 2)) + "L + p0 + k] = 0;\n";
  in += "    }\n    return;\n  }\n";
  in += "  const int row = g / " + Num(InputChunksPerRow(s)) + ", tx0 = g % " +
        Num(InputChunksPerRow(s)) + " * " + Num(L) + ";\n";
  in += "  const int img = row / " + Num(s.th) + ", ty = row % " + Num(s.th) + " * " + Num(m) +
        " - " + Num(d.pad_h) + ", tx = tx0 * " + Num(m) + " - " + Num(d.pad_w) + ";\n";
  in += "  const int lanes = min(" + Num(L) + ", " + Num(s.tw) + " - tx0);\n";
  in += "  const long p0 = (long)row * " + Num(s.tw) + " + tx0;\n";
  in += "  const int inner = lanes == " + Num(L) + " && tx >= 0 && tx + " + Num(span - 1) + " < " +
        Num(W) + ";\n";
  if (W >= n) {  // the border chunks' words: each lane's first column, clamped, and the shift
    std::string starts;
    for (int t = 0; t < L; ++t) starts += std::string(t ? ", " : "") + Num(m * t);
    in += "  const " + I + " st = tx + " + v.Of(I, starts) + ", cs = " +
          v.Clamp("st", "0", Num(W - n)) + ", sh = st - cs;\n";
    std::string lanes;
    for (int t = 0; t < L; ++t) lanes += std::string(t ? ", " : "") + Num(t);
    in += "  const " + I + " lane_ok = " + v.Of(I, lanes) + " < lanes;\n";
  }
  for (int i = 0; i < n; ++i) {
    const std::string is = Num(i);
    in += "  const int ry" + is + " = ty + " + is + " >= 0 && ty + " + is + " < " + Num(H) +
          ", cy" + is + " = min(max(ty + " + is + ", 0), " + Num(H - 1) + ") * " + Num(W) + ";\n";
  }
  for (int h = 0; h < 2; ++h) {
    const std::string hs = h ? "b" : "a";
    in += "  const int c" + hs + " = 2 * cp + " + Num(h) + ", live" + hs + " = c" + hs + " < " +
          Num(C) + ";\n";
    in += "  const $global Dtype* x" + hs + " = x + ((long)img * " + Num(s.img_in) + " + min(c" +
          hs + ", " + Num(C - 1) + ")) * " + Num(long(H) * W) + ";\n";
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) in += "  " + I + " " + hs + Num(i) + "_" + Num(j) + ";\n";
    in += "  if (inner) {\n";
    for (int i = 0; i < n; ++i) {
      const std::string is = Num(i), ok = "live" + hs + " && ry" + is;
      // Columns tx + 2t + j of lane t: j = 0, 1 the even and odd bytes from tx, j = 2, 3 from
      // tx + 2 (F(2×2)'s windows step by 2).
      for (int k = 0; k < 2; ++k)
        in += "    const " + B + " w" + hs + is + "_" + Num(k) + " = " +
              v.Load(2 * L, "x" + hs + " + cy" + is + " + tx + " + Num(m * k)) + ";\n";
      for (int j = 0; j < n; ++j) {
        const std::string src = "w" + hs + is + "_" + Num(j / 2);
        const std::string lanes = j % 2 ? v.Odd(src) : v.Even(src);
        in += "    " + hs + is + "_" + Num(j) + " = " + ok + " ? " + v.Convert(I, lanes) +
              " - x_zero : " + v.Splat(I, "0") + ";\n";
      }
    }
    in += "  } else {\n";
    for (int i = 0; i < n; ++i) {
      const std::string ok = "live" + hs + " && ry" + Num(i);
      if (W >= n) {
        // Lane t's window row is one word of 4 bytes from its clamped first column cs (inside
        // the row); its column j is byte j + sh of it (sh = start − cs), zero outside the plane.
        std::string words;
        for (int t = 0; t < L; ++t)
          words += std::string(t ? ", " : "") +
                   v.As("uint", v.Load(n, "x" + hs + " + cy" + Num(i) + " + " + v.Lane("cs", t)));
        in += "    const " + U + " d" + hs + Num(i) + " = " + v.Of(U, words) + ";\n";
        for (int j = 0; j < n; ++j) {
          const std::string col = "st + " + Num(j);
          in += "    " + hs + Num(i) + "_" + Num(j) + " = " + v.Select(
                    v.Splat(I, "0"),
                    v.As(I, "(d" + hs + Num(i) + " >> " +
                                v.As(U, v.Clamp("sh + " + Num(j), "0", Num(n - 1)) + " * 8") +
                                ") & 0xffu") + " - x_zero",
                    "(" + col + " >= 0) & (" + col + " < " + Num(W) + ") & lane_ok & " +
                        v.Splat(I, "-(" + ok + ")")) + ";\n";
        }
        continue;
      }
      for (int j = 0; j < n; ++j) {  // planes narrower than a window row: byte by byte
        std::string lanes;
        for (int t = 0; t < L; ++t) {
          const std::string col = "tx + " + Num(m * t + j);
          lanes += std::string(t ? ", " : "") + "(" + Num(t) + " < lanes && " + ok + " && " +
                   col + " >= 0 && " + col + " < " + Num(W) + ") ? (int)x" + hs + "[cy" +
                   Num(i) + " + min(max(" + col + ", 0), " + Num(W - 1) + ")] - x_zero : 0";
        }
        in += "    " + hs + Num(i) + "_" + Num(j) + " = " + v.Of(I, lanes) + ";\n";
      }
    }
    in += "  }\n";
    in += Sandwich(f.bt, f.bt, hs, n, "t" + hs, "r" + hs, I);
  }
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const std::string e = Num(a) + "_" + Num(b);
      in += "  const " + I + " q" + e + " = " +
            v.As(I, "(" + v.As(U, "ra" + e) + " & 0xffffu) | (" + v.As(U, "rb" + e) + " << 16)") +
            ";\n";
    }
  in += "  if (lanes == " + Num(L) + ") {\n";
  for (int e = 0; e < s.elements(); ++e) {
    const std::string name = "q" + Num(e / n) + "_" + Num(e % n);
    in += "    " + v.Store(L, name, "vc + " + Num(long(e) * (s.v_plane / 2)) + "L + p0") + ";\n";
  }
  in += "  } else {\n";
  for (int t = 0; t < L; ++t) {
    in += "    if (" + Num(t) + " < lanes) {";
    for (int e = 0; e < s.elements(); ++e)
      in += " vc[" + Num(long(e) * (s.v_plane / 2)) + "L + p0 + " + Num(t) + "] = " +
            v.Lane("q" + Num(e / n) + "_" + Num(e % n), t) + ";";
    in += " }\n";
  }
  return in + "  }\n";
}

}  // namespace

/// int8q's four kernels (WinogradSource's, in integers): U = 2G·(g − z_w)·2Gᵀ and V = Bᵀ·(d −
/// z_x)·B as 16-bit values (|U| ≤ 9·255, |V| ≤ 4·255), two input channels per 32-bit word of U
/// and of V; the products in 16-bit pairs (KernelHelper::kPairProduct16) into
/// int32 lanes of 8 tiles; Aᵀ·M·A shifted right by 2 is Σ(x − z_x)(w − z_w), requantized as the
/// direct kernel's scalar epilogue does.
std::string Int8Source(const KernelTarget& target, const ConvDesc& d, const WinogradConfig& c,
                       RequantKnown known, const Shape& s) {
  const int n = s.n, m = s.m, C = d.channels, O = d.out_channels;
  const int ow = d.out_w(), CP = s.cp;
  const long PP = s.padded;
  KernelWriter w(target, "conv_winograd");
  w.AddType("Dtype", d.type);
  w.UseRequant(d.type);
  conv_internal::DeclareWeightStorage(w, d);
  w.Define("Btype", TraitsOf(d.type).acc_alias());
  w.UseHelper(KernelHelper::kPairProduct16);
  w.AddVector("Vi", Scalar::kI32, c.vx);

  // U[e][ob][cp][j]: channels 2cp and 2cp + 1 of output channel ob·oc + j, low half first.
  std::string wt = "  $loop(i, " + Num(long(s.ob) * c.oc * CP) + ") {\n";
  wt += "    const int o = i / " + Num(CP) + ", cp = i % " + Num(CP) + ";\n";
  wt += "    const int ob = o / " + Num(c.oc) + ", j = o % " + Num(c.oc) + ";\n";
  wt += "    const int oo = min(o, " + Num(O - 1) + "), zw = wz[oo];\n";
  for (int h = 0; h < 2; ++h) {
    const std::string hs = h ? "b" : "a";
    wt += "    const int c" + hs + " = 2 * cp + " + Num(h) + ", live" + hs + " = o < " + Num(O) +
          " && c" + hs + " < " + Num(C) + ";\n";
    wt += "    const long g" + hs + " = ((long)oo * " + Num(C) + " + min(c" + hs + ", " +
          Num(C - 1) + ")) * 9;\n";
    for (int k = 0; k < 3; ++k)
      for (int l = 0; l < 3; ++l)
        wt += "    const int " + hs + Num(k) + "_" + Num(l) + " = live" + hs +
              " ? (int)WLOAD(w, g" + hs + " + " + Num(3 * k + l) + ") - zw : 0;\n";
    wt += Sandwich(DoubledG(), DoubledG(), hs, 3, "t" + hs, "r" + hs, "int");
  }
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const std::string e = Num(a) + "_" + Num(b);
      wt += "    u[((" + Num(long(a * n + b) * s.ob) + " + ob) * " + Num(CP) + " + cp) * " +
            Num(c.oc) + " + j] = (int)(((mp_u32)ra" + e + " & 0xffffu) | ((mp_u32)rb" + e +
            " << 16));\n";
    }
  wt += "  }\n";
  w.Kernel("conv_wino_wt").In("Wstore", "w").In("int", "wz").Out("int", "u").Body(wt);

  // V[e][cp][p] = (Bᵀ·(d − z_x)·B)[e] of input channels 2cp and 2cp + 1, tile p.
  const std::string in = InputTilesPerItem(d.type, target) == 8
                               ? Int8VectorInput(target, d, s)
                               : Int8ScalarInput(d, s);
  w.Kernel("conv_wino_in").In("Dtype", "x").Out("int", "v").Value("int", "x_zero").Body(in);

  // M_e[o][p] = Σ_cp U_e[o][cp] · V_e[cp][p] in pairs: oc output channels × px vectors of 8
  // tiles per work-item.
  std::string g = ProductsPrologue(s, c, "short", 2, "int", CP);
  auto acc = [](int o, int q) { return "a" + Num(o) + "_" + Num(q); };
  for (int o = 0; o < c.oc; ++o)
    for (int q = 0; q < c.px; ++q) g += "  Vi " + acc(o, q) + " = (Vi)(0);\n";
  g += "  for (int c = 0; c < " + Num(CP) + "; ++c) {\n";
  for (int q = 0; q < c.px; ++q)
    g += "    const mp_short16 x" + Num(q) + " = MP_SHORT16_LOAD(xn + (long)c * " +
         Num(PP * 2) + " + " + Num(q * c.vx * 2) + ");\n";
  g += "    const $global int* wc = wb + c * " + Num(c.oc) + ";\n";
  for (int o = 0; o < c.oc; ++o) {
    g += "    const mp_short16 w" + Num(o) + " = MP_PAIR16_WORD(wc[" + Num(o) + "]);\n";
    for (int q = 0; q < c.px; ++q)
      g += "    " + acc(o, q) + " += MP_MADD16(x" + Num(q) + ", w" + Num(o) + ");\n";
  }
  g += "  }\n";
  g += ProductStores(d, c, s, "int", "Vi", acc);
  w.Kernel("conv_wino_gemm")
      .In("int", "u")
      .In("short", "v")
      .Out("int", "prod")
      .VectorWidth(Scalar::kI32, c.vx)
      .Body(g);

  // Y = (Aᵀ·M·A) / 4 per output channel and tile, requantized: in vectors of 8 tiles where the
  // dialect has vectors (Int8VectorOutput), else the direct kernel's scalar epilogue per tile.
  std::string out;
  if (OutputTilesPerItem(d.type, target) == 8) {
    out = Int8VectorOutput(target, d, s, known);
  } else {
    out = OutputTile(d, s, "int");
    out += std::string("    const int bo = ") + (d.bias ? "bias[o]" : "0") +
           ", rqm = rq[2 * o], rqs = rq[2 * o + 1];\n";
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) {
        const std::string at = "base + " + Num(long(i) * ow + j), r = "r" + Num(i) + "_" + Num(j);
        const std::string cond = OutputInside(d, m, i, j);
        out += "    " + (cond.empty() ? "" : "if (" + cond + ") ") + "{\n";
        out += conv_internal::ScalarInt8Output(d, "(" + r + " >> 2) + bo", "res", "y", at, 6);
        out += "    }\n";
      }
    out += "  }\n";
  }
  w.Kernel("conv_wino_out")
      .In("int", "prod")
      .In("Btype", "bias")
      .In("int", "rq")
      .In("Dtype", "res")
      .Out("Dtype", "y")
      .Value("int", "c_zero")
      .Value("int", "res_zero")
      .Value("int", "res_m")
      .Value("int", "res_s")
      .Body(out);
  return w.Source();
}


}  // namespace mpcaffe::libdnn::winograd_internal
