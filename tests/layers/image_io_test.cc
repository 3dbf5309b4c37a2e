// tests/layers/image_io_test.cc — images as BVLC Caffe reads them (layers/image_io.h): BGR and
// gray pixels, resizing, encoded Datum records, errors naming damaged files; the ImageData layer
// (list file, labels, transform_param, mean_file) and the Data layer on encoded records. Tiny
// pictures written with OpenCV into a temporary folder; no kernel is compiled.
#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

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
  static cv::Mat Picture(int h, int w, int seed) {
    cv::Mat m(h, w, CV_8UC3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int k = 0; k < 3; ++k) m.at<cv::Vec3b>(y, x)[k] = static_cast<uint8_t>(40 * k + 7 * y + 3 * x + seed);
    return m;
  }
  std::string Write(const std::string& name, const cv::Mat& m) const {
    EXPECT_TRUE(cv::imwrite(Path(name), m));
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
std::vector<float> Chw(const cv::Mat& m) {
  std::vector<float> v(static_cast<size_t>(m.channels()) * m.rows * m.cols);
  for (int k = 0; k < m.channels(); ++k)
    for (int y = 0; y < m.rows; ++y)
      for (int x = 0; x < m.cols; ++x)
        v[(static_cast<size_t>(k) * m.rows + y) * m.cols + x] = m.ptr<uint8_t>(y)[x * m.channels() + k];
  return v;
}

void ExpectErrorNames(const std::function<void()>& f, const std::string& file, const std::string& why) {
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
  const cv::Mat bgr = Picture(3, 4, 1);
  const std::string png = Write("a.png", bgr);
  const caffe::Datum d = ReadImageToDatum(png, 7, 0, 0, true, "");
  EXPECT_EQ(d.label(), 7);
  EXPECT_FALSE(d.encoded());
  ASSERT_EQ(d.channels(), 3);
  ASSERT_EQ(d.height(), 3);
  ASSERT_EQ(d.width(), 4);
  const std::vector<float> want = Chw(bgr);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(static_cast<uint8_t>(d.data()[i]), want[i]) << i;
  // A gray photograph read in color: the one channel three times (BVLC's IMREAD_COLOR).
  cv::Mat gray;
  cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
  const std::string gpng = Write("g.png", gray);
  const cv::Mat as_color = ReadImage(gpng, 0, 0, true);
  ASSERT_EQ(as_color.channels(), 3);
  const cv::Mat as_gray = ReadImage(gpng, 0, 0, false);
  ASSERT_EQ(as_gray.channels(), 1);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(as_color.at<cv::Vec3b>(y, x)[k], gray.at<uint8_t>(y, x));
  // A color picture read as gray: OpenCV's conversion, one channel.
  EXPECT_EQ(ReadImageToDatum(png, 0, 0, 0, false, "").channels(), 1);
  // Resizing is cv::resize INTER_LINEAR, as BVLC's ReadImageToCVMat.
  cv::Mat resized;
  cv::resize(bgr, resized, cv::Size(5, 2), 0, 0, cv::INTER_LINEAR);
  const cv::Mat got = ReadImage(png, 2, 5, true);
  ASSERT_EQ(got.rows, 2);
  ASSERT_EQ(got.cols, 5);
  EXPECT_EQ(cv::norm(got, resized, cv::NORM_INF), 0);
}

TEST_F(ImageFolder, EncodedDatumKeepsTheFileOrReencodesAndDecodesToThePixels) {
  const cv::Mat bgr = Picture(4, 5, 3);
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

std::unique_ptr<Layer> MakeLayer(const std::string& text, caffe::Phase phase, Blob& data, Blob& label) {
  caffe::LayerParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  p.set_phase(phase);
  auto layer = CreateLayer(p, Dev());
  layer->SetUp({}, {&data, &label});
  return layer;
}

TEST_F(ImageFolder, ImageDataReadsTheListWithLabelsTransformAndWrapsAround) {
  std::vector<cv::Mat> pics;
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
  cv::Mat gray = ReadImage(Path("img 0.png"), 6, 8, false);
  const std::vector<float> v = data.ToFloat();
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_EQ(v[y * 4 + x], gray.at<uint8_t>(y + 1, x + 2));
  // Shuffled: every image once per pass, in some order.
  auto shuffled = MakeLayer("name: 'img' type: 'ImageData' image_data_param { source: '" +
                                Path("list.txt") + "' root_folder: '" + dir_ +
                                "/' batch_size: 3 shuffle: true }",
                            caffe::TRAIN, data, label);
  shuffled->Forward({}, {&data, &label});
  std::vector<float> labels = label.ToFloat();
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(labels, (std::vector<float>{5, 6, 7}));
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
  ExpectErrorNames([&] { layer->Forward({}, {&data, &label}); }, "list.txt' line 2",
                   "missing.png': no such file");
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
  std::vector<cv::Mat> pics;
  {
    LmdbWriter w(db);
    for (int i = 0; i < 2; ++i) {
      pics.push_back(Picture(3, 5, 20 * i));
      const std::string png = Write(std::to_string(i) + ".png", pics.back());
      w.Put("0000000" + std::to_string(i), ReadImageToDatum(png, i, 0, 0, true, "png").SerializeAsString());
    }
    w.Finish();
  }
  Blob data(Dev(), DataType::kFloat32), label(Dev(), DataType::kFloat32);
  auto layer = MakeLayer("name: 'd' type: 'Data' data_param { source: '" + db +
                             "' batch_size: 2 backend: LMDB }",
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
