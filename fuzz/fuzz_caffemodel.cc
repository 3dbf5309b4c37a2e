// fuzz/fuzz_caffemodel.cc — libFuzzer target: trained weights (.caffemodel, binary
// NetParameter) read from a file and upgraded, as `--weights` loads them.
#include "fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mpcaffe::fuzz::RunCaffemodelInput(data, size);
  return 0;
}
