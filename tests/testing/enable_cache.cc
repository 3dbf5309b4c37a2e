// tests/testing/enable_cache.cc — linked into every suite but the cache's: installs the
// default kernel cache before the tests run, so a second run compiles nothing.
#include "cache/program_cache.h"

namespace {
const bool kCacheEnabled = (mpcaffe::cache::EnableProgramCache(), true);
}  // namespace
