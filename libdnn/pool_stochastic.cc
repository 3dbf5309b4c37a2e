// libdnn/pool_stochastic.cc — the stochastic pooling kernels (train, test, backward), their
// launches and host references, following BVLC Caffe's pooling_layer.cu.
#include "libdnn/pool_stochastic.h"

#include <algorithm>
#include <cfloat>

#include "device/error.h"
#include "libdnn/typed_host.h"

namespace mpcaffe::libdnn {

namespace {

/// Effective geometry (global pooling resolved; pad is 0).
struct Geometry {
  int kh, kw, sh, sw, oh, ow;
};
Geometry GeometryOf(const PoolDesc& d) {
  if (d.global) return {d.height, d.width, 1, 1, 1, 1};
  return {d.kernel_h, d.kernel_w, d.stride_h, d.stride_w, d.out_h(), d.out_w()};
}

void CheckBuffer(const PoolDesc& d, const char* what, const BufferRef& b, size_t count,
                 size_t element_bytes) {
  if (!b) throw Error("stochastic pooling " + d.ToString() + ": " + what + " buffer is missing");
  if (b.byte_offset + count * element_bytes > b.mem->bytes())
    throw Error("stochastic pooling " + d.ToString() + ": " + what + " buffer is too small (" +
                std::to_string(count * element_bytes) + " bytes needed past offset " +
                std::to_string(b.byte_offset) + ", allocation " + std::to_string(b.mem->bytes()) +
                ")");
}

// One output's window, clipped to the input (pad 0): the head of both forward kernels.
const char* kWindowText = R"(    const int ox = i % OW;
    const int oy = (i / OW) % OH;
    const int nc = i / (OW * OH);
    const int hs = oy * sh;
    const int ws = ox * sw;
    const int he = hs + KH < H ? hs + KH : H;
    const int we = ws + KW < W ? ws + KW : W;
    const $global Dtype* xp = x + nc * H * W;
)";

const char* const kGeometryArgs[] = {"total", "H", "W", "OH", "OW", "KH", "KW", "sh", "sw"};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Kernel texts

std::string StochasticPooling::TrainKernelName(DataType type) {
  return std::string("pool_sto_train_") + Name(type);
}
std::string StochasticPooling::TestKernelName(DataType type) {
  return std::string("pool_sto_test_") + Name(type);
}
std::string StochasticPooling::BackwardKernelName() { return "pool_sto_bwd_fp32"; }

std::string StochasticPooling::Source(const KernelTarget& target, DataType type) {
  if (IsQuantized(type))
    throw Error(std::string("stochastic pooling computes in float types only, not ") + Name(type));
  KernelWriter w(target, "pool_stochastic");
  w.AddType("Dtype", type);
  auto& train = w.Kernel(TrainKernelName(type))
                    .In("Dtype", "x")
                    .In("float", "u")
                    .Out("Dtype", "y")
                    .Out("int", "index");
  for (const char* name : kGeometryArgs) train.Value("int", name);
  // Two passes as caffe's StoPoolForwardTrain: the window's sum, then the first element whose
  // running sum reaches u·sum (the loops left by setting h past the window).
  train.Body(std::string("  $loop(i, total) {\n") + kWindowText + R"(    float sum = 0.0f;
    for (int h = hs; h < he; ++h)
      for (int w = ws; w < we; ++w) sum += (float)Dtype_LOAD(xp, h * W + w);
    const float threshold = u[i] * sum;
    int pick = (he - 1) * W + (we - 1);
    float run = 0.0f;
    for (int h = hs; h < he; ++h)
      for (int w = ws; w < we; ++w) {
        run += (float)Dtype_LOAD(xp, h * W + w);
        if (run >= threshold) {
          pick = h * W + w;
          h = he;
          break;
        }
      }
    index[i] = pick;
    Dtype_STORE(y, i, Dtype_LOAD(xp, pick));
  }
)");
  auto& test = w.Kernel(TestKernelName(type)).In("Dtype", "x").Out("Dtype", "y");
  for (const char* name : kGeometryArgs) test.Value("int", name);
  // FLT_MIN in the sum keeps an all-zero window at 0 instead of 0/0.
  test.Body(std::string("  $loop(i, total) {\n") + kWindowText + R"(    float sum = 1.17549435e-38f;
    float weighted = 0.0f;
    for (int h = hs; h < he; ++h)
      for (int w = ws; w < we; ++w) {
        const float v = (float)Dtype_LOAD(xp, h * W + w);
        sum += v;
        weighted += v * v;
      }
    Dtype_STORE(y, i, (Dtype_c)(weighted / sum));
  }
)");
  if (type == DataType::kFloat32) {
    auto& back = w.Kernel(BackwardKernelName())
                     .In("float", "top")
                     .In("int", "index")
                     .Out("float", "bottom");
    for (const char* name : kGeometryArgs) back.Value("int", name);
    // Every input element gathers from the outputs whose windows can hold it (no atomics).
    back.Body(R"(  $loop(i, total) {
    const int iw = i % W;
    const int ih = (i / W) % H;
    const int nc = i / (W * H);
    const int oys = ih < KH ? 0 : (ih - KH) / sh + 1;
    const int oye = ih / sh + 1 < OH ? ih / sh + 1 : OH;
    const int oxs = iw < KW ? 0 : (iw - KW) / sw + 1;
    const int oxe = iw / sw + 1 < OW ? iw / sw + 1 : OW;
    const int o = nc * OH * OW;
    float g = 0.0f;
    for (int oy = oys; oy < oye; ++oy)
      for (int ox = oxs; ox < oxe; ++ox)
        if (index[o + oy * OW + ox] == ih * W + iw) g += top[o + oy * OW + ox];
    bottom[i] = g;
  }
)");
  }
  return w.Source();
}

// ---------------------------------------------------------------------------------------------
// Launches

StochasticPooling::StochasticPooling(Device& device, const PoolDesc& desc)
    : device_(&device), desc_(desc) {
  desc_.Validate();
  if (desc_.pad_h || desc_.pad_w)
    throw Error("stochastic pooling " + desc_.ToString() + ": padding is for MAX and AVE only");
  auto program = device.GetProgram(Source(KernelTarget::Of(device), desc_.type), "",
                                   ProgramHints::OneDimensional());
  train_ = program->GetKernel(TrainKernelName(desc_.type));
  test_ = program->GetKernel(TestKernelName(desc_.type));
  if (desc_.type == DataType::kFloat32) backward_ = program->GetKernel(BackwardKernelName());
}

Event StochasticPooling::ForwardTrain(const BufferRef& input, const BufferRef& uniform,
                                      const BufferRef& output, const BufferRef& index,
                                      Queue* queue) {
  const PoolDesc& d = desc_;
  const size_t es = SizeOf(d.type);
  CheckBuffer(d, "input", input, d.input_count(), es);
  CheckBuffer(d, "uniform", uniform, d.output_count(), 4);
  CheckBuffer(d, "output", output, d.output_count(), es);
  CheckBuffer(d, "index", index, d.output_count(), 4);
  const Geometry g = GeometryOf(d);
  train_.ArgBuffer(input.mem, input.byte_offset, es)
      .ArgBuffer(uniform.mem, uniform.byte_offset, 4)
      .ArgBuffer(output.mem, output.byte_offset, es)
      .ArgBuffer(index.mem, index.byte_offset, 4);
  const int total = int(d.output_count());
  for (int v : {total, d.height, d.width, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw})
    train_.Arg(int32_t{v});
  return train_.Launch1D(size_t(total), queue);
}

Event StochasticPooling::ForwardTest(const BufferRef& input, const BufferRef& output,
                                     Queue* queue) {
  const PoolDesc& d = desc_;
  const size_t es = SizeOf(d.type);
  CheckBuffer(d, "input", input, d.input_count(), es);
  CheckBuffer(d, "output", output, d.output_count(), es);
  const Geometry g = GeometryOf(d);
  test_.ArgBuffer(input.mem, input.byte_offset, es).ArgBuffer(output.mem, output.byte_offset, es);
  const int total = int(d.output_count());
  for (int v : {total, d.height, d.width, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw})
    test_.Arg(int32_t{v});
  return test_.Launch1D(size_t(total), queue);
}

Event StochasticPooling::Backward(const BufferRef& top_diff, const BufferRef& index,
                                  const BufferRef& bottom_diff, Queue* queue) {
  const PoolDesc& d = desc_;
  if (d.type != DataType::kFloat32)
    throw Error("stochastic pooling " + d.ToString() + ": backward is fp32 only");
  CheckBuffer(d, "top_diff", top_diff, d.output_count(), 4);
  CheckBuffer(d, "index", index, d.output_count(), 4);
  CheckBuffer(d, "bottom_diff", bottom_diff, d.input_count(), 4);
  const Geometry g = GeometryOf(d);
  backward_.ArgBuffer(top_diff.mem, top_diff.byte_offset, 4)
      .ArgBuffer(index.mem, index.byte_offset, 4)
      .ArgBuffer(bottom_diff.mem, bottom_diff.byte_offset, 4);
  const int total = int(d.input_count());
  for (int v : {total, d.height, d.width, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw})
    backward_.Arg(int32_t{v});
  return backward_.Launch1D(size_t(total), queue);
}

// ---------------------------------------------------------------------------------------------
// References

namespace {

/// Calls f(plane, out, h0, h1, w0, w1) for every output: its input plane's first element index
/// and its window clipped to the input.
template <typename F>
void ForEachWindow(const PoolDesc& d, F f) {
  d.Validate();
  const Geometry g = GeometryOf(d);
  for (int nc = 0; nc < d.batch * d.channels; ++nc)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox) {
        const int h0 = oy * g.sh, w0 = ox * g.sw;
        f(size_t(nc) * d.height * d.width, (size_t(nc) * g.oh + oy) * g.ow + ox, h0,
          std::min(h0 + g.kh, d.height), w0, std::min(w0 + g.kw, d.width));
      }
}

}  // namespace

void StochasticPoolTrainReference(const PoolDesc& d, const void* input, const float* uniform,
                                  void* output, int32_t* index) {
  ForEachWindow(d, [&](size_t plane, size_t out, int h0, int h1, int w0, int w1) {
    auto x = [&](int h, int w) { return host::LoadF(d.type, input, plane + h * d.width + w); };
    float sum = 0.0f;
    for (int h = h0; h < h1; ++h)
      for (int w = w0; w < w1; ++w) sum += x(h, w);
    const float threshold = uniform[out] * sum;
    int pick = (h1 - 1) * d.width + (w1 - 1);
    float run = 0.0f;
    bool found = false;
    for (int h = h0; h < h1 && !found; ++h)
      for (int w = w0; w < w1 && !found; ++w) {
        run += x(h, w);
        if (run >= threshold) pick = h * d.width + w, found = true;
      }
    index[out] = pick;
    host::StoreF(d.type, output, out, host::LoadF(d.type, input, plane + pick));
  });
}

void StochasticPoolTestReference(const PoolDesc& d, const void* input, void* output) {
  ForEachWindow(d, [&](size_t plane, size_t out, int h0, int h1, int w0, int w1) {
    float sum = FLT_MIN, weighted = 0.0f;
    for (int h = h0; h < h1; ++h)
      for (int w = w0; w < w1; ++w) {
        const float v = host::LoadF(d.type, input, plane + h * d.width + w);
        sum += v;
        weighted += v * v;
      }
    host::StoreF(d.type, output, out, weighted / sum);
  });
}

void StochasticPoolBackwardReference(const PoolDesc& d, const float* top_diff,
                                     const int32_t* index, float* bottom_diff) {
  std::fill(bottom_diff, bottom_diff + d.input_count(), 0.0f);
  ForEachWindow(d, [&](size_t plane, size_t out, int, int, int, int) {
    bottom_diff[plane + index[out]] += top_diff[out];
  });
}

}  // namespace mpcaffe::libdnn
