// tests/cache/opencl_cache_test.cc — the cache behind real OpenCL builds: a second build (in
// this process or another) compiles nothing, a binary the driver refuses is replaced, and four
// processes building the same 50 kernels at once leave exactly 50 sound rows.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <regex>

#include "cache/program_cache.h"
#include "cache/sha256.h"
#include "device/device.h"
#include "device/program_store.h"
#include "device/settings.h"
#include "tests/cache/cache_test_util.h"

namespace mpcaffe::cache {
namespace {

using testing::CountWarnings;
using testing::IntegrityCheck;
using testing::Query;
using testing::ScratchDir;
using testing::StderrCapture;
using testing::TestKernelExpected;
using testing::TestKernelName;
using testing::TestKernelSource;
using testing::Worker;

Device* OpenCLDevice() {
  for (Device* d : DeviceList())
    if (d->backend() == Backend::kOpenCL) return d;
  return nullptr;
}

/// Installs a store for the scope of a test and puts the previous one back.
class StoreOverride {
 public:
  explicit StoreOverride(std::shared_ptr<ProgramBinaryStore> store)
      : previous_(GetProgramBinaryStore()) {
    SetProgramBinaryStore(std::move(store));
  }
  ~StoreOverride() { SetProgramBinaryStore(previous_); }

 private:
  std::shared_ptr<ProgramBinaryStore> previous_;
};

/// Builds test kernel `i` on `device`, runs it on 64 values and returns the program.
std::shared_ptr<Program> BuildAndCheck(Device& device, int i) {
  ProgramHints hints;
  hints.local_sizes = {Dim3{16, 1, 1}};
  auto program = device.BuildProgram(TestKernelSource(i), "-cl-std=CL1.2", hints);
  constexpr uint32_t n = 64;
  std::vector<float> x(n), y(n);
  for (uint32_t k = 0; k < n; ++k) x[k] = 0.25f * k - 5;
  auto dx = device.Alloc<float>(n);
  auto dy = device.Alloc<float>(n);
  device.Write(dx, x.data(), n);
  program->GetKernel(TestKernelName(i)).Arg(dy).Arg(dx).Arg(n).Launch({n, 1, 1}, {16, 1, 1});
  device.Read(dy, y.data(), n);
  for (uint32_t k = 0; k < n; ++k) EXPECT_EQ(y[k], TestKernelExpected(i, x[k])) << "item " << k;
  return program;
}

/// Parses "key=value" words of a worker's report line.
std::map<std::string, std::string> Report(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::regex word("(\\w+)=(\\S+)");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), word); it != std::sregex_iterator();
       ++it)
    fields[(*it)[1]] = (*it)[2];
  return fields;
}

TEST(OpenCLCache, SecondBuildInThisProcessCompilesNothing) {
  Device* device = OpenCLDevice();
  if (!device) GTEST_SKIP() << "no OpenCL device";
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  {
    auto first = std::make_shared<ProgramCache>(CacheOptions{path});
    StoreOverride use(first);
    EXPECT_FALSE(BuildAndCheck(*device, 1001)->from_cache());
    EXPECT_EQ(first->counters().compiles, 1u);
    EXPECT_EQ(first->counters().saves, 1u);
  }
  auto second = std::make_shared<ProgramCache>(CacheOptions{path});  // empty in-process map
  StoreOverride use(second);
  EXPECT_TRUE(BuildAndCheck(*device, 1001)->from_cache());
  EXPECT_EQ(second->counters().compiles, 0u);
  EXPECT_EQ(second->counters().loads, 1u);
  EXPECT_EQ(second->counters().hits, 1u);
  // Different options are a different program.
  ProgramHints hints;
  EXPECT_FALSE(
      device->BuildProgram(TestKernelSource(1001), "-cl-std=CL1.2 -DX=1", hints)->from_cache());
  EXPECT_EQ(second->counters().compiles, 1u);
}

// PoCL compiles a generic work-group function of every kernel, and every listed local size of
// every kernel, when asked for a binary; its own cache keeps what launches compiled. So a text's
// binary is stored at its second build there, at the first everywhere else (and with
// MPCAFFE_BINARIES=always).
TEST(OpenCLCache, BinaryIsStoredAtTheSecondBuildWhereItCostsCompiles) {
  int checked = 0;
  for (Device* device : DeviceList()) {
    if (device->backend() != Backend::kOpenCL) continue;
    const bool pocl = device->info().implementation == "pocl";
    EXPECT_EQ(device->info().binary_costs_compiles, pocl) << device->Describe();
    for (const char* binaries : {"", "always"}) {
      SCOPED_TRACE(device->Describe() + ", MPCAFFE_BINARIES=" + binaries);
      ScopedSettings env;
      env->binaries = binaries;
      const bool deferred = pocl && std::string(binaries).empty();
      ScratchDir dir;
      const std::string path = dir.File("kernels.sqlite");
      for (int build = 1; build <= 3; ++build) {
        // A new cache object per build: an empty in-process map, as a new process has.
        auto cache = std::make_shared<ProgramCache>(CacheOptions{path});
        StoreOverride use(cache);
        const bool loaded = BuildAndCheck(*device, 1002 + checked)->from_cache();
        const int stored_at = deferred ? 2 : 1;
        EXPECT_EQ(loaded, build > stored_at) << "build " << build;
        EXPECT_EQ(cache->counters().saves, build == stored_at ? 1u : 0u) << "build " << build;
      }
      ++checked;
    }
  }
  if (!checked) GTEST_SKIP() << "no OpenCL device";
  ScopedSettings env;
  env->binaries = "sometimes";
  Device* device = OpenCLDevice();
  auto cache = std::make_shared<ProgramCache>(CacheOptions{""});
  StoreOverride use(cache);
  try {
    device->BuildProgram(TestKernelSource(1100), "-cl-std=CL1.2");
    ADD_FAILURE() << "MPCAFFE_BINARIES=sometimes was accepted";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("MPCAFFE_BINARIES='sometimes'"), std::string::npos)
        << e.what();
  }
}

TEST(OpenCLCache, SecondProcessCompilesNothing) {
  if (!OpenCLDevice()) GTEST_SKIP() << "no OpenCL device";
  ScratchDir dir;
  const std::vector<std::string> env = {"MPCAFFE_CACHE=" + dir.File("kernels.sqlite"),
                                        "POCL_CACHE_DIR=" + dir.File("pocl")};
  Worker cold({"build", "5", "1"}, env);
  auto first = Report(cold.ReadAll());
  EXPECT_EQ(cold.Wait(), 0);
  EXPECT_EQ(first["compiled"], "5");
  EXPECT_EQ(first["cached"], "0");
  EXPECT_EQ(first["wrong"], "0");
  Worker warm({"build", "5", "2"}, env);
  auto second = Report(warm.ReadAll());
  EXPECT_EQ(warm.Wait(), 0);
  EXPECT_EQ(second["compiled"], "0");
  EXPECT_EQ(second["cached"], "5");
  EXPECT_EQ(second["wrong"], "0");
  EXPECT_EQ(second["state"], "read-write");
}

/// Replaces every stored binary by `make(binary)` and fixes its checksum, so that only the
/// driver can notice.
void RewriteBinaries(const std::string& path, const std::function<std::string(std::string)>& make) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::vector<std::pair<std::string, std::string>> rows;
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "SELECT key, binary FROM programs_v1", -1, &stmt, nullptr);
  while (sqlite3_step(stmt) == SQLITE_ROW)
    rows.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
                      std::string(static_cast<const char*>(sqlite3_column_blob(stmt, 1)),
                                  sqlite3_column_bytes(stmt, 1)));
  sqlite3_finalize(stmt);
  for (const auto& [key, binary] : rows) {
    const std::string bad = make(binary);
    const std::string checksum = Sha256Hex(bad);
    sqlite3_prepare_v2(db, "UPDATE programs_v1 SET binary = ?1, checksum = ?2 WHERE key = ?3", -1,
                       &stmt, nullptr);
    sqlite3_bind_blob(stmt, 1, bad.data(), static_cast<int>(bad.size()), SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, checksum.c_str(), -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 3, key.c_str(), -1, SQLITE_STATIC);
    EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE);
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  ASSERT_FALSE(rows.empty());
}

TEST(OpenCLCache, BinaryTheDriverRejectsIsReplaced) {
  Device* device = OpenCLDevice();
  if (!device) GTEST_SKIP() << "no OpenCL device";
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  {
    StoreOverride use(std::make_shared<ProgramCache>(CacheOptions{path}));
    BuildAndCheck(*device, 1002);
    BuildAndCheck(*device, 1003);
  }
  // Same length, checksum fixed, contents garbage: only clCreateProgramWithBinary can tell.
  RewriteBinaries(path, [](std::string b) { return testing::FakeBinary(5, b.size()); });
  StderrCapture capture;
  {
    auto cache = std::make_shared<ProgramCache>(CacheOptions{path});
    StoreOverride use(cache);
    EXPECT_FALSE(BuildAndCheck(*device, 1002)->from_cache());
    EXPECT_FALSE(BuildAndCheck(*device, 1003)->from_cache());
    EXPECT_EQ(cache->counters().rejects, 2u);
    EXPECT_EQ(cache->counters().compiles, 2u);
  }
  const std::string err = capture.Text();
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_NE(err.find("driver rejected"), std::string::npos) << err;
  // The rows were replaced by good binaries.
  auto cache = std::make_shared<ProgramCache>(CacheOptions{path});
  StoreOverride use(cache);
  EXPECT_TRUE(BuildAndCheck(*device, 1002)->from_cache());
  EXPECT_TRUE(BuildAndCheck(*device, 1003)->from_cache());
  EXPECT_EQ(cache->warnings_printed(), 0);
}

TEST(OpenCLCache, FourProcessesShareOneFile) {
  if (!OpenCLDevice()) GTEST_SKIP() << "no OpenCL device";
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  // PoCL's own cache is shared too (fresh), as on a user's machine; each worker shuffles the
  // 50 kernels with its own seed and all start together.
  const std::vector<std::string> env = {"MPCAFFE_CACHE=" + path,
                                        "POCL_CACHE_DIR=" + dir.File("pocl")};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<Worker>> workers;
  for (int seed = 1; seed <= 4; ++seed)
    workers.push_back(std::make_unique<Worker>(
        std::vector<std::string>{"build", "50", std::to_string(seed)}, env));
  int compiled = 0;
  for (auto& w : workers) {
    auto report = Report(w->ReadAll());
    EXPECT_EQ(w->Wait(), 0);
    EXPECT_EQ(report["built"], "50");
    EXPECT_EQ(report["wrong"], "0");
    EXPECT_EQ(report["state"], "read-write");  // nobody gave up on the file
    compiled += std::atoi(report["compiled"].c_str());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[          ] 4 processes x 50 kernels: %.1f s, %d compiles in all\n", seconds,
              compiled);
  EXPECT_GE(compiled, 50);
  EXPECT_LT(compiled, 200);  // later processes found what earlier ones had stored
  EXPECT_EQ(Query(path, "SELECT count(*) FROM programs_v1")[0], "50");
  EXPECT_EQ(IntegrityCheck(path), "ok");
  ProgramCache cache(CacheOptions{path});
  const CacheFileStats stats = cache.FileStats();
  EXPECT_EQ(stats.hits + stats.misses, 200u);
  EXPECT_EQ(stats.compiles, static_cast<uint64_t>(compiled));
}

}  // namespace
}  // namespace mpcaffe::cache
