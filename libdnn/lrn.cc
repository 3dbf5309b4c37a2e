// libdnn/lrn.cc — the across-channel LRN kernels (fp32/fp16 forward, fp32 backward), their
// launches and host references.
#include "libdnn/lrn.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "codegen/elementwise.h"
#include "codegen/vector_words.h"
#include "device/error.h"
#include "libdnn/kernel_config.h"
#include "libdnn/typed_host.h"

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
  if (type != DataType::kFloat32 && type != DataType::kFloat16 && type != DataType::kInt8Q &&
      type != DataType::kInt16Q)
    fail("only fp32, fp16, int8 and int16 are supported");
  if (IsQuantized(type) && !(quant.x_scale > 0 && quant.y_scale > 0 &&
                             std::isfinite(quant.x_scale) && std::isfinite(quant.y_scale)))
    fail("a quantized LRN needs positive input and output scales, got " +
         std::to_string(quant.x_scale) + " and " + std::to_string(quant.y_scale));
  for (auto [name, v] : {std::pair<const char*, int>{"batch", batch},
                         {"channels", channels},
                         {"height", height},
                         {"width", width},
                         {"local_size", local_size}})
    if (v <= 0) fail(host::Field(name, v) + " must be positive");
  if (local_size % 2 == 0) fail("local_size must be odd (as in Caffe)");
  if (local_size > 63) fail("local_size above 63 is not supported (the window is unrolled)");
  if (!std::isfinite(alpha) || !std::isfinite(beta) || !std::isfinite(k))
    fail("alpha, beta and k must be finite");
  if (double(count()) >= 2147483647.0) fail("tensors beyond 2^31 elements are not supported");
}

std::string Lrn::ForwardKernelName(DataType type) { return std::string("lrn_fwd_") + Name(type); }
std::string Lrn::BackwardKernelName() { return "lrn_bwd_fp32"; }

// Work-groups walk rows (image, channel) in a loop the same for the whole group, each row's
// window of local_size channels unrolled (uniform branches drop the channels outside; adding
// nothing for them keeps the reference's order of additions). On OpenCL a work-item takes
// `lanes` neighbouring pixels as one float vector (PoCL does not vectorize across work-items
// here: see the lrn_vector launch's provenance); a row's last vector overlaps its neighbour, so
// rows of fewer pixels than lanes, and CUDA, use the scalar form.
std::string Lrn::ForwardSource(const KernelTarget& target, DataType type, int local_size,
                              float beta, int lanes) {
  if (local_size <= 0 || local_size % 2 == 0 || local_size > 63)
    throw Error("LRN kernel: local_size " + std::to_string(local_size) + " must be odd, 1 to 63");
  if (lanes != 8 && lanes != 16)
    throw Error("LRN kernel: " + std::to_string(lanes) + " vector lanes (8 or 16)");
  const std::string L = std::to_string(lanes);
  KernelWriter w(target, "lrn_forward");
  w.AddType("Dtype", type);
  w.Define("LRN_PRE", std::to_string((local_size - 1) / 2));
  const bool half = type == DataType::kFloat16, quantized = IsQuantized(type);
  auto body = [&](bool vec) {
    const VectorWords vw(target);  // (its words are asked for only where vec)
    const std::string F = vec ? vw.Type("float", lanes) : "float";
    // Quantized values enter and leave as the convert kernels around an fp32 LRN would
    // dequantize and quantize them: the same bits, without the two passes and the fp32 blobs.
    auto load = [&](const std::string& at) {
      if (quantized)
        return vec ? VectorDequantizeText(target, "x + " + at, "x_scale", "x_zero", lanes)
                   : DequantizeText("Dtype_LOAD(x, " + at + ")", "x_scale", "x_zero");
      if (!vec) return "(float)Dtype_LOAD(x, " + at + ")";
      return half ? vw.LoadHalf(lanes, "x + " + at) : vw.Load(lanes, "x + " + at);
    };
    std::string b = vec ? "  const int vecs = (HW + " + std::to_string(lanes - 1) + ") / " + L +
                              ";\n  const int v = $global_id(0);\n"
                              "  const int p0 = v * " + L + " + " + L + " <= HW ? v * " + L +
                              " : HW - " + L + ";  // the last vector overlaps its neighbour\n"
                              "  const int live = v < vecs;\n"
                        : R"(  const int p = $global_id(0);
  const int p0 = p < HW ? p : HW - 1;
  const int live = p < HW;
)";
    b += "  for (int row = $group_id(1); row < rows; row += $num_groups(1)) {\n";
    b += "    const int c = row % C;\n";
    b += "    const int base = (row - c) * HW + p0;  // channel 0 of this image\n";
    b += "    const int at = base + c * HW;\n";
    b += "    " + F + " sq = (" + F + ")(0.0f);\n";
    for (int t = 0; t < local_size; ++t) {
      b += "    if (c - LRN_PRE + " + std::to_string(t) + " >= 0 && c - LRN_PRE + " +
           std::to_string(t) + " < C) {\n";
      b += "      const " + F + " xv = " + load("base + (c - LRN_PRE + " + std::to_string(t) + ") * HW") +
           ";\n      sq += xv * xv;\n    }\n";
    }
    b += "    const " + F + " s = k + alpha_over_size * sq;\n";
    if (beta == 0.75f) {
      // s^−3/4 = r·√r with r = 1/√s: square roots and a division are single vector
      // instructions where exp2 and log2 are polynomials, and round no worse.
      b += "    const " + F + " r = 1.0f / sqrt(s);\n";
      b += "    const " + F + " out = " + load("at") + " * (r * sqrt(r));\n";
    } else {
      // s^−β as exp2(−β·log2 s): PoCL's pow is a scalar library call (docs/BENCHMARKS.md,
      // "Default configurations"); both are accurate to a few ulp.
      b += "    const " + F + " out = " + load("at") + " * exp2(-beta * log2(s));\n";
    }
    b += "    if (live) {\n";
    if (vec) {
      b += "      if (has_scale) " + vw.Store(lanes, "s", "scale + at") + ";\n";
      if (quantized)
        b += VectorQuantizeStoreText(w, type, "Dtype", "out", "y_scale", "y_zero", "y + at",
                                     lanes);
      else
        b += "      " +
             (half ? vw.StoreHalf(lanes, "out", "y + at") : vw.Store(lanes, "out", "y + at")) +
             ";\n";
    } else {
      b += "      if (has_scale) scale[at] = s;\n";
      b += quantized ? QuantizeStoreText("Dtype", "out", "y_scale", "y_zero", "y", "at")
                     : "      Dtype_STORE(y, at, out);\n";
    }
    b += "    }\n  }\n";
    return b;
  };
  auto declare = [&](const std::string& name, bool vec) {
    w.Kernel(name)
        .In("Dtype", "x")
        .Out("Dtype", "y")
        .Out("float", "scale")
        .Value("int", "rows")
        .Value("int", "C")
        .Value("int", "HW")
        .Value("float", "alpha_over_size")
        .Value("float", "beta")
        .Value("float", "k")
        .Value("int", "has_scale")
        .Value("float", "x_scale")
        .Value("int", "x_zero")
        .Value("float", "y_scale")
        .Value("int", "y_zero")
        .Body(body(vec));
  };
  declare(ForwardKernelName(type), false);
  if (target.vector_builtins) declare(ForwardKernelName(type) + "_v" + L, true);
  return w.Source();
}

std::string Lrn::BackwardSource(const KernelTarget& target) {
  KernelWriter w(target, "lrn_backward");
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

namespace {

// About a thousand work-groups (PoCL pays per group), each walking rows of its pixel columns:
// vector work-items in groups of 8, scalar ones in the 1-D launch's groups.
const DefaultsTable<RowGroups, LrnDesc>& LrnVectorLaunch() {
  static const DefaultsTable<RowGroups, LrnDesc> table = {
      {"every device",
       [](const TargetProfile&, const LrnDesc&) { return true; },
       {8, 1024},
       "AlexNet's norm1 at batch 16 side by side with the per-pixel kernel, PoCL, loaded, "
       "2026-11-23 (git 9a87926; docs/BENCHMARKS.md, \"Default configurations\")"},
  };
  return table;
}

const DefaultsTable<RowGroups, LrnDesc>& LrnScalarLaunch() {
  static const DefaultsTable<RowGroups, LrnDesc> table = {
      {"every device",
       [](const TargetProfile&, const LrnDesc&) { return true; },
       {int(kLaunch1DLocalSize), 1024},
       "as lrn_vector's, 2026-11-23 (git 9a87926); the 1-D launch's work-group size "
       "(kLaunch1DLocalSize)"},
  };
  return table;
}

}  // namespace

const std::vector<LrnForwardFamily>& LrnForwardFamilies() {
  // 16 lanes where 16 floats fill one register: the square roots and the division of s^−3/4
  // take one instruction per 16 pixels instead of per 8, and they bound the kernel (AlexNet's
  // norm1 and norm2: docs/BENCHMARKS.md, "Default configurations"). Both vector families take
  // the same launch: work-groups of 8 vectors.
  static const std::vector<LrnForwardFamily> families = {
      {"lrn_vector16", 16,
       [](const LrnDesc& d, const TargetProfile& p) {
         return p.vector_builtins && p.sixteen_lane_registers && d.height * d.width >= 16;
       },
       LrnVectorLaunch},
      {"lrn_vector", 8,
       [](const LrnDesc& d, const TargetProfile& p) {
         return p.vector_builtins && d.height * d.width >= 8;
       },
       LrnVectorLaunch},
      {"lrn", 0, [](const LrnDesc&, const TargetProfile&) { return true; }, LrnScalarLaunch},
  };
  return families;
}

const LrnForwardFamily& LrnForwardFamilyFor(const LrnDesc& desc, const TargetProfile& profile) {
  return FirstFamilyApplying(LrnForwardFamilies(), desc, profile, "LRN " + desc.ToString());
}

Lrn::Lrn(Device& device, const LrnDesc& desc) : device_(&device), desc_(desc) {
  desc_.Validate();
  const KernelTarget target = KernelTarget::Of(device);
  const TargetProfile profile = TargetProfile::Of(device.info());
  // The first family that applies and MPCAFFE_KERNEL_CONFIG does not turn off.
  const auto [family, launch] =
      FirstRowFamily(LrnForwardFamilies(), desc_, profile, "LRN " + desc_.ToString());
  lanes_ = family->lanes;
  launch_ = launch.launch;
  ProgramHints hints;
  hints.local_sizes = {{kLaunch1DLocalSize, 1, 1}, {8, 1, 1}};  // scalar, vector launches
  forward_ = device
                 .GetProgram(ForwardSource(target, desc_.type, desc_.local_size, desc_.beta,
                                           lanes_ ? lanes_ : 8),
                             "", hints)
                 ->GetKernel(ForwardKernelName(desc_.type) +
                             (lanes_ ? "_v" + std::to_string(lanes_) : ""));
  if (KernelChoiceLogActive())  // for `mpcaffe time --explain`
    NoteKernelChoice({family->name, launch_.ToString(), launch.source, desc_.ToString()});
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
  if (scale && IsQuantized(d.type))
    throw Error("LRN " + d.ToString() + ": a quantized LRN keeps no scale (no backward)");
  const BufferRef s = scale ? scale : output;  // any valid buffer when unused
  const int hw = d.height * d.width, rows = d.batch * d.channels;
  forward_.ArgBuffer(input.mem, input.byte_offset, es)
      .ArgBuffer(output.mem, output.byte_offset, es)
      .ArgBuffer(s.mem, scale ? s.byte_offset : 0, 4)
      .Arg(int32_t{rows})
      .Arg(int32_t{d.channels})
      .Arg(int32_t{d.height * d.width})
      .Arg(d.alpha / d.local_size)
      .Arg(d.beta)
      .Arg(d.k)
      .Arg(int32_t{scale ? 1 : 0})
      .Arg(d.quant.x_scale)
      .Arg(int32_t{d.quant.x_zero})
      .Arg(d.quant.y_scale)
      .Arg(int32_t{d.quant.y_zero});
  const RowGroups& launch = launch_;
  const size_t local = size_t(launch.width);
  const size_t items = lanes_ ? (size_t(hw) + lanes_ - 1) / lanes_ : size_t(hw);
  const size_t columns = (items + local - 1) / local;
  const size_t row_groups =
      std::max<size_t>(1, std::min<size_t>(rows, size_t(launch.groups) / columns));
  return forward_.Launch({columns * local, row_groups, 1}, {local, 1, 1}, queue);
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
  const bool quantized = IsQuantized(d.type);
  // Quantized: the dequantized inputs (DequantizeValue: float, as the convert kernels), the
  // output quantized (QuantizeValue).
  auto load = [&](size_t at) -> double {
    return quantized ? quant::DequantizeValue(host::LoadQ(d.type, input, at), d.quant.x_scale,
                                              d.quant.x_zero)
                     : host::LoadF(d.type, input, at);
  };
  for (int n = 0; n < d.batch; ++n)
    for (int p = 0; p < hw; ++p)
      for (int c = 0; c < d.channels; ++c) {
        double sq = 0.0;
        for (int j = std::max(c - pre, 0); j < std::min(c - pre + d.local_size, d.channels); ++j) {
          const double v = load((size_t(n) * d.channels + j) * hw + p);
          sq += v * v;
        }
        const double s = double(d.k) + double(d.alpha) / d.local_size * sq;
        const size_t at = (size_t(n) * d.channels + c) * hw + p;
        if (scale) scale[at] = static_cast<float>(s);
        const float y = static_cast<float>(load(at) * std::pow(s, -double(d.beta)));
        const DataTypeTraits& t = TraitsOf(d.type);
        if (quantized)
          host::StoreQ(d.type, output, at,
                       quant::QuantizeValue(y, d.quant.y_scale, d.quant.y_zero, int32_t(t.qmin),
                                            int32_t(t.qmax)));
        else
          host::StoreF(d.type, output, at, y);
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
