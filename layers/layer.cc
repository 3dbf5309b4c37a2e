// layers/layer.cc — the Layer base: blob checks, quantizer creation and hooks, forward and
// backward entry points, and the data-type helpers shared by all layers (parameter blobs are in
// layer_params.cc, filler values in filler_values.cc).
#include "layers/layer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <climits>
#include <cstring>
#include <optional>
#include <utility>

#include "quant/quantizer_proto.h"

namespace mpcaffe {

namespace {
std::atomic<uint64_t> g_seed{1701};
}  // namespace

DataType DataTypeFromProto(caffe::DataType type, const std::string& where) {
  if (const std::optional<DataType> t = quant::DataTypeOfProto(type)) return *t;
  throw LayerError(where + ": " + quant::UnsupportedProtoDataType(type));
}

caffe::DataType DataTypeToProto(DataType type) { return quant::ToProtoDataType(type); }

void SetRandomSeed(uint64_t seed) { g_seed = seed; }
uint64_t RandomSeed() { return g_seed; }

uint64_t StableHash(const std::string& text, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Affine AffineOf(const quant::QuantParams& p) { return Affine{p.scale_of(0), p.zero_point_of(0)}; }

std::vector<uint8_t> AccumulatorBias(const std::vector<float>& bias, DataType type, double s_x,
                                     const std::vector<float>& s_w) {
  std::vector<uint8_t> out;
  if (!IsQuantized(type)) {
    out.resize(bias.size() * sizeof(float));
    std::memcpy(out.data(), bias.data(), out.size());
    return out;
  }
  const bool wide = TraitsOf(type).acctype == Scalar::kI64;
  out.resize(bias.size() * TraitsOf(type).acc_bytes());
  for (size_t c = 0; c < bias.size(); ++c) {
    const double unit = s_x * double(s_w.size() == 1 ? s_w[0] : s_w[c]);
    double r = std::round(double(bias[c]) / unit);  // ties away from zero
    if (wide) {
      r = std::min(std::max(r, -9.2e18), 9.2e18);
      const int64_t v = static_cast<int64_t>(r);
      std::memcpy(&out[c * 8], &v, 8);
    } else {
      r = std::min(std::max(r, double(INT32_MIN)), double(INT32_MAX));
      const int32_t v = static_cast<int32_t>(r);
      std::memcpy(&out[c * 4], &v, 4);
    }
  }
  return out;
}

// ---- Layer ---------------------------------------------------------------------------------

Layer::Layer(const caffe::LayerParameter& param, Device& device)
    : param_(param), device_(&device), elementwise_(device) {
  const caffe::DataType t = param_.type() == "Input" || param_.type() == "Data"
                                ? param_.top_data_type()
                                : param_.compute_data_type();
  compute_type_ = DataTypeFromProto(t, "layer '" + param_.name() + "' (" + param_.type() + ")");
}

std::string Layer::Describe() const {
  return "layer '" + param_.name() + "' (" + param_.type() + ")";
}

void Layer::Fail(const std::string& message) const { throw LayerError(Describe() + ": " + message); }

Kernel Layer::GetKernel(const std::string& source, const std::string& kernel_name,
                        const ProgramHints& hints) {
  return device_->GetProgram(source, "", hints)->GetKernel(kernel_name);
}

void Layer::CheckBlobs(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const {
  auto check = [&](const char* what, int n, int exact, int min, int max) {
    if (exact >= 0 && n != exact)
      Fail(std::string("takes ") + std::to_string(exact) + " " + what + " blob(s), got " +
           std::to_string(n));
    if (min >= 0 && n < min)
      Fail(std::string("takes at least ") + std::to_string(min) + " " + what +
           " blob(s), got " + std::to_string(n));
    if (max >= 0 && n > max)
      Fail(std::string("takes at most ") + std::to_string(max) + " " + what + " blob(s), got " +
           std::to_string(n));
  };
  check("bottom", static_cast<int>(bottom.size()), ExactNumBottomBlobs(), MinBottomBlobs(),
        MaxBottomBlobs());
  check("top", static_cast<int>(top.size()), ExactNumTopBlobs(), MinTopBlobs(), MaxTopBlobs());
  for (size_t i = 0; i < bottom.size(); ++i)
    if (bottom[i]->type() != bottom_type(static_cast<int>(i)))
      Fail("bottom " + std::to_string(i) + " '" + bottom[i]->name() + "' is " +
           Name(bottom[i]->type()) + " but the layer reads " + Name(bottom_type(static_cast<int>(i))));
  for (size_t i = 0; i < top.size(); ++i) {
    if (top[i]->type() != top_type(static_cast<int>(i)))
      Fail("top " + std::to_string(i) + " '" + top[i]->name() + "' is " + Name(top[i]->type()) +
           " but the layer writes " + Name(top_type(static_cast<int>(i))));
    if (i < bottom.size() && top[i] == bottom[i] && !AllowsInPlace())
      Fail("cannot compute in place (top " + std::to_string(i) + " is bottom " +
           std::to_string(i) + " '" + top[i]->name() + "')");
  }
}

std::unique_ptr<quant::Quantizer> Layer::MakeQuantizer(
    const google::protobuf::RepeatedPtrField<caffe::QuantizerParameter>& configs, int i,
    const std::string& name, DataType in, DataType out) {
  auto q = std::make_unique<quant::Quantizer>(*device_, name, 0);
  if (i < configs.size()) {
    try {
      quant::FromProto(configs.Get(i), q.get());
    } catch (const LayerError&) {
      throw;
    } catch (const Error& e) {
      Fail("quantizer '" + name + "': " + e.what());
    }
  }
  q->set_types(in, out);
  // A quantized side supplies parameters to kernels; fp32 sides follow the net's quant_mode.
  q->set_mode(IsQuantized(in) || IsQuantized(out) ? quant::QuantizerMode::kActive
              : (i < configs.size() ? q->mode() : quant::QuantizerMode::kPassive));
  return q;
}

void AppendKeyBytes(std::string* key, const void* data, size_t bytes) {
  key->append(static_cast<const char*>(data), bytes);
}

void AppendKey(std::string* key, const std::vector<float>& values) {
  const uint64_t n = values.size();
  AppendKeyBytes(key, &n, sizeof n);
  AppendKeyBytes(key, values.data(), values.size() * sizeof(float));
}

void AppendKey(std::string* key, const quant::QuantParams& params) {
  const int32_t head[5] = {static_cast<int32_t>(params.type), params.qmin, params.qmax,
                           params.symmetric ? 1 : 0, params.axis};
  AppendKeyBytes(key, head, sizeof head);
  AppendKey(key, params.scale);
  const uint64_t n = params.zero_point.size();
  AppendKeyBytes(key, &n, sizeof n);
  AppendKeyBytes(key, params.zero_point.data(), params.zero_point.size() * sizeof(int32_t));
}

bool FusedEpilogue::AffineCurrent() const {
  size_t k = 0;
  for (Layer* l : affine)
    for (const auto& b : l->blobs())
      if (k >= cached_versions_.size() || cached_versions_[k++] != b->data_version()) return false;
  return k == cached_versions_.size();
}

void FusedEpilogue::Affine(int channels, std::vector<float>* scale,
                           std::vector<float>* shift) const {
  // Asked on every pass: the parameters' versions compared in place, the product computed
  // again only when one changed.
  if (channels == cached_channels_ && AffineCurrent()) {
    *scale = cached_scale_;
    *shift = cached_shift_;
    return;
  }
  std::vector<uint64_t> versions;
  for (Layer* l : affine)
    for (const auto& b : l->blobs()) versions.push_back(b->data_version());
  scale->clear();
  shift->clear();
  for (Layer* l : affine) {
    std::vector<float> a, b;
    if (!l->ChannelAffine(channels, &a, &b))
      throw LayerError(l->Describe() + ": not a per-channel affine layer over " +
                       std::to_string(channels) + " channels; it cannot be folded");
    if (scale->empty()) {
      *scale = std::move(a);
      *shift = std::move(b);
      continue;
    }
    for (int c = 0; c < channels; ++c) {  // a·(s·x + t) + b
      (*scale)[c] *= a[c];
      (*shift)[c] = a[c] * (*shift)[c] + b[c];
    }
  }
  cached_channels_ = channels;
  cached_versions_ = std::move(versions);
  cached_scale_ = *scale;
  cached_shift_ = *shift;
}

std::string QuantizerNameOf(const caffe::LayerParameter& p, const std::string& side, int i) {
  const auto& list = side == "bottom" ? p.bottom_quantizer()
                     : side == "top"  ? p.top_quantizer()
                                      : p.blobs_quantizer();
  if (i < list.size() && !list.Get(i).name().empty()) return list.Get(i).name();
  return p.name() + "/" + side + std::to_string(i);
}

std::string Layer::BottomQuantizerName(int i) const { return QuantizerNameOf(param_, "bottom", i); }
std::string Layer::TopQuantizerName(int i) const { return QuantizerNameOf(param_, "top", i); }
std::string Layer::BlobQuantizerName(int i) const { return QuantizerNameOf(param_, "blob", i); }

void Layer::SetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (set_up_) Fail("SetUp called twice");
  if (!SupportsType(compute_type_)) Fail(std::string("does not compute in ") + Name(compute_type_));
  CheckBlobs(bottom, top);
  for (size_t i = 0; i < bottom.size(); ++i) {
    const int k = static_cast<int>(i);
    bottom_quantizers_.push_back(MakeQuantizer(param_.bottom_quantizer(), k,
                                               BottomQuantizerName(k), bottom_type(k), bottom_type(k)));
  }
  for (size_t i = 0; i < top.size(); ++i) {
    const int k = static_cast<int>(i);
    top_quantizers_.push_back(
        MakeQuantizer(param_.top_quantizer(), k, TopQuantizerName(k), top_type(k), top_type(k)));
  }
  set_up_ = true;
  LayerSetUp(bottom, top);
  Reshape(bottom, top);
}

std::vector<quant::Quantizer*> Layer::quantizers() {
  std::vector<quant::Quantizer*> all;
  for (auto* list : {&bottom_quantizers_, &top_quantizers_, &blob_quantizers_})
    for (auto& q : *list) all.push_back(q.get());
  return all;
}

bool Layer::WatchesFloatData() const {
  for (const auto* list : {&bottom_quantizers_, &top_quantizers_, &blob_quantizers_})
    for (const auto& q : *list)
      if (q->watches_data()) return true;
  return false;
}

void Layer::SetQuantMode(quant::QuantizerMode mode) {
  for (quant::Quantizer* q : quantizers())
    if (!IsQuantized(q->input_type()) && !IsQuantized(q->output_type())) q->set_mode(mode);
}

namespace {
quant::QuantParams SideParams(const Layer& layer, quant::Quantizer& q, bool input) {
  try {
    return input ? q.InputParams() : q.OutputParams();
  } catch (const Error& e) {
    throw LayerError(layer.Describe() + ": quantizer '" + q.name() +
                     "' has no range for its quantized data (" + e.what() +
                     "); calibrate the net in fp32 with quant_mode OBSERVE and load the saved "
                     "ranges, or set min/max in the layer's quantizer parameters");
  }
}
}  // namespace

quant::QuantParams Layer::BottomParams(int i) { return SideParams(*this, bottom_quantizer(i), true); }
quant::QuantParams Layer::TopParams(int i) { return SideParams(*this, top_quantizer(i), false); }
quant::QuantParams Layer::BlobParams(int i) {
  quant::Quantizer& q = blob_quantizer(i);
  const bool w4 = q.weight_bits() == 4;
  if ((!w4 && !q.per_channel_weights()) || !IsQuantized(q.input_type()))
    return SideParams(*this, q, true);
  const size_t channels = static_cast<size_t>(param_blob(i).shape(0));
  if (q.channel_scales().size() != channels)
    Fail("quantizer '" + q.name() + "' of the " + (w4 ? "4-bit" : "per-channel int8") +
         " weights has " + std::to_string(q.channel_scales().size()) +
         " channel scales, the weights " + param_blob(i).shape_string() + " have " +
         std::to_string(channels) +
         " output channels (quantize the fp32 weights or load the saved channel_scale)");
  try {
    return w4 ? quant::Int4StorageParams(q.channel_scales())
              : quant::SymmetricChannelParams(q.channel_scales(), param_blob(i).type());
  } catch (const Error& e) {
    Fail("quantizer '" + q.name() + "': " + e.what());
  }
}


Affine Layer::BottomAffine(int i) {
  return IsQuantized(bottom_type(i)) ? AffineOf(BottomParams(i)) : Affine{};
}
Affine Layer::TopAffine(int i) {
  return IsQuantized(top_type(i)) ? AffineOf(TopParams(i)) : Affine{};
}

void Layer::CopyOrRequant(Blob& x, Affine xq, Blob& y, Affine yq) {
  if (x.count() != y.count())
    Fail("copy of '" + x.name() + "' (" + x.shape_string() + ") into '" + y.name() + "' (" +
         y.shape_string() + ") with different counts");
  const bool same_params = !IsQuantized(x.type()) ||
                           (xq.scale == yq.scale && xq.zero_point == yq.zero_point);
  if (&x == &y && same_params) return;
  if (x.count() == 0) return;
  if (same_params) {
    device_->CopyOnDevice(x.device_data(), 0, y.mutable_device_data(), 0, x.bytes());
    return;
  }
  DeviceMemory* in = x.device_data();
  elementwise_.Convert(x.type(), y.type(), x.count(), *in, *y.mutable_device_data(), xq, yq);
}

void Layer::Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  auto hook = [](quant::Quantizer& q, Blob& b) {
    if (b.type() == DataType::kFloat32 && q.watches_data())
      q.Forward(b.mutable_data_ptr<float>(), b.count());
  };
  DrawPendingFills();
  // A parameter written since the last pass (a solver update, a host view, a shared owner)
  // invalidates what the layer derived from it.
  bool changed = param_versions_.size() != blobs_.size();
  param_versions_.resize(blobs_.size());
  for (size_t i = 0; i < blobs_.size(); ++i) {
    const uint64_t v = blobs_[i]->data_version();
    if (v != param_versions_[i]) changed = true, param_versions_[i] = v;
  }
  if (changed) ParamsChanged();
  for (size_t i = 0; i < bottom.size(); ++i) hook(*bottom_quantizers_[i], *bottom[i]);
  for (size_t i = 0; i < blobs_.size(); ++i) {
    quant::Quantizer& q = *blob_quantizers_[i];
    // Parameters are observed, never snapped in place (that would overwrite the fp32 weights).
    if (blobs_[i]->type() == DataType::kFloat32 && q.mode() != quant::QuantizerMode::kPassive &&
        q.mode() != quant::QuantizerMode::kActive)
      q.Observe(blobs_[i]->data_ptr<float>(), blobs_[i]->count());
  }
  ForwardImpl(bottom, top);
  for (size_t i = 0; i < top.size(); ++i) hook(*top_quantizers_[i], *top[i]);
}

void Layer::Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                     const std::vector<Blob*>& bottom) {
  if (!HasBackward()) Fail("has no backward pass");
  if (compute_type_ != DataType::kFloat32)
    Fail(std::string("backward is computed in fp32 only, the layer computes in ") +
         Name(compute_type_));
  if (propagate_down.size() != bottom.size())
    Fail("propagate_down has " + std::to_string(propagate_down.size()) + " entries for " +
         std::to_string(bottom.size()) + " bottoms");
  DrawPendingFills();
  BackwardImpl(top, propagate_down, bottom);
}

void Layer::BackwardImpl(const std::vector<Blob*>&, const std::vector<bool>&,
                         const std::vector<Blob*>&) {
  Fail("has no backward pass");
}

bool Layer::param_propagate_down(int i) const {
  return i >= static_cast<int>(param_propagate_down_.size()) || param_propagate_down_[i];
}

void Layer::set_param_propagate_down(int i, bool value) {
  if (i < 0) Fail("negative parameter index " + std::to_string(i));
  if (i >= static_cast<int>(param_propagate_down_.size())) param_propagate_down_.resize(i + 1, true);
  param_propagate_down_[i] = value;
}

}  // namespace mpcaffe
