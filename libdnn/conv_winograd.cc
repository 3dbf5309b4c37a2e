// libdnn/conv_winograd.cc — the Winograd forward family (conv_winograd.h): its configuration,
// the four kernel texts (the transforms unrolled from their constant matrices) and their
// launches.
#include "libdnn/conv_winograd.h"

#include <array>
#include <optional>
#include <cstdio>
#include <string>
#include <vector>

#include "codegen/vector_words.h"
#include "device/error.h"
#include "libdnn/conv_families.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn {

using conv_internal::DivUp;

namespace {

using Matrix = std::vector<std::vector<double>>;

/// F(m×m, 3×3)'s matrices (Lavin and Gray, "Fast Algorithms for Convolutional Neural
/// Networks"): Bᵀ (n×n) transforms an input tile, G (n×3) a window, Aᵀ (m×n) the products,
/// n = m + 2. F(4×4) interpolates at 0, ±1, ±2 and infinity.
struct Transforms {
  int m, n;
  Matrix bt, g, at;
};

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

/// Text computing `out`<i>_<j> = (L · X · Rᵀ)[i][j] for the private values `in`<k>_<l> of X
/// (rows × cols, of `type`: float, or int with integer matrices), through temporaries
/// `tmp`<i>_<l>.
std::string Sandwich(const Matrix& left, const Matrix& right, const std::string& in, int cols,
                     const std::string& tmp, const std::string& out,
                     const std::string& type = "float") {
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

/// The sizes every kernel's text and launch share.
struct Shape {
  Shape(const ConvDesc& d, const WinogradConfig& c)
      : m(c.m), n(c.m + 2), th(DivUp(d.out_h(), c.m)), tw(DivUp(d.out_w(), c.m)),
        tiles(long(d.batch) * th * tw),
        padded((tiles + long(c.px) * c.vx - 1) / (long(c.px) * c.vx) * c.px * c.vx),
        ob(DivUp(d.out_channels, c.oc)),
        cp(d.type == DataType::kInt8Q ? DivUp(d.channels, 2) : d.channels),
        v_plane(d.type == DataType::kInt8Q ? 2 * (cp * padded + kSkew)
                                           : d.channels * padded + kSkew),
        m_plane(d.out_channels * padded + kSkew),
        img_in(d.channels),
        img_out(d.out_channels) {}
  // Each element's plane of V and M starts 128 bytes past a multiple of 4 KiB from the last:
  // planes a multiple of 4 KiB apart put the (m+2)² loads or stores of one tile in the same
  // cache set (more than the 8 ways of the L1 here) and alias the loads with the stores.
  static constexpr long kSkew = 32;
  int m, n, th, tw;
  long tiles, padded;  // P and P rounded up to whole blocks of px vectors
  int ob;              // blocks of oc output channels
  int cp;              // rows of V: input channels (int8q: pairs of them, 16 bits each)
  long v_plane, m_plane;  // elements (floats; int8q's V: shorts) from one plane to the next
  // Channels from one image to the next in the input and the output: a grouped convolution's
  // kernels run one group (GroupSlice) on planes of the whole images.
  int img_in, img_out;
  int elements() const { return n * n; }
};

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

/// The products kernel's stores: accumulator `acc`(o, q) (vectors of `vec`) of output channel
/// ob·oc + o to M (`mo`), channels past the last skipped.
template <typename Acc>
std::string ProductStores(const ConvDesc& d, const WinogradConfig& c, const Shape& s,
                          const std::string& vec, Acc acc) {
  const int O = d.out_channels;
  std::string g;
  for (int o = 0; o < c.oc; ++o) {
    std::string store;
    for (int q = 0; q < c.px; ++q)
      store += " " + vec + "_STORE(" + acc(o, q) + ", mo + " +
               Num(long(o) * s.padded + q * c.vx) + ");";
    g += O % c.oc ? "  if (ob * " + Num(c.oc) + " + " + Num(o) + " < " + Num(O) + ") {" + store +
                        " }\n"
                  : " " + store + "\n";
  }
  return g;
}

/// The output kernel's body up to the epilogue: M's (m+2)² values of tile p and output channel
/// o (of `type`), Aᵀ·M·A as `r`i_j, and the tile's first output `base`.
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
std::string OutputInside(const ConvDesc& d, int m, int i, int j) {
  std::string cond;
  if (d.out_h() % m) cond += "oy0 + " + Num(i) + " < " + Num(d.out_h());
  if (d.out_w() % m)
    cond += std::string(cond.empty() ? "" : " && ") + "ox0 + " + Num(j) + " < " + Num(d.out_w());
  return cond;
}
}  // namespace

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
  // A grouped convolution runs group by group (GroupSlice: four launches each), so only a few
  // groups of many channels (AlexNet's two of 192 and 128 output channels), never depthwise
  // ones; its groups' channels count.
  const bool groups_fit = d.groups == 1 || (d.groups <= kWinogradMaxGroups &&
                                            d.channels / d.groups >= 16 &&
                                            d.out_channels / d.groups >= 16);
  const bool window = groups_fit && d.channels % d.groups == 0 &&
                      d.out_channels % d.groups == 0 && d.kernel_h == 3 && d.kernel_w == 3 &&
                      d.stride_h == 1 && d.stride_w == 1 && d.dilation_h == 1 &&
                      d.dilation_w == 1 && d.weight_bits == 8;
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
  const std::string below = conv_internal::ResidualBelow2To16If(target);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) {
      const std::string e = Num(i) + "_" + Num(j), off = Num(long(i) * ow + j);
      // A lane writes where its tile is real and the output inside the plane.
      auto inside = [&](int k) {
        std::string c = "live[" + Num(k) + "]";
        if (d.out_h() % m) c += " && oy[" + Num(k) + "] + " + Num(i) + " < " + Num(d.out_h());
        if (d.out_w() % m) c += " && ox[" + Num(k) + "] + " + Num(j) + " < " + Num(ow);
        return c;
      };
      std::optional<VectorResidual> res;
      if (d.residual) {
        std::string lanes;
        for (int k = 0; k < L; ++k)
          lanes += std::string(k ? ", " : "") + "(" + inside(k) + ") ? (int)Dtype_LOAD(res, base[" +
                   Num(k) + "] + " + off + ") : res_zero";
        res = VectorResidual{v.Of(I, lanes) + " - res_zero", "res_m", "res_s", below,
                             !below.empty() && known.residual_split};
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

/// int8q's four kernels (WinogradSource's, in integers): U = 2G·(g − z_w)·2Gᵀ and V = Bᵀ·(d −
/// z_x)·B as 16-bit values (|U| ≤ 9·255, |V| ≤ 4·255), two input channels per 32-bit word of U
/// and of V; the products in 16-bit pairs (KernelHelper::kPairProduct16) into
/// int32 lanes of 8 tiles; Aᵀ·M·A shifted right by 2 is Σ(x − z_x)(w − z_w), requantized as the
/// direct kernel's scalar epilogue does.
std::string Int8Source(const KernelTarget& target, const ConvDesc& d, const WinogradConfig& c,
                       RequantKnown known, const Shape& s) {
  const Transforms& f = TransformsOf(2);
  const int n = s.n, m = s.m, C = d.channels, O = d.out_channels, H = d.height, W = d.width;
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

  // V[e][cp][p] = (Bᵀ·(d − z_x)·B)[e] of input channels 2cp (low half) and 2cp + 1 (high
  // half; 0 past C) and tile p (0 past P): one word per work-item and element, neighbouring
  // tiles in neighbouring words.
  std::string in = "  const int p = $global_id(0), cp = $global_id(1);\n";
  in += "  if (p >= " + Num(PP) + " || cp >= " + Num(CP) + ") return;\n";
  in += TileWindow(d, s);
  for (int h = 0; h < 2; ++h) {
    const std::string hs = h ? "b" : "a";
    in += "  const int c" + hs + " = 2 * cp + " + Num(h) + ", live" + hs + " = c" + hs + " < " +
          Num(C) + ";\n";
    in += "  const $global Dtype* x" + hs + " = x + ((long)img * " + Num(s.img_in) + " + min(c" + hs +
          ", " + Num(C - 1) + ")) * " + Num(long(H) * W) + ";\n";
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
  w.Kernel("conv_wino_in").In("Dtype", "x").Out("int", "v").Value("int", "x_zero").Body(in);

  // M_e[o][p] = Σ_cp U_e[o][cp] · V_e[cp][p] in pairs: oc output channels × px vectors of 8
  // tiles per work-item.
  std::string g = "  const int blk = $global_id(0), ob = $global_id(1), e = $global_id(2);\n";
  const long block = long(c.px) * c.vx;
  g += "  if (blk >= " + Num(PP / block) + " || ob >= " + Num(s.ob) + " || e >= " +
       Num(s.elements()) + ") return;\n";
  g += "  const $global short* xn = v + (long)e * " + Num(s.v_plane) + " + blk * " +
       Num(block * 2) + ";\n";
  g += "  const $global int* wb = u + ((long)e * " + Num(s.ob) + " + ob) * " +
       Num(long(CP) * c.oc) + ";\n";
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
  g += "  $global int* mo = prod + (long)e * " + Num(s.m_plane) + " + (long)ob * " +
       Num(c.oc * PP) + " + blk * " + Num(block) + ";\n";
  g += ProductStores(d, c, s, "Vi", acc);
  w.Kernel("conv_wino_gemm")
      .In("int", "u")
      .In("short", "v")
      .Out("int", "prod")
      .VectorWidth(Scalar::kI32, c.vx)
      .Body(g);

  // Y = (Aᵀ·M·A) / 4 per output channel and tile, requantized: in vectors of 8 tiles where the
  // dialect has vectors (Int8VectorOutput), else the direct kernel's scalar epilogue per tile.
  std::string out;
  if (target.vector_builtins) {
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

}  // namespace

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

  // V[e][c][p] = (Bᵀ·d·B)[e] of input channel c and tile p (zero tiles past P).
  std::string in = "  const int p = $global_id(0), c = $global_id(1);\n";
  in += "  if (p >= " + Num(PP) + " || c >= " + Num(C) + ") return;\n";
  in += TileWindow(d, s);
  in += "  const $global float* xc = x + ((long)img * " + Num(s.img_in) + " + c) * " +
        Num(long(H) * W) + ";\n";
  // Reads clamped into the plane and masked: straight-line text the compilers turn into selects.
  in += "  {\n";
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      in += "    const float d" + Num(i) + "_" + Num(j) + " = ry" + Num(i) + " && rx" + Num(j) +
            " ? xc[cy" + Num(i) + " + cx" + Num(j) + "] : 0.0f;\n";
  in += Sandwich(f.bt, f.bt, "d", n, "t", "r");
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      in += "    v[" + Num(long(a * n + b) * s.v_plane) + "L + c * " + Num(PP) + "L + p] = r" + Num(a) +
            "_" + Num(b) + ";\n";
  in += "  }\n";
  w.Kernel("conv_wino_in").In("float", "x").Out("float", "v").Body(in);

  // M_e[o][p] = Σ_c U_e[o][c] · V_e[c][p]: oc output channels × vx tiles per work-item.
  std::string g = "  const int blk = $global_id(0), ob = $global_id(1), e = $global_id(2);\n";
  const long block = long(c.px) * c.vx;
  g += "  if (blk >= " + Num(PP / block) + " || ob >= " + Num(s.ob) + " || e >= " +
       Num(s.elements()) + ") return;\n";
  g += "  const $global float* xn = v + (long)e * " + Num(s.v_plane) + " + blk * " +
       Num(block) + ";\n";
  g += "  const $global float* wb = u + ((long)e * " + Num(s.ob) + " + ob) * " +
       Num(long(C) * c.oc) + ";\n";
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
  g += "  $global float* mo = prod + (long)e * " + Num(s.m_plane) + " + (long)ob * " +
       Num(c.oc * PP) + " + blk * " + Num(block) + ";\n";
  g += ProductStores(d, c, s, "Vf", acc);
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
  auto program = device.GetProgram(WinogradSource(KernelTarget::Of(device), desc, config, known),
                                   "", ProgramHints::OneDimensional());
  wt_ = program->GetKernel("conv_wino_wt");
  in_ = program->GetKernel("conv_wino_in");
  gemm_ = program->GetKernel("conv_wino_gemm");
  out_ = program->GetKernel("conv_wino_out");
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
  // int8q in vectors of 8 tiles where the dialect has vectors (Int8VectorOutput).
  const size_t out_tiles = q && KernelTarget::Of(device_).vector_builtins ? pp / 8 : pp;
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
    launch(in_, {pp, size_t(s.cp), 1});  // int8q: a pair of channels per work-item
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
