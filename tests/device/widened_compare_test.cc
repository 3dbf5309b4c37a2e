// tests/device/widened_compare_test.cc — DeviceInfo::long_compare_of_int_broken on every OpenCL
// device present: the minimal kernel of the compiler fault (a long widened from an int, compared
// with a constant) shows which compilers have it and that each of them is flagged, and the
// writer's forms ($long_of_int, $negative_i64, the requantization helpers) give the host's
// integers on every device, flagged or not. Mesa 22.3's rusticl (llvmpipe) has the fault; the
// rusticl-specific parts are skipped, with the reason, where no rusticl device is present.
#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "quant/fixed_point.h"

namespace mpcaffe {
namespace {

const char kNoRusticl[] =
    "no rusticl device on this machine (Debian's mesa-opencl-icd; mpcaffe asks for its llvmpipe "
    "device unless RUSTICL_ENABLE is set)";

std::vector<Device*> OpenCLDevices() {
  std::vector<Device*> out;
  for (Device* d : DeviceList())
    if (d->backend() == Backend::kOpenCL) out.push_back(d);
  return out;
}

/// Ints around the constants compared with and at the ends of the range.
const std::vector<int32_t> kValues = {-5, -1, 0, 1, 2, 3, 4, 100, -30000, 60000, INT_MIN, INT_MAX,
                                      INT_MIN + 1, INT_MAX - 1, -3, 64, 63, -64};

/// y[i] = ((long)x[i] < 3) written plainly: the minimal kernel of the fault. Returns whether
/// the device gave the comparison's value for every x.
bool PlainWidenedCompareIsRight(Device& d) {
  KernelWriter w(KernelTarget::Of(d), "test_device");
  w.Kernel("widened_compare").Value("int", "n").In("int", "x").Out("int", "y").Body(R"(
  const int i = $global_id(0);
  if (i >= n) return;
  const long a = x[i];
  y[i] = a < 3;
)");
  auto program = d.BuildProgram(w.Source());
  const size_t n = kValues.size();
  auto x = d.Alloc<int32_t>(n);
  auto y = d.Alloc<int32_t>(n);
  d.Write(x, kValues.data(), n);
  program->GetKernel("widened_compare").Arg(int32_t(n)).Arg(x).Arg(y).Launch({n, 1, 1});
  std::vector<int32_t> got(n);
  d.Read(y, got.data(), n);
  for (size_t i = 0; i < n; ++i)
    if (got[i] != (int64_t{kValues[i]} < 3 ? 1 : 0)) return false;
  return true;
}

TEST(WidenedCompare, DevicesWhoseCompilerGetsItWrongAreFlagged) {
  // mpcaffe asked for rusticl's CPU device before the ICD loader started (device/opencl).
  DeviceList();
  EXPECT_NE(std::getenv("RUSTICL_ENABLE"), nullptr);
  bool rusticl = false;
  for (Device* d : OpenCLDevices()) {
    SCOPED_TRACE(d->Describe() + " (" + d->info().implementation + ", " +
                 d->info().driver_version + ")");
    const bool right = PlainWidenedCompareIsRight(*d);
    EXPECT_TRUE(right || d->info().long_compare_of_int_broken)
        << "(long)x < 3 is wrong on this device: set DeviceInfo::long_compare_of_int_broken for "
           "it in device/opencl";
    if (right && d->info().long_compare_of_int_broken)
      std::printf("[ note     ] %s compiles (long)x < 3 right: long_compare_of_int_broken may be "
                  "narrowed to older versions of %s\n",
                  d->Describe().c_str(), d->info().implementation.c_str());
    if (d->info().implementation == "rusticl") {
      rusticl = true;
      EXPECT_EQ(FindDevice("rusticl"), d) << "the selector rusticl names the first rusticl device";
      EXPECT_TRUE(d->info().long_compare_of_int_broken);
    }
  }
  if (!rusticl) GTEST_SKIP() << kNoRusticl;
}

// Without $long_of_int / $negative_i64's forms, rusticl gives 0 for every widened int below 3
// and mp_requant64 treats every negative int as positive (int16q's element-wise kernels: the
// self-check's "max difference 65535").
TEST(WidenedCompare, WriterFormsGiveTheHostIntegersOnEveryDevice) {
  const std::vector<Device*> devices = OpenCLDevices();
  if (devices.empty()) GTEST_SKIP() << "no OpenCL device";
  const int32_t mult = 1 << 30, shift = 2;  // ×2: the int16q self-check's scale by -1.5
  const int kOut = 7;
  for (Device* d : devices) {
    SCOPED_TRACE(d->Describe() + " (" + d->info().implementation + ")");
    KernelWriter w(KernelTarget::Of(*d), "test_device");
    w.UseHelper(KernelHelper::kRequantize);
    w.Kernel("widened_forms")
        .Value("int", "n")
        .In("int", "x")
        .Out("mp_i64", "y")
        .Value("int", "mult")
        .Value("int", "shift")
        .Body(R"(  const int i = $global_id(0);
  if (i >= n) return;
  const int v = x[i];
  const mp_i64 a = $long_of_int(v);
  $global mp_i64* o = y + 7 * i;
  o[0] = a < 3;
  o[1] = a > 63;
  o[2] = $negative_i64($long_of_int(x[i]));
  o[3] = mp_requant64((mp_i64)v, mult, shift);
  mp_i64 r = $long_of_int(mp_requant32(v, mult, shift));
  o[4] = r < 0 ? 0 : (r > 65535 ? 65535 : r);
  const long8 a8 = $long_of_int(vload8(0, x + (i & ~7)), 8);
  o[5] = (a8 < 0).s0 != 0;
  o[6] = ((a8 <= 0) & (long8)(1)).s0;
)");
    auto program = d->BuildProgram(w.Source());
    // Whole groups of 8 for the vector load.
    std::vector<int32_t> values = kValues;
    while (values.size() % 8) values.push_back(-7);
    const size_t n = values.size();
    auto x = d->Alloc<int32_t>(n);
    auto y = d->Alloc<int64_t>(n * kOut);
    d->Write(x, values.data(), n);
    program->GetKernel("widened_forms")
        .Arg(int32_t(n))
        .Arg(x)
        .Arg(y)
        .Arg(mult)
        .Arg(shift)
        .Launch({n, 1, 1});
    std::vector<int64_t> got(n * kOut);
    d->Read(y, got.data(), n * kOut);
    for (size_t i = 0; i < n; ++i) {
      const int64_t v = values[i], first = values[i & ~size_t{7}];
      const int64_t r32 = quant::Requantize32(values[i], {mult, shift});
      const int64_t want[kOut] = {v < 3,
                                  v > 63,
                                  v < 0,
                                  quant::Requantize64(v, {mult, shift}),
                                  r32 < 0 ? 0 : (r32 > 65535 ? 65535 : r32),
                                  first < 0,
                                  first <= 0};
      for (int k = 0; k < kOut; ++k)
        EXPECT_EQ(got[i * kOut + k], want[k]) << "x = " << v << ", output " << k;
    }
  }
}

}  // namespace
}  // namespace mpcaffe
