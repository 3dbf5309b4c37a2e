// fuzz/fuzz_caffemodel.cc — libFuzzer target: trained weights (.caffemodel, binary
// NetParameter) read from a file and upgraded, as `--weights` loads them.
#include <cstddef>
#include <cstdint>

#include "device/error.h"
#include "fuzz/fuzz_util.h"
#include "proto/model_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpcaffe::fuzz::WriteScratch(data, size, ".caffemodel");
  try {
    mpcaffe::ReadNetParameterBinary(path);
  } catch (const mpcaffe::Error&) {
  }
  return 0;
}
