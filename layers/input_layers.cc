// layers/input_layers.cc — Input (tops of given shapes, filled by the user); the registration
// of Input and of the LMDB Data layer (layers/data_layer.cc).

#include <cstdint>

#include "layers/layer_registry.h"

namespace mpcaffe {
namespace {

class InputLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Input"; }
  bool SupportsType(DataType) const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const auto& p = param_.input_param();
    const int shapes = p.shape_size();
    if (shapes != 1 && shapes != static_cast<int>(top.size()))
      Fail("input_param needs one shape, or one per top (" + std::to_string(top.size()) +
           "), got " + std::to_string(shapes));
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    // Input tops keep the shape the user gave them after set-up (BVLC: reshaped only once).
    if (shaped_) return;
    const auto& p = param_.input_param();
    for (size_t i = 0; i < top.size(); ++i) {
      const auto& s = p.shape(p.shape_size() == 1 ? 0 : static_cast<int>(i));
      std::vector<int> shape;
      for (int64_t d : s.dim()) {
        if (d < 0 || d > INT32_MAX)
          Fail("input_param shape " + std::to_string(i) + ": dimension " + std::to_string(d) +
               " is out of range [0, 2^31-1]");
        shape.push_back(static_cast<int>(d));
      }
      top[i]->Reshape(shape);
    }
    shaped_ = true;
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}

 private:
  bool shaped_ = false;
};

}  // namespace

/// The LMDB Data layer (layers/data_layer.cc).
std::unique_ptr<Layer> CreateDataLayer(const caffe::LayerParameter& param, Device& device);

void RegisterInputLayers() {
  RegisterLayerType<InputLayer>("Input");
  RegisterLayer("Data", CreateDataLayer);
}

}  // namespace mpcaffe
