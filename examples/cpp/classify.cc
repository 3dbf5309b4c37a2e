// examples/cpp/classify.cc — int8 inference with the installed mpcaffe library: loads a typed
// prototxt (`mpcaffe convert` or `mpcaffe calibrate --output-model` writes one) and its
// caffemodel, runs it on the device the user names and prints the top classes of each image.
//
//   classify <typed.prototxt> <weights.caffemodel> [--device pocl|intel|gpu|<index>]
//            [--input x.f32] [--top 5]
//
// x.f32 holds raw float32 values in the net's input shape (numpy: x.astype('float32').tofile());
// nets with a Data layer read their own inputs. When the caffemodel has no quantizer ranges
// (plain fp32 weights), they are observed on this input first.
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
    std::fprintf(stderr, "usage: classify <typed.prototxt> <weights.caffemodel> [--device d] "
                         "[--input x.f32] [--top K]   (mpcaffe %s)\n", MPCAFFE_VERSION);
    return 2;
  }
  try {
    mpcaffe::Device& device = mpcaffe::DeviceOrDefault(flag("--device", ""));
    const caffe::NetParameter param = mpcaffe::ReadNetParameterText(args[0]);
    mpcaffe::Net net(param, device);  // TEST phase
    net.CopyTrainedLayersFrom(args[1]);

    const std::string input = flag("--input", "");
    if (!input.empty()) {  // raw float32 values into the net's (first) Input blob
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
