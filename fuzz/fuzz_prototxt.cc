// fuzz/fuzz_prototxt.cc — libFuzzer target: a network definition in text format, parsed and
// upgraded as mpcaffe loads .prototxt files. Only mpcaffe::Error may come out.
#include <cstddef>
#include <cstdint>
#include <string>

#include "device/error.h"
#include "proto/caffe.pb.h"
#include "proto/model_io.h"
#include "proto/upgrade.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    caffe::NetParameter net;
    mpcaffe::ParseProtoFromText(text, "<fuzz>.prototxt", &net);
    mpcaffe::UpgradeNetAsNeeded("<fuzz>.prototxt", &net);
  } catch (const mpcaffe::Error&) {
  }
  try {
    caffe::SolverParameter solver;
    mpcaffe::ParseProtoFromText(text, "<fuzz>_solver.prototxt", &solver);
    mpcaffe::UpgradeSolverAsNeeded("<fuzz>_solver.prototxt", &solver);
  } catch (const mpcaffe::Error&) {
  }
  return 0;
}
