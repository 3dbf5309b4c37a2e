// layers/input_layers.cc — Input (tops of given shapes, filled by the user), DummyData (tops
// filled by fillers); the registration of those, of the LMDB Data layer (layers/data_layer.cc),
// of the ImageData, MemoryData and WindowData layers (layers/image_data_layer.cc,
// memory_data_layer.cc, window_data_layer.cc).

#include <cstdint>

#include "layers/layer_registry.h"
#include "layers/memory_data_layer.h"

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

/// DummyData (BVLC): tops of given shapes filled by data_filler (default constant 0); constant
/// fillers fill once, the others on every Forward. Float types.
class DummyDataLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "DummyData"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const auto& p = param_.dummy_data_param();
    const int n = static_cast<int>(top.size());
    const int shapes = p.shape_size() ? p.shape_size() : p.num_size();
    if (shapes != 1 && shapes != n)
      Fail("dummy_data_param needs 1 or " + std::to_string(n) + " shapes, got " + std::to_string(shapes));
    if (p.data_filler_size() > 1 && p.data_filler_size() != n)
      Fail("dummy_data_param needs 0, 1 or " + std::to_string(n) + " data_filler, got " +
           std::to_string(p.data_filler_size()));
    filled_.assign(n, false);
  }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const auto& p = param_.dummy_data_param();
    for (size_t i = 0; i < top.size(); ++i) {
      const int s = (p.shape_size() ? p.shape_size() : p.num_size()) == 1 ? 0 : static_cast<int>(i);
      std::vector<int> shape;
      if (p.shape_size()) {
        for (auto d : p.shape(s).dim()) shape.push_back(static_cast<int>(d));
      } else {
        auto at = [s](const google::protobuf::RepeatedField<uint32_t>& f) {
          return f.size() ? static_cast<int>(f.Get(f.size() == 1 ? 0 : s)) : 1;
        };
        shape = {at(p.num()), at(p.channels()), at(p.height()), at(p.width())};
      }
      if (top[i]->shape() != shape) filled_[i] = false;
      top[i]->Reshape(shape);
    }
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const auto& p = param_.dummy_data_param();
    for (size_t i = 0; i < top.size(); ++i) {
      caffe::FillerParameter f;
      f.set_type("constant");
      f.set_value(0.0f);
      if (p.data_filler_size()) f = p.data_filler(p.data_filler_size() == 1 ? 0 : static_cast<int>(i));
      const bool constant = f.type() == "constant";
      if (constant && filled_[i]) continue;
      const uint64_t seed = StableHash(name() + "#" + std::to_string(i) + "#" + std::to_string(draws_), RandomSeed());
      top[i]->FromFloat(FillValues(f, top[i]->shape(), seed, Describe()));
      filled_[i] = true;
    }
    ++draws_;
  }

 private:
  std::vector<bool> filled_;
  uint64_t draws_ = 0;
};

}  // namespace

/// The LMDB Data layer (layers/data_layer.cc).
std::unique_ptr<Layer> CreateDataLayer(const caffe::LayerParameter& param, Device& device);
/// The ImageData layer: images listed in a file, read with OpenCV (layers/image_data_layer.cc).
std::unique_ptr<Layer> CreateImageDataLayer(const caffe::LayerParameter& param, Device& device);
/// The WindowData layer: windows of images listed in a window file (layers/window_data_layer.cc).
std::unique_ptr<Layer> CreateWindowDataLayer(const caffe::LayerParameter& param, Device& device);

void RegisterInputLayers() {
  // Sources write their tops in top_data_type.
  LayerTyping source;
  source.writes_top_type = true;
  RegisterLayerType<InputLayer>("Input", source);
  RegisterLayer("Data", CreateDataLayer, source);
  RegisterLayer("ImageData", CreateImageDataLayer, source);
  RegisterLayerType<MemoryDataLayer>("MemoryData", source);
  RegisterLayer("WindowData", CreateWindowDataLayer, source);
  RegisterLayerType<DummyDataLayer>("DummyData");
}

}  // namespace mpcaffe
