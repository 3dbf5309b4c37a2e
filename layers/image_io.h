// layers/image_io.h — images to pixels the way BVLC Caffe reads them (io.cpp's ReadImageToCVMat,
// ReadImageToDatum, DecodeDatumNative): OpenCV decodes and resizes (cv::imread/imdecode,
// cv::resize INTER_LINEAR), pixels are 8-bit BGR (or one gray channel) stored channel-major
// (CHW) in a caffe.Datum; plus the mean.binaryproto writer. Every error names the file and
// what is wrong with it (missing, not an image, corrupt, truncated).
#pragma once

#include <opencv2/core.hpp>
#include <string>

#include "device/error.h"
#include "proto/caffe.pb.h"

namespace mpcaffe {

/// An image could not be read; the message names the file (or record) and the reason.
class ImageError : public Error {
 public:
  using Error::Error;
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
/// are not an image OpenCV can decode, or are damaged (ImageDamage).
cv::Mat DecodeImage(const std::string& bytes, const std::string& what, int height = 0,
                    int width = 0, bool is_color = true);

/// ReadFileBytes + DecodeImage: BVLC's ReadImageToCVMat, with errors instead of an empty Mat.
cv::Mat ReadImage(const std::string& path, int height = 0, int width = 0, bool is_color = true);

/// An 8-bit image (HWC, 1 or 3 channels) into a raw Datum (CHW bytes; channels, height, width;
/// encoded false). The label is left as it was.
void MatToDatum(const cv::Mat& image, caffe::Datum* datum);

/// BVLC's ReadImageToDatum: the image at `path` as a Datum with `label`. encode_type empty: raw
/// pixels. Otherwise an encoded Datum (encoded true, data = the compressed bytes): the file's own
/// bytes when they already are that format and no resize or color change is asked, else the
/// decoded image re-encoded with cv::imencode("." + encode_type). Throws ImageError.
caffe::Datum ReadImageToDatum(const std::string& path, int label, int height, int width,
                              bool is_color, const std::string& encode_type);

/// Replaces an encoded Datum by its decoded raw form (channels, height, width, data); a raw
/// Datum is left as it is. The stored channels (BVLC's DecodeDatumNative) unless force_color
/// (3, BGR) or force_gray (1), transform_param's fields of those names. Throws ImageError naming
/// `what`.
void DecodeDatumInPlace(caffe::Datum* datum, const std::string& what, bool force_color = false,
                        bool force_gray = false);

/// Writes a BlobProto as a binary file (mean.binaryproto). Throws Error naming the file.
void WriteBlobProtoBinary(const std::string& path, const caffe::BlobProto& blob);

/// A mean.binaryproto blob as BVLC's compute_image_mean writes it: num 1, channels, height,
/// width (the legacy 4-D fields, which every Caffe reads) and the float values, CHW.
caffe::BlobProto MeanBlobProto(int channels, int height, int width, const std::vector<float>& mean);

}  // namespace mpcaffe
