// fuzz/fuzz_prototxt.cc — libFuzzer target: a network definition in text format, parsed and
// upgraded as mpcaffe loads .prototxt files, then built as a Net on the default OpenCL device in
// both phases (shape inference, data-type checks, conversions, splits, the memory planner). Only
// mpcaffe::Error may come out. Device memory is capped (MPCAFFE_MAX_DEVICE_BYTES, set before
// the device exists) so oversized nets are refused, not allocated; no kernel is compiled (set-up
// builds none, and nothing runs).
#define MPCAFFE_FUZZ_WITH_NET
#include "fuzz/fuzz_inputs.h"
#include "device/settings.h"

namespace {

mpcaffe::Device* FuzzDevice() {
  static mpcaffe::Device* device = [] {
    static mpcaffe::ScopedSettings settings;  // for the life of the fuzzing process
    settings->max_device_bytes = std::to_string(mpcaffe::fuzz::kFuzzDeviceBytes);
    settings->cache = "off";
    return &mpcaffe::DefaultDevice();
  }();
  return device;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mpcaffe::fuzz::RunPrototxtInput(data, size, FuzzDevice());
  return 0;
}
