// tests/net/device_choice_test.cc — the default device of a net (net/device_choice.h): a
// selector or MPCAFFE_DEVICE first, then the fastest recorded pass of that net on two or more
// devices, then the profile rule (DevicesByProfile).
#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>

#include <chrono>
#include <string>

#include "cache/program_cache.h"
#include "device/host_isa.h"
#include "device/settings.h"
#include "net/device_choice.h"

namespace mpcaffe {
namespace {

/// A net no other test records: its Input is named after the test and the clock.
caffe::NetParameter UniqueNet(int batch) {
  caffe::NetParameter p;
  const std::string text =
      "name: 'choice' layer { name: 'in_" +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) +
      "' type: 'Input' top: 'x' input_param { shape { dim: " + std::to_string(batch) +
      " dim: 3 } } }";
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p));
  return p;
}

/// Two devices, no MPCAFFE_DEVICE, no MPI rank, a kernel cache to keep records in.
class DeviceChoiceTest : public testing::Test {
 protected:
  void SetUp() override {
    env_->device.clear();
    env_->mpi_local_rank.clear();
    if (DeviceList().size() < 2) GTEST_SKIP() << "one device present: nothing to choose between";
    store_ = cache::ActiveProgramCache();
    if (!store_) GTEST_SKIP() << "kernel cache disabled (MPCAFFE_CACHE=off): no tuning table";
  }
  void Put(const Device& d, const caffe::NetParameter& p, double ms) {
    store_->PutTuning({cache::TuningDeviceKey(d.info()), "net", NetRecordSignature(p), "forward",
                       ms, ""});
  }
  ScopedSettings env_;
  std::shared_ptr<cache::ProgramCache> store_;
};

TEST_F(DeviceChoiceTest, FastestRecordedPassOnTwoDevicesWins) {
  const caffe::NetParameter p = UniqueNet(2);
  Device& first = *DeviceList()[0];
  Device& second = *DeviceList()[1];
  Put(first, p, 9.0);
  Put(second, p, 3.0);
  DeviceChoice c = ChooseDeviceForNet("", p);
  EXPECT_EQ(c.device, &second) << c.why;
  EXPECT_NE(c.why.find("3.00 ms against 9.00 ms on 0"), std::string::npos) << c.why;
  // A record keeps the shortest pass: a slower one later does not replace it.
  EXPECT_FALSE(RecordNetForward(second, p, 12.0));
  EXPECT_EQ(ChooseDeviceForNet("", p).device, &second);
  EXPECT_TRUE(RecordNetForward(first, p, 1.0));
  EXPECT_EQ(ChooseDeviceForNet("", p).device, &first);
}

TEST_F(DeviceChoiceTest, SelectorAndSettingOutrankRecords) {
  const caffe::NetParameter p = UniqueNet(3);
  Put(*DeviceList()[0], p, 9.0);
  Put(*DeviceList()[1], p, 3.0);
  EXPECT_EQ(ChooseDeviceForNet("0", p).device, DeviceList()[0]);
  env_->device = "0";
  const DeviceChoice c = ChooseDeviceForNet("", p);
  EXPECT_EQ(c.device, DeviceList()[0]);
  EXPECT_EQ(c.why, "MPCAFFE_DEVICE=0");
}

TEST_F(DeviceChoiceTest, OneRecordOrAnotherNetFallsBackToTheProfileRule) {
  const caffe::NetParameter p = UniqueNet(4);
  Device* profile_first = DevicesByProfile().front();
  Device* other = DeviceList()[0] == profile_first ? DeviceList()[1] : DeviceList()[0];
  Put(*other, p, 1.0);  // one device's record compares with nothing
  DeviceChoice c = ChooseDeviceForNet("", p);
  EXPECT_EQ(c.device, profile_first) << c.why;
  EXPECT_NE(c.why.find("profile rule"), std::string::npos) << c.why;
  Put(*profile_first, p, 5.0);
  EXPECT_EQ(ChooseDeviceForNet("", p).device, other);
  // The same layers at another batch are another net: no records.
  caffe::NetParameter q = p;
  q.mutable_layer(0)->mutable_input_param()->mutable_shape(0)->set_dim(0, 5);
  EXPECT_EQ(ChooseDeviceForNet("", q).device, profile_first);
}

TEST(DeviceProfileRank, GpusThenCpusThenExpensiveLaneLoadsAndFp16WithinAClass) {
  DeviceInfo gpu, cpu, cpu_fp16, llvmpipe;
  gpu.is_gpu = true;
  cpu_fp16.fp16 = true;
  llvmpipe.lane_loads_expensive = llvmpipe.work_items_in_simd_lanes = true;
  const NetTypes fp32, fp16{true, false};
  EXPECT_LT(ProfileRank(gpu, fp32), ProfileRank(cpu, fp32));
  EXPECT_LT(ProfileRank(gpu, fp16), ProfileRank(cpu_fp16, fp16));  // the class first
  EXPECT_EQ(ProfileRank(cpu, fp32), ProfileRank(cpu_fp16, fp32));
  EXPECT_LT(ProfileRank(cpu_fp16, fp16), ProfileRank(cpu, fp16));
  EXPECT_LT(ProfileRank(cpu, fp16), ProfileRank(llvmpipe, fp32));
  // DeviceList's own order is kept between equals, and the rule's first for a net of every
  // type is DefaultDevice's.
  ScopedSettings env;
  env->device.clear();
  env->mpi_local_rank.clear();
  const std::vector<Device*> order = DevicesByProfile(NetTypes::Any());
  ASSERT_EQ(order.size(), DeviceList().size());
  if (!order.empty()) {
    EXPECT_EQ(order.front(), &DefaultDevice());
  }
  for (size_t i = 1; i < order.size(); ++i) {
    if (ProfileRank(order[i - 1]->info(), NetTypes::Any()) ==
        ProfileRank(order[i]->info(), NetTypes::Any())) {
      EXPECT_LT(order[i - 1]->index(), order[i]->index());
    }
  }
}

TEST(DeviceProfileRank, SlowNetPassesRankLastWithinAClassUnlessNativeFp16Decides) {
  DeviceInfo fast, slow_fp16, gpu;
  slow_fp16.net_passes_slow = slow_fp16.net_passes_slow_at_avx2 = slow_fp16.fp16 = true;
  gpu.is_gpu = gpu.net_passes_slow = true;
  const NetTypes fp32, int8{false, true}, fp16{true, false};
  ScopedSettings env;
  // At AVX2 slow passes count for nets without int8 layers only (int8 measured faster there),
  // and only where the device says so (Intel's runtime on an Intel CPU, not on AMD's).
  env->isa = "avx2";
  EXPECT_LT(ProfileRank(fast, fp32), ProfileRank(slow_fp16, fp32));
  EXPECT_TRUE(SlowNetPasses(slow_fp16, fp32));
  EXPECT_FALSE(SlowNetPasses(slow_fp16, int8));
  EXPECT_EQ(ProfileRank(fast, int8), ProfileRank(slow_fp16, int8));
  EXPECT_FALSE(SlowNetPasses(fast, fp32));
  DeviceInfo on_amd = slow_fp16;
  on_amd.net_passes_slow_at_avx2 = false;
  on_amd.fp32_passes_slow_at_avx512 = true;
  EXPECT_FALSE(SlowNetPasses(on_amd, fp32));
  EXPECT_EQ(ProfileRank(fast, fp32), ProfileRank(on_amd, fp32));
  env->isa.clear();
  if (CpuHostIsa() >= HostIsa::kAvx512) {
    // At AVX-512 int8 nets everywhere, fp32 nets where the device says so (AMD's CPUs).
    EXPECT_TRUE(SlowNetPasses(on_amd, fp32));
    EXPECT_FALSE(SlowNetPasses(slow_fp16, fp32));
    EXPECT_EQ(ProfileRank(fast, fp32), ProfileRank(slow_fp16, fp32));
    EXPECT_LT(ProfileRank(fast, fp32), ProfileRank(on_amd, fp32));
    EXPECT_LT(ProfileRank(fast, int8), ProfileRank(slow_fp16, int8));
  }
  EXPECT_LT(ProfileRank(slow_fp16, fp16), ProfileRank(fast, fp16));  // native fp16 first
  // A process's default serves every type: the device with native fp16 (and so Intel's CPU
  // runtime before PoCL, quads or not).
  DeviceInfo quads = fast;
  quads.byte_quad_products_in_helper = true;
  EXPECT_LT(ProfileRank(slow_fp16, NetTypes::Any()), ProfileRank(quads, NetTypes::Any()));
  EXPECT_LT(ProfileRank(gpu, fp32), ProfileRank(fast, fp32));  // the class first
}

TEST(DeviceProfileRank, Int8NetsPreferByteQuadsWithinAClass) {
  DeviceInfo quads, pairs, gpu;
  quads.byte_quad_products_in_helper = true;
  gpu.is_gpu = true;
  const NetTypes int8{false, true}, both{true, true};
  ScopedSettings env;
  env->isa.clear();  // the quads count only at the CPU's own level
  const bool host_has_them = ByteQuadsInHelper(quads);
  EXPECT_EQ(host_has_them, CpuHasAvx512Vnni());
  EXPECT_EQ(ProfileRank(quads, {}), ProfileRank(pairs, {}));  // not for fp32 nets
  if (host_has_them) {
    EXPECT_LT(ProfileRank(quads, int8), ProfileRank(pairs, int8));
    // native fp16 outranks byte quads in a net of both types
    quads.fp16 = false;
    pairs.fp16 = true;
    EXPECT_LT(ProfileRank(pairs, both), ProfileRank(quads, both));
    env->isa = "avx2";  // MPCAFFE_ISA below the CPU's level turns the VNNI form off
    EXPECT_FALSE(ByteQuadsInHelper(quads));
    EXPECT_EQ(ProfileRank(quads, int8), ProfileRank(DeviceInfo{}, int8));
  }
  EXPECT_LT(ProfileRank(gpu, int8), ProfileRank(quads, int8));  // the class first
}

TEST_F(DeviceChoiceTest, AnInt8NetWithoutRecordsGoesToTheByteQuadDevice) {
  caffe::NetParameter p = UniqueNet(6);
  p.mutable_layer(0)->set_compute_data_type(caffe::CAFFE_INT8_QUANTIZED);
  const NetTypes types = NetComputeTypes(p);
  EXPECT_TRUE(types.int8);
  EXPECT_FALSE(types.fp16);
  const DeviceChoice c = ChooseDeviceForNet("", p);
  EXPECT_EQ(c.device, DevicesByProfile(types).front()) << c.why;
  EXPECT_EQ(c.why.find("byte quad") != std::string::npos, ByteQuadsInHelper(c.device->info()))
      << c.why;
  bool any_quads = false;
  for (Device* d : DeviceList()) any_quads |= ByteQuadsInHelper(d->info()) && !d->info().is_gpu;
  if (any_quads && !c.device->info().is_gpu) {
    EXPECT_TRUE(ByteQuadsInHelper(c.device->info()));
  }
}

}  // namespace
}  // namespace mpcaffe
