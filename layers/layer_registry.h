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

/// Registers `creator` for `type`; registering a type twice throws LayerError.
void RegisterLayer(const std::string& type, LayerCreator creator);

/// Creates the layer `param.type()` names (not yet set up). Throws LayerError naming the layer
/// and listing the known types when the type is unknown.
std::unique_ptr<Layer> CreateLayer(const caffe::LayerParameter& param, Device& device);

/// The registered type names, sorted.
std::vector<std::string> LayerTypes();

/// Registration functions of the built-in layer groups (called once by the registry; listed
/// here so a static library keeps every group's object file).
void RegisterInputLayers();
void RegisterNeuronLayers();
void RegisterStructureLayers();
void RegisterEltwiseLayer();
void RegisterNormalizationLayers();
void RegisterSoftmaxLayers();
void RegisterQuantizerLayer();
void RegisterInnerProductLayer();
void RegisterConvolutionLayer();
void RegisterPoolingLayer();
void RegisterLRNLayer();

/// Helper for the registration functions: `RegisterLayerType<ReLULayer>("ReLU")`.
template <typename L>
void RegisterLayerType(const std::string& type) {
  RegisterLayer(type, [](const caffe::LayerParameter& p, Device& d) -> std::unique_ptr<Layer> {
    return std::make_unique<L>(p, d);
  });
}

}  // namespace mpcaffe
