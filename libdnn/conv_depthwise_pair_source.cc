// libdnn/conv_depthwise_pair_source.cc — the int8q depthwise kernel at stride 2 in 16-bit pair
// products: int32 sums, exact, from one widening load per pair of window columns.
#include <string>
#include <utility>
#include <vector>

#include "codegen/vector_words.h"
#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn {

using namespace conv_internal;  // NOLINT: this file's private vocabulary

bool conv_internal::DepthwisePairs(const ConvDesc& d, int vx) {
  return d.type == DataType::kInt8Q && d.stride_w == 2 && d.dilation_w == 1 && vx == 8;
}

// A work-item per (image · channel, block of `rows` output rows, 8 neighbouring output columns),
// as the float vector form (conv_depthwise_source.cc). At stride 2 output column m's window
// starts at input column ixb + 2m, so 16 input columns from ixb + o, widened to 16 bits, are 8
// pairs (ixb + o + 2m, ixb + o + 2m + 1): window taps o and o + 1 of all 8 outputs, which
// MP_MADD16 multiplies by the weight pair (w[o], w[o + 1]) (0 past the window) into 8 int32 sums,
// for every even o. The float form instead loads 16 columns per tap, converts them to float and
// keeps the even ones (three loads, six conversions and three shuffles per input row of a 3×3
// window, where this form has two widening loads). Where the compiler has its own 512-bit
// vpmaddwd (MP_MADD32_NATIVE), two offsets' pairs go side by side into one product (MP_CAT32)
// and the accumulator's halves are summed at the end. Columns outside the input read z_x and the
// epilogue subtracts z_x·Σ(w − z_w); with x in 0 … 255 and |w − z_w| ≤ 255 a pair sums to at
// most 2·255² and a window of at most 258 taps stays far inside int32.
std::string conv_internal::DepthwisePairSource(const KernelTarget& target, const ConvDesc& d,
                                               int rows, RequantKnown known) {
  auto num = [](long v) { return std::to_string(v); };
  KernelWriter w(target, "conv_depthwise");
  DeclareDepthwiseInt8Vectors(w, d);
  w.UseHelper(KernelHelper::kPairProduct16);
  const VectorWords vw(target);
  const std::string S = vw.Type("short", 16), I = vw.Type("int", 16), A = vw.Type("int", 8);
  const int KH = d.kernel_h, KW = d.kernel_w;
  const int n_off = (KW + 1) / 2;  // loads per input row, at offsets 0, 2, … 2·(n_off − 1)
  const int in_rows = (rows - 1) * d.stride_h + (KH - 1) * d.dilation_h + 1;
  const int span = 2 * (n_off - 1) + 16;  // columns a row's loads cover from ixb
  auto& k = DeclareDepthwiseKernel(w, d).VectorWidth(Scalar::kI32, 8);
  std::string b;
  b += DepthwiseVectorPrologue(d, rows, 8);
  std::string lanes;
  for (int j = 0; j < 16; ++j) lanes += (j ? ", " : "") + num(j);
  b += "  const " + I + " lx = " + vw.Of(I, lanes) + " + ixb;\n";
  for (int i = 0; i < n_off; ++i) {
    const std::string c = num(i);
    b += "  const " + I + " ix" + c + " = lx + " + num(2 * i) + ";\n";
    b += "  const " + S + " cm" + c + " = " +
         vw.Convert(S, "ix" + c + " >= 0 && ix" + c + " < " + num(d.width)) + ";\n";
  }
  b += "  const $global Wstore* wc = wt + ch * " + num(KH * KW) + ";\n";
  b += "  const int wzc = wz[ch];\n";
  std::string sum;
  for (int ky = 0; ky < KH; ++ky)
    for (int kx = 0; kx < KW; ++kx) {
      const std::string wn = "w" + num(ky) + "_" + num(kx);
      b += "  const int " + wn + " = WLOAD(wc, " + num(ky * KW + kx) + ") - wzc;\n";
      sum += (sum.empty() ? "" : " + ") + wn;
    }
  b += "  const int wxz = x_zero * (" + sum + ");\n";
  b += "  const " + S + " xz = " + vw.Splat(S, "(short)x_zero") + ";\n";
  // The weight pair of window row ky at offset index i: taps 2i and 2i + 1.
  auto pair = [&](int ky, int i) { return "pw" + num(ky) + "_" + num(i); };
  for (int ky = 0; ky < KH; ++ky)
    for (int i = 0; i < n_off; ++i)
      b += "  const mp_short16 " + pair(ky, i) + " = MP_PAIR16(w" + num(ky) + "_" + num(2 * i) +
           ", " + (2 * i + 1 < KW ? "w" + num(ky) + "_" + num(2 * i + 1) : std::string("0")) +
           ");\n";
  for (int t = 0; t < rows; ++t) b += "  " + A + " acc" + num(t) + " = " + vw.Splat(A, "0") + ";\n";
  // 512-bit groups: offsets 2g and 2g + 1 side by side (the last alone beside zero weights).
  const int n_groups = (n_off + 1) / 2;
  // The products input row r adds: each output row t whose window row ky meets it.
  auto uses = [&](int r, bool wide) {
    std::string u;
    for (int t = 0; t < rows; ++t)
      for (int ky = 0; ky < KH; ++ky) {
        if (t * d.stride_h + ky * d.dilation_h != r) continue;
        if (wide)
          for (int g = 0; g < n_groups; ++g)
            u += "      z" + num(t) + " += MP_MADD32(vg" + num(g) + ", wg" + num(ky) + "_" +
                 num(g) + ");\n";
        else
          for (int i = 0; i < n_off; ++i)
            u += "      acc" + num(t) + " += MP_MADD16(v" + num(i) + ", " + pair(ky, i) + ");\n";
      }
    return u;
  };
  auto groups = [&](const std::string& v, const std::string& zero) {
    std::string s;
    for (int g = 0; g < n_groups; ++g)
      s += "      const mp_short32 vg" + num(g) + " = MP_CAT32(" + v + num(2 * g) + ", " +
           (2 * g + 1 < n_off ? v + num(2 * g + 1) : zero) + ");\n";
    return s;
  };
  // The vector at offset index i of the row at `ro`: one load (inside the buffer), else lane by
  // lane.
  auto vec = [&](int i, bool fast) {
    const std::string c = num(i);
    if (fast)
      return vw.Select("xz", "MP_SHORT16_FROM(xc + ro + ixb + " + num(2 * i) + ")", "cm" + c);
    std::string v;
    for (int j = 0; j < 16; ++j)
      v += std::string(j ? ", " : "") + "(" + vw.Lane("cm" + c, j) + " ? (short)Dtype_LOAD(xc, " +
           vw.Lane("ix" + c, j) + " + ro) : (short)x_zero)";
    return vw.Of(S, v);
  };
  auto window = [&](bool check_rows, bool wide) {
    std::string s;
    for (int r = 0; r < in_rows; ++r) {
      const std::string u = uses(r, wide);
      if (u.empty()) continue;
      const std::string iy = "iyb + " + num(r);
      s += "    {\n";
      if (check_rows) s += "    if (" + iy + " >= 0 && " + iy + " < " + num(d.height) + ") {\n";
      s += "      const int ro = (" + iy + ") * " + num(d.width) + ";\n";
      for (int i = 0; i < n_off; ++i)
        s += "      const " + S + " v" + num(i) + " = " + vec(i, true) + ";\n";
      if (wide) s += groups("v", "xz");
      s += u;
      if (check_rows) {  // a row outside the input: every tap reads the padding z_x
        s += "    } else {\n";
        for (int i = 0; i < n_off; ++i) s += "      const " + S + " v" + num(i) + " = xz;\n";
        if (wide) s += groups("v", "xz");
        s += u + "    }\n";
      }
      s += "    }\n";
    }
    return s;
  };
  auto block = [&](bool wide) {
    return "  if (iyb >= 0 && iyb + " + num(in_rows - 1) + " < " + num(d.height) + ") {\n" +
           window(false, wide) + "  } else {\n" + window(true, wide) + "  }\n";
  };
  std::string wide;
  for (int ky = 0; ky < KH; ++ky)
    for (int g = 0; g < n_groups; ++g)
      wide += "  const mp_short32 wg" + num(ky) + "_" + num(g) + " = MP_CAT32(" + pair(ky, 2 * g) +
              ", " + (2 * g + 1 < n_off ? pair(ky, 2 * g + 1) : std::string("MP_PAIR16(0, 0)")) +
              ");\n";
  const std::string Z = vw.Type("int", 16);
  for (int t = 0; t < rows; ++t)
    wide += "  " + Z + " z" + num(t) + " = " + vw.Splat(Z, "0") + ";\n";
  wide += block(true);
  for (int t = 0; t < rows; ++t) {
    const std::string z = "z" + num(t);
    wide += "  acc" + num(t) + " = " + vw.Lanes(z, 0, 8) + " + " + vw.Lanes(z, 8, 8) + ";\n";
  }
  // As the float form: the loads of the block's rows inside the input stay inside the buffer,
  // from the first row's ixb to the last row's ixb + span; else a loop over the rows builds the
  // vectors lane by lane (a few work-items at the buffer's ends).
  b += DepthwiseLoadsInsideBuffer(d, in_rows, span);
  b += "#if defined(MP_MADD32_NATIVE)\n" + wide + "#else\n" + block(false) + "#endif\n";
  b += "  } else {\n    const mp_short16 pwa[" + num(KH * n_off) + "] = {";
  for (int ky = 0; ky < KH; ++ky)
    for (int i = 0; i < n_off; ++i) b += std::string(ky || i ? ", " : "") + pair(ky, i);
  b += "};\n    " + A + " sacc[" + num(rows) + "];\n";
  b += "    for (int t = 0; t < " + num(rows) + "; ++t) sacc[t] = " + vw.Splat(A, "0") + ";\n";
  b += "    for (int r = 0; r < " + num(in_rows) + "; ++r) {\n      const int iy = iyb + r;\n";
  for (int i = 0; i < n_off; ++i) b += "      " + S + " v" + num(i) + " = xz;\n";
  b += "      if (iy >= 0 && iy < " + num(d.height) + ") {\n        const int ro = iy * " +
       num(d.width) + ";\n";
  for (int i = 0; i < n_off; ++i) b += "        v" + num(i) + " = " + vec(i, false) + ";\n";
  b += "      }\n      for (int ky = 0; ky < " + num(KH) + "; ++ky) {\n";
  b += "        const int tr = r - ky * " + num(d.dilation_h) + ";\n";
  b += "        if (tr < 0 || tr % " + num(d.stride_h) + " != 0 || tr / " + num(d.stride_h) +
       " >= " + num(rows) + ") continue;\n";
  for (int i = 0; i < n_off; ++i)
    b += "        sacc[tr / " + num(d.stride_h) + "] += MP_MADD16(v" + num(i) + ", pwa[ky * " +
         num(n_off) + " + " + num(i) + "]);\n";
  b += "      }\n    }\n";
  for (int t = 0; t < rows; ++t) b += "    acc" + num(t) + " = sacc[" + num(t) + "];\n";
  b += "  }\n";
  b += DepthwiseVectorEpilogue(target, d, rows, 8, true, "wxz", known);
  k.Body(b);
  return w.Source();
}

}  // namespace mpcaffe::libdnn
