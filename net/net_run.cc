// net/net_run.cc — running a Net: Forward (with fused chains and layers running as views),
// Reshape, and the fp32 Backward with BVLC's loss-weight and parameter-gradient semantics.
#include <algorithm>
#include <set>

#include "layers/layer.h"
#include "net/net.h"

namespace mpcaffe {

float Net::ForwardFromTo(int start, int end) {
  if (start < 0 || end >= static_cast<int>(layers_.size()) || start > end + 1)
    throw NetError("ForwardFromTo(" + std::to_string(start) + ", " + std::to_string(end) +
                   ") outside the net's " + std::to_string(layers_.size()) + " layers");
  UpdateViews(false);
  // Each layer's bottoms are compared with the shapes it was reshaped for, unless a whole pass
  // ran since the last Blob::Reshape (BlobShapeGeneration) without reshaping a blob: then every
  // layer was reshaped for the shapes that still hold (comparing them took 3-9% of the host's
  // time in perf's samples of GoogLeNet int8's passes).
  const uint64_t shapes_at_start = BlobShapeGeneration();
  float loss = 0;
  for (int i = start; i <= end; ++i) {
    if (BlobShapeGeneration() != shapes_checked_ && BottomsReshaped(i)) ReshapeKeepingInputs(i);
    const int last = fusion_end(i);
    if (last > i && last <= end && FusionActive(i)) {
      Layer& producer = *layers_[i];
      producer.set_fused(fusions_[i].epilogue.get());
      try {
        producer.Forward(bottom_vecs_[i], top_vecs_[last]);
      } catch (...) {
        producer.set_fused(nullptr);
        throw;
      }
      producer.set_fused(nullptr);
      i = last;  // the chain ran inside its producer; its last top is written
    } else if (!SkipAsView(i)) {  // a view: its tops already hold the values
      if (layers_[i]->ReshapesEachPass()) ReshapeBeforePass(i);
      layers_[i]->Forward(bottom_vecs_[i], top_vecs_[i]);
    }
    for (size_t t = 0; t < top_vecs_[i].size(); ++t) {
      if (loss_weights_[i][t] == 0.0f) continue;
      const std::vector<float> v = top_vecs_[i][t]->ToFloat();
      for (float x : v) loss += loss_weights_[i][t] * x;
    }
  }
  if (start == 0 && end == static_cast<int>(layers_.size()) - 1)
    shapes_checked_ = BlobShapeGeneration() == shapes_at_start ? shapes_at_start : kNoShapesChecked;
  return loss;
}

float Net::Forward() {
  if (layers_.empty()) return 0.0f;
  return ForwardFromTo(0, static_cast<int>(layers_.size()) - 1);
}

void Net::ReshapeBeforePass(int i) {
  std::vector<std::vector<int>> before;
  for (const Blob* t : top_vecs_[i]) before.push_back(t->shape());
  try {
    layers_[i]->Reshape(bottom_vecs_[i], top_vecs_[i]);
  } catch (const BlobError& e) {
    throw BlobError("layer '" + layer_names_[i] + "' (" + layers_[i]->type() + "): " + e.what());
  }
  NoteReshaped(i);
  bool changed = false;
  for (size_t t = 0; t < top_vecs_[i].size(); ++t) changed |= top_vecs_[i][t]->shape() != before[t];
  if (changed) ReshapeFrom(i + 1);
}

void Net::ReshapeKeepingInputs(int first) {
  // The blobs layers [first, end) read before writing them (the caller's inputs, earlier layers'
  // tops) hold this pass's values: a new reduced-memory plan may move them, so their bytes are
  // kept aside over the re-plan.
  std::set<Blob*> seen;
  std::vector<std::pair<Blob*, std::vector<char>>> kept;
  for (size_t i = first; i < layers_.size(); ++i) {
    for (Blob* b : bottom_vecs_[i]) {
      if (!seen.insert(b).second) continue;
      const char* bytes = static_cast<const char*>(b->host_data());
      kept.emplace_back(b, std::vector<char>(bytes, bytes + b->bytes()));
    }
    for (Blob* t : top_vecs_[i]) seen.insert(t);
  }
  ReshapeFrom(first);
  for (auto& [blob, bytes] : kept)
    if (blob->bytes() == bytes.size())
      std::copy(bytes.begin(), bytes.end(), static_cast<char*>(blob->mutable_host_data()));
}

bool Net::BottomsReshaped(int i) const {
  const std::vector<Blob*>& bottoms = bottom_vecs_[i];
  const std::vector<std::vector<int>>& seen = reshaped_bottoms_[i];
  for (size_t b = 0; b < bottoms.size(); ++b)
    if (bottoms[b]->shape() != seen[b]) return true;
  return false;
}

void Net::NoteReshaped(int i) {
  if (reshaped_bottoms_.size() < layers_.size()) reshaped_bottoms_.resize(layers_.size());
  std::vector<std::vector<int>>& seen = reshaped_bottoms_[i];
  seen.clear();
  for (const Blob* b : bottom_vecs_[i]) seen.push_back(b->shape());
}

void Net::Reshape() { ReshapeFrom(0); }

void Net::ReshapeFrom(int first) {
  for (size_t i = first; i < layers_.size(); ++i) {
    try {
      layers_[i]->Reshape(bottom_vecs_[i], top_vecs_[i]);
    } catch (const BlobError& e) {
      throw BlobError("layer '" + layer_names_[i] + "' (" + layers_[i]->type() + "): " + e.what());
    }
    NoteReshaped(static_cast<int>(i));
  }
  UpdateViews(true);  // and the reduced memory
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

}  // namespace mpcaffe
