// net/recurrent_layer.cc — BVLC's RNN and LSTM layers: the recurrence unrolled over T steps into
// a nested Net (InnerProduct, Slice, Concat, Scale, Eltwise, TanH / LSTMUnit, Split), the weights
// shared by every step and owned by the layer in BVLC's order, the final states carried to the
// next pass or exposed as tops; the registry entries.
#include "net/recurrent_layer.h"

#include <algorithm>
#include <map>

#include "layers/layer_registry.h"
#include "net/net.h"

namespace mpcaffe {

namespace {

/// Appends a layer of `type` named `name` with the given bottoms and tops.
caffe::LayerParameter* AddLayer(caffe::NetParameter* net, const std::string& type,
                                const std::string& name, const std::vector<std::string>& bottoms,
                                const std::vector<std::string>& tops) {
  caffe::LayerParameter* l = net->add_layer();
  l->set_type(type);
  l->set_name(name);
  for (const auto& b : bottoms) l->add_bottom(b);
  for (const auto& t : tops) l->add_top(t);
  return l;
}

/// An InnerProduct over axis `axis` whose weights (and bias) are shared by ParamSpec name. The
/// fillers stay constant 0: the recurrent layer fills the blobs it owns and shares them.
void AddInnerProduct(caffe::NetParameter* net, const std::string& name, const std::string& bottom,
                     const std::string& top, int num_output, int axis,
                     const std::vector<std::string>& params) {
  caffe::LayerParameter* l = AddLayer(net, "InnerProduct", name, {bottom}, {top});
  caffe::InnerProductParameter* p = l->mutable_inner_product_param();
  p->set_num_output(num_output);
  p->set_axis(axis);
  p->set_bias_term(params.size() > 1);
  for (const auto& n : params) l->add_param()->set_name(n);
}

/// h_conted = cont_t · h (the state flushed where a sequence starts); cont gets no gradient.
void AddContScale(caffe::NetParameter* net, const std::string& h, const std::string& cont,
                  const std::string& top) {
  caffe::LayerParameter* l = AddLayer(net, "Scale", top, {h, cont}, {top});
  l->mutable_scale_param()->set_axis(0);
  l->add_propagate_down(true);
  l->add_propagate_down(false);
}

/// A Slice of `bottom` along axis 0 into `prefix`1 … `prefix`T.
caffe::LayerParameter* AddTimeSlice(caffe::NetParameter* net, const std::string& name,
                                    const std::string& bottom, const std::string& prefix, int T) {
  caffe::LayerParameter* l = AddLayer(net, "Slice", name, {bottom}, {});
  l->mutable_slice_param()->set_axis(0);
  for (int t = 1; t <= T; ++t) l->add_top(prefix + std::to_string(t));
  return l;
}

/// The static input's transform W·x_static (N × out), reshaped to one step (1 × N × out).
void AddStaticTransform(caffe::NetParameter* net, const std::string& name, const std::string& param,
                        int num_output) {
  AddInnerProduct(net, name, "x_static", name + "_preshape", num_output, 1, {param});
  caffe::LayerParameter* r =
      AddLayer(net, "Reshape", name + "_reshape", {name + "_preshape"}, {name});
  caffe::BlobShape* s = r->mutable_reshape_param()->mutable_shape();
  s->add_dim(1);
  s->add_dim(-1);
  s->add_dim(num_output);
}

void AddStateInput(caffe::NetParameter* net, const std::vector<std::string>& names, int N, int H) {
  caffe::LayerParameter* l = AddLayer(net, "Input", "state_input", {}, names);
  for (size_t i = 0; i < names.size(); ++i) {
    caffe::BlobShape* s = l->mutable_input_param()->add_shape();
    s->add_dim(1);
    s->add_dim(N);
    s->add_dim(H);
  }
}

void CopyData(Device& device, const Blob& from, Blob& to) {
  if (from.count())
    device.CopyOnDevice(from.device_data(), 0, to.mutable_device_data(), 0, from.bytes());
}

void CopyDiff(Device& device, const Blob& from, Blob& to) {
  if (from.count())
    device.CopyOnDevice(from.device_diff(), 0, to.mutable_device_diff(), 0, from.bytes());
}

}  // namespace

// ---- RecurrentLayer ---------------------------------------------------------------------------

RecurrentLayer::RecurrentLayer(const caffe::LayerParameter& param, Device& device)
    : Layer(param, device) {}

RecurrentLayer::~RecurrentLayer() = default;

int RecurrentLayer::MinBottomBlobs() const {
  return 2 + (expose_hidden() ? static_cast<int>(RecurrentInputNames().size()) : 0);
}

int RecurrentLayer::ExactNumTopBlobs() const {
  return 1 + (expose_hidden() ? static_cast<int>(RecurrentInputNames().size()) : 0);
}

void RecurrentLayer::CheckBottoms(const std::vector<Blob*>& bottom) {
  const Blob& x = *bottom[0];
  if (x.num_axes() < 2)
    Fail("bottom 0 (x) has shape " + x.shape_string() +
         "; it needs at least 2 axes (T time steps × N streams × ...)");
  if (T_ && x.shape(0) != T_)
    Fail("bottom 0 (x) has " + std::to_string(x.shape(0)) +
         " time steps; the layer was set up "
         "(unrolled) for " +
         std::to_string(T_));
  N_ = x.shape(1);
  const Blob& cont = *bottom[1];
  if (cont.shape() != std::vector<int>{x.shape(0), N_})
    Fail("bottom 1 (cont) has shape " + cont.shape_string() + "; it must be T × N = " +
         std::to_string(x.shape(0)) + " × " + std::to_string(N_) + " like x's first axes");
  if (static_input_ && (bottom[2]->num_axes() < 1 || bottom[2]->shape(0) != N_))
    Fail("bottom 2 (x_static) has shape " + bottom[2]->shape_string() +
         "; its first axis must be the N = " + std::to_string(N_) + " streams");
}

void RecurrentLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::RecurrentParameter& rp = param_.recurrent_param();
  if (rp.num_output() == 0) Fail("recurrent_param.num_output must be positive");
  const int states = static_cast<int>(RecurrentInputNames().size());
  static_input_ = static_cast<int>(bottom.size()) > 2 + (expose_hidden() ? states : 0);
  CheckBottoms(bottom);
  T_ = bottom[0]->shape(0);

  caffe::NetParameter np;
  np.set_name(name() + "_unrolled");
  caffe::LayerParameter* in = AddLayer(&np, "Input", "input", {}, {"x", "cont"});
  if (static_input_) in->add_top("x_static");
  for (int i = 0; i < in->top_size(); ++i) {
    caffe::BlobShape* s = in->mutable_input_param()->add_shape();
    for (int d : bottom[i]->shape()) s->add_dim(d);
  }
  FillUnrolledNet(&np);
  // An exposed final state that a step reads too is copied by a Split: the copy is an output of
  // the unrolled net, so the gradient of its top reaches the steps.
  const std::vector<std::string> outs = RecurrentOutputNames();
  std::vector<std::string> exposed = outs;
  if (expose_hidden())
    for (size_t i = 0; i < outs.size(); ++i) {
      bool read = false;
      for (const auto& l : np.layer())
        read |= std::count(l.bottom().begin(), l.bottom().end(), outs[i]) > 0;
      if (read) {
        exposed[i] = outs[i] + "_exposed";
        AddLayer(&np, "Split", exposed[i], {outs[i]}, {exposed[i]});
      }
    }
  for (auto& l : *np.mutable_layer()) l.set_name(name() + "_" + l.name());
  np = WithDataType(np, compute_type_);
  const bool train = phase() == caffe::TRAIN;
  np.set_force_backward(train);
  NetOptions o;
  o.phase = phase();
  o.nested = true;
  o.backward_from_outputs = train;
  o.reduced_memory = 0;  // the final states must survive until the next pass
  o.optimize = 1;        // views only where every blob keeps its value (the states are read)
  try {
    net_ = std::make_unique<Net>(np, device(), o);
  } catch (const Error& e) {
    Fail(std::string("unrolled net: ") + e.what());
  }
  x_ = &net_->blob("x");
  cont_ = &net_->blob("cont");
  if (static_input_) x_static_ = &net_->blob("x_static");
  output_ = &net_->blob(OutputName());
  for (const auto& n : RecurrentInputNames()) recur_in_.push_back(&net_->blob(n));
  for (size_t i = 0; i < outs.size(); ++i) {
    recur_out_.push_back(&net_->blob(outs[i]));
    exposed_out_.push_back(&net_->blob(exposed[i]));
  }

  // The layer's parameters: each ParamSpec name once, in the order the steps first use them.
  std::map<std::string, int> index;
  const caffe::NetParameter& built = net_->built_param();
  for (size_t i = 0; i < net_->layers().size(); ++i) {
    Layer& l = *net_->layers()[i];
    const caffe::LayerParameter& lp = built.layer(static_cast<int>(i));
    for (int j = 0; j < l.num_params(); ++j) {
      const std::string& pname = j < lp.param_size() ? lp.param(j).name() : std::string();
      if (pname.empty()) Fail("unrolled layer '" + lp.name() + "' has an unshared parameter");
      const auto [it, fresh] = index.emplace(pname, num_params());
      if (fresh) {
        AddParam(l.param_blob(j).shape(), j == 0 ? rp.weight_filler() : rp.bias_filler());
        uses_.emplace_back();
      }
      uses_[it->second].emplace_back(&l, j);
    }
  }
  ShareParams();
}

void RecurrentLayer::ShareParams() {
  for (size_t k = 0; k < uses_.size() && k < blobs_.size(); ++k)
    for (auto& [layer, j] : uses_[k]) {
      if (layer->blobs()[j] == blobs_[k]) continue;
      layer->blobs()[j] = blobs_[k];
      layer->ParamsChanged();
    }
}

void RecurrentLayer::ParamsChanged() {
  if (!net_) return;
  ShareParams();
  net_->ParamsUpdated();
}

void RecurrentLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CheckBottoms(bottom);
  x_->ReshapeLike(*bottom[0]);
  cont_->ReshapeLike(*bottom[1]);
  if (static_input_) x_static_->ReshapeLike(*bottom[2]);
  const std::vector<int> state{1, N_, num_output()};
  const std::vector<std::string> names = RecurrentInputNames();
  const size_t first = 2 + (static_input_ ? 1 : 0);
  for (size_t i = 0; i < recur_in_.size(); ++i) {
    recur_in_[i]->Reshape(state);
    if (expose_hidden() && bottom[first + i]->shape() != state)
      Fail("bottom " + std::to_string(first + i) + " (" + names[i] + ") has shape " +
           bottom[first + i]->shape_string() +
           "; the state is 1 × N × num_output = " + ShapeString(state));
  }
  try {
    net_->Reshape();
  } catch (const Error& e) {
    Fail(std::string("unrolled net: ") + e.what());
  }
  top[0]->ReshapeLike(*output_);
  for (size_t i = 1; i < top.size(); ++i) top[i]->ReshapeLike(*exposed_out_[i - 1]);
}

void RecurrentLayer::Reset() {
  for (Blob* b : recur_out_)
    if (b->count()) device().Zero(b->mutable_device_data(), 0, b->bytes());
}

void RecurrentLayer::ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const size_t first = 2 + (static_input_ ? 1 : 0);
  for (size_t i = 0; i < recur_in_.size(); ++i)
    CopyData(device(), expose_hidden() ? *bottom[first + i] : *recur_out_[i], *recur_in_[i]);
  CopyData(device(), *bottom[0], *x_);
  CopyData(device(), *bottom[1], *cont_);
  if (static_input_) CopyData(device(), *bottom[2], *x_static_);
  net_->Forward();
  CopyData(device(), *output_, *top[0]);
  for (size_t i = 1; i < top.size(); ++i) CopyData(device(), *exposed_out_[i - 1], *top[i]);
}

void RecurrentLayer::BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                                  const std::vector<Blob*>& bottom) {
  if (phase() != caffe::TRAIN)
    Fail("backward runs in the TRAIN phase only (a TEST-phase layer unrolls for inference)");
  for (size_t k = 0; k < uses_.size(); ++k)
    for (auto& [layer, j] : uses_[k])
      layer->set_param_propagate_down(j, param_propagate_down(static_cast<int>(k)));
  // The unrolled net's outputs take the tops' gradients; the carried final states none.
  for (Blob* b : net_->output_blobs())
    if (b->count()) device().Zero(b->mutable_device_diff(), 0, b->bytes());
  CopyDiff(device(), *top[0], *output_);
  for (size_t i = 1; i < top.size(); ++i) CopyDiff(device(), *top[i], *exposed_out_[i - 1]);
  net_->Backward();
  if (down[0]) CopyDiff(device(), *x_, *bottom[0]);
  if (down[1] && bottom[1]->count())
    device().Zero(bottom[1]->mutable_device_diff(), 0, bottom[1]->bytes());
  if (static_input_ && down[2]) CopyDiff(device(), *x_static_, *bottom[2]);
  const size_t first = 2 + (static_input_ ? 1 : 0);
  for (size_t i = 0; i < recur_in_.size() && first + i < bottom.size(); ++i)
    if (down[first + i]) CopyDiff(device(), *recur_in_[i], *bottom[first + i]);
}

// ---- RNN and LSTM -----------------------------------------------------------------------------

namespace {

/// BVLC's RNN: h_t = tanh(W_hh·(cont_t·h_{t−1}) + W_xh·x_t + b_h [+ W_xh_static·x_static]),
/// o_t = tanh(W_ho·h_t + b_o); the output is o (T × N × H).
class RnnLayer : public RecurrentLayer {
 public:
  using RecurrentLayer::RecurrentLayer;
  const char* type() const override { return "RNN"; }

 protected:
  std::vector<std::string> RecurrentInputNames() const override { return {"h_0"}; }
  std::vector<std::string> RecurrentOutputNames() const override {
    return {"h_" + std::to_string(T_)};
  }
  std::string OutputName() const override { return "o"; }

  void FillUnrolledNet(caffe::NetParameter* net) const override {
    const int H = num_output();
    AddStateInput(net, {"h_0"}, N_, H);
    caffe::LayerParameter* cont_slice = AddTimeSlice(net, "cont_slice", "cont", "cont_", T_);
    cont_slice->add_propagate_down(false);
    AddInnerProduct(net, "x_transform", "x", "W_xh_x", H, 2, {"W_xh", "b_h"});
    if (static_input_) AddStaticTransform(net, "W_xh_x_static", "W_xh_static", H);
    AddTimeSlice(net, "W_xh_x_slice", "W_xh_x", "W_xh_x_", T_);
    caffe::LayerParameter concat;
    for (int t = 1; t <= T_; ++t) {
      const std::string tm1 = std::to_string(t - 1), ts = std::to_string(t);
      AddContScale(net, "h_" + tm1, "cont_" + ts, "h_conted_" + tm1);
      AddInnerProduct(net, "W_hh_h_" + tm1, "h_conted_" + tm1, "W_hh_h_" + tm1, H, 2, {"W_hh"});
      caffe::LayerParameter* sum =
          AddLayer(net, "Eltwise", "h_input_sum_" + ts, {"W_hh_h_" + tm1, "W_xh_x_" + ts},
                   {"h_neuron_input_" + ts});
      if (static_input_) sum->add_bottom("W_xh_x_static");
      AddLayer(net, "TanH", "h_neuron_" + ts, {"h_neuron_input_" + ts}, {"h_" + ts});
      AddInnerProduct(net, "W_ho_h_" + ts, "h_" + ts, "W_ho_h_" + ts, H, 2, {"W_ho", "b_o"});
      AddLayer(net, "TanH", "o_neuron_" + ts, {"W_ho_h_" + ts}, {"o_" + ts});
      concat.add_bottom("o_" + ts);
    }
    caffe::LayerParameter* c = AddLayer(net, "Concat", "o_concat", {}, {"o"});
    c->mutable_bottom()->CopyFrom(concat.bottom());
    c->mutable_concat_param()->set_axis(0);
  }
};

/// BVLC's LSTM: gate inputs W_hc·(cont_t·h_{t−1}) + W_xc·x_t + b_c [+ W_xc_static·x_static] in the
/// order i, f, o, g, then an LSTMUnit per step; the output is h (T × N × H).
class LstmLayer : public RecurrentLayer {
 public:
  using RecurrentLayer::RecurrentLayer;
  const char* type() const override { return "LSTM"; }

 protected:
  std::vector<std::string> RecurrentInputNames() const override { return {"h_0", "c_0"}; }
  std::vector<std::string> RecurrentOutputNames() const override {
    return {"h_" + std::to_string(T_), "c_T"};
  }
  std::string OutputName() const override { return "h"; }

  void FillUnrolledNet(caffe::NetParameter* net) const override {
    const int H = num_output();
    AddStateInput(net, {"c_0", "h_0"}, N_, H);
    caffe::LayerParameter* cont_slice = AddTimeSlice(net, "cont_slice", "cont", "cont_", T_);
    cont_slice->add_propagate_down(false);
    AddInnerProduct(net, "x_transform", "x", "W_xc_x", 4 * H, 2, {"W_xc", "b_c"});
    if (static_input_) AddStaticTransform(net, "W_xc_x_static", "W_xc_static", 4 * H);
    AddTimeSlice(net, "W_xc_x_slice", "W_xc_x", "W_xc_x_", T_);
    caffe::LayerParameter concat;
    for (int t = 1; t <= T_; ++t) {
      const std::string tm1 = std::to_string(t - 1), ts = std::to_string(t);
      AddContScale(net, "h_" + tm1, "cont_" + ts, "h_conted_" + tm1);
      AddInnerProduct(net, "transform_" + ts, "h_conted_" + tm1, "W_hc_h_" + tm1, 4 * H, 2,
                      {"W_hc"});
      caffe::LayerParameter* sum =
          AddLayer(net, "Eltwise", "gate_input_" + ts, {"W_hc_h_" + tm1, "W_xc_x_" + ts},
                   {"gate_input_" + ts});
      if (static_input_) sum->add_bottom("W_xc_x_static");
      AddLayer(net, "LSTMUnit", "unit_" + ts, {"c_" + tm1, "gate_input_" + ts, "cont_" + ts},
               {"c_" + ts, "h_" + ts});
      concat.add_bottom("h_" + ts);
    }
    AddLayer(net, "Split", "c_T_copy", {"c_" + std::to_string(T_)}, {"c_T"});
    caffe::LayerParameter* c = AddLayer(net, "Concat", "h_concat", {}, {"h"});
    c->mutable_bottom()->CopyFrom(concat.bottom());
    c->mutable_concat_param()->set_axis(0);
  }
};

}  // namespace

void RegisterRecurrentLayers() {
  RegisterLayerType<RnnLayer>("RNN");
  RegisterLayerType<LstmLayer>("LSTM");
}

}  // namespace mpcaffe
