// layers/layer_params.cc — the Layer base's parameter blobs: creation with their quantizers,
// filler values drawn into them, values set, read and copied between layers in any data type,
// and 4-bit weights packed for the device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "codegen/typed_buffer.h"
#include "layers/filler_values.h"
#include "layers/layer.h"

namespace mpcaffe {

Blob* Layer::AddFloatParam(const std::vector<int>& shape, const caffe::FillerParameter& filler) {
  return AddTypedParam(shape, filler, false, false, DataType::kFloat32);
}

Blob* Layer::AddParam(const std::vector<int>& shape, const caffe::FillerParameter& filler,
                      bool symmetric, bool per_channel) {
  return AddTypedParam(shape, filler, symmetric, per_channel, compute_type_);
}

Blob* Layer::AddTypedParam(const std::vector<int>& shape, const caffe::FillerParameter& filler,
                           bool symmetric, bool per_channel, DataType type) {
  const int index = static_cast<int>(blobs_.size());
  auto blob = std::make_shared<Blob>(*device_, type, shape,
                                     name() + "/param" + std::to_string(index));
  blobs_.push_back(blob);
  auto q = MakeQuantizer(param_.blobs_quantizer(), index, BlobQuantizerName(index), type, type);
  q->set_symmetric(symmetric);
  if (q->weight_bits() == 4) {
    if (index != 0 || (param_.type() != "Convolution" && param_.type() != "InnerProduct"))
      Fail("weight_bits 4 is supported for the weights (parameter blob 0) of Convolution and "
           "InnerProduct layers only, given for parameter blob " + std::to_string(index));
    if (compute_type_ == DataType::kInt16Q)
      Fail("weight_bits 4 needs an int8 layer (8-bit activations), the layer computes in int16");
    if (shape.empty() || shape[0] <= 0) Fail("weight_bits 4 needs output channels on axis 0");
  } else if (per_channel && type == DataType::kInt8Q && !shape.empty() && shape[0] > 0) {
    q->set_per_channel_weights(true);
    q->set_symmetric(true);
  }
  blob_quantizers_.push_back(std::move(q));
  pending_fill_.emplace_back();
  if (index < param_.blobs_size()) {
    const caffe::BlobProto& bp = param_.blobs(index);
    if (bp.data_size() != blob->count())
      Fail("parameter blob " + std::to_string(index) + " in the LayerParameter has " +
           std::to_string(bp.data_size()) + " values, the layer needs " + ShapeString(shape));
    SetParamFromFloat(index, std::vector<float>(bp.data().begin(), bp.data().end()));
  } else {
    pending_fill_[index] = std::make_unique<caffe::FillerParameter>(filler);
  }
  return blob.get();
}

void Layer::DrawPendingFills() {
  for (size_t i = 0; i < pending_fill_.size(); ++i) {
    if (!pending_fill_[i]) continue;
    const caffe::FillerParameter filler = *pending_fill_[i];
    const uint64_t seed = StableHash(name() + "#" + std::to_string(i), RandomSeed());
    const ElementFiller values(filler, blobs_[i]->shape(), seed, Describe());
    Blob& b = *blobs_[i];
    quant::Quantizer& q = *blob_quantizers_[i];
    // positive_unitball needs its rows' sums and 4-bit weights their channels' scale choice
    // first: those draw all values, then convert them.
    if (!values.elementwise() || (IsQuantized(b.type()) && q.weight_bits() == 4) || b.count() == 0) {
      SetParamFromFloat(static_cast<int>(i), FillValues(filler, b.shape(), seed, Describe()));
      continue;
    }
    if (IsQuantized(b.type()) && q.per_channel_weights()) {
      pending_fill_[i].reset();
      DrawQuantizedChannels(static_cast<int>(i), values, nullptr);
      continue;
    }
    // The values go straight into the parameter's device memory (in place on a device that
    // computes on host memory): no host copy, no zero-filled array first. A quantized blob whose
    // range comes from its values needs all of them before the first is stored: they are drawn
    // twice in cache-sized blocks, once for the range and once to be quantized. (Drawn once into
    // an array of all the values instead was cheaper while the normal values were drawn one at a
    // time, 2026-11-24; with the vectorised draws it costs as much CPU time, 0.90 against 0.87 s
    // for the whole AlexNet int8 warm start-up, and 58 000 more page faults, 2026-11-25 on Intel's
    // runtime. Huge pages for the buffers of CPU devices gave no less system time on this VM.)
    pending_fill_[i].reset();
    const size_t n = static_cast<size_t>(b.count());
    if (IsQuantized(b.type()) && !q.has_observed() && !q.has_input_range()) {
      const auto [lo, hi] = DrawnRange(values, n, nullptr);
      q.SetObserved(lo, hi);
    }
    const DataType type = b.type();
    const size_t size = SizeOf(type);
    const quant::QuantParams p = IsQuantized(type) ? BlobParams(static_cast<int>(i)) : quant::QuantParams{};
    void* storage = nullptr;
    std::unique_ptr<HostView> view = ParamWriteView(static_cast<int>(i), &storage);
    auto* out = static_cast<uint8_t*>(storage);
    if (type == DataType::kFloat32) {
      ParallelChunks(n, [&](size_t begin, size_t end) {
        PrefaultForWrite(out + begin * size, (end - begin) * size);
        values.Fill(begin, end, reinterpret_cast<float*>(out) + begin);
      });
    } else {
      ForEachFilledBlock(values, n, [&](size_t begin, size_t end, const float* v) {
        if (IsQuantized(type)) {
          quant::QuantizeTensor(v, end - begin, p, out + begin * size);
        } else {
          for (size_t k = begin; k < end; ++k) StoreF(type, out, k, v[k - begin]);
        }
      });
    }
    if (view) view->Release();
    ParamsChanged();
  }
}

std::unique_ptr<HostView> Layer::ParamWriteView(int i, void** out) {
  Blob& b = *blobs_.at(i);
  if (DropsParamDeviceCopy(i)) {
    *out = b.mutable_host_data();
    return nullptr;
  }
  std::unique_ptr<HostView> view = b.OverwriteData();
  *out = view->data();
  return view;
}

void Layer::SetParamStorage(int i, const void* bytes) {
  Blob& b = *blobs_.at(i);
  void* out = nullptr;
  std::unique_ptr<HostView> view = ParamWriteView(i, &out);
  std::memcpy(out, bytes, b.bytes());
  if (view) view->Release();
  pending_fill_.at(i).reset();
  ParamsChanged();
}

void Layer::SetParamFromFloat(int i, const std::vector<float>& values) {
  Blob& b = *blobs_.at(i);
  pending_fill_.at(i).reset();
  if (values.size() != static_cast<size_t>(b.count()))
    Fail("parameter blob " + std::to_string(i) + " given " + std::to_string(values.size()) +
         " values for shape " + b.shape_string());
  if (!IsQuantized(b.type())) {
    // Straight into the device side: no zero-filled host array first (SyncedMemory's fresh
    // host memory), no host copy kept.
    void* out = nullptr;
    std::unique_ptr<HostView> view = ParamWriteView(i, &out);
    if (b.type() == DataType::kFloat32) {
      std::memcpy(out, values.data(), b.bytes());
    } else {
      for (size_t k = 0; k < values.size(); ++k) StoreF(b.type(), out, k, values[k]);
    }
    if (view) view->Release();
  } else if (blob_quantizers_.at(i)->weight_bits() == 4 ||
             blob_quantizers_.at(i)->per_channel_weights()) {
    // Per output channel symmetric weights: 4-bit, stored as w + 128 in the int8 blob, or in
    // the blob's own type (int8 depthwise). The scales always follow the values written
    // (filler values drawn before trained weights arrive must not leave theirs); stored
    // weights with their saved scales load through SetParamStorage instead.
    quant::Quantizer& q = *blob_quantizers_.at(i);
    const bool four_bits = q.weight_bits() == 4;
    const size_t channels = b.shape(0), k = b.count() / channels;
    q.set_channel_scales(
        four_bits ? quant::ChooseInt4Scales(values.data(), channels, k, q.weight_scale_method())
           : quant::ChooseWeightChannelParams(values.data(), channels, k, b.type()).scale);
    if (!q.has_observed() && !values.empty()) {  // the range is saved and names the quantizer
      const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
      q.SetObserved(std::min(0.0f, *lo), std::max(0.0f, *hi));
    }
    const quant::QuantParams p = BlobParams(i);  // checks the scale count
    if (!four_bits) {
      void* out = nullptr;
      std::unique_ptr<HostView> view = ParamWriteView(i, &out);
      quant::QuantizeTensor(values.data(), values.size(), p, out, k);
      if (view) view->Release();
      ParamsChanged();
      return;
    }
    std::vector<int8_t> w4(values.size());
    quant::QuantizeInt4Weights(values.data(), channels, k, p.scale, w4.data());
    auto* out = static_cast<uint8_t*>(b.mutable_host_data());
    for (size_t j = 0; j < w4.size(); ++j) out[j] = static_cast<uint8_t>(w4[j] + quant::kInt4StorageZero);
  } else {
    quant::Quantizer& q = *blob_quantizers_.at(i);
    if (!q.has_observed() && !q.has_input_range()) {
      double lo = 0, hi = 0;
      if (!values.empty()) {
        lo = hi = values[0];
        for (float v : values) {
          if (std::isnan(v)) continue;
          lo = std::min<double>(lo, v);
          hi = std::max<double>(hi, v);
        }
      }
      q.SetObserved(lo, hi);
    }
    const quant::QuantParams p = BlobParams(i);
    void* out = nullptr;
    std::unique_ptr<HostView> view = ParamWriteView(i, &out);
    quant::QuantizeTensor(values.data(), values.size(), p, out);
    if (view) view->Release();
  }
  ParamsChanged();
}

std::vector<float> Layer::ParamAsFloat(int i) {
  DrawPendingFills();
  Blob& b = *blobs_.at(i);
  std::unique_ptr<HostView> view;  // the newest side, read without keeping a host copy
  const void* data = b.ReadData(&view);
  std::vector<float> out(b.count());
  if (!IsQuantized(b.type())) {
    for (size_t k = 0; k < out.size(); ++k) out[k] = LoadAsFloat(b.type(), data, k);
    return out;
  }
  const quant::QuantParams p = BlobParams(i);
  quant::DequantizeTensor(data, b.count(), p, out.data(),
                          p.per_channel() && p.axis == 0 ? b.count() / p.channels() : 1);
  return out;
}

void Layer::DrawQuantizedChannels(int i, const ElementFiller& values, float* real) {
  Blob& b = *blobs_.at(i);
  quant::Quantizer& q = *blob_quantizers_.at(i);
  const size_t channels = b.shape(0), k = b.count() / channels;
  void* storage = nullptr;
  std::unique_ptr<HostView> view = ParamWriteView(i, &storage);
  std::pair<float, float> range;
  q.set_channel_scales(
      DrawChannelsQuantized(values, channels, k, b.type(), storage, real, &range));
  if (view) view->Release();
  if (!q.has_observed()) q.SetObserved(range.first, range.second);  // as SetParamFromFloat
  BlobParams(i);  // checks the scale count
  ParamsChanged();
}

bool Layer::FillsQuantizedElementwise(int i) const {
  if (i >= static_cast<int>(pending_fill_.size()) || !pending_fill_[i]) return false;
  const quant::Quantizer& q = *blob_quantizers_.at(i);
  const std::string& type = pending_fill_[i]->type();
  return IsQuantized(blobs_.at(i)->type()) && q.weight_bits() != 4 &&
         type != "positive_unitball" && blobs_[i]->count() > 0;
}

void Layer::CopyParamValuesFrom(int i, Layer& src) {
  Blob& to = *blobs_.at(i);
  if (to.type() == DataType::kFloat32 && src.FillsQuantizedElementwise(i) &&
      src.blobs_.at(i)->shape() == to.shape()) {
    // The source's filler values drawn once, straight into this blob (a quantized blob's range
    // needs all its values before the first is stored: DrawPendingFills draws them twice), its
    // range found block by block while the block is in the cache; then each block quantized
    // into the source and dequantized back in place. Calibrating AlexNet int8: one pass over
    // 61 M values and 244 MB fewer than drawing, quantizing and dequantizing in turn.
    Blob& from = *src.blobs_[i];
    const caffe::FillerParameter filler = *src.pending_fill_[i];
    src.pending_fill_[i].reset();
    pending_fill_.at(i).reset();
    const uint64_t seed = StableHash(src.name() + "#" + std::to_string(i), RandomSeed());
    const ElementFiller values(filler, from.shape(), seed, src.Describe());
    const size_t n = static_cast<size_t>(from.count()), size = SizeOf(from.type());
    void* storage = nullptr;
    std::unique_ptr<HostView> view = ParamWriteView(i, &storage);
    auto* real = static_cast<float*>(storage);
    quant::Quantizer& q = *src.blob_quantizers_[i];
    if (q.per_channel_weights()) {  // each row drawn, quantized and dequantized back at once
      src.DrawQuantizedChannels(i, values, real);
      if (view) view->Release();
      ParamsChanged();
      return;
    }
    if (!q.has_observed() && !q.has_input_range()) {  // DrawPendingFills' range, the same way
      const auto [lo, hi] = DrawnRange(values, n, real);
      q.SetObserved(lo, hi);
    } else {
      ParallelChunks(n, [&](size_t begin, size_t end) {
        PrefaultForWrite(real + begin, (end - begin) * sizeof(float));
        values.Fill(begin, end, real + begin);
      });
    }
    const quant::QuantParams p = src.BlobParams(i);
    void* quantized = nullptr;
    std::unique_ptr<HostView> source_view = src.ParamWriteView(i, &quantized);
    auto* out = static_cast<uint8_t*>(quantized);
    ParallelChunks(n, [&](size_t begin, size_t end) {
      PrefaultForWrite(out + begin * size, (end - begin) * size);
      for (size_t k = begin; k < end; k += kFillBlock) {
        const size_t stop = std::min(end, k + kFillBlock);
        quant::QuantizeTensor(real + k, stop - k, p, out + k * size);
        quant::DequantizeTensor(out + k * size, stop - k, p, real + k);
      }
    });
    if (source_view) source_view->Release();
    if (view) view->Release();
    src.ParamsChanged();
    ParamsChanged();
    return;
  }
  Blob& from = *src.blobs().at(i);  // its fillers drawn
  if (from.shape() != to.shape())
    Fail("parameter blob " + std::to_string(i) + " " + to.shape_string() + " cannot take the " +
         from.shape_string() + " values of " + src.Describe());
  if (to.type() != DataType::kFloat32 || !IsQuantized(from.type())) {
    SetParamFromFloat(i, src.ParamAsFloat(i));
    return;
  }
  const quant::QuantParams p = src.BlobParams(i);
  pending_fill_.at(i).reset();
  // Device side to device side through host views (mapped, so no copies, where the device
  // computes on host memory): neither blob gets a host copy.
  std::unique_ptr<HostView> in;
  const auto* q = static_cast<const uint8_t*>(from.ReadData(&in));
  void* storage = nullptr;
  std::unique_ptr<HostView> view = ParamWriteView(i, &storage);
  auto* out = static_cast<float*>(storage);
  const size_t n = static_cast<size_t>(from.count()), size = SizeOf(from.type());
  if (p.per_channel()) {
    quant::DequantizeTensor(q, n, p, out, n / p.channels());
  } else {
    ParallelChunks(n, [&](size_t b, size_t e) {
      quant::DequantizeTensor(q + b * size, e - b, p, out + b);
    });
  }
  if (view) view->Release();
  if (in) in->Release();
  ParamsChanged();
}

std::shared_ptr<DeviceMemory> Layer::UploadInt4Weights(int i) {
  Blob& b = *blobs_.at(i);
  const size_t channels = b.shape(0), k = b.count() / channels;
  const auto* stored = static_cast<const uint8_t*>(b.host_data());
  std::vector<int8_t> w(b.count());
  for (size_t j = 0; j < w.size(); ++j) w[j] = static_cast<int8_t>(stored[j] - quant::kInt4StorageZero);
  std::vector<uint8_t> packed(channels * quant::Int4RowBytes(k));
  quant::PackInt4(w.data(), channels, k, packed.data());
  std::shared_ptr<DeviceMemory> mem = device_->Allocate(packed.size());
  device_->CopyToDevice(packed.data(), mem.get(), 0, packed.size());
  return mem;
}

bool Layer::Int4Weights(int i) const {
  return i < num_blob_quantizers() && blob_quantizers_[i]->weight_bits() == 4 &&
         IsQuantized(blobs_.at(i)->type());
}

}  // namespace mpcaffe
