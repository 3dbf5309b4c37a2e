// layers/image_io.h — images to pixels the way BVLC Caffe reads them (io.cpp's ReadImageToCVMat,
// ReadImageToDatum, DecodeDatumNative): OpenCV decodes and resizes (cv::imdecode, cv::resize
// INTER_LINEAR) in the plugin libmpcaffe_image_codec.so (layers/image_codec.h says why it is a
// plugin), pixels are 8-bit BGR (or one gray channel) stored channel-major (CHW) in a
// caffe.Datum; plus the mean.binaryproto writer. Every error names the file and what is wrong
// with it (missing, not an image, corrupt, truncated).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device/error.h"
#include "proto/caffe.pb.h"

namespace mpcaffe {

/// An image could not be read; the message names the file (or record) and the reason.
class ImageError : public Error {
 public:
  using Error::Error;
};

/// An 8-bit image as OpenCV decodes it: rows of interleaved channels (HWC), BGR when there are 3.
struct Image {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // height·width·channels bytes

  Image() = default;
  Image(int h, int w, int c)
      : height(h), width(w), channels(c), pixels(static_cast<size_t>(h) * w * c) {}
  bool empty() const { return pixels.empty(); }
  const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * width * channels; }
  uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * width * channels; }
  uint8_t at(int y, int x, int c) const { return row(y)[x * channels + c]; }
  uint8_t& at(int y, int x, int c) { return row(y)[x * channels + c]; }
};

/// The whole contents of a file. Throws ImageError naming it when it is missing or unreadable.
std::string ReadFileBytes(const std::string& path);

/// Why `bytes` (a JPEG or PNG file's contents) are damaged — "truncated: no end-of-image
/// marker" and the like — or "" when they look whole or are another format. OpenCV decodes a
/// truncated JPEG partially with only a warning (the missing rows come out gray); this catches it.
std::string ImageDamage(const std::string& bytes);

/// Decodes an image file's contents: is_color gives 3-channel BGR (gray photographs replicated,
/// CMYK converted by OpenCV), else one gray channel; resized to height×width with INTER_LINEAR
/// when both are positive. `what` names the source in errors. Throws ImageError when the bytes
/// are not an image OpenCV can decode, or are damaged (ImageDamage), or when the codec plugin
/// cannot be loaded (the message says where it was looked for and why it failed).
Image DecodeImage(const std::string& bytes, const std::string& what, int height = 0,
                  int width = 0, bool is_color = true);

/// ReadFileBytes + DecodeImage: BVLC's ReadImageToCVMat, with errors instead of an empty Mat.
Image ReadImage(const std::string& path, int height = 0, int width = 0, bool is_color = true);

/// `image` resized to height×width (positive) with OpenCV's INTER_LINEAR (cv::resize, as BVLC's
/// WindowData resizes its windows). Throws ImageError.
Image ResizeImage(const Image& image, int height, int width);

/// The image in the format of `extension` ("png", "jpg", "bmp", ...: cv::imencode's). Throws
/// ImageError naming `what`.
std::string EncodeImage(const Image& image, const std::string& extension,
                        const std::string& what = "an image");
/// EncodeImage in the format of the path's extension, written to the file. Throws ImageError.
void WriteImage(const std::string& path, const Image& image);

/// The codec plugin's description ("OpenCV 4.6.0 (/usr/lib/.../libmpcaffe_image_codec.so)"),
/// loading it if it is not yet. Throws ImageError when it cannot be loaded.
std::string ImageCodecDescription();

/// An 8-bit image (HWC, 1 or 3 channels) into a raw Datum (CHW bytes; channels, height, width;
/// encoded false). The label is left as it was.
void ImageToDatum(const Image& image, caffe::Datum* datum);

/// BVLC's ReadImageToDatum: the image at `path` as a Datum with `label`. encode_type empty: raw
/// pixels. Otherwise an encoded Datum (encoded true, data = the compressed bytes): the file's own
/// bytes when they already are that format and no resize or color change is asked, else the
/// decoded image re-encoded (EncodeImage). Throws ImageError.
caffe::Datum ReadImageToDatum(const std::string& path, int label, int height, int width,
                              bool is_color, const std::string& encode_type);

/// Replaces an encoded Datum by its decoded raw form (channels, height, width, data); a raw
/// Datum is left as it is. The stored channels (BVLC's DecodeDatumNative) unless force_color
/// (3, BGR) or force_gray (1), transform_param's fields of those names. Throws ImageError naming
/// `what`.
void DecodeDatumInPlace(caffe::Datum* datum, const std::string& what, bool force_color = false,
                        bool force_gray = false);

/// One line of an image list (BVLC's convert_imageset and ImageData lists: "<path> <label>").
struct ListedImage {
  std::string path;  // as the list gives it (it may contain spaces)
  int label = -1;    // -1 when the line has none (label_required false)
  int line = 0;      // 1-based line of the list file
};

/// The lines of an image list file: a path, then (after the last space or tab) an integer label,
/// required when `label_required`. Blank lines are skipped. Throws ImageError naming the file
/// and line when it cannot be opened or a line has no label that is required; an empty list is
/// returned as it is.
std::vector<ListedImage> ReadImageList(const std::string& list, bool label_required);

/// Writes a BlobProto as a binary file (mean.binaryproto). Throws Error naming the file.
void WriteBlobProtoBinary(const std::string& path, const caffe::BlobProto& blob);

/// A mean.binaryproto blob as BVLC's compute_image_mean writes it: num 1, channels, height,
/// width (the legacy 4-D fields, which every Caffe reads) and the float values, CHW.
caffe::BlobProto MeanBlobProto(int channels, int height, int width, const std::vector<float>& mean);

}  // namespace mpcaffe
