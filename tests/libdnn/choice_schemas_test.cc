// tests/libdnn/choice_schemas_test.cc — the registry's choices as the one place schemas and
// defaults are reached from (libdnn/kernel_families.h): every configurable choice's default
// configurations (its defaults tables' rows) read back through its schema to the same text, every
// tuner candidate satisfies its family's constraints and reads back to itself, and the names
// MPCAFFE_KERNEL_CONFIG takes are the configurable choices. No kernel is compiled here.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "libdnn/kernel_config.h"
#include "libdnn/kernel_families.h"

namespace mpcaffe::libdnn {
namespace {

/// Device classes the candidate lists differ on: an OpenCL CPU with and without byte-pair
/// products, an OpenCL GPU, CUDA with dp4a.
std::vector<DeviceInfo> DeviceClasses() {
  std::vector<DeviceInfo> out;
  for (int i = 0; i < 4; ++i) {
    DeviceInfo d;
    d.backend = i == 3 ? Backend::kCuda : Backend::kOpenCL;
    d.is_gpu = i >= 2;
    d.byte_pair_products = i != 1;
    d.dot_product = i == 3;
    d.compute_units = 2;
    d.max_work_group_size = 1024;
    d.local_mem_bytes = 48 * 1024;
    out.push_back(d);
  }
  return out;
}

TEST(ChoiceSchemas, DefaultRowsReadBackThroughTheSchema) {
  std::set<std::string> configurable;
  for (const KernelFamilyEntry& family : KernelFamilyRegistry())
    for (const KernelChoiceName& choice : family.choices) {
      SCOPED_TRACE(choice.name);
      if (choice.configurable()) configurable.insert(choice.name);
      int config_rows = 0;
      if (choice.defaults)
        for (const ChoiceDefaultsRow& row : choice.defaults()) {
          EXPECT_FALSE(row.config.empty()) << row.device_class;
          if (!row.is_config) continue;
          ++config_rows;
          ASSERT_TRUE(choice.configurable()) << "a configuration row without a schema";
          std::string why;
          const std::optional<std::string> back = choice.schema->round_trip(row.config, &why);
          ASSERT_TRUE(back) << row.device_class << ": " << row.config << ": " << why;
          EXPECT_EQ(*back, row.config) << row.device_class;
        }
      if (!choice.configurable()) continue;
      // The schema rejects a word it has no field for, and says what is wrong.
      std::string why;
      EXPECT_FALSE(choice.schema->round_trip("nosuchfield=1", &why));
      EXPECT_FALSE(why.empty());
      EXPECT_FALSE(choice.schema->keys().empty());
      // Every default comes from a table or, where the default is a rule (conv_dw's rows,
      // Convolution::DefaultDepthwiseRows), from the tuner's candidates, which list it first
      // (their constraints and text: the next test).
      EXPECT_TRUE(config_rows > 0 || choice.schema->candidates) << "no defaults";
    }
  EXPECT_EQ(configurable,
            std::set<std::string>(ConfigurableFamilies().begin(), ConfigurableFamilies().end()));
  EXPECT_EQ(configurable, (std::set<std::string>{"gemm", "conv", "conv_dw", "conv_pw", "conv_wino",
                                                 "pool_walk_max", "pool_plane_max",
                                                 "pool_vector_max", "lrn_vector16", "lrn_vector",
                                                 "lrn"}));
}

TEST(ChoiceSchemas, TunerCandidatesSatisfyTheirConstraintsAndReadBack) {
  int tuned = 0;
  for (const DeviceInfo& info : DeviceClasses())
    for (const KernelFamilyEntry& family : KernelFamilyRegistry())
      for (const KernelChoiceName& choice : family.choices) {
        if (!choice.configurable() || !choice.schema->candidates) continue;
        SCOPED_TRACE(std::string(choice.name) +
                     (info.backend == Backend::kCuda ? " cuda" : " ocl") +
                     (info.is_gpu ? " gpu" : " cpu"));
        const std::vector<ChoiceCandidate> candidates = choice.schema->candidates(info);
        EXPECT_FALSE(candidates.empty());
        tuned += !candidates.empty();
        std::set<std::string> seen;
        for (const ChoiceCandidate& c : candidates) {
          EXPECT_TRUE(c.satisfies) << c.config << " for " << c.problem;
          std::string why;
          const std::optional<std::string> back = choice.schema->round_trip(c.config, &why);
          ASSERT_TRUE(back) << c.config << " for " << c.problem << ": " << why;
          EXPECT_EQ(*back, c.config) << c.problem;
          seen.insert(c.config);
        }
        // More than one configuration per choice: the tuner has something to choose from.
        EXPECT_GT(seen.size(), 1u);
      }
  EXPECT_EQ(tuned, 4 * 5);  // gemm, conv, conv_dw, conv_pw, conv_wino on each device class
}

}  // namespace
}  // namespace mpcaffe::libdnn
