// net/net.cc — building a Net from a NetParameter (filtering, synthetic data, conversions,
// splits), forward passes, quantizer modes, weight I/O and the reduced-memory planner.
#include "net/net.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

#include "layers/layer_registry.h"
#include "net/memory_planner.h"
#include "proto/model_io.h"
#include "quant/quantizer_proto.h"
#include "device/settings.h"

namespace mpcaffe {

// ---- NetParameter transformations ------------------------------------------------------------

bool StateMeetsRule(const caffe::NetState& state, const caffe::NetStateRule& rule) {
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  for (const auto& s : rule.stage())
    if (std::find(state.stage().begin(), state.stage().end(), s) == state.stage().end()) return false;
  for (const auto& s : rule.not_stage())
    if (std::find(state.stage().begin(), state.stage().end(), s) != state.stage().end()) return false;
  return true;
}

caffe::NetParameter FilterNet(const caffe::NetParameter& param, const caffe::NetState& state) {
  caffe::NetParameter out = param;
  out.clear_layer();
  for (const auto& layer : param.layer()) {
    if (layer.include_size() && layer.exclude_size())
      throw NetError("layer '" + layer.name() + "' has both include and exclude rules; give one kind");
    bool keep = layer.include_size() == 0;
    for (const auto& r : layer.exclude())
      if (StateMeetsRule(state, r)) keep = false;
    for (const auto& r : layer.include())
      if (StateMeetsRule(state, r)) keep = true;
    if (keep) *out.add_layer() = layer;
  }
  return out;
}

caffe::NetParameter WithDataType(const caffe::NetParameter& param, DataType type) {
  caffe::NetParameter out = param;
  const caffe::DataType t = DataTypeToProto(type);
  out.set_data_type(t);
  for (auto& layer : *out.mutable_layer()) {
    layer.set_bottom_data_type(t);
    layer.set_compute_data_type(t);
    layer.set_top_data_type(t);
    for (caffe::NetParameter* nested : NestedNetParameters(&layer)) *nested = WithDataType(*nested, type);
  }
  return out;
}

namespace {

void CollectNetParameters(google::protobuf::Message* message, std::vector<caffe::NetParameter*>* nets) {
  const google::protobuf::Reflection* reflection = message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const int n = f->is_repeated() ? reflection->FieldSize(*message, f) : 1;
    for (int i = 0; i < n; ++i) {
      google::protobuf::Message* sub = f->is_repeated() ? reflection->MutableRepeatedMessage(message, f, i)
                                                        : reflection->MutableMessage(message, f);
      if (f->message_type() == caffe::NetParameter::descriptor())
        nets->push_back(static_cast<caffe::NetParameter*>(sub));
      else
        CollectNetParameters(sub, nets);
    }
  }
}

}  // namespace

std::vector<caffe::NetParameter*> NestedNetParameters(caffe::LayerParameter* layer) {
  std::vector<caffe::NetParameter*> nets;
  CollectNetParameters(layer, &nets);
  return nets;
}

namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0;
}

/// Unset data-type fields of a layer take the net's data_type.
void ApplyNetDataType(caffe::NetParameter* net) {
  if (!net->has_data_type()) return;
  for (auto& layer : *net->mutable_layer()) {
    if (!layer.has_bottom_data_type()) layer.set_bottom_data_type(net->data_type());
    if (!layer.has_compute_data_type()) layer.set_compute_data_type(net->data_type());
    if (!layer.has_top_data_type()) layer.set_top_data_type(net->data_type());
  }
}

/// The shape (C, H, W) a synthetic Data layer produces (see NetOptions::synthetic_data).
std::vector<int> SyntheticShape(const caffe::LayerParameter& layer, const NetOptions& options) {
  const auto& tp = layer.transform_param();
  const int crop = static_cast<int>(tp.crop_size());
  if (!options.synthetic_shape.empty()) return options.synthetic_shape;
  if (tp.has_mean_file() && FileExists(tp.mean_file())) {
    const caffe::BlobProto mean = ReadBlobProtoBinary(tp.mean_file());
    int c = mean.channels(), h = mean.height(), w = mean.width();
    if (mean.has_shape() && mean.shape().dim_size() >= 3) {
      const int n = mean.shape().dim_size();
      c = mean.shape().dim(n - 3), h = mean.shape().dim(n - 2), w = mean.shape().dim(n - 1);
    }
    return {c, crop ? crop : h, crop ? crop : w};
  }
  if (crop) return {3, crop, crop};
  const std::string& src = layer.data_param().source();
  if (src.find("mnist") != std::string::npos) return {1, 28, 28};
  if (src.find("cifar") != std::string::npos) return {3, 32, 32};
  throw NetError("Data layer '" + layer.name() + "': cannot tell the shape of synthetic data for "
                 "source '" + src + "' (no mean file, no crop_size, unknown dataset); give it "
                 "explicitly (--synthetic-shape C,H,W / NetOptions::synthetic_shape)");
}

/// Replaces Data layers by Input layers of the same tops (data: N×C×H×W, label: N).
void ReplaceDataLayers(caffe::NetParameter* net, const NetOptions& options,
                       std::set<std::string>* replaced) {
  for (auto& layer : *net->mutable_layer()) {
    if (layer.type() != "Data") continue;
    const int batch = static_cast<int>(layer.data_param().batch_size());
    const std::vector<int> chw = SyntheticShape(layer, options);
    caffe::LayerParameter input;
    input.set_name(layer.name());
    input.set_type("Input");
    for (const auto& t : layer.top()) input.add_top(t);
    *input.mutable_include() = layer.include();
    *input.mutable_exclude() = layer.exclude();
    input.set_top_data_type(layer.top_data_type());
    auto* shape = input.mutable_input_param()->add_shape();
    shape->add_dim(batch);
    for (int d : chw) shape->add_dim(d);
    if (layer.top_size() > 1) input.mutable_input_param()->add_shape()->add_dim(batch);
    for (int i = 2; i < layer.top_size(); ++i) input.mutable_input_param()->add_shape()->add_dim(batch);
    replaced->insert(layer.name());
    layer = input;
  }
}

/// The type a layer reads its bottoms in and writes top `top` in, as its type's LayerTyping
/// says (converting layers read bottom_data_type, sources and converters write top_data_type).
DataType ConsumerType(const caffe::LayerParameter& l) {
  const auto t = TypingOf(l.type()).reads_bottom_type ? l.bottom_data_type() : l.compute_data_type();
  return DataTypeFromProto(t, "layer '" + l.name() + "' (" + l.type() + ")");
}
DataType ProducerType(const caffe::LayerParameter& l, int top) {
  const LayerTyping typing = TypingOf(l.type());
  if (typing.fp32_tops_from >= 0 && top >= typing.fp32_tops_from) return DataType::kFloat32;
  return DataTypeFromProto(typing.writes_top_type ? l.top_data_type() : l.compute_data_type(),
                           "layer '" + l.name() + "' (" + l.type() + ")");
}

caffe::LayerParameter ConversionLayer(const std::string& name, const std::string& bottom,
                                      const std::string& top, DataType from, DataType to,
                                      const std::string& in_quantizer,
                                      const std::string& out_quantizer) {
  caffe::LayerParameter q;
  q.set_name(name);
  q.set_type("Quantizer");
  q.add_bottom(bottom);
  q.add_top(top);
  q.set_bottom_data_type(DataTypeToProto(from));
  q.set_compute_data_type(DataTypeToProto(to));
  q.set_top_data_type(DataTypeToProto(to));
  q.add_bottom_quantizer()->set_name(in_quantizer);
  q.add_top_quantizer()->set_name(out_quantizer);
  return q;
}

/// Inserts a Quantizer layer wherever a bottom is consumed in another type than its producer
/// writes, and after regular layers whose top_data_type differs from their compute type. The
/// inserted layers' quantizers take the names of the producer's top quantizer (input side)
/// and the consumer's bottom quantizer (output side), so ranges calibrated on the fp32 net
/// apply to them.
caffe::NetParameter InsertConversions(const caffe::NetParameter& in, std::set<std::string>* inserted) {
  caffe::NetParameter out = in;
  out.clear_layer();
  struct Producer {
    DataType type;
    std::string quantizer;
    int version;
  };
  std::map<std::string, Producer> current;
  std::map<std::string, std::string> converted;  // "blob#version#type" -> converted blob name
  int version = 0;
  for (const auto& src : in.layer()) {
    caffe::LayerParameter layer = src;
    const DataType want = ConsumerType(layer);
    for (int i = 0; i < layer.bottom_size(); ++i) {
      const std::string b = layer.bottom(i);
      auto it = current.find(b);
      if (it == current.end()) continue;  // reported by the net build with the layer's name
      if (it->second.type == want) continue;
      const std::string key = b + "#" + std::to_string(it->second.version) + "#" + Name(want);
      auto done = converted.find(key);
      std::string name;
      if (done != converted.end()) {
        name = done->second;
      } else {
        name = b + "_" + Name(want);
        int n = 1;
        while (current.count(name)) name = b + "_" + Name(want) + "_" + std::to_string(++n);
        const std::string layer_name = layer.name() + "_" + b + "_to_" + Name(want);
        *out.add_layer() = ConversionLayer(layer_name, b, name, it->second.type, want,
                                           it->second.quantizer, QuantizerNameOf(layer, "bottom", i));
        inserted->insert(layer_name);
        converted[key] = name;
        current[name] = {want, QuantizerNameOf(layer, "bottom", i), ++version};
      }
      // An in-place top of this bottom follows the renamed bottom.
      if (i < layer.top_size() && layer.top(i) == b) layer.set_top(i, name);
      layer.set_bottom(i, name);
    }
    const bool regular = !TypingOf(layer.type()).writes_top_type;  // the net converts its tops
    std::vector<caffe::LayerParameter> after;
    for (int j = 0; j < layer.top_size(); ++j) {
      const DataType written = ProducerType(layer, j);
      const DataType declared =
          regular ? DataTypeFromProto(layer.top_data_type(), "layer '" + layer.name() + "'") : written;
      const std::string t = layer.top(j);
      if (declared != written) {
        // The layer writes its compute type into an internal blob; a conversion gives `t`.
        const std::string internal = t + "_" + Name(written);
        const std::string qname = QuantizerNameOf(layer, "top", j);
        layer.set_top(j, internal);
        const std::string layer_name = layer.name() + "_" + t + "_to_" + Name(declared);
        after.push_back(ConversionLayer(layer_name, internal, t, written, declared, qname, qname));
        inserted->insert(layer_name);
        current[internal] = {written, qname, ++version};
        current[t] = {declared, qname, ++version};
      } else {
        current[t] = {written, QuantizerNameOf(layer, "top", j), ++version};
      }
    }
    *out.add_layer() = layer;
    for (auto& a : after) *out.add_layer() = a;
  }
  return out;
}

/// BVLC's split insertion: a blob produced once and consumed by several layers gets a Split
/// layer whose tops feed the consumers one each. The split's quantizers are named after the
/// producer's top quantizer (input) and each consumer's bottom quantizer (outputs).
caffe::NetParameter InsertSplits(const caffe::NetParameter& in, std::set<std::string>* inserted) {
  // (layer, top) that last produced each blob, and the consumers of each such production.
  std::map<std::string, std::pair<int, int>> last_producer;
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> consumers;
  for (int i = 0; i < in.layer_size(); ++i) {
    const auto& l = in.layer(i);
    for (int b = 0; b < l.bottom_size(); ++b) {
      auto it = last_producer.find(l.bottom(b));
      if (it != last_producer.end()) consumers[it->second].push_back({i, b});
    }
    for (int t = 0; t < l.top_size(); ++t) last_producer[l.top(t)] = {i, t};
  }
  std::map<std::pair<int, int>, std::string> renamed;  // (consumer layer, bottom) -> split top
  caffe::NetParameter out = in;
  out.clear_layer();
  for (int i = 0; i < in.layer_size(); ++i) {
    caffe::LayerParameter l = in.layer(i);
    for (int b = 0; b < l.bottom_size(); ++b) {
      auto it = renamed.find({i, b});
      if (it != renamed.end()) {
        if (b < l.top_size() && l.top(b) == l.bottom(b)) l.set_top(b, it->second);
        l.set_bottom(b, it->second);
      }
    }
    *out.add_layer() = l;
    for (int t = 0; t < in.layer(i).top_size(); ++t) {
      auto it = consumers.find({i, t});
      if (it == consumers.end() || it->second.size() < 2) continue;
      const std::string blob = l.top(t);
      caffe::LayerParameter split;
      split.set_name(blob + "_" + l.name() + "_" + std::to_string(t) + "_split");
      split.set_type("Split");
      split.add_bottom(blob);
      const caffe::DataType type = DataTypeToProto(ProducerType(l, t));
      split.set_bottom_data_type(type);
      split.set_compute_data_type(type);
      split.set_top_data_type(type);
      split.add_bottom_quantizer()->set_name(QuantizerNameOf(l, "top", t));
      for (size_t k = 0; k < it->second.size(); ++k) {
        const std::string top = split.name() + "_" + std::to_string(k);
        split.add_top(top);
        const auto [ci, cb] = it->second[k];
        split.add_top_quantizer()->set_name(QuantizerNameOf(in.layer(ci), "bottom", cb));
        renamed[{ci, cb}] = top;
      }
      inserted->insert(split.name());
      *out.add_layer() = split;
    }
  }
  return out;
}

}  // namespace

// ---- Net ---------------------------------------------------------------------------------------

namespace {
// The layers net/ defines join the registry's built-in groups in every program that builds Nets
// (a static library links this file whenever the Net constructor is used).
[[maybe_unused]] const bool kNetLayersAdded = (AddBuiltinLayerGroup(&RegisterNetLayers), true);
}  // namespace

Net::Net(const caffe::NetParameter& param, Device& device, const NetOptions& options)
    : device_(&device), options_(options) {
  base_bytes_ = device.bytes_in_use();
  if (!options.nested) device.ResetPeak();
  Build(param);
}

std::unique_ptr<Net> Net::FromFile(const std::string& prototxt, Device& device,
                                   const NetOptions& options) {
  return std::make_unique<Net>(ReadNetParameterText(prototxt), device, options);
}

void Net::Build(const caffe::NetParameter& given) {
  state_ = given.state();
  state_.set_phase(options_.phase);
  if (options_.level) state_.set_level(options_.level);
  for (const auto& s : options_.stages) state_.add_stage(s);
  caffe::NetParameter p = FilterNet(given, state_);
  ApplyNetDataType(&p);
  if (options_.synthetic_data) ReplaceDataLayers(&p, options_, &synthetic_layers_);
  p = InsertConversions(p, &inserted_);
  p = InsertSplits(p, &inserted_);
  *p.mutable_state() = state_;
  param_ = p;
  reduced_memory_ = state_.phase() == caffe::TEST &&
                    (options_.reduced_memory >= 0 ? options_.reduced_memory != 0
                                                  : given.reduced_memory_inference());

  // Whether each blob's last written value is read by a later layer (an in-place layer reads
  // the value and writes a new one).
  std::map<std::string, bool> consumed;
  for (int i = 0; i < p.layer_size(); ++i) {
    caffe::LayerParameter lp = p.layer(i);
    lp.set_phase(state_.phase());
    if (layer_index_.count(lp.name()))
      throw NetError("layer name '" + lp.name() + "' is used twice (layer " + std::to_string(i) + ")");
    std::unique_ptr<Layer> layer = CreateLayer(lp, *device_);
    std::vector<Blob*> bottoms, tops;
    for (int b = 0; b < lp.bottom_size(); ++b) {
      auto it = blobs_.find(lp.bottom(b));
      if (it == blobs_.end())
        throw NetError("layer '" + lp.name() + "': unknown bottom blob '" + lp.bottom(b) +
                       "' (bottom " + std::to_string(b) + ")");
      bottoms.push_back(it->second.get());
      consumed[lp.bottom(b)] = true;
    }
    for (int t = 0; t < lp.top_size(); ++t) {
      const std::string& name = lp.top(t);
      if (t < lp.bottom_size() && lp.bottom(t) == name) {
        tops.push_back(blobs_[name].get());  // in place
        consumed[name] = false;
        continue;
      }
      if (blobs_.count(name))
        throw NetError("layer '" + lp.name() + "': top blob '" + name +
                       "' is produced by an earlier layer too (only in-place reuse, top i = "
                       "bottom i, is allowed)");
      auto blob = std::make_shared<Blob>(*device_, layer->top_type(t), std::vector<int>{}, name);
      blobs_[name] = blob;
      blob_names_.push_back(name);
      tops.push_back(blob.get());
    }
    try {
      layer->SetUp(bottoms, tops);
    } catch (const BlobError& e) {  // a top or parameter shape refused: say which layer
      throw BlobError("layer '" + lp.name() + "' (" + lp.type() + "): " + e.what());
    }
    std::vector<float> weights;
    for (int t = 0; t < lp.top_size(); ++t)
      weights.push_back(t < lp.loss_weight_size() ? lp.loss_weight(t) : layer->DefaultLossWeight(t));
    loss_weights_.push_back(weights);
    if (lp.type() == "Input")
      for (Blob* b : tops) input_blobs_.push_back(b);
    layer_index_[lp.name()] = i;
    layer_names_.push_back(lp.name());
    bottom_vecs_.push_back(bottoms);
    top_vecs_.push_back(tops);
    layers_.push_back(std::move(layer));
  }
  for (const auto& n : blob_names_)
    if (!consumed[n]) output_blobs_.push_back(blobs_[n].get());
  if (state_.quantizer_mode() != caffe::CAFFE_QUANT_PASSIVE)
    SetQuantMode(static_cast<quant::QuantizerMode>(state_.quantizer_mode()));
  SetUpBackward();
  PlanReluFusion();
  if (options_.synthetic_data) FillSyntheticInputs();
  if (reduced_memory_) {
    for (auto& l : layers_) l->set_release_param_copies(true);
    PlanMemory();
  }
}

void Net::PlanReluFusion() {
  const int n = static_cast<int>(layers_.size());
  fused_relu_.assign(n, -1);
  int enabled = options_.fuse_relu;
  if (enabled < 0) {
    enabled = GetSettings().fuse != "0";
  }
  if (!enabled || state_.phase() != caffe::TEST) return;
  std::map<const Blob*, int> readers;
  for (const auto& bottoms : bottom_vecs_)
    for (const Blob* b : bottoms) ++readers[b];
  const std::set<std::string> kept(options_.keep_blobs.begin(), options_.keep_blobs.end());
  // The ReLU must directly follow its producer: nothing runs between them, so the ReLU's top
  // being written one step early changes no other layer's view (PlanMemory extends its life).
  for (int i = 0; i + 1 < n; ++i) {
    const int j = i + 1;
    Layer& producer = *layers_[i];
    if (!producer.SupportsFusedRelu() || top_vecs_[i].size() != 1) continue;
    const caffe::LayerParameter& rp = param_.layer(j);
    if (rp.type() != "ReLU" || rp.relu_param().negative_slope() != 0.0f) continue;
    Blob* t = top_vecs_[i][0];
    if (bottom_vecs_[j].size() != 1 || bottom_vecs_[j][0] != t || top_vecs_[j].size() != 1) continue;
    Blob* out = top_vecs_[j][0];
    const bool in_place = out == t;
    // A new blob's old value is lost, so only where intermediate blobs are not kept anyway:
    // under reduced memory, and in nets nested in a layer (the user sees only the layer's
    // output).
    const bool intermediates_hidden = reduced_memory_ || options_.nested;
    if (!in_place && (!intermediates_hidden || readers[t] != 1 || kept.count(t->name()))) continue;
    if (t->type() != out->type() || layers_[j]->compute_type() != t->type()) continue;
    if (loss_weights_[i][0] != 0.0f || layer_need_backward_[i] || layer_need_backward_[j]) continue;
    fused_relu_[i] = j;
  }
}

bool Net::FusionActive(int i) {
  const int j = fused_relu_[i];
  if (j < 0) return false;
  // Quantizer hooks observe or snap fp32 data around each layer; with the pair fused, the
  // producer's top and the ReLU's bottom would never be seen.
  auto idle = [](quant::Quantizer& q) {
    return q.mode() != quant::QuantizerMode::kObserve && q.mode() != quant::QuantizerMode::kPseudo;
  };
  return idle(layers_[i]->top_quantizer(0)) && idle(layers_[j]->bottom_quantizer(0)) &&
         idle(layers_[j]->top_quantizer(0));
}

void Net::SetUpBackward() {
  const size_t n = layers_.size();
  layer_need_backward_.assign(n, false);
  bottom_need_backward_.assign(n, {});
  std::set<const Blob*> need;  // blobs whose gradient some layer needs
  std::map<std::string, std::pair<int, int>> owners;  // ParamSpec name -> (layer, blob)
  for (size_t i = 0; i < n; ++i) {
    Layer& layer = *layers_[i];
    const caffe::LayerParameter& lp = param_.layer(static_cast<int>(i));
    bool layer_need = false;
    auto& bnb = bottom_need_backward_[i];
    for (size_t b = 0; b < bottom_vecs_[i].size(); ++b) {
      bool d = need.count(bottom_vecs_[i][b]) > 0 ||
               (param_.force_backward() && layer.HasBackward() &&
                layer.AllowForceBackward(static_cast<int>(b)));
      if (static_cast<int>(b) < lp.propagate_down_size() && !lp.propagate_down(static_cast<int>(b)))
        d = false;
      bnb.push_back(d);
      layer_need |= d;
    }
    for (int j = 0; j < layer.num_params(); ++j) {
      const caffe::ParamSpec spec = j < lp.param_size() ? lp.param(j) : caffe::ParamSpec();
      const float lr = spec.has_lr_mult() ? spec.lr_mult() : 1.0f;
      const float decay = spec.has_decay_mult() ? spec.decay_mult() : 1.0f;
      layer.set_param_propagate_down(j, lr != 0.0f);
      layer_need |= lr != 0.0f && layer.HasBackward();
      const std::string pname = lp.name() + "/" + std::to_string(j);
      if (!spec.name().empty()) {
        auto it = owners.find(spec.name());
        if (it != owners.end()) {  // shared: use the owner's blob (data and diff)
          Blob& own = layers_[it->second.first]->param_blob(it->second.second);
          Blob& mine = layer.param_blob(j);
          if (own.count() != mine.count() || own.type() != mine.type())
            throw NetError("layer '" + lp.name() + "': parameter " + std::to_string(j) + " ('" +
                           spec.name() + "') of shape " + mine.shape_string() +
                           " cannot share the owner's " + own.shape_string());
          layer.blobs()[j] = layers_[it->second.first]->blobs()[it->second.second];
          layer.ParamsChanged();
          continue;
        }
        owners[spec.name()] = {static_cast<int>(i), j};
      }
      // Not trainable: reduced-precision blobs, and layers without a backward pass (BatchNorm's
      // statistics, as BVLC forces their lr_mult to 0).
      if (layer.param_blob(j).type() != DataType::kFloat32 || !layer.HasBackward()) continue;
      learnable_params_.push_back(&layer.param_blob(j));
      params_lr_.push_back(lr);
      params_weight_decay_.push_back(decay);
      learnable_param_names_.push_back(pname);
    }
    // Parameters of nets nested in the layer are the net's parameters too.
    const std::vector<Net*> nested = nested_nets(static_cast<int>(i));
    for (size_t k = 0; k < nested.size(); ++k) {
      const Net& sub = *nested[k];
      for (size_t q = 0; q < sub.learnable_params().size(); ++q) {
        learnable_params_.push_back(sub.learnable_params()[q]);
        params_lr_.push_back(sub.params_lr()[q]);
        params_weight_decay_.push_back(sub.params_weight_decay()[q]);
        learnable_param_names_.push_back(lp.name() + "/" +
                                         layer.nested_net_name(static_cast<int>(k)) + "/" +
                                         sub.learnable_param_names()[q]);
        layer_need |= sub.params_lr()[q] != 0.0f;
      }
    }
    layer_need_backward_[i] = layer_need;
    if (layer_need)
      for (size_t t = 0; t < top_vecs_[i].size(); ++t) need.insert(top_vecs_[i][t]);
  }
  // Only layers under a loss run backward (BVLC's second pass); a nested net's outputs get
  // their gradients from the layer holding it.
  std::set<const Blob*> under_loss;
  if (options_.backward_from_outputs) under_loss.insert(output_blobs_.begin(), output_blobs_.end());
  for (size_t r = n; r-- > 0;) {
    bool contributes = false;
    for (size_t t = 0; t < top_vecs_[r].size(); ++t)
      if (loss_weights_[r][t] != 0.0f || under_loss.count(top_vecs_[r][t])) contributes = true;
    if (!contributes) {
      layer_need_backward_[r] = false;
      bottom_need_backward_[r].assign(bottom_vecs_[r].size(), false);
      continue;
    }
    for (Blob* b : bottom_vecs_[r]) under_loss.insert(b);
  }
}

void Net::BackwardFromTo(int start, int end) {
  const int n = static_cast<int>(layers_.size());
  if (start < 0 || end >= n || start > end + 1)
    throw NetError("BackwardFromTo(" + std::to_string(start) + ", " + std::to_string(end) +
                   ") outside the net's " + std::to_string(n) + " layers");
  for (int i = end; i >= start; --i) {
    for (size_t t = 0; t < top_vecs_[i].size(); ++t) {
      const float w = loss_weights_[i][t];
      if (w == 0.0f) continue;
      Blob& top = *top_vecs_[i][t];
      if (top.type() != DataType::kFloat32)
        throw NetError("loss top '" + top.name() + "' of layer '" + layer_names_[i] +
                       "' is not fp32; training runs in fp32");
      std::fill_n(static_cast<float*>(top.mutable_host_diff()), top.count(), w);
    }
  }
  for (int i = end; i >= start; --i) {
    if (!layer_need_backward_[i]) continue;
    Layer& layer = *layers_[i];
    if (!layer.HasBackward())
      throw NetError("layer '" + layer_names_[i] + "' (" + layer.type() +
                     ") needs a backward pass (it lies between a loss and a learnable "
                     "parameter) but has none");
    layer.Backward(top_vecs_[i], bottom_need_backward_[i], bottom_vecs_[i]);
  }
}

void Net::Backward() {
  if (!layers_.empty()) BackwardFromTo(0, static_cast<int>(layers_.size()) - 1);
}

float Net::ForwardBackward() {
  const float loss = Forward();
  Backward();
  return loss;
}

void Net::ClearParamDiffs() {
  for (Blob* b : learnable_params_)
    if (b->count()) device_->Zero(b->mutable_device_diff(), 0, b->bytes());
}

void Net::ParamsUpdated() {
  for (auto& l : layers_) l->ParamsChanged();
}

std::vector<Net*> Net::nested_nets(int layer) const {
  return layers_.at(layer)->nested_nets();
}

void Net::ShareTrainedLayersWith(const Net& other) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string& name = layer_names_[i];
    auto it = other.layer_index_.find(name);
    if (it == other.layer_index_.end()) continue;
    const std::vector<Net*> mine = nested_nets(static_cast<int>(i));
    const std::vector<Net*> theirs = other.nested_nets(it->second);
    if (mine.size() != theirs.size())
      throw NetError("layer '" + name + "': " + std::to_string(mine.size()) + " nested nets, the shared net's layer has " +
                     std::to_string(theirs.size()));
    for (size_t k = 0; k < mine.size(); ++k) mine[k]->ShareTrainedLayersWith(*theirs[k]);
    Layer& src = *other.layers_[it->second];
    Layer& dst = *layers_[i];
    if (src.num_params() != dst.num_params())
      throw NetError("layer '" + name + "': " + std::to_string(dst.num_params()) +
                     " parameter blobs, the shared net's layer has " +
                     std::to_string(src.num_params()));
    for (int j = 0; j < dst.num_params(); ++j) {
      if (src.param_blob(j).shape() != dst.param_blob(j).shape() ||
          src.param_blob(j).type() != dst.param_blob(j).type())
        throw NetError("layer '" + name + "' parameter " + std::to_string(j) + ": shape " +
                       dst.param_blob(j).shape_string() + " cannot share " +
                       src.param_blob(j).shape_string());
      dst.blobs()[j] = src.blobs()[j];
    }
    dst.ParamsChanged();
  }
}

void Net::FillSyntheticInputs() {
  std::mt19937 rng(static_cast<uint32_t>(RandomSeed()));
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!synthetic_layers_.count(layer_names_[i])) continue;
    for (size_t t = 0; t < top_vecs_[i].size(); ++t) {
      Blob* b = top_vecs_[i][t];
      std::vector<float> v(b->count());
      std::uniform_real_distribution<float> data(IsQuantized(b->type()) ? 0.0f : -1.0f,
                                                 IsQuantized(b->type()) ? 255.0f : 1.0f);
      for (auto& x : v) x = t == 0 ? data(rng) : 0.0f;  // labels: class 0
      b->FromFloat(v);
    }
  }
}

int Net::layer_index(const std::string& name) const {
  auto it = layer_index_.find(name);
  if (it == layer_index_.end()) throw NetError("net '" + param_.name() + "' has no layer '" + name + "'");
  return it->second;
}

Blob& Net::blob(const std::string& name) const {
  auto it = blobs_.find(name);
  if (it == blobs_.end()) throw NetError("net '" + param_.name() + "' has no blob '" + name + "'");
  return *it->second;
}

float Net::ForwardFromTo(int start, int end) {
  if (start < 0 || end >= static_cast<int>(layers_.size()) || start > end + 1)
    throw NetError("ForwardFromTo(" + std::to_string(start) + ", " + std::to_string(end) +
                   ") outside the net's " + std::to_string(layers_.size()) + " layers");
  float loss = 0;
  for (int i = start; i <= end; ++i) {
    if (i < end && FusionActive(i)) {
      Layer& producer = *layers_[i];
      producer.set_fused_relu(layers_[i + 1].get());
      try {
        producer.Forward(bottom_vecs_[i], top_vecs_[i + 1]);
      } catch (...) {
        producer.set_fused_relu(nullptr);
        throw;
      }
      producer.set_fused_relu(nullptr);
      ++i;  // the ReLU ran inside its producer; its top is written
    } else {
      layers_[i]->Forward(bottom_vecs_[i], top_vecs_[i]);
    }
    for (size_t t = 0; t < top_vecs_[i].size(); ++t) {
      if (loss_weights_[i][t] == 0.0f) continue;
      const std::vector<float> v = top_vecs_[i][t]->ToFloat();
      for (float x : v) loss += loss_weights_[i][t] * x;
    }
  }
  return loss;
}

float Net::Forward() {
  if (layers_.empty()) return 0.0f;
  return ForwardFromTo(0, static_cast<int>(layers_.size()) - 1);
}

void Net::Reshape() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    try {
      layers_[i]->Reshape(bottom_vecs_[i], top_vecs_[i]);
    } catch (const BlobError& e) {
      throw BlobError("layer '" + layer_names_[i] + "' (" + layers_[i]->type() + "): " + e.what());
    }
  }
  if (reduced_memory_) PlanMemory();
}

void Net::PlanMemory() {
  std::vector<BlobLifetime> lives;
  std::map<Blob*, size_t> index;
  const int n = static_cast<int>(layers_.size());
  auto touch = [&](Blob* b, int step) {
    auto it = index.find(b);
    if (it == index.end()) {
      index[b] = lives.size();
      lives.push_back({b->bytes(), step, step});
    } else {
      lives[it->second].first = std::min(lives[it->second].first, step);
      lives[it->second].last = std::max(lives[it->second].last, step);
    }
  };
  for (int i = 0; i < n; ++i) {
    for (Blob* b : bottom_vecs_[i]) touch(b, i);
    for (Blob* b : top_vecs_[i]) touch(b, i);
    // A fused ReLU's top is written by its producer, one step early.
    if (fused_relu_[i] >= 0)
      for (Blob* b : top_vecs_[fused_relu_[i]]) touch(b, i);
  }
  for (Blob* b : input_blobs_) touch(b, -1);     // written by the user before Forward
  for (Blob* b : output_blobs_) touch(b, n);     // read by the user after Forward
  for (const auto& name : options_.keep_blobs) {
    auto it = blobs_.find(name);
    if (it == blobs_.end()) throw NetError("keep_blobs names '" + name + "', which the net has not");
    touch(it->second.get(), -1);
    touch(it->second.get(), n);
  }
  const MemoryPlan plan = PlanSharedMemory(lives);
  slots_.clear();
  for (size_t bytes : plan.slot_bytes) slots_.push_back(device_->Allocate(std::max<size_t>(bytes, 4)));
  std::vector<Blob*> order(lives.size());
  for (const auto& [b, i] : index) order[i] = b;
  for (size_t i = 0; i < order.size(); ++i) order[i]->SetDataMemory(slots_[plan.slot_of[i]]);
}

void Net::SetQuantMode(quant::QuantizerMode mode) {
  quant_mode_ = mode;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->SetQuantMode(mode);
    for (Net* n : nested_nets(static_cast<int>(i))) n->SetQuantMode(mode);
  }
}

bool Net::has_quantized_layers() const {
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (size_t t = 0; t < top_vecs_[i].size(); ++t)
      if (IsQuantized(layers_[i]->top_type(static_cast<int>(t)))) return true;
    if (IsQuantized(layers_[i]->compute_type())) return true;
    for (Net* n : nested_nets(static_cast<int>(i)))
      if (n->has_quantized_layers()) return true;
  }
  return false;
}

std::vector<std::string> Net::QuantizersWithoutRange() {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (auto& l : layers_)
    for (quant::Quantizer* q : l->quantizers()) {
      // Parameter quantizers take their range from the parameter values when none is given.
      bool param = false;
      for (int i = 0; i < l->num_blob_quantizers(); ++i) param |= q == &l->blob_quantizer(i);
      if (param) continue;
      const bool quantized = IsQuantized(q->input_type()) || IsQuantized(q->output_type());
      if (!quantized || q->has_observed() || (q->has_input_range() && q->has_output_range())) continue;
      if (seen.insert(q->name()).second) names.push_back(q->name());
    }
  // Nested nets' quantizers, as "<layer>/<nested index>:<quantizer>".
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::vector<Net*> nested = nested_nets(static_cast<int>(i));
    for (size_t k = 0; k < nested.size(); ++k)
      for (const std::string& q : nested[k]->QuantizersWithoutRange())
        names.push_back(layer_names_[i] + "/" + std::to_string(k) + ":" + q);
  }
  return names;
}

namespace {

/// BVLC's shape comparison: `shape` when the proto has one, else the legacy 4-d fields.
bool ShapeMatches(const caffe::BlobProto& bp, const Blob& blob) {
  if (bp.has_shape()) {
    if (bp.shape().dim_size() != blob.num_axes()) return false;
    for (int i = 0; i < blob.num_axes(); ++i)
      if (bp.shape().dim(i) != blob.shape(i)) return false;
    return true;
  }
  if (blob.num_axes() > 4) return false;
  return bp.num() == blob.LegacyShape(-4) && bp.channels() == blob.LegacyShape(-3) &&
         bp.height() == blob.LegacyShape(-2) && bp.width() == blob.LegacyShape(-1);
}

std::string ProtoShapeString(const caffe::BlobProto& bp) {
  std::vector<int> dims;
  if (bp.has_shape()) {
    for (auto d : bp.shape().dim()) dims.push_back(static_cast<int>(d));
  } else {
    dims = {bp.num(), bp.channels(), bp.height(), bp.width()};
  }
  return ShapeString(dims);
}

void ApplyRange(const caffe::QuantizerParameter& p, quant::Quantizer* q) {
  if (p.has_observed_min() && p.has_observed_max()) q->SetObserved(p.observed_min(), p.observed_max());
  if (p.has_min_in() && p.has_max_in()) q->SetInputRange(p.min_in(), p.max_in());
  if (p.has_min_out() && p.has_max_out()) q->SetOutputRange(p.min_out(), p.max_out());
}

}  // namespace

void Net::CopyTrainedLayersFrom(const caffe::NetParameter& weights) {
  // 1. Quantizer ranges, by name: net-level list, then per-layer quantizer entries.
  std::map<std::string, const caffe::QuantizerParameter*> ranges;
  for (const auto& q : weights.quantizer()) ranges[q.name()] = &q;
  for (auto& l : layers_)
    for (quant::Quantizer* q : l->quantizers()) {
      auto it = ranges.find(q->name());
      if (it != ranges.end()) ApplyRange(*it->second, q);
    }
  for (const auto& src : weights.layer()) {
    auto it = layer_index_.find(src.name());
    if (it == layer_index_.end()) continue;
    Layer& l = *layers_[it->second];
    for (int i = 0; i < src.blobs_quantizer_size() && i < l.num_blob_quantizers(); ++i)
      ApplyRange(src.blobs_quantizer(i), &l.blob_quantizer(i));
    // Nested nets: their weights and ranges are saved inside the layer's entry.
    const std::vector<Net*> nested = l.nested_nets();
    if (nested.empty()) continue;
    const std::vector<const caffe::NetParameter*> saved = l.SavedNestedNets(src);
    for (size_t k = 0; k < saved.size(); ++k) {
      if (!saved[k]) continue;
      try {
        nested[k]->CopyTrainedLayersFrom(*saved[k]);
      } catch (const Error& e) {
        throw NetError("layer '" + src.name() + "', nested net '" +
                       l.nested_net_name(static_cast<int>(k)) + "': " + e.what());
      }
    }
  }
  // 2. Parameter blobs.
  for (const auto& src : weights.layer()) {
    auto it = layer_index_.find(src.name());
    if (it == layer_index_.end() || src.blobs_size() == 0) continue;
    Layer& l = *layers_[it->second];
    if (l.num_params() != src.blobs_size())
      throw NetError("layer '" + src.name() + "': the weights have " + std::to_string(src.blobs_size()) +
                     " parameter blobs, the net's layer has " + std::to_string(l.num_params()));
    for (int i = 0; i < src.blobs_size(); ++i) {
      const caffe::BlobProto& bp = src.blobs(i);
      Blob& target = l.param_blob(i);
      if (!ShapeMatches(bp, target))
        throw NetError("layer '" + src.name() + "', parameter blob " + std::to_string(i) +
                       ": shape mismatch; the weights have " + ProtoShapeString(bp) +
                       ", the net's layer has " + target.shape_string());
      const size_t count = target.count();
      if (bp.has_packed_data()) {
        const DataType from = DataTypeFromProto(bp.data_type(), "layer '" + src.name() + "' blob " + std::to_string(i));
        if (bp.packed_data().size() != count * SizeOf(from))
          throw NetError("layer '" + src.name() + "', parameter blob " + std::to_string(i) +
                         ": packed_data has " + std::to_string(bp.packed_data().size()) +
                         " bytes, " + target.shape_string() + " of " + Name(from) + " needs " +
                         std::to_string(count * SizeOf(from)));
        if (from == target.type()) {
          l.SetParamStorage(i, bp.packed_data().data());
          continue;
        }
        std::vector<float> values(count);
        if (IsQuantized(from)) {
          quant::Quantizer& q = l.blob_quantizer(i);
          if (!q.has_observed())
            throw NetError("layer '" + src.name() + "', parameter blob " + std::to_string(i) +
                           ": packed " + Name(from) + " data without a range for quantizer '" +
                           q.name() + "'");
          const auto params = quant::ChooseQuantParams(q.observed_min(), q.observed_max(), from, q.symmetric());
          quant::DequantizeTensor(bp.packed_data().data(), count, params, values.data());
        } else if (from == DataType::kFloat16) {
          const auto* h = reinterpret_cast<const uint16_t*>(bp.packed_data().data());
          for (size_t k = 0; k < count; ++k) values[k] = HalfToFloat(h[k]);
        } else {
          std::memcpy(values.data(), bp.packed_data().data(), count * 4);
        }
        l.SetParamFromFloat(i, values);
      } else if (static_cast<size_t>(bp.data_size()) == count) {
        l.SetParamFromFloat(i, std::vector<float>(bp.data().begin(), bp.data().end()));
      } else if (static_cast<size_t>(bp.double_data_size()) == count) {
        l.SetParamFromFloat(i, std::vector<float>(bp.double_data().begin(), bp.double_data().end()));
      } else {
        throw NetError("layer '" + src.name() + "', parameter blob " + std::to_string(i) +
                       ": the weights hold " + std::to_string(bp.data_size()) +
                       " values, the net's layer needs " + std::to_string(count) + " (" +
                       target.shape_string() + ")");
      }
    }
  }
  for (auto& l : layers_) l->ParamsChanged();
}

void Net::CopyTrainedLayersFrom(const std::string& caffemodel) {
  CopyTrainedLayersFrom(ReadNetParameterBinary(caffemodel));
}

void Net::ToProto(caffe::NetParameter* out) {
  out->Clear();
  out->set_name(param_.name());
  if (param_.has_data_type()) out->set_data_type(param_.data_type());
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (inserted(static_cast<int>(i))) continue;
    Layer& l = *layers_[i];
    caffe::LayerParameter* lp = out->add_layer();
    *lp = l.layer_param();
    lp->clear_blobs();
    lp->clear_phase();
    const std::vector<Net*> nested = nested_nets(static_cast<int>(i));
    if (!nested.empty()) {  // each nested net's weights and ranges, where the layer keeps them
      const std::vector<caffe::NetParameter*> saved = l.SavedNestedNets(lp);
      for (size_t k = 0; k < nested.size(); ++k) nested[k]->ToProto(saved[k]);
    }
    for (auto& b : l.blobs()) {
      caffe::BlobProto* bp = lp->add_blobs();
      for (int d : b->shape()) bp->mutable_shape()->add_dim(d);
      if (b->type() == DataType::kFloat32) {
        const float* v = static_cast<const float*>(b->host_data());
        bp->mutable_data()->Add(v, v + b->count());
      } else {
        bp->set_data_type(DataTypeToProto(b->type()));
        bp->set_packed_data(std::string(static_cast<const char*>(b->host_data()), b->bytes()));
      }
    }
  }
  AppendRanges(out);
}

void Net::AppendRanges(caffe::NetParameter* out) {
  std::set<std::string> written;
  for (auto& l : layers_)
    for (quant::Quantizer* q : l->quantizers()) {
      if (written.count(q->name())) continue;
      if (!q->has_observed() && !q->has_input_range() && !q->has_output_range()) continue;
      written.insert(q->name());
      caffe::QuantizerParameter* qp = out->add_quantizer();
      quant::ToProto(*q, qp);
      qp->clear_mode();  // the saved entry is a range; modes belong to the run
    }
}

void Net::RangesToProto(caffe::NetParameter* out) {
  out->Clear();
  out->set_name(param_.name());
  AppendRanges(out);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::vector<Net*> nested = nested_nets(static_cast<int>(i));
    if (nested.empty()) continue;
    caffe::LayerParameter* lp = out->add_layer();
    lp->set_name(layer_names_[i]);
    const std::vector<caffe::NetParameter*> saved = layers_[i]->SavedNestedNets(lp);
    for (size_t k = 0; k < nested.size(); ++k) nested[k]->RangesToProto(saved[k]);
  }
}

void Net::Save(const std::string& caffemodel) {
  caffe::NetParameter p;
  ToProto(&p);
  WriteProtoToBinaryFile(p, caffemodel);
}

uint64_t Net::peak_device_bytes() const {
  const uint64_t peak = device_->peak_bytes();
  return peak > base_bytes_ ? peak - base_bytes_ : 0;
}

uint64_t Net::blob_device_bytes() const {
  std::set<const DeviceMemory*> seen;
  uint64_t total = 0;
  auto add = [&](const Blob& b) {
    auto m = b.data_memory();
    if (m && seen.insert(m.get()).second) total += m->bytes();
  };
  for (const auto& [name, b] : blobs_) add(*b);
  for (const auto& l : layers_)
    for (int i = 0; i < l->num_params(); ++i) add(l->param_blob(i));
  for (size_t i = 0; i < layers_.size(); ++i)
    for (Net* n : nested_nets(static_cast<int>(i))) total += n->blob_device_bytes();
  return total;
}

void CalibrateWithFloatVariant(Net& net, const caffe::NetParameter& param, const NetOptions& options,
                               int iterations) {
  const std::vector<std::string> missing = net.QuantizersWithoutRange();
  if (missing.empty()) return;
  NetOptions o = options;
  o.reduced_memory = 0;
  Net fp32(WithDataType(param, DataType::kFloat32), net.device(), o);
  caffe::NetParameter weights;
  net.ToProto(&weights);
  fp32.CopyTrainedLayersFrom(weights);
  for (Blob* in : fp32.input_blobs()) {
    if (!net.has_blob(in->name())) continue;
    Blob& src = net.blob(in->name());
    if (src.type() == in->type() && src.count() == in->count())
      std::memcpy(in->mutable_host_data(), src.host_data(), src.bytes());
  }
  fp32.SetQuantMode(quant::QuantizerMode::kObserve);
  for (int i = 0; i < iterations; ++i) fp32.Forward();
  caffe::NetParameter observed;
  fp32.RangesToProto(&observed);
  caffe::NetParameter ranges;
  const std::set<std::string> wanted(missing.begin(), missing.end());
  for (const auto& q : observed.quantizer())
    if (wanted.count(q.name())) *ranges.add_quantizer() = q;
  // Nested nets: every observed range of theirs, inside the layer's entry.
  for (const auto& l : observed.layer()) {
    if (!net.has_layer(l.name())) continue;
    const Layer& layer = net.layer(l.name());
    const std::vector<const caffe::NetParameter*> src = layer.SavedNestedNets(l);
    if (src.empty()) continue;
    caffe::LayerParameter* r = ranges.add_layer();
    r->set_name(l.name());
    const std::vector<caffe::NetParameter*> dst = layer.SavedNestedNets(r);
    for (size_t k = 0; k < src.size(); ++k)
      if (src[k]) *dst[k]->mutable_quantizer() = src[k]->quantizer();
  }
  net.CopyTrainedLayersFrom(ranges);
}

}  // namespace mpcaffe
