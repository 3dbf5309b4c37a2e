// layers/layer_registry.cc — the type-name → creator table of layers.
#include "layers/layer_registry.h"

#include <map>
#include <mutex>
#include <vector>

namespace mpcaffe {

namespace {

struct Entry {
  LayerCreator create;
  LayerTyping typing;
};

std::map<std::string, Entry>& Table() {
  static std::map<std::string, Entry> table;
  return table;
}

/// The groups added by AddBuiltinLayerGroup, and whether the built-ins were registered.
std::vector<void (*)()>& AddedGroups() {
  static std::vector<void (*)()> groups;
  return groups;
}
bool& BuiltinsRegistered() {
  static bool done = false;
  return done;
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
    RegisterActivationLayers();
    RegisterStructureLayers();
    RegisterEltwiseLayer();
    RegisterNormalizationLayers();
    RegisterSoftmaxLayers();
    RegisterLossLayers();
    RegisterQuantizerLayer();
    RegisterInnerProductLayer();
    RegisterConvolutionLayer();
    RegisterPoolingLayer();
    RegisterLRNLayer();
    RegisterReductionLayers();
    RegisterHdf5Layers();
    RegisterLstmUnitLayer();
    RegisterIndexLayers();
    std::lock_guard<std::recursive_mutex> lock(TableMutex());
    for (auto* group : AddedGroups()) group();
    BuiltinsRegistered() = true;
  });
}

}  // namespace

void RegisterLayer(const std::string& type, LayerCreator creator, LayerTyping typing) {
  std::lock_guard<std::recursive_mutex> lock(TableMutex());
  if (!Table().emplace(type, Entry{std::move(creator), typing}).second)
    throw LayerError("layer type '" + type + "' registered twice");
}

void AddBuiltinLayerGroup(void (*register_group)()) {
  std::lock_guard<std::recursive_mutex> lock(TableMutex());
  if (BuiltinsRegistered()) {
    register_group();
    return;
  }
  AddedGroups().push_back(register_group);
}

LayerTyping TypingOf(const std::string& type) {
  RegisterBuiltins();
  std::lock_guard<std::recursive_mutex> lock(TableMutex());
  auto it = Table().find(type);
  return it == Table().end() ? LayerTyping{} : it->second.typing;
}

std::unique_ptr<Layer> CreateLayer(const caffe::LayerParameter& param, Device& device) {
  RegisterBuiltins();
  LayerCreator creator;
  {
    std::lock_guard<std::recursive_mutex> lock(TableMutex());
    auto it = Table().find(param.type());
    if (it == Table().end() && param.type() == "Python")
      throw LayerError("layer '" + param.name() + "': Python layers run only with a Python "
                       "interpreter: from the mpcaffe package (import mpcaffe), or as "
                       "`python -m mpcaffe <command>` (train, test, time, calibrate)");
    if (it == Table().end()) {
      std::string known;
      for (const auto& [name, c] : Table()) known += (known.empty() ? "" : ", ") + name;
      throw LayerError("layer '" + param.name() + "': unknown layer type '" + param.type() +
                       "' (known types: " + known + ")");
    }
    creator = it->second.create;
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
