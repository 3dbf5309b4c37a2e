// layers/image_io.cc — image decoding (OpenCV imgcodecs), resizing (imgproc INTER_LINEAR) and the
// Datum / mean.binaryproto conversions of layers/image_io.h.
#include "layers/image_io.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

namespace mpcaffe {
namespace {

bool StartsWith(const std::string& s, const char* prefix, size_t n) {
  return s.size() >= n && std::memcmp(s.data(), prefix, n) == 0;
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data() + at);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

/// A JPEG ends its last scan with the end-of-image marker FF D9. Inside entropy-coded data a
/// 0xFF byte is always followed by 0x00 (stuffing) or a restart marker, so an FF D9 after the
/// last start-of-scan FF DA can only be the real end (an EXIF thumbnail's EOI comes before it).
std::string JpegDamage(const std::string& b) {
  size_t sos = std::string::npos;
  for (size_t i = b.size() >= 2 ? b.size() - 2 : 0; i-- > 0;)
    if (static_cast<unsigned char>(b[i]) == 0xFF && static_cast<unsigned char>(b[i + 1]) == 0xDA) {
      sos = i;
      break;
    }
  if (sos == std::string::npos)
    return "truncated JPEG: no image data (start of scan) in its " + std::to_string(b.size()) +
           " bytes";
  for (size_t i = sos + 2; i + 1 < b.size(); ++i)
    if (static_cast<unsigned char>(b[i]) == 0xFF && static_cast<unsigned char>(b[i + 1]) == 0xD9)
      return "";
  return "truncated JPEG: the file ends before its end-of-image marker (" +
         std::to_string(b.size()) + " bytes)";
}

/// A PNG is the 8-byte signature and chunks (length, type, data, CRC) up to IEND.
std::string PngDamage(const std::string& b) {
  size_t at = 8;
  while (at + 8 <= b.size()) {
    const uint32_t length = BigEndian32(b, at);
    const std::string type = b.substr(at + 4, 4);
    const size_t end = at + 12 + static_cast<size_t>(length);
    if (end > b.size()) break;
    if (type == "IEND") return "";
    at = end;
  }
  return "truncated PNG: the file ends before its IEND chunk (" + std::to_string(b.size()) +
         " bytes)";
}

}  // namespace

std::string ReadFileBytes(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    throw ImageError("'" + path +
                     "': " + (errno == ENOENT ? "no such file" : std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw ImageError("'" + path + "' is a directory, not an image");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImageError("'" + path + "': cannot open (" + std::strerror(errno) + ")");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw ImageError("'" + path + "': read error");
  return buf.str();
}

std::string ImageDamage(const std::string& bytes) {
  if (StartsWith(bytes, "\xFF\xD8\xFF", 3)) return JpegDamage(bytes);
  if (StartsWith(bytes, "\x89PNG\r\n\x1A\n", 8)) return PngDamage(bytes);
  return "";
}

cv::Mat DecodeImage(const std::string& bytes, const std::string& what, int height, int width,
                    bool is_color) {
  if (bytes.empty()) throw ImageError(what + ": empty file, not an image");
  const std::string damage = ImageDamage(bytes);
  if (!damage.empty()) throw ImageError(what + ": " + damage);
  cv::Mat image;
  try {
    const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
    image = cv::imdecode(buf, is_color ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
  } catch (const cv::Exception& e) {
    throw ImageError(what + ": corrupt image (OpenCV: " + e.what() + ")");
  }
  if (image.empty())
    throw ImageError(what +
                     ": not an image OpenCV can decode (corrupt, or not a JPEG/PNG/BMP/"
                     "... file; " +
                     std::to_string(bytes.size()) + " bytes)");
  if (image.depth() != CV_8U) image.convertTo(image, CV_8U);
  if (height > 0 && width > 0 && (image.rows != height || image.cols != width)) {
    cv::Mat resized;
    cv::resize(image, resized, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
    image = resized;
  }
  return image;
}

cv::Mat ReadImage(const std::string& path, int height, int width, bool is_color) {
  return DecodeImage(ReadFileBytes(path), "'" + path + "'", height, width, is_color);
}

void MatToDatum(const cv::Mat& image, caffe::Datum* datum) {
  if (image.depth() != CV_8U) throw ImageError("MatToDatum: the image is not 8-bit");
  const int c = image.channels(), h = image.rows, w = image.cols;
  datum->set_channels(c);
  datum->set_height(h);
  datum->set_width(w);
  datum->clear_float_data();
  datum->set_encoded(false);
  std::string data(static_cast<size_t>(c) * h * w, '\0');
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = image.ptr<uint8_t>(y);
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        data[(static_cast<size_t>(k) * h + y) * w + x] = static_cast<char>(row[x * c + k]);
  }
  datum->set_data(std::move(data));
}

caffe::Datum ReadImageToDatum(const std::string& path, int label, int height, int width,
                              bool is_color, const std::string& encode_type) {
  const std::string bytes = ReadFileBytes(path);
  const cv::Mat image = DecodeImage(bytes, "'" + path + "'", height, width, is_color);
  caffe::Datum datum;
  datum.set_label(label);
  if (encode_type.empty()) {
    MatToDatum(image, &datum);
    return datum;
  }
  std::string ext = path.substr(
      path.find_last_of('.') == std::string::npos ? path.size() : path.find_last_of('.') + 1);
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const bool same_format = ext == encode_type || (ext == "jpeg" && encode_type == "jpg") ||
                           (ext == "jpg" && encode_type == "jpeg");
  // The file's own bytes when they decode to what was asked (BVLC's ReadFileToDatum case).
  const bool file_channels_match = (cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1,
                                                         const_cast<char*>(bytes.data())),
                                                 cv::IMREAD_UNCHANGED)
                                        .channels() == 3) == is_color;
  if (same_format && height <= 0 && width <= 0 && file_channels_match) {
    datum.set_data(bytes);
  } else {
    std::vector<uchar> buf;
    try {
      if (!cv::imencode("." + encode_type, image, buf))
        throw ImageError("'" + path + "': OpenCV cannot encode it as '" + encode_type + "'");
    } catch (const cv::Exception& e) {
      throw ImageError("'" + path + "': encoding as '" + encode_type + "' failed: " + e.what());
    }
    datum.set_data(std::string(buf.begin(), buf.end()));
  }
  datum.set_encoded(true);
  return datum;
}

void DecodeDatumInPlace(caffe::Datum* datum, const std::string& what, bool force_color,
                        bool force_gray) {
  if (!datum->encoded()) return;
  // BVLC's DecodeDatumNative: the stored channels (a gray JPEG stays one channel).
  const std::string& bytes = datum->data();
  const std::string damage = ImageDamage(bytes);
  if (!damage.empty()) throw ImageError(what + ": " + damage);
  cv::Mat image;
  try {
    image = cv::imdecode(
        cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data())),
        force_color  ? cv::IMREAD_COLOR
        : force_gray ? cv::IMREAD_GRAYSCALE
                     : cv::IMREAD_ANYCOLOR);
  } catch (const cv::Exception& e) {
    throw ImageError(what + ": corrupt encoded image (OpenCV: " + e.what() + ")");
  }
  if (image.empty()) throw ImageError(what + ": the encoded image cannot be decoded");
  if (image.depth() != CV_8U) image.convertTo(image, CV_8U);
  MatToDatum(image, datum);
}

void WriteBlobProtoBinary(const std::string& path, const caffe::BlobProto& blob) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write '" + path + "': " + std::strerror(errno));
  if (!blob.SerializeToOstream(&out) || !out.flush()) throw Error("writing '" + path + "' failed");
}

caffe::BlobProto MeanBlobProto(int channels, int height, int width,
                               const std::vector<float>& mean) {
  caffe::BlobProto blob;
  blob.set_num(1);
  blob.set_channels(channels);
  blob.set_height(height);
  blob.set_width(width);
  for (float v : mean) blob.add_data(v);
  return blob;
}

}  // namespace mpcaffe
