// tools/image_scores.h — a classification net's scores for preprocessed photographs
// (tools/image_samples.h), shared by `mpcaffe classify` and the report of `mpcaffe calibrate
// --images`: batched passes of the net, the top classes of a row, the label file.
#pragma once

#include <algorithm>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "net/net.h"
#include "tools/command.h"
#include "tools/npy_file.h"

namespace mpcaffe::tools {

/// One row of class scores per image.
struct ClassScores {
  std::string output;  // the blob they were read from
  int classes = 0;
  std::vector<float> values;  // images × classes
  const float* row(size_t image) const { return values.data() + image * classes; }
  size_t images() const { return classes ? values.size() / classes : 0; }
};

/// The first output of `net` that holds one row of class scores per image, or null.
inline const Blob* ScoresOutput(const Net& net) {
  for (const Blob* out : net.output_blobs())
    if (out->num_axes() >= 2 && out->shape(0) > 0 && out->count() / out->shape(0) > 1) return out;
  return nullptr;
}

/// Runs `net` (one N×C×H×W Input) over `samples` in batches of the input's batch size, the
/// last one smaller (the input is reshaped; Net::Forward reshapes the layers after it), and
/// returns the scores. `after_batch(images_done)` is called after each pass.
template <typename Progress>
ClassScores ScoreImages(Net& net, const NpyArray& samples, const std::string& model,
                        Progress after_batch) {
  if (net.input_blobs().size() != 1)
    throw Error(model + ": classifying images needs a net with one Input layer, it has " +
                std::to_string(net.input_blobs().size()));
  Blob& in = *net.input_blobs()[0];
  const int64_t n = samples.shape.at(0);
  const size_t sample = samples.values.size() / static_cast<size_t>(n);
  std::vector<int> shape = in.shape();
  const int batch = std::max(1, shape.at(0));
  ClassScores out;
  for (int64_t first = 0; first < n; first += batch) {
    const int rows = static_cast<int>(std::min<int64_t>(batch, n - first));
    shape[0] = rows;
    if (in.shape() != shape) in.Reshape(shape);
    in.FromFloat(std::vector<float>(samples.values.begin() + first * sample,
                                    samples.values.begin() + (first + rows) * sample));
    net.Forward();
    const Blob* scores = ScoresOutput(net);
    if (!scores)
      throw Error(model + ": no output of the net holds a row of class scores per image");
    out.output = scores->name();
    out.classes = scores->count() / scores->shape(0);
    const std::vector<float> v = scores->ToFloat();
    out.values.insert(out.values.end(), v.begin(), v.end());
    after_batch(static_cast<int>(first + rows));
  }
  return out;
}

/// The `k` best classes of a row of scores, best first (ties: the lower class first).
inline std::vector<int> TopClasses(const float* row, int classes, int k) {
  std::vector<int> order(classes);
  std::iota(order.begin(), order.end(), 0);
  k = std::min(k, classes);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  order.resize(k);
  return order;
}

/// A label file (BVLC's synset_words.txt: one label per line, class i on line i + 1).
inline std::vector<std::string> ReadLabels(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("--labels '" + path + "': cannot open the file");
  std::vector<std::string> labels;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    labels.push_back(line);
  }
  return labels;
}

}  // namespace mpcaffe::tools
