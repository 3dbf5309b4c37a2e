// tests/testing/sweep.h — how many configurations a test compiles. `make test` runs on a new
// machine with every driver cache empty, where compiling a kernel text dominates a suite's
// time (PoCL: about a second each, one thread), so a test over a family's candidates compiles
// a covering sample of them: every value any candidate gives a field at least once
// (ConfigSchema::Covering), the same sample every run. `make test-sweep` sets
// MPCAFFE_TEST_SWEEP=1, and the same tests then compile every candidate.
#pragma once

#include <cstdlib>
#include <cstring>
#include <vector>

namespace mpcaffe::test_support {

/// Whether this run is the exhaustive sweep (MPCAFFE_TEST_SWEEP=1, `make test-sweep`).
inline bool ExhaustiveSweep() {
  const char* v = std::getenv("MPCAFFE_TEST_SWEEP");
  return v && std::strcmp(v, "1") == 0;
}

/// `candidates` under the sweep, else `schema`'s covering sample of them.
template <typename Schema, typename Config>
std::vector<Config> SampleOf(const Schema& schema, const std::vector<Config>& candidates) {
  return ExhaustiveSweep() ? candidates : schema.Covering(candidates);
}

/// The first `n` elements of `items` unless this is the sweep (a test's own list of shapes or
/// layouts, ordered so that its first elements cover every branch).
template <typename T>
std::vector<T> FirstUnlessSweep(const std::vector<T>& items, size_t n) {
  if (ExhaustiveSweep() || items.size() <= n) return items;
  return std::vector<T>(items.begin(), items.begin() + static_cast<long>(n));
}

}  // namespace mpcaffe::test_support
