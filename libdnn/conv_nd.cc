// libdnn/conv_nd.cc — the fp32 N-d convolution (conv_nd.h): BVLC's im2col_nd / col2im_nd as
// KernelWriter kernels whose axes and geometry are arguments (a small int buffer), around the
// LibDNN GEMMs the 2-d backward pass uses, and the host reference.
#include "libdnn/conv_nd.h"

#include <cstdint>

#include "device/error.h"

namespace mpcaffe::libdnn {
namespace {

BufferRef Offset(const BufferRef& b, size_t elements) {
  return BufferRef(b.mem, b.byte_offset + elements * sizeof(float));
}

std::string Join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v[i]);
  return s;
}

void CheckBuffer(const ConvNdDesc& d, const char* what, const BufferRef& b, size_t count) {
  if (!b) throw Error("convolution " + d.ToString() + ": " + what + " buffer is missing");
  if (b.mem->bytes() < b.byte_offset + count * sizeof(float))
    throw Error("convolution " + d.ToString() + ": " + what + " buffer holds fewer than " +
                std::to_string(count) + " floats");
}

}  // namespace

int ConvNdDesc::out(int a) const {
  const int64_t extent = int64_t{dilation[a]} * (kernel[a] - 1) + 1;
  return static_cast<int>((int64_t{in[a]} + 2 * int64_t{pad[a]} - extent) / stride[a] + 1);
}

int64_t ConvNdDesc::in_size() const {
  int64_t n = 1;
  for (int v : in) n *= v;
  return n;
}

int64_t ConvNdDesc::kernel_size() const {
  int64_t n = 1;
  for (int v : kernel) n *= v;
  return n;
}

int64_t ConvNdDesc::out_size() const {
  int64_t n = 1;
  for (int a = 0; a < axes(); ++a) n *= out(a);
  return n;
}

std::string ConvNdDesc::ToString() const {
  return "b" + std::to_string(batch) + " c" + std::to_string(channels) + " o" +
         std::to_string(out_channels) + " g" + std::to_string(groups) + " in " + Join(in) + " k " +
         Join(kernel) + " s " + Join(stride) + " p " + Join(pad) + " d " + Join(dilation);
}

void ConvNdDesc::Check() const {
  const size_t n = in.size();
  if (n == 0 || kernel.size() != n || stride.size() != n || pad.size() != n || dilation.size() != n)
    throw Error("convolution " + ToString() + ": every per-axis field needs one value per axis");
  if (batch < 0 || channels <= 0 || out_channels <= 0 || groups <= 0 || channels % groups ||
      out_channels % groups)
    throw Error("convolution " + ToString() + ": groups must divide the channels and outputs");
  for (size_t a = 0; a < n; ++a) {
    if (in[a] <= 0 || kernel[a] <= 0 || stride[a] <= 0 || dilation[a] <= 0 || pad[a] < 0)
      throw Error("convolution " + ToString() + ": axis " + std::to_string(a) +
                  " needs positive extent, kernel, stride and dilation and a pad ≥ 0");
    if (int64_t{in[a]} + 2 * int64_t{pad[a]} > INT32_MAX ||
        int64_t{dilation[a]} * (kernel[a] - 1) + 1 > INT32_MAX)
      throw Error("convolution " + ToString() + ": padded input or dilated kernel beyond 2^31");
    if (out(a) <= 0)
      throw Error("convolution " + ToString() +
                  ": the kernel does not fit the padded input on axis " + std::to_string(a));
  }
  // The kernels index one group's input, columns and output in int.
  const int64_t cg = channels / groups, ocg = out_channels / groups;
  if (cg * in_size() > INT32_MAX || cg * kernel_size() * out_size() > INT32_MAX ||
      ocg * out_size() > INT32_MAX)
    throw Error("convolution " + ToString() + ": one group's input, columns or output beyond 2^31");
}

std::string ConvolutionNd::Source(const KernelTarget& target) {
  KernelWriter w(target, "conv_nd");
  // g: in[D] out[D] kernel[D] stride[D] pad[D] dilation[D]. Axes are walked last to first, so
  // the flat indices decompose as C's row-major order.
  w.Kernel("conv_nd_im2col")
      .In("float", "im")
      .In("int", "g")
      .Out("float", "col")
      .Value("int", "D")
      .Value("int", "Ip")
      .Value("int", "Kp")
      .Value("int", "P")
      .Value("int", "n")
      .Body(R"(  $loop(i, n) {
    const int q = i % P;
    const int r = i / P;  // column row: c·Kp + flat window offset
    const int c = r / Kp;
    int kk = r % Kp, qq = q, off = 0, inner = 1, inside = 1;
    for (int a = D - 1; a >= 0; --a) {
      const int k = kk % g[2 * D + a];
      kk /= g[2 * D + a];
      const int o = qq % g[D + a];
      qq /= g[D + a];
      const int x = o * g[3 * D + a] - g[4 * D + a] + k * g[5 * D + a];
      if (x < 0 || x >= g[a]) inside = 0;
      off += x * inner;
      inner *= g[a];
    }
    col[i] = inside ? im[c * Ip + off] : 0.0f;
  }
)");
  // Each input element gathers the column entries that read it (no atomics).
  w.Kernel("conv_nd_col2im")
      .In("float", "col")
      .In("int", "g")
      .Out("float", "im")
      .Value("int", "D")
      .Value("int", "Ip")
      .Value("int", "Kp")
      .Value("int", "P")
      .Value("int", "n")
      .Body(R"(  $loop(i, n) {
    const int c = i / Ip;
    float v = 0.0f;
    for (int kk = 0; kk < Kp; ++kk) {
      int rest = kk, pos = i % Ip, q = 0, outer = 1, hit = 1;
      for (int a = D - 1; a >= 0 && hit; --a) {
        const int k = rest % g[2 * D + a];
        rest /= g[2 * D + a];
        const int x = pos % g[a];
        pos /= g[a];
        const int t = x + g[4 * D + a] - k * g[5 * D + a];
        const int o = t / g[3 * D + a];
        if (t < 0 || t % g[3 * D + a] || o >= g[D + a]) hit = 0;
        q += o * outer;
        outer *= g[D + a];
      }
      if (hit) v += col[(c * Kp + kk) * P + q];
    }
    im[i] = v;
  }
)");
  return w.Source();
}

ConvolutionNd::ConvolutionNd(Device& device, const ConvNdDesc& desc)
    : device_(&device), desc_(desc) {
  desc_.Check();
  const ConvNdDesc& d = desc_;
  cg_ = d.channels / d.groups;
  ocg_ = d.out_channels / d.groups;
  kc_ = static_cast<int>(cg_ * d.kernel_size());
  p_ = static_cast<int>(d.out_size());
  std::vector<int32_t> g;
  for (const std::vector<int>* v : {&d.in, &d.in, &d.kernel, &d.stride, &d.pad, &d.dilation})
    g.insert(g.end(), v->begin(), v->end());
  for (int a = 0; a < d.axes(); ++a) g[d.axes() + a] = d.out(a);
  geometry_ = device.Allocate(g.size() * sizeof(int32_t));
  device.CopyToDevice(g.data(), geometry_.get(), 0, g.size() * sizeof(int32_t));
  col_ = device.Allocate(size_t(kc_) * p_ * sizeof(float));
  auto program =
      device.GetProgram(Source(KernelTarget::Of(device)), "", ProgramHints::OneDimensional());
  im2col_ = program->GetKernel("conv_nd_im2col");
  col2im_ = program->GetKernel("conv_nd_col2im");
}

ConvolutionNd::~ConvolutionNd() = default;

void ConvolutionNd::Im2col(const BufferRef& x, Queue* queue) {
  im2col_.ArgBuffer(x.mem, x.byte_offset, 4)
      .ArgBuffer(geometry_.get(), 0, 4)
      .ArgBuffer(col_.get(), 0, 4);
  for (int64_t v : {int64_t{desc_.axes()}, desc_.in_size(), desc_.kernel_size(), int64_t{p_},
                    int64_t{kc_} * p_})
    im2col_.Arg(static_cast<int32_t>(v));
  im2col_.Launch1D(size_t(kc_) * p_, queue);
}

void ConvolutionNd::Forward(const BufferRef& x, const BufferRef& weights, const BufferRef& y,
                            Queue* queue) {
  const ConvNdDesc& d = desc_;
  CheckBuffer(d, "input", x, d.input_count());
  CheckBuffer(d, "weights", weights, d.weight_count());
  CheckBuffer(d, "output", y, d.output_count());
  // y_g (ocg × P) = W_g (ocg × kc) · col (kc × P). Each GEMM is built on first use: an inference
  // net compiles no backward kernels.
  if (!forward_)
    forward_ = std::make_unique<Gemm>(
        *device_, GemmDesc::Float(ocg_, p_, kc_, false, false, kc_, p_, p_));
  for (int n = 0; n < d.batch; ++n)
    for (int g = 0; g < d.groups; ++g) {
      Im2col(Offset(x, (size_t(n) * d.channels + size_t(g) * cg_) * d.in_size()), queue);
      GemmArgs a;
      a.a = Offset(weights, size_t(g) * ocg_ * kc_);
      a.b = BufferRef(col_.get(), 0);
      a.c = Offset(y, (size_t(n) * d.out_channels + size_t(g) * ocg_) * p_);
      forward_->Run(a, queue);
    }
}

void ConvolutionNd::BackwardData(const BufferRef& dy, const BufferRef& weights, const BufferRef& dx,
                                 Queue* queue) {
  const ConvNdDesc& d = desc_;
  CheckBuffer(d, "top_diff", dy, d.output_count());
  CheckBuffer(d, "weights", weights, d.weight_count());
  CheckBuffer(d, "bottom_diff", dx, d.input_count());
  // col (kc × P) = W_gᵀ · dy_g (ocg × P).
  if (!data_)
    data_ = std::make_unique<Gemm>(
        *device_, GemmDesc::Float(kc_, p_, ocg_, true, false, kc_, p_, p_));
  const int64_t elements = cg_ * d.in_size();
  for (int n = 0; n < d.batch; ++n)
    for (int g = 0; g < d.groups; ++g) {
      GemmArgs a;
      a.a = Offset(weights, size_t(g) * ocg_ * kc_);
      a.b = Offset(dy, (size_t(n) * d.out_channels + size_t(g) * ocg_) * p_);
      a.c = BufferRef(col_.get(), 0);
      data_->Run(a, queue);
      const BufferRef dst = Offset(dx, (size_t(n) * d.channels + size_t(g) * cg_) * d.in_size());
      col2im_.ArgBuffer(col_.get(), 0, 4)
          .ArgBuffer(geometry_.get(), 0, 4)
          .ArgBuffer(dst.mem, dst.byte_offset, 4);
      for (int64_t v : {int64_t{d.axes()}, d.in_size(), d.kernel_size(), int64_t{p_}, elements})
        col2im_.Arg(static_cast<int32_t>(v));
      col2im_.Launch1D(size_t(elements), queue);
    }
}

void ConvolutionNd::BackwardWeights(const BufferRef& dy, const BufferRef& x,
                                    const BufferRef& dweights, Queue* queue) {
  const ConvNdDesc& d = desc_;
  CheckBuffer(d, "top_diff", dy, d.output_count());
  CheckBuffer(d, "input", x, d.input_count());
  CheckBuffer(d, "weight_diff", dweights, d.weight_count());
  // dW_g (ocg × kc) += dy_g (ocg × P) · colᵀ.
  if (!weights_)
    weights_ = std::make_unique<Gemm>(
        *device_, GemmDesc::Float(ocg_, kc_, p_, false, true, p_, p_, kc_));
  for (int n = 0; n < d.batch; ++n)
    for (int g = 0; g < d.groups; ++g) {
      Im2col(Offset(x, (size_t(n) * d.channels + size_t(g) * cg_) * d.in_size()), queue);
      GemmArgs a;
      a.a = Offset(dy, (size_t(n) * d.out_channels + size_t(g) * ocg_) * p_);
      a.b = BufferRef(col_.get(), 0);
      a.c = Offset(dweights, size_t(g) * ocg_ * kc_);
      a.beta = 1.0f;  // accumulate over images (and into what the caller had)
      weights_->Run(a, queue);
    }
}

void ConvNdForwardReference(const ConvNdDesc& d, const float* x, const float* weights,
                            const float* bias, float* y) {
  d.Check();
  const int D = d.axes(), cg = d.channels / d.groups, ocg = d.out_channels / d.groups;
  const int64_t ip = d.in_size(), kp = d.kernel_size(), op = d.out_size();
  std::vector<int> o(D), k(D);
  for (int n = 0; n < d.batch; ++n)
    for (int oc = 0; oc < d.out_channels; ++oc) {
      const int g = oc / ocg;
      for (int64_t q = 0; q < op; ++q) {
        for (int64_t r = q, a = D - 1; a >= 0; --a)
          o[a] = static_cast<int>(r % d.out(int(a))), r /= d.out(int(a));
        double s = bias ? bias[oc] : 0.0;
        for (int c = 0; c < cg; ++c)
          for (int64_t kk = 0; kk < kp; ++kk) {
            int64_t off = 0;
            bool inside = true;
            for (int64_t r = kk, a = D - 1; a >= 0; --a)
              k[a] = static_cast<int>(r % d.kernel[a]), r /= d.kernel[a];
            for (int a = 0; a < D && inside; ++a) {
              const int64_t xi =
                  int64_t{o[a]} * d.stride[a] - d.pad[a] + int64_t{k[a]} * d.dilation[a];
              inside = xi >= 0 && xi < d.in[a];
              off = off * d.in[a] + xi;
            }
            if (!inside) continue;
            s += double(weights[(size_t(oc) * cg + c) * kp + kk]) *
                 x[(size_t(n) * d.channels + size_t(g) * cg + c) * ip + off];
          }
        y[(size_t(n) * d.out_channels + oc) * op + q] = static_cast<float>(s);
      }
    }
}

}  // namespace mpcaffe::libdnn
