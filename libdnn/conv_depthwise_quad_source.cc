// libdnn/conv_depthwise_quad_source.cc — the int8q depthwise kernel in byte quad products
// (AVX-512 VNNI in a helper function): int32 sums, exact, 16 output columns per vector, at
// strides 1 and 2.
#include <string>

#include "codegen/vector_words.h"
#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn {

using namespace conv_internal;  // NOLINT: this file's private vocabulary

namespace {

/// Quads per window row: taps 4c … 4c + 3 of the row in quad c.
int QuadsPerRow(const ConvDesc& d) { return (d.kernel_w + 3) / 4; }

/// Bytes MP_QUAD_SLIDE16's VNNI form loads from each row (the span the buffer check covers).
constexpr int kSlideBytes = 64;

}  // namespace

bool conv_internal::DepthwiseQuadsApply(const ConvDesc& d, const KernelTarget& target) {
  // Output column i of a vector reads bytes s·i + 4c … s·i + 4c + 3 of its row's load: within
  // the slide's 64 bytes for strides 1 and 2 and windows up to 8 columns wide.
  return d.type == DataType::kInt8Q && target.byte_quads_in_helper && target.vector_builtins &&
         Convolution::IsDepthwise(d) && d.dilation_w == 1 && (d.stride_w == 1 || d.stride_w == 2) &&
         d.kernel_w <= 8 && d.stride_w * 15 + 4 * QuadsPerRow(d) - 1 < kSlideBytes;
}

// A work-item per (image · channel, block of `rows` output rows, 16 neighbouring output columns),
// as the other vector forms (conv_depthwise_source.cc). Each input row of the block is one
// MP_QUAD_SLIDE16 per quad of window columns: output column i's lane holds the row's bytes
// ixb + s·i + 4c … + 3 (columns outside the input replaced by z_x), which MP_DPBUSD16 multiplies
// by the window row's weight quad (w − z_w as signed bytes, 0 past the window) into the int32
// sums of every output row whose window meets that input row: 3 byte-quad products per output
// row of a 3×3 window, where the float form converts 3 loads per input row and multiplies 9
// times. Rows outside the input are z_x in every byte, and each sum starts at the bias minus
// z_x·Σ(w − z_w), which the epilogue would otherwise add per output row. Exact: |w − z_w| ≤ 128
// (the weights fit signed bytes, Convolution's weights_fit_bytes) and x ≤ 255, so a product is
// at most 2^15 and any window of fewer than 2^15 taps stays inside int32. PoCL compiles the VNNI
// built-in only in a noinline helper, so the window and the epilogue are one call per
// work-item. Work-items whose 64-byte row loads would leave the buffer (the last plane's last
// rows) take a scalar loop over the same sums instead and hand them to the helper's epilogue.
std::string conv_internal::DepthwiseQuadSource(const KernelTarget& target, const ConvDesc& d,
                                               int rows, RequantKnown known) {
  auto num = [](long v) { return std::to_string(v); };
  KernelWriter w(target, "conv_depthwise");
  DeclareDepthwiseInt8Vectors(w, d);
  w.UseHelper(KernelHelper::kByteQuadSlide16);
  const VectorWords vw(target);
  const int KH = d.kernel_h, KW = d.kernel_w, NQ = QuadsPerRow(d), S = d.stride_w;
  const int in_rows = (rows - 1) * d.stride_h + (KH - 1) * d.dilation_h + 1;
  // The window: per input row r, the quads of the row (if inside the input) and their products
  // into each output row t whose window row ky meets it (r = t·sh + ky·dh).
  // The helper also requantizes and stores the block (DepthwiseVectorEpilogue's text: its
  // names are the helper's parameters). With the epilogue in the work-group function the sums
  // went out through a private array that PoCL copied back 16 bytes at a time, and most of the
  // work-item's time was spent outside the products. `sums`, when not null, holds the block's
  // sums already (the scalar loop's, at the buffer's ends) in place of the window's.
  std::string f =
      "MP_QUAD_FN void conv_dw_quads(const $global mp_u8* xc, int iyb, int ixb, "
      "int x_zero, int base, const int* wq, const int* sums, $global Dtype* y, "
      "const $global Dtype* res, const $global int* rq, int nc, int ch, int ox0, int oy0, "
      "int c_zero, int res_zero, int res_m, int res_s) {\n";
  for (int t = 0; t < rows; ++t) f += "  mp_i32x16 a" + num(t) + ";\n";
  f += "  if (sums) {\n";
  for (int t = 0; t < rows; ++t)
    f += "    a" + num(t) + " = MP_QUAD_LOAD(sums + " + num(16 * t) + ");\n";
  f += "  } else {\n";
  f += "  const mp_quad_keep keep = MP_QUAD_KEEP64(-ixb, " + num(d.width) + " - ixb);\n";
  f += "  const mp_i32x16 xz = MP_QUAD_WORD((int)((mp_u32)x_zero * 0x01010101u));\n";
  for (int ky = 0; ky < KH; ++ky)
    for (int c = 0; c < NQ; ++c)
      f += "  const mp_i32x16 w" + num(ky) + "_" + num(c) + " = MP_QUAD_WORD(wq[" +
           num(ky * NQ + c) + "]);\n";
  for (int t = 0; t < rows; ++t) f += "  a" + num(t) + " = MP_QUAD_WORD(base);\n";
  for (int r = 0; r < in_rows; ++r) {
    std::string uses;
    for (int t = 0; t < rows; ++t)
      for (int ky = 0; ky < KH; ++ky)
        if (t * d.stride_h + ky * d.dilation_h == r)
          for (int c = 0; c < NQ; ++c)
            uses += "      a" + num(t) + " = MP_DPBUSD16(a" + num(t) + ", q" + num(c) + ", w" +
                    num(ky) + "_" + num(c) + ");\n";
    if (uses.empty()) continue;
    f += "  {\n    const int iy = iyb + " + num(r) + ";\n";
    f += "    if (iy >= 0 && iy < " + num(d.height) + ") {\n";
    f += "      const $global mp_u8* xr = xc + iy * " + num(d.width) + " + ixb;\n";
    for (int c = 0; c < NQ; ++c)
      f += "      const mp_i32x16 q" + num(c) + " = MP_QUAD_SLIDE16(xr, keep, x_zero, " + num(S) +
           ", " + num(4 * c) + ");\n";
    f += uses + "    } else {\n";
    for (int c = 0; c < NQ; ++c) f += "      const mp_i32x16 q" + num(c) + " = xz;\n";
    f += uses + "    }\n  }\n";
  }
  f += "  }\n";
  const std::string I = vw.Type("int", 16);
  for (int t = 0; t < rows; ++t) f += "  const " + I + " acc" + num(t) + " = a" + num(t) + ";\n";
  f += DepthwiseVectorEpilogue(target, d, rows, 16, true, "", known);
  f += "}\n";
  w.Function(f);

  auto& k = DeclareDepthwiseKernel(w, d).VectorWidth(Scalar::kI32, 16);
  std::string b;
  b += DepthwiseVectorPrologue(d, rows, 16);
  b += "  const $global Wstore* wc = wt + ch * " + num(KH * KW) + ";\n";
  b += "  const int wzc = wz[ch];\n";
  b += "  int wa[" + num(KH * KW) + "];\n";
  b += "  for (int i = 0; i < " + num(KH * KW) + "; ++i) wa[i] = WLOAD(wc, i) - wzc;\n";
  std::string sum;
  for (int i = 0; i < KH * KW; ++i) sum += (i ? " + wa[" : "wa[") + num(i) + "]";
  // Each sum starts at the bias minus z_x·Σ(w − z_w) (the taps outside the input read z_x).
  b += "  const int base = " + std::string(d.bias ? "bias[ch]" : "0") + " - x_zero * (" + sum +
       ");\n";
  // The weight quads: bytes w(ky, 4c + j) − z_w, low first, 0 past the window.
  b += "  const int wq[" + num(KH * NQ) + "] = {";
  for (int ky = 0; ky < KH; ++ky)
    for (int c = 0; c < NQ; ++c) {
      std::string q;
      for (int j = 0; j < 4 && 4 * c + j < KW; ++j)
        q += std::string(j ? " | " : "") + "((mp_u32)(wa[" + num(ky * KW + 4 * c + j) +
             "] & 255) << " + num(8 * j) + ")";
      b += std::string(ky || c ? ", " : "") + "(int)(" + q + ")";
    }
  b += "};\n";
  const std::string tail = ", y, res, rq, nc, ch, ox0, oy0, c_zero, res_zero, res_m, res_s);\n";
  b += DepthwiseLoadsInsideBuffer(d, in_rows, kSlideBytes);
  b += "    conv_dw_quads((const $global mp_u8*)xc, iyb, ixb, x_zero, base, wq, 0" + tail;
  b += "  } else {\n";
  // The same sums tap by tap: taps outside the input read z_x, as the quads do.
  b += "    int accs[" + num(16 * rows) + "];\n";
  b += "    for (int t = 0; t < " + num(rows) + "; ++t)\n";
  b += "      for (int i = 0; i < 16; ++i) {\n        int s = base;\n";
  b += "        for (int ky = 0; ky < " + num(KH) + "; ++ky) {\n";
  b += "          const int iy = iyb + t * " + num(d.stride_h) + " + ky * " + num(d.dilation_h) +
       ";\n";
  b += "          for (int kx = 0; kx < " + num(KW) + "; ++kx) {\n";
  b += "            const int ix = ixb + i * " + num(S) + " + kx;\n";
  b += "            const int v = iy >= 0 && iy < " + num(d.height) + " && ix >= 0 && ix < " +
       num(d.width) + " ? (int)Dtype_LOAD(xc, iy * " + num(d.width) + " + ix) : x_zero;\n";
  b += "            s += v * wa[ky * " + num(KW) + " + kx];\n          }\n        }\n";
  b += "        accs[16 * t + i] = s;\n      }\n";
  b += "    conv_dw_quads((const $global mp_u8*)xc, iyb, ixb, x_zero, base, wq, accs" + tail;
  b += "  }\n";
  k.Body(b);
  return w.Source();
}

}  // namespace mpcaffe::libdnn
