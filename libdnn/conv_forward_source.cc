// libdnn/conv_forward_source.cc — the forward kernel texts of the convolution: the implicit-GEMM
// forward kernel of every data type and tile (with its weight- and input-packing kernels); the
// im2col kernels are in conv_im2col_source.cc.
#include <optional>
#include <string>

#include "device/error.h"
#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"
#include "libdnn/gemm_internal.h"
#include "libdnn/typed_host.h"

namespace mpcaffe::libdnn {

using namespace conv_internal;  // NOLINT: this file's private vocabulary

void conv_internal::DeclareWeightStorage(KernelWriter& w, const ConvDesc& d) {
  if (IsQuantized(d.type) && d.weights_signed) {
    w.Define("Wstore", TraitsOf(d.type).signed_alias());
    w.Define("WLOAD(p, i)", "((int)(p)[i])");
  } else {
    w.Define("Wstore", "Dtype");
    w.Define("WLOAD(p, i)", "Dtype_LOAD(p, i)");
  }
}

namespace {

/// Pair steps of a window at most this many between flushes of the int16 split path's int32
/// accumulators (the GEMM's bound: a pair of w − c (int16) with a lo or hi byte part).
using gemm_internal::kSplitFlushSteps;

/// The register-tile part of the forward body: `f(j, t)` gives the text for one accumulator.
template <typename F>
std::string ForEachTile(const ConvConfig& c, F f) {
  std::string s;
  for (int j = 0; j < c.oc_per_item; ++j)
    for (int t = 0; t < c.px_per_item; ++t) s += f(j, t);
  return s;
}
template <typename F>
std::string ForEachPixel(const ConvConfig& c, F f) {
  std::string s;
  for (int t = 0; t < c.px_per_item; ++t) s += f(t);
  return s;
}
template <typename F>
std::string ForEachChannel(const ConvConfig& c, F f) {
  std::string s;
  for (int j = 0; j < c.oc_per_item; ++j) s += f(j);
  return s;
}
std::string Sub(const char* pattern, int j, int t) {
  // Replaces every '#J' and '#T' in pattern by j and t.
  std::string s = pattern, out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '#' && i + 1 < s.size() && (s[i + 1] == 'J' || s[i + 1] == 'T')) {
      out += std::to_string(s[i + 1] == 'J' ? j : t);
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

/// The forward program's text for one description, tile and input mode (see ConvInput): its
/// type and macro declarations, the packing kernels and the forward kernel, each step a method.
/// The register tile is unrolled in the text: ForEachTile / ForEachPixel / ForEachChannel
/// repeat a pattern whose #J (channel vector) and #T (pixel) become indices (Sub).
struct ForwardText {
  ForwardText(const KernelTarget& target, const ConvDesc& desc, const ConvConfig& config,
              bool channel_pairs, int pre_shift)
      : d(desc),
        c(config),
        input(InputOf(target.backend, desc, config, channel_pairs)),
        dot4(input == ConvInput::kDot4),
        quads(IsByteQuads(input)),
        byte_tiles(input == ConvInput::kPackedTiles),
        grid(input == ConvInput::kQuadGrid),
        taps(UsesTapQuads(desc, input)),
        pairs(input != ConvInput::kDirect && !dot4 && !quads),
        packed(IsPacked(input)),
        split(input == ConvInput::kPackedSplit),
        q(IsQuantized(desc.type)),
        wide(desc.type == DataType::kInt16Q),
        vector_builtins(target.vector_builtins),
        pre_shift(pre_shift),
        suffix(std::string(Name(desc.type)) + (desc.weights_signed ? "_sw" : "")),
        w(target, "conv_forward") {}

  std::string Source() {
    DeclareTypes();
    AddPackKernels();
    if (byte_tiles)
      w.Function(TileWindowFunction(c));
    else if (grid)
      w.Function(GridWindowFunction(c));
    else if (quads)
      w.Function(QuadWindowFunction(c));
    AddForwardKernel(byte_tiles ? TilePrologue(c) + Epilogue()
                     : grid     ? GridPrologue(c) + GridEpilogue(w.target(), c, pre_shift)
                     : quads    ? QuadPrologue(c) + Epilogue()
                                : Prologue() + Window() + Epilogue());
    return w.Source();
  }

  const ConvDesc& d;
  const ConvConfig& c;
  const ConvInput input;
  const bool dot4;
  const bool quads;  // the accumulators in `accs`, corrected by z_x·Σ(w − z_w): quads or tiles
  const bool byte_tiles;  // kPackedTiles
  const bool grid;        // kQuadGrid
  const bool taps;        // byte quads along the window's columns (QuadLayout, QuadGridLayout)
  const bool pairs, packed, split, q, wide;
  const bool vector_builtins;  // KernelTarget::vector_builtins
  const int pre_shift;  // RequantKnown::pre_shift (the int8 vector epilogue's left shift)
  const std::string suffix;  // kernel name suffix: the type, "_sw" for signed weights
  KernelWriter w;

  // Types, helpers and the tile's macros.
  void DeclareTypes() {
    w.AddType("Dtype", d.type);
    if (pairs) w.UseHelper(KernelHelper::kPairProduct16);
    // Tiles zip their input rows with the byte quads' MP_ZIP4X16.
    if (quads) w.UseHelper(KernelHelper::kByteQuadProduct16);
    if (byte_tiles) w.UseHelper(KernelHelper::kByteTileProduct);
    // DirectVectorEpilogue's word per channel of four pixels.
    // The grid form's 16 bytes of a channel's row.
    if ((VectorRequantizes() && c.px_per_item == 4) || grid)
      w.UseHelper(KernelHelper::kByteVectorStore);
    if (dot4) {
      w.UseHelper(KernelHelper::kDot4);
      // The word of four packed weight bytes at p (4-byte aligned), and the input bytes of
      // channels 0 … 3 of a plane stride apart (x_zero past the group's last channel, `rem`).
      w.Define("WWORD(p)", w.Expand("(*(const $global mp_u32*)(p))"));
      w.Define("XBYTE(p, i, q, rem)",
               "((mp_u32)((q) < (rem) ? (p)[i] : (mp_u8)x_zero) << (8 * (q)))");
      w.Define("XWORD4(p, o, hw)",
               "((mp_u32)(p)[o] | ((mp_u32)(p)[(o) + (hw)] << 8) | ((mp_u32)(p)[(o) + 2 * (hw)] << "
               "16) | "
               "((mp_u32)(p)[(o) + 3 * (hw)] << 24))");
      w.Define("XTAIL4(p, o, hw, rem)",
               "(XBYTE(p, o, 0, rem) | XBYTE(p, (o) + (hw), 1, rem) | XBYTE(p, (o) + 2 * (hw), 2, "
               "rem) | "
               "XBYTE(p, (o) + 3 * (hw), 3, rem))");
      w.Define("DOT4(x, w, acc)",
               d.weights_signed ? "mp_dot4_u8s8(x, w, acc)" : "mp_dot4_u8u8(x, w, acc)");
    }
    DeclareWeightStorage(w, d);
    w.Define("Ptype", PackedType(d.type, input));
    // The split path packs w − WCENTER (int16 whatever the zero point) and adds
    // (WCENTER − z_w)·Σ(x − z_x) per output.
    if (split) w.Define("WCENTER", d.weights_signed ? "0" : "32768");
    if (!q) {
      w.Define("Atype", "float");
      w.Define("Btype", "float");
      w.Define("Xtype", "float");
      w.Define("XVAL(v)", "(v)");
    } else {
      w.UseRequant(d.type);
      w.Define("Atype", TraitsOf(d.type).acc_alias());
      w.Define("Btype", TraitsOf(d.type).acc_alias());
      w.Define("Xtype", "int");
      w.Define("XVAL(v)", "((v) - x_zero)");
    }
    // Vectors of vw channels (KernelWriter::AddVector; plain scalars when vw == 1).
    const std::string n = std::to_string(c.vw);
    if (c.vw == 1) {
      w.Define("Vtype", "Atype");
      w.Define("WLDV(p)", "((Atype)(p)[0])");
      w.Define("VTO(x, t)", "((t)[0] = (x))");
    } else {
      w.AddVector("Vtype", TraitsOf(d.type).acctype, c.vw);
      w.Define("WLDV(p)", !q ? "Vtype_LOAD(p)" : "Vtype_LOAD_CONV(p)");
      w.Define("VTO(x, t)", "Vtype_STORE(x, t)");
    }
    w.Define("VMAC(acc, wv, xv)", wide ? "acc += (wv) * (mp_i64)(xv)" : "acc += (wv) * (xv)");
    w.Define("CONV_VW", n);
    w.Define("CONV_STEP",
             std::to_string(c.lanes * c.vw));  // channels between a work-item's vectors
    w.Define("CONV_TILE", std::to_string(c.channels_per_group()));
    w.Define("CONV_CP", std::to_string(ChannelsPerStep(input)));  // input channels per packed step
  }

  // The weight-packing kernel (and Σw for kDot4, input packing for packed inputs).
  void AddPackKernels() {
    // Repacking, one contiguous stream per (group, block of CONV_TILE channels):
    //   wp[g][blk][ky·KW + kx][ic][t] = w[g·OCg + blk·CONV_TILE + t][ic][ky][kx] − z_w (0 past
    //   OCg);
    // with channel pairs (CONV_CP = 2) wp[g][blk][ky·KW + kx][ic / 2][t][ic % 2] (0 past Cg);
    // kDot4 (CONV_CP = 4): the raw weight bytes (no z_w) as wp[…][ic / 4][t][ic % 4]; tap
    // quads: QuadTapPackWeightsBody.
    auto& pack = w.Kernel("conv_pack_" + suffix)
                     .In("Wstore", "wsrc")
                     .In("int", "wz")
                     .Out("Ptype", "wp")
                     .Value("int", "Cg")
                     .Value("int", "OCg")
                     .Value("int", "blocks")
                     .Value("int", "KHW")
                     .Value("int", "total");
    if (taps)
      pack.Value("int", "KW").Body(QuadTapPackWeightsBody());
    else
      // Tiles: the channel quads of 64-channel blocks (zero weights past Cg).
      pack.Body(
            std::string(byte_tiles
                            ? "  const int Cgp = (Cg + 63) / 64 * 16;  // quads of 64-channel "
                              "blocks\n"
                            : "  const int Cgp = (Cg + CONV_CP - 1) / CONV_CP;  // packed channel "
                              "steps\n") +
            R"(  $loop(i, total) {
    const int s = i % CONV_CP;
    const int t = (i / CONV_CP) % CONV_TILE;
    int r = i / (CONV_CP * CONV_TILE);
    const int ic = (r % Cgp) * CONV_CP + s;
    r /= Cgp;
    const int kk = r % KHW;
    r /= KHW;
    const int ocp = (r % blocks) * CONV_TILE + t;
    const int g = r / blocks;
)" + std::string(q ? "    int v = 0;\n" : "    float v = 0.0f;\n") +
            R"(    if (ocp < OCg && ic < Cg) {
      const int o = g * OCg + ocp;
)" +
            (!q || dot4 ? "      v = WLOAD(wsrc, (o * Cg + ic) * KHW + kk);\n"
             : split    ? "      v = WLOAD(wsrc, (o * Cg + ic) * KHW + kk) - WCENTER;\n"
                        : "      v = WLOAD(wsrc, (o * Cg + ic) * KHW + kk) - wz[o];\n") +
            R"(    }
    wp[i] = (Ptype)v;
  }
)");

    if (dot4 || quads) {
      // Σw of each output channel over its whole window (raw stored values; kPackedQuads
      // Σ(w − z_w)).
      auto& k = w.Kernel("conv_wsum_" + suffix)
                    .In("Wstore", "wsrc")
                    .Out("int", "wsum")
                    .Value("int", "OC")
                    .Value("int", "CKK");
      if (quads) k.In("int", "wz");
      k.Body(std::string("  $loop(o, OC) {\n    int s = 0;\n") +
             "    for (int i = 0; i < CKK; ++i) s += WLOAD(wsrc, o * CKK + i)" +
             (quads ? " - wz[o]" : "") + ";\n    wsum[o] = s;\n  }\n");
    }

    if (quads) {
      auto& xk = w.Kernel("conv_xpack_" + suffix)
                     .In("Dtype", "x")
                     .Out("int", "xq")
                     .Value("int", "Cg")
                     .Value("int", "HW")
                     .Value("int", "NG")
                     .Value("int", "x_zero")
                     .Value("int", "XW")
                     .Value("int", "XHW")
                     .Value("int", "PW");
      if (grid)
        xk.Value("int", "ph")
            .Value("int", "pw")
            .Value("int", "sw")
            .Value("int", "dw")
            .Value("int", "KQ")
            .Body(taps ? GridTapPackInputBody(w.target()) : GridPackInputBody(w.target()));
      else if (byte_tiles)
        xk.Value("int", "ph").Value("int", "pw").Value("int", "sh").Value("int", "sw").Body(
            TilePackInputBody());
      else if (taps)
        xk.Value("int", "ph").Value("int", "pw").Value("int", "dw").Body(QuadTapPackInputBody());
      else
        xk.Value("int", "sh").Value("int", "sw").Body(QuadPackInputBody());
    } else if (packed) {
      // Input packing for one chunk of images (NG = images · groups): per (image, group) ⌈Cg/2⌉
      // planes of 32-bit words (x(2i) − z_x, x(2i + 1) − z_x) as two int16 halves, an odd Cg
      // padded with 0; the split path writes two words per pixel (the lo pair, then the hi pair
      // of v = hi·256 + lo) and a plane of Σ_ic v per (image, group).
      auto& xk = w.Kernel("conv_xpack_" + suffix).In("Dtype", "x").Out("int", "xq");
      if (split) xk.Out("int", "xs");
      xk.Value("int", "Cg").Value("int", "HW").Value("int", "NG").Value("int", "x_zero");
      std::string b = R"(  const int Cgh = (Cg + 1) / 2;
  $loop(i, NG * HW) {
    const int s = i % HW;
    const int ng = i / HW;
    const $global Dtype* src = x + ng * Cg * HW + s;
)";
      b += split ? R"(    $global int* dst = xq + ng * Cgh * HW * 2 + s * 2;
    int sum = 0;
)"
                 : "    $global int* dst = xq + ng * Cgh * HW + s;\n";
      b += R"(    for (int pr = 0; pr < Cgh; ++pr) {
      const int v0 = Dtype_LOAD(src, 2 * pr * HW) - x_zero;
      const int v1 = 2 * pr + 1 < Cg ? Dtype_LOAD(src, (2 * pr + 1) * HW) - x_zero : 0;
)";
      b += split ? R"(      dst[pr * HW * 2] = (v0 & 255) | ((v1 & 255) << 16);
      dst[pr * HW * 2 + 1] = ((v0 >> 8) & 0xffff) | (int)((mp_u32)(v1 >> 8) << 16);
      sum += v0 + v1;
    }
    xs[i] = sum;
  }
)"
                 : R"(      dst[pr * HW] = (v0 & 0xffff) | (int)((mp_u32)v1 << 16);
    }
  }
)";
      xk.Body(b);
    }
  }

  // The forward body up to the channel loop: the work-item's pixels and channel block,
  // zeroed accumulators, and the window loops with each pixel's input offset.
  std::string Prologue() const {
    // Work-groups: dimension 0 = pixel tiles (× lanes), 1 = channel blocks,
    // 2 = image × group; consecutive work-groups share one block's weights (cache reuse).
    std::string body = R"(  const int lane = $local_id(0);
  const int blk = $group_id(1);
  const int ocl = blk * CONV_TILE + lane * CONV_VW;
  const int P = OH * OW;
  const int p0 = $group_id(0) * )" +
                       std::to_string(c.px_per_item) + R"(;
  const int ng = $group_id(2);
  const int n = ng / G;
  const int g = ng - n * G;
  const int HW = H * W;
  const int Cgp = (Cg + CONV_CP - 1) / CONV_CP * CONV_CP;  // packed channels (even for pairs)
  const int KC = KH * KW * Cgp;
)";
    body += ForEachPixel(c, [&](int t) {
      return Sub(R"(  const int pv#T = p0 + #T < P;
  const int oy#T = (p0 + #T) / OW;
  const int iy0#T = oy#T * sh - ph;
  const int ix0#T = (p0 + #T - oy#T * OW) * sw - pw;
)",
                 0, t);
    });
    body +=
        ForEachTile(c, [&](int j, int t) { return Sub("  Vtype acc#J_#T = (Vtype)0;\n", j, t); });
    // kDot4: Σx over each pixel's window (padding and padded channels count as x_zero).
    if (dot4) body += ForEachPixel(c, [&](int t) { return Sub("  int sx#T = 0;\n", 0, t); });
    if (split) {
      // int32 partial sums of the lo and hi pair products, flushed into acc (int64) at most every
      // kSplitFlushSteps pair steps; sx = Σ (x − z_x) over each pixel's window.
      body += ForEachTile(c, [&](int j, int t) {
        return Sub("  mp_pair_acc lo#J_#T = (mp_pair_acc)0, hi#J_#T = (mp_pair_acc)0;\n", j, t);
      });
      body += ForEachPixel(c, [&](int t) { return Sub("  mp_i64 sx#T = 0;\n", 0, t); });
      body += "  int pending = 0;  // pair steps in lo/hi since the last flush\n";
    }
    body += !packed ? "  const $global Dtype* xg = x + (n * C + g * Cg) * HW;\n"
                    : std::string("  const $global int* xg = xq + ng * (Cgp / 2) * HW") +
                          (split ? " * 2;\n  const $global int* xsg = xs + ng * HW;\n" : ";\n");
    body += R"(  const $global Ptype* wg =
      wp + (g * (OCpad / CONV_TILE) + blk) * KC * CONV_TILE + lane * CONV_VW * CONV_CP;
  for (int ky = 0; ky < KH; ++ky) {
    for (int kx = 0; kx < KW; ++kx) {
)";
    body += ForEachPixel(c, [&](int t) {
      return Sub(R"(      const int iy#T = iy0#T + ky * dh;
      const int ix#T = ix0#T + kx * dw;
      const int ok#T = pv#T && iy#T >= 0 && iy#T < H && ix#T >= 0 && ix#T < W;
      const int off#T = ok#T ? iy#T * W + ix#T : 0;
)",
                 0, t);
    });
    return body;
  }

  // "ok0 && ok1 && …": every pixel of the tile inside the input at this window position.
  std::string AllOk() const {
    std::string all_ok;
    for (int t = 0; t < c.px_per_item; ++t) all_ok += (t ? " && ok" : "ok") + std::to_string(t);
    return all_ok;
  }

  // Two input channels per step (channel pairs formed from two loads).
  std::string PairLoop(bool masked) const {
    // Two input channels per step; an odd Cg ends with x(ic + 1) = 0 against zero weights.
    auto step = [&](bool second) {
      std::string s = ForEachPixel(c, [&](int t) {
        std::string x0 = Sub("XVAL(Dtype_LOAD(xp, off#T))", 0, t);
        std::string x1 = second ? Sub("XVAL(Dtype_LOAD(xp + HW, off#T))", 0, t) : "0";
        if (masked) {
          x0 = Sub("(ok#T ? ", 0, t) + x0 + " : 0)";
          if (second) x1 = Sub("(ok#T ? ", 0, t) + x1 + " : 0)";
        }
        return Sub("          const mp_short16 x#T = MP_PAIR16(", 0, t) + x0 + ", " + x1 + ");\n";
      });
      s += ForEachChannel(c, [&](int j) {
        return Sub("          const mp_short16 w#J = MP_SHORT16_LOAD(wk + #J * CONV_STEP * 2);\n",
                   j, 0);
      });
      s += ForEachTile(c, [&](int j, int t) {
        return Sub("          acc#J_#T += MP_MADD16(w#J, x#T);\n", j, t);
      });
      return s;
    };
    return std::string(R"(        const $global Dtype* xp = xg;
        const $global Ptype* wk = wg + (ky * KW + kx) * Cgp * CONV_TILE;
        int ic = 0;
        for (; ic + 2 <= Cg; ic += 2) {
)") + step(true) +
           R"(          xp += 2 * HW;
          wk += 2 * CONV_TILE;
        }
        if (ic < Cg) {
)" + step(false) +
           "        }\n";
  }

  // Pre-packed pairs: one 32-bit load per pixel and step, broadcast as 8 equal pairs
  // (MP_PAIR16_WORD).
  std::string PackedLoop(bool masked, const char* first, const char* last) const {
    auto xword = [&](int t, const char* at) {
      const std::string load = Sub("xp[", 0, t) + at + "]";
      return masked ? Sub("(ok#T ? ", 0, t) + load + " : 0)" : load;
    };
    std::string s = std::string("        for (int s = ") + first + "; s < " + last + "; ++s) {\n";
    s += ForEachPixel(c, [&](int t) {
      if (!split)
        return Sub("          const mp_short16 x#T = MP_PAIR16_WORD(", 0, t) +
               xword(t, Sub("off#T", 0, t).c_str()) + ");\n";
      return Sub("          const mp_short16 l#T = MP_PAIR16_WORD(", 0, t) +
             xword(t, Sub("2 * off#T", 0, t).c_str()) + ");\n" +
             Sub("          const mp_short16 h#T = MP_PAIR16_WORD(", 0, t) +
             xword(t, Sub("2 * off#T + 1", 0, t).c_str()) + ");\n";
    });
    s += ForEachChannel(c, [&](int j) {
      return Sub("          const mp_short16 w#J = MP_SHORT16_LOAD(wk + #J * CONV_STEP * 2);\n", j,
                 0);
    });
    s += ForEachTile(c, [&](int j, int t) {
      return split ? Sub("          lo#J_#T += MP_MADD16(w#J, l#T);\n"
                         "          hi#J_#T += MP_MADD16(w#J, h#T);\n",
                         j, t)
                   : Sub("          acc#J_#T += MP_MADD16(w#J, x#T);\n", j, t);
    });
    s += split ? "          xp += 2 * HW;\n" : "          xp += HW;\n";
    s += "          wk += 2 * CONV_TILE;\n        }\n";
    return s;
  }

  // The split path's int32 partial sums flushed into the int64 accumulators.
  std::string Flush() const {
    return ForEachTile(c, [&](int j, int t) {
      return Sub(
          "    MP_PAIR_FLUSH(acc#J_#T, lo#J_#T, hi#J_#T);\n"
          "    lo#J_#T = (mp_pair_acc)0;\n    hi#J_#T = (mp_pair_acc)0;\n",
          j, t);
    });
  }

  // Four channels per step as one word of input bytes per pixel (z_x replicated where the
  // window leaves the input) against one word of four weight bytes per channel.
  std::string Dot4Loop(bool masked) const {
    auto step = [&](const char* word) {
      std::string s = ForEachPixel(c, [&](int t) {
        const std::string x = Sub(word, 0, t);
        return Sub("          const mp_u32 x#T = ", 0, t) +
               (masked ? Sub("ok#T ? ", 0, t) + x + " : (mp_u32)x_zero * 0x01010101u" : x) + ";\n" +
               Sub("          sx#T = mp_dot4_u8u8(x#T, 0x01010101u, sx#T);\n", 0, t);
      });
      s += ForEachChannel(c, [&](int j) {
        return Sub("          const mp_u32 w#J = WWORD(wk + #J * CONV_STEP * 4);\n", j, 0);
      });
      s += ForEachTile(c, [&](int j, int t) {
        return Sub("          acc#J_#T = DOT4(x#T, w#J, acc#J_#T);\n", j, t);
      });
      return s;
    };
    return std::string(R"(        const $global Dtype* xp = xg;
        const $global Ptype* wk = wg + (ky * KW + kx) * Cgp * CONV_TILE;
        int ic = 0;
        for (; ic + 4 <= Cg; ic += 4) {
)") + step("XWORD4(xp, off#T, HW)") +
           R"(          xp += 4 * HW;
          wk += 4 * CONV_TILE;
        }
        if (ic < Cg) {
)" + step("XTAIL4(xp, off#T, HW, Cg - ic)") +
           "        }\n";
  }

  // The loop over input channels at one window position, in the input mode's steps.
  std::string ChannelLoop(bool masked) const {
    if (dot4) return Dot4Loop(masked);
    if (input == ConvInput::kPackedPairs) {
      return std::string(R"(        const $global int* xp = xg;
        const $global Ptype* wk = wg + (ky * KW + kx) * Cgp * CONV_TILE;
)") + PackedLoop(masked, "0", "Cgp / 2");
    }
    if (pairs) return PairLoop(masked);
    std::string s = R"(        const $global Dtype* xp = xg;
        const $global Ptype* wk = wg + (ky * KW + kx) * Cg * CONV_TILE;
        for (int ic = 0; ic < Cg; ++ic) {
)";
    // Padding and pixels past the end read nothing: a safe offset, then masked to zero (for
    // quantized data the zero point, x − x_zero = 0).
    s += ForEachPixel(c, [&](int t) {
      return masked ? Sub("          Xtype x#T = XVAL(Dtype_LOAD(xp, off#T));\n"
                          "          x#T = ok#T ? x#T : 0;\n",
                          0, t)
                    : Sub("          const Xtype x#T = XVAL(Dtype_LOAD(xp, off#T));\n", 0, t);
    });
    s += ForEachChannel(c, [&](int j) {
      return Sub("          const Vtype w#J = WLDV(wk + #J * CONV_STEP);\n", j, 0);
    });
    s += ForEachTile(
        c, [&](int j, int t) { return Sub("          VMAC(acc#J_#T, w#J, x#T);\n", j, t); });
    s += R"(          xp += HW;
          wk += CONV_TILE;
        }
)";
    return s;
  }

  // The window positions: interior ones (every pixel of the tile inside the input) skip the
  // masking; the split path flushes its partial sums between blocks of pair steps.
  std::string Window() const {
    const std::string all_ok = AllOk();
    std::string body;
    if (!split) {
      body += "      if (" + all_ok + ") {\n" + ChannelLoop(false) + "      } else {\n" +
              ChannelLoop(true) + "      }\n    }\n  }\n";
    } else {
      body += ForEachPixel(
          c, [&](int t) { return Sub("      sx#T += ok#T ? xsg[off#T] : 0;\n", 0, t); });
      body += R"(      const $global int* xp = xg;
      const $global Ptype* wk = wg + (ky * KW + kx) * Cgp * CONV_TILE;
      for (int s0 = 0; s0 < Cgp / 2; s0 += )" +
              std::to_string(kSplitFlushSteps) + R"() {
        const int s1 = min(s0 + )" +
              std::to_string(kSplitFlushSteps) + R"(, Cgp / 2);
        if (pending + (s1 - s0) > )" +
              std::to_string(kSplitFlushSteps) + R"() {
)" + Flush() + R"(          pending = 0;
        }
        pending += s1 - s0;
        if ()" +
              all_ok + ") {\n" + PackedLoop(false, "s0", "s1") + "        } else {\n" +
              PackedLoop(true, "s0", "s1") + "        }\n      }\n    }\n  }\n" + Flush();
    }
    return body;
  }

  // Whether the epilogue requantizes a whole vector of channels at once (VectorEpilogue): int8
  // (an int32 accumulator) in OpenCL C vectors; CUDA and int16 go lane by lane.
  bool VectorRequantizes() const {
    return q && !wide && !dot4 && !split && vector_builtins &&
           ((c.vw >= 2 && c.vw <= 8) || (quads && c.vw == 16));
  }

  // Requantizes (or stores) each accumulator lane of the tile. The accumulators go into one
  // private array and the epilogue is written once, in a loop over it: written out once per
  // accumulator it was most of the kernel's text and of its compile time, for code that runs
  // once per work-item (the window loop above keeps the accumulators in registers).
  std::string Epilogue() const {
    const int px = c.px_per_item, tiles = c.oc_per_item * px;
    // Byte quads' and tiles' accumulators stay in `accs` (no copy of up to 4 KiB per
    // work-item): the lanes are read from there.
    std::string body;
    if (!quads) {
      body += "  Vtype tile[" + std::to_string(tiles) + "];\n";
      body += ForEachTile(c, [&](int j, int t) {
        return "  tile[" + std::to_string(j * px + t) + "] = " + Sub("acc#J_#T;\n", j, t);
      });
    }
    // The window sums of each pixel (the split and kDot4 corrections).
    if (split || dot4) {
      body += std::string("  const ") + (split ? "mp_i64" : "int") + " tile_sx[" +
              std::to_string(px) + "] = {";
      body += ForEachPixel(c, [&](int t) { return Sub(t ? ", sx#T" : "sx#T", 0, t); });
      body += "};\n";
    }
    body += "  Atype lanes_out[CONV_VW];\n";
    body += "  for (int tj = 0; tj < " + std::to_string(c.oc_per_item) + "; ++tj) {\n";
    body += "    const int oc0 = ocl + tj * CONV_STEP;\n";
    // A vector of channels all in range goes through DirectVectorEpilogue, the rest (and every
    // other type) lane by lane.
    if (VectorRequantizes()) body += DirectVectorEpilogue(w.target(), c, quads, byte_tiles, pre_shift);
    body += "    for (int tt = 0; tt < " + std::to_string(px) + R"(; ++tt) {
    const int e = tj * )" + std::to_string(px) + R"( + tt;
)";
    // A tile's pixel tt is a grid position: pix_at holds its output index (TilePrologue).
    body += byte_tiles ? "    const int pvt = pix_at[tt] >= 0;\n    const int at = pix_at[tt];\n"
                       : "    const int pvt = p0 + tt < P;\n    const int at = p0 + tt;\n";
    std::string s = quads ? "  for (int v = 0; v < CONV_VW; ++v) lanes_out[v] = accs[16 * e + v];\n"
                          : "  VTO(tile[e], lanes_out);\n";
    s += R"(  for (int v = 0; v < CONV_VW; ++v) {
    const int oc = ocl + tj * CONV_STEP + v;
    if (oc < OCg && pvt) {
      const int o = g * OCg + oc;
      const int yi = (n * G * OCg + o) * P + at;
)";
    if (!q) {
      s += R"(      float f = lanes_out[v] + (has_bias ? bias[o] : 0.0f);
      if (has_res) f += (float)Dtype_LOAD(res, yi);
      if (relu) f = f > 0.0f ? f : 0.0f;
      Dtype_STORE(y, yi, f);
    }
  }
)";
    } else {
      // The split path's weights are w − WCENTER: (WCENTER − z_w)·Σ(x − z_x) restores w − z_w.
      std::string fix = split ? " + (mp_i64)(WCENTER - wz[o]) * tile_sx[tt]" : "";
      // kDot4: Σ(x − z_x)(w − z_w) from the raw Σxw over N = KH·KW·Cgp window entries.
      if (dot4)
        fix =
            " - (mp_i64)wz[o] * tile_sx[tt] - (mp_i64)x_zero * wsum[o] + (mp_i64)(KH * KW * Cgp) "
            "* x_zero * wz[o]";
      // kPackedQuads: Σx(w − z_w) with padding as z_x, less z_x·Σ(w − z_w).
      if (quads) fix = " - (mp_i64)x_zero * wsum[o]";
      s += "      mp_i64 r = (mp_i64)c_zero + MP_REQUANT(lanes_out[v]" + fix +
           R"( + (has_bias ? bias[o] : 0), rq[2 * o], rq[2 * o + 1]);
      if (has_res) r += MP_REQUANT((mp_i64)Dtype_LOAD(res, yi) - res_zero, res_m, res_s);
      r = Dtype_SAT_FROM(r, relu ? (mp_i64)c_zero : (mp_i64)Dtype_QMIN);
      Dtype_STORE(y, yi, r);
    }
  }
)";
    }
    body += s + "    }\n  }\n";
    return body;
  }

  // The forward kernel's signature around `body`.
  void AddForwardKernel(const std::string& body) {
    auto& k = w.Kernel(Convolution::ForwardKernelName(d));
    if (packed)
      k.In("int", "xq");
    else
      k.In("Dtype", "x");
    k.In(quads ? "int" : "Ptype", "wp")
        .In("Btype", "bias")
        .In("int", "rq")
        .In("Dtype", "res")
        .Out("Dtype", "y");
    if (split) k.In("int", "xs").In("int", "wz");
    if (dot4) k.In("int", "wz").In("int", "wsum");
    if (quads) k.In("int", "wsum");
    for (const char* name :
         {"C",  "H",  "W",  "Cg", "OCg", "OCpad", "OH",       "OW",   "KH",     "KW",    "sh",
          "sw", "ph", "pw", "dh", "dw",  "G",     "has_bias", "relu", "x_zero", "c_zero", "has_res", "res_zero", "res_m",
          "res_s", "rq_mode"})
      k.Value("int", name);
    k.Body(body);
  }
};

}  // namespace

std::string Convolution::ForwardKernelName(const ConvDesc& d) {
  return std::string("conv_fwd_") + Name(d.type) + (d.weights_signed ? "_sw" : "");
}

std::string Convolution::ForwardSource(const KernelTarget& target, const ConvDesc& d,
                                       const ConvConfig& c, bool channel_pairs,
                                       int pre_shift) {
  c.Validate();
  return ForwardText(target, d, c, channel_pairs, pre_shift).Source();
}

}  // namespace mpcaffe::libdnn
