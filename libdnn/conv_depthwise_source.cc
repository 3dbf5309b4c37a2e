// libdnn/conv_depthwise_source.cc — the depthwise convolution's kernel texts (one channel per
// group: a work-item per block of output rows, the one-column and the explicit-vector forms) and
// the shape tests and defaults that choose them (IsDepthwise, IsPointwise, IsStridedPointwise,
// rows, vector width).
#include <algorithm>
#include <optional>
#include <string>

#include "codegen/vector_words.h"
#include "device/error.h"
#include "libdnn/conv.h"
#include "libdnn/conv_families.h"
#include "libdnn/conv_internal.h"
#include "libdnn/typed_host.h"

namespace mpcaffe::libdnn {

using namespace conv_internal;  // NOLINT: this file's private vocabulary

bool Convolution::IsDepthwise(const ConvDesc& d) {
  return d.groups > 1 && d.channels == d.groups && d.out_channels == d.groups;
}

bool Convolution::IsPointwise(const ConvDesc& d) {
  return d.groups == 1 && d.kernel_h == 1 && d.kernel_w == 1 && d.stride_h == 1 &&
         d.stride_w == 1 && d.pad_h == 0 && d.pad_w == 0;
}

bool Convolution::IsStridedPointwise(const ConvDesc& d) {
  return (d.type == DataType::kFloat32 || d.type == DataType::kInt8Q) && d.groups == 1 &&
         d.kernel_h == 1 && d.kernel_w == 1 &&
         (d.stride_h > 1 || d.stride_w > 1) && d.pad_h == 0 && d.pad_w == 0;
}

ConvDesc Convolution::SubsampledDesc(const ConvDesc& d) {
  ConvDesc s = d;
  s.height = d.out_h(), s.width = d.out_w();
  s.stride_h = s.stride_w = 1;
  return s;
}

std::string Convolution::DepthwiseKernelName(const ConvDesc& d) {
  return std::string("conv_dw_") + Name(d.type) + (d.weights_signed ? "_sw" : "");
}

int Convolution::DefaultDepthwiseRows(const ConvDesc& d, const TargetProfile& profile) {
  return DefaultRowFor(DepthwiseRowDefaults(), "conv_dw", profile, d).config.RowsFor(d);
}

int Convolution::DepthwiseLocalWidth(const ConvDesc& d) {
  // Work-groups along the output row: a multiple of 8 (a CPU runtime's vector of work-items)
  // covering OW in as few groups of at most 64 as possible.
  const int ow = d.out_w();
  const int groups = DivUp(ow, 64);
  return DivUp(DivUp(ow, groups), 8) * 8;
}

// The OpenCL form of the depthwise kernel with explicit vectors (Convolution::
// DepthwiseVectorWidth): a work-item per (image · channel, block of `rows` output rows, vector
// of `vx` neighbouring output columns). Each input row of the block is read with one vector
// load per window column (vx·stride elements, every stride-th taken: .even for stride 2) and
// multiplied into the vector accumulators of the output rows whose window meets it, so the
// window runs in SIMD whatever the runtime's own vectorizer makes of the work-items (PoCL's
// left the int8 kernel scalar: the requantization's branches). Columns outside the input are
// masked to 0 (x − z_x = 0); work-items whose loads would leave the input buffer (the first
// and last plane's edge rows) build their vectors lane by lane instead. int8q accumulates in
// float: with 0 ≤ z_x ≤ 255 every product is at most 255² and a window of at most 258 taps sums
// below 2^24, so the float sums are the int32 ones exactly; the epilogue requantizes the vector
// (VectorWords::Requant: the same integers as mp_requant32).
std::string conv_internal::VectorColumnLanes(const ConvDesc& d, int vx) {
  auto num = [](long v) { return std::to_string(v); };
  const std::string I = "int" + num(vx);
  std::string lanes, b;
  for (int j = 0; j < vx; ++j) lanes += (j ? ", " : "") + num(j * d.stride_w);
  b += "  const " + I + " lx = (" + I + ")(" + lanes + ");\n";
  for (int kx = 0; kx < d.kernel_w; ++kx) {
    const std::string c = num(kx);
    b += "  const " + I + " ix" + c + " = lx + (ixb + " + num(kx * d.dilation_w) + ");\n";
    b += "  const " + I + " cm" + c + " = ix" + c + " >= 0 && ix" + c + " < " + num(d.width) +
         ";\n";
  }
  return b;
}

namespace {

/// The products input row r of a depthwise block adds into its accumulators: each output row t
/// whose window row ky meets it (r = t·sh + ky·dh), every window column kx —
/// `<p>acc<t> += <p>w<ky>_<kx> * <p>v<kx>;` with `p` the names' prefix ("" or "f" for float).
std::string DepthwiseRowUses(const ConvDesc& d, int rows, int r, const std::string& p) {
  auto num = [](long v) { return std::to_string(v); };
  std::string uses;
  for (int t = 0; t < rows; ++t)
    for (int ky = 0; ky < d.kernel_h; ++ky)
      if (t * d.stride_h + ky * d.dilation_h == r)
        for (int kx = 0; kx < d.kernel_w; ++kx)
          uses += "      " + p + "acc" + num(t) + " += " + p + "w" + num(ky) + "_" + num(kx) +
                  " * " + p + "v" + num(kx) + ";\n";
  return uses;
}

}  // namespace

void conv_internal::DeclareDepthwiseInt8Vectors(KernelWriter& w, const ConvDesc& d) {
  w.AddType("Dtype", d.type);
  DeclareWeightStorage(w, d);
  w.UseRequant(d.type);
  w.UseHelper(KernelHelper::kByteVectorStore);
  w.Define("Btype", TraitsOf(d.type).acc_alias());
}

std::string conv_internal::DepthwiseVectorPrologue(const ConvDesc& d, int rows, int vx) {
  auto num = [](long v) { return std::to_string(v); };
  std::string b;
  b += "  const int ox0 = $global_id(0) * " + num(vx) + ";\n";
  b += "  const int oy0 = $global_id(1) * " + num(rows) + ";\n";
  b += "  const int nc = $global_id(2);\n  const int ch = nc % " + num(d.channels) + ";\n";
  b += "  const $global Dtype* xc = x + nc * " + num(long(d.height) * d.width) + ";\n";
  b += "  const int iyb = oy0 * " + num(d.stride_h) + " - " + num(d.pad_h) + ";\n";
  return b + "  const int ixb = ox0 * " + num(d.stride_w) + " - " + num(d.pad_w) + ";\n";
}

KernelBuilder& conv_internal::DeclareDepthwiseKernel(KernelWriter& w, const ConvDesc& d) {
  auto& k = w.Kernel(Convolution::DepthwiseKernelName(d))
                .In("Dtype", "x")
                .In("Wstore", "wt")
                .In("Btype", "bias")
                .In("int", "rq")
                .In("int", "wz")
                .In("Dtype", "res")
                .Out("Dtype", "y");
  for (const char* name : {"x_zero", "c_zero", "res_zero", "res_m", "res_s"}) k.Value("int", name);
  return k;
}

std::string conv_internal::DepthwiseLoadsInsideBuffer(const ConvDesc& d, int in_rows, int span) {
  auto num = [](long v) { return std::to_string(v); };
  const long hw = long(d.height) * d.width, total = long(d.batch) * d.channels * hw;
  std::string b;
  b += "  const int ry0 = max(iyb, 0), ry1 = min(iyb + " + num(in_rows - 1) + ", " +
       num(d.height - 1) + ");\n";
  b += "  const long e0 = (long)nc * " + num(hw) + " + ry0 * " + num(d.width) + " + ixb;\n";
  b += "  const long e1 = (long)nc * " + num(hw) + " + ry1 * " + num(d.width) + " + ixb + " +
       num(span) + ";\n";
  return b + "  if (e0 >= 0 && e1 <= " + num(total) + "L) {\n";
}

std::string conv_internal::DepthwiseVectorEpilogue(const KernelTarget& target, const ConvDesc& d,
                                                   int rows, int vx, bool int_acc,
                                                   const std::string& wxz, RequantKnown known) {
  const bool q = IsQuantized(d.type);
  auto num = [](long v) { return std::to_string(v); };
  const VectorWords vw(target);
  const std::string n = num(vx), F = vw.Type("float", vx), I = vw.Type("int", vx);
  const int oh = d.out_h(), ow = d.out_w();
  // A vector of k output lanes to `at`: one unaligned move for uchar (KernelHelper::
  // kByteVectorStore), the dialect's store for float.
  auto store = [&](int k, const std::string& v, const std::string& at) {
    return q ? "MP_STORE_UCHAR" + num(k) + "(" + v + ", " + at + ");\n"
             : vw.Store(k, v, at) + ";\n";
  };
  std::string b;
  // The block's first row: each row's offset from it is a constant of the text.
  const std::string row0 = " + oy0 * " + num(ow) + " + ox0;\n";
  b += "  $global Dtype* yc = y + nc * " + num(long(oh) * ow) + row0;
  if (d.residual) b += "  const $global Dtype* rc = res + nc * " + num(long(oh) * ow) + row0;
  const bool add_bias = d.bias && !wxz.empty();  // else in the sums already
  if (add_bias) b += "  const Btype bc = bias[ch];\n";
  // The channel's requantization constants, once for all the block's rows.
  if (q) b += "  const int rqm = rq[2 * ch], rqs = rq[2 * ch + 1];\n" +
              vw.RequantSetup(vx, "rqc", "rqm", "rqs", 2, known.pre_shift);
  const bool partial = ow % vx != 0;
  if (partial) b += "  const int full = ox0 + " + n + " <= " + num(ow) + ";\n";
  // Residual lanes: a vector load, or lane by lane in a partial vector.
  auto residual = [&](const std::string& at) {
    const std::string ld = q ? vw.Convert(I, vw.Load(vx, "rc + " + at)) : vw.Load(vx, "rc + " + at);
    if (!partial) return ld;
    std::string v;
    for (int j = 0; j < vx; ++j)
      v += std::string(j ? ", " : "") + "(ox0 + " + num(j) + " < " + num(ow) +
           " ? (" + (q ? "int" : "float") + ")Dtype_LOAD(rc, " + at + " + " + num(j) + ") : 0)";
    return "(full ? " + ld + " : " + vw.Of(q ? I : F, v) + ")";
  };
  for (int t = 0; t < rows; ++t) {
    const std::string at = num(long(t) * ow);
    std::string s = oh % rows == 0 ? "  {\n" : "  if (oy0 + " + num(t) + " < " + num(oh) + ") {\n";
    std::string out;
    if (q) {
      std::optional<VectorResidual> res;
      if (d.residual)
        res = ResidualOf(target, residual(at), known);
      const std::string a =
          wxz.empty() ? "acc" + num(t)
                      : (int_acc ? "acc" + num(t) + " - " + wxz
                                 : vw.Convert(I, "acc" + num(t) + " - " + wxz)) +
                            (add_bias ? " + bc" : "");
      s += vw.RequantClamp(vx, "r", a, "rqm", "rqs", "c_zero", res ? &*res : nullptr,
                           d.relu ? "c_zero" : "Dtype_QMIN", "Dtype_QMAX", 4, "rqc",
                           known.high, known.pre_shift);
      const std::string U8 = vw.Type("uchar", vx);
      s += "    const " + U8 + " o = " + vw.Convert(U8, "r") + ";\n";
      out = "o";
    } else {
      s += "    " + F + " v = acc" + num(t) + (d.bias ? " + bc" : "") + ";\n";
      if (d.residual) s += "    v += " + residual(at) + ";\n";
      if (d.relu) s += "    v = fmax(v, " + vw.Splat(F, "0.0f") + ");\n";
      out = "v";
    }
    if (!partial) {
      s += "    " + store(vx, out, "yc + " + at);
    } else {
      // The one partial vector of a row holds its last ow % vx columns: stored as vectors of the
      // remainder's powers of two (14 = 8 + 4 + 2), no compare per lane. Lane-by-lane stores
      // behind a compare each took a third of the int8 14×14 layers' time on both CPU runtimes.
      s += "    if (full) {\n      " + store(vx, out, "yc + " + at) + "    } else {\n";
      for (int k = 8, pos = 0, rem = ow % vx; k >= 1; k /= 2) {
        if (!(rem & k)) continue;
        const std::string lanes = vw.Lanes(out, pos, k);
        s += k == 1 ? "      yc[" + at + " + " + num(pos) + "] = " + lanes + ";\n"
                    : "      " + store(k, lanes, "yc + " + at + " + " + num(pos));
        pos += k;
      }
      s += "    }\n";
    }
    b += s + "  }\n";
  }
  return b;
}

namespace {

std::string DepthwiseVectorSource(const KernelTarget& target, const ConvDesc& d, int rows,
                                  int vx, RequantKnown known) {
  const bool q = IsQuantized(d.type);
  KernelWriter w(target, "conv_depthwise");
  if (q) {
    DeclareDepthwiseInt8Vectors(w, d);
  } else {
    w.AddType("Dtype", d.type);
    DeclareWeightStorage(w, d);
    w.Define("Btype", "float");
  }
  auto num = [](long v) { return std::to_string(v); };
  const VectorWords vw(target);
  const std::string n = num(vx), F = vw.Type("float", vx), I = vw.Type("int", vx);
  const int sw = d.stride_w, load = vx * sw;  // elements per vector load
  if (q && d.type != DataType::kInt8Q) throw Error("depthwise vector kernel: int8q or fp32 only");
  const int in_rows = (rows - 1) * d.stride_h + (d.kernel_h - 1) * d.dilation_h + 1;
  const int span = (d.kernel_w - 1) * d.dilation_w + load;  // columns a row's loads cover
  auto& k = DeclareDepthwiseKernel(w, d).VectorWidth(Scalar::kF32, vx);
  std::string b;
  b += DepthwiseVectorPrologue(d, rows, vx);
  b += VectorColumnLanes(d, vx);
  b += "  const $global Wstore* wc = wt + ch * " + num(d.kernel_h * d.kernel_w) + ";\n";
  if (q) b += "  const int wzc = wz[ch];\n  const float xz = (float)x_zero;\n";
  for (int ky = 0; ky < d.kernel_h; ++ky)
    for (int kx = 0; kx < d.kernel_w; ++kx)
      b += "  const float w" + num(ky) + "_" + num(kx) + " = (float)(WLOAD(wc, " +
           num(ky * d.kernel_w + kx) + ")" + (q ? " - wzc" : "") + ");\n";
  // int8q sums w·x over the window with z_x in place of every tap outside the input, and the
  // epilogue subtracts z_x·Σw (`wxz`): Σ w·(x − z_x) without a subtraction per loaded vector (the
  // float sums stay exact integers: at most 258 taps of at most 255·255, below 2^24).
  if (q) {
    std::string sum;
    for (int ky = 0; ky < d.kernel_h; ++ky)
      for (int kx = 0; kx < d.kernel_w; ++kx)
        sum += std::string(sum.empty() ? "" : " + ") + "w" + num(ky) + "_" + num(kx);
    b += "  const float wxz = xz * (" + sum + ");\n";
  }
  for (int t = 0; t < rows; ++t) b += "  " + F + " acc" + num(t) + " = " + vw.Splat(F, "0.0f") + ";\n";
  // The vector of window column kx at row offset `ro`: `fast` one load (inside the buffer),
  // else lane by lane; columns outside the input read `pad` (0, int8q z_x).
  const std::string pad = q ? "xz" : "0.0f";
  auto vec = [&](int kx, bool fast) {
    const std::string c = num(kx), at = "ro + ixb + " + num(kx * d.dilation_w);
    std::string v;
    if (fast) {
      v = vw.Convert(vw.Type("float", load), vw.Load(load, "xc + " + at));
      if (sw == 2) v = vw.Even(v);
      return vw.Select(vw.Splat(F, pad), v, "cm" + c);
    }
    for (int j = 0; j < vx; ++j)
      v += std::string(j ? ", " : "") + "(" + vw.Lane("cm" + c, j) +
           " ? (float)Dtype_LOAD(xc, " + vw.Lane("ix" + c, j) + " + ro) : " + pad + ")";
    return vw.Of(F, v);
  };
  auto window = [&](bool check_rows, bool fast) {
    std::string s;
    for (int r = 0; r < in_rows; ++r) {
      const std::string uses = DepthwiseRowUses(d, rows, r, "");
      if (uses.empty()) continue;
      s += "    {\n";
      const std::string iy = "iyb + " + num(r);
      if (check_rows) s += "    if (" + iy + " >= 0 && " + iy + " < " + num(d.height) + ") {\n";
      s += "      const int ro = (" + iy + ") * " + num(d.width) + ";\n";
      for (int kx = 0; kx < d.kernel_w; ++kx)
        s += "      const " + F + " v" + num(kx) + " = " + vec(kx, fast) + ";\n";
      s += uses;
      if (check_rows && q) {  // a row outside the input: every tap reads the padding z_x
        s += "    } else {\n";
        for (int kx = 0; kx < d.kernel_w; ++kx)
          s += "      const " + F + " v" + num(kx) + " = " + vw.Splat(F, "xz") + ";\n";
        s += uses;
      }
      s += std::string(check_rows ? "    }\n" : "") + "    }\n";
    }
    return s;
  };
  b += DepthwiseLoadsInsideBuffer(d, in_rows, span);
  b += "  if (iyb >= 0 && iyb + " + num(in_rows - 1) + " < " + num(d.height) + ") {\n" +
       window(false, true) + "  } else {\n" + window(true, true) + "  }\n";
  // A work-item at the buffer's ends builds its vectors lane by lane, in a loop over the block's
  // input rows rather than unrolled like the window above: it runs for a few work-items only,
  // and unrolled it was the largest part of the kernel's text and of its compile time. The
  // products go into each accumulator in the same order as above.
  b += "  } else {\n    const float wa[" + num(d.kernel_h * d.kernel_w) + "] = {";
  for (int ky = 0; ky < d.kernel_h; ++ky)
    for (int kx = 0; kx < d.kernel_w; ++kx)
      b += std::string(ky || kx ? ", " : "") + "w" + num(ky) + "_" + num(kx);
  b += "};\n    " + F + " sacc[" + num(rows) + "];\n";
  b += "    for (int t = 0; t < " + num(rows) + "; ++t) sacc[t] = " + vw.Splat(F, "0.0f") + ";\n";
  b += "    for (int r = 0; r < " + num(in_rows) + "; ++r) {\n      const int iy = iyb + r;\n";
  for (int kx = 0; kx < d.kernel_w; ++kx) b += "      " + F + " v" + num(kx) + ";\n";
  b += "      if (iy >= 0 && iy < " + num(d.height) + ") {\n        const int ro = iy * " +
       num(d.width) + ";\n";
  for (int kx = 0; kx < d.kernel_w; ++kx)
    b += "        v" + num(kx) + " = " + vec(kx, false) + ";\n";
  if (q) {  // a row outside the input: every tap reads the padding z_x
    b += "      } else {\n";
    for (int kx = 0; kx < d.kernel_w; ++kx) b += "        v" + num(kx) + " = " + vw.Splat(F, "xz") + ";\n";
    b += "      }\n";
  } else {  // a row outside the input adds nothing
    b += "      } else {\n        continue;\n      }\n";
  }
  b += "      for (int ky = 0; ky < " + num(d.kernel_h) + "; ++ky) {\n";
  b += "        const int tr = r - ky * " + num(d.dilation_h) + ";\n";
  b += "        if (tr < 0 || tr % " + num(d.stride_h) + " != 0 || tr / " + num(d.stride_h) +
       " >= " + num(rows) + ") continue;\n";
  for (int kx = 0; kx < d.kernel_w; ++kx)
    b += "        sacc[tr / " + num(d.stride_h) + "] += wa[ky * " + num(d.kernel_w) + " + " +
         num(kx) + "] * v" + num(kx) + ";\n";
  b += "      }\n    }\n";
  for (int t = 0; t < rows; ++t) b += "    acc" + num(t) + " = sacc[" + num(t) + "];\n";
  b += "  }\n";
  b += DepthwiseVectorEpilogue(target, d, rows, vx, false, "wxz", known);
  k.Body(b);
  return w.Source();
}

}  // namespace

int Convolution::DepthwiseVectorWidth(const ConvDesc& d, const KernelTarget& target,
                                      int32_t x_zero) {
  if (!target.vector_builtins || !IsDepthwise(d)) return 1;
  // int8q sums in float or in int32 pair products (both exact for z_x in the stored range and
  // windows of at most 258 taps).
  const bool int8 = d.type == DataType::kInt8Q && x_zero >= 0 &&
                    x_zero <= 255 && d.kernel_h * d.kernel_w <= 258;
  if (d.type != DataType::kFloat32 && !int8) return 1;
  if (d.stride_w > 2) return 1;
  // The widest vector (16 lanes at stride 1, else 8) unless a narrower one leaves fewer lanes
  // past the output row empty (56 columns: 7 vectors of 8, not 4 of 16).
  const int ow = d.out_w();
  auto waste = [&](int v) { return DivUp(ow, v) * v - ow; };
  if (d.stride_w == 1 && waste(16) <= waste(8)) return 16;
  return 8;
}

// A work-item per (image · channel, block of `rows` output rows, output column): dimension 0
// runs along the output row, so neighbouring work-items (the lanes of a CPU runtime's implicit
// vectorization) load neighbouring input pixels. Every size is a constant of the text and the
// window is unrolled in it: the KH·KW weights sit in registers, each input row of the block is
// loaded once (KW loads) and multiplied into every output row whose window covers it. Blocks
// whose input rows all lie inside the input skip the row checks; columns where the window
// leaves the input read 0 (x − z_x = 0 for quantized types). The epilogue is the forward
// kernel's: bias, residual, ReLU, requantization with the channel's multiplier, clamp.
std::string Convolution::DepthwiseSource(const KernelTarget& target, const ConvDesc& d, int rows,
                                         int vx, bool quads, RequantKnown known) {
  const bool q = IsQuantized(d.type);
  if (rows <= 0) rows = DefaultDepthwiseRows(d);
  if (quads) {
    if (!conv_internal::DepthwiseQuadsApply(d, target) || vx != 16)
      throw Error("convolution " + d.ToString() + ": no byte-quad depthwise form here (int8q, "
                  "16 columns, strides 1 and 2, windows at most 8 wide, AVX-512 VNNI in a helper)");
    return DepthwiseQuadSource(target, d, rows, known);
  }
  if (vx > 1)
    return DepthwisePairs(d, vx) ? DepthwisePairSource(target, d, rows, known)
                                 : DepthwiseVectorSource(target, d, rows, vx, known);
  KernelWriter w(target, "conv_depthwise");
  w.AddType("Dtype", d.type);
  DeclareWeightStorage(w, d);
  if (q) {
    w.UseRequant(d.type);
    w.Define("Atype", TraitsOf(d.type).acc_alias());
    w.Define("Btype", TraitsOf(d.type).acc_alias());
    w.Define("XV(v)", "((Atype)(v) - x_zero)");
  } else {
    w.Define("Atype", "float");
    w.Define("Btype", "float");
    w.Define("XV(v)", "((Atype)(v))");  // CUDA's half loads convert explicitly
  }
  const int oh = d.out_h(), ow = d.out_w();
  const int in_rows = (rows - 1) * d.stride_h + (d.kernel_h - 1) * d.dilation_h + 1;
  auto& k = DeclareDepthwiseKernel(w, d);
  auto num = [](long v) { return std::to_string(v); };
  std::string b;
  b += "  const int ox = $global_id(0);\n  if (ox >= " + num(ow) + ") return;\n";
  b += "  const int oy0 = $global_id(1) * " + num(rows) + ";\n";
  b += "  const int nc = $global_id(2);\n  const int ch = nc % " + num(d.channels) + ";\n";
  b += "  const $global Dtype* xc = x + nc * " + num(long(d.height) * d.width) + ";\n";
  b += "  const int iyb = oy0 * " + num(d.stride_h) + " - " + num(d.pad_h) + ";\n";
  b += "  const int ixb = ox * " + num(d.stride_w) + " - " + num(d.pad_w) + ";\n";
  // int8 in float: with x_zero in the stored range, every product (x − z_x)(w − z_w) is at most
  // 255² in magnitude and a window of at most 258 of them sums below 2^24, so float accumulates
  // the same integers exactly, at the speed of fp32's window (an int32 multiply per tap made
  // int8 several times slower than fp32 on MobileNet's depthwise layers, PoCL). Other zero points take the
  // int32 window.
  const bool in_float = d.type == DataType::kInt8Q && d.kernel_h * d.kernel_w <= 258;
  b += "  const $global Wstore* wc = wt + ch * " + num(d.kernel_h * d.kernel_w) + ";\n";
  if (q) b += "  const Atype wzc = wz[ch];\n";
  // Each window column: inside the input or not, and a safe offset.
  for (int kx = 0; kx < d.kernel_w; ++kx) {
    const std::string c = num(kx);
    b += "  const int ix" + c + " = ixb + " + num(kx * d.dilation_w) + ";\n";
    b += "  const int cok" + c + " = ix" + c + " >= 0 && ix" + c + " < " + num(d.width) + ";\n";
    b += "  const int cix" + c + " = cok" + c + " ? ix" + c + " : 0;\n";
  }
  for (int t = 0; t < rows; ++t) b += "  Atype acc" + num(t) + " = 0;\n";
  // The window's weights (minus the channel's zero point), accumulators, and the input rows of
  // the block, each multiplied into the output rows t whose window row ky meets it
  // (r = t·sh + ky·dh); `fl`: in float (names f…), else in Atype.
  auto window = [&](bool check_rows, bool fl) {
    const std::string T = fl ? "float" : "Atype", f = fl ? "f" : "";
    std::string s;
    for (int r = 0; r < in_rows; ++r) {
      const std::string uses = DepthwiseRowUses(d, rows, r, f);
      if (uses.empty()) continue;
      s += "    {\n";
      if (check_rows) {
        s += "      const int iy = iyb + " + num(r) + ";\n";
        s += "      const int rok = iy >= 0 && iy < " + num(d.height) + ";\n";
        s += "      const int ro = (rok ? iy : 0) * " + num(d.width) + ";\n";
      } else {
        s += "      const int ro = (iyb + " + num(r) + ") * " + num(d.width) + ";\n";
      }
      for (int kx = 0; kx < d.kernel_w; ++kx) {
        const std::string c = num(kx);
        const std::string ok = check_rows ? "rok && cok" + c : "cok" + c;
        s += "      const " + T + " " + f + "v" + c + " = " + ok + " ? (" + T +
             ")XV(Dtype_LOAD(xc, ro + cix" + c + ")) : (" + T + ")0;\n";
      }
      s += uses + "    }\n";
    }
    return s;
  };
  auto block = [&](bool fl) {
    const std::string T = fl ? "float" : "Atype", f = fl ? "f" : "";
    std::string s;
    for (int ky = 0; ky < d.kernel_h; ++ky)
      for (int kx = 0; kx < d.kernel_w; ++kx) {
        const std::string i = num(ky * d.kernel_w + kx);
        s += "  const " + T + " " + f + "w" + num(ky) + "_" + num(kx) + " = (" + T +
             ")((Atype)WLOAD(wc, " + i + ")" + (q ? " - wzc" : "") + ");\n";
      }
    if (fl)
      for (int t = 0; t < rows; ++t) s += "  float facc" + num(t) + " = 0.0f;\n";
    s += "  if (iyb >= 0 && iyb + " + num(in_rows - 1) + " < " + num(d.height) + ") {\n" +
         window(false, fl) + "  } else {\n" + window(true, fl) + "  }\n";
    if (fl)
      for (int t = 0; t < rows; ++t) s += "  acc" + num(t) + " = (Atype)facc" + num(t) + ";\n";
    return s;
  };
  if (in_float)
    b += "  if (x_zero >= 0 && x_zero <= 255) {\n" + block(true) + "  } else {\n" + block(false) +
         "  }\n";
  else
    b += block(false);
  b += "  $global Dtype* yc = y + nc * " + num(long(oh) * ow) + " + ox;\n";
  if (d.residual) b += "  const $global Dtype* rc = res + nc * " + num(long(oh) * ow) + " + ox;\n";
  if (d.bias) b += "  const Btype bc = bias[ch];\n";
  if (q) b += "  const int rqm = rq[2 * ch], rqs = rq[2 * ch + 1];\n";
  for (int t = 0; t < rows; ++t) {
    const std::string at = "(oy0 + " + num(t) + ") * " + num(ow);
    // Rows past the output exist only in a last, partial block.
    std::string s = oh % rows == 0 ? "  {\n" : "  if (oy0 + " + num(t) + " < " + num(oh) + ") {\n";
    if (q) {
      s += ScalarInt8Output(d, "acc" + num(t) + (d.bias ? " + bc" : ""), "rc", "yc", at, 4);
    } else {
      s += "    float v = acc" + num(t) + (d.bias ? " + bc" : "") + ";\n";
      if (d.residual) s += "    v += (float)Dtype_LOAD(rc, " + at + ");\n";
      if (d.relu) s += "    v = v > 0.0f ? v : 0.0f;\n";
      s += "    Dtype_STORE(yc, " + at + ", v);\n";
    }
    s += "  }\n";
    b += s;
  }
  k.Body(b);
  return w.Source();
}

}  // namespace mpcaffe::libdnn
