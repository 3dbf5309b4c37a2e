// layers/layer_registry.cc — the type-name → creator table of layers.
#include "layers/layer_registry.h"

#include <map>
#include <mutex>

namespace mpcaffe {

namespace {

std::map<std::string, LayerCreator>& Table() {
  static std::map<std::string, LayerCreator> table;
  return table;
}

std::recursive_mutex& TableMutex() {
  static std::recursive_mutex m;
  return m;
}

void RegisterBuiltins() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterInputLayers();
    RegisterNeuronLayers();
    RegisterStructureLayers();
    RegisterEltwiseLayer();
    RegisterNormalizationLayers();
    RegisterSoftmaxLayers();
    RegisterQuantizerLayer();
    RegisterInnerProductLayer();
    RegisterConvolutionLayer();
    RegisterPoolingLayer();
    RegisterLRNLayer();
  });
}

}  // namespace

void RegisterLayer(const std::string& type, LayerCreator creator) {
  std::lock_guard<std::recursive_mutex> lock(TableMutex());
  if (!Table().emplace(type, std::move(creator)).second)
    throw LayerError("layer type '" + type + "' registered twice");
}

std::unique_ptr<Layer> CreateLayer(const caffe::LayerParameter& param, Device& device) {
  RegisterBuiltins();
  LayerCreator creator;
  {
    std::lock_guard<std::recursive_mutex> lock(TableMutex());
    auto it = Table().find(param.type());
    if (it == Table().end() && param.type() == "Python")
      throw LayerError("layer '" + param.name() + "': Python layers run only from the mpcaffe "
                       "Python package (import mpcaffe registers them); this program has no "
                       "Python interpreter");
    if (it == Table().end()) {
      std::string known;
      for (const auto& [name, c] : Table()) known += (known.empty() ? "" : ", ") + name;
      throw LayerError("layer '" + param.name() + "': unknown layer type '" + param.type() +
                       "' (known types: " + known + ")");
    }
    creator = it->second;
  }
  return creator(param, device);
}

std::vector<std::string> LayerTypes() {
  RegisterBuiltins();
  std::lock_guard<std::recursive_mutex> lock(TableMutex());
  std::vector<std::string> names;
  for (const auto& [name, c] : Table()) names.push_back(name);
  return names;
}

}  // namespace mpcaffe
