// libdnn/conv_quads_source.cc — the int8 direct convolution's byte-quad inputs (ConvInput::
// kPackedQuads, kPackedTiles): the input-packing kernels' bodies (channel quads, tap quads:
// QuadLayout; tile rows: TileLayout), the tap quads' weight packing, the forward body's
// prologue and the window loop as an MP_QUAD_FN (MP_TILE_FN) function.
#include <string>

#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn::conv_internal {

namespace {

std::string Num(int v) { return std::to_string(v); }

/// Text of `pattern` once per accumulator (#J the channel vector, #T the pixel).
std::string PerTile(const ConvConfig& c, const std::string& pattern) {
  std::string s;
  for (int j = 0; j < c.oc_per_item; ++j)
    for (int t = 0; t < c.px_per_item; ++t) {
      std::string line;
      for (size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '#' && i + 1 < pattern.size() &&
            (pattern[i + 1] == 'J' || pattern[i + 1] == 'T')) {
          line += Num(pattern[i + 1] == 'J' ? j : t);
          ++i;
        } else {
          line += pattern[i];
        }
      }
      s += line;
    }
  return s;
}

std::string PerPixel(const ConvConfig& c, const std::string& pattern) {
  ConvConfig one = c;
  one.oc_per_item = 1;
  return PerTile(one, pattern);
}

std::string PerChannel(const ConvConfig& c, const std::string& pattern) {
  ConvConfig one = c;
  one.px_per_item = 1;
  return PerTile(one, pattern);
}

}  // namespace

std::string QuadPackInputBody() {
  // Per (image, group) ⌈Cg/4⌉ planes of words x(4q) | x(4q + 1) << 8 | … (the bytes as stored,
  // low first); channels past Cg are 0 bytes, which meet zero weights. A packed plane of HW
  // pixels, PW per row, takes every sh-th row and sw-th column of the input planes (XW columns,
  // XHW pixels): 1 for a window, the stride for an unpadded 1×1 convolution, whose forward
  // then reads only what it multiplies, at stride 1.
  return R"(  const int Cq = (Cg + 3) / 4;
  $loop(i, NG * HW) {
    const int s = i % HW;
    const int ng = i / HW;
    const $global Dtype* src = x + ng * Cg * XHW + (s / PW) * sh * XW + (s % PW) * sw;
    $global int* dst = xq + ng * Cq * HW + s;
    for (int q = 0; q < Cq; ++q) {
      mp_u32 v = 0u;
      for (int j = 0; j < 4 && 4 * q + j < Cg; ++j)
        v |= (mp_u32)Dtype_LOAD(src, (4 * q + j) * XHW) << (8 * j);
      dst[q * HW] = (int)v;
    }
  }
)";
}

std::string QuadTapPackInputBody() {
  // A work-item per packed row: the columns whose four bytes lie inside the input row are
  // zipped 16 at a time from four loads (MP_ZIP4X16), the others (the padding, a last partial
  // 16) word by word, z_x outside the input, which the epilogue's z_x·Σ(w − z_w) takes back
  // out; bytes past the window's last column meet zero weights.
  const std::string words = R"(      mp_u32 v = 0u;
      for (int j = 0; j < 4; ++j) {
        const int ix = c - pw + j * dw;
        v |= (mp_u32)(inside && ix >= 0 && ix < XW ? Dtype_LOAD(x, base + ix) : x_zero) << (8 * j);
      }
      dst[c] = (int)v;
)";
  return R"(  const int PH = HW / PW;
  const int XH = XHW / XW;
  $loop(r, NG * Cg * PH) {
    const int iy = r % PH - ph;
    const int inside = iy >= 0 && iy < XH;
    const int base = (r / PH) * XHW + iy * XW;
    $global int* dst = xq + r * PW;
    const int c0 = inside ? min(pw, PW) : PW;
    const int c1 = inside ? max(c0, min(PW, XW + pw - 3 * dw)) : PW;
    int cv = c0;
    for (; cv + 16 <= c1; cv += 16) {
      const $global Dtype* p = x + base + cv - pw;
      MP_QUAD_STORE(MP_ZIP4X16(p, p + dw, p + 2 * dw, p + 3 * dw), dst + cv);
    }
    for (int c = 0; c < c0; ++c) {
)" + words + R"(    }
    for (int c = cv; c < PW; ++c) {
)" + words + R"(    }
  }
)";
}

std::string QuadTapPackWeightsBody() {
  return R"(  const int KWq = (KW + 3) / 4;
  const int KH = KHW / KW;
  $loop(i, total) {
    const int j = i % 4;
    const int t = (i / 4) % CONV_TILE;
    int r = i / (4 * CONV_TILE);
    const int ic = r % Cg;
    r /= Cg;
    const int kq = r % KWq;
    r /= KWq;
    const int ky = r % KH;
    r /= KH;
    const int ocp = (r % blocks) * CONV_TILE + t;
    const int g = r / blocks;
    const int kx = 4 * kq + j;
    int v = 0;
    if (ocp < OCg && kx < KW) {
      const int o = g * OCg + ocp;
      v = WLOAD(wsrc, ((o * Cg + ic) * KH + ky) * KW + kx) - wz[o];
    }
    wp[i] = (Ptype)v;
  }
)";
}

std::string QuadWindowFunction(const ConvConfig& c) {
  // Why a function: PoCL compiles the VNNI built-in only in a noinline helper (MP_QUAD_FN), so
  // the whole window is one call per work-item and the accumulators go out through `out`.
  // Each step: one input word (4 channels of one pixel) in every lane per pixel, one 64-byte
  // row of 16 channels' weight quads per channel vector, oc · px MP_DPBUSD16. Where the window
  // leaves the input the word is z_x in every byte, which the epilogue's z_x·Σ(w − z_w) takes
  // back out; so interior and border positions differ only in that select.
  std::string f =
      "MP_QUAD_FN void conv_quads(const $global int* xg, const $global int* wg, int H, int W, "
      "int Cq, int KH, int KW, int dh, int dw, int x_zero, const int* pix, int* out) {\n"
      "  const int HW = H * W;\n"
      "  const int xz = (int)((mp_u32)x_zero * 0x01010101u);\n";
  f += PerTile(c, "  mp_i32x16 a#J_#T = MP_QUAD_WORD(0);\n");
  f += "  for (int ky = 0; ky < KH; ++ky) {\n    for (int kx = 0; kx < KW; ++kx) {\n";
  f += PerPixel(c,
                "      const int iy#T = pix[3 * #T + 1] + ky * dh;\n"
                "      const int ix#T = pix[3 * #T + 2] + kx * dw;\n"
                "      const int ok#T = pix[3 * #T] && iy#T >= 0 && iy#T < H && ix#T >= 0 && "
                "ix#T < W;\n"
                "      const int off#T = ok#T ? iy#T * W + ix#T : 0;\n");
  std::string all_ok;
  for (int t = 0; t < c.px_per_item; ++t) all_ok += (t ? " && ok" : "ok") + Num(t);
  auto loop = [&](bool masked) {
    std::string s =
        "        const $global int* xp = xg;\n"
        "        const $global int* wk = wg + (ky * KW + kx) * Cq * CONV_TILE;\n"
        "        for (int q = 0; q < Cq; ++q) {\n";
    s += PerPixel(c, masked ? "          const mp_i32x16 x#T = MP_QUAD_WORD(ok#T ? xp[off#T] : "
                              "xz);\n"
                            : "          const mp_i32x16 x#T = MP_QUAD_WORD(xp[off#T]);\n");
    s += PerChannel(c, "          const mp_i32x16 w#J = MP_QUAD_LOAD(wk + #J * CONV_STEP);\n");
    s += PerTile(c, "          a#J_#T = MP_DPBUSD16(a#J_#T, x#T, w#J);\n");
    s += "          xp += HW;\n          wk += CONV_TILE;\n        }\n";
    return s;
  };
  f += "      if (" + all_ok + ") {\n" + loop(false) + "      } else {\n" + loop(true) +
       "      }\n    }\n  }\n";
  int e = 0;
  for (int j = 0; j < c.oc_per_item; ++j)
    for (int t = 0; t < c.px_per_item; ++t, ++e)
      f += "  MP_QUAD_STORE(a" + Num(j) + "_" + Num(t) + ", out + " + Num(16 * e) + ");\n";
  return f + "}\n";
}

std::string QuadPrologue(const ConvConfig& c) {
  std::string body = R"(  const int lane = $local_id(0);
  const int blk = $group_id(1);
  const int ocl = blk * CONV_TILE + lane * CONV_VW;
  const int P = OH * OW;
  const int p0 = $group_id(0) * )" +
                     Num(c.px_per_item) + R"(;
  const int ng = $group_id(2);
  const int n = ng / G;
  const int g = ng - n * G;
  const int Cq = (Cg + 3) / 4;
)";
  body += PerPixel(c, R"(  const int pv#T = p0 + #T < P;
  const int oy#T = (p0 + #T) / OW;
  const int iy0#T = oy#T * sh - ph;
  const int ix0#T = (p0 + #T - oy#T * OW) * sw - pw;
)");
  std::string pix;
  for (int t = 0; t < c.px_per_item; ++t)
    pix += (t ? ", pv" : "pv") + Num(t) + ", iy0" + Num(t) + ", ix0" + Num(t);
  body += "  const int pix[" + Num(3 * c.px_per_item) + "] = {" + pix + "};\n";
  body += "  int accs[" + Num(16 * c.oc_per_item * c.px_per_item) + "];\n";
  body += R"(  conv_quads(xq + ng * Cq * H * W,
             wp + (g * (OCpad / CONV_TILE) + blk) * KH * KW * Cq * CONV_TILE + lane * CONV_VW, H,
             W, Cq, KH, KW, dh, dw, x_zero, pix, accs);
)";
  return body;
}

std::string TilePackInputBody() {
  // A work-item per chunk of 16 grid positions of one grid row and one 64-channel block qb, all
  // 16 quads k in turn, so each grid position's 64-byte line is written by one work-item (lines
  // written from both cores cost: docs/BENCHMARKS.md, "Default configurations"). Word k of
  // grid position s holds the bytes of channels 4(16qb + k) … 4(16qb + k) + 3 at input row
  // (s / PW)·sh − ph, column (s % PW)·sw − pw: z_x outside the input (the epilogue's
  // z_x·Σ(w − z_w) takes it back out), any bytes past Cg (zero weights). At stride 1 the
  // chunk's columns inside the input are zipped from four channel rows at once (MP_ZIP4X16:
  // 16 columns; fewer at a row's ends, where the 16 columns read stay inside the input), the
  // others word by word.
  const std::string word = R"(        int v = xz;
        const int ix = c * sw - pw;
        if (inside && ix >= 0 && ix < XW) {
          mp_u32 u = 0u;
          for (int j = 0; j < 4 && c0 + j < Cg; ++j)
            u |= (mp_u32)Dtype_LOAD(src, j * XHW + ix) << (8 * j);
          v = (int)u;
        }
        dst[c * 16] = v;
)";
  return R"(  const int QB = (Cg + 63) / 64;
  const int XH = XHW / XW;
  const int xz = (int)((mp_u32)x_zero * 0x01010101u);
  const int RS = (HW + PW - 1) / PW;
  const int CS = (PW + 15) / 16;
  const long end = (long)NG * Cg * XHW;
  $loop(i, NG * QB * RS * CS) {
    const int cs = i % CS * 16;
    const int r = i / CS % RS;
    const int b = i / (CS * RS);
    const int ng = b / QB;
    const int iy = r * sh - ph;
    const int ce = min(cs + 16, min(PW, HW - r * PW));
    for (int k = 0; k < 16; ++k) {
      const int c0 = 4 * (16 * (b - ng * QB) + k);
      const int inside = iy >= 0 && iy < XH && c0 < Cg;
      $global int* dst = xq + (b * HW + r * PW) * 16 + k;
      const long at = (long)(ng * Cg + (inside ? c0 : 0)) * XHW + (inside ? iy : 0) * XW;
      const $global Dtype* src = x + at;
      // The columns zipped: [z0, z1), whose input columns z − pw are inside the row.
      const int zip = sw == 1 && inside && c0 + 4 <= Cg;
      const int z0 = zip ? min(max(cs, pw), ce) : ce;
      const int z1 = zip ? max(z0, min(ce, XW + pw)) : ce;
      int c = cs;
      for (; c < z0; ++c) {
)" + word + R"(      }
      if (z0 < z1 && (z1 - z0 == 16 || at + 3 * XHW + z0 - pw + 16 <= end)) {
        const $global Dtype* p = src + z0 - pw;
        int w16[16];
        MP_QUAD_STORE(MP_ZIP4X16(p, p + XHW, p + 2 * XHW, p + 3 * XHW), w16);
        for (int l = 0; l < z1 - z0; ++l) dst[(z0 + l) * 16] = w16[l];
        c = z1;
      }
      for (; c < ce; ++c) {
)" + word + R"(      }
    }
  }
)";
}

std::string TileWindowFunction(const ConvConfig& c) {
  // Tiles: accumulators (channel vector j, pixel rows a) j·rows + a, then the input's pixel
  // rows (16 grid positions × 64 channels' bytes each), then the weights' (16 quads × 16
  // channels). Per window tap and 64-channel block: rows + oc tile loads, rows · oc products.
  const int rows = c.px_per_item / 16, oc = c.oc_per_item, accs = rows * oc;
  auto acc = [&](int j, int a) { return Num(j * rows + a); };
  auto in = [&](int a) { return Num(accs + a); };
  auto wt = [&](int j) { return Num(accs + rows + j); };
  std::string f =
      "MP_TILE_FN void conv_tiles(const $global int* xg, const $global int* wg, int PS, int PW, "
      "int QB, int KH, int KW, int dh, int dw, int* out) {\n  MP_TILES_BEGIN();\n";
  for (int t = 0; t < accs; ++t) f += "  MP_TILE_ZERO(" + Num(t) + ");\n";
  f += "  for (int ky = 0; ky < KH; ++ky)\n    for (int kx = 0; kx < KW; ++kx) {\n"
       "      const $global int* xp = xg + (ky * dh * PW + kx * dw) * 16;\n"
       "      const $global int* wk = wg + (ky * KW + kx) * QB * 16 * CONV_TILE;\n"
       "      for (int qb = 0; qb < QB; ++qb) {\n";
  for (int a = 0; a < rows; ++a)
    f += "        MP_TILE_LOAD(" + in(a) + ", xp + " + Num(256 * a) + ", 64);\n";
  for (int j = 0; j < oc; ++j)
    f += "        MP_TILE_LOAD(" + wt(j) + ", wk + " + Num(16 * j) + ", 4 * CONV_TILE);\n";
  for (int j = 0; j < oc; ++j)
    for (int a = 0; a < rows; ++a)
      f += "        MP_TILE_DPBUSD(" + acc(j, a) + ", " + in(a) + ", " + wt(j) + ");\n";
  f += "        xp += PS * 16;\n        wk += 16 * CONV_TILE;\n      }\n    }\n";
  // Accumulator tile (j, a) holds pixels 16a … 16a + 15 (rows) of channels 16j … 16j + 15: the
  // private accs' order, 16 channels per pixel (QuadWindowFunction's).
  for (int j = 0; j < oc; ++j)
    for (int a = 0; a < rows; ++a)
      f += "  MP_TILE_STORE(" + acc(j, a) + ", out + " + Num(16 * (j * c.px_per_item + 16 * a)) +
           ", 64);\n";
  return f + "  MP_TILES_END();\n}\n";
}

std::string TilePrologue(const ConvConfig& c) {
  // H and W are the grid's (TileLayout), p0 a grid position; PS as TileLayoutOf's plane.
  const std::string px = Num(c.px_per_item);
  return R"(  const int blk = $group_id(1);
  const int ocl = blk * CONV_TILE;
  const int P = OH * OW;
  const int p0 = $group_id(0) * )" +
         px + R"(;
  const int ng = $group_id(2);
  const int n = ng / G;
  const int g = ng - n * G;
  const int QB = (Cg + 63) / 64;
  const int PS = (OH * W + 64 + (KH - 1) * dh * W + (KW - 1) * dw + 15) / 16 * 16;
  int pix_at[)" + px + R"(];
  for (int t = 0, oy = p0 / W, ox = p0 - p0 / W * W; t < )" +
         px + R"(; ++t) {
    pix_at[t] = oy < OH && ox < OW ? oy * OW + ox : -1;
    if (++ox == W) ox = 0, ++oy;
  }
  int accs[)" + Num(16 * c.oc_per_item * c.px_per_item) + R"(];
  conv_tiles(xq + (ng * QB * PS + p0) * 16,
             wp + (g * (OCpad / CONV_TILE) + blk) * KH * KW * QB * 16 * CONV_TILE, PS, W, QB, KH,
             KW, dh, dw, accs);
)";
}

}  // namespace mpcaffe::libdnn::conv_internal
