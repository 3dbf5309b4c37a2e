// fuzz/fuzz_solverstate.cc — libFuzzer target: a solver snapshot (.solverstate, binary
// SolverState) and a mean file (.binaryproto, BlobProto) read from a file.
#include <cstddef>
#include <cstdint>

#include "device/error.h"
#include "fuzz/fuzz_util.h"
#include "proto/caffe.pb.h"
#include "proto/model_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpcaffe::fuzz::WriteScratch(data, size, ".solverstate");
  try {
    caffe::SolverState state;
    mpcaffe::ReadProtoFromBinaryFile(path, &state);
  } catch (const mpcaffe::Error&) {
  }
  try {
    mpcaffe::ReadBlobProtoBinary(path);
  } catch (const mpcaffe::Error&) {
  }
  return 0;
}
