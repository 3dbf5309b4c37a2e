// layers/codec/opencv_codec.cc — libmpcaffe_image_codec.so: the only code of mpcaffe that links
// OpenCV (why: layers/image_codec.h). Decodes with cv::imdecode, resizes with cv::resize
// INTER_LINEAR (on decoding, or alone) and encodes with cv::imencode — BVLC Caffe's io.cpp reads images the same way —
// and hands plain 8-bit buffers back through the C interface.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "layers/image_codec.h"

namespace {

void SetError(char* error, size_t size, const std::string& text) {
  if (size == 0) return;
  std::snprintf(error, size, "%s", text.c_str());
}

int Fill(const unsigned char* data, size_t n, int h, int w, int c, mpcaffe_image_buffer* out,
         char* error, size_t error_size) {
  *out = mpcaffe_image_buffer{h, w, c, nullptr, n};
  if (n == 0) return 0;
  out->data = static_cast<unsigned char*>(std::malloc(n));
  if (!out->data) {
    *out = {};
    SetError(error, error_size, "out of host memory (" + std::to_string(n) + " bytes)");
    return 1;
  }
  std::memcpy(out->data, data, n);
  return 0;
}

const char* Version() {
  static const std::string v = "OpenCV " + std::string(CV_VERSION);
  return v.c_str();
}

int Decode(const unsigned char* bytes, size_t n, int mode, int height, int width,
           mpcaffe_image_buffer* out, char* error, size_t error_size) {
  *out = {};
  int flag = cv::IMREAD_COLOR;
  switch (mode) {
    case MPCAFFE_IMAGE_GRAY: flag = cv::IMREAD_GRAYSCALE; break;
    case MPCAFFE_IMAGE_COLOR: flag = cv::IMREAD_COLOR; break;
    case MPCAFFE_IMAGE_ANY_COLOR: flag = cv::IMREAD_ANYCOLOR; break;
    case MPCAFFE_IMAGE_UNCHANGED: flag = cv::IMREAD_UNCHANGED; break;
    default: SetError(error, error_size, "unknown decode mode " + std::to_string(mode)); return 1;
  }
  try {
    const cv::Mat buf(1, static_cast<int>(n), CV_8UC1, const_cast<unsigned char*>(bytes));
    cv::Mat image = cv::imdecode(buf, flag);
    if (image.empty()) {
      SetError(error, error_size,
               "not an image OpenCV can decode (corrupt, or not a JPEG/PNG/BMP/... file; " +
                   std::to_string(n) + " bytes)");
      return 1;
    }
    if (image.depth() != CV_8U) {
      // 16-bit PNG/TIFF: BVLC's pipeline stores 8-bit pixels; scale 0..65535 onto 0..255.
      const double scale = image.depth() == CV_16U ? 1.0 / 257.0 : 1.0;
      image.convertTo(image, CV_8U, scale);
    }
    if (height > 0 && width > 0 && (image.rows != height || image.cols != width)) {
      cv::Mat resized;
      cv::resize(image, resized, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
      image = resized;
    }
    if (!image.isContinuous()) image = image.clone();
    return Fill(image.data, image.total() * image.elemSize(), image.rows, image.cols,
                image.channels(), out, error, error_size);
  } catch (const cv::Exception& e) {
    SetError(error, error_size, std::string("corrupt image (OpenCV: ") + e.what() + ")");
  } catch (const std::exception& e) {
    SetError(error, error_size, std::string("decoding failed: ") + e.what());
  }
  return 1;
}

int Encode(const char* extension, const unsigned char* pixels, int height, int width,
           int channels, mpcaffe_image_buffer* out, char* error, size_t error_size) {
  *out = {};
  if (height <= 0 || width <= 0 || (channels != 1 && channels != 3 && channels != 4)) {
    SetError(error, error_size,
             "cannot encode a " + std::to_string(width) + "x" + std::to_string(height) + "x" +
                 std::to_string(channels) + " image (1, 3 or 4 channels, positive size)");
    return 1;
  }
  try {
    const cv::Mat image(height, width, CV_8UC(channels), const_cast<unsigned char*>(pixels));
    std::vector<uchar> buf;
    if (!cv::imencode(std::string(".") + extension, image, buf)) {
      SetError(error, error_size, std::string("OpenCV cannot encode '") + extension + "'");
      return 1;
    }
    return Fill(buf.data(), buf.size(), 0, 0, 0, out, error, error_size);
  } catch (const cv::Exception& e) {
    SetError(error, error_size,
             std::string("encoding as '") + extension + "' failed (OpenCV: " + e.what() + ")");
  }
  return 1;
}

int Resize(const unsigned char* pixels, int height, int width, int channels, int out_height,
           int out_width, mpcaffe_image_buffer* out, char* error, size_t error_size) {
  *out = {};
  if (height <= 0 || width <= 0 || out_height <= 0 || out_width <= 0 || channels < 1 ||
      channels > 4) {
    SetError(error, error_size,
             "cannot resize a " + std::to_string(width) + "x" + std::to_string(height) + "x" +
                 std::to_string(channels) + " image to " + std::to_string(out_width) + "x" +
                 std::to_string(out_height));
    return 1;
  }
  try {
    const cv::Mat image(height, width, CV_8UC(channels), const_cast<unsigned char*>(pixels));
    cv::Mat resized;
    cv::resize(image, resized, cv::Size(out_width, out_height), 0, 0, cv::INTER_LINEAR);
    if (!resized.isContinuous()) resized = resized.clone();
    return Fill(resized.data, resized.total() * resized.elemSize(), resized.rows, resized.cols,
                resized.channels(), out, error, error_size);
  } catch (const cv::Exception& e) {
    SetError(error, error_size, std::string("resizing failed (OpenCV: ") + e.what() + ")");
  }
  return 1;
}

void Release(mpcaffe_image_buffer* buffer) {
  std::free(buffer->data);
  *buffer = {};
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const mpcaffe_image_codec*
mpcaffe_image_codec_entry(void) {
  static const mpcaffe_image_codec codec = {MPCAFFE_IMAGE_CODEC_ABI, Version, Decode, Encode,
                                            Release, Resize};
  return &codec;
}
