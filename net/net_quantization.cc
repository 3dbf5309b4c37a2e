// net/net_quantization.cc — the Net's quantizers: one mode for all, which ranges are missing,
// and calibration of a reduced-precision net through its fp32 variant.
#include <algorithm>
#include <cstring>
#include <functional>
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
// range involved itself, the Concat's inputs take one range with its output (the union of
// theirs): the producers' top quantizers and the Concat's bottom quantizers get the Concat's
// top range. An input read through a Split (the value has other readers) brings the Split's
// bottom and every top into the group, and with them the other readers' inputs, where that
// widens no range more than twice: the Split then shares its bottom's data too (a requantizing
// Split can only round the stored integers again). A DenseNet block, whose Concats each take
// the previous one's output through a Split that also feeds a BatchNorm, becomes one group: one
// range for the block, written in place once, where each layer copied and requantized the
// block so far twice.
// The rule: only when
// - the net runs Concats as views (optimizer level 1 and above) and this Concat's slices can be
//   views (contiguous slices: ConcatViewCandidates);
// - every one of those quantizers lacked a range before this calibration (`calibrated`): a range
//   a user gave in the prototxt or loaded from a caffemodel is never changed, and a Concat with
//   any such range keeps its requantizing copy;
// - an input not read through a Split has the Concat as its only reader (another reader would
//   see the coarser grid without having asked for it).
// The effect: a producer's value is rounded once onto the group's grid instead of onto its own
// grid and again onto the output's, so the Concat's output is within one quantization step of
// the requantizing copy's (tests/net/views_test.cc, Int8CalibrationSharesConcatRanges).
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
  // The groups: quantizer names joined by union-find, each root with the union of its
  // members' ranges.
  std::map<std::string, std::string> parent;
  std::map<std::string, std::pair<double, double>> span;
  std::function<std::string(const std::string&)> root = [&](const std::string& a) {
    auto it = parent.find(a);
    if (it == parent.end() || it->second == a) return a;
    return it->second = root(it->second);
  };
  auto add = [&](const std::string& name) {
    if (parent.emplace(name, name).second)
      span[name] = {entry[name]->observed_min(), entry[name]->observed_max()};
  };
  auto unite = [&](const std::string& a, const std::string& b) {
    const std::string ra = root(a), rb = root(b);
    if (ra == rb) return;
    parent[rb] = ra;
    span[ra] = {std::min(span[ra].first, span[rb].first), std::max(span[ra].second, span[rb].second)};
  };
  auto width = [](const std::pair<double, double>& r) { return r.second - r.first; };
  // A Split joins the group of the Concat it feeds to its bottom's and its other readers'
  // groups only when no group's range widens more than twice (at most one bit of the type lost
  // to the shared grid): a value several times narrower than the block keeps its own grid, and
  // the Split its requantizing copy.
  struct SplitLink {
    std::string to_concat;            // the Split's top the Concat reads
    std::vector<std::string> others;  // its bottom and every top
  };
  std::vector<SplitLink> links;
  for (const auto& [c, writers] : net.ConcatViewCandidates()) {
    const Layer& concat = *net.layers()[c];
    if (!IsQuantized(tops[c][0]->type())) continue;
    std::vector<std::string> group{concat.TopQuantizerName(0)};
    std::vector<SplitLink> split_inputs;
    bool ok = true;
    for (size_t k = 0; k < bottoms[c].size() && ok; ++k) {
      const Blob* b = bottoms[c][k];
      const int w = writers[k];
      const Layer& writer = *net.layers()[w];
      const auto& wt = tops[w];
      const int t = static_cast<int>(std::find(wt.begin(), wt.end(), b) - wt.begin());
      group.push_back(concat.BottomQuantizerName(static_cast<int>(k)));
      group.push_back(writer.TopQuantizerName(t));
      ok = only_reader(b, w, c);
      if (writer.type() == std::string("Split") && bottoms[w].size() == 1) {
        // Its other tops' names are their readers' bottom quantizers (InsertSplits).
        SplitLink l{writer.TopQuantizerName(t), {writer.BottomQuantizerName(0)}};
        for (int o = 0; o < static_cast<int>(wt.size()); ++o)
          l.others.push_back(writer.TopQuantizerName(o));
        split_inputs.push_back(std::move(l));
      }
    }
    for (const std::string& name : group) ok = ok && fresh(name);
    if (!ok) continue;
    for (const std::string& name : group) add(name), unite(group.front(), name);
    for (SplitLink& l : split_inputs) links.push_back(std::move(l));
  }
  for (const SplitLink& l : links) {
    bool ok = true;
    for (const std::string& name : l.others) ok = ok && fresh(name);
    if (!ok) continue;
    for (const std::string& name : l.others) add(name);
    std::pair<double, double> all = span[root(l.to_concat)];
    std::set<std::string> roots{root(l.to_concat)};
    for (const std::string& name : l.others) {
      roots.insert(root(name));
      const auto& r = span[root(name)];
      all = {std::min(all.first, r.first), std::max(all.second, r.second)};
    }
    for (const std::string& r : roots) ok = ok && width(all) <= 2.0 * width(span[r]);
    if (!ok) continue;
    for (const std::string& name : l.others) unite(l.to_concat, name);
  }
  for (const auto& [name, up] : parent) {
    const auto& r = span[root(name)];
    entry[name]->set_observed_min(r.first);
    entry[name]->set_observed_max(r.second);
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
