// tests/layers/memory_window_data_test.cc — the MemoryData layer (Reset, AddDatumVector with
// transform_param, batches wrapping around, BVLC's errors) and the WindowData layer (window file,
// fg / bg sampling, warp and square cuts with context_pad, mirror, mean; errors naming the file
// and line) against plain C++ references, and a small net of each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "layers/blob.h"
#include "layers/image_io.h"
#include "layers/layer_registry.h"
#include "layers/memory_data_layer.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tests/testing/net_support.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

caffe::LayerParameter Param(const std::string& text, caffe::Phase phase = caffe::TEST) {
  caffe::LayerParameter p;
  ParseProtoFromText(text, "<test>", &p);
  if (p.name().empty()) p.set_name("L");
  p.set_phase(phase);
  return p;
}

struct Source {
  std::unique_ptr<Layer> layer;
  Blob data{Dev(), DataType::kFloat32, std::vector<int>{}}, label{Dev(), DataType::kFloat32, std::vector<int>{}};
  std::vector<Blob*> top{&data, &label};
  explicit Source(const caffe::LayerParameter& p) : layer(CreateLayer(p, Dev())) {}
  void SetUp() { layer->SetUp({}, top); }
  void Forward() { layer->Forward({}, top); }
};

using test_support::ErrorOf;

TEST(MemoryData, ResetServesBatchesAndWrapsAround) {
  Source s(Param("name: 'mem' type: 'MemoryData' memory_data_param { batch_size: 2 channels: 1 "
                 "height: 2 width: 1 }"));
  s.SetUp();
  EXPECT_EQ(s.data.shape(), (std::vector<int>{2, 1, 2, 1}));
  EXPECT_NE(ErrorOf([&] { s.Forward(); }).find("set_input_arrays"), std::string::npos);
  auto& mem = dynamic_cast<MemoryDataLayer&>(*s.layer);
  std::vector<float> data(8), labels{10, 11, 12, 13};
  for (int i = 0; i < 8; ++i) data[i] = 0.5f * i;
  EXPECT_NE(ErrorOf([&] { mem.Reset(data.data(), labels.data(), 3); }).find("multiple of the batch"),
            std::string::npos);
  mem.Reset(data.data(), labels.data(), 4);
  for (int pass = 0; pass < 3; ++pass) {
    s.Forward();
    const int first = (pass % 2) * 2;
    EXPECT_EQ(s.data.ToFloat(), std::vector<float>(data.begin() + first * 2, data.begin() + first * 2 + 4));
    EXPECT_EQ(s.label.ToFloat(), std::vector<float>(labels.begin() + first, labels.begin() + first + 2));
  }
  Source bad(Param("name: 'mem' type: 'MemoryData' memory_data_param { batch_size: 2 channels: 1 "
                   "height: 2 }"));
  const std::string m = ErrorOf([&] { bad.SetUp(); });
  EXPECT_NE(m.find("layer 'mem' (MemoryData)"), std::string::npos) << m;
  EXPECT_NE(m.find("memory_data_param.width"), std::string::npos) << m;
}

// AddDatumVector applies transform_param: a centre crop of 3x3 records to 2x2, mean and scale.
TEST(MemoryData, AddDatumVectorTransforms) {
  Source s(Param("type: 'MemoryData' memory_data_param { batch_size: 1 channels: 1 height: 2 "
                 "width: 2 } transform_param { crop_size: 2 mean_value: 1 scale: 0.5 }"));
  s.SetUp();
  auto& mem = dynamic_cast<MemoryDataLayer&>(*s.layer);
  std::vector<caffe::Datum> records(2);
  for (int r = 0; r < 2; ++r) {
    records[r].set_channels(1), records[r].set_height(3), records[r].set_width(3);
    records[r].set_label(r + 7);
    std::string bytes;
    for (int i = 0; i < 9; ++i) bytes.push_back(char(10 * r + i));
    records[r].set_data(bytes);
  }
  mem.AddDatumVector(records);
  EXPECT_NE(ErrorOf([&] { mem.AddDatumVector(records); }).find("served"), std::string::npos);
  s.Forward();
  // TEST phase: centre crop (offset (3 − 2) / 2 = 0): pixels 0 1 3 4.
  EXPECT_EQ(s.data.ToFloat(), (std::vector<float>{-0.5f, 0.0f, 1.0f, 1.5f}));
  EXPECT_EQ(s.label.ToFloat(), (std::vector<float>{7}));
  s.Forward();
  EXPECT_EQ(s.data.ToFloat(), (std::vector<float>{4.5f, 5.0f, 6.0f, 6.5f}));
  mem.AddDatumVector(records);  // both served: new records are accepted
}

// ---- WindowData ---------------------------------------------------------------------------------

/// A temporary folder with two PNG images and a window file.
struct WindowFiles {
  std::string dir;
  Image a{6, 8, 3}, b{4, 4, 3};
  WindowFiles() {
    char templ[] = "/tmp/mpcaffe_window_XXXXXX";
    dir = mkdtemp(templ);
    for (int y = 0; y < a.height; ++y)
      for (int x = 0; x < a.width; ++x)
        for (int c = 0; c < 3; ++c) a.at(y, x, c) = uint8_t(10 * y + x + 50 * c);
    for (int y = 0; y < b.height; ++y)
      for (int x = 0; x < b.width; ++x)
        for (int c = 0; c < 3; ++c) b.at(y, x, c) = uint8_t(200 - 7 * y - x - c);
    WriteImage(dir + "/a.png", a);
    WriteImage(dir + "/b.png", b);
  }
  ~WindowFiles() {
    for (const char* f : {"a.png", "b.png", "bad.png", "windows.txt"}) std::remove((dir + "/" + f).c_str());
    rmdir(dir.c_str());
  }
  std::string Write(const std::string& text) const {
    std::ofstream(dir + "/windows.txt") << text;
    return dir + "/windows.txt";
  }
  /// The layer's parameters for the window file `text`.
  caffe::LayerParameter Params(const std::string& text, const std::string& extra,
                              caffe::Phase phase = caffe::TEST) const {
    return Param("name: 'win' type: 'WindowData' window_data_param { source: '" + Write(text) +
                     "' root_folder: '" + dir + "/' batch_size: 2 " +
                     (extra.find("fg_fraction") == std::string::npos ? "fg_fraction: 0.5 " : "") + extra +
                     " } transform_param { crop_size: 4 }",
                 phase);
  }
};

// The file: image a with a foreground window (class 3) and a window between the thresholds
// (dropped); image b with a background window (class 5, overlap 0.1: class 0).
const char* kWindows =
    "# 0\na.png\n3 6 8\n2\n3 0.9 1 1 6 4\n2 0.4 0 0 2 2\n# 1\nb.png\n3 4 4\n1\n5 0.1 0 0 3 3\n";

/// BVLC's warp cut without context: the window resized to 4x4, CHW, minus `mean`, flipped.
std::vector<float> Warp(const Image& image, int x1, int y1, int x2, int y2, bool flip, float mean) {
  Image roi(y2 - y1 + 1, x2 - x1 + 1, 3);
  for (int y = 0; y < roi.height; ++y)
    for (int x = 0; x < roi.width; ++x)
      for (int c = 0; c < 3; ++c) roi.at(y, x, c) = image.at(y1 + y, x1 + x, c);
  const Image r = ResizeImage(roi, 4, 4);
  std::vector<float> out;
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x) out.push_back(r.at(y, flip ? 3 - x : x, c) - mean);
  return out;
}

TEST(WindowData, SamplesBackgroundThenForegroundWarped) {
  WindowFiles f;
  auto p = f.Params(kWindows, "fg_threshold: 0.5 bg_threshold: 0.3");
  p.mutable_transform_param()->add_mean_value(2);
  Source s(p);
  s.SetUp();
  ASSERT_EQ(s.data.shape(), (std::vector<int>{2, 3, 4, 4}));
  s.Forward();
  std::vector<float> want = Warp(f.b, 0, 0, 3, 3, false, 2);
  const std::vector<float> fg = Warp(f.a, 1, 1, 6, 4, false, 2);
  want.insert(want.end(), fg.begin(), fg.end());
  EXPECT_EQ(s.data.ToFloat(), want);
  EXPECT_EQ(s.label.ToFloat(), (std::vector<float>{0, 3}));
}

// Mirror (TRAIN) gives each window as it is or flipped; context_pad in square mode grows the
// window past the image's edge, and the part outside stays 0.
TEST(WindowData, MirrorAndContextPad) {
  WindowFiles f;
  Source m(f.Params(kWindows, "fg_threshold: 0.5 bg_threshold: 0.3 mirror: true", caffe::TRAIN));
  m.SetUp();
  int flipped = 0;
  for (int pass = 0; pass < 6; ++pass) {
    m.Forward();
    const auto y = m.data.ToFloat();
    const std::vector<float> fg(y.begin() + 48, y.end());
    const bool plain = fg == Warp(f.a, 1, 1, 6, 4, false, 0);
    flipped += fg == Warp(f.a, 1, 1, 6, 4, true, 0);
    EXPECT_TRUE(plain || fg == Warp(f.a, 1, 1, 6, 4, true, 0)) << pass;
  }
  EXPECT_GT(flipped, 0);
  Source c(f.Params(kWindows, "fg_threshold: 0.5 bg_threshold: 0.3 context_pad: 1 "
                             "crop_mode: 'square'"));
  c.SetUp();
  c.Forward();
  const auto y = c.data.ToFloat();
  // The background window of b covers all of b: grown by the context, the border of the 4x4
  // output lies outside the image and stays 0; the inside holds pixels.
  for (int ch = 0; ch < 3; ++ch)
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(y[ch * 16 + i], 0.0f) << "top row, channel " << ch;
      EXPECT_EQ(y[ch * 16 + i * 4], 0.0f) << "left column, channel " << ch;
    }
  EXPECT_GT(y[5], 0.0f);
}

TEST(WindowData, ErrorsNameFileLineAndField) {
  WindowFiles f;
  struct Case {
    std::string file, extra, want;
  };
  const Case cases[] = {
      {"# 0\na.png\n3 6 x\n", "", "line 3"},
      {"# 0\na.png\n3 6 8\n1\n3 0.9 1 1 9 4\n", "", "line 5"},
      {"# 0\na.png\n3 6 8\n1\n0 0.9 1 1 2 2\n", "", "class above 0"},
      {"# 1\na.png\n3 6 8\n0\n", "", "line 1"},
      {"# 0\na.png\n3 6 8\n2\n3 0.9 1 1 6 4\n", "", "the file ends"},
      {kWindows, "crop_mode: 'round'", "window_data_param.crop_mode"},
      {kWindows, "fg_fraction: 2", "window_data_param.fg_fraction"},
  };
  for (const Case& c : cases) {
    Source s(f.Params(c.file, c.extra));
    const std::string m = ErrorOf([&] { s.SetUp(); });
    EXPECT_NE(m.find("layer 'win' (WindowData)"), std::string::npos) << m;
    EXPECT_NE(m.find(c.want), std::string::npos) << c.file << " → " << m;
  }
  // A corrupt image is reported with the window file's line naming it.
  std::ofstream(f.dir + "/bad.png") << "not a png";
  Source s(f.Params("# 0\nbad.png\n3 6 8\n1\n3 0.9 1 1 5 4\n", "fg_fraction: 1"));
  s.SetUp();
  const std::string m = ErrorOf([&] { s.Forward(); });
  EXPECT_NE(m.find("line 2"), std::string::npos) << m;
  EXPECT_NE(m.find("bad.png"), std::string::npos) << m;
}

// The data family in nets: MemoryData → InnerProduct → loss trains; WindowData → Convolution runs.
TEST(DataLayerNets, MemoryDataAndWindowDataNets) {
  caffe::NetParameter param;
  ParseProtoFromText(R"(
    layer { name: "mem" type: "MemoryData" top: "data" top: "label"
            memory_data_param { batch_size: 2 channels: 1 height: 1 width: 3 } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
            inner_product_param { num_output: 2 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" })",
                     "<test>", &param);
  param.mutable_state()->set_phase(caffe::TRAIN);
  Net net(param, Dev());
  auto& mem = dynamic_cast<MemoryDataLayer&>(net.layer("mem"));
  const std::vector<float> data{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0}, labels{0, 1, 1, 0};
  mem.Reset(data.data(), labels.data(), 4);
  EXPECT_GT(net.Forward(), 0.0f);
  net.Backward();
  EXPECT_EQ(net.blob("label").ToFloat(), (std::vector<float>{0, 1}));
  net.Forward();
  EXPECT_EQ(net.blob("label").ToFloat(), (std::vector<float>{1, 0}));

  WindowFiles f;
  caffe::NetParameter wnet;
  ParseProtoFromText(R"(
    layer { name: "win" type: "WindowData" top: "data" top: "label"
            window_data_param { source: ")" + f.Write(kWindows) + R"(" root_folder: ")" + f.dir +
                         R"(/" batch_size: 2 fg_threshold: 0.5 bg_threshold: 0.3 }
            transform_param { crop_size: 4 scale: 0.00390625 } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 2 kernel_size: 3 weight_filler { type: "xavier" } } })",
                     "<test>", &wnet);
  Net w(wnet, Dev());
  w.Forward();
  EXPECT_EQ(w.blob("conv").shape(), (std::vector<int>{2, 2, 2, 2}));
  for (float v : w.blob("data").ToFloat()) EXPECT_LE(v, 1.0f);
}

}  // namespace
}  // namespace mpcaffe
