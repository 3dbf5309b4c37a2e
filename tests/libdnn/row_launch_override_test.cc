// tests/libdnn/row_launch_override_test.cc — pooling's and LRN's launches forced through
// MPCAFFE_KERNEL_CONFIG ("pool_vector_max:width=2 groups=3", "lrn_vector:…", "…:off"): the
// choice log names the forced launch and the override, and the results stay the references'
// (malformed entries: kernel_config_test.cc). One pooling and one LRN program are compiled.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device/device.h"
#include "device/settings.h"
#include "libdnn/kernel_config.h"
#include "libdnn/lrn.h"
#include "libdnn/pool.h"
#include "tests/testing/random_storage.h"

namespace mpcaffe::libdnn {
namespace {

/// n fp32 values uniform in [-2, 2).
std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  const std::vector<uint8_t> b = test_inputs::RandomRealStorage(DataType::kFloat32, n, -2, 2, rng);
  std::vector<float> v(n);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

std::shared_ptr<DeviceMemory> Upload(Device& dev, const std::vector<float>& v) {
  auto m = dev.Allocate(v.size() * 4);
  dev.CopyToDevice(v.data(), m.get(), 0, v.size() * 4);
  return m;
}

std::vector<float> Download(Device& dev, const std::shared_ptr<DeviceMemory>& m, size_t n) {
  std::vector<float> v(n);
  dev.CopyToHost(m.get(), 0, v.data(), n * 4);
  return v;
}

/// 5×5 stride-2 max pooling with 17 outputs a row (the vector max kernel's rows of 8 or more; the
/// column walk, which comes first, takes 2×2 and 3×3 windows only).
PoolDesc PoolShape() {
  PoolDesc d;
  d.method = PoolMethod::kMax;
  d.batch = 2, d.channels = 5, d.height = 11, d.width = 37;
  d.kernel_h = d.kernel_w = 5, d.stride_h = d.stride_w = 2;
  return d;
}

/// Runs `d` (no mask) under the current settings; the one kernel choice it logged.
KernelChoice RunPool(Device& dev, const PoolDesc& d, const std::vector<float>& x,
                     std::vector<float>* y) {
  KernelChoiceLog log;
  Pooling pool(dev, d);
  auto xm = Upload(dev, x);
  auto ym = dev.Allocate(d.output_count() * 4);
  pool.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0));
  *y = Download(dev, ym, d.output_count());
  const std::vector<KernelChoice> choices = log.Take();
  EXPECT_EQ(choices.size(), 1u);
  return choices.empty() ? KernelChoice{} : choices[0];
}

TEST(RowLaunchOverride, PoolVectorMaxLaunchIsForcedAndStillTheReference) {
  Device& dev = DefaultDevice();
  const PoolDesc d = PoolShape();
  const auto& families = PoolForwardFamilies();
  const auto vector_max = std::find_if(families.begin(), families.end(), [](const auto& f) {
    return std::string(f.name) == "pool_vector_max";
  });
  ASSERT_NE(vector_max, families.end());
  if (!vector_max->applies(d, TargetProfile::Of(dev.info())))
    GTEST_SKIP() << dev.info().implementation << ": no vector max kernel (no vector built-ins)";
  const std::vector<float> x = Random(d.input_count(), 5);
  std::vector<float> want(d.output_count()), got;
  PoolForwardReference(d, {}, x.data(), want.data(), nullptr);
  ScopedSettings env;
  env->kernel_config = "";
  KernelChoice c = RunPool(dev, d, x, &got);
  EXPECT_EQ(c.family, "pool_vector_max");
  EXPECT_EQ(c.source, ConfigSource::kDefault);
  EXPECT_EQ(got, want) << "default launch";
  // Narrow groups, few of them: every group walks several rows and one row is split in columns.
  env->kernel_config = "pool_vector_max:groups=3 width=2";
  c = RunPool(dev, d, x, &got);
  EXPECT_EQ(c.family, "pool_vector_max");
  EXPECT_EQ(c.config, "width=2 groups=3");
  EXPECT_EQ(c.source, ConfigSource::kOverride);
  EXPECT_EQ(got, want) << c.config;
  env->kernel_config = "pool_vector_max:off";  // the scalar kernel runs
  c = RunPool(dev, d, x, &got);
  EXPECT_EQ(c.family, "pool");
  EXPECT_EQ(got, want) << "pool_vector_max:off";
}

// Every LRN family that applies on this device, forced in turn (the vector families before it
// turned off): its launch as given, the reference's values.
TEST(RowLaunchOverride, LrnLaunchIsForcedAndStillTheReference) {
  Device& dev = DefaultDevice();
  LrnDesc d;
  d.batch = 2, d.channels = 7, d.height = 5, d.width = 9, d.alpha = 1e-2f;
  const std::vector<float> x = Random(d.count(), 7);
  std::vector<float> want(d.count());
  LrnForwardReference(d, x.data(), want.data(), nullptr);
  std::string before;  // the families ahead of this one, off
  for (const LrnForwardFamily& f : LrnForwardFamilies()) {
    const std::string family = f.name;
    if (!f.applies(d, TargetProfile::Of(dev.info()))) {
      if (family != "lrn") before += family + ":off;";
      continue;
    }
    ScopedSettings env;
    env->kernel_config = before + family + ":width=4 groups=5";
    KernelChoiceLog log;
    Lrn lrn(dev, d);
    auto xm = Upload(dev, x);
    auto ym = dev.Allocate(d.count() * 4);
    lrn.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0));
    const std::vector<float> got = Download(dev, ym, d.count());
    const std::vector<KernelChoice> choices = log.Take();
    ASSERT_EQ(choices.size(), 1u);
    EXPECT_EQ(choices[0].family, family);
    EXPECT_EQ(choices[0].config, "width=4 groups=5");
    EXPECT_EQ(choices[0].source, ConfigSource::kOverride);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << family << " " << i;
    if (family != "lrn") before += family + ":off;";
  }
}

}  // namespace
}  // namespace mpcaffe::libdnn
