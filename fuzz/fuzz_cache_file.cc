// fuzz/fuzz_cache_file.cc — libFuzzer target: the kernel cache opening an arbitrary file as its
// SQLite store, then looking a program up and saving one. The cache must never throw or crash:
// it repairs the file or carries on without it.
#define MPCAFFE_FUZZ_WITH_CACHE
#include "fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mpcaffe::fuzz::RunCacheFileInput(data, size);
  return 0;
}
