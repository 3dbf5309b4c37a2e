// net/net_fusion.cc — inference fusion of a ReLU into the Convolution or InnerProduct before it:
// which pairs qualify (planned once at build), and whether a pair runs fused in this pass.
#include "device/settings.h"
#include "layers/layer.h"
#include "net/net.h"

namespace mpcaffe {

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
    if (bottom_vecs_[j].size() != 1 || bottom_vecs_[j][0] != t || top_vecs_[j].size() != 1)
      continue;
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

}  // namespace mpcaffe
