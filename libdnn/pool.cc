// libdnn/pool.cc — the pooling kernels (max / average / global forward for every data type,
// fp32 backward), their launches and host references, following BVLC Caffe's geometry.
#include "libdnn/pool.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <vector>

#include "codegen/vector_words.h"
#include "device/error.h"
#include "libdnn/kernel_config.h"
#include "libdnn/pool_internal.h"
#include "libdnn/typed_host.h"
#include "quant/quant_params.h"

namespace mpcaffe::libdnn {

namespace {

const char* MethodName(PoolMethod m) { return m == PoolMethod::kMax ? "max" : "ave"; }

/// Effective geometry (global pooling resolved).
struct Geometry {
  int kh, kw, sh, sw, ph, pw, oh, ow;
};
Geometry GeometryOf(const PoolDesc& d) {
  if (d.global) return {d.height, d.width, 1, 1, 0, 0, 1, 1};
  return {d.kernel_h, d.kernel_w, d.stride_h, d.stride_w, d.pad_h, d.pad_w, d.out_h(), d.out_w()};
}

/// One output's window in Caffe's terms: [hs, he) × [ws, we) clipped to the input, and the
/// average divisor `count` (the window clipped to the padded input).
struct Window {
  int hs, he, ws, we, count;
};
Window WindowOf(const PoolDesc& d, const Geometry& g, int oy, int ox) {
  Window w;
  w.hs = oy * g.sh - g.ph;
  w.ws = ox * g.sw - g.pw;
  w.he = std::min(w.hs + g.kh, d.height + g.ph);
  w.we = std::min(w.ws + g.kw, d.width + g.pw);
  w.count = (w.he - w.hs) * (w.we - w.ws);
  w.hs = std::max(w.hs, 0);
  w.ws = std::max(w.ws, 0);
  w.he = std::min(w.he, d.height);
  w.we = std::min(w.we, d.width);
  return w;
}

void CheckBuffer(const PoolDesc& d, const char* what, const BufferRef& b, size_t count,
                 size_t element_bytes) {
  if (!b) throw Error("pooling " + d.ToString() + ": " + what + " buffer is missing");
  if (b.byte_offset + count * element_bytes > b.mem->bytes())
    throw Error("pooling " + d.ToString() + ": " + what + " buffer is too small (" +
                std::to_string(count * element_bytes) + " bytes needed past offset " +
                std::to_string(b.byte_offset) + ", allocation " + std::to_string(b.mem->bytes()) +
                ")");
}

// The shared head of forward and backward kernels: one output's window, as WindowOf.
const char* kWindowText = R"(    int hs = oy * sh - ph;
    int ws = ox * sw - pw;
    int he = hs + KH < H + ph ? hs + KH : H + ph;
    int we = ws + KW < W + pw ? ws + KW : W + pw;
    const int count = (he - hs) * (we - ws);
    hs = hs > 0 ? hs : 0;
    ws = ws > 0 ? ws : 0;
    he = he < H ? he : H;
    we = we < W ? we : W;
)";

/// Max pooling without a mask on OpenCL also has "<name>_v<L>" for each L of
/// VectorMaxLaneCounts: a work-item takes L neighbouring outputs of a row as one vector,
/// work-groups walk the rows. Each window element is one vector load of the input row — L
/// neighbouring columns at stride 1, the even lanes of 2·L at stride 2 — where the work-item's
/// loads stay inside the input buffer (columns outside the row masked off),
/// else gathered lane by lane (the first and last plane's edge rows, other strides). PoCL runs
/// the one-output-per-work-item form as scalar code with a data-dependent branch per element,
/// and gathering every element lane by lane left the vector form far behind ONNX Runtime
/// (docs/BENCHMARKS.md, "Default configurations").
bool UsesVectorMax(const KernelTarget& target, PoolMethod method) {
  return target.vector_builtins && method == PoolMethod::kMax;
}

/// The average pool's program also holds the whole-plane form (pool_plane.cc) wherever the
/// dialect has vector built-ins, for fp32 and the quantized types; the pool_plane_ave family's
/// rule (a CPU runtime) says where it runs.
bool UsesPlaneAve(const KernelTarget& target, DataType type, PoolMethod method) {
  return target.vector_builtins && method == PoolMethod::kAverage &&
         (IsQuantized(type) || type == DataType::kFloat32);
}

/// The vector max kernel's lane counts in a type's program, and the one a pool runs: int8q
/// rows of at least 16 outputs in 16 bytes (8 bytes left each work-item's loads, its row loop
/// and its store a quarter of a register: SqueezeNet's and ResNet-50's 3×3 stride-2 pools ran
/// at 3-4× OpenVINO's time); narrower rows in 8, where two overlapping vectors keep their
/// windows inside the row (one vector of 16 would run the masked loop: SqueezeNet's pool5, 13
/// columns, slower in 16); the other types in 8 elements.
std::vector<int> VectorMaxLaneCounts(DataType type) {
  if (type == DataType::kInt8Q) return {8, 16};
  return {8};
}
int VectorMaxLanes(DataType type, int out_w) {
  return type == DataType::kInt8Q && out_w >= 16 ? 16 : 8;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Description

int PoolDesc::out_h() const {
  if (global) return 1;
  int o = int(std::ceil(float(height + 2 * pad_h - kernel_h) / stride_h)) + 1;
  if (pad_h && (o - 1) * stride_h >= height + pad_h) --o;
  return o;
}
int PoolDesc::out_w() const {
  if (global) return 1;
  int o = int(std::ceil(float(width + 2 * pad_w - kernel_w) / stride_w)) + 1;
  if (pad_w && (o - 1) * stride_w >= width + pad_w) --o;
  return o;
}
size_t PoolDesc::input_count() const { return size_t(batch) * channels * height * width; }
size_t PoolDesc::output_count() const { return size_t(batch) * channels * out_h() * out_w(); }

std::string PoolDesc::ToString() const {
  std::ostringstream s;
  s << Name(type) << " " << MethodName(method) << " n" << batch << " c" << channels << " h"
    << height << " w" << width;
  if (global)
    s << " global";
  else
    s << " k" << kernel_h << "x" << kernel_w << " s" << stride_h << "x" << stride_w << " p" << pad_h
      << "x" << pad_w;
  return s.str();
}

void PoolDesc::Validate() const {
  auto fail = [&](const std::string& what) { throw Error("pooling " + ToString() + ": " + what); };
  for (auto [name, v] : {std::pair<const char*, int>{"batch", batch},
                         {"channels", channels},
                         {"height", height},
                         {"width", width}})
    if (v <= 0) fail(host::Field(name, v) + " must be positive");
  if (!global) {
    if (kernel_h <= 0 || kernel_w <= 0) fail("kernel sizes must be positive");
    if (stride_h <= 0 || stride_w <= 0) fail("strides must be positive");
    if (pad_h < 0 || pad_w < 0) fail("padding must not be negative");
    if (pad_h >= kernel_h || pad_w >= kernel_w) fail("padding must be smaller than the kernel");
    if (kernel_h > height + 2 * pad_h || kernel_w > width + 2 * pad_w)
      fail("the kernel is larger than the padded input");
  }
  if (double(input_count()) >= 2147483647.0) fail("tensors beyond 2^31 elements are not supported");
}

// ---------------------------------------------------------------------------------------------
// Kernel texts

std::string Pooling::ForwardKernelName(DataType type, PoolMethod method) {
  return std::string("pool_") + MethodName(method) + "_fwd_" + Name(type);
}
std::string Pooling::BackwardKernelName(PoolMethod method) {
  return std::string("pool_") + MethodName(method) + "_bwd_fp32";
}

std::string Pooling::ForwardSource(const KernelTarget& target, DataType type, PoolMethod method) {
  const bool q = IsQuantized(type);
  KernelWriter w(target, "pool_forward");
  w.AddType("Dtype", type);
  if (q) w.UseRequant(type);
  auto& k = w.Kernel(ForwardKernelName(type, method))
                .In("Dtype", "x")
                .Out("Dtype", "y")
                .Out("int", "mask")
                .In("int", "rq");
  for (const char* name : {"total", "H", "W", "OH", "OW", "KH", "KW", "sh", "sw", "ph", "pw",
                           "has_mask", "x_zero", "y_zero", "same", "mult", "shift"})
    k.Value("int", name);
  std::string body = R"(  $loop(i, total) {
    const int ox = i % OW;
    const int oy = (i / OW) % OH;
    const int nc = i / (OW * OH);
)";
  body += kWindowText;
  body += "    const $global Dtype* xp = x + nc * H * W;\n";
  if (method == PoolMethod::kMax) {
    body += R"(    Dtype_c best = Dtype_LOAD(xp, hs * W + ws);
    int arg = hs * W + ws;
    for (int h = hs; h < he; ++h)
      for (int w = ws; w < we; ++w) {
        const Dtype_c v = Dtype_LOAD(xp, h * W + w);
        if (v > best) {
          best = v;
          arg = h * W + w;
        }
      }
    if (has_mask) mask[i] = arg;
)";
    if (q) {
      body +=
          R"(    mp_i64 r = same ? $long_of_int(best) : (mp_i64)y_zero + MP_REQUANT(best - x_zero, mult, shift);
    r = Dtype_SAT(r);
    Dtype_STORE(y, i, r);
)";
    } else {
      body += "    Dtype_STORE(y, i, best);\n";
    }
  } else {
    if (q) {
      body += R"(    Dtype_acc acc = 0;
    for (int h = hs; h < he; ++h)
      for (int w = ws; w < we; ++w) acc += Dtype_LOAD(xp, h * W + w) - x_zero;
    mp_i64 r = (mp_i64)y_zero + MP_REQUANT(acc, rq[2 * count - 2], rq[2 * count - 1]);
    r = Dtype_SAT(r);
    Dtype_STORE(y, i, r);
)";
    } else {
      body += R"(    float acc = 0.0f;
    for (int h = hs; h < he; ++h)
      for (int w = ws; w < we; ++w) acc += (float)Dtype_LOAD(xp, h * W + w);
    Dtype_STORE(y, i, acc / (float)count);
)";
    }
  }
  body += "  }\n";
  k.Body(body);
  if (UsesVectorMax(target, method)) {
    for (int lanes : VectorMaxLaneCounts(type)) pool_internal::DeclareVectorMax(w, type, lanes);
    if (q || type == DataType::kFloat32) pool_internal::DeclarePlaneMax(w, type);
    if (type == DataType::kInt8Q || type == DataType::kFloat32)
      for (int stride : {1, 2}) pool_internal::DeclareWalkMax(w, type, stride);
  }
  if (UsesPlaneAve(target, type, method)) pool_internal::DeclarePlaneAve(w, type);
  return w.Source();
}

std::string Pooling::BackwardSource(const KernelTarget& target, PoolMethod method) {
  KernelWriter w(target, "pool_backward");
  w.AddType("Dtype", DataType::kFloat32);
  auto& k = w.Kernel(BackwardKernelName(method))
                .In("float", "top")
                .In("int", "mask")
                .Out("float", "bottom");
  for (const char* name : {"planes", "H", "W", "OH", "OW", "KH", "KW", "sh", "sw", "ph", "pw"})
    k.Value("int", name);
  // A work-item per (image, channel) plane scatters its outputs' gradients into the plane's
  // inputs: no races where windows overlap, no divisions per element (a gather per input
  // element cost LeNet's pool1 more than its forward pass seven times over).
  std::string body = R"(  $loop(nc, planes) {
    $global float* b = bottom + nc * H * W;
    for (int i = 0; i < H * W; ++i) b[i] = 0.0f;
    const $global float* t = top + nc * OH * OW;
)";
  if (method == PoolMethod::kMax) {
    body += R"(    const $global int* m = mask + nc * OH * OW;
    for (int o = 0; o < OH * OW; ++o) {
      const int at = m[o];
      if (at >= 0 && at < H * W) b[at] += t[o];
    }
)";
  } else {
    // Caffe's divisor: the window clipped to the padded plane, then its share to the pixels
    // inside the plane.
    body += R"(    for (int oy = 0; oy < OH; ++oy)
      for (int ox = 0; ox < OW; ++ox) {
        int hs = oy * sh - ph, ws = ox * sw - pw;
        int he = hs + KH < H + ph ? hs + KH : H + ph;
        int we = ws + KW < W + pw ? ws + KW : W + pw;
        const float g = t[oy * OW + ox] / (float)((he - hs) * (we - ws));
        hs = hs > 0 ? hs : 0;
        ws = ws > 0 ? ws : 0;
        he = he < H ? he : H;
        we = we < W ? we : W;
        for (int y = hs; y < he; ++y)
          for (int x = ws; x < we; ++x) b[y * W + x] += g;
      }
)";
  }
  body += R"(  }
)";
  k.Body(body);
  return w.Source();
}

// ---------------------------------------------------------------------------------------------
// Launches

const DefaultsTable<RowGroups, PoolDesc>& PoolVectorMaxDefaults() {
  // Groups of 8 vectors along a row, about a thousand groups in all: PoCL pays per work-group,
  // and a few groups more than cores keep both busy.
  // int8 on the CPU runtimes: a quarter of that. Its rows are a few 16-lane vectors (56
  // columns: 4), so at a thousand groups a group holds little work beside what PoCL pays for it;
  // fewer, longer groups measured faster on both CPU runtimes (fp32 did not gain).
  static const DefaultsTable<RowGroups, PoolDesc> table = {
      {"OpenCL CPU runtime, int8q",
       [](const TargetProfile& p, const PoolDesc& d) {
         return p.cpu_vectors && d.type == DataType::kInt8Q;
       },
       {8, 256},
       "PoolBench.DISABLED_ZooMaxPools (tests/libdnn/pool_test.cc), the seven stride-2 max "
       "pools of GoogLeNet, ResNet-50, SqueezeNet 1.1 and AlexNet summed, "
       "MPCAFFE_KERNEL_CONFIG='pool_vector_max:width=8 groups=G', 3 alternating rounds, AMD "
       "EPYC AVX-512, 2026-12-05, us: PoCL groups 1024 948, 591, 741 / 256 520, 513, 495 (64: "
       "826, 539, 502; 32: 595, 530, 531), Intel's runtime 675, 769, 746 / 607, 725, 639; fp32 "
       "level on PoCL (1039, 975, 946 / 955, 951, 998) and 1-7 % behind on Intel's runtime, so "
       "it keeps 1024"},
      {"every device",
       [](const TargetProfile&, const PoolDesc&) { return true; },
       {8, 1024},
       "set with the vector max kernel on PoCL, 2026-11-23 (git 4e67aff), its loads by window "
       "column timed on GoogLeNet's inception pools side by side, 2026-11-25 (git 05bf143); "
       "fp32 against 256 groups on both CPU runtimes, 2026-12-05 (the int8 row's command): "
       "level on PoCL, 1-7 % ahead on Intel's runtime; not measured on a GPU"},
  };
  return table;
}

const DefaultsTable<RowGroups, PoolDesc>& PoolPlaneMaxDefaults() {
  // Groups of 4 vectors of a plane, about 64 groups walking the planes: each work-item's masks
  // serve many planes, and PoCL pays per work-group.
  static const DefaultsTable<RowGroups, PoolDesc> table = {
      {"every device",
       [](const TargetProfile&, const PoolDesc&) { return true; },
       {4, 64},
       "PoolBench.DISABLED_ZooMaxPools (tests/libdnn/pool_test.cc), GoogLeNet's int8 3x3 "
       "stride-1 pools, MPCAFFE_KERNEL_CONFIG='pool_plane_max:width=W groups=G', AMD EPYC "
       "AVX-512, 2026-12-04: width 4 groups 64 17-40 us (Intel's runtime) and 35-52 (PoCL) a "
       "pool, width 8 groups 1024 93-171 on PoCL, width 1 groups 16-256 within the noise of "
       "4/64; not measured on a GPU (none on the build machine)"},
  };
  return table;
}

const DefaultsTable<RowGroups, PoolDesc>& PoolWalkMaxDefaults() {
  // Groups of up to 4 vectors of a row (a row of 56 outputs is 4), about 64 groups walking the
  // planes: each work-item's masks serve every plane it walks, and PoCL pays per work-group
  // (measured at stride 2; stride 1 takes the same launch).
  static const DefaultsTable<RowGroups, PoolDesc> table = {
      {"every device",
       [](const TargetProfile&, const PoolDesc&) { return true; },
       {4, 64},
       "PoolBench.DISABLED_ZooMaxPools (tests/libdnn/pool_test.cc), the int8 stride-2 pools, "
       "MPCAFFE_KERNEL_CONFIG='pool_walk_max:width=W groups=G', AMD EPYC AVX-512, "
       "2026-12-06 (docs/BENCHMARKS.md, \"Default configurations\"); rusticl (llvmpipe) at the "
       "same launch; not measured on a GPU (none on the build machine)"},
  };
  return table;
}

const std::vector<PoolForwardFamily>& PoolForwardFamilies() {
  static const std::vector<PoolForwardFamily> families = {
      // At stride 1, rows narrower than a vector (16 int8 outputs, 8 floats) leave lanes idle
      // where the plane form's vectors of the flattened plane fill them: those keep the plane
      // form where it applies (GoogLeNet's int8 14x14 and 7x7 inception pools, fp32's 7x7).
      {"pool_walk_max",
       [](const PoolDesc& d, const TargetProfile& p) {
         return p.vector_builtins && pool_internal::WalkMaxApplies(d) &&
                (d.stride_w == 2 || d.out_w() >= pool_internal::WalkLanes(d.type) ||
                 !pool_internal::PlaneMaxApplies(d));
       },
       PoolWalkMaxDefaults},
      {"pool_plane_max",
       [](const PoolDesc& d, const TargetProfile& p) {
         return p.vector_builtins && pool_internal::PlaneMaxApplies(d);
       },
       PoolPlaneMaxDefaults},
      {"pool_vector_max",
       [](const PoolDesc& d, const TargetProfile& p) {
         return p.vector_builtins && d.method == PoolMethod::kMax;
       },
       PoolVectorMaxDefaults},
      {"pool_plane_ave",
       [](const PoolDesc& d, const TargetProfile& p) {
         return p.vector_builtins && p.cpu_vectors && pool_internal::PlaneAveApplies(d);
       },
       nullptr},
      {"pool", [](const PoolDesc&, const TargetProfile&) { return true; }, nullptr},
  };
  return families;
}

const PoolForwardFamily& PoolForwardFamilyFor(const PoolDesc& desc, const TargetProfile& profile) {
  return FirstFamilyApplying(PoolForwardFamilies(), desc, profile, "pooling " + desc.ToString());
}

Pooling::Pooling(Device& device, const PoolDesc& desc, const PoolQuant& quant)
    : device_(&device), desc_(desc), quant_(quant) {
  desc_.Validate();
  const KernelTarget target = KernelTarget::Of(device);
  const bool vector_max = UsesVectorMax(target, desc_.method);
  ProgramHints hints = ProgramHints::OneDimensional();
  if (vector_max) hints.local_sizes.push_back({8, 1, 1});
  auto program = device.GetProgram(ForwardSource(target, desc_.type, desc_.method), "", hints);
  forward_ = program->GetKernel(ForwardKernelName(desc_.type, desc_.method));
  const TargetProfile profile = TargetProfile::Of(device.info());
  // The first family that applies and MPCAFFE_KERNEL_CONFIG does not turn off.
  const auto [family, launch] =
      FirstRowFamily(PoolForwardFamilies(), desc_, profile, "pooling " + desc_.ToString());
  // The vector max kernels (row and plane forms), in the program where UsesVectorMax.
  plane_ = std::string(family->name) == "pool_plane_max";
  plane_ave_ = std::string(family->name) == "pool_plane_ave";
  walk_ = std::string(family->name) == "pool_walk_max";
  if (plane_ave_) {
    forward_vec_ = program->GetKernel(pool_internal::PlaneAveKernelName(desc_.type));
  } else if (plane_) {
    forward_vec_ = program->GetKernel(pool_internal::PlaneMaxKernelName(desc_.type));
    vec_launch_ = launch.launch;
  } else if (walk_) {
    forward_vec_ =
        program->GetKernel(pool_internal::WalkMaxKernelName(desc_.type, desc_.stride_h));
    vec_launch_ = launch.launch;
  } else if (family->launch) {
    forward_vec_ = program->GetKernel(ForwardKernelName(desc_.type, desc_.method) + "_v" +
                                      std::to_string(VectorMaxLanes(desc_.type, desc_.out_w())));
    vec_launch_ = launch.launch;
  }
  if (KernelChoiceLogActive())  // for `mpcaffe time --explain`
    NoteKernelChoice({family->name, family->launch ? vec_launch_.ToString() : "", launch.source,
                      desc_.ToString()});
  if (desc_.type == DataType::kFloat32)
    backward_ =
        device.GetProgram(BackwardSource(target, desc_.method), "", ProgramHints::OneDimensional())
            ->GetKernel(BackwardKernelName(desc_.method));
  const int area = desc_.window_h() * desc_.window_w();
  std::vector<int32_t> table(2, 0);
  if (IsQuantized(desc_.type)) {
    if (!(quant.x_scale > 0) || !(quant.y_scale > 0))
      throw Error("pooling " + desc_.ToString() + ": quantization scales must be positive");
    if (desc_.method == PoolMethod::kAverage) {
      table.assign(2 * size_t(area), 0);
      for (int c = 1; c <= area; ++c) {
        const auto m =
            quant::QuantizeMultiplier(double(quant.x_scale) / (double(quant.y_scale) * c));
        table[2 * c - 2] = m.multiplier;
        table[2 * c - 1] = m.shift;
      }
    } else {
      max_same_ = quant.x_scale == quant.y_scale && quant.x_zero == quant.y_zero;
      const auto m = quant::RescaleMultiplier(quant.x_scale, quant.y_scale);
      max_mult_ = m.multiplier;
      max_shift_ = m.shift;
    }
  }
  avg_requant_ = device.Alloc<int32_t>(table.size());
  device.Write(avg_requant_, table.data(), table.size());
}

Event Pooling::Forward(const BufferRef& input, const BufferRef& output, const BufferRef& mask,
                       Queue* queue) {
  const PoolDesc& d = desc_;
  const size_t es = SizeOf(d.type);
  CheckBuffer(d, "input", input, d.input_count(), es);
  CheckBuffer(d, "output", output, d.output_count(), es);
  const bool has_mask = bool(mask);
  if (has_mask) {
    if (d.method != PoolMethod::kMax)
      throw Error("pooling " + d.ToString() + ": a mask is only produced by max pooling");
    CheckBuffer(d, "mask", mask, d.output_count(), 4);
  }
  const Geometry g = GeometryOf(d);
  if (plane_ave_) {  // average pooling takes no mask
    const int planes = d.batch * d.channels;
    forward_vec_.ArgBuffer(input.mem, input.byte_offset, es)
        .ArgBuffer(output.mem, output.byte_offset, es)
        .Arg(avg_requant_);
    for (int v : {planes, d.height * d.width, quant_.x_zero, quant_.y_zero})
      forward_vec_.Arg(int32_t{v});
    return forward_vec_.Launch1D(size_t(planes), queue);
  }
  if (walk_ && !has_mask) {
    // Work-items (v, ·): the column vectors of a row, each group walking planes.
    const int planes = d.batch * d.channels;
    forward_vec_.ArgBuffer(input.mem, input.byte_offset, es)
        .ArgBuffer(output.mem, output.byte_offset, es);
    for (int v : {planes, d.height, d.width, g.oh, g.ow, g.kh, g.ph, g.pw, quant_.x_zero,
                  quant_.y_zero, max_same_, max_mult_, max_shift_, int(d.input_count())})
      forward_vec_.Arg(int32_t{v});
    const size_t L = pool_internal::WalkLanes(d.type);
    const size_t vecs = (size_t(g.ow) + L - 1) / L;
    const size_t width = std::min<size_t>(vecs, vec_launch_.width);
    const size_t columns = (vecs + width - 1) / width;
    const size_t groups = std::max<size_t>(1, std::min<size_t>(planes, vec_launch_.groups));
    return forward_vec_.Launch({columns * width, groups, 1}, {width, 1, 1}, queue);
  }
  if (!forward_vec_.name().empty() && !has_mask) {
    // The vector max kernels: `items` rows (row form) or planes (plane form) of `vecs` vectors
    // each; work-groups no wider than an item's vectors (no idle lanes), the items shared by
    // about vec_launch_.groups groups.
    const int items = d.batch * d.channels * (plane_ ? 1 : g.oh);
    forward_vec_.ArgBuffer(input.mem, input.byte_offset, es)
        .ArgBuffer(output.mem, output.byte_offset, es);
    // Both kernels start with (items, H, W); the row form's geometry follows.
    const int sizes[] = {items, d.height, d.width, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw};
    for (int i = 0; i < (plane_ ? 3 : 11); ++i) forward_vec_.Arg(int32_t{sizes[i]});
    for (int v :
         {quant_.x_zero, quant_.y_zero, max_same_, max_mult_, max_shift_, int(d.input_count())})
      forward_vec_.Arg(int32_t{v});
    const size_t lanes =
        plane_ ? size_t(pool_internal::kPlaneLanes) : size_t(VectorMaxLanes(d.type, g.ow));
    const size_t vecs = ((plane_ ? size_t(d.height) * d.width : size_t(g.ow)) + lanes - 1) / lanes;
    const size_t width = std::min<size_t>(vecs, vec_launch_.width);
    const size_t columns = (vecs + width - 1) / width;
    const size_t groups =
        std::max<size_t>(1, std::min<size_t>(items, size_t(vec_launch_.groups) / columns));
    return forward_vec_.Launch({columns * width, groups, 1}, {width, 1, 1}, queue);
  }
  const BufferRef m = has_mask ? mask : BufferRef(avg_requant_.mem.get(), 0);
  const int total = int(d.output_count());
  forward_.ArgBuffer(input.mem, input.byte_offset, es)
      .ArgBuffer(output.mem, output.byte_offset, es)
      .ArgBuffer(m.mem, m.byte_offset, 4)
      .Arg(avg_requant_);
  for (int v : {total, d.height, d.width, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw,
                int(has_mask), quant_.x_zero, quant_.y_zero, max_same_, max_mult_, max_shift_})
    forward_.Arg(int32_t{v});
  return forward_.Launch1D(size_t(total), queue);
}

Event Pooling::Backward(const BufferRef& top_diff, const BufferRef& mask,
                        const BufferRef& bottom_diff, Queue* queue) {
  const PoolDesc& d = desc_;
  if (d.type != DataType::kFloat32)
    throw Error("pooling " + d.ToString() + ": backward is fp32 only");
  CheckBuffer(d, "top_diff", top_diff, d.output_count(), 4);
  CheckBuffer(d, "bottom_diff", bottom_diff, d.input_count(), 4);
  if (d.method == PoolMethod::kMax) CheckBuffer(d, "mask", mask, d.output_count(), 4);
  const BufferRef m = d.method == PoolMethod::kMax ? mask : BufferRef(avg_requant_.mem.get(), 0);
  const Geometry g = GeometryOf(d);
  const int planes = d.batch * d.channels;
  backward_.ArgBuffer(top_diff.mem, top_diff.byte_offset, 4)
      .ArgBuffer(m.mem, m.byte_offset, 4)
      .ArgBuffer(bottom_diff.mem, bottom_diff.byte_offset, 4);
  for (int v : {planes, d.height, d.width, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw})
    backward_.Arg(int32_t{v});
  return backward_.Launch1D(size_t(planes), queue);
}

// ---------------------------------------------------------------------------------------------
// References

void PoolForwardReference(const PoolDesc& d, const PoolQuant& quant, const void* input,
                          void* output, int32_t* mask) {
  d.Validate();
  const Geometry g = GeometryOf(d);
  const bool q = IsQuantized(d.type);
  const bool same = quant.x_scale == quant.y_scale && quant.x_zero == quant.y_zero;
  for (int nc = 0; nc < d.batch * d.channels; ++nc)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox) {
        const Window win = WindowOf(d, g, oy, ox);
        const size_t base = size_t(nc) * d.height * d.width;
        const size_t yi = (size_t(nc) * g.oh + oy) * g.ow + ox;
        if (d.method == PoolMethod::kMax) {
          int arg = win.hs * d.width + win.ws;
          for (int h = win.hs; h < win.he; ++h)
            for (int w = win.ws; w < win.we; ++w) {
              const int i = h * d.width + w;
              const bool better =
                  q ? host::LoadQ(d.type, input, base + i) > host::LoadQ(d.type, input, base + arg)
                    : host::LoadF(d.type, input, base + i) > host::LoadF(d.type, input, base + arg);
              if (better) arg = i;
            }
          if (mask) mask[yi] = arg;
          if (q) {
            const int32_t best = host::LoadQ(d.type, input, base + arg);
            const int64_t r =
                same ? best
                     : quant.y_zero +
                           host::Requant(d.type, best - quant.x_zero,
                                         quant::RescaleMultiplier(quant.x_scale, quant.y_scale));
            host::StoreQ(d.type, output, yi, r);
          } else {
            host::StoreF(d.type, output, yi, host::LoadF(d.type, input, base + arg));
          }
        } else if (q) {
          int64_t acc = 0;
          for (int h = win.hs; h < win.he; ++h)
            for (int w = win.ws; w < win.we; ++w)
              acc += host::LoadQ(d.type, input, base + h * d.width + w) - quant.x_zero;
          const auto m = quant::QuantizeMultiplier(double(quant.x_scale) /
                                                   (double(quant.y_scale) * win.count));
          host::StoreQ(d.type, output, yi, quant.y_zero + host::Requant(d.type, acc, m));
        } else {
          float acc = 0.0f;
          for (int h = win.hs; h < win.he; ++h)
            for (int w = win.ws; w < win.we; ++w)
              acc += host::LoadF(d.type, input, base + h * d.width + w);
          host::StoreF(d.type, output, yi, acc / float(win.count));
        }
      }
}

void PoolBackwardReference(const PoolDesc& d, const float* top, const int32_t* mask,
                           float* bottom) {
  d.Validate();
  const Geometry g = GeometryOf(d);
  std::fill(bottom, bottom + d.input_count(), 0.0f);
  for (int nc = 0; nc < d.batch * d.channels; ++nc)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox) {
        const size_t yi = (size_t(nc) * g.oh + oy) * g.ow + ox;
        float* b = bottom + size_t(nc) * d.height * d.width;
        if (d.method == PoolMethod::kMax) {
          b[mask[yi]] += top[yi];
        } else {
          const Window win = WindowOf(d, g, oy, ox);
          for (int h = win.hs; h < win.he; ++h)
            for (int w = win.ws; w < win.we; ++w) b[h * d.width + w] += top[yi] / win.count;
        }
      }
}

}  // namespace mpcaffe::libdnn
