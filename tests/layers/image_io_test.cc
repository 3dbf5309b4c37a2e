// tests/layers/image_io_test.cc — images as BVLC Caffe reads them (layers/image_io.h): BGR and
// gray pixels, resizing, encoded Datum records, errors naming damaged files; the ImageData layer
// (list file, labels, transform_param, mean_file) and the Data layer on encoded records. Tiny
// pictures written through the codec plugin (WriteImage, PNG is lossless) into a temporary
// folder; resizing is checked against a plain bilinear reference. No kernel is compiled.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <functional>

#include "layers/image_io.h"
#include "layers/layer_registry.h"
#include "layers/lmdb_io.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

/// A temporary folder removed at the end of the test.
class ImageFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/mpcaffe_images_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  /// A 3-channel h×w picture whose pixel (y, x) channel k is 40·k + 7·y + 3·x + seed.
  static Image Picture(int h, int w, int seed) {
    Image m(h, w, 3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int k = 0; k < 3; ++k) m.at(y, x, k) = static_cast<uint8_t>(40 * k + 7 * y + 3 * x + seed);
    return m;
  }
  std::string Write(const std::string& name, const Image& m) const {
    WriteImage(Path(name), m);
    return Path(name);
  }
  std::string WriteBytes(const std::string& name, const std::string& bytes) const {
    std::ofstream(Path(name), std::ios::binary) << bytes;
    return Path(name);
  }
  /// A file cut to its first `keep` bytes.
  std::string Truncated(const std::string& from, const std::string& name, size_t keep) const {
    return WriteBytes(name, ReadFileBytes(from).substr(0, keep));
  }

  std::string dir_;
};

/// The CHW float values of an 8-bit HWC picture.
std::vector<float> Chw(const Image& m) {
  std::vector<float> v(static_cast<size_t>(m.channels) * m.height * m.width);
  for (int k = 0; k < m.channels; ++k)
    for (int y = 0; y < m.height; ++y)
      for (int x = 0; x < m.width; ++x)
        v[(static_cast<size_t>(k) * m.height + y) * m.width + x] = m.at(y, x, k);
  return v;
}

/// BVLC's resize (cv::resize INTER_LINEAR), written out: pixel centres aligned (source
/// coordinate (x + 0.5)·in/out − 0.5), clamped at the borders, rounded. OpenCV interpolates 8-bit
/// pixels with 11-bit fixed-point weights, so it may differ from this by one.
Image BilinearReference(const Image& in, int h, int w) {
  Image out(h, w, in.channels);
  auto source = [](int i, int in_size, int out_size, int* i0, float* f) {
    float s = (i + 0.5f) * in_size / out_size - 0.5f;
    *i0 = static_cast<int>(std::floor(s));
    *f = s - *i0;
    if (*i0 < 0) *i0 = 0, *f = 0;
    if (*i0 >= in_size - 1) *i0 = in_size - 1, *f = 0;
  };
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      int y0, x0;
      float fy, fx;
      source(y, in.height, h, &y0, &fy);
      source(x, in.width, w, &x0, &fx);
      const int y1 = std::min(y0 + 1, in.height - 1), x1 = std::min(x0 + 1, in.width - 1);
      for (int k = 0; k < in.channels; ++k) {
        const float v = (1 - fy) * ((1 - fx) * in.at(y0, x0, k) + fx * in.at(y0, x1, k)) +
                        fy * ((1 - fx) * in.at(y1, x0, k) + fx * in.at(y1, x1, k));
        out.at(y, x, k) = static_cast<uint8_t>(std::lround(v));
      }
    }
  return out;
}

void ExpectErrorNames(const std::function<void()>& f, const std::string& file,
                      const std::string& why) {
  try {
    f();
    ADD_FAILURE() << "no error for " << file;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(file), std::string::npos) << m;
    EXPECT_NE(m.find(why), std::string::npos) << m;
  }
}

TEST_F(ImageFolder, ReadsPngAsBgrChwAndGrayReplicatedOrSingle) {
  const Image bgr = Picture(3, 4, 1);
  const std::string png = Write("a.png", bgr);
  const caffe::Datum d = ReadImageToDatum(png, 7, 0, 0, true, "");
  EXPECT_EQ(d.label(), 7);
  EXPECT_FALSE(d.encoded());
  ASSERT_EQ(d.channels(), 3);
  ASSERT_EQ(d.height(), 3);
  ASSERT_EQ(d.width(), 4);
  const std::vector<float> want = Chw(bgr);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(static_cast<uint8_t>(d.data()[i]), want[i]) << i;
  // A gray photograph read in color: the one channel three times (BVLC's IMREAD_COLOR).
  Image gray(3, 4, 1);
  for (int i = 0; i < 12; ++i) gray.pixels[i] = static_cast<uint8_t>(20 * i + 3);
  const std::string gpng = Write("g.png", gray);
  const Image as_color = ReadImage(gpng, 0, 0, true);
  ASSERT_EQ(as_color.channels, 3);
  const Image as_gray = ReadImage(gpng, 0, 0, false);
  ASSERT_EQ(as_gray.channels, 1);
  EXPECT_EQ(as_gray.pixels, gray.pixels);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(as_color.at(y, x, k), gray.at(y, x, 0));
  // A color picture read as gray: one channel, the luma 0.299 R + 0.587 G + 0.114 B (OpenCV's
  // fixed-point rounding: within one).
  const Image luma = ReadImage(png, 0, 0, false);
  ASSERT_EQ(luma.channels, 1);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x)
      EXPECT_NEAR(luma.at(y, x, 0),
                  0.114 * bgr.at(y, x, 0) + 0.587 * bgr.at(y, x, 1) + 0.299 * bgr.at(y, x, 2), 1);
  EXPECT_EQ(ReadImageToDatum(png, 0, 0, 0, false, "").channels(), 1);
  // Resizing is INTER_LINEAR, as BVLC's ReadImageToCVMat: down and up, each axis its own way.
  const Image big = Picture(7, 9, 5);
  const std::string big_png = Write("big.png", big);
  for (auto [h, w] : {std::pair{2, 5}, std::pair{11, 4}, std::pair{7, 13}}) {
    const Image got = ReadImage(big_png, h, w, true);
    ASSERT_EQ(got.height, h);
    ASSERT_EQ(got.width, w);
    const Image want = BilinearReference(big, h, w);
    for (size_t i = 0; i < want.pixels.size(); ++i)
      ASSERT_NEAR(got.pixels[i], want.pixels[i], 1) << h << "x" << w << " byte " << i;
  }
}

// A 4×2 CMYK JPEG (Adobe, inverted CMYK, as Photoshop and Pillow write it; no chroma
// subsampling) of red, green, blue, white / black, gray, yellow, cyan.
const char kCmykJpeg[] =
    "\xff\xd8\xff\xee\x00\x0e\x41\x64\x6f\x62\x65\x00\x64\x00\x00\x00\x00\x00\xff\xdb\x00\x43\x00"
    "\x01"
    "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
    "\x01"
    "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
    "\x01"
    "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\xff\xc0\x00\x14\x08\x00\x02\x00"
    "\x04"
    "\x04\x43\x11\x00\x4d\x11\x00\x59\x11\x00\x4b\x11\x00\xff\xc4\x00\x1f\x00\x00\x01\x05\x01\x01"
    "\x01"
    "\x01\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\xff"
    "\xc4"
    "\x00\xb5\x10\x00\x02\x01\x03\x03\x02\x04\x03\x05\x05\x04\x04\x00\x00\x01\x7d\x01\x02\x03\x00"
    "\x04"
    "\x11\x05\x12\x21\x31\x41\x06\x13\x51\x61\x07\x22\x71\x14\x32\x81\x91\xa1\x08\x23\x42\xb1\xc1"
    "\x15"
    "\x52\xd1\xf0\x24\x33\x62\x72\x82\x09\x0a\x16\x17\x18\x19\x1a\x25\x26\x27\x28\x29\x2a\x34\x35"
    "\x36"
    "\x37\x38\x39\x3a\x43\x44\x45\x46\x47\x48\x49\x4a\x53\x54\x55\x56\x57\x58\x59\x5a\x63\x64\x65"
    "\x66"
    "\x67\x68\x69\x6a\x73\x74\x75\x76\x77\x78\x79\x7a\x83\x84\x85\x86\x87\x88\x89\x8a\x92\x93\x94"
    "\x95"
    "\x96\x97\x98\x99\x9a\xa2\xa3\xa4\xa5\xa6\xa7\xa8\xa9\xaa\xb2\xb3\xb4\xb5\xb6\xb7\xb8\xb9\xba"
    "\xc2"
    "\xc3\xc4\xc5\xc6\xc7\xc8\xc9\xca\xd2\xd3\xd4\xd5\xd6\xd7\xd8\xd9\xda\xe1\xe2\xe3\xe4\xe5\xe6"
    "\xe7"
    "\xe8\xe9\xea\xf1\xf2\xf3\xf4\xf5\xf6\xf7\xf8\xf9\xfa\xff\xda\x00\x0e\x04\x43\x00\x4d\x00\x59"
    "\x00"
    "\x4b\x00\x00\x3f\x00\xfc\x0d\xfd\xbd\x7f\x6c\x7f\xda\xef\xf6\x6b\xf0\x1f\xfc\x13\x82\xf3\xf6"
    "\x74"
    "\xfd\xaa\x7f\x68\xff\x00\x80\x57\x7f\xb4\x6f\xfc\x13\xc3\xc0\xbf\xb4\xdf\xed\x0b\x75\xf0\x57"
    "\xe3"
    "\x8f\xc4\xef\x85\x77\x3f\x1e\x3f\x69\x2f\x88\x9f\xb4\x8f\xed\x45\xa1\x7c\x40\xfd\xa0\xfe\x33"
    "\x4f"
    "\xe0\x5f\x14\x68\x52\xfc\x50\xf8\xe1\xe3\x9d\x13\xc1\x7e\x0e\xd1\xfc\x63\xf1\x63\xc6\xed\xae"
    "\x78"
    "\xf3\xc4\xda\x57\x84\xfc\x35\xa7\xeb\x5a\xfd\xf5\xa6\x85\xa5\xc3\x6b\xfd\x35\x7f\xc1\x00\xb4"
    "\x9d"
    "\x2a\xdb\xfe\x09\x0f\xfb\x0f\x78\x92\xdf\x4c\xd3\xed\xfc\x45\xe3\x7f\x81\xfe\x08\xd5\xbc\x69"
    "\xaf"
    "\x43\x65\x6d\x16\xb5\xe2\xfd\x57\xc2\x9e\x1d\xd2\xbe\x14\x78\x5f\x53\xf1\x46\xa9\x1c\x6b\x7d"
    "\xaf"
    "\xea\x1e\x1b\xf8\x5b\xf0\xeb\xe1\xf7\xc3\x6d\x02\xf7\x56\x9e\xee\xe7\x47\xf0\x0f\x81\x3c\x1b"
    "\xe0"
    "\xed\x3a\x4b\x6f\x0e\xf8\x63\x44\xd3\xac\x7f\x62\xff\x00\xe0\xd4\x6d\x5b\x55\xb9\xff\x00\x82"
    "\x6e"
    "\xf8\xc7\xc3\x77\x1a\x9e\xa1\x3f\x87\x7c\x11\xf1\xbf\xe1\xfe\x93\xe0\xbd\x02\x6b\xdb\x99\x74"
    "\x5f"
    "\x08\x69\x5e\x2b\xfd\x83\x3f\x62\x3f\x8a\xfe\x29\xd3\x3c\x2f\xa5\xbc\x8d\x63\xa0\x69\xfe\x24"
    "\xf8"
    "\xa5\xf1\x1b\xe2\x0f\xc4\xad\x7e\xcb\x49\x82\xd2\xdb\x58\xf1\xff\x00\x8e\xfc\x65\xe3\x1d\x46"
    "\x3b"
    "\x9f\x11\x78\x9f\x5b\xd4\x6f\xbf\xbf\x8a\xff\xd9";

TEST_F(ImageFolder, CmykJpegDecodesToBgr) {
  const std::string path = WriteBytes("cmyk.jpg", std::string(kCmykJpeg, sizeof kCmykJpeg - 1));
  const Image m = ReadImage(path);
  ASSERT_EQ(m.channels, 3);
  ASSERT_EQ(m.height, 2);
  ASSERT_EQ(m.width, 4);
  const int want[8][3] = {{0, 0, 255}, {0, 255, 0},     {255, 0, 0},   {255, 255, 255},
                          {0, 0, 0},   {128, 128, 128}, {0, 255, 255}, {255, 255, 0}};  // BGR
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 3; ++k)
      EXPECT_NEAR(m.at(i / 4, i % 4, k), want[i][k], 12)
          << "pixel " << i << " channel " << k;
}

TEST_F(ImageFolder, EncodedDatumKeepsTheFileOrReencodesAndDecodesToThePixels) {
  const Image bgr = Picture(4, 5, 3);
  const std::string png = Write("p.png", bgr);
  // Same format, no resize: the file's own bytes.
  caffe::Datum d = ReadImageToDatum(png, 2, 0, 0, true, "png");
  EXPECT_TRUE(d.encoded());
  EXPECT_EQ(d.data(), ReadFileBytes(png));
  DecodeDatumInPlace(&d, "p");
  EXPECT_FALSE(d.encoded());
  EXPECT_EQ(d.data(), ReadImageToDatum(png, 2, 0, 0, true, "").data());
  EXPECT_EQ(d.label(), 2);
  // Resized: re-encoded (png is lossless: the resized pixels come back exactly).
  caffe::Datum r = ReadImageToDatum(png, 0, 2, 3, true, "png");
  EXPECT_TRUE(r.encoded());
  DecodeDatumInPlace(&r, "r");
  EXPECT_EQ(r.data(), ReadImageToDatum(png, 0, 2, 3, true, "").data());
  // A JPEG of a PNG: re-encoded as JPEG.
  const caffe::Datum j = ReadImageToDatum(png, 0, 0, 0, true, "jpg");
  EXPECT_EQ(static_cast<uint8_t>(j.data()[0]), 0xFF);
  EXPECT_EQ(static_cast<uint8_t>(j.data()[1]), 0xD8);
}

TEST_F(ImageFolder, DamagedFilesGiveErrorsNamingThem) {
  const std::string jpg = Write("whole.jpg", Picture(16, 16, 0));
  const std::string png = Write("whole.png", Picture(16, 16, 0));
  EXPECT_NO_THROW(ReadImage(jpg));
  const size_t jpg_size = ReadFileBytes(jpg).size(), png_size = ReadFileBytes(png).size();
  const std::string cut_jpg = Truncated(jpg, "cut.jpg", jpg_size - 20);
  const std::string cut_png = Truncated(png, "cut.png", png_size - 30);
  const std::string text = WriteBytes("notes.jpg", "these are not pixels\n");
  const std::string empty = WriteBytes("empty.png", "");
  ExpectErrorNames([&] { ReadImage(Path("absent.jpg")); }, "absent.jpg", "no such file");
  ExpectErrorNames([&] { ReadImage(cut_jpg); }, "cut.jpg", "truncated JPEG");
  ExpectErrorNames([&] { ReadImage(cut_png); }, "cut.png", "truncated PNG");
  ExpectErrorNames([&] { ReadImage(text); }, "notes.jpg", "not an image");
  ExpectErrorNames([&] { ReadImage(empty); }, "empty.png", "empty");
  ExpectErrorNames([&] { ReadImage(dir_); }, dir_, "directory");
  // An encoded record cut short is refused too.
  caffe::Datum d;
  d.set_encoded(true);
  d.set_data(ReadFileBytes(cut_jpg));
  ExpectErrorNames([&] { DecodeDatumInPlace(&d, "record 3"); }, "record 3", "truncated JPEG");
}

std::unique_ptr<Layer> MakeLayer(const std::string& text, caffe::Phase phase, Blob& data,
                                 Blob& label) {
  caffe::LayerParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  p.set_phase(phase);
  auto layer = CreateLayer(p, Dev());
  layer->SetUp({}, {&data, &label});
  return layer;
}

TEST_F(ImageFolder, ImageDataReadsTheListWithLabelsTransformAndWrapsAround) {
  std::vector<Image> pics;
  std::ofstream list(Path("list.txt"));
  for (int i = 0; i < 3; ++i) {
    pics.push_back(Picture(4, 6, 10 * i));
    Write("img " + std::to_string(i) + ".png", pics.back());  // a space in the path, as BVLC allows
    list << "img " << i << ".png " << 5 + i << "\n";
  }
  list.close();
  // mean_file: a mean.binaryproto of the first picture's values.
  const std::vector<float> mean = Chw(pics[0]);
  WriteBlobProtoBinary(Path("mean.binaryproto"), MeanBlobProto(3, 4, 6, mean));
  Blob data(Dev(), DataType::kFloat32), label(Dev(), DataType::kFloat32);
  auto layer = MakeLayer("name: 'img' type: 'ImageData' image_data_param { source: '" +
                             Path("list.txt") + "' root_folder: '" + dir_ +
                             "/' batch_size: 2 } transform_param { scale: 0.5 mean_file: '" +
                             Path("mean.binaryproto") + "' }",
                         caffe::TEST, data, label);
  EXPECT_EQ(data.shape(), (std::vector<int>{2, 3, 4, 6}));
  EXPECT_EQ(label.shape(), (std::vector<int>{2}));
  int item = 0;
  for (int batch = 0; batch < 2; ++batch) {  // 4 images of 3: wraps around
    layer->Forward({}, {&data, &label});
    const std::vector<float> v = data.ToFloat(), l = label.ToFloat();
    for (int n = 0; n < 2; ++n, ++item) {
      const int i = item % 3;
      EXPECT_EQ(l[n], 5 + i);
      const std::vector<float> want = Chw(pics[i]);
      for (size_t k = 0; k < want.size(); ++k)
        ASSERT_FLOAT_EQ(v[n * want.size() + k], (want[k] - mean[k]) * 0.5f) << i << " " << k;
    }
  }
  // Resized, gray, cropped in the centre (TEST phase).
  auto small = MakeLayer("name: 'img' type: 'ImageData' image_data_param { source: '" +
                             Path("list.txt") + "' root_folder: '" + dir_ +
                             "/' batch_size: 1 new_height: 6 new_width: 8 is_color: false } "
                             "transform_param { crop_size: 4 }",
                         caffe::TEST, data, label);
  EXPECT_EQ(data.shape(), (std::vector<int>{1, 1, 4, 4}));
  small->Forward({}, {&data, &label});
  const Image gray = ReadImage(Path("img 0.png"), 6, 8, false);
  const std::vector<float> v = data.ToFloat();
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_EQ(v[y * 4 + x], gray.at(y + 1, x + 2, 0));
  // Shuffled: every image once per pass, in some order.
  auto shuffled =
      MakeLayer("name: 'img' type: 'ImageData' image_data_param { source: '" + Path("list.txt") +
                    "' root_folder: '" + dir_ + "/' batch_size: 3 shuffle: true }",
                caffe::TRAIN, data, label);
  shuffled->Forward({}, {&data, &label});
  std::vector<float> labels = label.ToFloat();
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(labels, (std::vector<float>{5, 6, 7}));
}

TEST_F(ImageFolder, ImageDataOfBatchOneReshapesToEachImage) {
  Write("small.png", Picture(2, 3, 0));
  Write("large.png", Picture(4, 5, 0));
  std::ofstream(Path("list.txt")) << "small.png 0\nlarge.png 1\n";
  Blob data(Dev(), DataType::kFloat32), label(Dev(), DataType::kFloat32);
  auto layer = MakeLayer("name: 'img' type: 'ImageData' image_data_param { source: '" +
                             Path("list.txt") + "' root_folder: '" + dir_ + "/' batch_size: 1 }",
                         caffe::TEST, data, label);
  EXPECT_TRUE(layer->ReshapesEachPass());
  for (int pass = 0; pass < 3; ++pass) {  // as the net runs it: Reshape, then Forward
    layer->Reshape({}, {&data, &label});
    const std::vector<int> shape =
        pass % 2 ? std::vector<int>{1, 3, 4, 5} : std::vector<int>{1, 3, 2, 3};
    EXPECT_EQ(data.shape(), shape) << pass;
    layer->Forward({}, {&data, &label});
    EXPECT_EQ(data.shape(), shape) << pass;
    EXPECT_EQ(data.ToFloat(), Chw(Picture(shape[2], shape[3], 0))) << pass;
    EXPECT_EQ(label.ToFloat(), std::vector<float>{static_cast<float>(pass % 2)});
  }
}

TEST_F(ImageFolder, ImageDataErrorsNameTheListLineAndTheFile) {
  Write("good.png", Picture(4, 4, 0));
  Write("whole.jpg", Picture(16, 16, 0));
  Truncated(Path("whole.jpg"), "cut.jpg", ReadFileBytes(Path("whole.jpg")).size() - 20);
  std::ofstream(Path("list.txt")) << "good.png 0\nmissing.png 1\n";
  std::ofstream(Path("cut.txt")) << "good.png 0\n\ncut.jpg 2\n";
  std::ofstream(Path("nolabel.txt")) << "good.png\n";
  Blob data(Dev(), DataType::kFloat32), label(Dev(), DataType::kFloat32);
  auto layer = MakeLayer("name: 'img' type: 'ImageData' image_data_param { source: '" +
                             Path("list.txt") + "' root_folder: '" + dir_ + "/' batch_size: 1 }",
                         caffe::TEST, data, label);
  layer->Forward({}, {&data, &label});
  ExpectErrorNames(
      [&] {
        layer->Forward({}, {&data, &label});
      },
      "list.txt' line 2", "missing.png': no such file");
  // An empty line still counts in the line numbers.
  ExpectErrorNames(
      [&] {
        MakeLayer("name: 'img' type: 'ImageData' image_data_param { source: '" + Path("cut.txt") +
                      "' root_folder: '" + dir_ + "/' batch_size: 2 }",
                  caffe::TEST, data, label)
            ->Forward({}, {&data, &label});
      },
      "cut.txt' line 3", "cut.jpg': truncated JPEG");
  ExpectErrorNames(
      [&] {
        MakeLayer("name: 'img' type: 'ImageData' image_data_param { source: '" +
                      Path("nolabel.txt") + "' }",
                  caffe::TEST, data, label);
      },
      "nolabel.txt' line 1", "is not \"<path> <integer label>\"");
  ExpectErrorNames(
      [&] {
        MakeLayer("name: 'img' type: 'ImageData' image_data_param { source: '" +
                      Path("absent.txt") + "' }",
                  caffe::TEST, data, label);
      },
      "absent.txt", "cannot be opened");
}

TEST_F(ImageFolder, DataLayerDecodesEncodedRecords) {
  const std::string db = Path("enc_lmdb");
  std::vector<Image> pics;
  {
    LmdbWriter w(db);
    for (int i = 0; i < 2; ++i) {
      pics.push_back(Picture(3, 5, 20 * i));
      const std::string png = Write(std::to_string(i) + ".png", pics.back());
      w.Put("0000000" + std::to_string(i),
            ReadImageToDatum(png, i, 0, 0, true, "png").SerializeAsString());
    }
    w.Finish();
  }
  Blob data(Dev(), DataType::kFloat32), label(Dev(), DataType::kFloat32);
  auto layer = MakeLayer(
      "name: 'd' type: 'Data' data_param { source: '" + db + "' batch_size: 2 backend: LMDB }",
      caffe::TEST, data, label);
  EXPECT_EQ(data.shape(), (std::vector<int>{2, 3, 3, 5}));
  layer->Forward({}, {&data, &label});
  const std::vector<float> v = data.ToFloat();
  for (int i = 0; i < 2; ++i) {
    const std::vector<float> want = Chw(pics[i]);
    for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(v[i * want.size() + k], want[k]);
  }
  EXPECT_EQ(label.ToFloat(), (std::vector<float>{0, 1}));
}

}  // namespace
}  // namespace mpcaffe
