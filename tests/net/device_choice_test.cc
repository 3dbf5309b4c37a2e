// tests/net/device_choice_test.cc — the default device of a net (net/device_choice.h): a
// selector or MPCAFFE_DEVICE first, then the fastest recorded pass of that net on two or more
// devices, then the profile rule (DevicesByProfile).
#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>

#include <chrono>
#include <string>

#include "cache/program_cache.h"
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
  Device* profile_first = DevicesByProfile(false).front();
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
  EXPECT_LT(ProfileRank(gpu, false), ProfileRank(cpu, false));
  EXPECT_LT(ProfileRank(gpu, true), ProfileRank(cpu_fp16, true));  // the class first
  EXPECT_EQ(ProfileRank(cpu, false), ProfileRank(cpu_fp16, false));
  EXPECT_LT(ProfileRank(cpu_fp16, true), ProfileRank(cpu, true));
  EXPECT_LT(ProfileRank(cpu, true), ProfileRank(llvmpipe, false));
  // DeviceList's own order is kept between equals, and the rule's first is DefaultDevice's.
  ScopedSettings env;
  env->device.clear();
  env->mpi_local_rank.clear();
  const std::vector<Device*> order = DevicesByProfile(false);
  ASSERT_EQ(order.size(), DeviceList().size());
  if (!order.empty()) EXPECT_EQ(order.front(), &DefaultDevice());
  for (size_t i = 1; i < order.size(); ++i)
    if (ProfileRank(order[i - 1]->info(), false) == ProfileRank(order[i]->info(), false))
      EXPECT_LT(order[i - 1]->index(), order[i]->index());
}

}  // namespace
}  // namespace mpcaffe
