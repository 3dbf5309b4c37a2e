// tools/image_samples.h — photographs as a net's input samples (NCHW float32) for
// `mpcaffe calibrate --images`: read with OpenCV (layers/image_io.h), preprocessed as Caffe users
// give it, in pycaffe Transformer's order — resize, centre crop to the input, channel order,
// raw scale, mean (mean.binaryproto or per-channel values), scale — or with a train_val
// prototxt's transform_param (mean_file / mean_value, scale, crop_size).
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "layers/image_io.h"
#include "proto/model_io.h"
#include "tools/command.h"
#include "tools/npy_file.h"

namespace mpcaffe::tools {

/// How images become samples; the defaults are BVLC Caffe's (BGR 0..255, no mean, scale 1).
struct ImagePreprocessing {
  int resize_height = 0, resize_width = 0;  // 0: the net input's size
  std::vector<float> mean_values;           // one, or one per channel
  std::string mean_file;                    // a mean.binaryproto
  float raw_scale = 255.0f;                 // pixel values span [0, raw_scale] (pycaffe's)
  float scale = 1.0f;                       // after the mean (transform_param.scale, input_scale)
  std::vector<int> channel_swap;            // pycaffe's: net channel i = RGB channel swap[i]
};

/// Whether `path` names an image file by its extension (the formats OpenCV's imgcodecs reads).
inline bool IsImageFileName(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp" || ext == ".tif" ||
         ext == ".tiff" || ext == ".webp" || ext == ".ppm" || ext == ".pgm";
}

/// The images `source` names: one image file, the image files of a folder (sorted by name), or
/// a list file of one path per line, optionally followed by an integer label as
/// convert_imageset's lists have (relative paths are relative to the list file's folder).
/// `labels` (when given) receives each image's label, -1 where there is none.
inline std::vector<std::string> ListImages(const std::string& source,
                                           std::vector<int>* labels = nullptr) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  std::vector<int> found;
  if (fs::is_directory(source)) {
    for (const auto& e : fs::directory_iterator(source))
      if (e.is_regular_file() && IsImageFileName(e.path())) paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) throw Error("--images '" + source + "': the folder holds no image file");
    found.assign(paths.size(), -1);
  } else if (fs::is_regular_file(source) && IsImageFileName(source)) {
    paths = {source};
    found = {-1};
  } else {
    if (!fs::is_regular_file(source))
      throw Error("--images '" + source + "': no such image, folder or list file");
    const fs::path base = fs::path(source).parent_path();
    for (const ListedImage& item : ReadImageList(source, false)) {
      const fs::path p(item.path);
      paths.push_back(p.is_absolute() || base.empty() ? item.path : (base / p).string());
      found.push_back(item.label);
    }
    if (paths.empty()) throw Error("--images '" + source + "': the list names no image");
  }
  if (labels) *labels = std::move(found);
  return paths;
}

/// Fills `pre` from the first layer of `prototxt` with a transform_param (a TEST-phase one
/// first): mean_file, mean_value, scale. Its crop_size needs nothing: the deploy net's input is
/// the crop, and ImagesToSamples centre-crops to the input (from the mean file's size when the
/// mean file is at least as large, as a train_val's records are).
inline void PreprocessingFromTransformParam(const std::string& prototxt, ImagePreprocessing* pre) {
  const caffe::NetParameter net = ReadNetParameterText(prototxt);
  const caffe::LayerParameter* chosen = nullptr;
  for (const auto& l : net.layer()) {
    if (!l.has_transform_param()) continue;
    bool test = false;
    for (const auto& r : l.include()) test |= r.has_phase() && r.phase() == caffe::TEST;
    if (!chosen || test) chosen = &l;
    if (test) break;
  }
  if (!chosen) throw Error("--transform-from '" + prototxt + "': no layer has a transform_param");
  const auto& tp = chosen->transform_param();
  if (tp.has_mean_file()) pre->mean_file = tp.mean_file();
  pre->mean_values.assign(tp.mean_value().begin(), tp.mean_value().end());
  if (tp.has_scale()) pre->scale = tp.scale();
}

/// The images as NCHW float32 samples of channels × height × width (the net input's), each
/// resized (to resize_* or, with a mean file, to its size, else to height × width), centre
/// cropped to height × width, then channel order, raw scale, mean, scale. Errors name the image.
inline NpyArray ImagesToSamples(const std::vector<std::string>& paths, int channels, int height,
                                int width, const ImagePreprocessing& pre) {
  if (channels != 1 && channels != 3)
    throw Error("--images: the net's input has " + std::to_string(channels) +
                " channels; images give 1 (gray) or 3 (color)");
  std::vector<float> mean;  // channels × rh × rw, or per channel
  int rh = pre.resize_height ? pre.resize_height : height;
  int rw = pre.resize_width ? pre.resize_width : width;
  if (!pre.mean_file.empty()) {
    const caffe::BlobProto m = ReadBlobProtoBinary(pre.mean_file);
    const int mc =
        m.has_channels()
            ? m.channels()
            : (m.shape().dim_size() >= 3 ? static_cast<int>(m.shape().dim(m.shape().dim_size() - 3))
                                         : 0);
    const int mh = m.has_height() ? m.height()
                                  : (m.shape().dim_size() >= 2
                                         ? static_cast<int>(m.shape().dim(m.shape().dim_size() - 2))
                                         : 0);
    const int mw = m.has_width() ? m.width()
                                 : (m.shape().dim_size() >= 1
                                        ? static_cast<int>(m.shape().dim(m.shape().dim_size() - 1))
                                        : 0);
    if (mc != channels || static_cast<size_t>(m.data_size()) != static_cast<size_t>(mc) * mh * mw)
      throw Error("--mean-file '" + pre.mean_file + "': a mean of " + std::to_string(mc) +
                  " channels (" + std::to_string(m.data_size()) + " values) for a net input of " +
                  std::to_string(channels));
    if (!pre.resize_height && mh >= height && mw >= width) rh = mh, rw = mw;
    if (mh == rh && mw == rw) {
      mean.assign(m.data().begin(), m.data().end());
    } else {  // another size: its per-channel means (BVLC's cpp_classification does so too)
      for (int c = 0; c < mc; ++c) {
        double s = 0;
        for (int i = 0; i < mh * mw; ++i) s += m.data(c * mh * mw + i);
        mean.push_back(static_cast<float>(s / (mh * mw)));
      }
    }
  } else if (!pre.mean_values.empty()) {
    if (pre.mean_values.size() != 1 && static_cast<int>(pre.mean_values.size()) != channels)
      throw Error("--mean-values: give 1 or " + std::to_string(channels) + " values");
    for (int c = 0; c < channels; ++c)
      mean.push_back(pre.mean_values[pre.mean_values.size() == 1 ? 0 : c]);
  }
  if (rh < height || rw < width)
    throw Error("--resize " + std::to_string(rh) + "," + std::to_string(rw) +
                " is smaller than the net's input " + std::to_string(height) + "x" +
                std::to_string(width));
  if (!pre.channel_swap.empty()) {
    if (static_cast<int>(pre.channel_swap.size()) != channels)
      throw Error("--channel-swap needs " + std::to_string(channels) + " indices");
    for (int s : pre.channel_swap)
      if (s < 0 || s >= channels) throw Error("--channel-swap: index out of range");
  }
  NpyArray out;
  out.shape = {static_cast<int64_t>(paths.size()), channels, height, width};
  const size_t sample = static_cast<size_t>(channels) * height * width;
  out.values.resize(paths.size() * sample);
  const int oy = (rh - height) / 2, ox = (rw - width) / 2;
  for (size_t n = 0; n < paths.size(); ++n) {
    const Image image = ReadImage(paths[n], rh, rw, channels == 3);
    float* dst = out.values.data() + n * sample;
    for (int c = 0; c < channels; ++c) {
      // The pixels are BGR; channel_swap indexes RGB (pycaffe), the default order stays BGR.
      const int from = pre.channel_swap.empty() ? c : channels - 1 - pre.channel_swap[c];
      for (int y = 0; y < height; ++y) {
        const uint8_t* row = image.row(y + oy);
        for (int x = 0; x < width; ++x) {
          float v = row[(x + ox) * channels + from] * (pre.raw_scale / 255.0f);
          if (mean.size() == static_cast<size_t>(channels))
            v -= mean[c];
          else if (!mean.empty())
            v -= mean[(static_cast<size_t>(c) * rh + y + oy) * rw + x + ox];
          dst[(static_cast<size_t>(c) * height + y) * width + x] = v * pre.scale;
        }
      }
    }
  }
  return out;
}

/// "a,b,c" as numbers; throws std::invalid_argument naming the flag.
inline std::vector<float> NumberList(const std::string& flag, const std::string& text) {
  std::vector<float> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    float v = 0;
    try {
      v = std::stof(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw std::invalid_argument(flag + " needs numbers separated by commas, got '" + text + "'");
    out.push_back(v);
  }
  if (out.empty()) throw std::invalid_argument(flag + " needs a value");
  return out;
}

/// The preprocessing flags of `mpcaffe calibrate --images` and `mpcaffe classify` (the
/// underscore spellings are BVLC classify.py's); throws std::invalid_argument naming the flag.
inline ImagePreprocessing PreprocessingFlags(const std::vector<std::string>& args) {
  ImagePreprocessing pre;
  auto value = [&](const std::string& flag) {
    std::string v = FlagValue(args, flag);
    if (v.empty()) {  // classify.py's spelling: --mean_file, --raw_scale, --channel_swap
      std::string underscore = flag;
      std::replace(underscore.begin() + 2, underscore.end(), '-', '_');
      if (underscore != flag) v = FlagValue(args, underscore);
    }
    return v;
  };
  if (const std::string t = value("--transform-from"); !t.empty())
    PreprocessingFromTransformParam(t, &pre);
  if (const std::string r = value("--resize"); !r.empty()) {
    const std::vector<float> hw = NumberList("--resize", r);
    if (hw.size() != 2 || hw[0] < 1 || hw[1] < 1)
      throw std::invalid_argument("--resize needs H,W, got '" + r + "'");
    pre.resize_height = static_cast<int>(hw[0]), pre.resize_width = static_cast<int>(hw[1]);
  }
  if (const std::string m = value("--mean-file"); !m.empty()) pre.mean_file = m;
  if (const std::string m = value("--mean-values"); !m.empty()) {
    pre.mean_values = NumberList("--mean-values", m);
    pre.mean_file.clear();
  }
  if (const std::string v = value("--raw-scale"); !v.empty())
    pre.raw_scale = NumberList("--raw-scale", v).at(0);
  if (const std::string v = value("--scale"); !v.empty())
    pre.scale = NumberList("--scale", v).at(0);
  if (const std::string v = value("--channel-swap"); !v.empty())
    for (float c : NumberList("--channel-swap", v)) pre.channel_swap.push_back(static_cast<int>(c));
  return pre;
}

}  // namespace mpcaffe::tools
