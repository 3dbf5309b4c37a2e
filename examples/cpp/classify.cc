// examples/cpp/classify.cc — int8 inference with the installed mpcaffe library: loads a typed
// prototxt (`mpcaffe convert` or `mpcaffe calibrate --output-model` writes one) and its
// caffemodel, runs it on the device the user names and prints the top classes of each image.
//
//   classify <typed.prototxt> <weights.caffemodel> [--device pocl|intel|gpu|<index>]
//            [--input x.f32 | --image a.jpg [--image b.png ...] [--mean-file mean.binaryproto |
//             --mean-value V[,V,V]] [--scale S]] [--top 5]
//
// x.f32 holds raw float32 values in the net's input shape (numpy: x.astype('float32').tofile());
// --image reads photographs as BVLC's cpp_classification does: decoded by OpenCV (BGR, or gray
// for a one-channel net), resized to the input's height and width, the mean subtracted (a
// mean.binaryproto's per-channel means, or the values given), times --scale; the batch is the
// number of images. Nets with a Data layer read their own inputs. When the caffemodel has no
// quantizer ranges (plain fp32 weights), they are observed on this input first.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <mpcaffe/mpcaffe.h>

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto flag = [&](const std::string& name, const std::string& fallback) {
    auto it = std::find(args.begin(), args.end(), name);
    return it != args.end() && it + 1 != args.end() ? *(it + 1) : fallback;
  };
  if (args.size() < 2 || args[0] == "--help") {
    std::fprintf(stderr,
                 "usage: classify <typed.prototxt> <weights.caffemodel> [--device d] "
                 "[--input x.f32 | --image FILE ... [--mean-file F | --mean-value V,..] "
                 "[--scale S]] [--top K]   (mpcaffe %s)\n",
                 MPCAFFE_VERSION);
    return 2;
  }
  try {
    mpcaffe::Device& device = mpcaffe::DeviceOrDefault(flag("--device", ""));
    const caffe::NetParameter param = mpcaffe::ReadNetParameterText(args[0]);
    mpcaffe::Net net(param, device);  // TEST phase
    net.CopyTrainedLayersFrom(args[1]);

    std::vector<std::string> image_files;
    for (size_t i = 2; i + 1 < args.size(); ++i)
      if (args[i] == "--image") image_files.push_back(args[++i]);
    const std::string input = flag("--input", "");
    if (!image_files.empty()) {
      if (net.input_blobs().empty()) throw mpcaffe::Error(args[0] + " has no Input layer");
      mpcaffe::Blob& in = *net.input_blobs()[0];
      const int c = in.shape(1), h = in.shape(2), w = in.shape(3);
      std::vector<float> mean(c, 0.0f);
      if (const std::string file = flag("--mean-file", ""); !file.empty()) {
        const caffe::BlobProto m = mpcaffe::ReadBlobProtoBinary(file);
        if (m.channels() != c || m.data_size() == 0 || m.data_size() % c != 0)
          throw mpcaffe::Error(file + ": a mean of " + std::to_string(m.channels()) +
                               " channels for a net of " + std::to_string(c));
        const int plane = m.data_size() / c;  // BVLC: the mean image's per-channel means
        for (int k = 0; k < c; ++k)
          for (int i = 0; i < plane; ++i) mean[k] += m.data(k * plane + i) / plane;
      } else if (const std::string v = flag("--mean-value", ""); !v.empty()) {
        std::vector<float> given;
        for (size_t at = 0; at <= v.size();) {
          const size_t comma = std::min(v.find(',', at), v.size());
          given.push_back(std::stof(v.substr(at, comma - at)));
          at = comma + 1;
        }
        if (given.size() != 1 && static_cast<int>(given.size()) != c)
          throw mpcaffe::Error("--mean-value: give 1 or " + std::to_string(c) + " values");
        for (int k = 0; k < c; ++k) mean[k] = given[given.size() == 1 ? 0 : k];
      }
      const float scale = std::stof(flag("--scale", "1"));
      std::vector<float> values;
      for (const std::string& path : image_files) {
        const mpcaffe::Image image = mpcaffe::ReadImage(path, h, w, c == 3);
        for (int k = 0; k < c; ++k)
          for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) values.push_back((image.at(y, x, k) - mean[k]) * scale);
      }
      in.Reshape({static_cast<int>(image_files.size()), c, h, w});  // Forward reshapes the rest
      in.FromFloat(values);
    } else if (!input.empty()) {  // raw float32 values into the net's (first) Input blob
      if (net.input_blobs().empty()) throw mpcaffe::Error(args[0] + " has no Input layer");
      mpcaffe::Blob& in = *net.input_blobs()[0];
      std::vector<float> values(in.count());
      std::ifstream f(input, std::ios::binary);
      if (!f.read(reinterpret_cast<char*>(values.data()), values.size() * sizeof(float)))
        throw mpcaffe::Error(input + ": fewer than the " + std::to_string(values.size()) +
                             " float32 values of input '" + in.name() + "' (" +
                             in.shape_string() + ")");
      in.FromFloat(values);
    }
    if (!net.QuantizersWithoutRange().empty())  // fp32 weights: observe the ranges here
      mpcaffe::CalibrateWithFloatVariant(net, param, {});

    net.Forward();
    // The layers as built (with the Quantizer layers the net inserted), each with its type.
    const caffe::NetParameter& built = net.built_param();
    int int8_layers = 0;
    for (const caffe::LayerParameter& layer : built.layer())
      int8_layers += layer.compute_data_type() == caffe::CAFFE_INT8_QUANTIZED;
    std::printf("%s on %s: %d of %d layers compute in int8\n", net.name().c_str(),
                device.Describe().c_str(), int8_layers, built.layer_size());

    // The scores: the first output with one row of classes per image.
    const mpcaffe::Blob* scores = nullptr;
    for (const mpcaffe::Blob* out : net.output_blobs())
      if (!scores && out->num_axes() >= 2 && out->count() / out->shape(0) > 1) scores = out;
    if (!scores) throw mpcaffe::Error(args[0] + ": no output holds per-image class scores");
    const std::vector<float> v = scores->ToFloat();
    const int images = scores->shape(0), classes = scores->count() / images;
    const int top = std::min(classes, std::stoi(flag("--top", "5")));
    for (int i = 0; i < images; ++i) {
      const float* row = v.data() + static_cast<size_t>(i) * classes;
      std::vector<int> order(classes);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top, order.end(),
                        [&](int a, int b) { return row[a] > row[b]; });
      std::printf("image %d:", i);
      for (int k = 0; k < top; ++k) std::printf(" class %d (%.4f)", order[k], row[order[k]]);
      std::printf("\n");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 1;
  }
}
