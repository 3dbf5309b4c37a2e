// tools/cmd_compute_image_mean.cc — `mpcaffe compute_image_mean [FLAGS] INPUT_DB [OUTPUT_FILE]`,
// BVLC Caffe's tool: the per-pixel mean of an LMDB's caffe.Datum records (encoded ones decoded
// with OpenCV) as a 1×C×H×W mean.binaryproto, and the per-channel means printed.
#include <cstdio>
#include <string>
#include <vector>

#include "layers/image_io.h"
#include "layers/lmdb_io.h"
#include "tools/command.h"

namespace mpcaffe::tools {
namespace {

const CommandFlags kFlags{{"--backend"}, {}, 2, /*gflags=*/true};
const char kName[] = "compute_image_mean";

int RunComputeImageMean(const std::vector<std::string>& given) {
  const std::vector<std::string> args = GflagsArguments(kFlags, given);
  const std::vector<std::string> pos = ParseArguments(kFlags, args).operands;
  if (pos.empty()) return UsageError(kName, "needs INPUT_DB");
  const std::string backend = FlagValue(args, "--backend", "lmdb");
  if (backend != "lmdb")
    return UsageError(kName, "--backend=" + backend +
                                 ": only lmdb is supported (mpcaffe reads "
                                 "and writes LMDB databases only)");
  LmdbReader db(pos[0]);
  if (db.size() == 0) throw Error("'" + pos[0] + "' holds no record");
  std::vector<double> sum;
  int channels = 0, height = 0, width = 0;
  caffe::Datum datum;
  for (size_t i = 0; i < db.size(); ++i) {
    const std::string what = "record " + std::to_string(i) + " of '" + pos[0] + "'";
    if (!datum.ParseFromString(db.Next())) throw Error(what + " is not a caffe.Datum");
    DecodeDatumInPlace(&datum, what);
    const size_t size = static_cast<size_t>(datum.channels()) * datum.height() * datum.width();
    if (i == 0) {
      channels = datum.channels(), height = datum.height(), width = datum.width();
      sum.assign(size, 0.0);
      std::printf("Starting iteration\n");
    } else if (datum.channels() != channels || datum.height() != height || datum.width() != width) {
      throw Error(what + " is " + std::to_string(datum.channels()) + "x" +
                  std::to_string(datum.height()) + "x" + std::to_string(datum.width()) +
                  ", the first " + std::to_string(channels) + "x" + std::to_string(height) + "x" +
                  std::to_string(width) +
                  " (a mean needs one size: convert_imageset "
                  "--resize_width/--resize_height)");
    }
    const std::string& bytes = datum.data();
    if (!bytes.empty()) {
      if (bytes.size() != size) throw Error(what + ": pixel count does not match its shape");
      for (size_t k = 0; k < size; ++k) sum[k] += static_cast<uint8_t>(bytes[k]);
    } else {
      if (static_cast<size_t>(datum.float_data_size()) != size)
        throw Error(what + ": value count does not match its shape");
      for (size_t k = 0; k < size; ++k) sum[k] += datum.float_data(static_cast<int>(k));
    }
    if ((i + 1) % 10000 == 0) std::printf("Processed %zu files.\n", i + 1);
  }
  std::printf("Processed %zu files.\n", db.size());
  std::vector<float> mean(sum.size());
  for (size_t k = 0; k < sum.size(); ++k)
    mean[k] = static_cast<float>(sum[k] / static_cast<double>(db.size()));
  if (pos.size() == 2) {
    WriteBlobProtoBinary(pos[1], MeanBlobProto(channels, height, width, mean));
    std::printf("Write to %s\n", pos[1].c_str());
  }
  const size_t plane = static_cast<size_t>(height) * width;
  for (int c = 0; c < channels; ++c) {
    double s = 0;
    for (size_t k = 0; k < plane; ++k) s += mean[c * plane + k];
    std::printf("mean_value channel [%d]: %g\n", c, s / static_cast<double>(plane));
  }
  return 0;
}

RegisterCommand compute_image_mean_command(
    kName, "the mean image of an LMDB of Datum as mean.binaryproto (BVLC's compute_image_mean)",
    "usage: mpcaffe compute_image_mean [FLAGS] INPUT_DB [OUTPUT_FILE]\n"
    "  writes the per-pixel mean (1×C×H×W BlobProto, the mean_file of transform_param) to\n"
    "  OUTPUT_FILE and prints the per-channel means (transform_param's mean_value)\n"
    "  --backend=lmdb   the database format (only lmdb)\n",
    kFlags, RunComputeImageMean);

}  // namespace
}  // namespace mpcaffe::tools
