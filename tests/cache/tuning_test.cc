// tests/cache/tuning_test.cc — the tuning table: write, read, replace, list, clear, persist.
#include <gtest/gtest.h>

#include "cache/program_cache.h"
#include "tests/cache/cache_test_util.h"

namespace mpcaffe::cache {
namespace {

using testing::Query;
using testing::ScratchDir;

TEST(TuningTable, PutGetReplacePersist) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  {
    ProgramCache cache(CacheOptions{path});
    EXPECT_FALSE(cache.GetTuning("dev A", "gemm", "fp32 64x64x64"));
    EXPECT_TRUE(cache.PutTuning({"dev A", "gemm", "fp32 64x64x64", "wg=8,8 tile=4", 1.5, ""}));
    EXPECT_TRUE(cache.PutTuning({"dev A", "gemm", "fp32 64x64x64", "wg=16,16 tile=2", 1.25, ""}));
    auto r = cache.GetTuning("dev A", "gemm", "fp32 64x64x64");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->parameters, "wg=16,16 tile=2");
  }
  ProgramCache cache(CacheOptions{path});
  auto r = cache.GetTuning("dev A", "gemm", "fp32 64x64x64");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->parameters, "wg=16,16 tile=2");
  EXPECT_DOUBLE_EQ(r->time_ms, 1.25);
  // The date is filled in, UTC ISO 8601.
  ASSERT_EQ(r->date.size(), 20u) << r->date;
  EXPECT_EQ(r->date[4], '-');
  EXPECT_EQ(r->date[10], 'T');
  EXPECT_EQ(r->date.back(), 'Z');
  EXPECT_EQ(Query(path, "SELECT count(*) FROM tuning_v1")[0], "1");
  EXPECT_FALSE(cache.GetTuning("dev B", "gemm", "fp32 64x64x64"));
  EXPECT_FALSE(cache.GetTuning("dev A", "conv", "fp32 64x64x64"));
  EXPECT_FALSE(cache.GetTuning("dev A", "gemm", "fp32 64x64x65"));
}

TEST(TuningTable, ListAndClearWithFilters) {
  ScratchDir dir;
  ProgramCache cache(CacheOptions{dir.File("kernels.sqlite")});
  cache.PutTuning({"dev B", "gemm", "s2", "p", 1, "2024-01-01T00:00:00Z"});
  cache.PutTuning({"dev A", "gemm", "s1", "p", 1, ""});
  cache.PutTuning({"dev A", "conv", "s1", "p", 1, ""});
  cache.PutTuning({"dev A", "gemm", "s0", "p", 1, ""});
  auto all = cache.ListTuning();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].device + "/" + all[0].operation + "/" + all[0].signature, "dev A/conv/s1");
  EXPECT_EQ(all[1].signature, "s0");
  EXPECT_EQ(all[3].device, "dev B");
  EXPECT_EQ(all[3].date, "2024-01-01T00:00:00Z");  // a given date is kept
  EXPECT_EQ(cache.ListTuning("dev A").size(), 3u);
  EXPECT_EQ(cache.ListTuning("", "gemm").size(), 3u);
  EXPECT_EQ(cache.ListTuning("dev A", "gemm").size(), 2u);
  EXPECT_EQ(cache.ClearTuning("dev A", "gemm"), 2u);
  EXPECT_FALSE(cache.GetTuning("dev A", "gemm", "s1"));
  EXPECT_TRUE(cache.GetTuning("dev A", "conv", "s1"));
  EXPECT_EQ(cache.ClearTuning(), 2u);
  EXPECT_TRUE(cache.ListTuning().empty());
  EXPECT_EQ(cache.FileStats().tuning_records, 0u);
}

TEST(TuningTable, WorksInMemoryWithoutAFile) {
  ProgramCache cache(CacheOptions{""});  // no file at all
  EXPECT_EQ(cache.state(), CacheState::kMemoryOnly);
  EXPECT_FALSE(cache.PutTuning({"d", "gemm", "s", "p", 2, ""}));  // not in a file...
  auto r = cache.GetTuning("d", "gemm", "s");                     // ...but remembered
  ASSERT_TRUE(r);
  EXPECT_EQ(r->parameters, "p");
  EXPECT_EQ(cache.ListTuning().size(), 1u);
  EXPECT_EQ(cache.ClearTuning(), 1u);
  EXPECT_FALSE(cache.GetTuning("d", "gemm", "s"));
}

}  // namespace
}  // namespace mpcaffe::cache
