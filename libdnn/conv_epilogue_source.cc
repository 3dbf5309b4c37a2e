// libdnn/conv_epilogue_source.cc — the int8 direct convolution's vector epilogue: a whole
// vector of output channels requantized at once (DirectVectorEpilogue); and one output's
// scalar epilogue (ScalarInt8Output).
#include <string>

#include "codegen/vector_words.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn::conv_internal {

std::string DirectVectorEpilogue(const KernelTarget& target, const ConvConfig& c, bool quads,
                                 bool tiles, int pre_shift) {
  const VectorWords v(target);
  // Parts of at most 8 channels (the requantization's long lanes and the interleaved
  // multipliers' load of twice as many stay within OpenCL's 16 lanes).
  const int L = c.vw < 8 ? c.vw : 8, parts = c.vw / L;
  const std::string iv = v.Type("int", L), lv = v.Type("long", L),
                    px = std::to_string(c.px_per_item);
  // The residual's term, as Requant's long lanes `rs` (r is int or long lanes: `as_int`).
  auto residual = [&](bool as_int) {
    std::string lanes;
    for (int l = 0; l < L; ++l)
      lanes += std::string(l ? ", " : "") + "Dtype_LOAD(res, yi0 + " + std::to_string(l) + " * P)";
    std::string s = "        if (has_res) {\n          const " + iv + " rv = " + v.Of(iv, lanes) +
                    " - res_zero;\n";
    // |r| ≤ 2^29 on the int path: a residual past ±2^30 clamps the sum the same way.
    if (as_int)
      s += v.RequantResidual(L, "rs", "rv", "res_m", "res_s", ResidualBelow2To16If(target), 10) +
           "          r += rs;\n";
    else
      s += v.Requant(L, "rs", "rv", v.Splat(iv, "res_m"), v.Splat(iv, "res_s"), 10) +
           "          r += rs;\n";
    return s + "        }\n";
  };
  std::string s = "    if (oc0 + CONV_VW <= OCg) {\n";
  for (int h = 0; h < parts; ++h) {
    // The channels' constants once for the work-item's pixels: the bias (less z_x·Σ(w − z_w)
    // for byte quads), multipliers and shifts.
    const std::string o0 = "g * OCg + oc0 + " + std::to_string(h * L);
    s += "     {\n      const int o0 = " + o0 + ";\n";
    s += "      const " + iv + " base = (has_bias ? " + v.Load(L, "bias + o0") + " : " +
         v.Splat(iv, "0") + ")" +
         (quads ? " - " + v.Splat(iv, "x_zero") + " * " + v.Load(L, "wsum + o0") : "") + ";\n";
    s += "      const " + v.Type("int", 2 * L) + " rqv = " + v.Load(2 * L, "rq + 2 * o0") + ";\n";
    s += "      const " + iv + " m = " + v.Even("rqv") + ", sh = " + v.Odd("rqv") + ";\n";
    // Byte quads' accumulators are still in `accs` (the window function's): loaded from there
    // rather than from the private `tile` array at an index known only at run time.
    const std::string acc = "tile[tj * " + px + " + tt]";
    const std::string val =
        quads        ? v.Load(L, "accs + 16 * (tj * " + px + " + tt) + " + std::to_string(h * L))
        : parts == 1 ? acc
                     : v.Lanes(acc, h * L, L);
    // The pixel loop once per requantization, so that its loop-invariant terms leave the loop.
    // A tile's pixels are grid positions, some past the output (pix_at: TilePrologue).
    auto pixels = [&](const std::string& body) {
      std::string p =
          tiles ? "      for (int tt = 0; tt < " + px + "; ++tt) {\n        if (pix_at[tt] < 0) "
                  "continue;\n        const int yi0 = (n * G * OCg + o0) * P + pix_at[tt];\n"
                : "      for (int tt = 0; tt < " + px + " && p0 + tt < P; ++tt) {\n"
                  "        const int yi0 = (n * G * OCg + o0) * P + p0 + tt;\n";
      p += "        const " + iv + " val = " + val + " + base;\n" + body;
      for (int l = 0; l < L; ++l)
        p += "        Dtype_STORE(y, yi0 + " + std::to_string(l) + " * P, " + v.Lane("out", l) +
             ");\n";
      return p + "      }\n";
    };
    // Pixels, or with 4 pixels per work-item all in range, one unaligned word of each channel's
    // four output bytes (neighbours in NCHW; KernelHelper::kByteVectorStore) instead of four
    // byte stores.
    auto words = [&](const std::string& body) {
      if (c.px_per_item != 4) return pixels(body);
      std::string w = "      if (p0 + 4 <= P) {\n      " + iv + " word = " + v.Splat(iv, "0") +
                      ";\n      for (int tt = 0; tt < 4; ++tt) {\n";
      w += "        const int yi0 = (n * G * OCg + o0) * P + p0 + tt;\n";
      w += "        const " + iv + " val = " + val + " + base;\n" + body;
      w += "        word |= out << (8 * tt);\n      }\n";
      w += "      const int yw = (n * G * OCg + o0) * P + p0;\n";
      for (int l = 0; l < L; ++l)
        w += "      MP_STORE_UCHAR4(" + v.As(v.Type("uchar", 4), v.Lane("word", l)) +
             ", y + yw + " + std::to_string(l) + " * P);\n";
      return w + "      } else {\n" + pixels(body) + "      }\n";
    };
    const std::string clamp_int =
        "        const " + iv + " out = " +
        v.Clamp("r", v.Splat(iv, "relu ? c_zero : Dtype_QMIN"), v.Splat(iv, "Dtype_QMAX")) + ";\n";
    // rq_mode (the host's check of every channel's right shift 31 − shift): 2, all in 34 … 62,
    // int32 lanes (with pre_shift, all in 34 − pre … 62 − pre, the value left-shifted first:
    // VectorWords::PreShifted); 1, all in 1 … 62, 64-bit products saturated at 2^30 (without a
    // residual); else Requant's long lanes.
    const std::string shift =
        pre_shift ? "sh - " + v.Splat(iv, std::to_string(pre_shift)) : std::string("sh");
    s += "      if (rq_mode == 2) {\n" +
         words(v.RequantHigh(L, "r", v.PreShifted(L, "val", pre_shift), "m", shift, 8) +
               "        r += c_zero;\n" + residual(true) + clamp_int);
    s += "      } else if (rq_mode == 1 && !has_res) {\n" +
         words(v.RequantWide(L, "r", "val", "m", "sh", 8) + "        r += c_zero;\n" + clamp_int);
    s +=
        "      } else {\n" +
        pixels(v.Requant(L, "r", "val", "m", "sh", 8) + "        r += c_zero;\n" + residual(false) +
               "        const " + iv + " out = " +
               v.Convert(iv, v.Clamp("r", v.Splat(lv, "relu ? (mp_i64)c_zero : (mp_i64)Dtype_QMIN"),
                                     v.Splat(lv, "(mp_i64)Dtype_QMAX"))) +
               ";\n") +
        "      }\n";
    s += "     }\n";
  }
  return s + "    } else\n";
}

std::string ScalarInt8Output(const ConvDesc& d, const std::string& acc, const std::string& res,
                             const std::string& y, const std::string& at, int indent) {
  const std::string pad(indent, ' ');
  std::string s = pad + "mp_i64 v = (mp_i64)c_zero + MP_REQUANT(" + acc + ", rqm, rqs);\n";
  if (d.residual)
    s += pad + "v += MP_REQUANT((mp_i64)Dtype_LOAD(" + res + ", " + at +
         ") - res_zero, res_m, res_s);\n";
  s += pad + "v = Dtype_SAT_FROM(v, " + (d.relu ? "(mp_i64)c_zero" : "(mp_i64)Dtype_QMIN") +
       ");\n";
  return s + pad + "Dtype_STORE(" + y + ", " + at + ", v);\n";
}

}  // namespace mpcaffe::libdnn::conv_internal
