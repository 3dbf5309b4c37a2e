// net/net_memory.cc — the Net's device memory: inference views (Split and Dropout tops that are
// their bottom's data, Concat inputs written in place in their slices of the output), the
// reduced-memory plan (blobs sharing memory by lifetime) and the byte counts of what the net
// holds.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "layers/layer.h"
#include "net/memory_planner.h"
#include "net/net.h"

namespace mpcaffe {

// Views. A Split copies its bottom into each top, a TEST-phase Dropout, a Flatten and a Reshape
// copy (or requantize) their bottom into their top, and a Concat copies each bottom into its
// slice of the top: at inference all of them can be no work at all, while every blob a user
// reads after Forward (the pycaffe `net.blobs`, BVLC's split tops
// "<blob>_<layer>_<i>_split_<k>" included) still holds what the unoptimized net writes:
// - a Split, Dropout, Flatten or Reshape top shares its bottom's data (Blob::ShareData, both
//   names and shapes stay) when neither is written again after the layer (no consumer works
//   in place on either) and, for quantized types, each top's quantizer has the bottom's scale
//   and zero point (the copy would be exact);
// - a Concat's bottoms become views of their slices of its top (Device::SubMemory), so each
//   producer writes straight into the output, when every slice is contiguous (the axes before
//   the concat axis are all 1: batch 1 for the usual channel concat; at batch N > 1 a slice is
//   N strided pieces and the copy stays), no bottom or the top is written again
//   after the Concat (a TEST-phase Dropout in place on the top is the identity: allowed, for
//   quantized types when its two quantizers agree), and, for quantized types, each producer writes with the Concat's output
//   scale and zero point (its top quantizer, the Concat's bottom quantizer and top quantizer
//   agree; otherwise the Concat's requantizing copy stays).
//   A slice that does not start at an offset the device can place a buffer at (OpenCL's base
//   address alignment: 28×28 fp32 channels always do, 14×14 int8 ones only in multiples of 32
//   channels on a 128-byte alignment: GoogLeNet's inception_4a puts its third branch at channel
//   400) keeps its producer's own memory, and the net copies its bytes into the slice in place
//   of the Concat (ConcatSlicePlaced): one device copy of that input instead of the Concat's
//   kernel over every input, and the placed slices still written in place.
//   An input may be another Concat's output, directly or through a Split's top that shares it
//   (DenseNet's blocks: each layer's Concat takes the previous one's output and 32 new
//   channels): placed, it is a prefix of the outer output, and its own inputs are placed there
//   in turn, so a whole block is written in place once instead of copied once per layer.
// No view is on while a quantizer of the layer observes or snaps fp32 data (calibration sees
// every copy). The choice is made again before each pass, since ranges arrive after the build.

void Net::PlanViews() {
  views_.clear();
  view_on_.assign(layers_.size(), 0);
  views_applied_ = false;
  if (state_.phase() != caffe::TEST || optimize_ < 1) return;
  const int n = static_cast<int>(layers_.size());
  std::map<const Blob*, std::vector<int>> writers;
  for (int i = 0; i < n; ++i)
    for (const Blob* t : top_vecs_[i]) writers[t].push_back(i);
  auto written_after = [&](const Blob* b, int i) {
    for (int w : writers[b])
      if (w > i) return true;
    return false;
  };
  const std::set<const Blob*> inputs(input_blobs_.begin(), input_blobs_.end());
  for (int i = 0; i < n; ++i) {
    const std::string type = layers_[i]->type();
    if (type != "Split" && type != "Dropout" && type != "Flatten" && type != "Reshape") continue;
    const std::vector<Blob*>& bot = bottom_vecs_[i];
    const std::vector<Blob*>& top = top_vecs_[i];
    if (bot.size() != 1 || fused_into_[i] >= 0 || written_after(bot[0], i)) continue;
    bool ok = true;
    for (const Blob* t : top) ok &= t != bot[0] && t->type() == bot[0]->type() && !written_after(t, i);
    if (!ok) continue;
    views_.push_back({i, false, {}, {}, {}});
  }
  // A Concat input may itself be a Concat's output, or a Split's or Dropout's top that shares
  // its bottom's data (DenseNet: each layer's Concat takes the one before it through a Split):
  // the slice then holds that memory, for every blob sharing it, and a Concat output placed in
  // an outer Concat places its own inputs there in turn (UpdateViews). One Concat per memory:
  // two would place it twice.
  std::map<const Blob*, const Blob*> alias_source;
  for (const View& v : views_)
    for (const Blob* t : top_vecs_[v.layer]) alias_source[t] = bottom_vecs_[v.layer][0];
  std::set<const Blob*> placed_sources;
  for (int i = 0; i < n; ++i) {
    if (layers_[i]->type() != std::string("Concat") || fused_into_[i] >= 0) continue;
    const std::vector<Blob*>& bot = bottom_vecs_[i];
    Blob* y = top_vecs_[i][0];
    View v{i, true, {}, {}, {}};
    bool rewritten = false;
    for (int w : writers[y]) {
      if (w <= i) continue;
      if (layers_[w]->type() == std::string("Dropout") && bottom_vecs_[w].size() == 1 &&
          bottom_vecs_[w][0] == y)
        v.identity_after.push_back(w);
      else
        rewritten = true;
    }
    if (rewritten) continue;
    std::set<const Blob*> sources;
    for (Blob* b : bot) {
      int writer = -1;
      for (int w : writers[b])
        if (w < i) writer = w;
      const Blob* source = b;
      for (auto it = alias_source.find(source); it != alias_source.end();
           it = alias_source.find(source))
        source = it->second;
      if (writer < 0 || written_after(b, i) || written_after(source, i) ||
          !sources.insert(source).second || placed_sources.count(source) || inputs.count(b) ||
          inputs.count(source) || b->type() != y->type())
        break;
      v.writer.push_back(writer);
    }
    if (v.writer.size() != bot.size()) continue;
    placed_sources.insert(sources.begin(), sources.end());
    views_.push_back(v);
  }
}

bool Net::ViewUsable(size_t k) {
  const View& v = views_[k];
  Layer& layer = *layers_[v.layer];
  if (layer.WatchesFloatData()) return false;
  const std::vector<Blob*>& bot = bottom_vecs_[v.layer];
  const std::vector<Blob*>& top = top_vecs_[v.layer];
  auto same = [](const Affine& a, const Affine& b) {
    return a.scale == b.scale && a.zero_point == b.zero_point;
  };
  try {
    if (!v.concat) {
      if (!IsQuantized(bot[0]->type())) return true;
      const Affine x = layer.BottomAffine(0);
      for (size_t t = 0; t < top.size(); ++t)
        if (!same(x, layer.TopAffine(static_cast<int>(t)))) return false;
      return true;
    }
    if (!ConcatSlicesPlaceable(v.layer)) return false;
    if (!IsQuantized(top[0]->type())) return true;
    for (int d : v.identity_after)  // an in-place Dropout that requantizes would change the slices
      if (!same(layers_[d]->BottomAffine(0), layers_[d]->TopAffine(0))) return false;
    const Affine yq = layer.TopAffine(0);
    for (size_t b = 0; b < bot.size(); ++b) {
      Layer& w = *layers_[v.writer[b]];
      const auto& wt = top_vecs_[v.writer[b]];
      const int t = static_cast<int>(std::find(wt.begin(), wt.end(), bot[b]) - wt.begin());
      if (!same(layer.BottomAffine(static_cast<int>(b)), yq) || !same(w.TopAffine(t), yq))
        return false;
    }
    return true;
  } catch (const Error&) {
    return false;  // a quantizer without a range: the layer's own Forward says so
  }
}

bool Net::ConcatSlicesPlaceable(int i) const {
  const Layer& layer = *layers_[i];
  const Blob& y = *top_vecs_[i][0];
  const auto& p = layer.layer_param().concat_param();
  const int axis = y.CanonicalAxisIndex(p.has_concat_dim() ? static_cast<int>(p.concat_dim())
                                                           : p.axis());
  if (y.count(0, axis) != 1) return false;  // strided slices
  for (const Blob* b : bottom_vecs_[i])
    if (b->count() == 0) return false;
  return true;
}

std::vector<char> Net::ConcatSlicePlaced(int i) const {
  const size_t align = device_->info().sub_memory_align;
  std::vector<char> placed;
  size_t offset = 0;
  for (const Blob* b : bottom_vecs_[i]) {
    placed.push_back(offset % align == 0);
    offset += b->bytes();
  }
  return placed;
}

std::vector<std::pair<int, std::vector<int>>> Net::ConcatViewCandidates() const {
  std::vector<std::pair<int, std::vector<int>>> out;
  for (const View& v : views_)
    if (v.concat && ConcatSlicesPlaceable(v.layer)) out.emplace_back(v.layer, v.writer);
  return out;
}

void Net::UpdateViews(bool force) {
  if (views_.empty()) {
    if (force && reduced_memory_) PlanMemory();
    return;
  }
  // ViewUsable reads quantizers and blob shapes only, and asking every view again walks every
  // quantizer and blob involved: 96-103 µs at the start of each of GoogLeNet int8's passes on
  // PoCL, while the device waits (docs/BENCHMARKS.md, "A kernel's time inside the pass"). While
  // no quantizer changed and no blob was reshaped, the answer stands.
  const uint64_t quant_gen = quant::QuantizerStateGeneration(), shape_gen = BlobShapeGeneration();
  if (!force && views_applied_ && quant_gen == views_quant_gen_ && shape_gen == views_shape_gen_)
    return;
  std::vector<char> on(layers_.size(), 0);
  for (size_t k = 0; k < views_.size(); ++k) on[views_[k].layer] = ViewUsable(k);
  views_quant_gen_ = quant_gen;
  views_shape_gen_ = shape_gen;
  if (!force && views_applied_ && on == view_on_) return;
  // Undo the views, plan the memory for the new ones, then make them. The slices go first,
  // while a Split's top still shares its bottom's data: fresh memory for the shared data, so
  // no blob is left inside a Concat's output.
  for (View& v : views_) {
    if (!v.concat) continue;
    for (Blob* b : bottom_vecs_[v.layer]) {
      auto m = b->data_memory();
      if (m && m->parent()) b->SetDataMemory(device_->Allocate(std::max<size_t>(b->bytes(), 4)));
    }
    v.slices.clear();
  }
  for (View& v : views_)
    if (!v.concat)
      for (Blob* t : top_vecs_[v.layer]) t->UnshareData();
  view_on_ = on;
  views_applied_ = true;
  if (reduced_memory_) PlanMemory();
  // Shared tops first (a slice given to a shared top is then its bottom's memory too), then
  // the Concats from the last: an outer Concat places an inner one's output before the inner
  // one places its inputs inside it, at their offsets in the outer allocation (a device makes
  // no view of a view).
  for (View& v : views_)
    if (view_on_[v.layer] && !v.concat)
      for (Blob* t : top_vecs_[v.layer]) t->ShareData(*bottom_vecs_[v.layer][0]);
  std::map<const DeviceMemory*, std::pair<std::shared_ptr<DeviceMemory>, size_t>> inside;
  for (auto it = views_.rbegin(); it != views_.rend(); ++it) {
    View& v = *it;
    if (!view_on_[v.layer] || !v.concat) continue;
    Blob& y = *top_vecs_[v.layer][0];
    y.device_data();  // allocated (a fresh one zeroed)
    std::shared_ptr<DeviceMemory> whole = y.data_memory();
    size_t base = 0;
    if (auto at = inside.find(whole.get()); at != inside.end())
      std::tie(whole, base) = at->second;
    const std::vector<char> placed = ConcatSlicePlaced(v.layer);
    size_t offset = 0;
    for (size_t k = 0; k < bottom_vecs_[v.layer].size(); ++k) {
      Blob* b = bottom_vecs_[v.layer][k];
      // An unplaced slice keeps its blob's memory and is copied by SkipAsView.
      std::shared_ptr<DeviceMemory> slice;
      if (placed[k]) {
        slice = device_->SubMemory(whole, base + offset, b->bytes());
        if (!slice)  // PlanMemory counted it in the top's memory
          throw NetError("layer '" + layer_names_[v.layer] + "': device " +
                         device_->Describe() + " refused a view at byte " +
                         std::to_string(offset) + " of '" + y.name() + "'");
        inside[slice.get()] = {whole, base + offset};
        b->SetDataMemory(slice);
      }
      v.slices.push_back(slice);
      offset += b->bytes();
    }
  }
}

bool Net::SkipAsView(int i) {
  if (view_on_.empty() || !view_on_[i]) return false;
  for (const View& v : views_) {
    if (v.layer != i) continue;
    if (!v.concat) {
      for (Blob* t : top_vecs_[i])
        if (!t->same_data(*bottom_vecs_[i][0])) return false;
      return true;
    }
    // The producers wrote the placed slices; the others' bytes are copied into theirs (the
    // quantizers agree: a byte copy is the Concat's). The top's device side is the newest.
    const std::vector<Blob*>& bot = bottom_vecs_[i];
    if (v.slices.size() != bot.size()) return false;
    for (size_t b = 0; b < bot.size(); ++b)
      if (v.slices[b] && bot[b]->data_memory() != v.slices[b]) return false;
    Blob& y = *top_vecs_[i][0];
    size_t offset = 0;
    for (size_t b = 0; b < bot.size(); ++b) {
      // device_data(): a producer that wrote the host side (a Python layer) is uploaded.
      const DeviceMemory* src = bot[b]->device_data();
      if (!v.slices[b])
        device_->CopyOnDevice(src, 0, y.mutable_device_data(), offset, bot[b]->bytes());
      offset += bot[b]->bytes();
    }
    y.DeviceDataWritten();
    return true;
  }
  return false;
}

void Net::PlanMemory() {
  std::vector<BlobLifetime> lives;
  std::map<Blob*, size_t> index;
  const int n = static_cast<int>(layers_.size());
  // A view's blobs live in one allocation: an aliased top in its bottom's, a Concat input in
  // the Concat's output. The owner's lifetime covers theirs.
  // A placed Concat input that shares another blob's data (a Split's top) puts that blob
  // in the Concat's output, and a Concat output placed in another's puts its inputs there too:
  // the owners form chains.
  std::map<Blob*, Blob*> owner, shared_from;
  for (const View& v : views_)
    if (!view_on_.empty() && view_on_[v.layer] && !v.concat)
      for (Blob* t : top_vecs_[v.layer]) owner[t] = shared_from[t] = bottom_vecs_[v.layer][0];
  for (const View& v : views_) {
    if (view_on_.empty() || !view_on_[v.layer] || !v.concat) continue;
    const std::vector<char> placed = ConcatSlicePlaced(v.layer);
    for (size_t k = 0; k < placed.size(); ++k) {
      if (!placed[k]) continue;
      Blob* b = bottom_vecs_[v.layer][k];
      for (auto it = shared_from.find(b); it != shared_from.end(); it = shared_from.find(b))
        b = it->second;
      owner[b] = top_vecs_[v.layer][0];
    }
  }
  auto owner_of = [&](Blob* b) {
    for (auto it = owner.find(b); it != owner.end(); it = owner.find(b)) b = it->second;
    return b;
  };
  auto touch = [&](Blob* b, int step) {
    b = owner_of(b);
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
    // A fused chain's last top is written by its producer, some steps early.
    if (fusion_end(i) > i)
      for (Blob* b : top_vecs_[fusion_end(i)]) touch(b, i);
  }
  for (Blob* b : input_blobs_) touch(b, -1);  // written by the user before Forward
  for (Blob* b : output_blobs_) touch(b, n);  // read by the user after Forward
  for (const auto& name : options_.keep_blobs) {
    auto it = blobs_.find(name);
    if (it == blobs_.end())
      throw NetError("keep_blobs names '" + name + "', which the net has not");
    touch(it->second.get(), -1);
    touch(it->second.get(), n);
  }
  const MemoryPlan plan = PlanSharedMemory(lives);
  slots_.clear();
  for (size_t bytes : plan.slot_bytes)
    slots_.push_back(device_->Allocate(std::max<size_t>(bytes, 4)));
  std::vector<Blob*> order(lives.size());
  for (const auto& [b, i] : index) order[i] = b;
  // A Concat input's view is made afterwards (UpdateViews); an aliased top shares the data.
  for (size_t i = 0; i < order.size(); ++i) order[i]->SetDataMemory(slots_[plan.slot_of[i]]);
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
    if (m && !m->parent() && seen.insert(m.get()).second) total += m->bytes();  // views: no bytes
  };
  for (const auto& [name, b] : blobs_) add(*b);
  for (const auto& l : layers_)
    for (int i = 0; i < l->num_params(); ++i) add(l->param_blob(i));
  for (size_t i = 0; i < layers_.size(); ++i)
    for (Net* n : nested_nets(static_cast<int>(i))) total += n->blob_device_bytes();
  return total;
}

}  // namespace mpcaffe
