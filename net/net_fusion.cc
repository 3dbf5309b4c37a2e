// net/net_fusion.cc — the inference graph optimizer's fusion plan: chains of layers that run
// inside the Convolution or InnerProduct before them (BatchNorm and Scale folded into its
// weights and bias, an Eltwise SUM adding a residual blob, a ReLU), planned once at build, and
// whether a chain runs fused in this pass.
#include <algorithm>

#include "device/settings.h"
#include "layers/layer.h"
#include "net/net.h"

namespace mpcaffe {

namespace {

bool IsPerChannelAffine(const caffe::LayerParameter& lp, Layer& layer, int channels) {
  if (lp.type() == "BatchNorm") {
    const auto& p = lp.batch_norm_param();
    return (!p.has_use_global_stats() || p.use_global_stats()) && layer.num_params() >= 1 &&
           layer.param_blob(0).shape() == std::vector<int>{channels};
  }
  if (lp.type() == "Scale") {
    const auto& p = lp.scale_param();
    return lp.bottom_size() == 1 && p.axis() == 1 && p.num_axes() == 1 && layer.num_params() >= 1 &&
           layer.param_blob(0).shape() == std::vector<int>{channels};
  }
  return false;
}

bool IsResidualSum(const caffe::LayerParameter& lp) {
  if (lp.type() != "Eltwise" || lp.bottom_size() != 2 || lp.top_size() != 1) return false;
  const auto& p = lp.eltwise_param();
  if (p.operation() != caffe::EltwiseParameter::SUM) return false;
  for (float c : p.coeff())
    if (c != 1.0f) return false;
  return true;
}

}  // namespace

void Net::PlanFusion() {
  const int n = static_cast<int>(layers_.size());
  fusions_.assign(n, {});
  fused_into_.assign(n, -1);
  if (state_.phase() != caffe::TEST) return;
  const Settings& settings = GetSettings();
  const bool optimize = optimize_ > 0;
  const bool relu_on =
      options_.fuse_relu >= 0 ? options_.fuse_relu != 0 : settings.fuse != "0" && optimize;
  if (!optimize && !relu_on) return;

  // Readers of each value: (blob, the layer that wrote it, -1 for inputs) -> layers reading it.
  std::map<std::pair<const Blob*, int>, int> readers;
  {
    std::map<const Blob*, int> writer;
    auto writer_of = [&](const Blob* b) {
      auto it = writer.find(b);
      return it == writer.end() ? -1 : it->second;
    };
    for (int j = 0; j < n; ++j) {
      for (const Blob* b : bottom_vecs_[j]) ++readers[{b, writer_of(b)}];
      for (const Blob* t : top_vecs_[j]) writer[t] = j;
    }
  }
  const std::set<std::string> kept(options_.keep_blobs.begin(), options_.keep_blobs.end());
  const std::set<const Blob*> outputs(output_blobs_.begin(), output_blobs_.end());
  // A chain skips the writes of its intermediate values. An in-place layer overwrites the value
  // anyway; a new blob may go unwritten when the chain's next layer is its only reader and no
  // one asked to keep it (keep_blobs): at optimizer level 2 (as ONNX Runtime drops the values it
  // fuses away), under reduced memory and in nested nets (whose intermediate blobs are not kept
  // or not seen).
  const bool intermediates_hidden = optimize_ >= 2 || reduced_memory_ || options_.nested;
  // `value`, written by layer `writer`, is read by the chain's next layer, which writes `next`.
  auto may_skip = [&](Blob* value, int writer, Blob* next) {
    if (next == value) return true;
    return intermediates_hidden && readers[{value, writer}] == 1 && !kept.count(value->name()) &&
           !outputs.count(value);
  };

  for (int i = 0; i + 1 < n; ++i) {
    if (fused_into_[i] >= 0) continue;
    Layer& head = *layers_[i];
    const EpilogueSupport support = head.FusionSupport();
    if (!support.relu && !support.affine && !support.residual) continue;
    if (top_vecs_[i].size() != 1 || loss_weights_[i][0] != 0.0f || layer_need_backward_[i])
      continue;
    Blob* cur = top_vecs_[i][0];
    const DataType head_type = cur->type();
    const int channels = cur->num_axes() >= 2 ? cur->shape(1) : 0;
    Fusion chain, best;  // the chain so far, and its longest prefix the producer can end
    FusedEpilogue epilogue, best_epilogue;
    bool after_residual = false;
    for (int j = i + 1; j < n; ++j) {
      const caffe::LayerParameter& lp = param_.layer(j);
      Layer& layer = *layers_[j];
      if (layer_need_backward_[j] || top_vecs_[j].size() != 1 || loss_weights_[j][0] != 0.0f)
        break;
      Blob* out = top_vecs_[j][0];
      const std::vector<Blob*>& in = bottom_vecs_[j];
      const bool reads_cur = std::find(in.begin(), in.end(), cur) != in.end();
      if (!reads_cur || !may_skip(cur, j - 1, out)) break;
      if (lp.type() == "Quantizer" && inserted(j) && optimize && support.affine &&
          !after_residual && in.size() == 1) {
        // A conversion inside the chain (int8 → fp32 before a BatchNorm, back after a Scale):
        // the producer writes the converted value directly.
      } else if (optimize && support.affine && !after_residual && chain.relu < 0 &&
                 in.size() == 1 && IsPerChannelAffine(lp, layer, channels)) {
        epilogue.affine.push_back(&layer);
      } else if (optimize && support.residual && !after_residual && chain.relu < 0 &&
                 IsResidualSum(lp) && cur->type() == head_type &&
                 layer.compute_type() == head_type && out->type() == head_type) {
        const int k = in[0] == cur ? 1 : 0;
        Blob* other = in[k];
        if (other == cur || other->type() != head_type || other->shape() != cur->shape()) break;
        epilogue.residual = other;
        epilogue.eltwise = &layer;
        epilogue.residual_bottom = k;
        after_residual = true;
      } else if (relu_on && lp.type() == "ReLU" && lp.relu_param().negative_slope() == 0.0f &&
                 in.size() == 1 && layer.compute_type() == cur->type() &&
                 out->type() == cur->type()) {
        chain.relu = j;
        epilogue.relu = &layer;
      } else {
        break;
      }
      cur = out;
      chain.last = j;
      // The chain may end here when the producer can write this value itself.
      const bool useful = !epilogue.affine.empty() || epilogue.residual || chain.relu >= 0;
      if (useful && cur->type() == head_type) {
        best = chain;
        best_epilogue = epilogue;
        best_epilogue.output = &layer;
      }
      if (chain.relu >= 0) break;
    }
    if (best.last < 0) continue;
    best.epilogue = std::make_shared<FusedEpilogue>(best_epilogue);
    fusions_[i] = best;
    for (int j = i + 1; j <= best.last; ++j) fused_into_[j] = i;
    i = best.last;
  }
}

bool Net::FusionActive(int i) {
  const Fusion& f = fusions_[i];
  if (f.last < 0) return false;
  // Quantizer hooks observe or snap fp32 data around each layer; with the chain fused, the
  // values between its layers would never be seen.
  if (layers_[i]->top_quantizer(0).watches_data()) return false;
  for (int j = i + 1; j <= f.last; ++j)
    if (layers_[j]->WatchesFloatData()) return false;
  return layers_[i]->AcceptsEpilogue(*f.epilogue);
}

}  // namespace mpcaffe
