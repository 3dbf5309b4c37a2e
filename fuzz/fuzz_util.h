// fuzz/fuzz_util.h — shared pieces of the libFuzzer targets: a per-process scratch file for the
// loaders that read from a path, and the rule that only mpcaffe::Error may escape a loader.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace mpcaffe::fuzz {

/// Writes the input to a scratch file (in /dev/shm when present) and returns its path.
inline std::string WriteScratch(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/mpcaffe_fuzz_" + std::to_string(getpid()) + suffix;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

}  // namespace mpcaffe::fuzz
