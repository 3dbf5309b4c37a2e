// fuzz/fuzz_cache_file.cc — libFuzzer target: the kernel cache opening an arbitrary file as its
// SQLite store, then looking a program up and saving one. The cache must never throw or crash:
// it repairs the file or carries on without it.
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "cache/program_cache.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpcaffe::fuzz::WriteScratch(data, size, ".sqlite");
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  mpcaffe::cache::CacheOptions options;
  options.path = path;
  options.busy_timeout_ms = 10;
  mpcaffe::cache::ProgramCache cache(options);
  mpcaffe::ProgramKey key{"opencl", "fuzz platform", "fuzz device", "1.0", "", "-DX", "kernel"};
  cache.Load(key);
  cache.Save(key, "binary");
  cache.Load(key);
  return 0;
}
