// libdnn/conv_winograd.cc — the Winograd forward family (conv_winograd.h): its configuration,
// the text helpers its kernels share (conv_winograd_internal.h), the fp32 kernel texts (the
// transforms unrolled from their constant matrices; int8q's in conv_winograd_int8_source.cc)
// and the launches.
#include "libdnn/conv_winograd.h"

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "codegen/vector_words.h"
#include "device/error.h"
#include "libdnn/conv_families.h"
#include "libdnn/conv_winograd_internal.h"

namespace mpcaffe::libdnn {

using conv_internal::DivUp;

namespace winograd_internal {

namespace {

/// A float literal of `v` (shortest text that reads back as the same float).
std::string FloatLiteral(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

/// Σ_k coef[k]·operand(k) as text, zero coefficients left out, ±1 without a multiply; float
/// literals, or integer ones (`integers`: the int8 path's matrices hold whole numbers).
template <typename Operand>
std::string Combination(const std::vector<double>& coef, Operand operand, bool integers) {
  std::string s;
  for (size_t k = 0; k < coef.size(); ++k) {
    const double c = coef[k];
    if (c == 0) continue;
    const std::string x = operand(int(k));
    if (c == 1)
      s += s.empty() ? x : " + " + x;
    else if (c == -1)
      s += s.empty() ? "-" + x : " - " + x;
    else
      s += (s.empty() ? "" : " + ") + (integers ? Num(long(c)) : FloatLiteral(c)) + " * " + x;
  }
  return s.empty() ? (integers ? "0" : "0.0f") : s;
}

}  // namespace

const Transforms& TransformsOf(int m) {
  static const Transforms f2{2,
                             4,
                             {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                             {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
                             {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  static const Transforms f4{
      4,
      6,
      {{4, 0, -5, 0, 1, 0},
       {0, -4, -4, 1, 1, 0},
       {0, 4, -4, -1, 1, 0},
       {0, -2, -1, 2, 1, 0},
       {0, 2, -1, -2, 1, 0},
       {0, 4, 0, -5, 0, 1}},
      {{1.0 / 4, 0, 0},
       {-1.0 / 6, -1.0 / 6, -1.0 / 6},
       {-1.0 / 6, 1.0 / 6, -1.0 / 6},
       {1.0 / 24, 1.0 / 12, 1.0 / 6},
       {1.0 / 24, -1.0 / 12, 1.0 / 6},
       {0, 0, 1}},
      {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};
  return m == 4 ? f4 : f2;
}

std::string Num(long v) { return std::to_string(v); }

/// Text computing `out`<i>_<j> = (L · X · Rᵀ)[i][j] for the private values `in`<k>_<l> of X
/// (rows × cols, of `type`: float, or int with integer matrices), through temporaries
/// `tmp`<i>_<l>.
std::string Sandwich(const Matrix& left, const Matrix& right, const std::string& in, int cols,
                     const std::string& tmp, const std::string& out,
                     const std::string& type) {
  const bool integers = type != "float";
  std::string s;
  for (size_t i = 0; i < left.size(); ++i)
    for (int l = 0; l < cols; ++l)
      s += "    const " + type + " " + tmp + Num(long(i)) + "_" + Num(l) + " = " +
           Combination(left[i], [&](int k) { return in + Num(k) + "_" + Num(l); }, integers) +
           ";\n";
  for (size_t i = 0; i < left.size(); ++i)
    for (size_t j = 0; j < right.size(); ++j)
      s += "    const " + type + " " + out + Num(long(i)) + "_" + Num(long(j)) + " = " +
           Combination(
               right[j], [&](int l) { return tmp + Num(long(i)) + "_" + Num(l); }, integers) +
           ";\n";
  return s;
}

/// F(2×2, 3×3) in integers for int8q: Bᵀ and Aᵀ are whole already; G's halves are doubled
/// (2G), so the products and their output transform come out 4 times the convolution's sums,
/// which the output kernel shifts back exactly.
const Matrix& DoubledG() {
  static const Matrix g2{{2, 0, 0}, {1, 1, 1}, {1, -1, 1}, {0, 0, 2}};
  return g2;
}

/// One group of `d` as a convolution of its own (the whole of a one-group `d`).
ConvDesc GroupSlice(const ConvDesc& d) {
  ConvDesc g = d;
  g.channels = d.channels / d.groups, g.out_channels = d.out_channels / d.groups, g.groups = 1;
  return g;
}

/// The shape of one group's kernels on the whole images of `d`.
Shape ShapeOf(const ConvDesc& d, const WinogradConfig& c) {
  Shape s(GroupSlice(d), c);
  s.img_in = d.channels, s.img_out = d.out_channels;
  return s;
}

/// The input transform's prologue after its bounds check: tile p's image and corner (`q`, `img`,
/// `t`, `ty`, `tx`; tiles past P read nothing: `live`), and per row / column i of its window the
/// clamped offsets `cy`i, `cx`i and whether they lie inside the plane (`ry`i, `rx`i).
std::string TileWindow(const ConvDesc& d, const Shape& s) {
  const long tt = long(s.th) * s.tw;
  const int H = d.height, W = d.width;
  std::string in = "  const int live = p < " + Num(s.tiles) + ";\n";
  in += "  const int q = live ? p : 0, img = q / " + Num(tt) + ", t = q % " + Num(tt) + ";\n";
  in += "  const int ty = t / " + Num(s.tw) + " * " + Num(s.m) + " - " + Num(d.pad_h) +
        ", tx = t % " + Num(s.tw) + " * " + Num(s.m) + " - " + Num(d.pad_w) + ";\n";
  for (int i = 0; i < s.n; ++i) {
    const std::string is = Num(i);
    in += "  const int iy" + is + " = ty + " + is + ", ry" + is + " = live && iy" + is +
          " >= 0 && iy" + is + " < " + Num(H) + ";\n";
    in += "  const int cy" + is + " = min(max(iy" + is + ", 0), " + Num(H - 1) + ") * " + Num(W) +
          ";\n";
    in += "  const int ix" + is + " = tx + " + is + ", rx" + is + " = ix" + is + " >= 0 && ix" +
          is + " < " + Num(W) + ";\n";
    in += "  const int cx" + is + " = min(max(ix" + is + ", 0), " + Num(W - 1) + ");\n";
  }
  return in;
}

/// The output kernel's body up to the epilogue: M's (m+2)² values of tile p and output channel
/// o (of `type`), Aᵀ·M·A as `r`i_j, and the tile's first output `base`.
std::string ProductsPrologue(const Shape& s, const WinogradConfig& c, const std::string& v_type,
                             int v_per_tile, const std::string& u_type, long rows) {
  const long block = long(c.px) * c.vx;
  std::string g = "  const int blk = $global_id(0), ob = $global_id(1), e = $global_id(2);\n";
  g += "  if (blk >= " + Num(s.padded / block) + " || ob >= " + Num(s.ob) + " || e >= " +
       Num(s.elements()) + ") return;\n";
  g += "  const $global " + v_type + "* xn = v + (long)e * " + Num(s.v_plane) + " + blk * " +
       Num(block * v_per_tile) + ";\n";
  g += "  const $global " + u_type + "* wb = u + ((long)e * " + Num(s.ob) + " + ob) * " +
       Num(rows * c.oc) + ";\n";
  return g;
}

std::string OutputTile(const ConvDesc& d, const Shape& s, const std::string& type) {
  const long tt = long(s.th) * s.tw;
  const Transforms& f = TransformsOf(s.m);
  std::string out = "  const int p = $global_id(0), o = $global_id(1);\n";
  out += "  if (p >= " + Num(s.tiles) + " || o >= " + Num(d.out_channels) + ") return;\n";
  out += "  const $global " + type + "* mp = prod + (long)o * " + Num(s.padded) + " + p;\n";
  out += "  {\n";
  for (int i = 0; i < s.n; ++i)
    for (int j = 0; j < s.n; ++j)
      out += "    const " + type + " s" + Num(i) + "_" + Num(j) + " = mp[" +
             Num(long(i * s.n + j) * s.m_plane) + "L];\n";
  out += Sandwich(f.at, f.at, "s", s.n, "t", "r", type);
  out += "    const int img = p / " + Num(tt) + ", t = p % " + Num(tt) + ";\n";
  out += "    const int oy0 = t / " + Num(s.tw) + " * " + Num(s.m) + ", ox0 = t % " + Num(s.tw) +
         " * " + Num(s.m) + ";\n";
  out += "    const long base = ((long)img * " + Num(s.img_out) + " + o) * " +
         Num(long(d.out_h()) * d.out_w()) + " + oy0 * " + Num(d.out_w()) + " + ox0;\n";
  return out;
}

/// The condition of output (i, j) of a tile lying inside the output ("" where every tile's
/// does).
std::string OutputInside(const ConvDesc& d, int m, int i, int j, const std::string& oy,
                         const std::string& ox) {
  std::string cond;
  if (d.out_h() % m) cond += oy + " + " + Num(i) + " < " + Num(d.out_h());
  if (d.out_w() % m)
    cond += std::string(cond.empty() ? "" : " && ") + ox + " + " + Num(j) + " < " + Num(d.out_w());
  return cond;
}

}  // namespace winograd_internal

using namespace winograd_internal;

const ConfigSchema<WinogradConfig>& WinogradConfig::Schema() {
  static const ConfigSchema<WinogradConfig> schema(
      "", {{"m", &WinogradConfig::m, {2, 4}},
           {"oc", &WinogradConfig::oc, ValueRange(1, 16)},
           {"px", &WinogradConfig::px, ValueRange(1, 4)},
           {"v", &WinogradConfig::vx, {4, 8, 16}}});
  return schema;
}

std::string WinogradConfig::ToString() const { return Schema().Print(*this); }

bool WinogradApplies(const ConvDesc& d) {
  // 4-bit weights too: Convolution::SetWeights unpacks them to int8 before the weight
  // transform. A grouped convolution runs group by group (GroupSlice: four launches each), so
  // only a few groups of many channels (AlexNet's two of 192 and 128 output channels), never
  // depthwise ones; its groups' channels count.
  const bool groups_fit = d.groups == 1 || (d.groups <= kWinogradMaxGroups &&
                                            d.channels / d.groups >= 16 &&
                                            d.out_channels / d.groups >= 16);
  const bool window = groups_fit && d.channels % d.groups == 0 &&
                      d.out_channels % d.groups == 0 && d.kernel_h == 3 && d.kernel_w == 3 &&
                      d.stride_h == 1 && d.stride_w == 1 && d.dilation_h == 1 &&
                      d.dilation_w == 1;
  return window && (d.type == DataType::kFloat32 ||
                    (d.type == DataType::kInt8Q &&
                     d.channels / d.groups <= kWinogradInt8MaxChannels));
}

bool WinogradConfigFits(const ConvDesc& d, const WinogradConfig& c) {
  return d.type != DataType::kInt8Q || (c.m == 2 && c.vx == 8);
}

std::vector<WinogradConfig> WinogradCandidates(const WinogradConfig& first, DataType type) {
  ConvDesc d;
  d.type = type;
  // F(2×2) only: F(4×4)'s rounding is beyond the fp32 tolerance (conv_winograd.h), so it is
  // never chosen without being asked for by name. Tiles of 16 two-register accumulators and
  // more for 32 registers (AVX-512), of 8 to 12 for 16 (AVX2); int8q's of vectors of 8 tiles
  // (the pair products' lanes) only. `first` leads where it fits the type.
  using Tiles = std::vector<std::array<int, 3>>;
  static const Tiles fp32{{8, 1, 16}, {4, 2, 16}, {8, 2, 16}, {12, 1, 16}, {6, 2, 16}, {4, 4, 8},
                          {8, 2, 8},  {16, 1, 8}, {6, 1, 16}, {6, 2, 8},   {4, 1, 16}};
  static const Tiles int8{{6, 2, 8}, {4, 2, 8}, {4, 3, 8}, {8, 1, 8}, {6, 1, 8}, {12, 1, 8}};
  std::vector<WinogradConfig> out;
  if (WinogradConfigFits(d, first)) out.push_back(first);
  for (auto [oc, px, vx] : type == DataType::kInt8Q ? int8 : fp32) {
    const WinogradConfig c{2, oc, px, vx};
    if (!(c == first)) out.push_back(c);
  }
  return out;
}


std::string WinogradSource(const KernelTarget& target, const ConvDesc& full,
                           const WinogradConfig& c, RequantKnown known) {
  const ConvDesc d = GroupSlice(full);
  std::string why;
  if (!WinogradApplies(full) || !WinogradConfig::Schema().Parse(c.ToString(), {}, &why) ||
      c.oc * c.px > 24)
    throw Error("convolution " + full.ToString() + ": no Winograd kernel with configuration " +
                c.ToString() + (why.empty() ? "" : " (" + why + ")") +
                " (fp32 or int8q of at most " + Num(kWinogradInt8MaxChannels) +
                " input channels per group, 3×3 window, stride 1, dilation 1; m 2 or 4, oc in "
                "[1, 16], px in [1, 4], v 4, 8 or 16, oc·px ≤ 24)");
  if (d.type == DataType::kInt8Q) {
    if (!WinogradConfigFits(d, c))
      throw Error("convolution " + full.ToString() + ": no Winograd kernel with configuration " +
                  c.ToString() + " (int8q: m 2, v 8)");
    return Int8Source(target, d, c, known, ShapeOf(full, c));
  }
  const Transforms& f = TransformsOf(c.m);
  const Shape s = ShapeOf(full, c);
  const int n = s.n, m = s.m, C = d.channels, O = d.out_channels, H = d.height, W = d.width;
  const int ow = d.out_w();
  const long PP = s.padded;
  KernelWriter w(target, "conv_winograd");
  w.AddVector("Vf", Scalar::kF32, c.vx);

  // U[e][ob][c][j] = (G·g·Gᵀ)[e] of output channel ob·oc + j (0 past the last channel).
  std::string wt = "  $loop(i, " + Num(long(s.ob) * c.oc * C) + ") {\n";
  wt += "    const int o = i / " + Num(C) + ", c = i % " + Num(C) + ";\n";
  wt += "    const int ob = o / " + Num(c.oc) + ", j = o % " + Num(c.oc) + ";\n";
  wt += "    const $global float* g = w + ((long)min(o, " + Num(O - 1) + ") * " + Num(C) +
        " + c) * 9;\n";
  wt += "    const float live = o < " + Num(O) + " ? 1.0f : 0.0f;\n";
  for (int k = 0; k < 3; ++k)
    for (int l = 0; l < 3; ++l)
      wt += "    const float g" + Num(k) + "_" + Num(l) + " = live * g[" + Num(3 * k + l) + "];\n";
  wt += Sandwich(f.g, f.g, "g", 3, "t", "r");
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      wt += "    u[((" + Num(long(a * n + b) * s.ob) + " + ob) * " + Num(C) + " + c) * " +
            Num(c.oc) + " + j] = r" + Num(a) + "_" + Num(b) + ";\n";
  wt += "  }\n";
  w.Kernel("conv_wino_wt").In("float", "w").Out("float", "u").Body(wt);

  // V[e][c][p] = (Bᵀ·d·B)[e] of input channel c and tile p (zero tiles past P): F(2×2) in chunks
  // of a row's tiles where the dialect has vectors, else a tile per work-item.
  std::string in;
  const std::string xc = "  const $global float* xc = x + ((long)img * " + Num(s.img_in) +
                         " + c) * " + Num(long(H) * W) + ";\n";
  if (InputTilesPerItem(m, target) == 8) {
    const VectorWords v(target);
    in = ChunkPrologue(v, d, s, "c", C, "float", s.v_plane) + xc;
    in += ChunkWindow(v, d, s, "d", "xc", "1", false);
    in += Sandwich(f.bt, f.bt, "d", n, "t", "r", v.Type("float", 8));
    in += ChunkStores(v, s, "r", s.v_plane);
  } else {
    in = "  const int p = $global_id(0), c = $global_id(1);\n";
    in += "  if (p >= " + Num(PP) + " || c >= " + Num(C) + ") return;\n";
    in += TileWindow(d, s) + xc;
    // Reads clamped into the plane and masked: straight-line text the compilers turn into
    // selects.
    in += "  {\n";
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        in += "    const float d" + Num(i) + "_" + Num(j) + " = ry" + Num(i) + " && rx" + Num(j) +
              " ? xc[cy" + Num(i) + " + cx" + Num(j) + "] : 0.0f;\n";
    in += Sandwich(f.bt, f.bt, "d", n, "t", "r");
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        in += "    v[" + Num(long(a * n + b) * s.v_plane) + "L + c * " + Num(PP) + "L + p] = r" +
              Num(a) + "_" + Num(b) + ";\n";
    in += "  }\n";
  }
  w.Kernel("conv_wino_in").In("float", "x").Out("float", "v").Body(in);

  // M_e[o][p] = Σ_c U_e[o][c] · V_e[c][p]: oc output channels × vx tiles per work-item.
  std::string g = ProductsPrologue(s, c, "float", 1, "float", C);
  auto acc = [](int o, int q) { return "a" + Num(o) + "_" + Num(q); };
  for (int o = 0; o < c.oc; ++o)
    for (int q = 0; q < c.px; ++q) g += "  Vf " + acc(o, q) + " = (Vf)(0.0f);\n";
  g += "  for (int c = 0; c < " + Num(C) + "; ++c) {\n";
  for (int q = 0; q < c.px; ++q)
    g += "    const Vf x" + Num(q) + " = Vf_LOAD(xn + (long)c * " + Num(PP) + " + " +
         Num(q * c.vx) + ");\n";
  g += "    const $global float* wc = wb + c * " + Num(c.oc) + ";\n";
  for (int o = 0; o < c.oc; ++o) {
    g += "    const Vf w" + Num(o) + " = (Vf)(wc[" + Num(o) + "]);\n";
    for (int q = 0; q < c.px; ++q)
      g += "    " + acc(o, q) + " = $fma(w" + Num(o) + ", x" + Num(q) + ", " + acc(o, q) + ");\n";
  }
  g += "  }\n";
  g += ProductStores(d, c, s, "float", "Vf", acc);
  // Explicit vectors: Intel's compiler would otherwise pack work-items on top of them.
  w.Kernel("conv_wino_gemm")
      .In("float", "u")
      .In("float", "v")
      .Out("float", "prod")
      .VectorWidth(Scalar::kF32, c.vx)
      .Body(g);

  // Y = Aᵀ·M·A per output channel and tile, then bias, residual and ReLU as the direct kernel.
  std::string out = OutputTile(d, s, "float");
  if (d.bias) out += "    const float bo = bias[o];\n";
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) {
      const std::string at = "base + " + Num(long(i) * ow + j), r = "r" + Num(i) + "_" + Num(j);
      const std::string cond = OutputInside(d, m, i, j);
      std::string v = r;
      if (d.bias) v += " + bo";
      if (d.residual) v += " + res[" + at + "]";
      out += "    " + (cond.empty() ? "" : "if (" + cond + ") ") + "{\n      const float f = " +
             v + ";\n      y[" + at + "] = " + (d.relu ? "f > 0.0f ? f : 0.0f" : "f") +
             ";\n    }\n";
    }
  out += "  }\n";
  w.Kernel("conv_wino_out")
      .In("float", "prod")
      .In("float", "bias")
      .In("float", "res")
      .Out("float", "y")
      .Body(out);
  return w.Source();
}

WinogradForward::WinogradForward(Device& device, const ConvDesc& desc,
                                 const WinogradConfig& config, RequantKnown known)
    : device_(device), desc_(desc), config_(config) {
  const KernelTarget target = KernelTarget::Of(device);
  auto program = device.GetProgram(WinogradSource(target, desc, config, known), "",
                                   ProgramHints::OneDimensional());
  wt_ = program->GetKernel("conv_wino_wt");
  in_ = program->GetKernel("conv_wino_in");
  gemm_ = program->GetKernel("conv_wino_gemm");
  out_ = program->GetKernel("conv_wino_out");
  out_tiles_per_item_ = OutputTilesPerItem(desc.type, target);
  const ConvDesc g = GroupSlice(desc);
  const Shape s(g, config);
  in_items_ = InputTilesPerItem(s.m, target) == 8 ? size_t(InputChunks(g, s)) : size_t(s.padded);
}

Event WinogradForward::SetWeights(const BufferRef& weights, Queue* queue,
                                  const WinogradQuant& quant) {
  const ConvDesc g = GroupSlice(desc_);
  const Shape s(g, config_);
  const size_t count = size_t(s.elements()) * s.ob * config_.oc * s.cp;  // one group's U
  const int groups = desc_.groups;
  if (!u_) u_ = device_.Allocate(groups * count * 4);
  const size_t es = SizeOf(desc_.type);
  Event done;
  for (int k = 0; k < groups; ++k) {  // each group's weights into its own U
    wt_.ArgBuffer(weights.mem, weights.byte_offset + size_t(k) * g.weight_count() * es, es);
    if (desc_.type == DataType::kInt8Q) wt_.Arg(quant.w_zero + size_t(k) * g.out_channels);
    wt_.ArgBuffer(u_.get(), size_t(k) * count * 4, 4);
    done = wt_.Launch1D(size_t(s.ob) * config_.oc * s.cp, queue);
  }
  return done;
}

Event WinogradForward::Forward(const BufferRef& input, const BufferRef& bias,
                               const BufferRef& residual, const BufferRef& output,
                               Queue* queue, const WinogradQuant& quant) {
  const ConvDesc g = GroupSlice(desc_);
  const Shape s(g, config_);
  const bool q = g.type == DataType::kInt8Q;
  const size_t pp = size_t(s.padded), e = size_t(s.elements());
  const size_t es = SizeOf(g.type), vs = q ? 2 : 4;  // V: shorts (int8q) or floats
  TakeScratch(device_, arena_.get(), queue, ScratchUse::kWinogradInput,
              e * size_t(s.v_plane) * vs, &v_);
  TakeScratch(device_, arena_.get(), queue, ScratchUse::kWinogradProducts,
              e * size_t(s.m_plane) * 4, &m_);
  const DeviceInfo& info = device_.info();
  // The pointwise kernel's spread: the same reason (a delayed core hands its groups over) and the
  // same grids of pixel blocks × channel blocks.
  const int per_unit =
      DefaultRowFor(PointwiseSpreadDefaults(), "conv_wino", TargetProfile::Of(info), desc_).config;
  auto local = [&](const std::array<size_t, 3>& global) {
    return per_unit == 0 ? std::array<size_t, 3>{0, 0, 0}
                         : conv_internal::SpreadLocal(global, info, per_unit);
  };
  auto launch = [&](Kernel& k, const std::array<size_t, 3>& global) {
    const std::array<size_t, 3> l = local(global);
    return k.Launch({global[0], global[1], global[2]}, {l[0], l[1], l[2]}, queue);
  };
  // The output kernel takes OutputTilesPerItem tiles per work-item.
  const size_t out_tiles = pp / size_t(out_tiles_per_item_);
  const size_t u_count = e * size_t(s.ob) * config_.oc * s.cp;
  const size_t in_plane = size_t(g.height) * g.width, out_plane = size_t(g.out_h()) * g.out_w();
  Event done;
  // Group by group on the same V and M (one in-order queue), each on its channels' planes of
  // the whole images (Shape::img_in, img_out).
  for (int k = 0; k < desc_.groups; ++k) {
    const size_t ci = size_t(k) * g.channels, co = size_t(k) * g.out_channels;
    in_.ArgBuffer(input.mem, input.byte_offset + ci * in_plane * es, es)
        .ArgBuffer(v_.get(), 0, 4);
    if (q) in_.Arg(quant.x_zero);
    launch(in_, {in_items_, size_t(s.cp), 1});  // a channel (int8q: a pair) per work-item
    gemm_.ArgBuffer(u_.get(), k * u_count * 4, 4)
        .ArgBuffer(v_.get(), 0, vs)
        .ArgBuffer(m_.get(), 0, 4);
    launch(gemm_, {pp / size_t(config_.px * config_.vx), size_t(s.ob), e});
    out_.ArgBuffer(m_.get(), 0, 4).ArgBuffer(bias.mem, bias.byte_offset + co * 4, 4);
    if (q) out_.Arg(quant.requant + 2 * co);
    out_.ArgBuffer(residual.mem, residual.byte_offset + co * out_plane * es, es)
        .ArgBuffer(output.mem, output.byte_offset + co * out_plane * es, es);
    if (q)
      for (int32_t v : {quant.c_zero, quant.res_zero, quant.res_m, quant.res_s}) out_.Arg(v);
    done = launch(out_, {out_tiles, size_t(g.out_channels), 1});
  }
  return done;
}

void WinogradForward::ReleaseScratch() {
  v_.reset();
  m_.reset();
}

}  // namespace mpcaffe::libdnn
