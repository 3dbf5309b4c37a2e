// libdnn/conv_pointwise_quads_source.cc — the int8q pointwise plane form's byte quads (tile
// k 4): its K loop as a function and the zip of a work-item's column into private memory;
// conv_pointwise_source.cc writes the rest of the kernel.
#include <functional>
#include <string>

#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn::conv_internal {

namespace {

/// MP_ZIP4X16 of pixel vector p of the planes from `xc` (`hw` bytes apart): `rows` of them, the
/// quad's missing rows repeating the first (their weights are 0).
std::string ZipQuad(long hw, int rows, int p) {
  std::string ptrs;
  for (int j = 0; j < 4; ++j)
    ptrs += std::string(j ? ", " : "") + "xc + " + std::to_string((j < rows ? j * hw : 0) + 16 * p);
  return "MP_ZIP4X16(" + ptrs + ")";
}

/// The steps of 4 input channels over the planes at `xn` (`hw` bytes apart): a loop over the
/// whole quads, then the last C mod 4 channels; `step(rows, cq)` is each one's text, with `xc`
/// at its first plane and `cq` its index.
std::string OverQuads(long hw, int C,
                      const std::function<std::string(int, const std::string&)>& step) {
  auto num = [](long v) { return std::to_string(v); };
  std::string b;
  if (C / 4 > 0) {
    b += "  for (int cq = 0; cq < " + num(C / 4) + "; ++cq) {\n";
    b += "    const $global Dtype* xc = xn + cq * " + num(4 * hw) + ";\n";
    b += step(4, "cq") + "  }\n";
  }
  if (C % 4) {
    b += "  {\n    const $global Dtype* xc = xn + " + num((C / 4) * 4 * hw) + ";\n";
    b += step(C % 4, num(C / 4)) + "  }\n";
  }
  return b;
}

}  // namespace

/// The int8q plane form's K loop in byte quads (PointwiseTile::k 4), an MP_QUAD_FN function
/// conv_pw_quads(x, wb, acc): per 4 input channels the 16 pixels of each vector as byte quads
/// (x itself, unsigned) multiplied by each output channel's packed quad of w − z_w
/// (MP_DPBUSD16: one vpdpbusd, 64 products, where the device runs AVX-512 VNNI in a helper);
/// acc[o·px + p] gets channel o's sums over pixel vector p. A function of its own because PoCL
/// compiles the VNNI built-in only outside the work-group function: the call and the
/// accumulators' trip through memory cost once per tile. With ob 1 the function zips the quads
/// from the planes at `x` itself (MP_ZIP4X16), once per block of oc output channels; with ob > 1
/// `x` is the work-item's column zipped once (PointwiseZip), one load per pixel vector and step.
/// The last C mod 4 channels repeat the first row of their quad where no channel is left (their
/// weights are 0).
std::string PointwiseQuadLoop(const ConvDesc& d, const Convolution::PointwiseTile& t) {
  auto num = [](long v) { return std::to_string(v); };
  const long hw = long(d.height) * d.width;
  const bool zipped = t.ob > 1;
  std::string f = std::string("MP_QUAD_FN void conv_pw_quads(") +
                  (zipped ? "const mp_i32x16* xq" : "const $global Dtype* xn") +
                  ", const $global int* wb, mp_i32x16* acc) {\n";
  for (int o = 0; o < t.oc; ++o)
    for (int p = 0; p < t.px; ++p)
      f += "  mp_i32x16 s" + num(o) + "_" + num(p) + " = (mp_i32x16)(0);\n";
  auto step = [&](int rows, const std::string& cq) {
    std::string r = "    const $global int* wc = wb + " + cq + " * " + num(t.oc) + ";\n";
    for (int p = 0; p < t.px; ++p) {
      r += "    const mp_i32x16 v" + num(p) + " = " +
           (zipped ? "xc[" + num(p) + "]" : ZipQuad(hw, rows, p)) + ";\n";
    }
    for (int o = 0; o < t.oc; ++o) {
      r += "    const mp_i32x16 w" + num(o) + " = MP_QUAD_WORD(wc[" + num(o) + "]);\n";
      for (int p = 0; p < t.px; ++p) {
        const std::string a = "s" + num(o) + "_" + num(p);
        r += "    " + a + " = MP_DPBUSD16(" + a + ", v" + num(p) + ", w" + num(o) + ");\n";
      }
    }
    return r;
  };
  if (zipped) {  // the zip took the tail's rows: every step alike
    f += "  for (int cq = 0; cq < " + num(DivUp(d.channels, 4)) + "; ++cq) {\n";
    f += "    const mp_i32x16* xc = xq + cq * " + num(t.px) + ";\n";
    f += step(4, "cq") + "  }\n";
  } else {
    f += OverQuads(hw, d.channels, step);
  }
  for (int o = 0; o < t.oc; ++o)
    for (int p = 0; p < t.px; ++p)
      f += "  acc[" + num(o * t.px + p) + "] = s" + num(o) + "_" + num(p) + ";\n";
  return f + "}\n";
}

/// A tile of ob > 1's zip, in the kernel's text: the work-item's px vectors of 16 pixels of
/// every input channel from `xn` into `xq` (private, step-major: xq[cq·px + p] holds channels
/// 4cq..4cq+3 of vector p as byte quads), the last quad's missing rows repeating its first.
std::string PointwiseZip(const ConvDesc& d, const Convolution::PointwiseTile& t) {
  auto num = [](long v) { return std::to_string(v); };
  const long hw = long(d.height) * d.width;
  // Byte tiles read whole tiles of 16 steps: the steps past the last quad (zero weights) are
  // there, their values whatever the array held.
  const long steps = t.k == 64 ? PointwiseTileQuads(d.channels) : DivUp(d.channels, 4);
  const std::string b = "  mp_i32x16 xq[" + num(steps * t.px) + "];\n";
  return b + OverQuads(hw, d.channels, [&](int rows, const std::string& cq) {
           std::string r;
           for (int p = 0; p < t.px; ++p)
             r += "    xq[" + cq + " * " + num(t.px) + " + " + num(p) + "] = " +
                  ZipQuad(hw, rows, p) + ";\n";
           return r;
         });
}

/// The int8q plane form's K loop in byte tiles (PointwiseTile::k 64), an MP_TILE_FN function
/// conv_pw_tiles(xq, wb, acc) over the zip `xq` (PointwiseZip): per 64 input channels one tile
/// of the 16 output channels' w − z_w (rows the channels, 16 quads each, signed) times one tile
/// per vector of 16 pixels (rows the zip's 16 steps, unsigned), MP_TILE_DPBSUD into one
/// accumulator tile per vector, whose rows are the channels: acc[o·px + p] as the quads'.
std::string PointwiseTileLoop(const ConvDesc& d, const Convolution::PointwiseTile& t) {
  auto num = [](long v) { return std::to_string(v); };
  const int blocks = PointwiseTileQuads(d.channels) / 16, px = t.px;
  // Tiles: accumulators 0 … px − 1, the weights px, the pixels px + 1 … 2px.
  std::string f =
      "MP_TILE_FN void conv_pw_tiles(const mp_i32x16* xq, const $global int* wb, mp_i32x16* acc) "
      "{\n  MP_TILES_BEGIN();\n";
  for (int p = 0; p < px; ++p) f += "  MP_TILE_ZERO(" + num(p) + ");\n";
  f += "  for (int qb = 0; qb < " + num(blocks) + "; ++qb) {\n";
  f += "    MP_TILE_LOAD(" + num(px) + ", wb + qb * 256, 64);\n";
  for (int p = 0; p < px; ++p)
    f += "    MP_TILE_LOAD_P(" + num(px + 1 + p) + ", xq + qb * " + num(16 * px) + " + " + num(p) +
         ", " + num(64 * px) + ");\n";
  for (int p = 0; p < px; ++p)
    f += "    MP_TILE_DPBSUD(" + num(p) + ", " + num(px) + ", " + num(px + 1 + p) + ");\n";
  f += "  }\n";
  for (int p = 0; p < px; ++p)
    f += "  MP_TILE_STORE(" + num(p) + ", (int*)(acc + " + num(p) + "), " + num(64 * px) + ");\n";
  return f + "  MP_TILES_END();\n}\n";
}

}  // namespace mpcaffe::libdnn::conv_internal
