// net/net_build.cc — building a Net: the layers of the passed NetParameter created, connected
// and set up, which layers and parameters train, synthetic inputs; lookups by name.
#include <algorithm>
#include <cstdlib>
#include <random>

#include "device/settings.h"
#include "layers/layer.h"
#include "layers/layer_registry.h"
#include "net/net.h"
#include "net/net_passes.h"
#include "proto/model_io.h"

namespace mpcaffe {

namespace {
// The layers net/ defines join the registry's built-in groups in every program that builds Nets
// (a static library links this file whenever the Net constructor is used).
[[maybe_unused]] const bool kNetLayersAdded = (AddBuiltinLayerGroup(&RegisterNetLayers), true);
[[maybe_unused]] const bool kRecurrentLayersAdded =
    (AddBuiltinLayerGroup(&RegisterRecurrentLayers), true);
}  // namespace

Net::Net(const caffe::NetParameter& param, Device& device, const NetOptions& options)
    : device_(&device), options_(options) {
  base_bytes_ = device.bytes_in_use();
  if (!options.nested) device.ResetPeak();
  Build(param);
}

Net::~Net() = default;

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
  optimize_ = 0;
  if (state_.phase() == caffe::TEST) {
    const std::string& env = GetSettings().optimize;
    optimize_ = options_.optimize >= 0 ? options_.optimize
                : env.empty()           ? 1
                                        : std::clamp(std::atoi(env.c_str()), 0, 2);
  }
  // At inference a Split copies for nothing. At level 2 a float blob's consumers read it
  // directly (its split tops do not exist); at level 1 the Split stays in the net, so its tops
  // keep BVLC's names for pycaffe users and keep_blobs, and runs as a view: its tops share the
  // bottom's data whenever the copy would be exact (in every data type; see PlanViews).
  p = InsertSplits(p, &inserted_, optimize_ >= 2 && !p.force_backward());
  *p.mutable_state() = state_;
  param_ = p;
  reduced_memory_ = state_.phase() == caffe::TEST &&
                    (options_.reduced_memory >= 0 ? options_.reduced_memory != 0
                                                  : given.reduced_memory_inference());

  // Whether each blob's last written value is read by a later layer (an in-place layer reads
  // the value and writes a new one).
  std::map<std::string, bool> consumed;
  for (const caffe::LayerParameter& lp : p.layer()) AddLayer(lp, &consumed);
  for (const auto& n : blob_names_)
    if (!consumed[n]) output_blobs_.push_back(blobs_[n].get());
  if (state_.quantizer_mode() != caffe::CAFFE_QUANT_PASSIVE)
    SetQuantMode(static_cast<quant::QuantizerMode>(state_.quantizer_mode()));
  SetUpBackward();
  PlanFusion();
  if (options_.synthetic_data) FillSyntheticInputs();
  if (reduced_memory_) {
    // The layers run one after another: one scratch buffer per use serves them all.
    const auto arena = std::make_shared<libdnn::ScratchArena>();
    for (auto& l : layers_) {
      l->set_release_param_copies(true);
      l->set_scratch_arena(arena);
    }
  }
  PlanViews();
  UpdateViews(true);  // plans the reduced memory too
  for (size_t i = 0; i < layers_.size(); ++i) NoteReshaped(static_cast<int>(i));
}

void Net::AddLayer(caffe::LayerParameter lp, std::map<std::string, bool>* consumed) {
  const int i = static_cast<int>(layers_.size());
  lp.set_phase(state_.phase());
  std::unique_ptr<Layer> layer = CreateLayer(lp, *device_);
  std::vector<Blob*> bottoms, tops;
  for (int b = 0; b < lp.bottom_size(); ++b) {
    auto it = blobs_.find(lp.bottom(b));
    if (it == blobs_.end())
      throw NetError("layer '" + lp.name() + "': unknown bottom blob '" + lp.bottom(b) +
                     "' (bottom " + std::to_string(b) + ")");
    bottoms.push_back(it->second.get());
    (*consumed)[lp.bottom(b)] = true;
  }
  for (int t = 0; t < lp.top_size(); ++t) {
    const std::string& name = lp.top(t);
    if (t < lp.bottom_size() && lp.bottom(t) == name) {
      tops.push_back(blobs_[name].get());  // in place
      (*consumed)[name] = false;
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
  // BVLC accepts a name twice (its mnist_autoencoder has two layers "loss"); weights are matched
  // by layer name, so that stays an error where either layer has parameter blobs.
  if (const auto same = layer_index_.find(lp.name()); same != layer_index_.end())
    if (layer->num_params() > 0 || layers_[same->second]->num_params() > 0)
      throw NetError("layer name '" + lp.name() + "' is used twice (layer " + std::to_string(i) +
                     "), and weights are matched by layer name");
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

void Net::SetUpBackward() {
  const size_t n = layers_.size();
  layer_need_backward_.assign(n, false);
  bottom_need_backward_.assign(n, {});
  std::set<const Blob*> need;                         // blobs whose gradient some layer needs
  std::map<std::string, std::pair<int, int>> owners;  // ParamSpec name -> (layer, blob)
  for (size_t i = 0; i < n; ++i) {
    Layer& layer = *layers_[i];
    const caffe::LayerParameter& lp = param_.layer(static_cast<int>(i));
    bool layer_need = false;
    auto& bnb = bottom_need_backward_[i];
    for (size_t b = 0; b < bottom_vecs_[i].size(); ++b) {
      bool d =
          need.count(bottom_vecs_[i][b]) > 0 || (param_.force_backward() && layer.HasBackward() &&
                                                 layer.AllowForceBackward(static_cast<int>(b)));
      if (static_cast<int>(b) < lp.propagate_down_size() && !lp.propagate_down(static_cast<int>(b)))
        d = false;
      bnb.push_back(d);
      layer_need |= d;
    }
    layer_need |= SetUpParams(static_cast<int>(i), &owners);
    layer_need_backward_[i] = layer_need;
    if (layer_need)
      for (size_t t = 0; t < top_vecs_[i].size(); ++t) need.insert(top_vecs_[i][t]);
  }
  KeepBackwardUnderLoss();
}

bool Net::SetUpParams(int i, std::map<std::string, std::pair<int, int>>* owners) {
  Layer& layer = *layers_[i];
  const caffe::LayerParameter& lp = param_.layer(i);
  bool need = false;
  for (int j = 0; j < layer.num_params(); ++j) {
    const caffe::ParamSpec spec = j < lp.param_size() ? lp.param(j) : caffe::ParamSpec();
    const float lr = spec.has_lr_mult() ? spec.lr_mult() : 1.0f;
    const float decay = spec.has_decay_mult() ? spec.decay_mult() : 1.0f;
    layer.set_param_propagate_down(j, lr != 0.0f);
    need |= lr != 0.0f && layer.HasBackward();
    const std::string pname = lp.name() + "/" + std::to_string(j);
    if (!spec.name().empty()) {
      auto it = owners->find(spec.name());
      if (it != owners->end()) {  // shared: use the owner's blob (data and diff)
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
      (*owners)[spec.name()] = {i, j};
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
  const std::vector<Net*> nested = layer.nested_nets();
  for (size_t k = 0; k < nested.size(); ++k) {
    const Net& sub = *nested[k];
    for (size_t q = 0; q < sub.learnable_params().size(); ++q) {
      learnable_params_.push_back(sub.learnable_params()[q]);
      params_lr_.push_back(sub.params_lr()[q]);
      params_weight_decay_.push_back(sub.params_weight_decay()[q]);
      learnable_param_names_.push_back(lp.name() + "/" +
                                       layer.nested_net_name(static_cast<int>(k)) + "/" +
                                       sub.learnable_param_names()[q]);
      need |= sub.params_lr()[q] != 0.0f;
    }
  }
  return need;
}

void Net::KeepBackwardUnderLoss() {
  // A nested net's outputs get their gradients from the layer holding it. force_backward keeps
  // every layer that has a backward pass, as BVLC does, so gradients set on any output reach
  // the inputs (a deploy net's input gradient, pycaffe's net.backward(prob=...)).
  std::set<const Blob*> under_loss;
  if (options_.backward_from_outputs) under_loss.insert(output_blobs_.begin(), output_blobs_.end());
  for (size_t r = layers_.size(); r-- > 0;) {
    bool contributes = false;
    for (size_t t = 0; t < top_vecs_[r].size(); ++t)
      if (loss_weights_[r][t] != 0.0f || under_loss.count(top_vecs_[r][t])) contributes = true;
    if (!contributes && param_.force_backward() && layers_[r]->HasBackward()) {
      for (Blob* b : bottom_vecs_[r]) under_loss.insert(b);
      continue;
    }
    if (!contributes) {
      layer_need_backward_[r] = false;
      bottom_need_backward_[r].assign(bottom_vecs_[r].size(), false);
      continue;
    }
    for (Blob* b : bottom_vecs_[r]) under_loss.insert(b);
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

std::vector<Net*> Net::nested_nets(int layer) const { return layers_.at(layer)->nested_nets(); }

int Net::layer_index(const std::string& name) const {
  auto it = layer_index_.find(name);
  if (it == layer_index_.end())
    throw NetError("net '" + param_.name() + "' has no layer '" + name + "'");
  return it->second;
}

Blob& Net::blob(const std::string& name) const {
  auto it = blobs_.find(name);
  if (it == blobs_.end()) throw NetError("net '" + param_.name() + "' has no blob '" + name + "'");
  return *it->second;
}

}  // namespace mpcaffe
