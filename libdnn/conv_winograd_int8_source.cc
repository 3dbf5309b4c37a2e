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
                            6, "", known.high, known.pre_shift);
      for (int k = 0; k < L; ++k)
        out += "      if (" + inside(k) + ") Dtype_STORE(y, base[" + Num(k) + "] + " + off + ", " +
               v.Lane("q" + e, k) + ");\n";
      out += "    }\n";
    }
  return out + "  }\n";
}

/// Channel 2cp + h of the pair (h 0: `ca`, `livea`, `xa`; 1: `cb`, `liveb`, `xb`): whether it
/// exists and its plane of image `img`, clamped into the planes.
std::string ChannelOfPair(const ConvDesc& d, const Shape& s, int h) {
  const std::string hs = h ? "b" : "a";
  const int C = d.channels;
  return "  const int c" + hs + " = 2 * cp + " + Num(h) + ", live" + hs + " = c" + hs + " < " +
         Num(C) + ";\n  const $global Dtype* x" + hs + " = x + ((long)img * " + Num(s.img_in) +
         " + min(c" + hs + ", " + Num(C - 1) + ")) * " + Num(long(d.height) * d.width) + ";\n";
}

/// int8q's input kernel body a tile per work-item (CUDA): V[e][cp][p] = (Bᵀ·(d − z_x)·B)[e] of
/// input channels 2cp (low half) and 2cp + 1 (high half; 0 past C) and tile p (0 past P), one
/// word per element, neighbouring tiles in neighbouring words.
std::string Int8ScalarInput(const ConvDesc& d, const Shape& s) {
  const Transforms& f = TransformsOf(s.m);
  const int n = s.n, CP = s.cp;
  const long PP = s.padded;
  std::string in = "  const int p = $global_id(0), cp = $global_id(1);\n";
  in += "  if (p >= " + Num(PP) + " || cp >= " + Num(CP) + ") return;\n";
  in += TileWindow(d, s);
  for (int h = 0; h < 2; ++h) {
    const std::string hs = h ? "b" : "a";
    in += ChannelOfPair(d, s, h);
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

/// int8q's input kernel body in chunks of 8 neighbouring tiles of one tile row (OpenCL;
/// ChunkPrologue, ChunkWindow, ChunkStores): a work-item per chunk and pair of input channels,
/// their words of V stored for the 8 tiles at once.
std::string Int8VectorInput(const KernelTarget& target, const ConvDesc& d, const Shape& s) {
  const VectorWords v(target);
  const int L = 8, n = s.n;
  const Transforms& f = TransformsOf(s.m);
  const std::string I = v.Type("int", L), U = v.Type("uint", L);
  std::string in = ChunkPrologue(v, d, s, "cp", s.cp, "int", s.v_plane / 2);
  for (int h = 0; h < 2; ++h) {
    const std::string hs = h ? "b" : "a";
    in += ChannelOfPair(d, s, h);
    in += ChunkWindow(v, d, s, hs, "x" + hs, "live" + hs, true);
    in += Sandwich(f.bt, f.bt, hs, n, "t" + hs, "r" + hs, I);
  }
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const std::string e = Num(a) + "_" + Num(b);
      in += "  const " + I + " q" + e + " = " +
            v.As(I, "(" + v.As(U, "ra" + e) + " & 0xffffu) | (" + v.As(U, "rb" + e) + " << 16)") +
            ";\n";
    }
  return in + ChunkStores(v, s, "q", s.v_plane / 2);
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
  const std::string in = InputTilesPerItem(s.m, target) == 8
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
