// tests/cache/program_cache_test.cc — ProgramCache as a store: round trips across instances,
// key checks on hit, counters, the in-process map, threads, clearing, default location.
#include "cache/program_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "tests/cache/cache_test_util.h"
#include "device/settings.h"

namespace mpcaffe::cache {
namespace {

using testing::FakeBinary;
using testing::FakeKey;
using testing::Query;
using testing::ScratchDir;

TEST(ProgramCache, SavedProgramsLoadInALaterInstance) {
  ScratchDir dir;
  const std::string path = dir.File("sub/dir/kernels.sqlite");  // directories are created
  {
    ProgramCache cache(CacheOptions{path});
    EXPECT_EQ(cache.state(), CacheState::kReadWrite);
    for (int i = 0; i < 3; ++i) {
      EXPECT_FALSE(cache.Load(FakeKey(i)));
      cache.Save(FakeKey(i), FakeBinary(i));
    }
    EXPECT_EQ(cache.counters().misses, 3u);
    EXPECT_EQ(cache.counters().saves, 3u);
  }
  ProgramCache cache(CacheOptions{path});
  for (int i = 0; i < 3; ++i) {
    auto binary = cache.Load(FakeKey(i));
    ASSERT_TRUE(binary) << i;
    EXPECT_EQ(*binary, FakeBinary(i));
  }
  EXPECT_FALSE(cache.Load(FakeKey(3)));
  const CacheCounters c = cache.counters();
  EXPECT_EQ(c.hits, 3u);
  EXPECT_EQ(c.memory_hits, 0u);
  EXPECT_EQ(c.misses, 1u);
  EXPECT_EQ(c.bytes_loaded, 3 * FakeBinary(0).size());
  EXPECT_EQ(cache.warnings_printed(), 0);
  EXPECT_EQ(Query(path, "PRAGMA journal_mode")[0], "wal");
}

TEST(ProgramCache, SecondLoadComesFromTheInProcessMap) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  { ProgramCache(CacheOptions{path}).Save(FakeKey(7), FakeBinary(7)); }
  ProgramCache cache(CacheOptions{path});
  ASSERT_TRUE(cache.Load(FakeKey(7)));
  // Remove the row behind the cache's back: the map still answers, SQLite is not asked.
  Query(path, "DELETE FROM programs_v1");
  auto again = cache.Load(FakeKey(7));
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, FakeBinary(7));
  EXPECT_EQ(cache.counters().memory_hits, 1u);
  EXPECT_EQ(cache.counters().hits, 2u);
}

TEST(ProgramCache, EveryKeyFieldMatters) {
  ScratchDir dir;
  ProgramCache cache(CacheOptions{dir.File("kernels.sqlite")});
  const ProgramKey base = FakeKey(1);
  cache.Save(base, FakeBinary(1));
  for (std::string ProgramKey::*field :
       {&ProgramKey::backend, &ProgramKey::platform, &ProgramKey::device, &ProgramKey::driver,
        &ProgramKey::arch, &ProgramKey::options, &ProgramKey::source}) {
    ProgramKey k = base;
    k.*field += "x";
    EXPECT_FALSE(cache.Load(k));
  }
  EXPECT_TRUE(cache.Load(base));
}

TEST(ProgramCache, StoredTextAndOptionsAreComparedOnHit) {
  // Stands for a hash collision: a row whose key matches but whose stored text differs.
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  { ProgramCache(CacheOptions{path}).Save(FakeKey(1), FakeBinary(1)); }
  Query(path, "UPDATE programs_v1 SET source = source || ' '");
  {
    ProgramCache cache(CacheOptions{path});
    EXPECT_FALSE(cache.Load(FakeKey(1)));
  }
  { ProgramCache(CacheOptions{path}).Save(FakeKey(1), FakeBinary(1)); }
  Query(path, "UPDATE programs_v1 SET options = '-DX'");
  ProgramCache cache(CacheOptions{path});
  EXPECT_FALSE(cache.Load(FakeKey(1)));
  // Saving again replaces the row (INSERT OR REPLACE), after which it loads.
  cache.Save(FakeKey(1), FakeBinary(1));
  EXPECT_EQ(Query(path, "SELECT count(*) FROM programs_v1")[0], "1");
  EXPECT_EQ(Query(path, "SELECT options FROM programs_v1")[0], FakeKey(1).options);
}

TEST(ProgramCache, SaveReplaces) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  {
    ProgramCache cache(CacheOptions{path});
    cache.Save(FakeKey(1), FakeBinary(1));
    cache.Save(FakeKey(1), FakeBinary(2));
  }
  ProgramCache cache(CacheOptions{path});
  EXPECT_EQ(*cache.Load(FakeKey(1)), FakeBinary(2));
  EXPECT_EQ(cache.FileStats().programs, 1u);
}

TEST(ProgramCache, CountersAccumulateInTheFile) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  {
    ProgramCache cache(CacheOptions{path});
    cache.Load(FakeKey(1));
    cache.RecordCompile(0.25);
    cache.Save(FakeKey(1), FakeBinary(1, 1000));
    cache.Load(FakeKey(2));
    cache.RecordCompile(0.5);
    cache.Save(FakeKey(2), FakeBinary(2, 3000));
  }
  {
    ProgramCache cache(CacheOptions{path});
    cache.Load(FakeKey(1));
    cache.RecordLoad(0.125);
  }  // the destructor adds this process's counters to the file
  ProgramCache cache(CacheOptions{path, 10000, 0, /*create=*/false});
  const CacheFileStats s = cache.FileStats();
  EXPECT_EQ(s.path, path);
  EXPECT_TRUE(s.file_exists);
  EXPECT_EQ(s.programs, 2u);
  EXPECT_EQ(s.bytes, 4000u);
  EXPECT_GT(s.file_bytes, 4000u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.compiles, 2u);
  EXPECT_DOUBLE_EQ(s.compile_seconds, 0.75);
  EXPECT_EQ(s.loads, 1u);
  EXPECT_DOUBLE_EQ(s.load_seconds, 0.125);
}

TEST(ProgramCache, MissingFileIsNotCreatedWhenAskedNotTo) {
  ScratchDir dir;
  const std::string path = dir.File("absent.sqlite");
  ProgramCache cache(CacheOptions{path, 10000, 0, /*create=*/false});
  EXPECT_EQ(cache.state(), CacheState::kMemoryOnly);
  const CacheFileStats s = cache.FileStats();
  EXPECT_FALSE(s.file_exists);
  EXPECT_EQ(s.programs, 0u);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(cache.warnings_printed(), 0);
}

TEST(ProgramCache, ClearEmptiesFileAndMemory) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  ProgramCache cache(CacheOptions{path});
  for (int i = 0; i < 5; ++i) cache.Save(FakeKey(i), FakeBinary(i, 50000));
  cache.PutTuning(TuningRecord{"dev", "gemm", "sig", "params", 1.0, ""});
  EXPECT_EQ(cache.FileStats().programs, 5u);
  const uint64_t before = cache.FileStats().file_bytes;
  EXPECT_TRUE(cache.Clear());
  const CacheFileStats s = cache.FileStats();
  EXPECT_EQ(s.programs, 0u);
  EXPECT_EQ(s.tuning_records, 0u);
  EXPECT_LT(s.file_bytes, before / 4);   // space given back
  EXPECT_FALSE(cache.Load(FakeKey(0)));  // the in-process map is empty too
  EXPECT_FALSE(cache.GetTuning("dev", "gemm", "sig"));
}

TEST(ProgramCache, AnotherLibraryVersionDropsTuningRecordsButKeepsPrograms) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  {
    CacheOptions old_version{path};
    old_version.library_version = "0.0.1";
    ProgramCache cache(old_version);
    cache.Save(FakeKey(0), FakeBinary(0));
    cache.PutTuning(TuningRecord{"dev", "gemm", "sig", "params", 1.0, ""});
  }
  {
    // The same version again: the record is trusted.
    CacheOptions same{path};
    same.library_version = "0.0.1";
    ProgramCache cache(same);
    EXPECT_TRUE(cache.GetTuning("dev", "gemm", "sig"));
    EXPECT_EQ(cache.warnings_printed(), 0);
  }
  {
    CacheOptions new_version{path};
    new_version.library_version = "0.0.2";
    ProgramCache cache(new_version);
    EXPECT_FALSE(cache.GetTuning("dev", "gemm", "sig"));
    EXPECT_EQ(cache.FileStats().tuning_records, 0u);
    EXPECT_TRUE(cache.Load(FakeKey(0)));  // binaries are keyed by their whole text
    EXPECT_EQ(cache.warnings_printed(), 1);
    EXPECT_NE(cache.last_problem().find("0.0.1"), std::string::npos) << cache.last_problem();
    cache.PutTuning(TuningRecord{"dev", "gemm", "sig", "params2", 1.0, ""});
  }
  CacheOptions again{path};
  again.library_version = "0.0.2";
  ProgramCache cache(again);
  auto kept = cache.GetTuning("dev", "gemm", "sig");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->parameters, "params2");
  EXPECT_EQ(cache.warnings_printed(), 0);
}

TEST(ProgramCache, DefaultLibraryVersionIsTheProjectVersion) {
  // The project version and the tuning records' syntax: records of another syntax are dropped.
  EXPECT_EQ(CacheOptions{}.library_version,
            std::string(MPCAFFE_VERSION) + "+records" + std::to_string(kTuningRecordSyntax));
  EXPECT_GT(std::string(MPCAFFE_VERSION).size(), 4u);
}

TEST(ProgramCache, ThreadsShareOneCache) {
  ScratchDir dir;
  ProgramCache cache(CacheOptions{dir.File("kernels.sqlite")});
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 20; ++i) {
          const int k = (i * 7 + t * 3) % 20;
          auto b = cache.Load(FakeKey(k));
          if (b && *b != FakeBinary(k, 500)) ++wrong;
          if (!b) cache.Save(FakeKey(k), FakeBinary(k, 500));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(cache.FileStats().programs, 20u);
  const CacheCounters c = cache.counters();
  EXPECT_EQ(c.hits + c.misses, 6u * 3u * 20u);
  EXPECT_GE(c.misses, 20u);
  EXPECT_EQ(cache.warnings_printed(), 0);
}

TEST(DefaultCachePath, FollowsTheEnvironment) {
  ScopedSettings env;
  std::string why;
  env->cache = "/some/where.sqlite";
  env->xdg_cache_home = "/xdg";
  env->home = "/home/someone";
  EXPECT_EQ(DefaultCachePath(&why), "/some/where.sqlite");
  EXPECT_EQ(why, "MPCAFFE_CACHE");
  env->cache = "off";
  EXPECT_EQ(DefaultCachePath(), "");
  env->cache = "OFF";
  EXPECT_EQ(DefaultCachePath(), "");
  env->cache = "";
  EXPECT_EQ(DefaultCachePath(&why), "/xdg/mpcaffe/kernels.sqlite");
  EXPECT_EQ(why, "XDG_CACHE_HOME");
  env->xdg_cache_home = "relative/ignored";
  EXPECT_EQ(DefaultCachePath(&why), "/home/someone/.cache/mpcaffe/kernels.sqlite");
  env->xdg_cache_home = "";
  EXPECT_EQ(DefaultCachePath(&why), "/home/someone/.cache/mpcaffe/kernels.sqlite");
  EXPECT_EQ(why, "HOME");
}

TEST(TuningDeviceKey, NamesTheDevice) {
  DeviceInfo info;
  info.backend = Backend::kOpenCL;
  info.platform_name = "Portable Computing Language";
  info.platform_version = "OpenCL 3.0 PoCL 3.1";
  info.name = "cpu-haswell";
  info.driver_version = "3.1";
  EXPECT_EQ(TuningDeviceKey(info),
            "opencl | Portable Computing Language OpenCL 3.0 PoCL 3.1 | cpu-haswell | 3.1");
  info.backend = Backend::kCuda;
  info.arch = "sm_80";
  EXPECT_NE(TuningDeviceKey(info).find("cuda | "), std::string::npos);
  EXPECT_NE(TuningDeviceKey(info).find("| sm_80"), std::string::npos);
}

}  // namespace
}  // namespace mpcaffe::cache
