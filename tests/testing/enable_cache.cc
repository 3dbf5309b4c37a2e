// tests/testing/enable_cache.cc — linked into every suite but the cache's: installs a kernel
// cache before the tests run, so a second suite of the same run compiles nothing. Never the
// user's: `make test` gives each run its own (MPCAFFE_CACHE=<build>/test-cache/kernels.sqlite,
// emptied first); a suite started by hand without MPCAFFE_CACHE uses that same file of its
// build tree, so what the Tuner tests record never reaches the user's tuning table.
#include <cstdlib>

#include "cache/program_cache.h"

namespace {
const bool kCacheEnabled = [] {
  const char* path = std::getenv("MPCAFFE_CACHE");
  if (!path || !*path) setenv("MPCAFFE_CACHE", MPCAFFE_TEST_CACHE_DEFAULT, 1);
  mpcaffe::cache::EnableProgramCache();
  return true;
}();
}  // namespace
