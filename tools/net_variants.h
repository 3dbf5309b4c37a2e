// tools/net_variants.h — the variants of an fp32 net definition that `mpcaffe bench net` and
// `mpcaffe tune --model` build: another batch size on the input layers, every layer rewritten to
// one data type (the paper's typed prototxts), random inputs, and quantized variants calibrated by
// an OBSERVE pass of the fp32 net.
#pragma once

#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include "layers/layer.h"
#include "layers/layer_registry.h"
#include "device/settings.h"
#include "net/net.h"
#include "tools/command.h"

namespace mpcaffe::tools {

/// Layer types that produce the net's inputs: they keep fp32 in every variant, as the paper's
/// typed prototxts keep their Data layers fp32 (the first computing layer's quantizer converts).
inline bool IsInputLayerType(const std::string& type) {
  return type == "Input" || type == "Data" || type == "ImageData" || type == "DummyData" ||
         type == "MemoryData" || type == "HDF5Data" || type == "WindowData";
}

/// The batch size of `param`'s first input layer (Input: dimension 0; Data-like: batch_size),
/// or -1 when it has none.
inline int BatchOf(const caffe::NetParameter& param) {
  for (const auto& layer : param.layer()) {
    if (layer.type() == "Input" && layer.input_param().shape_size() > 0 &&
        layer.input_param().shape(0).dim_size() > 0)
      return static_cast<int>(layer.input_param().shape(0).dim(0));
    if (layer.has_data_param()) return static_cast<int>(layer.data_param().batch_size());
    if (layer.has_image_data_param())
      return static_cast<int>(layer.image_data_param().batch_size());
    if (layer.has_memory_data_param())
      return static_cast<int>(layer.memory_data_param().batch_size());
    if (layer.has_window_data_param())
      return static_cast<int>(layer.window_data_param().batch_size());
  }
  return -1;
}

/// `param` with the batch set to `batch`: dimension 0 of every Input and DummyData top shape,
/// the batch_size of Data-like layers, and dimension 0 of Reshape shapes that equal the old
/// batch; nets nested in a layer likewise (NestedNetParameters: their inputs, dummy data and
/// reshapes follow the batch, as the paper's _1 / _64 prototxts show). Throws Error naming `model` when the net
/// has no input layer whose batch could be set.
inline caffe::NetParameter WithBatch(const caffe::NetParameter& param, int batch,
                                     const std::string& model, int old_batch = 0) {
  if (batch < 1) throw Error(model + ": batch must be at least 1, got " + std::to_string(batch));
  const bool nested = old_batch != 0;
  if (!nested) old_batch = BatchOf(param);
  caffe::NetParameter out = param;
  int changed = 0;
  for (auto& layer : *out.mutable_layer()) {
    if (layer.type() == "Input") {
      for (auto& shape : *layer.mutable_input_param()->mutable_shape())
        if (shape.dim_size() > 0) shape.set_dim(0, batch), ++changed;
    } else if (layer.has_data_param()) {
      layer.mutable_data_param()->set_batch_size(batch), ++changed;
    } else if (layer.has_memory_data_param()) {
      layer.mutable_memory_data_param()->set_batch_size(batch), ++changed;
    } else if (layer.has_window_data_param()) {
      layer.mutable_window_data_param()->set_batch_size(batch), ++changed;
    } else if (layer.has_dummy_data_param()) {
      for (auto& shape : *layer.mutable_dummy_data_param()->mutable_shape())
        if (shape.dim_size() > 0) shape.set_dim(0, batch);
    } else if (layer.has_reshape_param() && layer.reshape_param().has_shape()) {
      auto* shape = layer.mutable_reshape_param()->mutable_shape();
      if (shape->dim_size() > 0 && old_batch > 0 && shape->dim(0) == old_batch)
        shape->set_dim(0, batch);
    }
    for (caffe::NetParameter* inner : NestedNetParameters(&layer))
      *inner = WithBatch(*inner, batch, model, old_batch);
  }
  if (changed == 0 && !nested)
    throw Error(model + ": no Input or Data layer to set the batch size " + std::to_string(batch) +
                " on");
  return out;
}

/// `param` rewritten to compute in `type`, as the paper's typed prototxts are: input layers stay
/// fp32; every other layer gets `type` as bottom, compute and top data type when it can compute
/// in it (asked of the layer itself), else fp32 (also for types not registered yet) (e.g.
/// Softmax and WITHIN_CHANNEL LRN in the quantized variants); converting layers (LayerTyping: Quantizer, MOE) take
/// `type` in and keep the top type the file gives them. Nets nested in a layer are rewritten the
/// same way, except that their Input layers take the layer's bottom type (they receive its
/// bottoms).
/// The net inserts the Quantizer layers between differing types. The net-level data_type is
/// cleared.
inline caffe::NetParameter TypedVariant(const caffe::NetParameter& param, DataType type,
                                        Device& device, bool nested = false) {
  caffe::NetParameter out = param;
  out.clear_data_type();
  const caffe::DataType fp32 = DataTypeToProto(DataType::kFloat32);
  const caffe::DataType want = DataTypeToProto(type);
  for (auto& layer : *out.mutable_layer()) {
    const caffe::DataType file_top = layer.has_top_data_type() ? layer.top_data_type() : fp32;
    const LayerTyping typing = TypingOf(layer.type());
    const bool converting = typing.reads_bottom_type && typing.writes_top_type;
    caffe::DataType t = fp32;
    if (IsInputLayerType(layer.type())) {
      t = nested && layer.type() == "Input" ? want : fp32;
    } else if (converting) {
      t = want;  // takes any type in (nested nets are rewritten below)
    } else if (type != DataType::kFloat32) {
      caffe::LayerParameter probe = layer;
      probe.set_bottom_data_type(want);
      probe.set_compute_data_type(want);
      probe.set_top_data_type(want);
      try {
        if (CreateLayer(probe, device)->SupportsType(type)) t = want;
      } catch (const LayerError&) {
        // A type the registry does not know stays fp32; building the net reports it.
      }
    }
    layer.set_bottom_data_type(t);
    layer.set_compute_data_type(t);
    layer.set_top_data_type(t);
    if (converting) layer.set_top_data_type(file_top);
    for (caffe::NetParameter* inner : NestedNetParameters(&layer))
      *inner = TypedVariant(*inner, type, device, true);
  }
  return out;
}

/// A net variant's type as the tools name it: a DataType, and for int8 the bits of the
/// Convolution / InnerProduct weights ("int8w4": 8-bit activations, 4-bit weights).
struct NetDtype {
  DataType type = DataType::kFloat32;
  int weight_bits = 8;
  bool operator==(const NetDtype& o) const { return type == o.type && weight_bits == o.weight_bits; }
};

/// "fp32", "fp16", "int16", "int8" (ParseDataType) or "int8w4"; throws std::invalid_argument
/// naming the accepted names otherwise.
inline NetDtype ParseNetDtype(const std::string& name) {
  if (name == "int8w4") return {DataType::kInt8Q, 4};
  try {
    return {ParseDataType(name), 8};
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("unknown dtype '" + name +
                                "' (known: fp32, fp16, int16, int8, int8w4)");
  }
}

inline std::string NetDtypeLabel(const NetDtype& t) {
  return std::string(DtypeLabel(t.type)) + (t.weight_bits == 4 ? "w4" : "");
}

/// `param` with weight_bits 4 in the weight quantizer (blobs_quantizer 0) of every Convolution
/// and InnerProduct layer that computes in int8 (nested nets too): what makes an int8 variant
/// int8w4.
inline caffe::NetParameter WithInt4Weights(const caffe::NetParameter& param) {
  caffe::NetParameter out = param;
  for (auto& layer : *out.mutable_layer()) {
    if ((layer.type() == "Convolution" || layer.type() == "InnerProduct") &&
        layer.compute_data_type() == DataTypeToProto(DataType::kInt8Q)) {
      if (layer.blobs_quantizer_size() == 0) layer.add_blobs_quantizer();
      layer.mutable_blobs_quantizer(0)->set_weight_bits(4);
    }
    for (caffe::NetParameter* inner : NestedNetParameters(&layer)) *inner = WithInt4Weights(*inner);
  }
  return out;
}

/// TypedVariant for a NetDtype (int8w4: the int8 variant WithInt4Weights).
inline caffe::NetParameter TypedVariant(const caffe::NetParameter& param, const NetDtype& type,
                                        Device& device) {
  caffe::NetParameter out = TypedVariant(param, type.type, device);
  return type.weight_bits == 4 ? WithInt4Weights(out) : out;
}

/// The optimizer level of the commands that only time or score a net (time, bench, test): 2
/// (their intermediate blobs are never read), unless MPCAFFE_OPTIMIZE says otherwise.
inline int ToolOptimizeLevel() { return GetSettings().optimize.empty() ? 2 : -1; }

/// Fills the first top of every Input layer of `net` with seeded uniform values in [-1, 1]
/// (synthetic Data layers are filled by the net itself).
inline void FillInputLayers(Net& net, uint32_t seed = 1701) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const auto& p = net.built_param();
  for (const auto& layer : p.layer()) {
    if (layer.type() != "Input" || layer.top_size() == 0) continue;
    if (!net.has_blob(layer.top(0))) continue;
    Blob& b = net.blob(layer.top(0));
    std::vector<float> v(b.count());
    for (auto& x : v) x = uniform(rng);
    b.FromFloat(v);
  }
}

/// A BatchNorm never trained nor loaded holds no statistics (zeros, moving-average factor 0),
/// so it divides by √eps (×316 with Caffe's default eps), as in BVLC Caffe; with filler
/// weights a deep net's activations then overflow fp32 (MobileNet v1 by its 26th BatchNorm),
/// and nothing can be calibrated or timed on them. The tools that run nets on filler weights
/// (time, tune, bench net without --weights) give such layers mean 0, variance 1 — what
/// trained statistics look like — and say how many they changed. Layers holding statistics stay.
inline int NeutralEmptyBatchNorms(Net& net) {
  int changed = 0;
  for (const auto& layer : net.layers()) {
    if (std::string(layer->type()) != "BatchNorm" || layer->blobs().size() != 3) continue;
    const std::vector<float> factor = layer->ParamAsFloat(2), var = layer->ParamAsFloat(1);
    bool empty = factor.size() == 1 && factor[0] == 0.0f;
    for (float v : var) empty = empty && v == 0.0f;
    if (!empty) continue;
    layer->SetParamFromFloat(1, std::vector<float>(var.size(), 1.0f));
    layer->SetParamFromFloat(2, {1.0f});
    layer->ParamsChanged();
    ++changed;
  }
  if (changed > 0)
    std::fprintf(stderr, "note: %d BatchNorm layers hold no statistics (never trained or loaded): "
                 "mean 0, variance 1 for the synthetic run\n", changed);
  return changed;
}

/// Builds `param` on `device` with synthetic inputs filled (and the trained layers of the
/// `weights` caffemodel when given), and gives a net with quantized layers the ranges it lacks
/// by an OBSERVE pass of its fp32 variant on the same inputs. The device's peak counter is reset
/// afterwards so the net's peak_device_bytes counts this net only.
inline std::unique_ptr<Net> BuildCalibratedNet(const caffe::NetParameter& param, Device& device,
                                               const NetOptions& options,
                                               const std::string& weights = "") {
  auto net = std::make_unique<Net>(param, device, options);
  if (!weights.empty())
    net->CopyTrainedLayersFrom(weights);
  else
    NeutralEmptyBatchNorms(*net);
  FillInputLayers(*net);
  if (!net->QuantizersWithoutRange().empty()) {
    CalibrateWithFloatVariant(*net, param, options);
    net->ResetPeakMemory();
  }
  return net;
}

}  // namespace mpcaffe::tools
