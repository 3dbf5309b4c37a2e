// libdnn/conv_backward.cc — the fp32 backward pass of the convolution: per image and group,
// im2col (the forward path's kernel) and col2im around two LibDNN GEMMs — the same generated,
// tuned kernels as the forward pass (TunedGemmConfig; `mpcaffe tune` finds their shapes in a
// TRAIN-phase net) — and the bias gradient.
#include <string>

#include "device/error.h"
#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"
#include "libdnn/gemm.h"

namespace mpcaffe::libdnn {

using namespace conv_internal;  // NOLINT: this file's private vocabulary

namespace {

std::string BackwardKernelName(const char* what) { return std::string("conv_bwd_") + what; }

/// The im2col / col2im geometry arguments of one group.
void SetGeometry(Kernel& k, const ConvDesc& d) {
  for (int v : {d.channels / d.groups, d.height, d.width, d.kernel_h, d.kernel_w, d.stride_h,
                d.stride_w, d.pad_h, d.pad_w, d.dilation_h, d.dilation_w, d.out_h(), d.out_w()})
    k.Arg(int32_t{v});
}

}  // namespace

std::string Convolution::BackwardSource(const KernelTarget& target) {
  KernelWriter w(target, "conv_backward");
  w.AddType("Dtype", DataType::kFloat32);
  AddIm2colKernel(w, DataType::kFloat32);
  const char* geometry[] = {"Cg", "H",  "W",  "KH", "KW", "sh", "sw",
                            "ph", "pw", "dh", "dw", "OH", "OW"};
  auto& col2im = w.Kernel(BackwardKernelName("col2im")).In("float", "col").Out("float", "x");
  for (const char* g : geometry) col2im.Value("int", g);
  col2im.Body(R"(  const int P = OH * OW;
  $loop(i, Cg * H * W) {
    const int ix = i % W;
    const int iy = (i / W) % H;
    const int ic = i / (W * H);
    float v = 0.0f;
    for (int ky = 0; ky < KH; ++ky) {
      const int ty = iy + ph - ky * dh;
      if (ty < 0 || ty % sh) continue;
      const int oy = ty / sh;
      if (oy >= OH) continue;
      for (int kx = 0; kx < KW; ++kx) {
        const int tx = ix + pw - kx * dw;
        if (tx < 0 || tx % sw) continue;
        const int ox = tx / sw;
        if (ox >= OW) continue;
        v += col[((ic * KH + ky) * KW + kx) * P + oy * OW + ox];
      }
    }
    x[i] = v;
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

BufferRef Convolution::Columns(const GroupShape& s) {
  const size_t bytes = size_t(s.kc) * s.p * 4;
  if (!col_ || col_->bytes() < bytes) col_ = device_->Allocate(bytes);
  return BufferRef(col_.get(), 0);
}

Convolution::Backward& Convolution::PrepareBackward() {
  const ConvDesc& d = desc_;
  if (d.type != DataType::kFloat32)
    throw Error("convolution " + d.ToString() + ": backward is fp32 only");
  if (backward_) return *backward_;
  auto b = std::make_unique<Backward>();
  const GroupShape s(d);
  const int ocg = s.ocg, kc = s.kc, p = s.p;
  // Data: col (kc × P) = W_gᵀ (W_g stored ocg × kc) · top_g (ocg × P).
  b->data = std::make_unique<Gemm>(*device_, GemmDesc::Float(kc, p, ocg, true, false, kc, p, p));
  // Weights: dW_g (ocg × kc) += top_g (ocg × P) · colᵀ (col stored kc × P).
  b->weights = std::make_unique<Gemm>(*device_, GemmDesc::Float(ocg, kc, p, false, true, p, p, kc));
  auto program = device_->GetProgram(BackwardSource(KernelTarget::Of(*device_)), "",
                                     ProgramHints::OneDimensional());
  b->im2col = program->GetKernel(Im2colKernelName(DataType::kFloat32));
  b->col2im = program->GetKernel(BackwardKernelName("col2im"));
  b->bias = program->GetKernel(BackwardKernelName("bias"));
  backward_ = std::move(b);
  return *backward_;
}

void Convolution::BackwardData(const BufferRef& top_diff, const BufferRef& weights,
                               const BufferRef& bottom_diff, Queue* queue) {
  const ConvDesc& d = desc_;
  Backward& k = PrepareBackward();
  CheckBuffer(d, "top_diff", top_diff, d.output_count(), 4);
  CheckBuffer(d, "weights", weights, d.weight_count(), 4);
  CheckBuffer(d, "bottom_diff", bottom_diff, d.input_count(), 4);
  const GroupShape s(d);
  const int cg = s.cg, ocg = s.ocg, kc = s.kc, p = s.p;
  const BufferRef col = Columns(s);
  for (int n = 0; n < d.batch; ++n) {
    for (int g = 0; g < d.groups; ++g) {
      GemmArgs a;
      a.a = Offset(weights, size_t(g) * ocg * kc, 4);
      a.b = Offset(top_diff, (size_t(n) * d.out_channels + size_t(g) * ocg) * p, 4);
      a.c = col;
      k.data->Run(a, queue);
      const BufferRef dst =
          Offset(bottom_diff, (size_t(n) * d.channels + size_t(g) * cg) * d.height * d.width, 4);
      k.col2im.ArgBuffer(col.mem, 0, 4).ArgBuffer(dst.mem, dst.byte_offset, 4);
      SetGeometry(k.col2im, d);
      k.col2im.Launch1D(size_t(cg) * d.height * d.width, queue);
    }
  }
}

void Convolution::BackwardWeights(const BufferRef& top_diff, const BufferRef& input,
                                  const BufferRef& weight_diff, const BufferRef& bias_diff,
                                  Queue* queue) {
  const ConvDesc& d = desc_;
  Backward& k = PrepareBackward();
  CheckBuffer(d, "top_diff", top_diff, d.output_count(), 4);
  CheckBuffer(d, "input", input, d.input_count(), 4);
  CheckBuffer(d, "weight_diff", weight_diff, d.weight_count(), 4);
  const GroupShape s(d);
  const int cg = s.cg, ocg = s.ocg, kc = s.kc, oh = d.out_h(), ow = d.out_w(), p = s.p;
  const BufferRef col = Columns(s);
  const int rows = kc * oh;  // the im2col kernel's (column row, oy) pairs of one group
  for (int n = 0; n < d.batch; ++n) {
    for (int g = 0; g < d.groups; ++g) {
      const BufferRef src =
          Offset(input, (size_t(n) * d.channels + size_t(g) * cg) * d.height * d.width, 4);
      k.im2col.ArgBuffer(src.mem, src.byte_offset, 4).ArgBuffer(col.mem, 0, 4);
      for (int v : {d.height, d.width, d.kernel_h, d.kernel_w, d.stride_h, d.stride_w, d.pad_h,
                    d.pad_w, d.dilation_h, d.dilation_w, oh, ow, rows, 0})
        k.im2col.Arg(int32_t{v});
      k.im2col.Launch1D(size_t(rows), queue);
      GemmArgs a;
      a.a = Offset(top_diff, (size_t(n) * d.out_channels + size_t(g) * ocg) * p, 4);
      a.b = col;
      a.c = Offset(weight_diff, size_t(g) * ocg * kc, 4);
      a.beta = 1.0f;  // accumulate over images (and into what the caller had)
      k.weights->Run(a, queue);
    }
  }
  if (bias_diff) {
    CheckBuffer(d, "bias_diff", bias_diff, size_t(d.out_channels), 4);
    k.bias.ArgBuffer(top_diff.mem, top_diff.byte_offset, 4)
        .ArgBuffer(bias_diff.mem, bias_diff.byte_offset, 4)
        .Arg(int32_t{d.batch})
        .Arg(int32_t{d.out_channels})
        .Arg(int32_t{p});
    k.bias.Launch1D(size_t(d.out_channels), queue);
  }
}

}  // namespace mpcaffe::libdnn
