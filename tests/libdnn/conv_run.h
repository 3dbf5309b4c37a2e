// tests/libdnn/conv_run.h — one int8 convolution's forward pass from host bytes, shared by the
// byte-quad tests of the direct, pointwise and depthwise kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "device/device.h"
#include "libdnn/conv.h"

namespace mpcaffe::libdnn::test_conv {

using Bytes = std::vector<uint8_t>;

/// `n` bytes at `p` in a new allocation of at least 4 bytes (an empty residual included).
inline std::shared_ptr<DeviceMemory> Upload(Device& dev, const void* p, size_t n) {
  auto m = dev.Allocate(std::max<size_t>(n, 4));
  if (n) dev.CopyToDevice(p, m.get(), 0, n);
  return m;
}
inline std::shared_ptr<DeviceMemory> Upload(Device& dev, const Bytes& b) {
  return Upload(dev, b.data(), b.size());
}

/// `conv`'s output bytes for input `x`, weights `w`, the int32 `bias` and the residual `res`.
inline Bytes RunForward(Device& dev, Convolution& conv, const Bytes& x, const Bytes& w,
                        const std::vector<int32_t>& bias, const Bytes& res, size_t out_bytes) {
  auto xm = Upload(dev, x.data(), x.size()), wm = Upload(dev, w.data(), w.size());
  auto bm = Upload(dev, bias.data(), bias.size() * 4), rm = Upload(dev, res.data(), res.size());
  auto ym = dev.Allocate(out_bytes);
  conv.SetWeights(BufferRef(wm.get(), 0));
  conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0), nullptr,
               BufferRef(rm.get(), 0));
  Bytes got(out_bytes);
  dev.CopyToHost(ym.get(), 0, got.data(), got.size());
  return got;
}

}  // namespace mpcaffe::libdnn::test_conv
