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

// mp_requant64 (int16q's requantization) against quant::Requantize64 for accumulators on both
// sides of its 64-bit shortcut (magnitudes below 2^31) and far past it, multipliers across
// [2^30, 2^31) and below, and shifts from none (right 0) through 62 to past every bit.
TEST(WidenedCompare, Requantize64MatchesTheHostOnEveryDevice) {
  const std::vector<Device*> devices = OpenCLDevices();
  if (devices.empty()) GTEST_SKIP() << "no OpenCL device";
  const int64_t big = int64_t{1} << 31;
  // Around 2^31 (the shortcut's bound), products past 2^64 (2^35, 2^39), int16q's largest sums
  // (784 products of 65535²) and the ends of the range.
  std::vector<int64_t> accs = {0, 1, 3, 255, 65535, big - 1, big, big + 1, 2 * big - 1, 2 * big};
  for (int64_t v : {(big << 4) + 7, (big << 8) - 1, big * 1000 + 12345, int64_t{1} << 62,
                    int64_t{784} * 65535 * 65535, INT64_MAX, INT64_MIN + 1})
    accs.push_back(v);
  for (size_t i = 0, n = accs.size(); i < n; ++i) accs.push_back(-accs[i]);
  const std::vector<int32_t> mults = {1 << 30, 1518500250, INT32_MAX, 1, 12345};
  // Shifts up to 31: QuantizeMultiplier's range (M < 2^31).
  const std::vector<int32_t> shifts = {31, 30, 2, 0, -1, -15, -31, -32, -40, -97, -100};
  std::vector<int64_t> acc;
  std::vector<int32_t> mult, shift;
  for (int64_t a : accs)
    for (int32_t m : mults)
      for (int32_t s : shifts) acc.push_back(a), mult.push_back(m), shift.push_back(s);
  const size_t n = acc.size();
  for (Device* d : devices) {
    SCOPED_TRACE(d->Describe() + " (" + d->info().implementation + ")");
    KernelWriter w(KernelTarget::Of(*d), "test_device");
    w.UseHelper(KernelHelper::kRequantize);
    w.Kernel("requant64")
        .Value("int", "n")
        .In("mp_i64", "acc")
        .In("int", "mult")
        .In("int", "shift")
        .Out("mp_i64", "y")
        .Body(R"(  const int i = $global_id(0);
  if (i < n) y[i] = mp_requant64(acc[i], mult[i], shift[i]);
)");
    auto program = d->BuildProgram(w.Source());
    auto a = d->Alloc<int64_t>(n);
    auto m = d->Alloc<int32_t>(n);
    auto s = d->Alloc<int32_t>(n);
    auto y = d->Alloc<int64_t>(n);
    d->Write(a, acc.data(), n);
    d->Write(m, mult.data(), n);
    d->Write(s, shift.data(), n);
    program->GetKernel("requant64").Arg(int32_t(n)).Arg(a).Arg(m).Arg(s).Arg(y).Launch({n, 1, 1});
    std::vector<int64_t> got(n);
    d->Read(y, got.data(), n);
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(got[i], quant::Requantize64(acc[i], {mult[i], shift[i]}))
          << "acc " << acc[i] << ", multiplier " << mult[i] << ", shift " << shift[i];
  }
}

}  // namespace
}  // namespace mpcaffe
