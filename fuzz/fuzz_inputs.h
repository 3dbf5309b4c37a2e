// fuzz/fuzz_inputs.h — what each libFuzzer target does with one input, shared by the targets
// in fuzz/ and the regression test that replays kept findings (tests/reliability): every
// malformed input must end in an mpcaffe::Error (caught here), never a crash, a hang, a leak or
// an unbounded allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "device/error.h"
#include "fuzz/fuzz_util.h"
#include "proto/caffe.pb.h"
#include "proto/model_io.h"
#include "proto/upgrade.h"

#ifdef MPCAFFE_FUZZ_WITH_NET
#include "device/device.h"
#include "net/net.h"
#endif
#ifdef MPCAFFE_FUZZ_WITH_IMAGES
#include "layers/image_io.h"
#endif
#ifdef MPCAFFE_FUZZ_WITH_CACHE
#include "cache/program_cache.h"
#endif

namespace mpcaffe::fuzz {

#ifdef MPCAFFE_FUZZ_WITH_NET
/// Device-memory cap for nets built from fuzzed text: 16 MiB keeps every refused net cheap.
inline constexpr uint64_t kFuzzDeviceBytes = 16u << 20;
/// Nets with more Data layers than this are only parsed: each one becomes a synthetic input
/// filled on the host (up to the cap each), which would let one input cost gigabytes.
inline constexpr int kMaxDataLayers = 8;

/// Builds `net` in both phases on `device` (whose byte limit the caller has set) with synthetic
/// data; set-up compiles no kernel and nothing runs.
inline void BuildNetBothPhases(const caffe::NetParameter& net, Device& device) {
  int data_layers = 0;
  for (const auto& layer : net.layer()) data_layers += layer.type() == "Data";
  if (data_layers > kMaxDataLayers) return;
  for (caffe::Phase phase : {caffe::TEST, caffe::TRAIN}) {
    NetOptions options;
    options.phase = phase;
    options.synthetic_data = true;
    try {
      Net built(net, device, options);
    } catch (const Error&) {
    }
  }
}
#endif

/// fuzz_prototxt: text NetParameter parsed, upgraded and (with a device) built; the same text
/// as a SolverParameter.
inline void RunPrototxtInput(const uint8_t* data, size_t size, [[maybe_unused]] void* device) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    caffe::NetParameter net;
    ParseProtoFromText(text, "<fuzz>.prototxt", &net);
    UpgradeNetAsNeeded("<fuzz>.prototxt", &net);
#ifdef MPCAFFE_FUZZ_WITH_NET
    if (device) BuildNetBothPhases(net, *static_cast<Device*>(device));
#endif
  } catch (const Error&) {
  }
  try {
    caffe::SolverParameter solver;
    ParseProtoFromText(text, "<fuzz>_solver.prototxt", &solver);
    UpgradeSolverAsNeeded("<fuzz>_solver.prototxt", &solver);
  } catch (const Error&) {
  }
}

/// fuzz_caffemodel: trained weights (binary NetParameter) read from a file and upgraded, as
/// `--weights` loads them.
inline void RunCaffemodelInput(const uint8_t* data, size_t size) {
  const std::string path = WriteScratch(data, size, ".caffemodel");
  try {
    ReadNetParameterBinary(path);
  } catch (const Error&) {
  }
}

/// fuzz_solverstate: a solver snapshot (SolverState) and a mean file (BlobProto) from a file.
inline void RunSolverstateInput(const uint8_t* data, size_t size) {
  const std::string path = WriteScratch(data, size, ".solverstate");
  try {
    caffe::SolverState state;
    ReadProtoFromBinaryFile(path, &state);
  } catch (const Error&) {
  }
  try {
    ReadBlobProtoBinary(path);
  } catch (const Error&) {
  }
}

#ifdef MPCAFFE_FUZZ_WITH_IMAGES
/// fuzz_image: bytes as an image file (the JPEG/PNG damage checks, then OpenCV's decoders, in
/// color and gray, resized) and as an encoded Datum record, as convert_imageset, ImageData and
/// the Data layer read them.
inline void RunImageInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    DecodeImage(bytes, "fuzz input", 0, 0, true);
    DecodeImage(bytes, "fuzz input", 3, 5, false);
  } catch (const Error&) {
  }
  try {
    caffe::Datum datum;
    datum.set_encoded(true);
    datum.set_data(bytes);
    DecodeDatumInPlace(&datum, "fuzz record");
  } catch (const Error&) {
  }
}
#endif

#ifdef MPCAFFE_FUZZ_WITH_CACHE
/// fuzz_cache_file: the kernel cache opening an arbitrary file as its SQLite store, looking a
/// program up and saving one. The cache never throws: it repairs the file or goes without it.
inline void RunCacheFileInput(const uint8_t* data, size_t size) {
  const std::string path = WriteScratch(data, size, ".sqlite");
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  cache::CacheOptions options;
  options.path = path;
  options.busy_timeout_ms = 10;
  cache::ProgramCache cache(options);
  ProgramKey key{"opencl", "fuzz platform", "fuzz device", "1.0", "", "-DX", "kernel"};
  cache.Load(key);
  cache.Save(key, "binary");
  cache.Load(key);
}
#endif

}  // namespace mpcaffe::fuzz
