// tests/tools/images_test.cc — `mpcaffe convert_imageset` and `mpcaffe compute_image_mean` run as
// a user runs them (the built command, BVLC's flag spellings) on tiny pictures written with
// OpenCV: the LMDB keys and pixels (raw and encoded) read back through the Data layer, the mean
// against one computed here, damaged files skipped and named, and the refused backend.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <lmdb.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "layers/image_io.h"
#include "layers/layer_registry.h"
#include "proto/model_io.h"
#include "tests/tools/run_mpcaffe.h"

namespace mpcaffe {
namespace {

using test_support::CommandResult;
using test_support::RunMpcaffe;

const char kEnv[] = "MPCAFFE_CACHE=off";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// The keys of an LMDB database, in order.
std::vector<std::string> Keys(const std::string& path) {
  std::vector<std::string> keys;
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  MDB_cursor* cursor = nullptr;
  EXPECT_EQ(mdb_env_create(&env), 0);
  EXPECT_EQ(mdb_env_open(env, path.c_str(), MDB_RDONLY, 0664), 0) << path;
  EXPECT_EQ(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), 0);
  EXPECT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  EXPECT_EQ(mdb_cursor_open(txn, dbi, &cursor), 0);
  MDB_val k, v;
  for (int op = MDB_FIRST; mdb_cursor_get(cursor, &k, &v, static_cast<MDB_cursor_op>(op)) == 0;
       op = MDB_NEXT)
    keys.emplace_back(static_cast<const char*>(k.mv_data), k.mv_size);
  mdb_cursor_close(cursor);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  return keys;
}

class ImageCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/mpcaffe_imageset_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    std::filesystem::create_directory(dir_ + "/img");
    // Three readable pictures of different sizes (a JPEG, a PNG, a gray PNG) and three that are
    // not: a truncated JPEG, a text file, a missing file.
    for (int i = 0; i < 3; ++i) {
      // Smooth gradients (JPEG keeps them close), each channel its own.
      Image m(8 + 2 * i, 10 + i, i == 2 ? 1 : 3);
      for (int y = 0; y < m.height; ++y)
        for (int x = 0; x < m.width; ++x)
          for (int k = 0; k < m.channels; ++k)
            m.at(y, x, k) = static_cast<uint8_t>(30 + 60 * k + 9 * y + 5 * x + 13 * i);
      WriteImage(dir_ + "/img/" + kGood[i], m);
    }
    const std::string jpg = ReadFileBytes(dir_ + "/img/" + kGood[0]);
    std::ofstream(dir_ + "/img/cut.jpg", std::ios::binary) << jpg.substr(0, jpg.size() / 2);
    std::ofstream(dir_ + "/img/notes.txt") << "not a picture\n";
    std::ofstream list(dir_ + "/list.txt");
    list << kGood[0] << " 0\ncut.jpg 1\n"
         << kGood[1] << " 2\nnotes.txt 3\nmissing.png 4\n"
         << kGood[2] << " 5\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// The pictures as the Data layer gives them (N×C×H×W floats) and their labels.
  std::pair<std::vector<float>, std::vector<float>> ReadDb(const std::string& db, int n,
                                                           const std::string& transform = "") {
    caffe::LayerParameter p;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
        "name: 'd' type: 'Data' data_param { source: '" + db +
            "' batch_size: " + std::to_string(n) + " backend: LMDB } " + transform,
        &p));
    p.set_phase(caffe::TEST);
    Blob data(DefaultDevice(), DataType::kFloat32), label(DefaultDevice(), DataType::kFloat32);
    auto layer = CreateLayer(p, DefaultDevice());
    layer->SetUp({}, {&data, &label});
    layer->Forward({}, {&data, &label});
    return {data.ToFloat(), label.ToFloat()};
  }

  /// The CHW floats of a picture read as convert_imageset reads it (color, resized to 4×6).
  std::vector<float> Expected(const std::string& name) {
    const Image m = ReadImage(dir_ + "/img/" + name, 4, 6, true);
    caffe::Datum d;
    ImageToDatum(m, &d);
    std::vector<float> v;
    for (char c : d.data()) v.push_back(static_cast<uint8_t>(c));
    return v;
  }

  const std::vector<std::string> kGood = {"a.jpg", "b.png", "gray.png"};
  std::string dir_;
};

TEST_F(ImageCommands, ConvertSkipsDamagedFilesAndTheDataLayerReadsThePixels) {
  // gflags' spellings: one dash, --flag value, --flag=value.
  const CommandResult r = RunMpcaffe(
      "convert_imageset -resize_height=4 --resize_width 6 "
      "--check_size '" +
          dir_ + "/img/' '" + dir_ + "/list.txt' '" + dir_ + "/raw_lmdb' 2>&1",
      kEnv);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(Contains(r.out, "Processed 3 files.")) << r.out;
  EXPECT_TRUE(Contains(r.out, "Skipped 3 unreadable files:")) << r.out;
  EXPECT_TRUE(Contains(r.out, "cut.jpg': truncated JPEG")) << r.out;
  EXPECT_TRUE(Contains(r.out, "notes.txt': not an image")) << r.out;
  EXPECT_TRUE(Contains(r.out, "missing.png': no such file")) << r.out;
  // BVLC's keys: the line's index in the (unshuffled) list and its path.
  EXPECT_EQ(Keys(dir_ + "/raw_lmdb"),
            (std::vector<std::string>{"00000000_a.jpg", "00000002_b.png", "00000005_gray.png"}));
  const auto [data, labels] = ReadDb(dir_ + "/raw_lmdb", 3);
  EXPECT_EQ(labels, (std::vector<float>{0, 2, 5}));
  const size_t size = 3 * 4 * 6;
  ASSERT_EQ(data.size(), 3 * size);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(std::vector<float>(data.begin() + i * size, data.begin() + (i + 1) * size),
              Expected(kGood[i]))
        << kGood[i];

  // Encoded (PNG, lossless): the Data layer decodes the records to the same pixels.
  const CommandResult e = RunMpcaffe(
      "convert_imageset --encoded=true -encode_type png "
      "--resize_height=4 --resize_width=6 '" +
          dir_ + "/img/' '" + dir_ + "/list.txt' '" + dir_ + "/enc_lmdb' 2>&1",
      kEnv);
  ASSERT_EQ(e.status, 0) << e.out;
  EXPECT_EQ(ReadDb(dir_ + "/enc_lmdb", 3).first, data);

  // compute_image_mean: the per-pixel mean, from the raw and from the encoded database alike.
  std::vector<float> want(size, 0.0f);
  for (int i = 0; i < 3; ++i)
    for (size_t k = 0; k < size; ++k) want[k] += data[i * size + k] / 3.0f;
  for (const char* db : {"raw_lmdb", "enc_lmdb"}) {
    const std::string out = dir_ + "/" + db + ".binaryproto";
    const CommandResult m = RunMpcaffe(
        "compute_image_mean -backend=lmdb '" + dir_ + "/" + db + "' '" + out + "' 2>&1", kEnv);
    ASSERT_EQ(m.status, 0) << m.out;
    EXPECT_TRUE(Contains(m.out, "mean_value channel [2]:")) << m.out;
    const caffe::BlobProto mean = ReadBlobProtoBinary(out);
    EXPECT_EQ(mean.num(), 1);
    EXPECT_EQ(mean.channels(), 3);
    EXPECT_EQ(mean.height(), 4);
    EXPECT_EQ(mean.width(), 6);
    ASSERT_EQ(mean.data_size(), static_cast<int>(size));
    for (size_t k = 0; k < size; ++k)
      EXPECT_NEAR(mean.data(static_cast<int>(k)), want[k], 1e-4) << k;
  }
  // The mean file as transform_param.mean_file.
  const auto centred = ReadDb(dir_ + "/raw_lmdb", 3,
                              "transform_param { mean_file: '" + dir_ + "/raw_lmdb.binaryproto' }");
  for (size_t k = 0; k < size; ++k) EXPECT_NEAR(centred.first[k], data[k] - want[k], 1e-4);
}

TEST_F(ImageCommands, GrayShuffleAndRefusedArguments) {
  const CommandResult g = RunMpcaffe(
      "convert_imageset --gray -shuffle=true --resize_height=4 "
      "--resize_width=6 '" +
          dir_ + "/img/' '" + dir_ + "/list.txt' '" + dir_ + "/gray_lmdb' 2>&1",
      kEnv);
  ASSERT_EQ(g.status, 0) << g.out;
  const auto [data, labels] = ReadDb(dir_ + "/gray_lmdb", 3);
  EXPECT_EQ(data.size(), 3u * 1 * 4 * 6);  // one channel
  std::vector<float> sorted = labels;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<float>{0, 2, 5}));

  const CommandResult leveldb =
      RunMpcaffe("convert_imageset --backend=leveldb '" + dir_ + "/img/' '" + dir_ +
                     "/list.txt' '" + dir_ + "/x' 2>&1",
                 kEnv);
  EXPECT_EQ(leveldb.status, 2) << leveldb.out;
  EXPECT_TRUE(Contains(leveldb.out, "only lmdb is supported")) << leveldb.out;
  const CommandResult operands = RunMpcaffe("convert_imageset '" + dir_ + "/img/' 2>&1", kEnv);
  EXPECT_EQ(operands.status, 2) << operands.out;
  EXPECT_TRUE(Contains(operands.out, "usage: mpcaffe convert_imageset")) << operands.out;
  const CommandResult absent = RunMpcaffe(
      "convert_imageset '" + dir_ + "/img/' '" + dir_ + "/absent.txt' '" + dir_ + "/y' 2>&1", kEnv);
  EXPECT_NE(absent.status, 0);
  EXPECT_TRUE(Contains(absent.out, "absent.txt' cannot be opened")) << absent.out;
  const CommandResult mean = RunMpcaffe("compute_image_mean '" + dir_ + "/nothing' 2>&1", kEnv);
  EXPECT_NE(mean.status, 0);
  EXPECT_TRUE(Contains(mean.out, "nothing")) << mean.out;
}

// OpenCV is opened as a plugin after the OpenCL drivers (layers/image_codec.h): a linked OpenCV
// made Intel's CPU runtime vanish from every mpcaffe process, silently. `devices --verbose` loads
// the codec before it lists the devices; it must list what this suite (no OpenCV in it) sees.
TEST(ImageCodec, LoadingItKeepsEveryDeviceAndAMissingPluginIsNamed) {
  const CommandResult r = RunMpcaffe("devices --verbose 2>&1", kEnv);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(Contains(r.out, "images: OpenCV ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "libmpcaffe_image_codec.so")) << r.out;
  const CommandResult j = RunMpcaffe("devices --json", kEnv);
  ASSERT_EQ(j.status, 0) << j.out;
  for (Device* d : DeviceList())
    EXPECT_TRUE(Contains(j.out, "\"implementation\": \"" + d->info().implementation + "\"") &&
                Contains(r.out, d->info().name.substr(0, 34)))
        << d->info().implementation << " " << d->info().name << " is missing from\n"
        << r.out;
  // A plugin that is not there: the file and what to do are named (every image read fails with
  // the same message).
  char dir[] = "/tmp/mpcaffe_codec_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string missing = std::string(dir) + "/libmpcaffe_image_codec.so";
  const CommandResult v = RunMpcaffe("devices --verbose 2>&1",
                                     std::string(kEnv) + " MPCAFFE_IMAGE_CODEC='" + missing + "'");
  EXPECT_EQ(v.status, 0) << v.out;
  EXPECT_TRUE(Contains(v.out, "images: cannot be decoded")) << v.out;
  EXPECT_TRUE(Contains(v.out, missing + ": no such file")) << v.out;
  EXPECT_TRUE(Contains(v.out, "MPCAFFE_IMAGE_CODEC")) << v.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mpcaffe
