// libdnn/lrn.cc — the across-channel LRN kernels (fp32/fp16 forward, fp32 backward), their
// launches and host references.
#include "libdnn/lrn.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "device/error.h"
#include "libdnn/conv_host.h"

namespace mpcaffe::libdnn {

namespace {

void CheckBuffer(const LrnDesc& d, const char* what, const BufferRef& b, size_t element_bytes) {
  if (!b) throw Error("LRN " + d.ToString() + ": " + what + " buffer is missing");
  if (b.byte_offset + d.count() * element_bytes > b.mem->bytes())
    throw Error("LRN " + d.ToString() + ": " + what + " buffer is too small (" +
                std::to_string(d.count() * element_bytes) + " bytes needed past offset " +
                std::to_string(b.byte_offset) + ")");
}

}  // namespace

size_t LrnDesc::count() const { return size_t(batch) * channels * height * width; }

std::string LrnDesc::ToString() const {
  std::ostringstream s;
  s << Name(type) << " n" << batch << " c" << channels << " h" << height << " w" << width << " size"
    << local_size << " alpha" << alpha << " beta" << beta << " k" << k;
  return s.str();
}

void LrnDesc::Validate() const {
  auto fail = [&](const std::string& what) { throw Error("LRN " + ToString() + ": " + what); };
  if (type != DataType::kFloat32 && type != DataType::kFloat16)
    fail("only fp32 and fp16 are supported (quantized LRN: convert to fp16 or fp32 first)");
  for (auto [name, v] : {std::pair<const char*, int>{"batch", batch},
                         {"channels", channels},
                         {"height", height},
                         {"width", width},
                         {"local_size", local_size}})
    if (v <= 0) fail(host::Field(name, v) + " must be positive");
  if (local_size % 2 == 0) fail("local_size must be odd (as in Caffe)");
  if (!std::isfinite(alpha) || !std::isfinite(beta) || !std::isfinite(k))
    fail("alpha, beta and k must be finite");
  if (double(count()) >= 2147483647.0) fail("tensors beyond 2^31 elements are not supported");
}

std::string Lrn::ForwardKernelName(DataType type) { return std::string("lrn_fwd_") + Name(type); }
std::string Lrn::BackwardKernelName() { return "lrn_bwd_fp32"; }

// A work-item per (image, pixel) walks the channels: neighbouring work-items read neighbouring
// pixels, so loads are contiguous across a work-group.
std::string Lrn::ForwardSource(const KernelTarget& target, DataType type) {
  KernelWriter w(target);
  w.AddType("Dtype", type);
  w.Kernel(ForwardKernelName(type))
      .In("Dtype", "x")
      .Out("Dtype", "y")
      .Out("float", "scale")
      .Value("int", "total")
      .Value("int", "C")
      .Value("int", "HW")
      .Value("int", "size")
      .Value("float", "alpha_over_size")
      .Value("float", "beta")
      .Value("float", "k")
      .Value("int", "has_scale")
      .Body(R"(  const int pre = (size - 1) / 2;
  $loop(i, total) {
    const int n = i / HW;
    const int base = n * C * HW + (i - n * HW);
    for (int c = 0; c < C; ++c) {
      const int c0 = c - pre > 0 ? c - pre : 0;
      const int c1 = c - pre + size < C ? c - pre + size : C;
      float sq = 0.0f;
      for (int j = c0; j < c1; ++j) {
        const float v = Dtype_LOAD(x, base + j * HW);
        sq += v * v;
      }
      const float s = k + alpha_over_size * sq;
      const int at = base + c * HW;
      if (has_scale) scale[at] = s;
      // s^−β as exp2(−β·log2 s): PoCL's pow is a scalar library call (AlexNet's norm1 took
      // 11.8 ms with it, 2.2 ms with this); both are accurate to a few ulp.
      Dtype_STORE(y, at, (float)Dtype_LOAD(x, at) * exp2(-beta * log2(s)));
    }
  }
)");
  return w.Source();
}

std::string Lrn::BackwardSource(const KernelTarget& target) {
  KernelWriter w(target);
  w.Kernel(BackwardKernelName())
      .In("float", "x")
      .In("float", "y")
      .In("float", "top")
      .In("float", "scale")
      .Out("float", "bottom")
      .Value("int", "total")
      .Value("int", "C")
      .Value("int", "HW")
      .Value("int", "size")
      .Value("float", "ratio")
      .Value("float", "beta")
      .Body(R"(  const int pre = (size - 1) / 2;
  const int post = size - 1 - pre;
  $loop(i, total) {
    const int n = i / HW;
    const int base = n * C * HW + (i - n * HW);
    for (int c = 0; c < C; ++c) {
      // Outputs c' whose window [c' − pre, c' + post] holds c: c − post ≤ c' ≤ c + pre.
      const int c0 = c - post > 0 ? c - post : 0;
      const int c1 = c + pre + 1 < C ? c + pre + 1 : C;
      float acc = 0.0f;
      for (int j = c0; j < c1; ++j) {
        const int at = base + j * HW;
        acc += top[at] * y[at] / scale[at];
      }
      const int at = base + c * HW;
      bottom[at] = top[at] * exp2(-beta * log2(scale[at])) - ratio * x[at] * acc;
    }
  }
)");
  return w.Source();
}

Lrn::Lrn(Device& device, const LrnDesc& desc) : device_(&device), desc_(desc) {
  desc_.Validate();
  const KernelTarget target = KernelTarget::Of(device);
  forward_ =
      device.GetProgram(ForwardSource(target, desc_.type), "", ProgramHints::OneDimensional())
          ->GetKernel(ForwardKernelName(desc_.type));
  if (desc_.type == DataType::kFloat32)
    backward_ = device.GetProgram(BackwardSource(target), "", ProgramHints::OneDimensional())
                    ->GetKernel(BackwardKernelName());
}

Event Lrn::Forward(const BufferRef& input, const BufferRef& output, const BufferRef& scale,
                   Queue* queue) {
  const LrnDesc& d = desc_;
  const size_t es = SizeOf(d.type);
  CheckBuffer(d, "input", input, es);
  CheckBuffer(d, "output", output, es);
  if (scale) CheckBuffer(d, "scale", scale, 4);
  const BufferRef s = scale ? scale : output;  // any valid buffer when unused
  const int total = d.batch * d.height * d.width;
  forward_.ArgBuffer(input.mem, input.byte_offset, es)
      .ArgBuffer(output.mem, output.byte_offset, es)
      .ArgBuffer(s.mem, scale ? s.byte_offset : 0, 4)
      .Arg(int32_t{total})
      .Arg(int32_t{d.channels})
      .Arg(int32_t{d.height * d.width})
      .Arg(int32_t{d.local_size})
      .Arg(d.alpha / d.local_size)
      .Arg(d.beta)
      .Arg(d.k)
      .Arg(int32_t{scale ? 1 : 0});
  return forward_.Launch1D(size_t(total), queue);
}

Event Lrn::Backward(const BufferRef& input, const BufferRef& output, const BufferRef& top_diff,
                    const BufferRef& scale, const BufferRef& bottom_diff, Queue* queue) {
  const LrnDesc& d = desc_;
  if (d.type != DataType::kFloat32) throw Error("LRN " + d.ToString() + ": backward is fp32 only");
  for (auto [what, b] : {std::pair<const char*, const BufferRef*>{"input", &input},
                         {"output", &output},
                         {"top_diff", &top_diff},
                         {"scale", &scale},
                         {"bottom_diff", &bottom_diff}})
    CheckBuffer(d, what, *b, 4);
  const int total = d.batch * d.height * d.width;
  for (const BufferRef* b : {&input, &output, &top_diff, &scale, &bottom_diff})
    backward_.ArgBuffer(b->mem, b->byte_offset, 4);
  backward_.Arg(int32_t{total})
      .Arg(int32_t{d.channels})
      .Arg(int32_t{d.height * d.width})
      .Arg(int32_t{d.local_size})
      .Arg(float(2.0 * d.alpha * d.beta / d.local_size))
      .Arg(d.beta);
  return backward_.Launch1D(size_t(total), queue);
}

void LrnForwardReference(const LrnDesc& d, const void* input, void* output, float* scale) {
  d.Validate();
  const int hw = d.height * d.width, pre = (d.local_size - 1) / 2;
  for (int n = 0; n < d.batch; ++n)
    for (int p = 0; p < hw; ++p)
      for (int c = 0; c < d.channels; ++c) {
        double sq = 0.0;
        for (int j = std::max(c - pre, 0); j < std::min(c - pre + d.local_size, d.channels); ++j) {
          const double v = host::LoadF(d.type, input, (size_t(n) * d.channels + j) * hw + p);
          sq += v * v;
        }
        const double s = double(d.k) + double(d.alpha) / d.local_size * sq;
        const size_t at = (size_t(n) * d.channels + c) * hw + p;
        if (scale) scale[at] = static_cast<float>(s);
        host::StoreF(
            d.type, output, at,
            static_cast<float>(host::LoadF(d.type, input, at) * std::pow(s, -double(d.beta))));
      }
}

void LrnBackwardReference(const LrnDesc& d, const float* x, const float* y, const float* top,
                          const float* scale, float* bottom) {
  d.Validate();
  const int hw = d.height * d.width, pre = (d.local_size - 1) / 2;
  const int post = d.local_size - 1 - pre;
  const double ratio = 2.0 * d.alpha * d.beta / d.local_size;
  for (int n = 0; n < d.batch; ++n)
    for (int p = 0; p < hw; ++p)
      for (int c = 0; c < d.channels; ++c) {
        double acc = 0.0;
        for (int j = std::max(c - post, 0); j < std::min(c + pre + 1, d.channels); ++j) {
          const size_t at = (size_t(n) * d.channels + j) * hw + p;
          acc += double(top[at]) * y[at] / scale[at];
        }
        const size_t at = (size_t(n) * d.channels + c) * hw + p;
        bottom[at] = static_cast<float>(top[at] * std::pow(double(scale[at]), -double(d.beta)) -
                                        ratio * x[at] * acc);
      }
}

}  // namespace mpcaffe::libdnn
