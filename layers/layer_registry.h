// layers/layer_registry.h — creating layers by type name ("ReLU", "Convolution", ...) from a
// LayerParameter; an unknown type is an error naming the layer and listing the known types.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace mpcaffe {

using LayerCreator =
    std::function<std::unique_ptr<Layer>(const caffe::LayerParameter&, Device&)>;

/// Which data-type fields of a LayerParameter say what a layer type reads and writes. The net's
/// conversion pass reads them before any layer exists. The default is a regular layer: it reads
/// and writes compute_data_type, and the net converts its tops to top_data_type after it.
struct LayerTyping {
  /// Bottoms are read in bottom_data_type (a converting layer), not in compute_data_type.
  bool reads_bottom_type = false;
  /// Tops are written in top_data_type by the layer itself (no conversion after it).
  bool writes_top_type = false;
  /// Tops from this index on are fp32 whatever the fields say (counts, losses); -1: none.
  int fp32_tops_from = -1;
};

/// Registers `creator` for `type`; registering a type twice throws LayerError.
void RegisterLayer(const std::string& type, LayerCreator creator, LayerTyping typing = {});

/// The typing `type` was registered with (the default for an unknown type: creating the layer
/// reports it).
LayerTyping TypingOf(const std::string& type);

/// Adds the registration function of layers defined above layers/ (layers that nest Nets, in
/// net/) to the built-in groups: it runs with them, once, before the registry is first used
/// (at once when that has happened). Called from a static initializer of the library defining
/// the layers.
void AddBuiltinLayerGroup(void (*register_group)());

/// Creates the layer `param.type()` names (not yet set up). Throws LayerError naming the layer
/// and listing the known types when the type is unknown.
std::unique_ptr<Layer> CreateLayer(const caffe::LayerParameter& param, Device& device);

/// The registered type names, sorted.
std::vector<std::string> LayerTypes();

/// Registration functions of the built-in layer groups (called once by the registry; listed
/// here so a static library keeps every group's object file).
void RegisterInputLayers();
void RegisterNeuronLayers();
void RegisterActivationLayers();
void RegisterStructureLayers();
void RegisterEltwiseLayer();
void RegisterNormalizationLayers();
void RegisterSoftmaxLayers();
void RegisterLossLayers();
void RegisterQuantizerLayer();
void RegisterInnerProductLayer();
void RegisterConvolutionLayer();
void RegisterPoolingLayer();
void RegisterLRNLayer();
void RegisterReductionLayers();
void RegisterHdf5Layers();
void RegisterLstmUnitLayer();
void RegisterIndexLayers();

/// Helper for the registration functions: `RegisterLayerType<ReLULayer>("ReLU")`.
template <typename L>
void RegisterLayerType(const std::string& type, LayerTyping typing = {}) {
  RegisterLayer(
      type,
      [](const caffe::LayerParameter& p, Device& d) -> std::unique_ptr<Layer> {
        return std::make_unique<L>(p, d);
      },
      typing);
}

}  // namespace mpcaffe
