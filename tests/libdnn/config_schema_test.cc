// tests/libdnn/config_schema_test.cc — the one description of the tuning configurations'
// fields: printing, parsing (the tuning table's records), range checks and the Tuner's
// variations, for GemmConfig and ConvConfig alike.
#include <gtest/gtest.h>

#include "libdnn/config_schema.h"
#include "libdnn/conv.h"
#include "libdnn/gemm.h"
#include "libdnn/gemm_config.h"
#include "libdnn/tuner.h"

namespace mpcaffe::libdnn {
namespace {

struct Toy {
  int a = 1, ab = 2, b = 0;
};

const ConfigSchema<Toy>& ToySchema() {
  static const ConfigSchema<Toy> schema(
      "", {{"a", &Toy::a, ValueRange(1, 4)},
           {"ab", &Toy::ab, {2, 8}},
           {"b", &Toy::b, {0, 1}, 0, /*always_printed=*/false, {0, 1}}});
  return schema;
}

TEST(ConfigSchema, PrintsParsesAndChecksEveryField) {
  const auto& s = ToySchema();
  Toy t;
  EXPECT_EQ(s.Print(t), "a1 ab2");  // b at its absent value is left out
  t.b = 1;
  EXPECT_EQ(s.Print(t), "a1 ab2 b1");
  const auto back = s.Parse("ab8 a3 b1");  // any order; "ab" is not "a" followed by "b8"
  ASSERT_TRUE(back);
  EXPECT_EQ(back->a, 3);
  EXPECT_EQ(back->ab, 8);
  EXPECT_EQ(back->b, 1);
  EXPECT_FALSE(s.Parse("a1"));            // ab is required
  EXPECT_FALSE(s.Parse("a1 ab3"));        // 3 is not an allowed ab
  EXPECT_FALSE(s.Parse("a1 ab2 a2"));     // repeated
  EXPECT_FALSE(s.Parse("a1 ab2 c1"));     // unknown
  EXPECT_FALSE(s.Parse("a1x ab2"));       // malformed value
  EXPECT_FALSE(s.Parse("a5 ab2"));        // out of range
  EXPECT_TRUE(s.InRange(Toy{}));
  EXPECT_FALSE(s.InRange(Toy{0, 2, 0}));
  EXPECT_EQ(s.AllowedText("a"), "1…4");
  EXPECT_EQ(s.AllowedText("ab"), "2/8");
  const auto v = s.Variations(Toy{});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].b, 1);
}

// Every candidate the Tuner can record reads back from its text as the same configuration.
TEST(ConfigSchema, EveryCandidateRoundTripsThroughItsRecord) {
  DeviceInfo cpu, gpu;
  cpu.backend = gpu.backend = Backend::kOpenCL;
  gpu.is_gpu = true;
  gpu.dot_product = true;
  DeviceInfo cuda = gpu;
  cuda.backend = Backend::kCuda;
  GemmDesc g;
  g.M = 64, g.N = 64, g.K = 64, g.lda = 64, g.ldb = 64, g.ldc = 64;
  for (const DeviceInfo& dev : {cpu, gpu, cuda})
    for (DataType t : {DataType::kFloat32, DataType::kInt8Q}) {
      g.type = g.out_type = t;
      for (const GemmConfig& c : GemmCandidates(dev, g)) {
        const auto back = GemmConfig::Parse(c.ToString());
        ASSERT_TRUE(back) << c.ToString();
        EXPECT_EQ(*back, c) << c.ToString();
        EXPECT_TRUE(GemmConfig::Schema().InRange(c)) << c.ToString();
      }
      for (const ConvConfig& c : ConvConfig::Candidates(dev, t)) {
        const auto back = ParseConvConfig(c.ToString());
        ASSERT_TRUE(back) << c.ToString();
        EXPECT_EQ(*back, c) << c.ToString();
      }
    }
  // Records written before kp and lm existed still read (as kp = 1, lm = 0).
  const auto old = GemmConfig::Parse("outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->kp, GemmConfig::kOneK);
  EXPECT_EQ(old->lm, 0);
  EXPECT_EQ(ConvConfig{}.ToString(), "l1 oc4 px3 v8");
  EXPECT_EQ((ConvConfig{32, 2, 4, 1, 4}.ToString()), "l32 oc2 px4 v1 k4");
  EXPECT_FALSE(ParseConvConfig("l32 oc2 px4 v1 k2"));
  EXPECT_FALSE(ParseConvConfig("l1 oc16 px16 v8"));  // oc·px > 64: Validate's cross check
}

}  // namespace
}  // namespace mpcaffe::libdnn
