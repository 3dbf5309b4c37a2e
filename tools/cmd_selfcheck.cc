// tools/cmd_selfcheck.cc — `mpcaffe selfcheck [--device i] [--size n]`: runs every element-wise
// kernel in every data type on a device against the host reference, one line per data type.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>

#include "codegen/datatype.h"
#include "device/device.h"
#include "layers/elementwise.h"
#include "tools/command.h"

namespace mpcaffe::tools {
namespace {

std::vector<uint8_t> Random(DataType t, int n, std::mt19937& rng) {
  std::vector<uint8_t> b(std::max<size_t>(1, n * SizeOf(t)));
  std::uniform_real_distribution<float> real(-4.0f, 4.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  if (IsQuantized(t)) {
    for (auto& v : b) v = static_cast<uint8_t>(byte(rng));
  } else {
    for (int i = 0; i < n; ++i) {
      float v = real(rng);
      if (t == DataType::kFloat32) {
        std::memcpy(&b[i * 4], &v, 4);
      } else {
        uint16_t h = FloatToHalf(v);
        std::memcpy(&b[i * 2], &h, 2);
      }
    }
  }
  return b;
}

/// Largest difference in units of the output type (quantization steps, half ulps, or
/// relative error for fp32).
double Difference(DataType t, int n, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    double d = 0;
    switch (t) {
      case DataType::kFloat32: {
        float x, y;
        std::memcpy(&x, &a[i * 4], 4);
        std::memcpy(&y, &b[i * 4], 4);
        d = std::fabs(x - y) / std::max(1e-30, double(std::fabs(y)));
        break;
      }
      case DataType::kFloat16:
      case DataType::kInt16Q: {
        uint16_t x, y;
        std::memcpy(&x, &a[i * 2], 2);
        std::memcpy(&y, &b[i * 2], 2);
        d = std::abs(int(x) - int(y));
        break;
      }
      case DataType::kInt8Q: d = std::abs(int(a[i]) - int(b[i])); break;
    }
    worst = std::max(worst, d);
  }
  return worst;
}

int RunSelfcheck(const std::vector<std::string>& args) {
  int n = 0;
  try {
    n = std::stoi(FlagValue(args, "--size", "100003"));
  } catch (const std::exception&) {
    return UsageError("selfcheck", "--size needs a number");
  }
  if (n < 1) return UsageError("selfcheck", "--size must be at least 1");
  Device& device = DeviceOrDefault(FlagValue(args, "--device"));
  ElementwiseOps ops(device);
  std::mt19937 rng(7);
  std::printf("element-wise self-check on %s, %d elements per kernel\n", device.Describe().c_str(), n);
  int failures = 0;
  for (DataType t : kAllDataTypes) {
    const Affine xq = t == DataType::kInt8Q ? Affine{0.05f, 128} : Affine{0.0002f, 30000};
    const Affine yq = t == DataType::kInt8Q ? Affine{0.03f, 10} : Affine{0.00015f, 1000};
    const double tolerance = t == DataType::kFloat32 ? 1e-5 : (t == DataType::kFloat16 ? 1 : 0);
    auto start = std::chrono::steady_clock::now();
    int kernels = 0;
    double worst = 0;
    auto check = [&](DataType out, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
      ++kernels;
      double tol = out == DataType::kFloat32 ? 1e-5 : (out == DataType::kFloat16 ? 1 : 0);
      double d = Difference(out, n, got, want);
      worst = std::max(worst, d);
      if (d > tol) ++failures;
      return d <= tol;
    };
    auto xh = Random(t, n, rng), yh = Random(t, n, rng);
    auto x = device.Allocate(xh.size()), y = device.Allocate(xh.size());
    device.CopyToDevice(xh.data(), x.get(), 0, xh.size());
    std::vector<uint8_t> got(xh.size()), want(xh.size());
    bool ok = true;

    ops.Relu(t, n, *x, *y, 0.0f, xq, yq);
    device.CopyToHost(y.get(), 0, got.data(), got.size());
    reference::Relu(t, n, xh.data(), want.data(), 0.0f, xq, yq);
    ok &= check(t, got, want);

    ops.Scale(t, n, -1.5f, *x, *y, xq, yq);
    device.CopyToHost(y.get(), 0, got.data(), got.size());
    reference::Scale(t, n, -1.5f, xh.data(), want.data(), xq, yq);
    ok &= check(t, got, want);

    device.CopyToDevice(yh.data(), y.get(), 0, yh.size());
    ops.Axpby(t, n, 0.5f, *x, 2.0f, *y, xq, yq);
    device.CopyToHost(y.get(), 0, got.data(), got.size());
    want = yh;
    reference::Axpby(t, n, 0.5f, xh.data(), 2.0f, want.data(), xq, yq);
    ok &= check(t, got, want);

    for (DataType to : kAllDataTypes) {
      const Affine oq = to == DataType::kInt8Q ? Affine{0.03f, 10} : Affine{0.00015f, 1000};
      auto z = device.Allocate(std::max<size_t>(1, n * SizeOf(to)));
      ops.Convert(t, to, n, *x, *z, xq, oq);
      std::vector<uint8_t> zg(z->bytes()), zw(z->bytes());
      device.CopyToHost(z.get(), 0, zg.data(), zg.size());
      reference::Convert(t, to, n, xh.data(), zw.data(), xq, oq);
      ok &= check(to, zg, zw);
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("  %-6s %2d kernels  %-4s  max difference %-8g (tolerance %g)  %.2f s\n", Name(t),
                kernels, ok ? "ok" : "FAIL", worst, tolerance, seconds);
  }
  std::printf("device memory: peak %.1f MiB\n", device.peak_bytes() / 1048576.0);
  return failures ? 1 : 0;
}

RegisterCommand selfcheck_command("selfcheck",
                                  "run every element-wise kernel in every dtype against the host "
                                  "reference (--device i, --size n)",
                                  "usage: mpcaffe selfcheck [--device i] [--size n]\n"
                                  "  --size  elements per kernel (100003)\n",
                                  {{"--device", "--size"}, {}}, RunSelfcheck);

}  // namespace
}  // namespace mpcaffe::tools
