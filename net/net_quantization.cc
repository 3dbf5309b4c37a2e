// net/net_quantization.cc — the Net's quantizers: one mode for all, which ranges are missing,
// and calibration of a reduced-precision net through its fp32 variant.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "layers/layer.h"
#include "net/net.h"
#include "quant/quantizer.h"

namespace mpcaffe {

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
      if (!quantized || q->has_observed() || (q->has_input_range() && q->has_output_range()))
        continue;
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

void PassiveParameterQuantizers(Net& net) {
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer& l = *net.layers()[i];
    for (int k = 0; k < l.num_blob_quantizers(); ++k)
      l.blob_quantizer(k).set_mode(quant::QuantizerMode::kPassive);
    for (Net* n : net.nested_nets(static_cast<int>(i))) PassiveParameterQuantizers(*n);
  }
}

/// The trained layers of `from` into the layers of the same name in `to` as real values (what
/// ToProto and CopyTrainedLayersFrom give, without the proto copies), nested nets too.
void CopyParamValues(Net& from, Net& to) {
  for (const auto& l : to.layers()) {
    if (!from.has_layer(l->name())) continue;
    Layer& src = from.layer(l->name());
    if (src.num_params() != l->num_params())
      throw NetError("layer '" + l->name() + "': " + std::to_string(src.num_params()) +
                     " parameter blobs to copy into " + std::to_string(l->num_params()));
    for (int k = 0; k < l->num_params(); ++k) l->CopyParamValuesFrom(k, src);
    const std::vector<Net*> a = src.nested_nets(), b = l->nested_nets();
    for (size_t k = 0; k < a.size() && k < b.size(); ++k) CopyParamValues(*a[k], *b[k]);
  }
}

// Concat ranges. A quantized Concat runs as a view (its producers write straight into their
// slices of its output, no copy) only when each producer writes with the Concat's output scale
// and zero point (net_memory.cc). Observed separately, each input has a range of its own and
// the Concat requantizes every input into its slice. So where the calibration chooses every
// range involved itself, the Concat's inputs take its output's range (the union of theirs):
// the producers' top quantizers and the Concat's bottom quantizers get the Concat's top range.
// The rule: only when
// - the net runs Concats as views (optimizer level 1 and above) and this Concat's slices can be
//   views (contiguous slices: ConcatViewCandidates);
// - every one of those quantizers lacked a range before this calibration (`calibrated`): a range
//   a user gave in the prototxt or loaded from a caffemodel is never changed, and a Concat with
//   any such range keeps its requantizing copy;
// - the Concat is the only reader of each input value (another reader would see the coarser
//   grid too).
// The effect: a producer's value is rounded once onto the output's grid instead of onto its
// own grid and again onto the output's, so the Concat's output is within one quantization step
// of the requantizing copy's (tests/net/views_test.cc, Int8CalibrationSharesConcatRanges).
void ShareConcatRanges(const Net& net, const std::set<std::string>& calibrated,
                       caffe::NetParameter* ranges) {
  std::map<std::string, caffe::QuantizerParameter*> entry;
  for (auto& q : *ranges->mutable_quantizer()) entry[q.name()] = &q;
  auto fresh = [&](const std::string& name) {
    auto it = entry.find(name);
    if (it == entry.end() || !calibrated.count(name)) return false;
    const caffe::QuantizerParameter& q = *it->second;
    return q.has_observed_min() && q.has_observed_max() && !q.has_min_in() && !q.has_max_in() &&
           !q.has_min_out() && !q.has_max_out();
  };
  const auto& bottoms = net.bottom_vecs();
  const auto& tops = net.top_vecs();
  const int n = static_cast<int>(net.layers().size());
  // Whether layer c alone reads the value of `b` that layer w wrote.
  auto only_reader = [&](const Blob* b, int w, int c) {
    for (int j = w + 1; j < n; ++j) {
      const bool reads = std::find(bottoms[j].begin(), bottoms[j].end(), b) != bottoms[j].end();
      if (reads && j != c) return false;
      if (std::find(tops[j].begin(), tops[j].end(), b) != tops[j].end()) break;
    }
    return true;
  };
  for (const auto& [c, writers] : net.ConcatViewCandidates()) {
    const Layer& concat = *net.layers()[c];
    if (!IsQuantized(tops[c][0]->type())) continue;
    const std::string top_name = concat.TopQuantizerName(0);
    if (!fresh(top_name)) continue;
    std::vector<std::string> group;
    bool ok = true;
    for (size_t k = 0; k < bottoms[c].size() && ok; ++k) {
      const Blob* b = bottoms[c][k];
      const int w = writers[k];
      const auto& wt = tops[w];
      const int t = static_cast<int>(std::find(wt.begin(), wt.end(), b) - wt.begin());
      group.push_back(concat.BottomQuantizerName(static_cast<int>(k)));
      group.push_back(net.layers()[w]->TopQuantizerName(t));
      ok = fresh(group[group.size() - 2]) && fresh(group.back()) && only_reader(b, w, c);
    }
    if (!ok) continue;
    const caffe::QuantizerParameter& y = *entry[top_name];
    for (const std::string& name : group) {
      entry[name]->set_observed_min(y.observed_min());
      entry[name]->set_observed_max(y.observed_max());
    }
  }
}

}  // namespace

int CalibrateWithFloatVariant(Net& net, const caffe::NetParameter& param,
                              const NetOptions& options, int iterations,
                              const std::function<void(Net& fp32, int pass)>& before_forward,
                              const std::function<void(Net& fp32)>& after_passes) {
  const std::vector<std::string> missing = net.QuantizersWithoutRange();
  if (missing.empty()) return 0;
  NetOptions o = options;
  o.reduced_memory = 0;
  Net fp32(WithDataType(param, DataType::kFloat32), net.device(), o);
  caffe::NetParameter ranges_known;
  net.RangesToProto(&ranges_known);
  fp32.CopyTrainedLayersFrom(ranges_known);
  CopyParamValues(net, fp32);
  for (Blob* in : fp32.input_blobs()) {
    if (!net.has_blob(in->name())) continue;
    Blob& src = net.blob(in->name());
    if (src.type() == in->type() && src.count() == in->count())
      std::memcpy(in->mutable_host_data(), src.host_data(), src.bytes());
  }
  fp32.SetQuantMode(quant::QuantizerMode::kObserve);
  // Only activation ranges are wanted (a parameter's range comes from its values): the fp32
  // net's parameter quantizers observe nothing (AlexNet: 61 M weights read on every pass).
  PassiveParameterQuantizers(fp32);
  for (int i = 0; i < iterations; ++i) {
    if (before_forward) before_forward(fp32, i);
    fp32.Forward();
  }
  if (after_passes) after_passes(fp32);
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
  ShareConcatRanges(net, wanted, &ranges);
  net.CopyTrainedLayersFrom(ranges);
  return static_cast<int>(missing.size());
}

}  // namespace mpcaffe
