// net/net_passes.cc — the NetParameter passes a Net is built through: phase/level/stage
// filtering, the net's data type, synthetic data, conversions (Quantizer layers where data types
// change) and BVLC's split insertion; nested nets found in layer definitions.
#include "net/net_passes.h"

#include <sys/stat.h>

#include <algorithm>
#include <list>

#include "layers/layer_registry.h"
#include "proto/model_io.h"

namespace mpcaffe {

bool StateMeetsRule(const caffe::NetState& state, const caffe::NetStateRule& rule) {
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  for (const auto& s : rule.stage())
    if (std::find(state.stage().begin(), state.stage().end(), s) == state.stage().end())
      return false;
  for (const auto& s : rule.not_stage())
    if (std::find(state.stage().begin(), state.stage().end(), s) != state.stage().end())
      return false;
  return true;
}

caffe::NetParameter FilterNet(const caffe::NetParameter& param, const caffe::NetState& state) {
  caffe::NetParameter out = param;
  out.clear_layer();
  for (const auto& layer : param.layer()) {
    if (layer.include_size() && layer.exclude_size())
      throw NetError("layer '" + layer.name() +
                     "' has both include and exclude rules; give one kind");
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
    for (caffe::NetParameter* nested : NestedNetParameters(&layer))
      *nested = WithDataType(*nested, type);
  }
  return out;
}

namespace {

/// Appends the NetParameter fields of `message` and, below it, of its other message fields.
void CollectNetParameters(google::protobuf::Message* message,
                          std::vector<caffe::NetParameter*>* nets) {
  const google::protobuf::Reflection* reflection = message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const int n = f->is_repeated() ? reflection->FieldSize(*message, f) : 1;
    for (int i = 0; i < n; ++i) {
      google::protobuf::Message* sub = f->is_repeated()
                                           ? reflection->MutableRepeatedMessage(message, f, i)
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

/// Unset data-type fields of a layer take the net's data_type. Python layers run on the host
/// over fp32 NumPy views: they compute (and, unless their own top_data_type says otherwise,
/// write) fp32 whatever the net's type, and the conversions inserted later connect them to
/// reduced-precision neighbours.
void ApplyNetDataType(caffe::NetParameter* net) {
  for (auto& layer : *net->mutable_layer()) {
    if (layer.type() != "Python") continue;
    if (!layer.has_compute_data_type()) layer.set_compute_data_type(caffe::CAFFE_FLOAT);
    if (!layer.has_top_data_type()) layer.set_top_data_type(caffe::CAFFE_FLOAT);
  }
  if (!net->has_data_type()) return;
  for (auto& layer : *net->mutable_layer()) {
    if (!layer.has_bottom_data_type()) layer.set_bottom_data_type(net->data_type());
    if (!layer.has_compute_data_type()) layer.set_compute_data_type(net->data_type());
    if (!layer.has_top_data_type()) layer.set_top_data_type(net->data_type());
  }
}

namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0;
}

/// The shape (C, H, W) a synthetic Data layer produces (see NetOptions::synthetic_data).
std::vector<int> SyntheticShape(const caffe::LayerParameter& layer, const NetOptions& options) {
  const auto& tp = layer.transform_param();
  const int crop = static_cast<int>(tp.crop_size());
  if (!options.synthetic_shape.empty()) return options.synthetic_shape;
  if (layer.type() == "MemoryData") {  // memory_data_param gives the item's shape
    const auto& mp = layer.memory_data_param();
    return {static_cast<int>(mp.channels()), static_cast<int>(mp.height()),
            static_cast<int>(mp.width())};
  }
  if (layer.type() == "WindowData") {  // colour windows of crop_size², as BVLC decodes them
    const int size = crop ? crop : static_cast<int>(layer.window_data_param().crop_size());
    if (size > 0) return {3, size, size};
  }
  if (layer.type() == "ImageData") {  // its images' shape: new_height × new_width, is_color
    const auto& ip = layer.image_data_param();
    const int c = ip.is_color() ? 3 : 1;
    if (ip.new_height() && ip.new_width())
      return {c, crop ? crop : static_cast<int>(ip.new_height()),
              crop ? crop : static_cast<int>(ip.new_width())};
    if (crop) return {c, crop, crop};
  }
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
  const std::string& src = layer.type() == "ImageData" ? layer.image_data_param().source()
                                                       : layer.data_param().source();
  // BVLC's siamese example stores MNIST digits in pairs, one per channel.
  if (src.find("mnist_siamese") != std::string::npos) return {2, 28, 28};
  if (src.find("mnist") != std::string::npos) return {1, 28, 28};
  if (src.find("cifar") != std::string::npos) return {3, 32, 32};
  throw NetError(layer.type() + " layer '" + layer.name() +
                 "': cannot tell the shape of synthetic data for "
                 "source '" +
                 src +
                 "' (no mean file, no crop_size, unknown dataset); give it "
                 "explicitly (--synthetic-shape C,H,W / NetOptions::synthetic_shape)");
}

}  // namespace

/// Replaces Data, ImageData, MemoryData and WindowData layers by Input layers of the same tops
/// (data: N×C×H×W, label: N).
void ReplaceDataLayers(caffe::NetParameter* net, const NetOptions& options,
                       std::set<std::string>* replaced) {
  for (auto& layer : *net->mutable_layer()) {
    const std::string& type = layer.type();
    if (type != "Data" && type != "ImageData" && type != "MemoryData" && type != "WindowData")
      continue;
    const int batch = static_cast<int>(
        type == "ImageData"    ? layer.image_data_param().batch_size()
        : type == "MemoryData" ? layer.memory_data_param().batch_size()
        : type == "WindowData" ? layer.window_data_param().batch_size()
                               : layer.data_param().batch_size());
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
    for (int i = 2; i < layer.top_size(); ++i)
      input.mutable_input_param()->add_shape()->add_dim(batch);
    replaced->insert(layer.name());
    layer = input;
  }
}

namespace {

/// The type a layer reads its bottoms in and writes top `top` in, as its type's LayerTyping
/// says (converting layers read bottom_data_type, sources and converters write top_data_type).
DataType ConsumerType(const caffe::LayerParameter& l) {
  const auto t =
      TypingOf(l.type()).reads_bottom_type ? l.bottom_data_type() : l.compute_data_type();
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

/// The state of InsertConversions along the layers: the type and quantizer each blob has now,
/// the conversions made so far (a blob converted once serves every later consumer), and the
/// layers written so far with the last writer of each blob.
class ConversionPass {
 public:
  explicit ConversionPass(std::set<std::string>* inserted) : inserted_(inserted) {}

  /// Appends `layer` (its bottoms and tops final) to the output.
  void Emit(const caffe::LayerParameter& layer) {
    auto it = layers_.insert(layers_.end(), layer);
    for (const std::string& t : layer.top()) writer_[t] = it;
  }
  /// The layers in their final order.
  const std::list<caffe::LayerParameter>& layers() const { return layers_; }

  /// Renames the bottoms of `layer` consumed in another type than written to converted blobs,
  /// adding the conversion layers to the output.
  void ConvertBottoms(caffe::LayerParameter* layer) {
    const DataType want = ConsumerType(*layer);
    for (int i = 0; i < layer->bottom_size(); ++i) {
      const std::string logical = layer->bottom(i);
      const bool in_place = i < layer->top_size() && layer->top(i) == logical;
      // The blob holding the newest value of `logical` (an in-place layer working on a
      // converted copy made the copy the newest).
      auto alias = latest_.find(logical);
      const std::string b = alias == latest_.end() ? logical : alias->second;
      auto it = current_.find(b);
      if (it == current_.end()) continue;  // reported by the net build with the layer's name
      if (it->second.type == want) {
        if (in_place) layer->set_top(i, b);
        layer->set_bottom(i, b);
        continue;
      }
      const std::string key = b + "#" + std::to_string(it->second.version) + "#" + Name(want);
      auto done = converted_.find(key);
      std::string name;
      if (done != converted_.end()) {
        name = done->second;
      } else {
        name = b + "_" + Name(want);
        int n = 1;
        while (current_.count(name)) name = b + "_" + Name(want) + "_" + std::to_string(++n);
        const std::string layer_name = layer->name() + "_" + b + "_to_" + Name(want);
        // The conversion follows the last writer of `b` (else it goes before the consumer):
        // the producer's chain then ends in the consumer's type, so the inference optimizer
        // can fuse it whole (conv → int8-to-fp32 → BatchNorm → Scale → fp32-to-int8 runs as
        // one int8 convolution even when the int8 consumer comes several layers later, as
        // ResNet's projection shortcut before the residual sum).
        const caffe::LayerParameter conversion =
            ConversionLayer(layer_name, b, name, it->second.type, want, it->second.quantizer,
                            QuantizerNameOf(*layer, "bottom", i));
        auto w = writer_.find(b);
        if (w == writer_.end()) {
          Emit(conversion);
        } else {
          writer_[name] = layers_.insert(std::next(w->second), conversion);
        }
        inserted_->insert(layer_name);
        converted_[key] = name;
        current_[name] = {want, QuantizerNameOf(*layer, "bottom", i), ++version_};
      }
      // An in-place top of this bottom follows the renamed bottom, which then holds the
      // newest value of the blob for the layers after it.
      if (in_place) {
        layer->set_top(i, name);
        latest_[logical] = name;
      }
      layer->set_bottom(i, name);
    }
  }

  /// Records the tops of `layer`; a regular layer's top declared in another type than its
  /// compute type is written to an internal blob, and the conversion layers giving the
  /// declared blobs are returned (they follow the layer).
  std::vector<caffe::LayerParameter> ConvertTops(caffe::LayerParameter* layer) {
    const bool regular = !TypingOf(layer->type()).writes_top_type;  // the net converts its tops
    std::vector<caffe::LayerParameter> after;
    for (int j = 0; j < layer->top_size(); ++j) {
      // A new value of a blob (not written in place) is read under its own name again.
      if (std::find(layer->bottom().begin(), layer->bottom().end(), layer->top(j)) ==
          layer->bottom().end())
        latest_.erase(layer->top(j));
      const DataType written = ProducerType(*layer, j);
      const DataType declared =
          regular ? DataTypeFromProto(layer->top_data_type(), "layer '" + layer->name() + "'")
                  : written;
      const std::string t = layer->top(j);
      if (declared != written) {
        // The layer writes its compute type into an internal blob; a conversion gives `t`.
        const std::string internal = t + "_" + Name(written);
        const std::string qname = QuantizerNameOf(*layer, "top", j);
        layer->set_top(j, internal);
        const std::string layer_name = layer->name() + "_" + t + "_to_" + Name(declared);
        after.push_back(ConversionLayer(layer_name, internal, t, written, declared, qname, qname));
        inserted_->insert(layer_name);
        current_[internal] = {written, qname, ++version_};
        current_[t] = {declared, qname, ++version_};
      } else {
        current_[t] = {written, QuantizerNameOf(*layer, "top", j), ++version_};
      }
    }
    return after;
  }

 private:
  struct Producer {
    DataType type;
    std::string quantizer;
    int version;
  };
  std::set<std::string>* inserted_;
  std::list<caffe::LayerParameter> layers_;
  std::map<std::string, std::list<caffe::LayerParameter>::iterator> writer_;  // last writer
  std::map<std::string, Producer> current_;
  std::map<std::string, std::string> converted_;  // "blob#version#type" -> converted blob name
  std::map<std::string, std::string> latest_;  // blob -> the converted copy holding its newest value
  int version_ = 0;
};

}  // namespace

/// Inserts a Quantizer layer wherever a bottom is consumed in another type than its producer
/// writes (right after the blob's last writer, so a producer's chain ends in its consumers'
/// type), and after regular layers whose top_data_type differs from their compute type. The
/// inserted layers' quantizers take the names of the producer's top quantizer (input side)
/// and the consumer's bottom quantizer (output side), so ranges calibrated on the fp32 net
/// apply to them.
caffe::NetParameter InsertConversions(const caffe::NetParameter& in,
                                      std::set<std::string>* inserted) {
  ConversionPass pass(inserted);
  for (const auto& src : in.layer()) {
    caffe::LayerParameter layer = src;
    pass.ConvertBottoms(&layer);
    const std::vector<caffe::LayerParameter> after = pass.ConvertTops(&layer);
    pass.Emit(layer);
    for (const auto& a : after) pass.Emit(a);
  }
  caffe::NetParameter out = in;
  out.clear_layer();
  for (const auto& l : pass.layers()) *out.add_layer() = l;
  return out;
}

/// BVLC's split insertion: a blob produced once and consumed by several layers gets a Split
/// layer whose tops feed the consumers one each. The split's quantizers are named after the
/// producer's top quantizer (input) and each consumer's bottom quantizer (outputs).
caffe::NetParameter InsertSplits(const caffe::NetParameter& in, std::set<std::string>* inserted,
                                 bool share_float) {
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
      if (share_float && !IsQuantized(ProducerType(l, t))) {
        bool written_in_place = false;
        for (const auto& [ci, cb] : it->second) {
          const auto& c = in.layer(ci);
          written_in_place |= cb < c.top_size() && c.top(cb) == c.bottom(cb);
        }
        if (!written_in_place) continue;  // every consumer reads the blob itself
      }
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

}  // namespace mpcaffe
