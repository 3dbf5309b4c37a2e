// libdnn/conv_pointwise_source.cc — the pointwise (1×1, stride 1, no padding, one group) fp32
// forward kernel: vectors along the pixels of the NCHW planes, the output channels in
// registers. Its tile, its applicability and its program text.
#include <algorithm>
#include <functional>
#include <optional>
#include <string>

#include "codegen/vector_words.h"
#include "device/error.h"
#include "libdnn/conv.h"
#include "libdnn/conv_families.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn {

using conv_internal::DivUp;
using conv_internal::PointwiseQuadLoop;
using conv_internal::PointwiseTileLoop;
using conv_internal::PointwiseTileQuads;
using conv_internal::PointwiseZip;

// A pointwise convolution is, per image, C[O × HW] = W[O × C] · X[C × HW] on the NCHW planes
// themselves. The implicit-GEMM forward kernel keeps output channels in the vector lanes, so
// every pixel of its tile is a broadcast and every output value a scalar store into its
// channel's plane; with few input channels (MobileNet v2's 16-32 before a 6× expansion,
// SqueezeNet's squeeze layers) those stores and broadcasts outweigh the K products (figures:
// docs/BENCHMARKS.md). Here a work-item owns `oc` output channels × `px` vectors of `vx`
// neighbouring pixels: per input channel it loads px vectors of the plane (contiguous), oc
// weights (one packed row, contiguous), and does oc·px vector multiply-adds; the epilogue adds
// the bias, the residual and the ReLU per vector and stores whole vectors. The last block of a
// plane whose size is not a multiple of px·vx is shifted back to end at the plane's end (the
// same loads as every other block) and stores only its pixels past the previous block's.
//
// The row form (OpenCL) takes the same tile to convolutions of few input channels — a net's
// first layer, 3 colour channels under a 3×3 to 7×7 window, stride 1 or 2 — which the direct
// kernel runs with mostly empty channel steps and per-channel scalar stores (MobileNet v2's and
// SqueezeNet's conv1 at 3-4× ONNX Runtime's time): a work-item owns `oc` output channels × `vx`
// neighbouring output columns of one row; per input channel and window row it loads one vector
// per window column (the even lanes of 2·vx at stride 2), columns outside the input masked to 0,
// the loads checked against the buffer's ends as in the depthwise vector kernel. int8q sums
// (w − z_w)(x − z_x) in float there, or in int32 in pairs of window columns (RowPairsLoop).
namespace {

bool RowForm(const ConvDesc& d) { return conv_internal::PointwiseRowForm(d); }

bool RowFormFits(const ConvDesc& d, const Convolution::PointwiseTile& t) {
  // int8q at stride 2 also takes 16 lanes: the even bytes of 32 (Convolution::RowFormKernel).
  // fp32 the same: the even lanes of two 16-float loads (VectorWords::LoadEven).
  const bool even_bytes = d.stride_w == 2 && t.vx == 16;
  // Pairs of window columns: int8q in 8 lanes (16 neighbouring bytes at stride 2, 9 at 1).
  if (t.kx == 2 && (d.type != DataType::kInt8Q || t.vx != 8)) return false;
  return d.groups == 1 && d.channels <= Convolution::kRowFormMaxChannels && d.dilation_h == 1 &&
         d.dilation_w == 1 && d.stride_w <= 2 && t.px == 1 &&
         (t.vx * d.stride_w <= 16 || even_bytes) && d.out_w() >= t.vx;
}

/// The pointwise kernel's epilogue, the same for both forms: per output channel of the block
/// (past O only in the last block of channels) the bias, the residual and the ReLU on its `px`
/// accumulators `a<o>_<p>` (Vf), then whole-vector stores, or, in a block shifted back by
/// `skip` columns, only the columns past the previous block's. The text must define `base` (the
/// block's first output element of channel 0) and `skip`; `plane` is one channel's outputs.
std::string PointwiseEpilogue(const ConvDesc& d, const Convolution::PointwiseTile& t,
                              long plane) {
  auto num = [](long v) { return std::to_string(v); };
  const int O = d.out_channels;
  const long block = long(t.px) * t.vx;
  std::string b;
  for (int o = 0; o < t.oc; ++o) {
    const std::string on = num(o);
    b += "  {\n    const int oc = ob * " + num(t.oc) + " + " + on + ";\n";
    if (O % t.oc) b += "    if (oc < " + num(O) + ") {\n";
    b += "    $global float* yo = y + base + (long)oc * " + num(plane) + ";\n";
    if (d.residual)
      b += "    const $global float* ro = res + base + (long)oc * " + num(plane) + ";\n";
    if (d.bias) b += "    const Vf bo = (Vf)(bias[oc]);\n";
    for (int p = 0; p < t.px; ++p) {
      const std::string a = "a" + on + "_" + num(p), at = num(p * t.vx);
      if (d.bias) b += "    " + a + " = " + a + " + bo;\n";
      if (d.residual) b += "    " + a + " = " + a + " + Vf_LOAD(ro + " + at + ");\n";
      if (d.relu) b += "    " + a + " = Vf_MAX(" + a + ", (Vf)(0.0f));\n";
    }
    b += "    if (skip == 0) {\n";
    for (int p = 0; p < t.px; ++p)
      b += "      Vf_STORE(a" + on + "_" + num(p) + ", yo + " + num(p * t.vx) + ");\n";
    b += "    } else {\n      float part[" + num(block) + "];\n";
    for (int p = 0; p < t.px; ++p)
      b += "      Vf_STORE(a" + on + "_" + num(p) + ", part + " + num(p * t.vx) + ");\n";
    b += "      for (int j = skip; j < " + num(block) + "; ++j) yo[j] = part[j];\n    }\n";
    if (O % t.oc) b += "    }\n";
    b += "  }\n";
  }
  return b;
}

/// The forward kernel of either form, with `body`.
/// int8q: the packed weights are ints (the plane form's pairs, the row form's with `words`) or
/// floats (the row form's w − z_w); the plane form also reads `wsum`, Σ(w − z_w) per channel;
/// both read the requantization and zero points (the launch in conv.cc sets the arguments in
/// this order).
void DeclarePointwiseKernel(KernelWriter& w, const ConvDesc& d, const std::string& body,
                            bool words = false) {
  const bool q = d.type == DataType::kInt8Q, plane = Convolution::IsPointwise(d);
  auto& k = w.Kernel(Convolution::PointwiseKernelName(d))
                .In(q ? "Dtype" : "float", "x")
                .In(q && (plane || words) ? "int" : "float", "wp");
  if (q && plane) k.In("int", "wsum");
  if (words && !plane) k.VectorWidth(Scalar::kI32, 8);  // the row form's pairs: int8 sums
  k.In(q ? "Btype" : "float", "bias");
  if (q) k.In("int", "rq");
  k.In(q ? "Dtype" : "float", "res").Out(q ? "Dtype" : "float", "y");
  if (q)
    for (const char* name : {"x_zero", "c_zero", "res_zero", "res_m", "res_s"}) k.Value("int", name);
  k.Body(body);
}

/// The int8q epilogue of either form: per output channel of the block the accumulators
/// `acc(o, p)` (int<vx> expressions) plus `corr` (the text's per-channel int: bias and zero-point
/// terms, in terms of `oc`) are requantized with the channel's multiplier like the depthwise
/// vector kernel's (the same integers as the reference), the residual requantized and added,
/// clamped (at c_zero under a ReLU) and stored as whole vectors, or past `skip` in a shifted
/// block. The text must define `base` and `skip`.
template <typename Acc>
std::string PointwiseInt8Epilogue(const KernelTarget& target, const ConvDesc& d,
                                  const Convolution::PointwiseTile& t, long plane,
                                  const std::string& corr, RequantKnown known,
                                  Acc acc) {
  const VectorWords v(target);
  auto num = [](long v) { return std::to_string(v); };
  const int O = d.out_channels;
  const long block = long(t.px) * t.vx;
  const std::string I = v.Type("int", t.vx), U8 = v.Type("uchar", t.vx);
  std::string b;
  for (int o = 0; o < t.oc; ++o) {
    b += "  {\n    const int oc = ob * " + num(t.oc) + " + " + num(o) + ";\n";
    if (O % t.oc) b += "    if (oc < " + num(O) + ") {\n";
    b += "    $global Dtype* yo = y + base + (long)oc * " + num(plane) + ";\n";
    if (d.residual)
      b += "    const $global Dtype* ro = res + base + (long)oc * " + num(plane) + ";\n";
    b += "    const int corr = " + corr + ";\n";
    b += "    const int rqm = rq[2 * oc], rqs = rq[2 * oc + 1];\n";
    for (int p = 0; p < t.px; ++p) {
      const std::string at = num(p * t.vx);
      b += "    " + U8 + " q" + num(p) + ";\n";
      std::optional<VectorResidual> res;
      if (d.residual)
        res = conv_internal::ResidualOf(target, v.Convert(I, v.Load(t.vx, "ro + " + at)), known);
      b += "    {\n";
      b += v.RequantClamp(t.vx, "r", acc(o, p) + " + corr", "rqm", "rqs", "c_zero",
                          res ? &*res : nullptr, d.relu ? "c_zero" : "Dtype_QMIN", "Dtype_QMAX",
                          6, "", known.high, known.pre_shift);
      b += "      q" + num(p) + " = " + v.Convert(U8, "r") + ";\n    }\n";
    }
    // Whole vectors, or in a shifted block the columns past `skip` (staged in private memory:
    // PoCL made the staging of every block scalar byte moves, 2026-11-25).
    b += "    if (skip == 0) {\n";
    for (int p = 0; p < t.px; ++p)
      b += "      MP_STORE_UCHAR" + num(t.vx) + "(q" + num(p) + ", yo + " + num(p * t.vx) + ");\n";
    b += "    } else {\n      uchar part[" + num(block) + "];\n";
    for (int p = 0; p < t.px; ++p)
      b += "      " + v.Store(t.vx, "q" + num(p), "part + " + num(p * t.vx)) + ";\n";
    b += "      for (int j = skip; j < " + num(block) + "; ++j) yo[j] = part[j];\n    }\n";
    if (O % t.oc) b += "    }\n";
    b += "  }\n";
  }
  return b;
}

/// The int8q kernels' types: Dtype (uchar), the weight storage, the requantization, Btype (the
/// int32 bias).
void DeclareInt8Types(KernelWriter& w, const ConvDesc& d) {
  w.AddType("Dtype", d.type);
  w.UseRequant(d.type);
  w.UseHelper(KernelHelper::kByteVectorStore);
  conv_internal::DeclareWeightStorage(w, d);
  w.Define("Btype", TraitsOf(d.type).acc_alias());
}

/// The int8q plane form (OpenCL): per pair of input channels, 8 neighbouring pixels of both
/// planes zipped into 16-bit pairs (MP_ZIP16: x, not x − z_x) and multiplied by the packed pair
/// of weights w − z_w of each output channel (MP_MADD16: one vpdpwssd on Intel's runtime with
/// AVX-512 VNNI, vpmaddwd + vpaddd with AVX2), summed in int32 lanes of 8 pixels; the epilogue
/// subtracts z_x·Σ(w − z_w), adds the bias and requantizes like the depthwise vector kernel
/// (the same integers as the reference: every sum is exact in int32). Weights are packed as
/// words (w[2c] − z_w) & 0xffff | (w[2c+1] − z_w) << 16 per block of oc channels (zero past
/// the last channel and, for odd C, in the last pair's high half). With PointwiseTile::k 4
/// the K loop is PointwiseQuadLoop's, the rest the same.
std::string PointwiseInt8Source(const KernelTarget& target, const ConvDesc& d,
                                const Convolution::PointwiseTile& t,
                                RequantKnown known) {
  auto num = [](long v) { return std::to_string(v); };
  const long hw = long(d.height) * d.width, block = long(t.px) * t.vx;
  // Byte tiles (k 64) take the quads' words, 16 to a tile row: PointwiseTileQuads per channel.
  const bool tiles = t.k == 64, quads = t.k == 4 || tiles;
  const int C = d.channels, O = d.out_channels, groups = int(block / 8);
  const int pairs = tiles ? PointwiseTileQuads(C) : DivUp(C, t.k);
  const int ob_count = DivUp(O, t.oc);
  KernelWriter w(target, "conv_pointwise");
  DeclareInt8Types(w, d);
  w.UseHelper(quads ? KernelHelper::kByteQuadProduct16 : KernelHelper::kPairProduct16);
  if (tiles) w.UseHelper(KernelHelper::kByteTileProduct);
  // A word per k input channels (`pairs` words per output channel): 16-bit halves (k 2) or
  // signed bytes (k 4, w − z_w within [−128, 127]: Convolution::weights_fit_bytes_), low first.
  const std::string bits = quads ? "8" : "16", mask = quads ? "0xff" : "0xffff";
  w.Kernel("conv_pw_pack_" + std::string(Name(d.type)))
      .In("Wstore", "wsrc")
      .In("int", "wz")
      .Out("int", "wp")
      .Out("int", "wsum")
      .Body("  $loop(i, " + num(long(ob_count) * pairs * t.oc) + ") {\n" +
            // Words wp[ob][c / k][o % oc]; tiles wp[ob][c / 64][o % 16][c / 4 % 16] (a tile's
            // rows the channels, 16 quads each).
            (tiles ? "    const int o = i / " + num(long(pairs) * 16) + " * 16 + i / 16 % 16;\n" +
                         "    const int c = (i % " + num(long(pairs) * 16) + " / 256 * 16 + i % 16) * 4;\n"
                   : "    const int o = i / " + num(long(pairs) * t.oc) + " * " + num(t.oc) +
                         " + i % " + num(t.oc) + ";\n    const int c = i / " + num(t.oc) + " % " +
                         num(pairs) + " * " + num(t.k) + ";\n") +
            "    uint word = 0u;\n    if (o < " + num(O) + ") {\n" +
            "      for (int j = 0; j < " + num(quads ? 4 : t.k) + " && c + j < " + num(C) + "; ++j)\n" +
            "        word |= (uint)((WLOAD(wsrc, o * " + num(C) + " + c + j) - wz[o]) & " + mask +
            ") << (" + bits + " * j);\n" +
            "      if (c == 0) {\n        int s = 0;\n        for (int k = 0; k < " + num(C) +
            "; ++k) s += WLOAD(wsrc, o * " + num(C) + " + k) - wz[o];\n" +
            "        wsum[o] = s;\n      }\n    }\n" +
            "    wp[i] = (int)word;\n  }\n");
  std::string b;
  // Work-items over (pixel block, group of ob blocks of oc output channels, image).
  const bool zipped = t.ob > 1;
  b += std::string("  const int blk = $global_id(0), ") + (zipped ? "obg" : "ob") +
       " = $global_id(1), n = $global_id(2);\n";
  b += "  if (blk >= " + num(DivUp(int(hw), int(block))) + " || " + (zipped ? "obg" : "ob") +
       " >= " + num(DivUp(ob_count, t.ob)) + " || n >= " + num(d.batch) + ") return;\n";
  b += "  const int p0 = min(blk * " + num(block) + ", " + num(hw - block) + ");\n";
  b += "  const int skip = blk * " + num(block) + " - p0;\n";
  b += "  const $global Dtype* xn = x + (long)n * " + num(long(C) * hw) + " + p0;\n";
  if (!zipped) b += "  const $global int* wb = wp + ob * " + num(long(pairs) * t.oc) + ";\n";
  // Where OpenCL's compiler targets AVX-512 BW (MP_MADD32), two groups of 8 pixels at a time in
  // one 512-bit vpmaddwd: per 256 products 8 multiply-adds, 8 adds and 8 weight broadcasts
  // instead of twice as many 256-bit ones (one core of the Zen 4 here, the loop alone: 98
  // against 71 G products/s, fp32 FMAs 58). The sums are the same integers; the accumulator
  // halves are the 8-lane ones (`a<o>_<g>`) the epilogue reads.
  const bool wide = groups % 2 == 0;
  // With ob > 1 the pairs of every input channel are zipped once into private memory (`xz`,
  // step-major) and the blocks of oc output channels taken in turn, each with its epilogue.
  // Convolution passes the ob PointwiseZipBlocks chose: the groups even, enough of them.
  const std::string ob_loop = "  for (int ob = obg * " + num(t.ob) + "; ob < min(obg * " +
                              num(t.ob) + " + " + num(t.ob) + ", " + num(ob_count) +
                              "); ++ob) {\n  const $global int* wb = wp + ob * " +
                              num(long(pairs) * t.oc) + ";\n";
  auto loops = [&](bool zmm) {
    std::string s;
    const int n_acc = zmm ? groups / 2 : groups;
    const std::string acc = zmm ? "z" : "a", type = zmm ? "int16" : "int8";
    const std::string vtype = zmm ? "mp_short32" : "mp_short16";
    auto zip = [&](int g, const std::string& x1) {
      return zmm ? "MP_ZIP32(xc + " + num(16 * g) + ", " + x1 + " + " + num(16 * g) + ")"
                 : "MP_ZIP16(xc + " + num(8 * g) + ", " + x1 + " + " + num(8 * g) + ")";
    };
    // Per step: `v(g)` the pairs of pixel group g, `x1` the second plane (the last channel
    // alone: its pair's high weights are 0).
    auto over_pairs = [&](const std::function<std::string(const std::string&, const std::string&)>&
                              step) {
      std::string r;
      if (C / 2 > 0) {
        r += "  for (int cp = 0; cp < " + num(C / 2) + "; ++cp) {\n";
        r += "    const $global Dtype* xc = xn + cp * " + num(2 * hw) + ";\n";
        r += step("cp", "xc + " + num(hw)) + "  }\n";
      }
      if (C % 2) {
        r += "  {\n    const $global Dtype* xc = xn + " + num((C - 1) * hw) + ";\n";
        r += step(num(C / 2), "xc") + "  }\n";
      }
      return r;
    };
    auto products = [&](const std::string& cp, const std::function<std::string(int)>& v) {
      std::string r = "    const $global int* wc = wb + " + cp + " * " + num(t.oc) + ";\n";
      for (int g = 0; g < n_acc; ++g)
        r += "    const " + vtype + " v" + num(g) + " = " + v(g) + ";\n";
      for (int o = 0; o < t.oc; ++o) {
        r += zmm ? "    const mp_short32 w" + num(o) + " = MP_PAIR32_WORD(wc[" + num(o) + "]);\n"
                 : "    const mp_short16 w" + num(o) + " = MP_PAIR16_WORD(wc[" + num(o) + "]);\n";
        for (int g = 0; g < n_acc; ++g)
          r += "    " + acc + num(o) + "_" + num(g) + " += " + (zmm ? "MP_MADD32" : "MP_MADD16") +
               "(v" + num(g) + ", w" + num(o) + ");\n";
      }
      return r;
    };
    if (zipped) {
      s += "  " + vtype + " xz[" + num(long(pairs) * n_acc) + "];\n";
      s += over_pairs([&](const std::string& cp, const std::string& x1) {
        std::string r;
        for (int g = 0; g < n_acc; ++g)
          r += "    xz[" + cp + " * " + num(n_acc) + " + " + num(g) + "] = " + zip(g, x1) + ";\n";
        return r;
      });
      s += ob_loop;
    }
    for (int o = 0; o < t.oc; ++o)
      for (int g = 0; g < n_acc; ++g)
        s += "  " + type + " " + acc + num(o) + "_" + num(g) + " = (" + type + ")(0);\n";
    if (zipped) {
      s += "  for (int cp = 0; cp < " + num(pairs) + "; ++cp) {\n";
      s += products("cp", [&](int g) { return "xz[cp * " + num(n_acc) + " + " + num(g) + "]"; });
      s += "  }\n";
    } else {
      s += over_pairs([&](const std::string& cp, const std::string& x1) {
        return products(cp, [&](int g) { return zip(g, x1); });
      });
    }
    if (zmm)
      for (int o = 0; o < t.oc; ++o)
        for (int g = 0; g < n_acc; ++g)
          s += "  const int8 a" + num(o) + "_" + num(2 * g) + " = z" + num(o) + "_" + num(g) +
               ".lo, a" + num(o) + "_" + num(2 * g + 1) + " = z" + num(o) + "_" + num(g) +
               ".hi;\n";
    return s;
  };
  if (tiles) {
    w.Function(PointwiseTileLoop(d, t));
    b += PointwiseZip(d, t) + ob_loop;
    b += "  mp_i32x16 acc[" + num(t.oc * t.px) + "];\n  conv_pw_tiles(xq, wb, acc);\n";
  } else if (quads) {
    w.Function(PointwiseQuadLoop(d, t));
    if (zipped) b += PointwiseZip(d, t) + ob_loop;
    b += "  mp_i32x16 acc[" + num(t.oc * t.px) + "];\n  conv_pw_quads(" +
         (zipped ? "xq" : "xn") + ", wb, acc);\n";
  } else if (wide) {
    b += "#if defined(MP_MADD32)\n" + loops(true) + "#else\n" + loops(false) + "#endif\n";
  } else {
    b += loops(false);
  }
  b += "  const long base = (long)n * " + num(long(O) * hw) + " + p0;\n";
  const std::string corr = std::string(d.bias ? "bias[oc] " : "") + "- x_zero * wsum[oc]";
  const VectorWords v(target);
  b += PointwiseInt8Epilogue(target, d, t, hw, corr, known, [&](int o, int p) {
    if (quads) return "acc[" + num(o * t.px + p) + "]";
    const std::string a = "a" + num(o) + "_" + num(p * t.vx / 8);
    if (t.vx == 8) return a;
    return v.Of(v.Type("int", 16), a + ", a" + num(o) + "_" + num(p * 2 + 1));
  });
  if (zipped) b += "  }\n";
  DeclarePointwiseKernel(w, d, b);
  return w.Source();
}

/// int8q's row form in pairs of window columns (PointwiseTile::kx 2, 8 lanes): lane j of pair p
/// holds (x − z_x) of input columns ixb + s·j + 2p and + 1, which at stride s 2 are the 16
/// neighbouring bytes from ixb + 2p (one load, widened) and at stride 1 the 8 overlapping
/// pairs of 9 (one load, a byte shuffle), columns outside the input 0; each
/// output channel multiplies them by its packed word (w[2p] − z_w, w[2p + 1] − z_w, the second
/// 0 past the window) in one MP_MADD16 (vpmaddwd: 16 products where the float form's FMA does
/// 8), summed exactly in int32 for any window. The text must define the row form's prologue.
std::string RowPairsLoop(const KernelTarget& target, const ConvDesc& d,
                         const Convolution::PointwiseTile& t) {
  auto num = [](long v) { return std::to_string(v); };
  const VectorWords vw(target);
  const int kp = DivUp(d.kernel_w, 2);
  const std::string S = "mp_short16";
  std::string lanes, b;
  const int sw = d.stride_w;  // element e's column from ixb + 2p: e at stride 2, (e + 1) / 2 at 1
  auto col = [&](int e) { return sw == 2 ? e : (e + 1) / 2; };
  for (int e = 0; e < 16; ++e) lanes += (e ? ", " : "") + num(col(e));
  b += "  const $global int* wb = wp + ob * " + num(long(d.channels) * d.kernel_h * kp * t.oc) +
       ";\n";
  b += "  const " + S + " pc = " + vw.Of(S, lanes) + " + " + vw.Splat(S, "(short)ixb") + ";\n";
  b += "  const " + S + " xz = " + vw.Splat(S, "(short)x_zero") + ";\n";
  for (int p = 0; p < kp; ++p)  // the elements whose input column lies inside the row
    b += "  const " + S + " pm" + num(p) + " = pc >= " + vw.Splat(S, "(short)" + num(-2 * p)) +
         " && pc < " + vw.Splat(S, "(short)" + num(d.width - 2 * p)) + ";\n";
  for (int o = 0; o < t.oc; ++o) b += "  int8 a" + num(o) + "_0 = (int8)(0);\n";
  b += "  for (int ic = 0; ic < " + num(d.channels) + "; ++ic) {\n";
  b += "    for (int ky = 0; ky < " + num(d.kernel_h) + "; ++ky) {\n";
  b += "      const int iy = iyb + ky;\n";
  b += "      if (iy < 0 || iy >= " + num(d.height) + ") continue;\n";
  b += "      const $global Dtype* xr = x + ((long)n * " + num(d.channels) + " + ic) * " +
       num(long(d.height) * d.width) + " + iy * " + num(d.width) + " + ixb;\n";
  b += "      const $global int* wk = wb + (ic * " + num(d.kernel_h) + " + ky) * " +
       num(long(kp) * t.oc) + ";\n";
  auto pairs = [&](bool fast) {
    std::string r;
    for (int p = 0; p < kp; ++p) {
      std::string v;
      if (fast) {  // columns outside the row masked to 0
        v = vw.Select(vw.Splat(S, "(short)0"),
                      std::string(sw == 2 ? "MP_SHORT16_FROM" : "MP_SHORT16_NEIGHBOURS") +
                          "(xr + " + num(2 * p) + ") - xz",
                      "pm" + num(p));
      } else {  // near the buffer's ends: element by element, inside the row only
        for (int e = 0; e < 16; ++e)
          v += std::string(e ? ", " : "") + vw.Lane("pm" + num(p), e) + " ? (short)(xr[" +
               num(2 * p + col(e)) + "] - x_zero) : (short)0";
        v = vw.Of(S, v);
      }
      r += "        const " + S + " v" + num(p) + " = " + v + ";\n";
      for (int o = 0; o < t.oc; ++o)
        r += "        a" + num(o) + "_0 += MP_MADD16(v" + num(p) + ", MP_PAIR16_WORD(wk[" +
             num(long(p) * t.oc + o) + "]));\n";
    }
    return r;
  };
  b += "      if (fast) {\n" + pairs(true) + "      } else {\n" + pairs(false) + "      }\n";
  return b + "    }\n  }\n";
}

}  // namespace

std::string Convolution::PointwiseKernelName(const ConvDesc& d) {
  return std::string("conv_pw_") + Name(d.type);
}

bool Convolution::PointwiseApplies(const ConvDesc& d, const PointwiseTile& t) {
  if (IsStridedPointwise(d)) return PointwiseApplies(SubsampledDesc(d), t);
  if (t.oc < 1 || t.oc > 16 || t.px < 1 || t.px > 8 || (t.vx != 4 && t.vx != 8 && t.vx != 16) ||
      (t.k != 2 && t.k != 4 && t.k != 64) || t.ob < 1 || t.ob > 64)
    return false;
  const long hw = long(d.height) * d.width;
  // Blocks of output channels over one zip: int8q's plane form (4 bytes per pixel and step of
  // k channels) whose column fits kMaxZippedColumnBytes.
  const long words = t.k == 64 ? PointwiseTileQuads(d.channels) : DivUp(d.channels, t.k);
  if (t.ob > 1 && (d.type != DataType::kInt8Q || RowForm(d) ||
                   words * t.px * t.vx * 4 > kMaxZippedColumnBytes))
    return false;
  // Byte tiles: over one zip, 16 output channels (a tile's rows) by one or two vectors of 16
  // pixels (a tile's columns each).
  if (t.k == 64 && (t.ob < 2 || t.oc != 16 || t.vx != 16 || t.px > 2)) return false;
  // Byte quads: int8q's plane form, vectors of 16 pixels.
  if ((t.k == 4 || t.k == 64) && (d.type != DataType::kInt8Q || RowForm(d) || t.vx != 16))
    return false;
  if (t.pf != 0 && d.type != DataType::kFloat32) return false;  // fp32's plane form only
  // int8q: the plane form, pair products over 8-pixel groups (vx 8 or 16, at most 32 pixels);
  // the row form sums (w − z_w)(x − z_x) in float, exact while K·255² < 2^24 (K ≤ 258).
  if (d.type == DataType::kInt8Q) {
    if (RowForm(d))
      return RowFormFits(d, t) && (t.kx == 2 || long(d.channels) * d.kernel_h * d.kernel_w <= 258);
    if (t.kx != 1) return false;
    return t.vx >= 8 && t.px * t.vx <= 32 && hw >= long(t.px) * t.vx;
  }
  if (d.type != DataType::kFloat32 || t.kx != 1) return false;
  if (RowForm(d)) return t.pf == 0 && RowFormFits(d, t);
  return hw >= long(t.px) * t.vx;
}

Convolution::PointwiseTile Convolution::DefaultPointwiseTile(const ConvDesc& d,
                                                             const TargetProfile& profile) {
  PointwiseTile t = DefaultRowFor(PointwiseDefaults(), "conv_pw", profile, d).config;
  // The subsampled input of a strided layer is the plane the kernel reads.
  const ConvDesc& plane = IsStridedPointwise(d) ? SubsampledDesc(d) : d;
  t.pf = DefaultRowFor(PointwisePrefetchDefaults(), "conv_pw", profile, plane).config;
  return t;
}

const ConfigSchema<Convolution::PointwiseTile>& Convolution::PointwiseTile::Schema() {
  // The ranges PointwiseApplies admits at all (each description narrows them further).
  static const ConfigSchema<PointwiseTile> schema(
      "", {{"oc", &PointwiseTile::oc, ValueRange(1, 16)},
           {"px", &PointwiseTile::px, ValueRange(1, 8)},
           {"v", &PointwiseTile::vx, {4, 8, 16}},
           {"k", &PointwiseTile::k, {2, 4, 64}, 2, /*always_printed=*/false},
           {"ob", &PointwiseTile::ob, ValueRange(1, 64), 1, /*always_printed=*/false},
           {"kx", &PointwiseTile::kx, {1, 2}, 1, /*always_printed=*/false},
           {"pf", &PointwiseTile::pf, {0, 2, 4, 8, 16}, 0, /*always_printed=*/false}});
  return schema;
}

std::string Convolution::PointwiseTile::ToString() const { return Schema().Print(*this); }

void Convolution::RowFormKernel(KernelWriter& w, const ConvDesc& d, const PointwiseTile& t,
                                RequantKnown known) {
  auto num = [](long v) { return std::to_string(v); };
  const int C = d.channels, O = d.out_channels, H = d.height, W = d.width;
  // The pairs of window columns load 16 bytes at either stride.
  const int oh = d.out_h(), ow = d.out_w(), sw = d.stride_w, vx = t.vx;
  const int load = t.kx == 2 ? 16 : vx * sw;
  const int ob_count = DivUp(O, t.oc);
  const long K = long(C) * d.kernel_h * d.kernel_w, hw = long(H) * W;
  const std::string n = num(vx), F = "Vf";  // AddVector's float vector of vx lanes
  const bool q = d.type == DataType::kInt8Q;
  const std::string X = q ? "Dtype" : "float";  // the input's element
  const VectorWords vw(w.target());
  std::string b;
  b += "  const int blk = $global_id(0), oy = $global_id(1), nb = $global_id(2);\n";
  b += "  if (blk >= " + num(DivUp(ow, vx)) + " || oy >= " + num(oh) + " || nb >= " +
       num(long(d.batch) * ob_count) + ") return;\n";
  b += "  const int n = nb / " + num(ob_count) + ", ob = nb % " + num(ob_count) + ";\n";
  // The row's last block ends at its end; `skip` of its columns belong to the one before.
  b += "  const int ox0 = min(blk * " + n + ", " + num(ow - vx) + ");\n";
  b += "  const int skip = blk * " + n + " - ox0;\n";
  b += "  const int iyb = oy * " + num(d.stride_h) + " - " + num(d.pad_h) + ";\n";
  b += "  const int ixb = ox0 * " + num(sw) + " - " + num(d.pad_w) + ";\n";
  if (t.kx == 1) b += conv_internal::VectorColumnLanes(d, vx);  // the float columns' masks
  // Whether every load of the work-item stays inside the input buffer (the first and last
  // image's edge rows may not: their columns are gathered lane by lane).
  b += "  const long e0 = (long)n * " + num(C * hw) + " + (long)max(iyb, 0) * " + num(W) +
       " + ixb;\n";
  b += "  const long e1 = (long)n * " + num(C * hw) + " + " + num((C - 1) * hw) +
       " + (long)min(iyb + " + num(d.kernel_h - 1) + ", " + num(H - 1) + ") * " + num(W) +
       " + ixb + " + num(d.kernel_w - 1 + load) + ";\n";
  b += "  const int fast = e0 >= 0 && e1 <= " + num(long(d.batch) * C * hw) + "L;\n";
  if (t.kx == 2) {
    b += RowPairsLoop(w.target(), d, t);
    b += "  const long base = (long)n * " + num(long(O) * oh * ow) + " + oy * " + num(ow) +
         " + ox0;\n";
    b += PointwiseInt8Epilogue(w.target(), d, t, long(oh) * ow, d.bias ? "bias[oc]" : "0", known,
                               [&](int o, int) { return "a" + num(o) + "_0"; });
    DeclarePointwiseKernel(w, d, b, /*words=*/true);
    return;
  }
  b += "  const $global float* wb = wp + ob * " + num(K * t.oc) + ";\n";
  if (q) b += "  const " + F + " xz = " + vw.Splat(F, "(float)x_zero") + ";\n";
  for (int o = 0; o < t.oc; ++o) b += "  " + F + " a" + num(o) + "_0 = (" + F + ")(0.0f);\n";
  b += "  for (int ic = 0; ic < " + num(C) + "; ++ic) {\n";
  b += "    for (int ky = 0; ky < " + num(d.kernel_h) + "; ++ky) {\n";
  b += "      const int iy = iyb + ky;\n";
  b += "      if (iy < 0 || iy >= " + num(H) + ") continue;\n";
  b += "      const $global " + X + "* xr = x + ((long)n * " + num(C) + " + ic) * " + num(hw) +
       " + iy * " + num(W) + ";\n";
  b += "      const $global float* wk = wb + (ic * " + num(d.kernel_h) + " + ky) * " +
       num(long(d.kernel_w) * t.oc) + ";\n";
  // The window row, as vector loads (`fast`) or gathered lane by lane: two copies of the
  // unrolled columns, so that neither pays for the other's loads.
  auto columns = [&](bool fast) {
    std::string r;
    for (int kx = 0; kx < d.kernel_w; ++kx) {
      const std::string c = num(kx);
      std::string v;
      if (fast && load == 32 && !q) {
        // fp32, 16 lanes at stride 2: the even lanes of 32 floats.
        v = vw.Select(vw.Splat(F, "0.0f"), vw.LoadEven("float", 16, "xr + ixb + " + c), "cm" + c);
      } else if (fast && load == 32) {
        // int8q, 16 lanes at stride 2: the low bytes of 16 unaligned 16-bit words are the even
        // columns of 32 — one move and a mask, not two 16-byte loads and their even lanes.
        const std::string U = vw.Type("ushort", 16);
        v = vw.Convert(vw.Type("float", 16),
                       "(MP_LOAD_USHORT16(xr + ixb + " + c + ") & " + vw.Splat(U, "0xff") + ")");
        v = "(" + v + " - xz)";
        v = vw.Select(vw.Splat(F, "0.0f"), v, "cm" + c);
      } else if (fast) {
        v = vw.Load(load, "xr + ixb + " + c);
        if (q) v = vw.Convert(vw.Type("float", load), v);
        if (sw == 2) v = vw.Even(v);
        if (q) v = "(" + v + " - xz)";
        v = vw.Select(vw.Splat(F, "0.0f"), v, "cm" + c);
      } else {
        std::string lanes;
        for (int j = 0; j < vx; ++j) {
          const std::string ix = vw.Lane("ix" + c, j);
          lanes += std::string(j ? ", " : "") + vw.Lane("cm" + c, j) + " ? " +
                   (q ? "(float)xr[" + ix + "] - (float)x_zero" : "xr[" + ix + "]") + " : 0.0f";
        }
        v = vw.Of(F, lanes);
      }
      r += "        const " + F + " v" + c + " = " + v + ";\n";
      for (int o = 0; o < t.oc; ++o)
        r += "        a" + num(o) + "_0 = $fma((" + F + ")(wk[" + num(long(kx) * t.oc + o) +
             "]), v" + c + ", a" + num(o) + "_0);\n";
    }
    return r;
  };
  b += "      if (fast) {\n" + columns(true) + "      } else {\n" + columns(false) + "      }\n";
  b += "    }\n  }\n";
  b += "  const long base = (long)n * " + num(long(O) * oh * ow) + " + oy * " + num(ow) +
       " + ox0;\n";
  if (q)  // the float sums are integers below 2^24 (RowFormFits): exact
    b += PointwiseInt8Epilogue(w.target(), d, t, long(oh) * ow, d.bias ? "bias[oc]" : "0", known,
                               [&](int o, int) { return vw.Convert(vw.Type("int", vx), "a" + num(o) + "_0"); });
  else
    b += PointwiseEpilogue(d, t, long(oh) * ow);
  DeclarePointwiseKernel(w, d, b);
}

std::string Convolution::PointwiseSource(const KernelTarget& target, const ConvDesc& d,
                                         const PointwiseTile& t, RequantKnown known) {
  // The same text as the stride-1 convolution over the subsampled planes (Forward subsamples).
  if (IsStridedPointwise(d)) return PointwiseSource(target, SubsampledDesc(d), t, known);
  if (!PointwiseApplies(d, t) || (RowForm(d) && !target.vector_builtins))
    throw Error("convolution " + d.ToString() + ": no pointwise kernel with tile " +
                t.ToString() + " (fp32 1×1 unpadded one-group convolutions, output planes of "
                "at least px·vx pixels, oc in [1, 16], px in [1, 8], vx 4, 8 or 16; on OpenCL "
                "also one-group convolutions of at most " +
                std::to_string(kRowFormMaxChannels) +
                " input channels, no dilation, stride_w ≤ 2, px 1, vx · stride_w ≤ 16, vx ≤ "
                "output width)");
  const bool q = d.type == DataType::kInt8Q;
  if (q && !target.vector_builtins)
    throw Error("convolution " + d.ToString() +
                ": the int8q pointwise kernel is OpenCL text (OpenCL vector types)");
  if (q && !RowForm(d)) return PointwiseInt8Source(target, d, t, known);
  auto num = [](long v) { return std::to_string(v); };
  const long hw = long(d.height) * d.width, block = long(t.px) * t.vx;
  const int C = d.channels, O = d.out_channels;
  const long K = long(C) * d.kernel_h * d.kernel_w;  // weights per output channel
  KernelWriter w(target, "conv_pointwise");
  w.AddVector("Vf", Scalar::kF32, t.vx, /*with_max=*/true);
  if (q) DeclareInt8Types(w, d);
  // The weights as the kernel reads them: per block of oc output channels, per input channel
  // and window position, the block's oc weights (zero past the last output channel); int8q's
  // row form w − z_w as floats.
  // With kx 2 (pairs of window columns) a word per pair and output channel:
  // (w[kx] − z_w) & 0xffff | (w[kx + 1] − z_w) << 16, the high half 0 past the window.
  auto& pack = w.Kernel("conv_pw_pack_" + std::string(Name(d.type)));
  if (q)
    pack.In("Wstore", "wsrc").In("int", "wz");
  else
    pack.In("float", "wsrc");
  if (t.kx == 2) {
    w.UseHelper(KernelHelper::kPairProduct16);
    const int kp = DivUp(d.kernel_w, 2);
    const long KP = long(C) * d.kernel_h * kp;  // words per output channel
    pack.Out("int", "wp").Body(
        "  $loop(i, " + num(long(DivUp(O, t.oc)) * KP * t.oc) + ") {\n    const int o = i / " +
        num(KP * t.oc) + " * " + num(t.oc) + " + i % " + num(t.oc) + ";\n    const int r = i / " +
        num(t.oc) + " % " + num(KP) + ", kx = r % " + num(kp) + " * 2;\n" +
        "    const int c = r / " + num(kp) + " * " + num(d.kernel_w) + " + kx;\n" +
        "    uint word = 0u;\n    if (o < " + num(O) + ") {\n" +
        "      word = (uint)((WLOAD(wsrc, o * " + num(K) + " + c) - wz[o]) & 0xffff);\n" +
        "      if (kx + 1 < " + num(d.kernel_w) + ")\n        word |= (uint)(WLOAD(wsrc, o * " +
        num(K) + " + c + 1) - wz[o]) << 16;\n    }\n    wp[i] = (int)word;\n  }\n");
    RowFormKernel(w, d, t, known);
    return w.Source();
  }
  pack.Out("float", "wp").Body(
      "  $loop(i, " + num(long(DivUp(O, t.oc)) * K * t.oc) + ") {\n" + "    const int o = i / " +
      num(K * t.oc) + " * " + num(t.oc) + " + i % " + num(t.oc) + ";\n    const int c = i / " +
      num(t.oc) + " % " + num(K) + ";\n" + "    wp[i] = o < " + num(O) + " ? " +
      (q ? "(float)(WLOAD(wsrc, o * " + num(K) + " + c) - wz[o])"
         : "wsrc[o * " + num(K) + " + c]") +
      " : 0.0f;\n  }\n");
  if (RowForm(d)) {
    RowFormKernel(w, d, t, known);
    return w.Source();
  }
  // The plane's last block: where the plane is not a multiple of px·vx pixels, the block
  // takes only the vectors its pixels need (a 14×14 plane in blocks of 32: 6 blocks and one
  // vector of 16, not 7 blocks of 32 — 208 pixels computed instead of 224), shifted back to
  // end at the plane's end; every other block is whole.
  const long rem = hw % block;
  const int tail_px = rem ? int(DivUp(rem, long(t.vx))) : t.px;
  std::string b;
  // The launch rounds each dimension up to its work-group size.
  b += "  const int blk = $global_id(0), ob = $global_id(1), n = $global_id(2);\n";
  b += "  if (blk >= " + num(DivUp(int(hw), int(block))) + " || ob >= " + num(DivUp(O, t.oc)) +
       " || n >= " + num(d.batch) + ") return;\n";
  b += "  const $global float* wb = wp + ob * " + num(long(C) * t.oc) + ";\n";
  // A block of px vectors: its K loop and epilogue. The last block ends at the plane's end;
  // `skip` of its pixels belong to the one before.
  auto block_text = [&](int px) {
    Convolution::PointwiseTile bt = t;
    bt.px = px;
    const long span = long(px) * t.vx;
    std::string r;
    r += "  const int p0 = min(blk * " + num(block) + ", " + num(hw - span) + ");\n";
    r += "  const int skip = blk * " + num(block) + " - p0;\n";
    r += "  const $global float* xn = x + (long)n * " + num(long(C) * hw) + " + p0;\n";
    for (int o = 0; o < t.oc; ++o)
      for (int q = 0; q < px; ++q) r += "  Vf a" + num(o) + "_" + num(q) + " = (Vf)(0.0f);\n";
    r += "  for (int c = 0; c < " + num(C) + "; ++c) {\n";
    r += "    const $global float* xc = xn + c * " + num(hw) + ";\n";
    if (t.pf > 0 && t.pf < C) {
      // The block's pixels pf channels on (wrapping to the first channels near the end, which
      // are in the cache already: every address stays inside the input).
      r += "    const $global float* xf = xn + (c + " + num(t.pf) + " < " + num(C) + " ? c + " +
           num(t.pf) + " : c + " + num(t.pf - C) + ") * " + num(hw) + ";\n";
      for (int q = 0; q < px; ++q) r += "    $prefetch(xf + " + num(q * t.vx) + ");\n";
    }
    for (int q = 0; q < px; ++q)
      r += "    const Vf v" + num(q) + " = Vf_LOAD(xc + " + num(q * t.vx) + ");\n";
    r += "    const $global float* wc = wb + c * " + num(t.oc) + ";\n";
    for (int o = 0; o < t.oc; ++o) {
      r += "    const Vf w" + num(o) + " = (Vf)(wc[" + num(o) + "]);\n";
      for (int q = 0; q < px; ++q) {
        const std::string acc = "a" + num(o) + "_" + num(q);
        r += "    " + acc + " = $fma(w" + num(o) + ", v" + num(q) + ", " + acc + ");\n";
      }
    }
    r += "  }\n";
    r += "  const long base = (long)n * " + num(long(O) * hw) + " + p0;\n";
    return r + PointwiseEpilogue(d, bt, hw);
  };
  if (tail_px < t.px) {
    b += "  if (blk == " + num(hw / block) + ") {\n" + block_text(tail_px) + "  } else {\n" +
         block_text(t.px) + "  }\n";
  } else {
    b += block_text(t.px);
  }
  DeclarePointwiseKernel(w, d, b);
  return w.Source();
}

}  // namespace mpcaffe::libdnn
