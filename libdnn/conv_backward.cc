// libdnn/conv_backward.cc — the fp32 backward pass of the convolution: per chunk of images and
// group, im2col and col2im over the chunk around two LibDNN GEMMs — the same generated, tuned
// kernels as the forward pass (TunedGemmConfig) — and the bias gradient.
#include <algorithm>
#include <string>

#include "device/error.h"
#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"
#include "libdnn/gemm.h"
#include "libdnn/scratch.h"

namespace mpcaffe::libdnn {

using namespace conv_internal;  // NOLINT: this file's private vocabulary

namespace {

std::string BackwardKernelName(const char* what) { return std::string("conv_bwd_") + what; }

}  // namespace

std::string Convolution::BackwardSource(const KernelTarget& target) {
  // One text for every fp32 convolution (no shape in it: one compile per device). The backward
  // pass works on chunks of NC images at once (Backward::images): the top diff's chunk
  // transposed to channel-major rows (t: OC × NC·P), and per group the columns of the chunk's
  // images side by side (col: Cg·KH·KW × NC·P), so that each GEMM spans the chunk (K = NC·P for
  // the weights) instead of one image — a launch per chunk and group, not per image.
  KernelWriter w(target, "conv_backward");
  w.AddType("Dtype", DataType::kFloat32);
  w.Kernel(BackwardKernelName("gather"))
      .In("float", "top")
      .Out("float", "t")
      .Value("int", "OC")
      .Value("int", "NC")
      .Value("int", "P")
      .Body(R"(  $loop(r, OC * NC) {
    const int n = r % NC;
    const int o = r / NC;
    const $global float* src = top + (n * OC + o) * P;
    $global float* dst = t + r * P;
    for (int p = 0; p < P; ++p) dst[p] = src[p];
  }
)");
  // The chunk's columns: the im2col kernel over NC images (its rows are Cg·KH·KW·NC long).
  AddIm2colKernel(w, DataType::kFloat32);
  // Row (c, n, iy) of the chunk's bottom diff: the sum of the column values each input pixel
  // fed, window tap by window tap along the row (the pixels a tap reaches are every sw-th).
  auto& col2im = w.Kernel(BackwardKernelName("col2im")).In("float", "col").Out("float", "x");
  for (const char* g : {"Cg", "H", "W", "KH", "KW", "sh", "sw", "ph", "pw", "dh", "dw", "OH",
                        "OW", "NC", "xs"})
    col2im.Value("int", g);
  col2im.Body(R"(  const int P = OH * OW;
  $loop(r, Cg * NC * H) {
    const int iy = r % H;
    const int n = (r / H) % NC;
    const int ic = r / (H * NC);
    $global float* row = x + n * xs + (ic * H + iy) * W;
    for (int ix = 0; ix < W; ++ix) row[ix] = 0.0f;
    for (int ky = 0; ky < KH; ++ky) {
      const int ty = iy + ph - ky * dh;
      if (ty < 0 || ty % sh) continue;
      const int oy = ty / sh;
      if (oy >= OH) continue;
      for (int kx = 0; kx < KW; ++kx) {
        const $global float* c = col + ((ic * KH + ky) * KW + kx) * NC * P + n * P + oy * OW;
        // tx = ix + pw − kx·dw = ox·sw for ox in [0, OW) and ix in [0, W).
        const int base = pw - kx * dw;
        int tx = base > 0 ? base : 0;
        tx = (tx + sw - 1) / sw * sw;
        const int last = min(W - 1 + base, (OW - 1) * sw);
        for (int ox = tx / sw; tx <= last; tx += sw, ++ox) row[tx - base] += c[ox];
      }
    }
  }
)");
  w.Kernel(BackwardKernelName("bias"))
      .In("float", "top")
      .Out("float", "db")
      .Value("int", "N")
      .Value("int", "OC")
      .Value("int", "P")
      .Body(R"(  $loop(o, OC) {
    float s = 0.0f;
    for (int n = 0; n < N; ++n) {
      const $global float* t = top + (n * OC + o) * P;
      for (int p = 0; p < P; ++p) s += t[p];
    }
    db[o] += s;
  }
)");
  return w.Source();
}

std::string Convolution::Im2colSource(const KernelTarget& target, DataType type) {
  return conv_internal::Im2colSource(target, type);
}

std::string Convolution::Im2colKernelName(DataType type) {
  return conv_internal::Im2colKernelName(type);
}

std::string Convolution::Im2colRequantSource(const KernelTarget& target, DataType type) {
  return conv_internal::Im2colRequantSource(target, type);
}

std::string Convolution::Im2colRequantKernelName(DataType type) {
  return conv_internal::Im2colRequantKernelName(type);
}

Convolution::GroupShape::GroupShape(const ConvDesc& d)
    : cg(d.channels / d.groups),
      ocg(d.out_channels / d.groups),
      kc(cg * d.kernel_h * d.kernel_w),
      p(d.out_h() * d.out_w()) {}

namespace {

/// Images per chunk of the backward pass: the most that divide the batch (every chunk the same
/// GEMM shape: one program each) with the chunk's columns within kChunkColumnBytes — a whole
/// LeNet batch of 64 (8.2 MB for conv2), one of AlexNet's 4.4 MB conv1 images at a time. A
/// convolution without a scratch arena holds its columns, so this bounds what each layer keeps.
constexpr size_t kChunkColumnBytes = size_t(8) << 20;

int ImagesPerChunk(const ConvDesc& d, int kc, int p) {
  const size_t image = size_t(kc) * p * 4;
  const int most = int(std::max<size_t>(1, kChunkColumnBytes / std::max<size_t>(image, 1)));
  int nc = 1;
  for (int k = 1; k <= std::min(d.batch, most); ++k)
    if (d.batch % k == 0) nc = k;
  return nc;
}

}  // namespace

Convolution::Backward& Convolution::PrepareBackward() {
  const ConvDesc& d = desc_;
  if (d.type != DataType::kFloat32)
    throw Error("convolution " + d.ToString() + ": backward is fp32 only");
  if (backward_) return *backward_;
  auto b = std::make_unique<Backward>();
  const GroupShape s(d);
  const int ocg = s.ocg, kc = s.kc;
  b->images = ImagesPerChunk(d, kc, s.p);
  const int n = b->images * s.p;  // a chunk's columns
  // Data: col (kc × n) = W_gᵀ (W_g stored ocg × kc) · t_g (ocg × n).
  b->data = std::make_unique<Gemm>(*device_, GemmDesc::Float(kc, n, ocg, true, false, kc, n, n));
  // Weights: dW_g (ocg × kc) += t_g (ocg × n) · colᵀ (col stored kc × n).
  b->weights = std::make_unique<Gemm>(*device_, GemmDesc::Float(ocg, kc, n, false, true, n, n, kc));
  auto program = device_->GetProgram(BackwardSource(KernelTarget::Of(*device_)), "",
                                     ProgramHints::OneDimensional());
  b->gather = program->GetKernel(BackwardKernelName("gather"));
  b->im2col = program->GetKernel(conv_internal::Im2colKernelName(DataType::kFloat32));
  b->col2im = program->GetKernel(BackwardKernelName("col2im"));
  b->bias = program->GetKernel(BackwardKernelName("bias"));
  backward_ = std::move(b);
  return *backward_;
}

BufferRef Convolution::GatherTop(const BufferRef& top_diff, int first_image, Queue* queue) {
  const ConvDesc& d = desc_;
  Backward& k = *backward_;
  const int p = d.out_h() * d.out_w();
  TakeScratch(*device_, arena_.get(), queue, ScratchUse::kTopDiff,
              size_t(d.out_channels) * k.images * p * 4, &top_t_);
  const BufferRef t(top_t_.get(), 0);
  const BufferRef src = Offset(top_diff, size_t(first_image) * d.out_channels * p, 4);
  k.gather.ArgBuffer(src.mem, src.byte_offset, 4)
      .ArgBuffer(t.mem, 0, 4)
      .Arg(int32_t{d.out_channels})
      .Arg(int32_t{k.images})
      .Arg(int32_t{p});
  k.gather.Launch1D(size_t(d.out_channels) * k.images, queue);
  return t;
}

void Convolution::BackwardData(const BufferRef& top_diff, const BufferRef& weights,
                               const BufferRef& bottom_diff, Queue* queue) {
  BackwardDataAndWeights(top_diff, {}, weights, {}, {}, bottom_diff, queue);
}

void Convolution::BackwardWeights(const BufferRef& top_diff, const BufferRef& input,
                                  const BufferRef& weight_diff, const BufferRef& bias_diff,
                                  Queue* queue) {
  BackwardDataAndWeights(top_diff, input, {}, weight_diff, bias_diff, {}, queue);
}

void Convolution::BackwardDataAndWeights(const BufferRef& top_diff, const BufferRef& input,
                                         const BufferRef& weights, const BufferRef& weight_diff,
                                         const BufferRef& bias_diff,
                                         const BufferRef& bottom_diff, Queue* queue) {
  const ConvDesc& d = desc_;
  Backward& k = PrepareBackward();
  if (!weight_diff && !bottom_diff) return;
  CheckBuffer(d, "top_diff", top_diff, d.output_count(), 4);
  if (weight_diff) {
    CheckBuffer(d, "input", input, d.input_count(), 4);
    CheckBuffer(d, "weight_diff", weight_diff, d.weight_count(), 4);
  }
  if (bottom_diff) {
    CheckBuffer(d, "weights", weights, d.weight_count(), 4);
    CheckBuffer(d, "bottom_diff", bottom_diff, d.input_count(), 4);
  }
  const GroupShape s(d);
  const int cg = s.cg, ocg = s.ocg, kc = s.kc, oh = d.out_h(), ow = d.out_w();
  const int nc = k.images, n = nc * s.p;
  const size_t image = size_t(d.channels) * d.height * d.width;
  const size_t plane = size_t(d.height) * d.width;
  TakeScratch(*device_, arena_.get(), queue, ScratchUse::kColumns, size_t(kc) * n * 4, &col_);
  const BufferRef col(col_.get(), 0);
  const int rows = kc * nc;  // the im2col kernel's (column row, image) pairs
  for (int first = 0; first < d.batch; first += nc) {
    // One gather of the chunk's top diff serves both GEMMs of every group.
    const BufferRef t = GatherTop(top_diff, first, queue);
    for (int g = 0; g < d.groups; ++g) {
      const BufferRef t_g = Offset(t, size_t(g) * ocg * n, 4);
      if (weight_diff) {
        const BufferRef src = Offset(input, first * image + size_t(g) * cg * plane, 4);
        k.im2col.ArgBuffer(src.mem, src.byte_offset, 4).ArgBuffer(col.mem, 0, 4);
        for (int v : {d.height, d.width, d.kernel_h, d.kernel_w, d.stride_h, d.stride_w, d.pad_h,
                      d.pad_w, d.dilation_h, d.dilation_w, oh, ow, nc, int(image), rows, 0})
          k.im2col.Arg(int32_t{v});
        k.im2col.Launch1D(size_t(rows), queue);
        GemmArgs a;
        a.a = t_g;
        a.b = col;
        a.c = Offset(weight_diff, size_t(g) * ocg * kc, 4);
        a.beta = 1.0f;  // accumulate over chunks (and into what the caller had)
        k.weights->Run(a, queue);
      }
      if (bottom_diff) {  // the columns are free again: the data GEMM overwrites them
        GemmArgs a;
        a.a = Offset(weights, size_t(g) * ocg * kc, 4);
        a.b = t_g;
        a.c = col;
        k.data->Run(a, queue);
        const BufferRef dst = Offset(bottom_diff, first * image + size_t(g) * cg * plane, 4);
        k.col2im.ArgBuffer(col.mem, 0, 4).ArgBuffer(dst.mem, dst.byte_offset, 4);
        for (int v : {cg, d.height, d.width, d.kernel_h, d.kernel_w, d.stride_h, d.stride_w,
                      d.pad_h, d.pad_w, d.dilation_h, d.dilation_w, oh, ow, nc, int(image)})
          k.col2im.Arg(int32_t{v});
        k.col2im.Launch1D(size_t(cg) * nc * d.height, queue);
      }
    }
  }
  if (weight_diff && bias_diff) {
    CheckBuffer(d, "bias_diff", bias_diff, size_t(d.out_channels), 4);
    k.bias.ArgBuffer(top_diff.mem, top_diff.byte_offset, 4)
        .ArgBuffer(bias_diff.mem, bias_diff.byte_offset, 4)
        .Arg(int32_t{d.batch})
        .Arg(int32_t{d.out_channels})
        .Arg(int32_t{d.out_h() * d.out_w()});
    k.bias.Launch1D(size_t(d.out_channels), queue);
  }
}

}  // namespace mpcaffe::libdnn
