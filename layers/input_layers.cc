// layers/input_layers.cc — Input (tops of given shapes, filled by the user) and Data (LMDB
// sources: a missing source is an error naming the layer and path; see Net's --synthetic).
#include <sys/stat.h>

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
      std::vector<int> shape(s.dim().begin(), s.dim().end());
      top[i]->Reshape(shape);
    }
    shaped_ = true;
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}

 private:
  bool shaped_ = false;
};

class DataLayer : public Layer {
 public:
  DataLayer(const caffe::LayerParameter& p, Device& d) : Layer(p, d) {
    const std::string& source = param_.data_param().source();
    struct stat st;
    if (source.empty() || stat(source.c_str(), &st) != 0)
      Fail("data source '" + source +
           "' does not exist (to run without it, replace Data layers by random Inputs: "
           "`--synthetic` on the command line, NetOptions::synthetic_data in C++)");
    Fail("data source '" + source +
         "' exists, but reading LMDB/LevelDB databases is not implemented in mpcaffe yet; "
         "use an Input layer, or --synthetic for benchmarks");
  }
  const char* type() const override { return "Data"; }
  bool SupportsType(DataType) const override { return true; }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}
};

}  // namespace

void RegisterInputLayers() {
  RegisterLayerType<InputLayer>("Input");
  RegisterLayerType<DataLayer>("Data");
}

}  // namespace mpcaffe
