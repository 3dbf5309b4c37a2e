// tools/cmd_convert_mnist.cc — `mpcaffe convert_mnist <images-idx> <labels-idx> <out-lmdb>
// [--limit N]`: MNIST-format IDX files (plain or .gz, e.g. Fashion-MNIST) into an LMDB of
// caffe.Datum records (1×rows×cols bytes and the label) keyed "%08d", as BVLC's tool writes.
#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "layers/lmdb_io.h"
#include "proto/caffe.pb.h"
#include "tools/command.h"

namespace mpcaffe::tools {
namespace {

/// Reads a whole (optionally gzip-compressed) file; gzread passes plain files through.
std::vector<uint8_t> ReadMaybeGz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error("cannot open '" + path + "'");
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  const bool failed = n < 0;
  gzclose(f);
  if (failed) throw Error("'" + path + "' is not a readable (gzip) file");
  return out;
}

uint32_t BigEndian(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) | b[at + 3];
}

const CommandFlags kFlags{{"--limit"}, {}, 3};

int Usage(const char* why) { return UsageError("convert_mnist", why); }

int RunConvert(const std::vector<std::string>& args) {
  const std::vector<std::string> pos = ParseArguments(kFlags, args).operands;
  if (pos.size() != 3) return Usage("needs an image file, a label file and an output path");
  long limit = -1;
  try {
    const std::string l = FlagValue(args, "--limit");
    if (!l.empty()) limit = std::stol(l);
  } catch (const std::exception&) {
    return Usage("--limit needs a number");
  }
  try {
    const std::vector<uint8_t> images = ReadMaybeGz(pos[0]), labels = ReadMaybeGz(pos[1]);
    if (images.size() < 16 || BigEndian(images, 0) != 2051)
      throw Error("'" + pos[0] + "' is not an IDX image file (magic 2051)");
    if (labels.size() < 8 || BigEndian(labels, 0) != 2049)
      throw Error("'" + pos[1] + "' is not an IDX label file (magic 2049)");
    const uint32_t count = BigEndian(images, 4), rows = BigEndian(images, 8), cols = BigEndian(images, 12);
    if (BigEndian(labels, 4) != count)
      throw Error("'" + pos[0] + "' has " + std::to_string(count) + " images, '" + pos[1] + "' " +
                  std::to_string(BigEndian(labels, 4)) + " labels");
    const size_t plane = static_cast<size_t>(rows) * cols;
    if (images.size() < 16 + plane * count || labels.size() < 8 + size_t{count})
      throw Error("'" + pos[0] + "' or '" + pos[1] + "' is truncated");
    const size_t n = limit >= 0 && static_cast<size_t>(limit) < count ? static_cast<size_t>(limit) : count;
    LmdbWriter db(pos[2]);
    caffe::Datum datum;
    datum.set_channels(1);
    datum.set_height(static_cast<int>(rows));
    datum.set_width(static_cast<int>(cols));
    std::string value;
    char key[16];
    for (size_t i = 0; i < n; ++i) {
      datum.set_data(images.data() + 16 + i * plane, plane);
      datum.set_label(labels[8 + i]);
      datum.SerializeToString(&value);
      std::snprintf(key, sizeof key, "%08zu", i);
      db.Put(key, value);
    }
    db.Finish();
    std::printf("Processed %zu files (%ux%u) into %s\n", n, rows, cols, pos[2].c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe convert_mnist: %s\n", e.what());
    return 1;
  }
}

RegisterCommand convert_command(
    "convert_mnist", "MNIST/Fashion-MNIST IDX files (.gz ok) into an LMDB of Datum",
    "usage: mpcaffe convert_mnist <images-idx[.gz]> <labels-idx[.gz]> <out-lmdb> [--limit N]\n"
    "  --limit  the first N images only\n",
    kFlags, RunConvert);

}  // namespace
}  // namespace mpcaffe::tools
