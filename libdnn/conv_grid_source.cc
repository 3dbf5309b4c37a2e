// libdnn/conv_grid_source.cc — the int8 direct convolution's grid form (ConvInput::kQuadGrid,
// ConvConfig::grid): vectors of 16 neighbouring output columns of one row, each of the
// work-item's channels one broadcast word of byte quads. Where the channel-lane quads hold 16
// channels of one pixel per accumulator and requantize and store them lane by lane across
// output planes, an accumulator here is 16 pixels of one channel: one requantization of 16
// lanes with the channel's scalar multiplier and one 16-byte store where the pixels lie in one
// output row. Layers of few input channels (SqueezeNet's 3x3 over 16 channels) spent more in
// that epilogue than in their window loop.
#include <string>

#include "codegen/vector_words.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn::conv_internal {

namespace {

std::string Num(long v) { return std::to_string(v); }

int Channels(const ConvConfig& c) { return c.oc_per_item * c.vw; }  // one lane (Validate)

}  // namespace

std::string GridPackInputBody(const KernelTarget& target) {
  // A work-item per packed row (HW / PW of them per plane): plane q of (image, group) ng holds
  // at row r, column c the bytes of channels 4q … 4q + 3 at input row r − ph, column c − pw,
  // z_x outside the input (taken back out by z_x·Σ(w − z_w)), 0 past Cg (zero weights); the
  // row's columns inside the input zipped 16 at a time from four channel rows (MP_ZIP4X16), the
  // last vector taken back to end at the row's end (over words the one before wrote, the same
  // again); the padding and a last partial quad word by word. (sh, sw: the grid form runs at
  // stride 1 only.) With vector built-ins a row narrower than 16 columns (GoogLeNet's 14 and 7)
  // zips the 16 bytes from its start, whose lanes past the row belong to the next row or
  // plane, and stores its first XW words, where those 16 bytes of the fourth channel lie inside
  // this chunk's input; the input's last rows stay word by word.
  std::string narrow;
  if (target.vector_builtins) {
    const VectorWords v(target);
    narrow = R"( else if (((long)ng * Cg + c0 + 3) * XHW + (long)iy * XW + 16 <=
                 (long)NG * Cg * XHW) {
        const mp_i32x16 zipped = MP_ZIP4X16(src, src + XHW, src + 2 * XHW, src + 3 * XHW);
)" + v.MoveStoreFirst("int", 16, "zipped", "dst + pw", "XW", 8) +
             R"(        c = pw + XW;
      })";
  }
  return R"(  const int Cq = (Cg + 3) / 4;
  const int XH = XHW / XW;
  const int PR = HW / PW;
  const int xz = (int)((mp_u32)x_zero * 0x01010101u);
  $loop(i, NG * Cq * PR) {
    const int r = i % PR;
    const int b = i / PR;
    const int q = b % Cq;
    const int ng = b / Cq;
    const int iy = r - ph;
    const int inside = iy >= 0 && iy < XH;
    const int c0 = 4 * q;
    const $global Dtype* src = x + ((long)ng * Cg + c0) * XHW + (inside ? iy : 0) * XW;
    $global int* dst = xq + (long)b * HW + r * PW;
    int c = 0;
    if (inside && c0 + 4 <= Cg) {
      for (; c < pw; ++c) dst[c] = xz;
      if (XW >= 16) {
        for (; c < pw + XW; c += 16) {
          const int cs = min(c, pw + XW - 16);
          const $global Dtype* p = src + cs - pw;
          MP_QUAD_STORE(MP_ZIP4X16(p, p + XHW, p + 2 * XHW, p + 3 * XHW), dst + cs);
        }
        c = pw + XW;
      })" + narrow + R"(
    }
    for (; c < PW; ++c) {
      const int ix = c - pw;
      int v = xz;
      if (inside && ix >= 0 && ix < XW) {
        mp_u32 u = 0u;
        for (int j = 0; j < 4 && c0 + j < Cg; ++j)
          u |= (mp_u32)Dtype_LOAD(src, j * XHW + ix) << (8 * j);
        v = (int)u;
      }
      dst[c] = v;
    }
  }
)";
}

std::string GridTapPackInputBody(const KernelTarget& target) {
  const VectorWords w(target);
  // A work-item per packed row: plane p = kq·Cg + ic of (image, group) ng holds at row r,
  // column c the bytes of channel ic at input row r − ph, columns c·sw + (4kq + j)·dw − pw
  // (j = 0 … 3), z_x outside the input; taps past the window meet zero weights.
  // Four neighbouring taps (dilation 1) inside the row: one unaligned word.
  const std::string word = w.As("uint", w.MoveLoad("uchar", 4, "src + ix0"));
  // With vector built-ins, 16 columns at a time where their bytes lie inside the row (dilation
  // 1): lane i's quad starts at byte b0 + sw·i, so at stride 1 the four byte vectors from b0,
  // b0 + 1, b0 + 2, b0 + 3 zip into the quads (MP_ZIP4X16); at stride 2 those vectors are the
  // even bytes of 32 from each start; at stride 4 the quads are the 64 bytes from b0 as they
  // lie. The row's last such vector is taken back to end where the row's bytes do (over words
  // written before, the same again); rows outside the input are z_x in every byte. The columns
  // over the row's left edge and past its last vector, and the other strides, take the word
  // loop. (The zoo's first layers are at stride 2: MobileNet's and SqueezeNet's 3×3, ResNet-50's
  // and GoogLeNet's 7×7.)
  std::string blocks, row_setup;
  if (target.vector_builtins) {
    // Per row: whether its vectors zip (`zips`), and the last column start c whose vector's
    // loads end inside the row (c·sw ≤ `last`).
    row_setup = R"(    const int last = XW - 3 - 16 * sw - 4 * kq + pw;
    const int zips = dw == 1 && (sw == 1 || sw == 2 || sw == 4) && last >= 0;
)";
    const std::string u16 = w.Type("uint", 16), i16 = w.Type("int", 16);
    std::string even_zip;
    for (int j = 0; j < 4; ++j)
      even_zip += std::string(j ? " | (" : "(") +
                  w.Convert(u16, w.LoadEven("uchar", 16, "q + " + Num(j))) +
                  (j ? " << " + Num(8 * j) + ")" : ")");
    blocks = R"(      if (c + 16 <= PW) {
        if (!inside) {
          MP_QUAD_STORE(MP_QUAD_WORD(xz), dst + c);
          c += 16;
          continue;
        }
        if (zips) {
          const int cv = c * sw > last ? last / sw : c;
          const int b0 = cv * sw + 4 * kq - pw;
          if (b0 >= 0 && cv + 16 > c) {
            const $global mp_u8* q = (const $global mp_u8*)src + b0;
            mp_i32x16 v;
            if (sw == 1)
              v = MP_ZIP4X16(q, q + 1, q + 2, q + 3);
            else if (sw == 2)
              v = )" + w.As(i16, even_zip) + R"(;
            else
              v = MP_QUAD_LOAD_BYTES(q);
            MP_QUAD_STORE(v, dst + cv);
            c = cv + 16;
            continue;
          }
        }
      }
)";
  }
  return R"(  const int NP = Cg * KQ;
  const int XH = XHW / XW;
  const int PR = HW / PW;
  const int xz = (int)((mp_u32)x_zero * 0x01010101u);
  $loop(i, NG * NP * PR) {
    const int r = i % PR;
    const int b = i / PR;
    const int p = b % NP;
    const int ng = b / NP;
    const int kq = p / Cg;
    const int ic = p - kq * Cg;
    const int iy = r - ph;
    const int inside = iy >= 0 && iy < XH;
    const $global Dtype* src = x + ((long)ng * Cg + ic) * XHW + (inside ? iy : 0) * XW;
    $global int* dst = xq + (long)b * HW + r * PW;
)" + row_setup + R"(    for (int c = 0; c < PW;) {
)" + blocks + R"(      const int ix0 = c * sw + 4 * kq * dw - pw;
      mp_u32 v = 0u;
      if (inside && dw == 1 && ix0 >= 0 && ix0 + 4 <= XW) {
        v = )" +
         word + R"(;
      } else {
        for (int j = 0; j < 4; ++j) {
          const int ix = ix0 + j * dw;
          v |= (mp_u32)(inside && ix >= 0 && ix < XW ? Dtype_LOAD(src, ix) : x_zero) << (8 * j);
        }
      }
      dst[c++] = (int)v;
    }
  }
)";
}

std::string GridWindowFunction(const ConvConfig& c) {
  // Accumulator (t, v): channel t of the work-item over vector v, the 16 columns from word o<v>
  // of the planes. Per window tap and quad: px/16 vector loads of the input words (neighbours
  // under every tap at stride 1), one broadcast word per channel (an embedded broadcast).
  const int ct = Channels(c), pv = c.px_per_item / 16;
  auto a = [&](int t, int v) { return "a" + Num(t) + "_" + Num(v); };
  std::string f =
      "MP_QUAD_FN void conv_grid(const $global int* xg, const $global int* wg, int PS, int PW, "
      "int Cq, int KH, int KW, int dh, int dw, ";
  for (int v = 0; v < pv; ++v) f += "int o" + Num(v) + ", ";
  f += "int* out) {\n";
  for (int t = 0; t < ct; ++t)
    for (int v = 0; v < pv; ++v) f += "  mp_i32x16 " + a(t, v) + " = MP_QUAD_WORD(0);\n";
  f += "  for (int ky = 0; ky < KH; ++ky)\n    for (int kx = 0; kx < KW; ++kx) {\n"
       "      const $global int* xp = xg + ky * dh * PW + kx * dw;\n"
       "      const $global int* wk = wg + (ky * KW + kx) * Cq * " +
       Num(ct) +
       ";\n"
       "      for (int q = 0; q < Cq; ++q) {\n";
  for (int v = 0; v < pv; ++v)
    f += "        const mp_i32x16 x" + Num(v) + " = MP_QUAD_LOAD(xp + o" + Num(v) + ");\n";
  for (int t = 0; t < ct; ++t) {
    f += "        {\n          const mp_i32x16 w = MP_QUAD_WORD(wk[" + Num(t) + "]);\n";
    for (int v = 0; v < pv; ++v)
      f += "          " + a(t, v) + " = MP_DPBUSD16(" + a(t, v) + ", x" + Num(v) + ", w);\n";
    f += "        }\n";
  }
  f += "        xp += PS;\n        wk += " + Num(ct) + ";\n      }\n    }\n";
  for (int t = 0; t < ct; ++t)
    for (int v = 0; v < pv; ++v)
      f += "  MP_QUAD_STORE(" + a(t, v) + ", out + " + Num(16 * (t * pv + v)) + ");\n";
  return f + "}\n";
}

std::string GridPrologue(const ConvConfig& c) {
  // W is the planes' width (QuadGridLayoutOf: XB vectors per output row, PR rows of W words per
  // plane; output rows sh packed rows apart). Vector k of the image is output row k / XB,
  // columns 16·(k % XB) on; a work-item's vectors past the last compute the last one again (in
  // bounds, not stored).
  const int pv = c.px_per_item / 16;
  std::string b = R"(  const int blk = $group_id(1);
  const int ocl = blk * CONV_TILE;
  const int P = OH * OW;
  const int ng = $group_id(2);
  const int n = ng / G;
  const int g = ng - n * G;
  const int Cq = (Cg + 3) / 4;
  const int XB = (OW + 15) / 16;
  const int NV = OH * XB;
  const int PR = (((OH - 1) * sh + (KH - 1) * dh) * W + 16 * XB - 1 + (KW - 1) * dw) / W + 1;
  const int PS = PR * W;
  const int k0 = $group_id(0) * )" +
                  Num(pv) + ";\n";
  std::string offsets;
  for (int v = 0; v < pv; ++v) {
    const std::string n = Num(v);
    b += "  const int kv" + n + " = min(k0 + " + n + ", NV - 1);\n";
    b += "  const int oy" + n + " = kv" + n + " / XB, ox" + n + " = (kv" + n + " - oy" + n +
         " * XB) * 16;\n";
    offsets += "oy" + n + " * sh * W + ox" + n + ", ";
  }
  b += "  int accs[" + Num(16 * Channels(c) * pv) + "];\n";
  b += "  conv_grid(xq + ng * Cq * PS,\n"
       "            wp + (g * (OCpad / CONV_TILE) + blk) * KH * KW * Cq * CONV_TILE, PS, W, Cq, "
       "KH, KW,\n            dh, dw, " +
       offsets + "accs);\n";
  return b;
}

std::string GridEpilogue(const KernelTarget& target, const ConvConfig& c, int pre_shift) {
  const VectorWords v(target);
  const int pv = c.px_per_item / 16;
  const std::string I = v.Type("int", 16), U8 = v.Type("uchar", 16);
  const std::string lo = "relu ? c_zero : Dtype_QMIN";
  // rq_mode (the host's check of every channel's right shift, as DirectVectorEpilogue's): 2,
  // the int32 lanes with the channel's constants derived once (RequantSetup; with pre_shift,
  // the value left-shifted first); 1 without a residual, 64-bit products saturated at 2^30
  // (RequantWide); else RequantClamp's own choice per vector, long lanes where it must.
  // A fused ReLU's range starts at c_zero itself: spelled so, RequantClamp drops the sign's
  // steps (its floor_at_zero form).
  auto requant = [&](const VectorResidual* res, bool high, const std::string& low) {
    return v.RequantClamp(16, "r", "val", "rqm", "rqs", "c_zero", res, low, "Dtype_QMAX", 10,
                          high ? "rs" : "", high, high ? pre_shift : 0) +
           "          qv = " + v.Convert(U8, "r") + ";\n";
  };
  const std::string wide =
      v.RequantWide(16, "r", "val", v.Splat(I, "rqm"), v.Splat(I, "rqs"), 10) + "          qv = " +
      v.Convert(U8,
                v.Clamp("r + " + v.Splat(I, "c_zero"), v.Splat(I, lo), v.Splat(I, "Dtype_QMAX"))) +
      ";\n";
  const VectorResidual res{"rc - " + v.Splat(I, "res_zero"), "res_m", "res_s",
                           ResidualBelow2To16If(target)};
  std::string b = R"(  for (int t = 0; t < CONV_TILE; ++t) {
    const int oc = ocl + t;
    if (oc >= OCg) break;
    const int o = g * OCg + oc;
    const int corr = (has_bias ? bias[o] : 0) - x_zero * wsum[o];
    const int rqm = rq[2 * o], rqs = rq[2 * o + 1];
    $global Dtype* yo = y + (long)(n * G * OCg + o) * P;
    const $global Dtype* ro = res + (long)(n * G * OCg + o) * P;
)" + v.RequantSetup(16, "rs", "rqm", "rqs", 4, pre_shift);
  // A vector's columns past OW (the last of a row not a multiple of 16) are neither read from
  // the residual nor stored.
  for (int p = 0; p < pv; ++p) {
    const std::string n = Num(p);
    b += "    if (k0 + " + n + " < NV) {\n";
    b += "      const int at = oy" + n + " * OW + ox" + n + ", cols = min(16, OW - ox" + n + ");\n";
    b += "      const " + I +
         " val = " + v.Load(16, "accs + " + Num(16 * p) + " + t * " + Num(16 * pv)) + " + " +
         v.Splat(I, "corr") + ";\n";
    b += "      " + U8 + " qv;\n";
    b += "      if (has_res) {\n        " + I + " rc;\n";
    b += "        if (cols == 16) {\n          rc = " +
         v.Convert(I, v.MoveLoad("uchar", 16, "ro + at")) + ";\n        } else {\n";
    b += "          int rl[16];\n          for (int l = 0; l < 16; ++l)\n"
         "            rl[l] = l < cols ? Dtype_LOAD(ro, at + l) : res_zero;\n";
    b += "          rc = " + v.Load(16, "rl") + ";\n        }\n        {\n" +
         requant(&res, false, lo) + "        }\n";
    b += "      } else if (rq_mode == 2) {\n        if (relu) {\n" +
         requant(nullptr, true, "c_zero") + "        } else {\n" + requant(nullptr, true, lo) +
         "        }\n";
    b += "      } else if (rq_mode == 1) {\n        {\n" + wide + "        }\n";
    b += "      } else {\n        {\n" + requant(nullptr, false, lo) + "        }\n      }\n";
    b += "      if (cols == 16) {\n        " + v.MoveStore("uchar", 16, "qv", "yo + at") + ";\n";
    b += "      } else {\n" + v.MoveStoreFirst("uchar", 16, "qv", "yo + at", "cols", 8) +
         "      }\n    }\n";
  }
  return b + "  }\n";
}

}  // namespace mpcaffe::libdnn::conv_internal
