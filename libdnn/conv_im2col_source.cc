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

/// The im2col walk of conv_im2col_<type> and conv_im2col_rq_<type>: `col(v)` is the text stored
/// for a value v (the padding value is `pad`).
std::string Im2colBody(const std::function<std::string(const std::string&)>& col) {
  return R"(  $loop(r, rows) {
    const int oy = r % OH;
    const int kk = r / OH;  // (c·KH + ky)·KW + kx
    const int kx = kk % KW;
    const int ky = (kk / KW) % KH;
    const int c = kk / (KW * KH);
    const int iy = oy * sh - ph + ky * dh;
    const int out = kk * OH * OW + oy * OW;
    if (iy < 0 || iy >= H) {
      for (int ox = 0; ox < OW; ++ox) Dtype_STORE(col, out + ox, )" +
         col("(Dtype_c)pad") + R"();
      continue;
    }
    const int in = (c * H + iy) * W;
    for (int ox = 0; ox < OW; ++ox) {
      const int ix = ox * sw - pw + kx * dw;
      Dtype_STORE(col, out + ox, )" +
         col("ix >= 0 && ix < W ? Dtype_LOAD(x, in + ix) : (Dtype_c)pad") + R"();
    }
  }
)";
}

/// Kernel `name` with im2col's arguments (x, col, then the int window and `pad`).
KernelBuilder& Im2colSignature(KernelWriter& w, const std::string& name) {
  auto& k = w.Kernel(name).In("Dtype", "x").Out("Dtype", "col");
  for (const char* arg :
       {"H", "W", "KH", "KW", "sh", "sw", "ph", "pw", "dh", "dw", "OH", "OW", "rows", "pad"})
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
