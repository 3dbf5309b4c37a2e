// libdnn/conv_reference.cc — the convolution's host references: the forward pass in every data
// type (the kernels' integer pipeline exactly for quantized types) and the fp32 backward passes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "libdnn/conv.h"
#include "libdnn/typed_host.h"
#include "quant/int4.h"

namespace mpcaffe::libdnn {

void ConvForwardReference(const ConvDesc& d, const ConvQuant& quant, const void* input,
                          const void* weights, const void* bias, void* output,
                          const void* residual) {
  d.Validate();
  if (d.weight_bits == 4) {  // the int8 arithmetic on the unpacked weights
    const size_t k = d.weight_count() / size_t(d.out_channels);
    std::vector<int8_t> w(d.weight_count());
    quant::UnpackInt4(static_cast<const uint8_t*>(weights), size_t(d.out_channels), k, w.data());
    ConvDesc d8 = d;
    d8.weight_bits = 8;
    ConvForwardReference(d8, quant, input, w.data(), bias, output, residual);
    return;
  }
  const bool q = IsQuantized(d.type);
  const int cg = d.channels / d.groups, ocg = d.out_channels / d.groups;
  const int oh = d.out_h(), ow = d.out_w();
  for (int n = 0; n < d.batch; ++n)
    for (int o = 0; o < d.out_channels; ++o) {
      const int g = o / ocg;
      const int32_t wz = q ? quant.w_zero[quant.w_zero.size() == 1 ? 0 : o] : 0;
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double facc = 0.0;
          int64_t iacc = 0;
          for (int ky = 0; ky < d.kernel_h; ++ky)
            for (int kx = 0; kx < d.kernel_w; ++kx) {
              const int iy = oy * d.stride_h - d.pad_h + ky * d.dilation_h;
              const int ix = ox * d.stride_w - d.pad_w + kx * d.dilation_w;
              if (iy < 0 || iy >= d.height || ix < 0 || ix >= d.width) continue;
              for (int ic = 0; ic < cg; ++ic) {
                const size_t xi =
                    ((size_t(n) * d.channels + g * cg + ic) * d.height + iy) * d.width + ix;
                const size_t wi = ((size_t(o) * cg + ic) * d.kernel_h + ky) * d.kernel_w + kx;
                if (q) {
                  iacc += int64_t(host::LoadQ(d.type, input, xi) - quant.x_zero) *
                          (host::LoadQ(d.type, weights, wi, d.weights_signed) - wz);
                } else {
                  facc += double(host::LoadF(d.type, input, xi)) *
                          double(host::LoadF(d.type, weights, wi));
                }
              }
            }
          const size_t yi = ((size_t(n) * d.out_channels + o) * oh + oy) * ow + ox;
          if (q) {
            if (d.bias)
              iacc += d.type == DataType::kInt16Q ? static_cast<const int64_t*>(bias)[o]
                                                  : static_cast<const int32_t*>(bias)[o];
            const auto& m = quant.multiplier[quant.multiplier.size() == 1 ? 0 : o];
            int64_t r = quant.c_zero + host::Requant(d.type, iacc, m);
            if (d.residual)
              r += host::Requant(d.type, host::LoadQ(d.type, residual, yi) - quant.res_zero,
                                 quant.res_multiplier);
            host::StoreQ(d.type, output, yi, r, d.relu ? quant.c_zero : INT64_MIN);
          } else {
            if (d.bias) facc += static_cast<const float*>(bias)[o];
            if (d.residual) facc = float(facc) + host::LoadF(d.type, residual, yi);
            if (d.relu && facc < 0) facc = 0;
            host::StoreF(d.type, output, yi, static_cast<float>(facc));
          }
        }
    }
}

void ConvBackwardDataReference(const ConvDesc& d, const float* top, const float* w, float* bottom) {
  d.Validate();
  const int cg = d.channels / d.groups, ocg = d.out_channels / d.groups;
  const int oh = d.out_h(), ow = d.out_w();
  std::vector<double> acc(d.input_count(), 0.0);
  for (int n = 0; n < d.batch; ++n)
    for (int o = 0; o < d.out_channels; ++o) {
      const int g = o / ocg;
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          const double t = top[((size_t(n) * d.out_channels + o) * oh + oy) * ow + ox];
          for (int ic = 0; ic < cg; ++ic)
            for (int ky = 0; ky < d.kernel_h; ++ky)
              for (int kx = 0; kx < d.kernel_w; ++kx) {
                const int iy = oy * d.stride_h - d.pad_h + ky * d.dilation_h;
                const int ix = ox * d.stride_w - d.pad_w + kx * d.dilation_w;
                if (iy < 0 || iy >= d.height || ix < 0 || ix >= d.width) continue;
                acc[((size_t(n) * d.channels + g * cg + ic) * d.height + iy) * d.width + ix] +=
                    t * w[((size_t(o) * cg + ic) * d.kernel_h + ky) * d.kernel_w + kx];
              }
        }
    }
  for (size_t i = 0; i < acc.size(); ++i) bottom[i] = static_cast<float>(acc[i]);
}

void ConvBackwardWeightsReference(const ConvDesc& d, const float* top, const float* x, float* wdiff,
                                  float* bdiff) {
  d.Validate();
  const int cg = d.channels / d.groups, ocg = d.out_channels / d.groups;
  const int oh = d.out_h(), ow = d.out_w();
  for (int o = 0; o < d.out_channels; ++o) {
    const int g = o / ocg;
    double b = 0.0;
    for (int ic = 0; ic < cg; ++ic)
      for (int ky = 0; ky < d.kernel_h; ++ky)
        for (int kx = 0; kx < d.kernel_w; ++kx) {
          double s = 0.0;
          for (int n = 0; n < d.batch; ++n)
            for (int oy = 0; oy < oh; ++oy)
              for (int ox = 0; ox < ow; ++ox) {
                const int iy = oy * d.stride_h - d.pad_h + ky * d.dilation_h;
                const int ix = ox * d.stride_w - d.pad_w + kx * d.dilation_w;
                if (iy < 0 || iy >= d.height || ix < 0 || ix >= d.width) continue;
                s += double(top[((size_t(n) * d.out_channels + o) * oh + oy) * ow + ox]) *
                     x[((size_t(n) * d.channels + g * cg + ic) * d.height + iy) * d.width + ix];
              }
          wdiff[((size_t(o) * cg + ic) * d.kernel_h + ky) * d.kernel_w + kx] +=
              static_cast<float>(s);
        }
    if (bdiff) {
      for (int n = 0; n < d.batch; ++n)
        for (int p = 0; p < oh * ow; ++p) b += top[(size_t(n) * d.out_channels + o) * oh * ow + p];
      bdiff[o] += static_cast<float>(b);
    }
  }
}

}  // namespace mpcaffe::libdnn
