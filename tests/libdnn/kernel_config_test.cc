// tests/libdnn/kernel_config_test.cc — the one text form of kernel configurations,
// "family:config": every family's configurations printed and parsed back, bad text rejected with
// the family and the field named (pooling's and LRN's launches too), MPCAFFE_KERNEL_CONFIG applied
// (and the choice's source visible), records of another syntax ignored. No kernel is compiled
// here.
#include "libdnn/kernel_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cache/program_cache.h"
#include "device/device.h"
#include "device/settings.h"
#include "libdnn/lrn.h"
#include "libdnn/tuner.h"

namespace mpcaffe::libdnn {
namespace {

/// The message of the Error `f` throws ("" when it throws none).
template <typename F>
std::string ErrorOf(const F& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// A depthwise 3×3 description and a pointwise one that no other test tunes.
ConvDesc DepthwiseDesc() {
  ConvDesc d;
  d.channels = d.out_channels = d.groups = 6;
  d.height = 9, d.width = 17;
  d.kernel_h = d.kernel_w = 3;
  d.pad_h = d.pad_w = 1;
  return d;
}
ConvDesc PointwiseDesc() {
  ConvDesc d;
  d.channels = 11, d.out_channels = 13, d.height = 5, d.width = 9;
  return d;
}

TEST(KernelConfig, EveryFamilyPrintsAndParsesBack) {
  EXPECT_EQ(
      ConfigurableFamilies(),
      (std::vector<std::string>{"gemm", "conv", "conv_dw", "conv_pw", "conv_wino", "pool_walk_max",
                                "pool_plane_max", "pool_vector_max", "lrn_vector16", "lrn_vector",
                                "lrn"}));
  const DeviceInfo& info = DefaultDevice().info();
  GemmDesc g;
  g.M = 64, g.N = 96, g.K = 80;
  for (const GemmConfig& c : GemmCandidates(info, g)) {
    const auto back = GemmConfig::Parse(c.ToString());
    ASSERT_TRUE(back) << c.ToString();
    EXPECT_TRUE(*back == c) << c.ToString();
  }
  for (DataType t : {DataType::kFloat32, DataType::kInt8Q})
    for (const ConvConfig& c : ConvConfig::Candidates(info, t)) {
      const auto back = ParseConvConfig(c.ToString());
      ASSERT_TRUE(back) << c.ToString();
      EXPECT_TRUE(*back == c) << c.ToString();
    }
  for (int rows = 1; rows <= 32; ++rows) {
    const std::string text = DepthwiseConfig{rows}.ToString();
    EXPECT_EQ(text, "rows" + std::to_string(rows));
    const auto back = DepthwiseConfig::Schema().Parse(text);
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(back->rows, rows);
  }
  for (const PointwiseChoice& c : PointwiseCandidates(PointwiseDesc())) {
    if (!c) continue;  // the direct kernel: "conv_pw:off"
    const auto back = ParsePointwiseTile(c->ToString());
    ASSERT_TRUE(back) << c->ToString();
    EXPECT_TRUE(*back == *c) << c->ToString();
  }
  EXPECT_EQ((Convolution::PointwiseTile{4, 2, 8}).ToString(), "oc4 px2 v8");
  EXPECT_EQ((Convolution::PointwiseTile{16, 1, 16, 4, 64}).ToString(), "oc16 px1 v16 k4 ob64");
  EXPECT_TRUE(*ParsePointwiseTile("ob8 oc8 px1 v16") ==
              (Convolution::PointwiseTile{8, 1, 16, 2, 8}));
  EXPECT_FALSE(ParsePointwiseTile("oc8 px1 v16 ob0"));
  const auto split = SplitKernelConfig("conv_pw:oc4 px2 v8");
  ASSERT_TRUE(split);
  EXPECT_EQ(split->family, "conv_pw");
  EXPECT_EQ(split->config, "oc4 px2 v8");
  EXPECT_EQ(split->ToString(), "conv_pw:oc4 px2 v8");
  EXPECT_TRUE(SplitKernelConfig("conv_pw:off")->off());
  for (const char* bad : {"oc4 px2 v8", ":oc4", "conv_pw:", ""}) EXPECT_FALSE(SplitKernelConfig(bad)) << bad;
}

TEST(KernelConfig, BadTextNamesTheFamilyAndTheField) {
  struct Case {
    std::string setting, words[3];
  };
  const std::vector<Case> cases = {
      {"conv_pw:oc4 px0 v8", {"conv_pw", "px", "0"}},
      {"conv_pw:oc4 px2", {"conv_pw", "v", "missing"}},
      {"conv_dw:rows99", {"conv_dw", "rows", "99"}},
      {"conv_dw:lines4", {"conv_dw", "lines4", "rows"}},
      {"conv:l1 oc4 px3 v8 v8", {"conv", "v", "twice"}},
      {"gemm:outer tm=x tn=2 vw=8 wg=64 ku=1 mf=0", {"gemm", "tm", "integer"}},
      {"gemm:inner tm=4", {"gemm", "inner", "outer"}},
  };
  for (const Case& c : cases) {
    ScopedSettings env;
    env->kernel_config = c.setting;
    const std::string what = ErrorOf([&] {
      Device& dev = DefaultDevice();
      ChooseGemmConfig(dev, GemmDesc{});
      ChooseConvConfig(dev, PointwiseDesc());
      ChooseDepthwiseRows(dev, DepthwiseDesc());
      ChoosePointwise(dev, PointwiseDesc());
    });
    EXPECT_NE(what.find("MPCAFFE_KERNEL_CONFIG"), std::string::npos) << c.setting << ": " << what;
    for (const std::string& w : c.words)
      EXPECT_NE(what.find(w), std::string::npos) << c.setting << ": '" << w << "' not in " << what;
  }
  ScopedSettings env;
  env->kernel_config = "pool:k3";  // no such configurable family
  const std::string what = ErrorOf([] { KernelConfigOverride("gemm"); });
  EXPECT_NE(what.find("pool:k3"), std::string::npos) << what;
  EXPECT_NE(what.find("conv_pw"), std::string::npos) << what;  // the families it knows
}

// Pooling's and LRN's launches: a malformed entry, or "off" for the family every description
// falls back to, is an Error naming the operation, the setting and the field (thrown before any
// program is built).
TEST(KernelConfig, BadLaunchNamesTheOperationAndTheField) {
  Device& dev = DefaultDevice();
  LrnDesc narrow;  // a 1×1 plane: only the scalar family applies
  narrow.channels = 6;
  struct Case {
    std::string setting, words[3];
  };
  for (const Case& c : std::vector<Case>{
           {"lrn:width=3 groups=8", {"LRN", "width", "1/2/4/8"}},
           {"lrn:width=8", {"LRN", "groups", "missing"}},
           {"lrn:width=8 groups=0", {"LRN", "groups", "1…65536"}},
           {"lrn:off", {"LRN", "lrn:off", "cannot be off"}},
       }) {
    ScopedSettings env;
    env->kernel_config = c.setting;
    const std::string what = ErrorOf([&] { Lrn(dev, narrow); });
    EXPECT_NE(what.find("MPCAFFE_KERNEL_CONFIG"), std::string::npos) << c.setting << ": " << what;
    for (const std::string& w : c.words)
      EXPECT_NE(what.find(w), std::string::npos) << c.setting << ": '" << w << "' not in " << what;
  }
}

TEST(KernelConfig, OverrideIsAppliedAndItsSourceVisible) {
  Device& dev = DefaultDevice();
  const ConvDesc dw = DepthwiseDesc(), pw = PointwiseDesc();
  GemmDesc g;
  g.M = 33, g.N = 65, g.K = 17;
  {  // nothing forced: the defaults (no record exists for these shapes)
    ScopedSettings env;
    env->kernel_config = "";
    EXPECT_EQ(ChooseGemmConfig(dev, g).source, ConfigSource::kDefault);
    EXPECT_TRUE(ChooseGemmConfig(dev, g).config == DefaultGemmConfig(dev.info(), g));
    EXPECT_EQ(ChooseDepthwiseRows(dev, dw).source, ConfigSource::kDefault);
    EXPECT_STREQ(Convolution::ForwardPathOf(dev, pw, {}), "pointwise");
    EXPECT_STREQ(Convolution::ForwardPathOf(dev, dw, {}), "depthwise");
  }
  const GemmConfig forced_gemm = GemmCandidates(dev.info(), g).back();
  ScopedSettings env;
  env->kernel_config = "gemm:" + forced_gemm.ToString() + "; conv_dw:rows3 ;conv_pw:oc3 px1 v8";
  const Chosen<GemmConfig> gemm = ChooseGemmConfig(dev, g);
  EXPECT_EQ(gemm.source, ConfigSource::kOverride);
  EXPECT_TRUE(gemm.config == forced_gemm) << gemm.config.ToString();
  const Chosen<int> rows = ChooseDepthwiseRows(dev, dw);
  EXPECT_EQ(rows.source, ConfigSource::kOverride);
  EXPECT_EQ(rows.config, 3);
  const Chosen<PointwiseChoice> tile = ChoosePointwise(dev, pw);
  EXPECT_EQ(tile.source, ConfigSource::kOverride);
  ASSERT_TRUE(tile.config);
  EXPECT_TRUE(*tile.config == (Convolution::PointwiseTile{3, 1, 8}));
  EXPECT_STREQ(ConfigSourceName(tile.source), "override");
  // A tile the description cannot take is not forced on it: the usual choice then.
  env->kernel_config = "conv_pw:oc4 px8 v16";  // 45 pixels: fewer than 8 vectors of 16
  EXPECT_EQ(ChoosePointwise(dev, pw).source, ConfigSource::kDefault);
  // "off": the family is not chosen, the next that applies is.
  env->kernel_config = "conv_pw:off;conv_dw:off";
  EXPECT_STREQ(Convolution::ForwardPathOf(dev, pw, {}), "direct");
  EXPECT_STREQ(Convolution::ForwardPathOf(dev, dw, {}), "direct");
}

TEST(KernelConfig, RecordsOfTheOldSyntaxAreIgnored) {
  // The version the cache keeps its tuning records under names the record syntax, so opening a
  // file of records written before "family:config" deletes them (ProgramCache's version check).
  EXPECT_NE(cache::CacheOptions{}.library_version.find(
                "+records" + std::to_string(cache::kTuningRecordSyntax)),
            std::string::npos);
  Device& dev = DefaultDevice();
  auto store = cache::ActiveProgramCache();
  if (!store) GTEST_SKIP() << "kernel cache disabled (MPCAFFE_CACHE=off): no tuning table";
  ScopedSettings env;
  env->kernel_config = "";
  GemmDesc g;
  g.M = 35, g.N = 67, g.K = 19;  // a shape no other test records
  const GemmConfig other = GemmCandidates(dev.info(), g).back();
  ASSERT_FALSE(other == DefaultGemmConfig(dev.info(), g));
  const std::string key = cache::TuningDeviceKey(dev.info());
  store->PutTuning({key, "gemm", g.ToString(), other.ToString(), 1.0, ""});  // no family
  EXPECT_EQ(ChooseGemmConfig(dev, g).source, ConfigSource::kDefault);
  store->PutTuning({key, "gemm", g.ToString(), "conv:" + other.ToString(), 1.0, ""});
  EXPECT_EQ(ChooseGemmConfig(dev, g).source, ConfigSource::kDefault);
  store->PutTuning({key, "gemm", g.ToString(), "gemm:" + other.ToString(), 1.0, ""});
  const Chosen<GemmConfig> tuned = ChooseGemmConfig(dev, g);
  EXPECT_EQ(tuned.source, ConfigSource::kTuned);
  EXPECT_TRUE(tuned.config == other);
}

}  // namespace
}  // namespace mpcaffe::libdnn
