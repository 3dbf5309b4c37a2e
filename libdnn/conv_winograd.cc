// libdnn/conv_winograd.cc — the Winograd forward family (conv_winograd.h): its configuration,
// the four kernel texts (the transforms unrolled from their constant matrices) and their
// launches.
#include "libdnn/conv_winograd.h"

#include <array>
#include <cstdio>
#include <string>
#include <vector>

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

/// Σ_k coef[k]·operand(k) as text, zero coefficients left out, ±1 without a multiply.
template <typename Operand>
std::string Combination(const std::vector<double>& coef, Operand operand) {
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
      s += (s.empty() ? "" : " + ") + FloatLiteral(c) + " * " + x;
  }
  return s.empty() ? "0.0f" : s;
}

/// Text computing `out`<i>_<j> = (L · X · Rᵀ)[i][j] for the private floats `in`<k>_<l> of X
/// (rows × cols), through temporaries `tmp`<i>_<l>.
std::string Sandwich(const Matrix& left, const Matrix& right, const std::string& in, int cols,
                     const std::string& tmp, const std::string& out) {
  std::string s;
  for (size_t i = 0; i < left.size(); ++i)
    for (int l = 0; l < cols; ++l)
      s += "    const float " + tmp + Num(long(i)) + "_" + Num(l) + " = " +
           Combination(left[i], [&](int k) { return in + Num(k) + "_" + Num(l); }) + ";\n";
  for (size_t i = 0; i < left.size(); ++i)
    for (size_t j = 0; j < right.size(); ++j)
      s += "    const float " + out + Num(long(i)) + "_" + Num(long(j)) + " = " +
           Combination(right[j], [&](int l) { return tmp + Num(long(i)) + "_" + Num(l); }) +
           ";\n";
  return s;
}

/// The sizes every kernel's text and launch share.
struct Shape {
  Shape(const ConvDesc& d, const WinogradConfig& c)
      : m(c.m), n(c.m + 2), th(DivUp(d.out_h(), c.m)), tw(DivUp(d.out_w(), c.m)),
        tiles(long(d.batch) * th * tw),
        padded((tiles + long(c.px) * c.vx - 1) / (long(c.px) * c.vx) * c.px * c.vx),
        ob(DivUp(d.out_channels, c.oc)), v_plane(d.channels * padded + kSkew),
        m_plane(d.out_channels * padded + kSkew) {}
  // Each element's plane of V and M starts 128 bytes past a multiple of 4 KiB from the last:
  // planes a multiple of 4 KiB apart put the (m+2)² loads or stores of one tile in the same
  // cache set (more than the 8 ways of the L1 here) and alias the loads with the stores.
  static constexpr long kSkew = 32;
  int m, n, th, tw;
  long tiles, padded;  // P and P rounded up to whole blocks of px vectors
  int ob;              // blocks of oc output channels
  long v_plane, m_plane;  // floats from one element's plane of V (M) to the next
  int elements() const { return n * n; }
};

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
  return d.type == DataType::kFloat32 && d.groups == 1 && d.kernel_h == 3 && d.kernel_w == 3 &&
         d.stride_h == 1 && d.stride_w == 1 && d.dilation_h == 1 && d.dilation_w == 1 &&
         d.weight_bits == 8;
}

std::vector<WinogradConfig> WinogradCandidates(const WinogradConfig& first) {
  // F(2×2) only: F(4×4)'s rounding is beyond the fp32 tolerance (conv_winograd.h), so it is
  // never chosen without being asked for by name.
  std::vector<WinogradConfig> out{first};
  // Tiles of 16 two-register accumulators and more for 32 registers (AVX-512), of 8 to 12 for
  // 16 (AVX2).
  for (auto [oc, px, vx] :
       {std::array<int, 3>{8, 1, 16}, {4, 2, 16}, {8, 2, 16}, {12, 1, 16}, {6, 2, 16}, {4, 4, 8},
        {8, 2, 8}, {16, 1, 8}, {6, 1, 16}, {6, 2, 8}, {4, 1, 16}}) {
    const WinogradConfig c{2, oc, px, vx};
    if (!(c == first)) out.push_back(c);
  }
  return out;
}

std::string WinogradSource(const KernelTarget& target, const ConvDesc& d,
                           const WinogradConfig& c) {
  std::string why;
  if (!WinogradApplies(d) || !WinogradConfig::Schema().Parse(c.ToString(), {}, &why) ||
      c.oc * c.px > 24)
    throw Error("convolution " + d.ToString() + ": no Winograd kernel with configuration " +
                c.ToString() + (why.empty() ? "" : " (" + why + ")") +
                " (fp32, one group, 3×3 window, stride 1, dilation 1; m 2 or 4, oc in [1, 16], "
                "px in [1, 4], v 4, 8 or 16, oc·px ≤ 24)");
  const Transforms& f = TransformsOf(c.m);
  const Shape s(d, c);
  const int n = s.n, m = s.m, C = d.channels, O = d.out_channels, H = d.height, W = d.width;
  const int oh = d.out_h(), ow = d.out_w();
  const long P = s.tiles, PP = s.padded, tt = long(s.th) * s.tw;
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
  in += "  const int live = p < " + Num(P) + ";\n";
  in += "  const int q = live ? p : 0, img = q / " + Num(tt) + ", t = q % " + Num(tt) + ";\n";
  in += "  const int ty = t / " + Num(s.tw) + " * " + Num(m) + " - " + Num(d.pad_h) +
        ", tx = t % " + Num(s.tw) + " * " + Num(m) + " - " + Num(d.pad_w) + ";\n";
  in += "  const $global float* xc = x + ((long)img * " + Num(C) + " + c) * " +
        Num(long(H) * W) + ";\n";
  // Reads clamped into the plane and masked: straight-line text the compilers turn into selects.
  for (int i = 0; i < n; ++i) {
    const std::string is = Num(i);
    in += "  const int iy" + is + " = ty + " + is + ", ry" + is + " = live && iy" + is +
          " >= 0 && iy" + is + " < " + Num(H) + ";\n";
    in += "  const int cy" + is + " = min(max(iy" + is + ", 0), " + Num(H - 1) + ") * " + Num(W) +
          ";\n";
    in += "  const int ix" + is + " = tx + " + is + ", rx" + is + " = ix" + is + " >= 0 && ix" +
          is + " < " + Num(W) + ";\n";
    in += "  const int cx" + is + " = min(max(ix" + is + ", 0), " + Num(W - 1) + ");\n";
  }
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
  for (int o = 0; o < c.oc; ++o) {
    std::string store;
    for (int q = 0; q < c.px; ++q)
      store += " Vf_STORE(" + acc(o, q) + ", mo + " + Num(long(o) * PP + q * c.vx) + ");";
    g += O % c.oc ? "  if (ob * " + Num(c.oc) + " + " + Num(o) + " < " + Num(O) + ") {" + store +
                        " }\n"
                  : " " + store + "\n";
  }
  // Explicit vectors: Intel's compiler would otherwise pack work-items on top of them.
  w.Kernel("conv_wino_gemm")
      .In("float", "u")
      .In("float", "v")
      .Out("float", "prod")
      .VectorWidth(Scalar::kF32, c.vx)
      .Body(g);

  // Y = Aᵀ·M·A per output channel and tile, then bias, residual and ReLU as the direct kernel.
  std::string out = "  const int p = $global_id(0), o = $global_id(1);\n";
  out += "  if (p >= " + Num(P) + " || o >= " + Num(O) + ") return;\n";
  out += "  const $global float* mp = prod + (long)o * " + Num(PP) + " + p;\n";
  out += "  {\n";
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      out += "    const float s" + Num(i) + "_" + Num(j) + " = mp[" +
             Num(long(i * n + j) * s.m_plane) + "L];\n";
  out += Sandwich(f.at, f.at, "s", n, "t", "r");
  out += "    const int img = p / " + Num(tt) + ", t = p % " + Num(tt) + ";\n";
  out += "    const int oy0 = t / " + Num(s.tw) + " * " + Num(m) + ", ox0 = t % " + Num(s.tw) +
         " * " + Num(m) + ";\n";
  out += "    const long base = ((long)img * " + Num(O) + " + o) * " + Num(long(oh) * ow) +
         " + oy0 * " + Num(ow) + " + ox0;\n";
  if (d.bias) out += "    const float bo = bias[o];\n";
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) {
      const std::string at = "base + " + Num(long(i) * ow + j), r = "r" + Num(i) + "_" + Num(j);
      std::string cond;
      if (oh % m) cond += "oy0 + " + Num(i) + " < " + Num(oh);
      if (ow % m) cond += std::string(cond.empty() ? "" : " && ") + "ox0 + " + Num(j) + " < " +
                          Num(ow);
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
                                 const WinogradConfig& config)
    : device_(device), desc_(desc), config_(config) {
  auto program = device.GetProgram(WinogradSource(KernelTarget::Of(device), desc, config), "",
                                   ProgramHints::OneDimensional());
  wt_ = program->GetKernel("conv_wino_wt");
  in_ = program->GetKernel("conv_wino_in");
  gemm_ = program->GetKernel("conv_wino_gemm");
  out_ = program->GetKernel("conv_wino_out");
}

Event WinogradForward::SetWeights(const BufferRef& weights, Queue* queue) {
  const Shape s(desc_, config_);
  const size_t count = size_t(s.elements()) * s.ob * config_.oc * desc_.channels;
  if (!u_) u_ = device_.Allocate(count * 4);
  wt_.ArgBuffer(weights.mem, weights.byte_offset, 4).ArgBuffer(u_.get(), 0, 4);
  return wt_.Launch1D(size_t(s.ob) * config_.oc * desc_.channels, queue);
}

Event WinogradForward::Forward(const BufferRef& input, const BufferRef& bias,
                               const BufferRef& residual, const BufferRef& output,
                               Queue* queue) {
  const ConvDesc& d = desc_;
  const Shape s(d, config_);
  const size_t pp = size_t(s.padded), e = size_t(s.elements());
  if (!v_) v_ = device_.Allocate(e * size_t(s.v_plane) * 4);
  if (!m_) m_ = device_.Allocate(e * size_t(s.m_plane) * 4);
  const DeviceInfo& info = device_.info();
  // The pointwise kernel's spread: the same reason (a delayed core hands its groups over) and the
  // same grids of pixel blocks × channel blocks.
  const int per_unit =
      DefaultRowFor(PointwiseSpreadDefaults(), "conv_wino", TargetProfile::Of(info), d).config;
  auto local = [&](const std::array<size_t, 3>& global) {
    return per_unit == 0 ? std::array<size_t, 3>{0, 0, 0}
                         : conv_internal::SpreadLocal(global, info, per_unit);
  };
  auto launch = [&](Kernel& k, const std::array<size_t, 3>& global) {
    const std::array<size_t, 3> l = local(global);
    return k.Launch({global[0], global[1], global[2]}, {l[0], l[1], l[2]}, queue);
  };
  in_.ArgBuffer(input.mem, input.byte_offset, 4).ArgBuffer(v_.get(), 0, 4);
  launch(in_, {pp, size_t(d.channels), 1});
  gemm_.ArgBuffer(u_.get(), 0, 4).ArgBuffer(v_.get(), 0, 4).ArgBuffer(m_.get(), 0, 4);
  launch(gemm_, {pp / size_t(config_.px * config_.vx), size_t(s.ob), e});
  out_.ArgBuffer(m_.get(), 0, 4)
      .ArgBuffer(bias.mem, bias.byte_offset, 4)
      .ArgBuffer(residual.mem, residual.byte_offset, 4)
      .ArgBuffer(output.mem, output.byte_offset, 4);
  return launch(out_, {pp, size_t(d.out_channels), 1});
}

void WinogradForward::ReleaseScratch() {
  v_.reset();
  m_.reset();
}

}  // namespace mpcaffe::libdnn
