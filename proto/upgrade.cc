// proto/upgrade.cc — rewrites V0 / V1 Caffe nets, legacy net inputs, deprecated data-layer
// fields, BatchNorm param specs and solver_type enums into the current caffe.proto format.
#include "proto/upgrade.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "proto/model_io.h"

namespace mpcaffe {
namespace {

using caffe::LayerParameter;
using caffe::NetParameter;
using caffe::V0LayerParameter;
using caffe::V1LayerParameter;

[[noreturn]] void Fail(const std::string& source, const std::string& what) {
  throw ModelFileError(source + ": cannot upgrade the net: " + what);
}

std::string LayerLabel(const std::string& name, size_t index) {
  return "layer " + std::to_string(index) + (name.empty() ? "" : " '" + name + "'");
}

// ---- V0 -> V1 -------------------------------------------------------------------------------

bool NetHasV0Layers(const NetParameter& net) {
  for (const V1LayerParameter& layer : net.layers()) {
    if (layer.has_layer()) return true;
  }
  return false;
}

V1LayerParameter::LayerType V0TypeToV1(const std::string& source, const std::string& layer,
                                       const std::string& type) {
  static const std::map<std::string, V1LayerParameter::LayerType> kTypes = {
      {"accuracy", V1LayerParameter::ACCURACY},
      {"bnll", V1LayerParameter::BNLL},
      {"concat", V1LayerParameter::CONCAT},
      {"conv", V1LayerParameter::CONVOLUTION},
      {"data", V1LayerParameter::DATA},
      {"dropout", V1LayerParameter::DROPOUT},
      {"euclidean_loss", V1LayerParameter::EUCLIDEAN_LOSS},
      {"flatten", V1LayerParameter::FLATTEN},
      {"hdf5_data", V1LayerParameter::HDF5_DATA},
      {"hdf5_output", V1LayerParameter::HDF5_OUTPUT},
      {"im2col", V1LayerParameter::IM2COL},
      {"images", V1LayerParameter::IMAGE_DATA},
      {"infogain_loss", V1LayerParameter::INFOGAIN_LOSS},
      {"innerproduct", V1LayerParameter::INNER_PRODUCT},
      {"lrn", V1LayerParameter::LRN},
      {"multinomial_logistic_loss", V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS},
      {"pool", V1LayerParameter::POOLING},
      {"relu", V1LayerParameter::RELU},
      {"sigmoid", V1LayerParameter::SIGMOID},
      {"softmax", V1LayerParameter::SOFTMAX},
      {"softmax_loss", V1LayerParameter::SOFTMAX_LOSS},
      {"split", V1LayerParameter::SPLIT},
      {"tanh", V1LayerParameter::TANH},
      {"window_data", V1LayerParameter::WINDOW_DATA},
  };
  auto it = kTypes.find(type);
  if (it == kTypes.end()) Fail(source, layer + " has unknown V0 layer type '" + type + "'");
  return it->second;
}

// Folds V0 "padding" layers into the convolution or pooling layer that consumes their output:
// the consumer gets the padding's `pad` and reads the padding layer's input directly.
std::vector<V1LayerParameter> FoldV0Padding(const std::string& source, const NetParameter& net) {
  std::map<std::string, int> producer;  // blob name -> index of the layer writing it last
  std::vector<V1LayerParameter> out;
  for (int i = 0; i < net.layers_size(); ++i) {
    const V1LayerParameter& layer = net.layers(i);
    const V0LayerParameter& v0 = layer.layer();
    const std::string label = LayerLabel(v0.name(), i);
    if (v0.type() != "padding") {
      V1LayerParameter copy = layer;
      for (int b = 0; b < layer.bottom_size(); ++b) {
        auto it = producer.find(layer.bottom(b));
        if (it == producer.end()) continue;  // a net input, or an unknown blob left for the net
        const V1LayerParameter& padding = net.layers(it->second);
        if (padding.layer().type() != "padding") continue;
        if (v0.type() != "conv" && v0.type() != "pool") {
          Fail(source, label + " of type '" + v0.type() + "' reads the output of padding layer '" +
                           padding.layer().name() +
                           "'; only conv and pool layers can absorb padding");
        }
        if (padding.bottom_size() != 1 || padding.top_size() != 1) {
          Fail(source, "padding layer '" + padding.layer().name() +
                           "' must have exactly one bottom and one top");
        }
        copy.set_bottom(b, padding.bottom(0));
        copy.mutable_layer()->set_pad(padding.layer().pad());
      }
      out.push_back(std::move(copy));
    }
    for (const std::string& top : layer.top()) producer[top] = i;
  }
  return out;
}

// Translates the fields of one V0 layer into the V1 layer `*v1` (whose bottom/top are set).
void UpgradeV0Layer(const std::string& source, const std::string& label, const V0LayerParameter& v0,
                    V1LayerParameter* v1) {
  const std::string& type = v0.type();
  auto misplaced = [&](const char* field) {
    Fail(source,
         label + ": V0 field '" + std::string(field) + "' does not apply to type '" + type + "'");
  };
  if (v0.has_name()) v1->set_name(v0.name());
  if (v0.has_type()) v1->set_type(V0TypeToV1(source, label, type));
  for (const caffe::BlobProto& blob : v0.blobs()) *v1->add_blobs() = blob;
  for (float lr : v0.blobs_lr()) v1->add_blobs_lr(lr);
  for (float decay : v0.weight_decay()) v1->add_weight_decay(decay);

  const bool conv = type == "conv", pool = type == "pool", ip = type == "innerproduct";
  const bool data = type == "data", images = type == "images", window = type == "window_data";
  const bool hdf5 = type == "hdf5_data";
  auto* cp = v1->mutable_convolution_param();
  auto* pp = v1->mutable_pooling_param();
  auto* ipp = v1->mutable_inner_product_param();

  if (v0.has_num_output()) {
    if (conv)
      cp->set_num_output(v0.num_output());
    else if (ip)
      ipp->set_num_output(v0.num_output());
    else
      misplaced("num_output");
  }
  if (v0.has_biasterm()) {
    if (conv)
      cp->set_bias_term(v0.biasterm());
    else if (ip)
      ipp->set_bias_term(v0.biasterm());
    else
      misplaced("biasterm");
  }
  if (v0.has_weight_filler()) {
    if (conv)
      *cp->mutable_weight_filler() = v0.weight_filler();
    else if (ip)
      *ipp->mutable_weight_filler() = v0.weight_filler();
    else
      misplaced("weight_filler");
  }
  if (v0.has_bias_filler()) {
    if (conv)
      *cp->mutable_bias_filler() = v0.bias_filler();
    else if (ip)
      *ipp->mutable_bias_filler() = v0.bias_filler();
    else
      misplaced("bias_filler");
  }
  if (v0.has_pad()) {
    if (conv)
      cp->add_pad(v0.pad());
    else if (pool)
      pp->set_pad(v0.pad());
    else
      misplaced("pad");
  }
  if (v0.has_kernelsize()) {
    if (conv)
      cp->add_kernel_size(v0.kernelsize());
    else if (pool)
      pp->set_kernel_size(v0.kernelsize());
    else
      misplaced("kernelsize");
  }
  if (v0.has_group()) {
    if (conv)
      cp->set_group(v0.group());
    else
      misplaced("group");
  }
  if (v0.has_stride()) {
    if (conv)
      cp->add_stride(v0.stride());
    else if (pool)
      pp->set_stride(v0.stride());
    else
      misplaced("stride");
  }
  if (v0.has_pool()) {
    if (!pool) misplaced("pool");
    pp->set_pool(static_cast<caffe::PoolingParameter::PoolMethod>(v0.pool()));
  }
  if (v0.has_dropout_ratio()) {
    if (type != "dropout") misplaced("dropout_ratio");
    v1->mutable_dropout_param()->set_dropout_ratio(v0.dropout_ratio());
  }
  if (v0.has_local_size() || v0.has_alpha() || v0.has_beta() || v0.has_k()) {
    if (type != "lrn") misplaced("local_size/alpha/beta/k");
    auto* lrn = v1->mutable_lrn_param();
    if (v0.has_local_size()) lrn->set_local_size(v0.local_size());
    if (v0.has_alpha()) lrn->set_alpha(v0.alpha());
    if (v0.has_beta()) lrn->set_beta(v0.beta());
    if (v0.has_k()) lrn->set_k(v0.k());
  }
  if (v0.has_source()) {
    if (data)
      v1->mutable_data_param()->set_source(v0.source());
    else if (hdf5)
      v1->mutable_hdf5_data_param()->set_source(v0.source());
    else if (images)
      v1->mutable_image_data_param()->set_source(v0.source());
    else if (window)
      v1->mutable_window_data_param()->set_source(v0.source());
    else if (type == "infogain_loss")
      v1->mutable_infogain_loss_param()->set_source(v0.source());
    else
      misplaced("source");
  }
  // scale, meanfile, cropsize and mirror go where V1 kept them; the data upgrade then moves them
  // to transform_param.
  if (v0.has_scale()) {
    if (data)
      v1->mutable_data_param()->set_scale(v0.scale());
    else if (images)
      v1->mutable_image_data_param()->set_scale(v0.scale());
    else if (window)
      v1->mutable_window_data_param()->set_scale(v0.scale());
    else
      misplaced("scale");
  }
  if (v0.has_meanfile()) {
    if (data)
      v1->mutable_data_param()->set_mean_file(v0.meanfile());
    else if (images)
      v1->mutable_image_data_param()->set_mean_file(v0.meanfile());
    else if (window)
      v1->mutable_window_data_param()->set_mean_file(v0.meanfile());
    else
      misplaced("meanfile");
  }
  if (v0.has_batchsize()) {
    if (data)
      v1->mutable_data_param()->set_batch_size(v0.batchsize());
    else if (hdf5)
      v1->mutable_hdf5_data_param()->set_batch_size(v0.batchsize());
    else if (images)
      v1->mutable_image_data_param()->set_batch_size(v0.batchsize());
    else if (window)
      v1->mutable_window_data_param()->set_batch_size(v0.batchsize());
    else
      misplaced("batchsize");
  }
  if (v0.has_cropsize()) {
    if (data)
      v1->mutable_data_param()->set_crop_size(v0.cropsize());
    else if (images)
      v1->mutable_image_data_param()->set_crop_size(v0.cropsize());
    else if (window)
      v1->mutable_window_data_param()->set_crop_size(v0.cropsize());
    else
      misplaced("cropsize");
  }
  if (v0.has_mirror()) {
    if (data)
      v1->mutable_data_param()->set_mirror(v0.mirror());
    else if (images)
      v1->mutable_image_data_param()->set_mirror(v0.mirror());
    else if (window)
      v1->mutable_window_data_param()->set_mirror(v0.mirror());
    else
      misplaced("mirror");
  }
  if (v0.has_rand_skip()) {
    if (data)
      v1->mutable_data_param()->set_rand_skip(v0.rand_skip());
    else if (images)
      v1->mutable_image_data_param()->set_rand_skip(v0.rand_skip());
    else
      misplaced("rand_skip");
  }
  if (v0.has_shuffle_images()) {
    if (!images) misplaced("shuffle_images");
    v1->mutable_image_data_param()->set_shuffle(v0.shuffle_images());
  }
  if (v0.has_new_height()) {
    if (!images) misplaced("new_height");
    v1->mutable_image_data_param()->set_new_height(v0.new_height());
  }
  if (v0.has_new_width()) {
    if (!images) misplaced("new_width");
    v1->mutable_image_data_param()->set_new_width(v0.new_width());
  }
  if (v0.has_concat_dim()) {
    if (type != "concat") misplaced("concat_dim");
    v1->mutable_concat_param()->set_concat_dim(v0.concat_dim());
  }
  if (v0.has_det_fg_threshold() || v0.has_det_bg_threshold() || v0.has_det_fg_fraction() ||
      v0.has_det_context_pad() || v0.has_det_crop_mode()) {
    if (!window) misplaced("det_*");
    auto* w = v1->mutable_window_data_param();
    if (v0.has_det_fg_threshold()) w->set_fg_threshold(v0.det_fg_threshold());
    if (v0.has_det_bg_threshold()) w->set_bg_threshold(v0.det_bg_threshold());
    if (v0.has_det_fg_fraction()) w->set_fg_fraction(v0.det_fg_fraction());
    if (v0.has_det_context_pad()) w->set_context_pad(v0.det_context_pad());
    if (v0.has_det_crop_mode()) w->set_crop_mode(v0.det_crop_mode());
  }
  if (v0.has_hdf5_output_param()) {
    if (type != "hdf5_output") misplaced("hdf5_output_param");
    *v1->mutable_hdf5_output_param() = v0.hdf5_output_param();
  }
  if (v0.has_new_num() || v0.has_new_channels()) {
    Fail(source, label + ": V0 reshape fields (new_num, new_channels) have no current equivalent");
  }
  // Drop parameter messages the mutable_* accessors above created empty.
  if (!conv) v1->clear_convolution_param();
  if (!pool) v1->clear_pooling_param();
  if (!ip) v1->clear_inner_product_param();
}

void UpgradeV0Net(const std::string& source, NetParameter* net) {
  for (int i = 0; i < net->layers_size(); ++i) {
    if (!net->layers(i).has_layer()) {
      Fail(source, LayerLabel(net->layers(i).name(), i) +
                       " is not in V0 form while other layers are; mixed V0/V1 nets are "
                       "not supported");
    }
  }
  std::vector<V1LayerParameter> folded = FoldV0Padding(source, *net);
  net->clear_layers();
  for (size_t i = 0; i < folded.size(); ++i) {
    const V0LayerParameter& v0 = folded[i].layer();
    V1LayerParameter* v1 = net->add_layers();
    *v1->mutable_bottom() = folded[i].bottom();
    *v1->mutable_top() = folded[i].top();
    UpgradeV0Layer(source, LayerLabel(v0.name(), i), v0, v1);
  }
}

// ---- Deprecated data-layer transformation fields -----------------------------------------

// Moves scale / mean_file / crop_size / mirror from a data parameter message to
// transform_param. Works on any message with those fields (DataParameter,
// ImageDataParameter, WindowDataParameter).
template <typename DataParam>
bool MoveTransformFields(const std::string& source, const std::string& label, DataParam* param,
                         caffe::TransformationParameter* transform) {
  bool changed = false;
  auto conflict = [&](const char* field) {
    Fail(source, label + " sets " + field +
                     " both in its data parameters (deprecated) and in "
                     "transform_param");
  };
  if (param->has_scale()) {
    if (transform->has_scale() && transform->scale() != param->scale()) conflict("scale");
    transform->set_scale(param->scale());
    param->clear_scale();
    changed = true;
  }
  if (param->has_mean_file()) {
    if (transform->has_mean_file() && transform->mean_file() != param->mean_file()) {
      conflict("mean_file");
    }
    transform->set_mean_file(param->mean_file());
    param->clear_mean_file();
    changed = true;
  }
  if (param->has_crop_size()) {
    if (transform->has_crop_size() && transform->crop_size() != param->crop_size()) {
      conflict("crop_size");
    }
    transform->set_crop_size(param->crop_size());
    param->clear_crop_size();
    changed = true;
  }
  if (param->has_mirror()) {
    if (transform->has_mirror() && transform->mirror() != param->mirror()) conflict("mirror");
    transform->set_mirror(param->mirror());
    param->clear_mirror();
    changed = true;
  }
  return changed;
}

template <typename DataParam>
bool HasTransformFields(const DataParam& p) {
  return p.has_scale() || p.has_mean_file() || p.has_crop_size() || p.has_mirror();
}

template <typename Layer>
bool NeedsDataTransformUpgrade(const Layer& layer) {
  return (layer.has_data_param() && HasTransformFields(layer.data_param())) ||
         (layer.has_image_data_param() && HasTransformFields(layer.image_data_param())) ||
         (layer.has_window_data_param() && HasTransformFields(layer.window_data_param()));
}

template <typename Layer>
bool UpgradeDataTransform(const std::string& source, const std::string& label, Layer* layer) {
  bool changed = false;
  if (layer->has_data_param() && HasTransformFields(layer->data_param())) {
    changed |= MoveTransformFields(source, label, layer->mutable_data_param(),
                                   layer->mutable_transform_param());
  }
  if (layer->has_image_data_param() && HasTransformFields(layer->image_data_param())) {
    changed |= MoveTransformFields(source, label, layer->mutable_image_data_param(),
                                   layer->mutable_transform_param());
  }
  if (layer->has_window_data_param() && HasTransformFields(layer->window_data_param())) {
    changed |= MoveTransformFields(source, label, layer->mutable_window_data_param(),
                                   layer->mutable_transform_param());
  }
  return changed;
}

// ---- V1 -> current ------------------------------------------------------------------------

// Copies every `*_param` message field of the V1 layer to the LayerParameter field of the same
// name (the names and message types are shared between the two).
void CopyLayerSpecificParams(const V1LayerParameter& v1, LayerParameter* layer) {
  namespace pb = google::protobuf;
  const pb::Reflection* from_reflection = v1.GetReflection();
  const pb::Reflection* to_reflection = layer->GetReflection();
  const pb::Descriptor* to_descriptor = layer->GetDescriptor();
  std::vector<const pb::FieldDescriptor*> fields;
  from_reflection->ListFields(v1, &fields);
  for (const pb::FieldDescriptor* from : fields) {
    const std::string& name = from->name();
    if (from->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || from->is_repeated() ||
        name.size() < 6 || name.compare(name.size() - 6, 6, "_param") != 0) {
      continue;
    }
    const pb::FieldDescriptor* to = to_descriptor->FindFieldByName(name);
    if (to == nullptr || to->message_type() != from->message_type()) {
      throw ModelFileError("internal error: caffe.proto V1LayerParameter." + name +
                           " has no LayerParameter counterpart");
    }
    to_reflection->MutableMessage(layer, to)->CopyFrom(from_reflection->GetMessage(v1, from));
  }
}

void UpgradeV1Layer(const std::string& source, const std::string& label, const V1LayerParameter& v1,
                    LayerParameter* layer) {
  if (v1.has_layer()) Fail(source, label + " still holds a V0 layer");
  if (v1.has_name()) layer->set_name(v1.name());
  *layer->mutable_bottom() = v1.bottom();
  *layer->mutable_top() = v1.top();
  *layer->mutable_include() = v1.include();
  *layer->mutable_exclude() = v1.exclude();
  if (v1.has_type()) {
    std::string type = V1LayerTypeName(v1.type());
    if (type.empty()) Fail(source, label + " has V1 layer type NONE");
    layer->set_type(type);
  }
  *layer->mutable_blobs() = v1.blobs();
  int specs = std::max(
      {v1.param_size(), v1.blob_share_mode_size(), v1.blobs_lr_size(), v1.weight_decay_size()});
  for (int i = 0; i < specs; ++i) {
    caffe::ParamSpec* spec = layer->add_param();
    if (i < v1.param_size()) spec->set_name(v1.param(i));
    if (i < v1.blob_share_mode_size()) {
      spec->set_share_mode(static_cast<caffe::ParamSpec::DimCheckMode>(v1.blob_share_mode(i)));
    }
    if (i < v1.blobs_lr_size()) spec->set_lr_mult(v1.blobs_lr(i));
    if (i < v1.weight_decay_size()) spec->set_decay_mult(v1.weight_decay(i));
  }
  *layer->mutable_loss_weight() = v1.loss_weight();
  CopyLayerSpecificParams(v1, layer);
}

void UpgradeV1Net(const std::string& source, NetParameter* net) {
  if (net->layer_size() > 0) {
    Fail(source, "it has both 'layer' (current) and 'layers' (deprecated V1) fields; use one");
  }
  for (int i = 0; i < net->layers_size(); ++i) {
    UpgradeV1Layer(source, LayerLabel(net->layers(i).name(), i), net->layers(i), net->add_layer());
  }
  net->clear_layers();
}

// ---- Legacy net inputs -----------------------------------------------------------------------

bool NetNeedsInputUpgrade(const NetParameter& net) {
  return net.input_size() > 0 || net.input_shape_size() > 0 || net.input_dim_size() > 0;
}

void UpgradeNetInput(const std::string& source, NetParameter* net) {
  const bool has_shape = net->input_shape_size() > 0;
  const bool has_dim = net->input_dim_size() > 0;
  if (has_shape && has_dim) Fail(source, "it sets both input_shape and input_dim");
  if (has_shape && net->input_shape_size() != net->input_size()) {
    Fail(source, "it has " + std::to_string(net->input_size()) + " inputs but " +
                     std::to_string(net->input_shape_size()) + " input_shape entries");
  }
  if (has_dim && net->input_dim_size() != 4 * net->input_size()) {
    Fail(source, "it has " + std::to_string(net->input_size()) + " inputs but " +
                     std::to_string(net->input_dim_size()) +
                     " input_dim values (four per input expected)");
  }
  // Inputs without any shape are found in old caffemodels: dropping them is all there is to do.
  if (has_shape || has_dim) {
    LayerParameter input;
    input.set_name("input");
    input.set_type("Input");
    caffe::InputParameter* param = input.mutable_input_param();
    for (int i = 0; i < net->input_size(); ++i) {
      input.add_top(net->input(i));
      caffe::BlobShape* shape = param->add_shape();
      if (has_shape) {
        *shape = net->input_shape(i);
      } else {
        for (int d = 4 * i; d < 4 * i + 4; ++d) shape->add_dim(net->input_dim(d));
      }
    }
    // The Input layer goes first so every consumer comes after it.
    auto* layers = net->mutable_layer();
    layers->Add(std::move(input));
    for (int i = layers->size() - 1; i > 0; --i) layers->SwapElements(i, i - 1);
  }
  net->clear_input();
  net->clear_input_shape();
  net->clear_input_dim();
}

// ---- BatchNorm param specs -------------------------------------------------------------------

bool NeedsBatchNormUpgrade(const LayerParameter& layer) {
  if (layer.type() != "BatchNorm" || layer.param_size() != 3) return false;
  for (const caffe::ParamSpec& spec : layer.param()) {
    if (spec.lr_mult() != 0.f || spec.decay_mult() != 0.f) return true;
  }
  return false;
}

// ---- Nested nets -----------------------------------------------------------------------------

template <typename Fn>
void ForEachNestedNet(NetParameter* net, Fn fn) {
  for (LayerParameter& layer : *net->mutable_layer()) {
    if (!layer.has_moe_param()) continue;
    caffe::MOEParameter* moe = layer.mutable_moe_param();
    if (moe->has_gating_net()) fn(layer.name() + ".gating_net", moe->mutable_gating_net());
    for (int i = 0; i < moe->expert_net_size(); ++i) {
      fn(layer.name() + ".expert_net[" + std::to_string(i) + "]", moe->mutable_expert_net(i));
    }
  }
}

}  // namespace

std::string V1LayerTypeName(V1LayerParameter::LayerType type) {
  switch (type) {
    case V1LayerParameter::NONE:
      return "";
    case V1LayerParameter::ABSVAL:
      return "AbsVal";
    case V1LayerParameter::ACCURACY:
      return "Accuracy";
    case V1LayerParameter::ARGMAX:
      return "ArgMax";
    case V1LayerParameter::BNLL:
      return "BNLL";
    case V1LayerParameter::CONCAT:
      return "Concat";
    case V1LayerParameter::CONTRASTIVE_LOSS:
      return "ContrastiveLoss";
    case V1LayerParameter::CONVOLUTION:
      return "Convolution";
    case V1LayerParameter::DATA:
      return "Data";
    case V1LayerParameter::DECONVOLUTION:
      return "Deconvolution";
    case V1LayerParameter::DROPOUT:
      return "Dropout";
    case V1LayerParameter::DUMMY_DATA:
      return "DummyData";
    case V1LayerParameter::EUCLIDEAN_LOSS:
      return "EuclideanLoss";
    case V1LayerParameter::ELTWISE:
      return "Eltwise";
    case V1LayerParameter::EXP:
      return "Exp";
    case V1LayerParameter::FLATTEN:
      return "Flatten";
    case V1LayerParameter::HDF5_DATA:
      return "HDF5Data";
    case V1LayerParameter::HDF5_OUTPUT:
      return "HDF5Output";
    case V1LayerParameter::HINGE_LOSS:
      return "HingeLoss";
    case V1LayerParameter::IM2COL:
      return "Im2col";
    case V1LayerParameter::IMAGE_DATA:
      return "ImageData";
    case V1LayerParameter::INFOGAIN_LOSS:
      return "InfogainLoss";
    case V1LayerParameter::INNER_PRODUCT:
      return "InnerProduct";
    case V1LayerParameter::LRN:
      return "LRN";
    case V1LayerParameter::MEMORY_DATA:
      return "MemoryData";
    case V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS:
      return "MultinomialLogisticLoss";
    case V1LayerParameter::MVN:
      return "MVN";
    case V1LayerParameter::POOLING:
      return "Pooling";
    case V1LayerParameter::POWER:
      return "Power";
    case V1LayerParameter::RELU:
      return "ReLU";
    case V1LayerParameter::SIGMOID:
      return "Sigmoid";
    case V1LayerParameter::SIGMOID_CROSS_ENTROPY_LOSS:
      return "SigmoidCrossEntropyLoss";
    case V1LayerParameter::SILENCE:
      return "Silence";
    case V1LayerParameter::SOFTMAX:
      return "Softmax";
    case V1LayerParameter::SOFTMAX_LOSS:
      return "SoftmaxWithLoss";
    case V1LayerParameter::SPLIT:
      return "Split";
    case V1LayerParameter::SLICE:
      return "Slice";
    case V1LayerParameter::TANH:
      return "TanH";
    case V1LayerParameter::WINDOW_DATA:
      return "WindowData";
    case V1LayerParameter::THRESHOLD:
      return "Threshold";
  }
  return "";
}

bool NetNeedsUpgrade(const NetParameter& net) {
  if (net.layers_size() > 0 || NetNeedsInputUpgrade(net)) return true;
  for (const LayerParameter& layer : net.layer()) {
    if (NeedsDataTransformUpgrade(layer) || NeedsBatchNormUpgrade(layer)) return true;
    if (layer.has_moe_param()) {
      const caffe::MOEParameter& moe = layer.moe_param();
      if (moe.has_gating_net() && NetNeedsUpgrade(moe.gating_net())) return true;
      for (const NetParameter& expert : moe.expert_net()) {
        if (NetNeedsUpgrade(expert)) return true;
      }
    }
  }
  return false;
}

bool UpgradeNetAsNeeded(const std::string& source, NetParameter* net) {
  bool changed = false;
  if (NetHasV0Layers(*net)) {
    UpgradeV0Net(source, net);
    changed = true;
  }
  for (int i = 0; i < net->layers_size(); ++i) {
    changed |=
        UpgradeDataTransform(source, LayerLabel(net->layers(i).name(), i), net->mutable_layers(i));
  }
  if (net->layers_size() > 0) {
    UpgradeV1Net(source, net);
    changed = true;
  }
  for (int i = 0; i < net->layer_size(); ++i) {
    changed |=
        UpgradeDataTransform(source, LayerLabel(net->layer(i).name(), i), net->mutable_layer(i));
  }
  if (NetNeedsInputUpgrade(*net)) {
    UpgradeNetInput(source, net);
    changed = true;
  }
  for (LayerParameter& layer : *net->mutable_layer()) {
    if (!NeedsBatchNormUpgrade(layer)) continue;
    for (caffe::ParamSpec& spec : *layer.mutable_param()) {
      spec.set_lr_mult(0.f);
      spec.set_decay_mult(0.f);
    }
    changed = true;
  }
  ForEachNestedNet(net, [&](const std::string& where, NetParameter* nested) {
    changed |= UpgradeNetAsNeeded(source + " (" + where + ")", nested);
  });
  return changed;
}

bool SolverNeedsUpgrade(const caffe::SolverParameter& solver) {
  if (solver.has_solver_type()) return true;
  if (solver.has_net_param() && NetNeedsUpgrade(solver.net_param())) return true;
  if (solver.has_train_net_param() && NetNeedsUpgrade(solver.train_net_param())) return true;
  for (const NetParameter& net : solver.test_net_param()) {
    if (NetNeedsUpgrade(net)) return true;
  }
  return false;
}

bool UpgradeSolverAsNeeded(const std::string& source, caffe::SolverParameter* solver) {
  bool changed = false;
  if (solver->has_solver_type()) {
    if (solver->has_type()) {
      throw ModelFileError(source +
                           ": cannot upgrade the solver: it sets both the deprecated "
                           "solver_type enum and the type string; keep only type");
    }
    switch (solver->solver_type()) {
      case caffe::SolverParameter::SGD:
        solver->set_type("SGD");
        break;
      case caffe::SolverParameter::NESTEROV:
        solver->set_type("Nesterov");
        break;
      case caffe::SolverParameter::ADAGRAD:
        solver->set_type("AdaGrad");
        break;
      case caffe::SolverParameter::RMSPROP:
        solver->set_type("RMSProp");
        break;
      case caffe::SolverParameter::ADADELTA:
        solver->set_type("AdaDelta");
        break;
      case caffe::SolverParameter::ADAM:
        solver->set_type("Adam");
        break;
    }
    solver->clear_solver_type();
    changed = true;
  }
  if (solver->has_net_param()) {
    changed |= UpgradeNetAsNeeded(source + " (net_param)", solver->mutable_net_param());
  }
  if (solver->has_train_net_param()) {
    changed |= UpgradeNetAsNeeded(source + " (train_net_param)", solver->mutable_train_net_param());
  }
  for (int i = 0; i < solver->test_net_param_size(); ++i) {
    changed |= UpgradeNetAsNeeded(source + " (test_net_param[" + std::to_string(i) + "])",
                                  solver->mutable_test_net_param(i));
  }
  return changed;
}

}  // namespace mpcaffe
