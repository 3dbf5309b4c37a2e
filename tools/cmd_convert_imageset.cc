// tools/cmd_convert_imageset.cc — `mpcaffe convert_imageset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME`,
// BVLC Caffe's tool with its flags (gflags spellings accepted): the images a list file names
// ("path label" per line, paths appended to ROOTFOLDER/) into an LMDB of caffe.Datum keyed
// "%08d_<path>", raw BGR pixels or (--encoded) the compressed bytes. Images that cannot be
// read are skipped, as BVLC does, and named at the end with their count.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "layers/image_io.h"
#include "layers/lmdb_io.h"
#include "tools/command.h"

namespace mpcaffe::tools {
namespace {

const CommandFlags kFlags{{"--backend", "--resize_width", "--resize_height", "--encode_type"},
                          {"--gray", "--shuffle", "--check_size", "--encoded"},
                          3,
                          /*gflags=*/true};

const char kName[] = "convert_imageset";

int NumberFlag(const std::vector<std::string>& args, const std::string& flag, int* out) {
  const std::string v = FlagValue(args, flag, "0");
  size_t used = 0;
  try {
    *out = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || *out < 0)
    return UsageError(kName,
                      flag + " needs a number of pixels (0: keep the size), got '" + v + "'");
  return 0;
}

int RunConvertImageset(const std::vector<std::string>& given) {
  const std::vector<std::string> args = GflagsArguments(kFlags, given);
  const std::vector<std::string> pos = ParseArguments(kFlags, args).operands;
  if (pos.size() != 3) return UsageError(kName, "needs ROOTFOLDER/, LISTFILE and DB_NAME");
  const std::string backend = FlagValue(args, "--backend", "lmdb");
  if (backend != "lmdb")
    return UsageError(kName, "--backend=" + backend +
                                 ": only lmdb is supported (mpcaffe reads "
                                 "and writes LMDB databases only)");
  int resize_width = 0, resize_height = 0;
  if (int rc = NumberFlag(args, "--resize_width", &resize_width)) return rc;
  if (int rc = NumberFlag(args, "--resize_height", &resize_height)) return rc;
  const bool is_color = !HasFlag(args, "--gray"), check_size = HasFlag(args, "--check_size");
  const bool encoded = HasFlag(args, "--encoded");
  std::string encode_type = FlagValue(args, "--encode_type");
  for (char& c : encode_type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));

  const std::string& root = pos[0];
  const std::string& list = pos[1];
  std::vector<std::pair<std::string, int>> lines;
  for (const ListedImage& item : ReadImageList(list, true)) lines.emplace_back(item.path, item.label);
  if (HasFlag(args, "--shuffle")) {
    std::printf("Shuffling data\n");
    std::mt19937 rng(std::random_device{}());
    std::shuffle(lines.begin(), lines.end(), rng);
  }
  std::printf("A total of %zu images.\n", lines.size());
  if (encoded && encode_type.empty())
    std::printf("Encoding each image in its own format (its file name's extension)\n");

  LmdbWriter db(pos[2]);
  std::vector<std::string> skipped;
  size_t count = 0, data_size = 0;
  std::string value;
  for (size_t id = 0; id < lines.size(); ++id) {
    const std::string& name = lines[id].first;
    std::string enc = encoded ? encode_type : "";
    if (encoded && enc.empty()) {
      const size_t dot = name.rfind('.');
      enc = dot == std::string::npos ? "" : name.substr(dot + 1);
      for (char& c : enc) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (enc.empty()) enc = "png";  // no extension to guess from: a lossless format
    }
    caffe::Datum datum;
    try {
      datum = ReadImageToDatum(root + name, lines[id].second, resize_height, resize_width, is_color,
                               enc);
    } catch (const ImageError& e) {
      std::fprintf(stderr, "mpcaffe %s: skipping %s\n", kName, e.what());
      skipped.push_back(e.what());
      continue;
    }
    if (check_size && !datum.encoded()) {
      if (count == 0) {
        data_size = datum.data().size();
      } else if (datum.data().size() != data_size) {
        throw Error("--check_size: '" + root + name + "' has " +
                    std::to_string(datum.data().size()) + " bytes of pixels (" +
                    std::to_string(datum.channels()) + "x" + std::to_string(datum.height()) + "x" +
                    std::to_string(datum.width()) + "), the first image " +
                    std::to_string(data_size));
      }
    }
    char key[32];
    std::snprintf(key, sizeof key, "%08zu", id);
    datum.SerializeToString(&value);
    db.Put(std::string(key) + "_" + name, value);
    if (++count % 1000 == 0) std::printf("Processed %zu files.\n", count);
  }
  db.Finish();
  std::printf("Processed %zu files.\n", count);
  if (!skipped.empty()) {
    std::printf("Skipped %zu unreadable file%s:\n", skipped.size(), skipped.size() == 1 ? "" : "s");
    for (const std::string& s : skipped) std::printf("  %s\n", s.c_str());
  }
  if (count == 0) {
    std::fprintf(stderr, "mpcaffe %s: no image of '%s' could be read; '%s' is empty\n", kName,
                 list.c_str(), pos[2].c_str());
    return 1;
  }
  return 0;
}

RegisterCommand convert_imageset_command(
    kName, "images named in a list file into an LMDB of Datum (BVLC's convert_imageset)",
    "usage: mpcaffe convert_imageset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME\n"
    "  LISTFILE lines are \"<path> <label>\"; each path is appended to ROOTFOLDER/.\n"
    "  --gray                 read the images as one gray channel (default: 3, BGR)\n"
    "  --shuffle              shuffle the list before converting\n"
    "  --backend=lmdb         the database format (only lmdb)\n"
    "  --resize_width=W --resize_height=H  resize to H×W (bilinear; both, or 0: keep)\n"
    "  --check_size           fail when the raw images differ in size\n"
    "  --encoded              store the compressed image (encoded Datum) instead of pixels\n"
    "  --encode_type=jpg|png  the format of --encoded (default: each file's own)\n"
    "  gflags spellings work too: -gray, -shuffle=true, --resize_width 256\n",
    kFlags, RunConvertImageset);

}  // namespace
}  // namespace mpcaffe::tools
