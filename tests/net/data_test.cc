// tests/net/data_test.cc — the LMDB Data layer (records, transform_param, wrap-around, errors)
// and LeNet trained end to end on a Fashion-MNIST subset (Debian dataset-fashion-mnist).
#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "layers/layer_registry.h"
#include "layers/lmdb_io.h"
#include "net/net.h"
#include "net/solver.h"
#include "proto/model_io.h"
#include "tests/testing/paths.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

std::string TempDir() {
  char dir[] = "/tmp/mpcaffe_data_XXXXXX";
  if (!mkdtemp(dir)) throw Error("mkdtemp failed");
  return dir;
}

/// Five 1×3×4 records: pixel i of record r is 10·r + i, label r.
std::string WriteTinyDb(const std::string& dir) {
  const std::string path = dir + "/tiny_lmdb";
  LmdbWriter w(path, 2);
  for (int r = 0; r < 5; ++r) {
    caffe::Datum d;
    d.set_channels(1), d.set_height(3), d.set_width(4), d.set_label(r);
    std::string bytes;
    for (int i = 0; i < 12; ++i) bytes.push_back(static_cast<char>(10 * r + i));
    d.set_data(bytes);
    char key[16];
    std::snprintf(key, sizeof key, "%08d", r);
    w.Put(key, d.SerializeAsString());
  }
  w.Finish();
  return path;
}

std::unique_ptr<Layer> MakeData(const std::string& text, caffe::Phase phase, Blob& data, Blob& label) {
  caffe::LayerParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p));
  p.set_phase(phase);
  auto layer = CreateLayer(p, Dev());
  layer->SetUp({}, {&data, &label});
  return layer;
}

TEST(DataLayer, ReadsRecordsWithScaleMeanAndWrapsAround) {
  const std::string dir = TempDir();
  const std::string db = WriteTinyDb(dir);
  Blob data(Dev(), DataType::kFloat32), label(Dev(), DataType::kFloat32);
  auto layer = MakeData("name: 'd' type: 'Data' data_param { source: '" + db +
                            "' batch_size: 3 backend: LMDB } transform_param { scale: 0.5 mean_value: 2 }",
                        caffe::TRAIN, data, label);
  EXPECT_EQ(data.shape(), (std::vector<int>{3, 1, 3, 4}));
  EXPECT_EQ(label.shape(), (std::vector<int>{3}));
  int record = 0;
  for (int batch = 0; batch < 3; ++batch) {  // 9 records from 5: wraps around
    layer->Forward({}, {&data, &label});
    const std::vector<float> v = data.ToFloat(), l = label.ToFloat();
    for (int n = 0; n < 3; ++n, ++record) {
      const int r = record % 5;
      EXPECT_EQ(l[n], r);
      for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(v[n * 12 + i], (10 * r + i - 2) * 0.5f) << r << " " << i;
    }
  }
  layer.reset();
  system(("rm -rf '" + dir + "'").c_str());
}

TEST(DataLayer, ReadsItsShardOfTheRecords) {
  const std::string dir = TempDir();
  const std::string db = WriteTinyDb(dir);  // records 0..4
  {
    LmdbReader r(db, {1, 2});  // records 1, 3, then 1 again
    std::vector<int> labels;
    for (int i = 0; i < 5; ++i) {
      caffe::Datum d;
      ASSERT_TRUE(d.ParseFromString(r.Next()));
      labels.push_back(d.label());
    }
    EXPECT_EQ(labels, (std::vector<int>{1, 3, 1, 3, 1}));
  }
  // The Data layer reads the process's shard (a data-parallel job sets it per rank).
  SetDataShard({2, 3});  // records 2, then 2 again (5 is past the end)
  Blob data(Dev(), DataType::kFloat32), label(Dev(), DataType::kFloat32);
  auto layer = MakeData("name: 'd' type: 'Data' data_param { source: '" + db +
                            "' batch_size: 3 backend: LMDB }",
                        caffe::TRAIN, data, label);
  SetDataShard({});
  layer->Forward({}, {&data, &label});
  EXPECT_EQ(label.ToFloat(), (std::vector<float>{2, 2, 2}));
  layer.reset();
  // A shard past the records is an error naming the database.
  try {
    LmdbReader r(db, {5, 6});
    ADD_FAILURE() << "no error for a shard without records";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("too few for 6 shards"), std::string::npos) << e.what();
  }
  system(("rm -rf '" + dir + "'").c_str());
}

TEST(DataLayer, CropsInTheCentreForTestAndMirrorsInTrain) {
  const std::string dir = TempDir();
  const std::string db = WriteTinyDb(dir);
  Blob data(Dev(), DataType::kFloat32), label(Dev(), DataType::kFloat32);
  auto test = MakeData("name: 'd' type: 'Data' data_param { source: '" + db +
                           "' batch_size: 1 backend: LMDB } transform_param { crop_size: 2 }",
                       caffe::TEST, data, label);
  EXPECT_EQ(data.shape(), (std::vector<int>{1, 1, 2, 2}));
  test->Forward({}, {&data, &label});
  EXPECT_EQ(data.ToFloat(), (std::vector<float>{1, 2, 5, 6}));  // rows 0-1, cols 1-2
  test.reset();
  auto train = MakeData("name: 'd' type: 'Data' data_param { source: '" + db +
                            "' batch_size: 1 backend: LMDB } transform_param { mirror: true }",
                        caffe::TRAIN, data, label);
  int flipped = 0;
  for (int k = 0; k < 20; ++k) {
    train->Forward({}, {&data, &label});
    const int r = static_cast<int>(label.ToFloat()[0]);
    const std::vector<float> v = data.ToFloat();
    const bool plain = v[0] == 10 * r, mirrored = v[0] == 10 * r + 3;
    EXPECT_TRUE(plain || mirrored) << v[0];
    if (mirrored) {
      ++flipped;
      EXPECT_EQ(v[3], 10 * r);
    }
  }
  EXPECT_GT(flipped, 2);
  EXPECT_LT(flipped, 18);
  train.reset();
  system(("rm -rf '" + dir + "'").c_str());
}

TEST(DataLayer, ErrorsNameTheSource) {
  Blob data(Dev(), DataType::kFloat32), label(Dev(), DataType::kFloat32);
  try {
    MakeData("name: 'd' type: 'Data' data_param { source: '/nonexistent/db' batch_size: 1 }",
             caffe::TRAIN, data, label);
    FAIL();
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/db"), std::string::npos);
  }
  const std::string dir = TempDir();  // an empty directory is no LMDB
  EXPECT_THROW(MakeData("name: 'd' type: 'Data' data_param { source: '" + dir +
                            "' batch_size: 1 backend: LMDB }", caffe::TRAIN, data, label),
               LayerError);
  rmdir(dir.c_str());
}

TEST(DataLayer, SyntheticDataReplacesImageDataLayersToo) {
  // Benchmarks without the images: an ImageData layer becomes an Input of its images' shape.
  caffe::NetParameter p;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "layer { name: 'img' type: 'ImageData' top: 'data' top: 'label' image_data_param { "
      "source: '/nonexistent/list.txt' batch_size: 2 new_height: 10 new_width: 12 is_color: false "
      "} transform_param { crop_size: 8 } }",
      &p));
  NetOptions o;
  o.synthetic_data = true;
  Net net(p, Dev(), o);
  EXPECT_EQ(net.blob("data").shape(), (std::vector<int>{2, 1, 8, 8}));
  EXPECT_EQ(net.blob("label").shape(), (std::vector<int>{2}));
  // Without synthetic data the missing list is an error naming it.
  try {
    Net real(p, Dev());
    ADD_FAILURE() << "no error for a missing image list";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/list.txt"), std::string::npos) << e.what();
  }
}

// MemoryData (memory_data_param's shape) and WindowData (3 × crop × crop) become Inputs too, so
// BVLC's nets with them time without arrays or a window file (mpcaffe time --synthetic).
TEST(DataLayer, SyntheticDataReplacesMemoryAndWindowData) {
  caffe::NetParameter p;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "layer { name: 'mem' type: 'MemoryData' top: 'a' top: 'la' memory_data_param { "
      "batch_size: 3 channels: 2 height: 4 width: 5 } } "
      "layer { name: 'win' type: 'WindowData' top: 'b' top: 'lb' window_data_param { "
      "source: '/nonexistent/windows.txt' batch_size: 2 } transform_param { crop_size: 6 } }",
      &p));
  NetOptions o;
  o.synthetic_data = true;
  Net net(p, Dev(), o);
  net.Forward();
  EXPECT_EQ(net.blob("a").shape(), (std::vector<int>{3, 2, 4, 5}));
  EXPECT_EQ(net.blob("la").shape(), (std::vector<int>{3}));
  EXPECT_EQ(net.blob("b").shape(), (std::vector<int>{2, 3, 6, 6}));
  try {
    Net real(p, Dev());
    ADD_FAILURE() << "no error for a missing window file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/windows.txt"), std::string::npos)
        << e.what();
  }
}

/// The bytes of a gzip file (through the gzip tool: the test binary does not link zlib).
std::string Gunzip(const std::string& path) {
  FILE* p = popen(("gzip -dc '" + path + "'").c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

void IdxToLmdb(const std::string& images, const std::string& labels, int count, const std::string& out) {
  const std::string im = Gunzip(images), lb = Gunzip(labels);
  ASSERT_GE(im.size(), 16u + 784u * count);
  ASSERT_GE(lb.size(), 8u + count);
  LmdbWriter w(out);
  for (int i = 0; i < count; ++i) {
    caffe::Datum d;
    d.set_channels(1), d.set_height(28), d.set_width(28);
    d.set_data(im.substr(16 + 784 * static_cast<size_t>(i), 784));
    d.set_label(static_cast<uint8_t>(lb[8 + i]));
    char key[16];
    std::snprintf(key, sizeof key, "%08d", i);
    w.Put(key, d.SerializeAsString());
  }
}

TEST(EndToEnd, LeNetLearnsFashionMnistSubset) {
  const std::string fm = "/usr/share/datasets/fashion-mnist/";
  const std::string shared = mpcaffe::test_support::SharedDir().string();
  if (access((fm + "train-images-idx3-ubyte.gz").c_str(), R_OK) != 0)
    GTEST_SKIP() << "Debian package dataset-fashion-mnist is not installed";
  const std::string dir = TempDir();
  IdxToLmdb(fm + "train-images-idx3-ubyte.gz", fm + "train-labels-idx1-ubyte.gz", 2000, dir + "/train");
  IdxToLmdb(fm + "t10k-images-idx3-ubyte.gz", fm + "t10k-labels-idx1-ubyte.gz", 500, dir + "/test");
  caffe::NetParameter net = ReadNetParameterText(shared + "/models/bvlc/mnist/lenet_train_test.prototxt");
  for (auto& l : *net.mutable_layer())
    if (l.type() == "Data")
      l.mutable_data_param()->set_source(dir + (l.data_param().source().find("train") != std::string::npos
                                                    ? "/train" : "/test"));
  caffe::SolverParameter sp = ReadSolverText(shared + "/models/bvlc/mnist/lenet_solver.prototxt");
  sp.clear_net();
  *sp.mutable_net_param() = net;
  sp.set_max_iter(250);
  sp.set_test_iter(0, 5);  // 5 × 100 = the 500 test images
  sp.set_test_interval(250);
  sp.set_test_initialization(false);
  sp.set_snapshot(0);
  sp.set_snapshot_after_train(false);
  sp.set_display(0);
  Solver solver(sp, Dev());
  solver.set_log(nullptr);
  solver.Solve();
  const std::vector<std::string> names = solver.TestOutputNames(0);
  const std::vector<float> scores = solver.Test(0);
  ASSERT_EQ(names[0], "accuracy");
  EXPECT_GE(scores[0], 0.70f) << "test accuracy after 250 iterations on 2000 images";
  system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace
}  // namespace mpcaffe
