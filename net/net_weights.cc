// net/net_weights.cc — the Net's trained weights: copied from a caffemodel (values converted to
// each layer's type, quantizer ranges by name, nested nets inside their layer's entry), written
// back (ToProto, Save, ranges only), and shared with another net.
#include <cstring>
#include <set>
#include <string>

#include "layers/layer.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "quant/int4.h"
#include "quant/quantizer_proto.h"

namespace mpcaffe {

namespace {

/// BVLC's shape comparison: `shape` when the proto has one, else the legacy 4-d fields.
bool ShapeMatches(const caffe::BlobProto& bp, const Blob& blob) {
  if (bp.has_shape()) {
    if (bp.shape().dim_size() != blob.num_axes()) return false;
    for (int i = 0; i < blob.num_axes(); ++i)
      if (bp.shape().dim(i) != blob.shape(i)) return false;
    return true;
  }
  if (blob.num_axes() > 4) return false;
  return bp.num() == blob.LegacyShape(-4) && bp.channels() == blob.LegacyShape(-3) &&
         bp.height() == blob.LegacyShape(-2) && bp.width() == blob.LegacyShape(-1);
}

std::string ProtoShapeString(const caffe::BlobProto& bp) {
  std::vector<int> dims;
  if (bp.has_shape()) {
    for (auto d : bp.shape().dim()) dims.push_back(static_cast<int>(d));
  } else {
    dims = {bp.num(), bp.channels(), bp.height(), bp.width()};
  }
  return ShapeString(dims);
}

void ApplyRange(const caffe::QuantizerParameter& p, quant::Quantizer* q) {
  if (p.has_observed_min() && p.has_observed_max())
    q->SetObserved(p.observed_min(), p.observed_max());
  if (p.has_min_in() && p.has_max_in()) q->SetInputRange(p.min_in(), p.max_in());
  if (p.has_min_out() && p.has_max_out()) q->SetOutputRange(p.min_out(), p.max_out());
  if (p.channel_scale_size() > 0)  // per-channel weights' scales (4-bit, int8 depthwise)
    q->set_channel_scales(std::vector<float>(p.channel_scale().begin(), p.channel_scale().end()));
}

/// Copies `bp` into parameter blob `i` of `l` (the layer `layer` names in the weights), converted
/// to the blob's type; `saved_scales`: the weights file holds the blob's per-channel scales. A
/// shape or size mismatch throws NetError naming the layer and the blob.
void CopyParamBlob(const caffe::BlobProto& bp, const std::string& layer, int i, Layer* l,
                   bool saved_scales) {
  Blob& target = l->param_blob(i);
  if (!ShapeMatches(bp, target))
    throw NetError("layer '" + layer + "', parameter blob " + std::to_string(i) +
                   ": shape mismatch; the weights have " + ProtoShapeString(bp) +
                   ", the net's layer has " + target.shape_string());
  const size_t count = target.count();
  const std::string where = "layer '" + layer + "', parameter blob " + std::to_string(i);
  if (bp.packed_bits() != 0 && bp.packed_bits() != 4)
    throw NetError(where + ": packed_bits " + std::to_string(bp.packed_bits()) +
                   " is not supported (0, or 4 for 4-bit weights)");
  if (bp.packed_bits() == 4) {
    // Signed 4-bit weights, two per byte, one row of ceil(K/2) bytes per output channel.
    if (bp.data_type() != caffe::CAFFE_INT8_QUANTIZED || target.num_axes() == 0)
      throw NetError(where + ": packed 4-bit weights must be CAFFE_INT8_QUANTIZED with output "
                     "channels on axis 0");
    const size_t channels = target.shape(0), k = channels ? count / channels : 0;
    const size_t bytes = channels * quant::Int4RowBytes(k);
    if (bp.packed_data().size() != bytes)
      throw NetError(where + ": packed_data has " + std::to_string(bp.packed_data().size()) +
                     " bytes, 4-bit weights " + target.shape_string() + " need " +
                     std::to_string(bytes) + " (" + std::to_string(channels) + " channels of " +
                     std::to_string(quant::Int4RowBytes(k)) + ")");
    std::vector<int8_t> w(count);
    quant::UnpackInt4(reinterpret_cast<const uint8_t*>(bp.packed_data().data()), channels, k,
                      w.data());
    quant::Quantizer& q = l->blob_quantizer(i);
    if (q.channel_scales().size() != channels)
      throw NetError(where + ": 4-bit weights need " + std::to_string(channels) +
                     " channel scales of quantizer '" + q.name() + "', the weights file has " +
                     std::to_string(q.channel_scales().size()));
    if (l->Int4Weights(i)) {
      std::vector<uint8_t> stored(count);
      for (size_t j = 0; j < count; ++j)
        stored[j] = static_cast<uint8_t>(w[j] + quant::kInt4StorageZero);
      l->SetParamStorage(i, stored.data());
      return;
    }
    std::vector<float> values(count);  // another type: the real values
    for (size_t j = 0; j < count; ++j) values[j] = q.channel_scales()[j / k] * float(w[j]);
    l->SetParamFromFloat(i, values);
    return;
  }
  if (bp.has_packed_data()) {
    const DataType from =
        DataTypeFromProto(bp.data_type(), "layer '" + layer + "' blob " + std::to_string(i));
    if (bp.packed_data().size() != count * SizeOf(from))
      throw NetError("layer '" + layer + "', parameter blob " + std::to_string(i) +
                     ": packed_data has " + std::to_string(bp.packed_data().size()) + " bytes, " +
                     target.shape_string() + " of " + Name(from) + " needs " +
                     std::to_string(count * SizeOf(from)));
    // Per-channel weights were saved with one scale per output channel (the file's own entry:
    // scales drawn from filler values before the load are not the file's).
    const size_t rows = target.num_axes() > 0 ? target.shape(0) : 0;
    const bool saved_channel_scales = IsQuantized(from) && saved_scales &&
                                      i < l->num_blob_quantizers() && rows > 0 &&
                                      l->blob_quantizer(i).channel_scales().size() == rows;
    bool needs_channel_scales =
        i < l->num_blob_quantizers() && l->blob_quantizer(i).per_channel_weights();
    if (needs_channel_scales && !saved_channel_scales && IsQuantized(from) &&
        from == target.type()) {
      // Weights stored with one scale for the layer (files written before scales per channel
      // were the default, or with MPCAFFE_PER_CHANNEL_WEIGHTS=0) keep it: quantizing them again
      // per channel would round the stored values a second time, and the file would no longer
      // compute what it computed when it was saved. The layer's weights go back to the
      // asymmetric per-tensor quantizer they were saved with (AddParam's for Convolution and
      // InnerProduct weights).
      quant::Quantizer& q = l->blob_quantizer(i);
      q.set_per_channel_weights(false);
      q.set_symmetric(false);
      q.set_channel_scales({});
      needs_channel_scales = false;
    }
    if (from == target.type() && saved_channel_scales == needs_channel_scales) {
      l->SetParamStorage(i, bp.packed_data().data());
      return;
    }
    std::vector<float> values(count);
    if (IsQuantized(from)) {
      quant::Quantizer& q = l->blob_quantizer(i);
      if (!saved_channel_scales && !q.has_observed())
        throw NetError("layer '" + layer + "', parameter blob " + std::to_string(i) + ": packed " +
                       Name(from) + " data without a range for quantizer '" + q.name() + "'");
      const auto params =
          saved_channel_scales
              ? quant::SymmetricChannelParams(q.channel_scales(), from)
              : quant::ChooseQuantParams(q.observed_min(), q.observed_max(), from, q.symmetric());
      quant::DequantizeTensor(bp.packed_data().data(), count, params, values.data(),
                              saved_channel_scales ? count / rows : 1);
    } else if (from == DataType::kFloat16) {
      const auto* h = reinterpret_cast<const uint16_t*>(bp.packed_data().data());
      for (size_t k = 0; k < count; ++k) values[k] = HalfToFloat(h[k]);
    } else {
      std::memcpy(values.data(), bp.packed_data().data(), count * 4);
    }
    l->SetParamFromFloat(i, values);
  } else if (static_cast<size_t>(bp.data_size()) == count) {
    l->SetParamFromFloat(i, std::vector<float>(bp.data().begin(), bp.data().end()));
  } else if (static_cast<size_t>(bp.double_data_size()) == count) {
    l->SetParamFromFloat(i, std::vector<float>(bp.double_data().begin(), bp.double_data().end()));
  } else {
    throw NetError("layer '" + layer + "', parameter blob " + std::to_string(i) +
                   ": the weights hold " + std::to_string(bp.data_size()) +
                   " values, the net's layer needs " + std::to_string(count) + " (" +
                   target.shape_string() + ")");
  }
}

}  // namespace

void Net::CopyTrainedLayersFrom(const caffe::NetParameter& weights) {
  CopyRanges(weights);
  std::set<std::string> scaled;
  for (const auto& q : weights.quantizer())
    if (q.channel_scale_size() > 0) scaled.insert(q.name());
  for (const auto& src : weights.layer()) CopyParams(src, scaled);
  for (auto& l : layers_) l->ParamsChanged();
}

void Net::CopyRanges(const caffe::NetParameter& weights) {
  // By name: net-level list, then per-layer quantizer entries.
  std::map<std::string, const caffe::QuantizerParameter*> ranges;
  for (const auto& q : weights.quantizer()) ranges[q.name()] = &q;
  for (auto& l : layers_)
    for (quant::Quantizer* q : l->quantizers()) {
      auto it = ranges.find(q->name());
      if (it != ranges.end()) ApplyRange(*it->second, q);
    }
  for (const auto& src : weights.layer()) {
    auto it = layer_index_.find(src.name());
    if (it == layer_index_.end()) continue;
    Layer& l = *layers_[it->second];
    for (int i = 0; i < src.blobs_quantizer_size() && i < l.num_blob_quantizers(); ++i)
      ApplyRange(src.blobs_quantizer(i), &l.blob_quantizer(i));
    // Nested nets: their weights and ranges are saved inside the layer's entry.
    const std::vector<Net*> nested = l.nested_nets();
    if (nested.empty()) continue;
    const std::vector<const caffe::NetParameter*> saved = l.SavedNestedNets(src);
    for (size_t k = 0; k < saved.size(); ++k) {
      if (!saved[k]) continue;
      try {
        nested[k]->CopyTrainedLayersFrom(*saved[k]);
      } catch (const Error& e) {
        throw NetError("layer '" + src.name() + "', nested net '" +
                       l.nested_net_name(static_cast<int>(k)) + "': " + e.what());
      }
    }
  }
}

void Net::CopyParams(const caffe::LayerParameter& src, const std::set<std::string>& scaled) {
  auto it = layer_index_.find(src.name());
  if (it == layer_index_.end() || src.blobs_size() == 0) return;
  Layer& l = *layers_[it->second];
  if (l.num_params() != src.blobs_size())
    throw NetError("layer '" + src.name() + "': the weights have " +
                   std::to_string(src.blobs_size()) + " parameter blobs, the net's layer has " +
                   std::to_string(l.num_params()));
  for (int i = 0; i < src.blobs_size(); ++i) {
    const bool saved_scales =
        (i < l.num_blob_quantizers() && scaled.count(l.blob_quantizer(i).name()) > 0) ||
        (i < src.blobs_quantizer_size() && src.blobs_quantizer(i).channel_scale_size() > 0);
    CopyParamBlob(src.blobs(i), src.name(), i, &l, saved_scales);
  }
}

void Net::CopyTrainedLayersFrom(const std::string& caffemodel) {
  CopyTrainedLayersFrom(ReadNetParameterBinary(caffemodel));
}

void Net::ToProto(caffe::NetParameter* out) {
  out->Clear();
  out->set_name(param_.name());
  if (param_.has_data_type()) out->set_data_type(param_.data_type());
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (inserted(static_cast<int>(i))) continue;
    Layer& l = *layers_[i];
    caffe::LayerParameter* lp = out->add_layer();
    *lp = l.layer_param();
    lp->clear_blobs();
    lp->clear_phase();
    const std::vector<Net*> nested = nested_nets(static_cast<int>(i));
    if (!nested.empty()) {  // each nested net's weights and ranges, where the layer keeps them
      const std::vector<caffe::NetParameter*> saved = l.SavedNestedNets(lp);
      for (size_t k = 0; k < nested.size(); ++k) nested[k]->ToProto(saved[k]);
    }
    for (int j = 0; j < l.num_params(); ++j) {
      const std::shared_ptr<Blob>& b = l.blobs()[j];
      caffe::BlobProto* bp = lp->add_blobs();
      for (int d : b->shape()) bp->mutable_shape()->add_dim(d);
      if (l.Int4Weights(j)) {  // packed two per byte (the scales go with the ranges)
        const size_t channels = b->shape(0), k = b->count() / channels;
        const auto* stored = static_cast<const uint8_t*>(b->host_data());
        std::vector<int8_t> w(b->count());
        for (size_t e = 0; e < w.size(); ++e) w[e] = static_cast<int8_t>(stored[e] - quant::kInt4StorageZero);
        std::string packed(channels * quant::Int4RowBytes(k), '\0');
        quant::PackInt4(w.data(), channels, k, reinterpret_cast<uint8_t*>(packed.data()));
        bp->set_data_type(DataTypeToProto(b->type()));
        bp->set_packed_bits(4);
        bp->set_packed_data(std::move(packed));
      } else if (b->type() == DataType::kFloat32) {
        const float* v = static_cast<const float*>(b->host_data());
        bp->mutable_data()->Add(v, v + b->count());
      } else {
        bp->set_data_type(DataTypeToProto(b->type()));
        bp->set_packed_data(std::string(static_cast<const char*>(b->host_data()), b->bytes()));
      }
    }
  }
  AppendRanges(out);
}

void Net::AppendRanges(caffe::NetParameter* out) {
  std::set<std::string> written;
  for (auto& l : layers_)
    for (quant::Quantizer* q : l->quantizers()) {
      if (written.count(q->name())) continue;
      if (!q->has_observed() && !q->has_input_range() && !q->has_output_range()) continue;
      written.insert(q->name());
      caffe::QuantizerParameter* qp = out->add_quantizer();
      quant::ToProto(*q, qp);
      qp->clear_mode();  // the saved entry is a range; modes belong to the run
    }
}

void Net::RangesToProto(caffe::NetParameter* out) {
  out->Clear();
  out->set_name(param_.name());
  AppendRanges(out);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::vector<Net*> nested = nested_nets(static_cast<int>(i));
    if (nested.empty()) continue;
    caffe::LayerParameter* lp = out->add_layer();
    lp->set_name(layer_names_[i]);
    const std::vector<caffe::NetParameter*> saved = layers_[i]->SavedNestedNets(lp);
    for (size_t k = 0; k < nested.size(); ++k) nested[k]->RangesToProto(saved[k]);
  }
}

void Net::Save(const std::string& caffemodel) {
  caffe::NetParameter p;
  ToProto(&p);
  WriteProtoToBinaryFile(p, caffemodel);
}

void Net::ShareTrainedLayersWith(const Net& other) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string& name = layer_names_[i];
    auto it = other.layer_index_.find(name);
    if (it == other.layer_index_.end()) continue;
    const std::vector<Net*> mine = nested_nets(static_cast<int>(i));
    const std::vector<Net*> theirs = other.nested_nets(it->second);
    if (mine.size() != theirs.size())
      throw NetError("layer '" + name + "': " + std::to_string(mine.size()) +
                     " nested nets, the shared net's layer has " + std::to_string(theirs.size()));
    for (size_t k = 0; k < mine.size(); ++k) mine[k]->ShareTrainedLayersWith(*theirs[k]);
    Layer& src = *other.layers_[it->second];
    Layer& dst = *layers_[i];
    if (src.num_params() != dst.num_params())
      throw NetError("layer '" + name + "': " + std::to_string(dst.num_params()) +
                     " parameter blobs, the shared net's layer has " +
                     std::to_string(src.num_params()));
    for (int j = 0; j < dst.num_params(); ++j) {
      if (src.param_blob(j).shape() != dst.param_blob(j).shape() ||
          src.param_blob(j).type() != dst.param_blob(j).type())
        throw NetError("layer '" + name + "' parameter " + std::to_string(j) + ": shape " +
                       dst.param_blob(j).shape_string() + " cannot share " +
                       src.param_blob(j).shape_string());
      dst.blobs()[j] = src.blobs()[j];
    }
    dst.ParamsChanged();
  }
}

}  // namespace mpcaffe
