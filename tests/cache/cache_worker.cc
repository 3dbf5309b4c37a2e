// tests/cache/cache_worker.cc — helper process for the cache tests: holds a cache file locked,
// or builds and runs a set of test kernels through the default cache (the concurrency and
// end-to-end tests start several of these at once).
//
//   mpcaffe_cache_worker lock <file> <milliseconds>
//       takes an exclusive SQLite lock on <file> (no other connection may read or write),
//       prints "locked", holds it, exits.
//   mpcaffe_cache_worker write-lock <file> <milliseconds>
//       the same with the write lock only (BEGIN IMMEDIATE): readers of a WAL file go on,
//       writers wait; this works while other processes have the file open.
//   mpcaffe_cache_worker build <count> <seed>
//       builds kernels scale_0..scale_<count-1> (TestKernelSource) in an order shuffled by
//       <seed> on the default device with the cache of MPCAFFE_CACHE, launches each once and
//       checks its output; prints "built=<n> cached=<n> compiled=<n> wrong=<n> state=<s>".
//   mpcaffe_cache_worker open <file> <epoch milliseconds>
//       waits for the given wall-clock time (so that several workers open a new file at the
//       same instant, as CTest's first two entries do), opens <file> as the kernel cache and
//       prints "state=<s>".
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/program_cache.h"
#include "device/device.h"
#include "tests/cache/test_kernels.h"

namespace {

int Lock(const std::string& path, int milliseconds, bool exclusive) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "lock: cannot open %s\n", path.c_str());
    return 1;
  }
  // In exclusive locking mode a WAL file's lock also stops readers. The transaction stays
  // open until the process exits.
  const char* sql =
      exclusive ? "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE;" : "BEGIN IMMEDIATE;";
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::fprintf(stderr, "lock: %s\n", error ? error : "failed");
    return 1;
  }
  std::printf("locked\n");
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
  sqlite3_close(db);
  return 0;
}

int Build(int count, unsigned seed) {
  using namespace mpcaffe;
  using namespace mpcaffe::cache::testing;
  auto cache = cache::EnableProgramCache();
  Device& device = DefaultDevice();
  std::vector<int> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  constexpr uint32_t n = 64;
  std::vector<float> x(n), y(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = 0.5f * i - 3;
  auto dx = device.Alloc<float>(n);
  auto dy = device.Alloc<float>(n);
  device.Write(dx, x.data(), n);
  int cached = 0, wrong = 0;
  ProgramHints hints;
  hints.local_sizes = {Dim3{16, 1, 1}};
  for (int k : order) {
    auto program = device.BuildProgram(TestKernelSource(k), "-cl-std=CL1.2", hints);
    cached += program->from_cache();
    program->GetKernel(TestKernelName(k)).Arg(dy).Arg(dx).Arg(n).Launch({n, 1, 1}, {16, 1, 1});
    device.Read(dy, y.data(), n);
    for (uint32_t i = 0; i < n; ++i) wrong += y[i] != TestKernelExpected(k, x[i]);
  }
  const auto c = cache ? cache->counters() : cache::CacheCounters{};
  std::printf("built=%d cached=%d compiled=%llu wrong=%d state=%s\n", count, cached,
              static_cast<unsigned long long>(c.compiles), wrong,
              cache ? cache::CacheStateName(cache->state()) : "off");
  return wrong ? 3 : 0;
}

int Open(const std::string& path, long long start_ms) {
  using namespace std::chrono;
  std::this_thread::sleep_until(system_clock::time_point(milliseconds(start_ms)));
  mpcaffe::cache::ProgramCache cache(mpcaffe::cache::CacheOptions{path});
  std::printf("state=%s\n", mpcaffe::cache::CacheStateName(cache.state()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "lock" && argc == 4) return Lock(argv[2], std::atoi(argv[3]), true);
    if (mode == "write-lock" && argc == 4) return Lock(argv[2], std::atoi(argv[3]), false);
    if (mode == "build" && argc == 4) return Build(std::atoi(argv[2]), std::atoi(argv[3]));
    if (mode == "open" && argc == 4) return Open(argv[2], std::atoll(argv[3]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe_cache_worker %s: %s\n", mode.c_str(), e.what());
    return 2;
  }
  std::fprintf(stderr,
               "usage: mpcaffe_cache_worker lock|write-lock <file> <ms> | build <count> <seed> | "
               "open <file> <epoch ms>\n");
  return 64;
}
