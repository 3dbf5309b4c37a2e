// layers/window_data_layer.cc — BVLC's WindowData layer (R-CNN's fine-tuning input): windows of
// images listed in a window file, sampled as foreground (overlap ≥ fg_threshold) or background
// (overlap < bg_threshold) in the fg_fraction BVLC gives, cut out with context_pad around them
// (crop_mode "warp" or "square"), resized to crop_size² by OpenCV (layers/image_io.h), mirrored,
// mean-subtracted and scaled. Tops: data (batch × channels × crop × crop) and label (batch).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "layers/image_io.h"
#include "layers/layer_registry.h"
#include "proto/model_io.h"

namespace mpcaffe {
namespace {

/// A window of an image: its class (0 for background), overlap and corners (inclusive pixels).
struct Window {
  int image = 0, label = 0;
  float overlap = 0;
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

/// An image of the window file: its path (root_folder prefixed) and the line naming it.
struct ListedWindowImage {
  std::string path;
  int line = 0;
};

/// The whitespace-separated words of a file with the line each starts on.
class WordReader {
 public:
  WordReader(std::istream& in, std::string file) : file_(std::move(file)) {
    std::string text, word;
    for (int line = 1; std::getline(in, text); ++line) {
      std::istringstream words(text);
      while (words >> word) words_.push_back({word, line});
    }
  }
  bool done() const { return next_ >= words_.size(); }
  int line() const { return done() ? (words_.empty() ? 1 : words_.back().line) : words_[next_].line; }
  /// The line of the word read last.
  int LastLine() const { return next_ ? words_[next_ - 1].line : 1; }
  /// The next word; `what` names it in the error when the file ends.
  std::string Word(const std::string& what) {
    if (done()) throw Error(Where() + ": the file ends where " + what + " should be");
    return words_[next_++].text;
  }
  long Int(const std::string& what) {
    const std::string w = Word(what);
    char* end = nullptr;
    const long v = std::strtol(w.c_str(), &end, 10);
    if (w.empty() || *end) throw Error(Where(-1) + ": " + what + " '" + w + "' is not an integer");
    return v;
  }
  float Float(const std::string& what) {
    const std::string w = Word(what);
    char* end = nullptr;
    const float v = std::strtof(w.c_str(), &end);
    if (w.empty() || *end) throw Error(Where(-1) + ": " + what + " '" + w + "' is not a number");
    return v;
  }
  /// "window file '<file>' line <n>" of the next word (back: of a word already read).
  std::string Where(int back = 0) const {
    const size_t i = next_ + back;
    const int l = i < words_.size() ? words_[i].line : line();
    return "window file '" + file_ + "' line " + std::to_string(l);
  }

 private:
  struct Word_ {
    std::string text;
    int line;
  };
  std::string file_;
  std::vector<Word_> words_;
  size_t next_ = 0;
};

class WindowDataLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "WindowData"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 2; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const auto& wp = param_.window_data_param();
    const auto& tp = param_.transform_param();
    if (wp.batch_size() == 0) Fail("window_data_param.batch_size must be positive");
    batch_ = static_cast<int>(wp.batch_size());
    crop_ = static_cast<int>(tp.crop_size() ? tp.crop_size() : wp.crop_size());
    if (crop_ <= 0) Fail("transform_param.crop_size must be positive (the windows' size)");
    if (wp.context_pad() * 2 >= static_cast<uint32_t>(crop_))
      Fail("window_data_param.context_pad " + std::to_string(wp.context_pad()) +
           " leaves no window inside crop_size " + std::to_string(crop_));
    if (wp.crop_mode() != "warp" && wp.crop_mode() != "square")
      Fail("window_data_param.crop_mode '" + wp.crop_mode() + "' is neither warp nor square");
    for (const auto& [name, v] : {std::pair<const char*, float>{"fg_threshold", wp.fg_threshold()},
                                  {"bg_threshold", wp.bg_threshold()},
                                  {"fg_fraction", wp.fg_fraction()}})
      if (!(v >= 0 && v <= 1))
        Fail(std::string("window_data_param.") + name + " " + std::to_string(v) +
             " is outside [0, 1]");
    mirror_ = tp.mirror() || wp.mirror();
    scale_ = tp.has_scale() ? tp.scale() : wp.scale();
    ReadWindowFile();
    ReadMean();
    rng_.seed(static_cast<uint32_t>(StableHash(name() + "#windows", RandomSeed())));
    top[0]->Reshape({batch_, channels_, crop_, crop_});
    top[1]->Reshape({batch_});
  }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const auto& wp = param_.window_data_param();
    const int fg = static_cast<int>(wp.fg_fraction() * batch_);
    const int count[2] = {batch_ - fg, fg};  // background first, as BVLC
    const size_t item = static_cast<size_t>(channels_) * crop_ * crop_;
    std::vector<float> data(item * batch_, 0.0f), label(batch_);
    int n = 0;
    for (int is_fg = 0; is_fg < 2; ++is_fg) {
      const std::vector<Window>& pool = is_fg ? fg_ : bg_;
      if (count[is_fg] > 0 && pool.empty())
        Fail(std::string("the window file '") + wp.source() + "' has no " +
             (is_fg ? "foreground" : "background") + " window (overlap " +
             (is_fg ? ">= fg_threshold" : "< bg_threshold") + ") to sample from");
      for (int k = 0; k < count[is_fg]; ++k, ++n) {
        const Window& w = pool[rng_() % pool.size()];
        const bool flip = mirror_ && (rng_() % 2);
        CutWindow(w, flip, data.data() + n * item);
        label[n] = static_cast<float>(w.label);
      }
    }
    top[0]->FromFloat(data);
    top[1]->FromFloat(label);
  }

 private:
  void ReadWindowFile() {
    const auto& wp = param_.window_data_param();
    if (wp.source().empty()) Fail("window_data_param.source (the window file) is not set");
    std::ifstream in(wp.source());
    if (!in) Fail("cannot open the window file '" + wp.source() + "'");
    WordReader r(in, wp.source());
    try {
      while (!r.done()) {
        const std::string hash = r.Word("'#'");
        if (hash != "#")
          throw Error(r.Where(-1) + ": expected '# <image index>', found '" + hash + "'");
        const long index = r.Int("the image index");
        if (index != static_cast<long>(images_.size()))
          throw Error(r.Where(-1) + ": image index " + std::to_string(index) + ", expected " +
                      std::to_string(images_.size()) + " (images are numbered from 0 in order)");
        ListedWindowImage image;
        image.path = wp.root_folder() + r.Word("the image path");
        image.line = r.LastLine();
        const long c = r.Int("the channels"), h = r.Int("the height"), w = r.Int("the width");
        if (c <= 0 || h <= 0 || w <= 0)
          throw Error(r.Where(-1) + ": image size " + std::to_string(c) + " " + std::to_string(h) +
                      " " + std::to_string(w) + " must be positive");
        if (images_.empty()) channels_ = static_cast<int>(c);
        const long windows = r.Int("the number of windows");
        if (windows < 0) throw Error(r.Where(-1) + ": negative number of windows");
        for (long k = 0; k < windows; ++k) {
          Window win;
          win.image = static_cast<int>(images_.size());
          win.label = static_cast<int>(r.Int("a window's class"));
          const std::string at = r.Where(-1);
          win.overlap = r.Float("a window's overlap");
          win.x1 = static_cast<int>(r.Int("x1")), win.y1 = static_cast<int>(r.Int("y1"));
          win.x2 = static_cast<int>(r.Int("x2")), win.y2 = static_cast<int>(r.Int("y2"));
          if (win.x2 < win.x1 || win.y2 < win.y1 || win.x1 < 0 || win.y1 < 0 || win.x2 >= w ||
              win.y2 >= h)
            throw Error(at + ": window " + std::to_string(win.x1) + " " + std::to_string(win.y1) +
                        " " + std::to_string(win.x2) + " " + std::to_string(win.y2) +
                        " does not lie in the " + std::to_string(w) + "x" + std::to_string(h) +
                        " image");
          if (win.overlap >= wp.fg_threshold()) {
            if (win.label <= 0)
              throw Error(at + ": a foreground window (overlap " + std::to_string(win.overlap) +
                          ") needs a class above 0, got " + std::to_string(win.label));
            fg_.push_back(win);
          } else if (win.overlap < wp.bg_threshold()) {
            win.label = 0, win.overlap = 0;
            bg_.push_back(win);
          }
        }
        images_.push_back(image);
      }
    } catch (const LayerError&) {
      throw;
    } catch (const Error& e) {
      Fail(e.what());
    }
    if (images_.empty()) Fail("the window file '" + wp.source() + "' lists no image");
  }

  void ReadMean() {
    const auto& tp = param_.transform_param();
    const auto& wp = param_.window_data_param();
    const std::string file = tp.has_mean_file() ? tp.mean_file() : wp.mean_file();
    if (!file.empty() && tp.mean_value_size())
      Fail("give transform_param.mean_file or mean_value, not both");
    if (tp.mean_value_size()) {
      if (tp.mean_value_size() != 1 && tp.mean_value_size() != channels_)
        Fail("transform_param.mean_value needs 1 or " + std::to_string(channels_) + " values");
      for (int c = 0; c < channels_; ++c)
        mean_values_.push_back(tp.mean_value(tp.mean_value_size() == 1 ? 0 : c));
    }
    if (file.empty()) return;
    caffe::BlobProto mean;
    try {
      mean = ReadBlobProtoBinary(file);
    } catch (const Error& e) {
      Fail(std::string("mean file: ") + e.what());
    }
    std::vector<int64_t> dims(mean.shape().dim().begin(), mean.shape().dim().end());
    if (dims.empty()) dims = {mean.num(), mean.channels(), mean.height(), mean.width()};
    while (dims.size() > 3 && dims.front() == 1) dims.erase(dims.begin());
    if (dims.size() != 3 || dims[0] != channels_ || dims[1] != dims[2] || dims[1] < crop_ ||
        static_cast<int64_t>(mean.data_size()) != dims[0] * dims[1] * dims[2])
      Fail("mean file '" + file + "' must hold a square " + std::to_string(channels_) +
           "-channel mean at least crop_size " + std::to_string(crop_) + " wide (BVLC's)");
    mean_size_ = static_cast<int>(dims[1]);
    mean_.assign(mean.data().begin(), mean.data().end());
  }

  const Image& Load(int index) {
    auto it = cache_.find(index);
    if (it != cache_.end()) return it->second;
    const ListedWindowImage& li = images_[index];
    Image image;
    try {
      image = ReadImage(li.path, 0, 0, true);
    } catch (const Error& e) {
      Fail("window file '" + param_.window_data_param().source() + "' line " +
           std::to_string(li.line) + ": " + e.what());
    }
    if (image.channels != channels_)
      Fail("image '" + li.path + "' decodes to " + std::to_string(image.channels) +
           " channels, the window file says " + std::to_string(channels_));
    // cache_images keeps every image; otherwise only the last one is kept.
    if (!param_.window_data_param().cache_images()) cache_.clear();
    return cache_.emplace(index, std::move(image)).first->second;
  }

  /// BVLC's window cut: the window grown by context_pad (and squared in crop_mode square),
  /// clipped to the image, resized so that the unclipped window would fill crop × crop, placed
  /// at the offset its clipped part leaves (mirrored: from the other side), then mean and scale.
  void CutWindow(const Window& w, bool flip, float* out) {
    const auto& wp = param_.window_data_param();
    const Image& image = Load(w.image);
    int x1 = w.x1, y1 = w.y1, x2 = w.x2, y2 = w.y2;
    int crop_w = crop_, crop_h = crop_, pad_w = 0, pad_h = 0;
    const int pad = static_cast<int>(wp.context_pad());
    if (pad > 0 || wp.crop_mode() == "square") {
      const double context = static_cast<double>(crop_) / (crop_ - 2 * pad);
      double half_h = (y2 - y1 + 1) / 2.0, half_w = (x2 - x1 + 1) / 2.0;
      const double cx = x1 + half_w, cy = y1 + half_h;
      if (wp.crop_mode() == "square") half_h = half_w = std::max(half_h, half_w);
      x1 = static_cast<int>(std::round(cx - half_w * context));
      x2 = static_cast<int>(std::round(cx + half_w * context));
      y1 = static_cast<int>(std::round(cy - half_h * context));
      y2 = static_cast<int>(std::round(cy + half_h * context));
      const int unclipped_h = y2 - y1 + 1, unclipped_w = x2 - x1 + 1;
      int pad_x1 = std::max(0, -x1), pad_y1 = std::max(0, -y1);
      int pad_x2 = std::max(0, x2 - image.width + 1), pad_y2 = std::max(0, y2 - image.height + 1);
      x1 += pad_x1, x2 -= pad_x2, y1 += pad_y1, y2 -= pad_y2;
      const double sx = static_cast<double>(crop_) / unclipped_w;
      const double sy = static_cast<double>(crop_) / unclipped_h;
      crop_w = static_cast<int>(std::round((x2 - x1 + 1) * sx));
      crop_h = static_cast<int>(std::round((y2 - y1 + 1) * sy));
      pad_x1 = static_cast<int>(std::round(pad_x1 * sx));
      pad_x2 = static_cast<int>(std::round(pad_x2 * sx));
      pad_y1 = static_cast<int>(std::round(pad_y1 * sy));
      pad_h = pad_y1;
      pad_w = flip ? pad_x2 : pad_x1;
      crop_h = std::max(1, std::min(crop_h, crop_ - pad_h));
      crop_w = std::max(1, std::min(crop_w, crop_ - pad_w));
    }
    Image roi(y2 - y1 + 1, x2 - x1 + 1, image.channels);
    for (int y = 0; y < roi.height; ++y)
      std::copy(image.row(y1 + y) + x1 * image.channels,
                image.row(y1 + y) + (x2 + 1) * image.channels, roi.row(y));
    Image cut;
    try {
      cut = ResizeImage(roi, crop_h, crop_w);
    } catch (const Error& e) {
      Fail(std::string("image '") + images_[w.image].path + "': " + e.what());
    }
    const int mean_off = mean_.empty() ? 0 : (mean_size_ - crop_) / 2;
    for (int c = 0; c < channels_; ++c)
      for (int h = 0; h < crop_h; ++h)
        for (int x = 0; x < crop_w; ++x) {
          const int sx = flip ? crop_w - 1 - x : x;
          float v = cut.at(h, sx, c);
          if (!mean_.empty())
            v -= mean_[(static_cast<size_t>(c) * mean_size_ + h + mean_off + pad_h) * mean_size_ +
                       x + mean_off + pad_w];
          else if (!mean_values_.empty())
            v -= mean_values_[c];
          out[(static_cast<size_t>(c) * crop_ + h + pad_h) * crop_ + x + pad_w] = v * scale_;
        }
  }

  int batch_ = 0, crop_ = 0, channels_ = 0, mean_size_ = 0;
  bool mirror_ = false;
  float scale_ = 1.0f;
  std::vector<ListedWindowImage> images_;
  std::vector<Window> fg_, bg_;
  std::vector<float> mean_, mean_values_;
  std::map<int, Image> cache_;
  std::mt19937 rng_;
};

}  // namespace

std::unique_ptr<Layer> CreateWindowDataLayer(const caffe::LayerParameter& param, Device& device) {
  return std::make_unique<WindowDataLayer>(param, device);
}

}  // namespace mpcaffe
