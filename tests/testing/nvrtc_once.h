// tests/testing/nvrtc_once.h — NVRTC compiles shared across a CUDA test process. The CUDA
// suite's tests walk overlapping samples of the same kernel families (a GEMM variant of one
// test is a registered family's sample in another), and compiling a text a second time for the
// same architecture checks nothing new: it only costs the cold run's time (make test's budget
// counts such repeats). A text that failed is not remembered, so each test sees its own error.
#pragma once

#ifdef MPCAFFE_HAVE_CUDA
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "device/cuda/nvrtc.h"

namespace mpcaffe::test_support {

/// cuda::CompileCuda(source, arch, {}, program_name), compiled at most once per process for
/// each (arch, source).
inline const cuda::NvrtcOutput& CompileCudaOnce(const std::string& source, const std::string& arch,
                                                const std::string& program_name) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, cuda::NvrtcOutput> compiled;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(arch, source);
  auto it = compiled.find(key);
  if (it == compiled.end())
    it = compiled.emplace(std::move(key), cuda::CompileCuda(source, arch, {}, program_name)).first;
  return it->second;
}

}  // namespace mpcaffe::test_support
#endif
