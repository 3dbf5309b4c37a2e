// fuzz/fuzz_solverstate.cc — libFuzzer target: a solver snapshot (.solverstate, binary
// SolverState) and a mean file (.binaryproto, BlobProto) read from a file.
#include "fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mpcaffe::fuzz::RunSolverstateInput(data, size);
  return 0;
}
