// libdnn/conv_im2col_source.cc — the im2col kernel texts: conv_im2col_<type> (the forward GEMM
// path, the backward pass and the Im2col layer) and, for quantized types, conv_im2col_rq_<type>,
// which requantizes each column value from the input's scale and zero point to another's.
#include <functional>
#include <string>

#include "device/error.h"
#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn {

namespace conv_internal {

std::string Im2colKernelName(DataType type) { return std::string("conv_im2col_") + Name(type); }

namespace {

/// The im2col walk of conv_im2col_<type> and conv_im2col_rq_<type> over NC images side by side:
/// column row kk = (c·KH + ky)·KW + kx holds image n's OH·OW values at (kk·NC + n)·OH·OW, image
/// n of x starts at n·xs. A work-item per (row, image) pair (rows = Cg·KH·KW·NC): the window tap
/// is worked out once, and the output columns that read inside the input, [lo, hi), are the
/// same for every output row — padding, a copy (contiguous at stride 1), padding, without a
/// test per value. `col(v)` is the text stored for a value v (the padding value is `pad`).
std::string Im2colBody(const std::function<std::string(const std::string&)>& col) {
  const std::string pad = col("(Dtype_c)pad");
  return R"(  $loop(r, rows) {
    const int n = r % NC;
    const int kk = r / NC;
    const int kx = kk % KW;
    const int ky = (kk / KW) % KH;
    const int c = kk / (KW * KH);
    const int plane = n * xs + c * H * W;
    int out = r * OH * OW;
    const int b = pw - kx * dw;  // ix = ox·sw − b
    const int lo = min(OW, b > 0 ? (b + sw - 1) / sw : 0);
    const int hi = max(lo, W - 1 + b < 0 ? 0 : min(OW, (W - 1 + b) / sw + 1));
    for (int oy = 0; oy < OH; ++oy, out += OW) {
      const int iy = oy * sh - ph + ky * dh;
      if (iy < 0 || iy >= H) {
        for (int ox = 0; ox < OW; ++ox) Dtype_STORE(col, out + ox, )" + pad + R"();
        continue;
      }
      const int in = plane + iy * W - b;
      for (int ox = 0; ox < lo; ++ox) Dtype_STORE(col, out + ox, )" + pad + R"();
      if (sw == 1) {
        for (int ox = lo; ox < hi; ++ox) Dtype_STORE(col, out + ox, )" +
         col("Dtype_LOAD(x, in + ox)") + R"();
      } else {
        for (int ox = lo; ox < hi; ++ox) Dtype_STORE(col, out + ox, )" +
         col("Dtype_LOAD(x, in + ox * sw)") + R"();
      }
      for (int ox = hi; ox < OW; ++ox) Dtype_STORE(col, out + ox, )" + pad + R"();
    }
  }
)";
}

/// Kernel `name` with im2col's arguments (x, col, then the int window and `pad`).
KernelBuilder& Im2colSignature(KernelWriter& w, const std::string& name) {
  auto& k = w.Kernel(name).In("Dtype", "x").Out("Dtype", "col");
  for (const char* arg :
       {"H", "W", "KH", "KW", "sh", "sw", "ph", "pw", "dh", "dw", "OH", "OW", "NC", "xs", "rows",
        "pad"})
    k.Value("int", arg);
  return k;
}

}  // namespace

void AddIm2colKernel(KernelWriter& w, DataType type) {
  Im2colSignature(w, Im2colKernelName(type))
      .Body(Im2colBody([](const std::string& v) { return v; }));
}

std::string Im2colRequantKernelName(DataType type) {
  return std::string("conv_im2col_rq_") + Name(type);
}

std::string Im2colRequantSource(const KernelTarget& target, DataType type) {
  if (!IsQuantized(type))
    throw Error(std::string("im2col with requantization: ") + Name(type) + " is not quantized");
  KernelWriter w(target, "im2col_rq");
  w.AddType("Dtype", type);
  w.UseRequant(type);
  // x's code v as y's: y_zero + (v − x_zero)·s_x/s_y, saturated; `pad` is x_zero, so the
  // padding becomes y_zero (real 0) exactly.
  w.Define("MP_COL(v)", "Dtype_SAT(y_zero + MP_REQUANT((int)(v) - pad, mult, shift))");
  Im2colSignature(w, Im2colRequantKernelName(type))
      .Value("int", "y_zero")
      .Value("int", "mult")
      .Value("int", "shift")
      .Body(Im2colBody([](const std::string& v) { return "MP_COL(" + v + ")"; }));
  return w.Source();
}

std::string Im2colSource(const KernelTarget& target, DataType type) {
  KernelWriter w(target, "im2col");
  w.AddType("Dtype", type);
  AddIm2colKernel(w, type);
  return w.Source();
}

}  // namespace conv_internal

}  // namespace mpcaffe::libdnn
