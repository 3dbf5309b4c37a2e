// layers/elementwise.cc — launching the element-wise kernels, and their host references.
#include "layers/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "codegen/elementwise.h"
#include "codegen/kernel_writer.h"
#include "codegen/typed_buffer.h"
#include "quant/fixed_point.h"
#include "quant/quant_params.h"

namespace mpcaffe {

namespace {

using quant::FixedPointMultiplier;

struct SignedMultiplier {
  FixedPointMultiplier m;
  int32_t sign = 1;
};

SignedMultiplier Multiplier(double real) {
  SignedMultiplier s;
  s.sign = real < 0 ? -1 : 1;
  s.m = quant::QuantizeMultiplier(std::fabs(real));
  return s;
}

void CheckQuantRelu(DataType type, float slope) {
  if (IsQuantized(type) && slope < 0)
    throw std::invalid_argument(std::string("ReLU on ") + Name(type) +
                                ": negative_slope must be >= 0 for quantized data (got " +
                                std::to_string(slope) + ")");
}

// Host storage access (codegen/typed_buffer.h) and the accumulator requantization
// (quant::Requant) are the ones the libdnn references use.
using quant::Requant;

}  // namespace

Kernel& ElementwiseOps::Get(const std::string& name, const std::function<std::string()>& source) {
  auto it = kernels_.find(name);
  if (it == kernels_.end())
    it = kernels_
             .emplace(name, device_.GetProgram(source(), "", ProgramHints::OneDimensional())
                                ->GetKernel(name))
             .first;
  return it->second;
}

void ElementwiseOps::Relu(DataType type, int n, DeviceMemory& x, DeviceMemory& y, float slope,
                          Affine xq, Affine yq) {
  CheckQuantRelu(type, slope);
  const size_t es = SizeOf(type);
  const KernelTarget target = KernelTarget::Of(device_);
  const bool vec = HasVectorRelu(target, type);
  Kernel& k = Get(ElementwiseKernelName("relu", type) + (vec ? "_v8" : ""),
                  [&] { return ReluSource(target, type); });
  FixedPointMultiplier pos, neg;
  if (IsQuantized(type)) {
    pos = quant::QuantizeMultiplier(double(xq.scale) / yq.scale);
    neg = quant::QuantizeMultiplier(double(slope) * xq.scale / yq.scale);
  }
  k.Arg(int32_t{n}).ArgBuffer(&x, 0, es).ArgBuffer(&y, 0, es).Arg(slope)
      .Arg(xq.zero_point).Arg(yq.zero_point)
      .Arg(pos.multiplier).Arg(pos.shift).Arg(neg.multiplier).Arg(neg.shift);
  k.Launch1D(vec ? EightLaneItems(n) : size_t(n));
}

void ElementwiseOps::Scale(DataType type, int n, float alpha, DeviceMemory& x, DeviceMemory& y,
                           Affine xq, Affine yq) {
  const size_t es = SizeOf(type);
  Kernel& k = Get(ElementwiseKernelName("scale", type),
                  [&] { return ScaleSource(KernelTarget::Of(device_), type); });
  SignedMultiplier m;
  if (IsQuantized(type)) m = Multiplier(double(alpha) * xq.scale / yq.scale);
  k.Arg(int32_t{n}).ArgBuffer(&x, 0, es).ArgBuffer(&y, 0, es).Arg(alpha)
      .Arg(xq.zero_point).Arg(yq.zero_point).Arg(m.m.multiplier).Arg(m.m.shift).Arg(m.sign);
  k.Launch1D(n);
}

void ElementwiseOps::Axpby(DataType type, int n, float a, DeviceMemory& x, float b,
                           DeviceMemory& y, Affine xq, Affine yq) {
  const size_t es = SizeOf(type);
  Kernel& k = Get(ElementwiseKernelName("axpby", type),
                  [&] { return AxpbySource(KernelTarget::Of(device_), type); });
  SignedMultiplier ma, mb;
  if (IsQuantized(type)) {
    ma = Multiplier(double(a) * xq.scale / yq.scale);
    mb = Multiplier(double(b));
  }
  k.Arg(int32_t{n}).ArgBuffer(&x, 0, es).ArgBuffer(&y, 0, es).Arg(a).Arg(b)
      .Arg(xq.zero_point).Arg(yq.zero_point)
      .Arg(ma.m.multiplier).Arg(ma.m.shift).Arg(ma.sign)
      .Arg(mb.m.multiplier).Arg(mb.m.shift).Arg(mb.sign);
  k.Launch1D(n);
}

void ElementwiseOps::Convert(DataType from, DataType to, int n, DeviceMemory& x, DeviceMemory& y,
                             Affine xq, Affine yq) {
  const KernelTarget target = KernelTarget::Of(device_);
  const bool vec = HasVectorConvert(target, from, to);
  Kernel& k = Get(ConvertKernelName(from, to) + (vec ? "_v8" : ""),
                  [&] { return ConvertSource(target, from, to); });
  FixedPointMultiplier m;
  if (IsQuantized(from) && IsQuantized(to)) m = quant::QuantizeMultiplier(double(xq.scale) / yq.scale);
  k.Arg(int32_t{n}).ArgBuffer(&x, 0, SizeOf(from)).ArgBuffer(&y, 0, SizeOf(to))
      .Arg(xq.scale).Arg(xq.zero_point).Arg(yq.scale).Arg(yq.zero_point)
      .Arg(m.multiplier).Arg(m.shift);
  k.Launch1D(vec ? EightLaneItems(n) : size_t(n));
}

namespace reference {

void Relu(DataType t, int n, const void* x, void* y, float slope, Affine xq, Affine yq) {
  CheckQuantRelu(t, slope);
  if (!IsQuantized(t)) {
    for (int i = 0; i < n; ++i) {
      float v = LoadF(t, x, i);
      StoreF(t, y, i, v > 0.0f ? v : v * slope);
    }
    return;
  }
  const auto pos = quant::QuantizeMultiplier(double(xq.scale) / yq.scale);
  const auto neg = quant::QuantizeMultiplier(double(slope) * xq.scale / yq.scale);
  for (int i = 0; i < n; ++i) {
    int32_t d = LoadQ(t, x, i) - xq.zero_point;
    StoreQ(t, y, i, yq.zero_point + Requant(t, d, d >= 0 ? pos : neg));
  }
}

void Scale(DataType t, int n, float alpha, const void* x, void* y, Affine xq, Affine yq) {
  if (!IsQuantized(t)) {
    for (int i = 0; i < n; ++i) StoreF(t, y, i, alpha * LoadF(t, x, i));
    return;
  }
  const auto m = Multiplier(double(alpha) * xq.scale / yq.scale);
  for (int i = 0; i < n; ++i)
    StoreQ(t, y, i, yq.zero_point + m.sign * Requant(t, LoadQ(t, x, i) - xq.zero_point, m.m));
}

void Axpby(DataType t, int n, float a, const void* x, float b, void* y, Affine xq, Affine yq) {
  if (!IsQuantized(t)) {
    for (int i = 0; i < n; ++i) StoreF(t, y, i, a * LoadF(t, x, i) + b * LoadF(t, y, i));
    return;
  }
  const auto ma = Multiplier(double(a) * xq.scale / yq.scale);
  const auto mb = Multiplier(double(b));
  for (int i = 0; i < n; ++i) {
    int64_t r = yq.zero_point + ma.sign * Requant(t, LoadQ(t, x, i) - xq.zero_point, ma.m) +
                mb.sign * Requant(t, LoadQ(t, y, i) - yq.zero_point, mb.m);
    StoreQ(t, y, i, r);
  }
}

void Convert(DataType from, DataType to, int n, const void* x, void* y, Affine xq, Affine yq) {
  const bool qx = IsQuantized(from), qy = IsQuantized(to);
  const auto m = qx && qy ? quant::QuantizeMultiplier(double(xq.scale) / yq.scale)
                          : FixedPointMultiplier{};
  const auto& ty = TraitsOf(to);
  for (int i = 0; i < n; ++i) {
    if (!qx && !qy) {
      StoreF(to, y, i, LoadF(from, x, i));
    } else if (qx && !qy) {
      StoreF(to, y, i, xq.scale * static_cast<float>(LoadQ(from, x, i) - xq.zero_point));
    } else if (!qx && qy) {
      float v = LoadF(from, x, i);
      int64_t q = yq.zero_point;
      if (!std::isnan(v)) {
        float r = std::nearbyint(v / yq.scale) + static_cast<float>(yq.zero_point);
        r = std::fmin(std::fmax(r, static_cast<float>(ty.qmin)), static_cast<float>(ty.qmax));
        q = static_cast<int64_t>(r);
      }
      StoreQ(to, y, i, q);
    } else {
      StoreQ(to, y, i, yq.zero_point + Requant(from, LoadQ(from, x, i) - xq.zero_point, m));
    }
  }
}

}  // namespace reference

}  // namespace mpcaffe
