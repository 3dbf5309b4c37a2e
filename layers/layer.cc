// layers/layer.cc — the Layer base: blob checks, quantizer creation and hooks, parameter blobs,
// fillers and the data-type helpers shared by all layers.
#include "layers/layer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "codegen/typed_buffer.h"
#include "layers/random_values.h"
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

namespace {

/// Runs body(begin, end) over [0, n) in up to hardware_concurrency() chunks (large n only).
template <typename Body>
void ParallelChunks(size_t n, Body body) {
  const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()),
                                          std::max<size_t>(1, n / (1 << 18)));
  if (threads <= 1) {
    body(size_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  const size_t step = (n + threads - 1) / threads;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back(body, std::min(n, t * step), std::min(n, (t + 1) * step));
  body(size_t{0}, std::min(n, step));
  for (auto& th : pool) th.join();
}

/// Maps the pages wholly inside [p, p + bytes) for writing before they are written, in one call
/// (Linux MADV_POPULATE_WRITE) instead of a page fault per 4 KiB page on first touch: a warm
/// AlexNet int8 start-up writes 305 MB of fresh buffers (the calibration net's fp32 weights and
/// the int8 ones). Where the kernel or the memory does not take it, the pages fault as before.
void PrefaultForWrite(void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)bytes;
#endif
}

/// The values of one filler at any index range: value i depends on (seed, i) and the shape
/// only (positive_unitball's rows are normalised by their sums: FillValues draws those whole).
class ElementFiller {
 public:
  ElementFiller(const caffe::FillerParameter& f, const std::vector<int>& shape, uint64_t seed,
                const std::string& where)
      : f_(f), seed_(seed) {
    count_ = 1;
    for (int d : shape) count_ *= d;
    const int num = shape.empty() ? 1 : shape[0];
    const int channels = shape.size() > 1 ? shape[1] : 1;
    const int fan_in = num ? static_cast<int>(count_ / num) : 0;
    const int fan_out = channels ? static_cast<int>(count_ / channels) : 0;
    const double fan = f.variance_norm() == caffe::FillerParameter::FAN_OUT ? double(fan_out)
                       : f.variance_norm() == caffe::FillerParameter::AVERAGE
                           ? (fan_in + fan_out) / 2.0
                           : double(fan_in);
    const std::string& type = f.type();
    if (type == "constant") {
      kind_ = kConstant;
    } else if (type == "uniform") {
      kind_ = kUniform, lo_ = f.min(), hi_ = f.max();
    } else if (type == "gaussian") {
      kind_ = kNormal, mean_ = f.mean(), std_ = f.std();
      if (f.sparse() >= 0 && num > 0) {  // keep each weight with probability sparse / num_outputs
        keep_ = std::min(1.0, double(f.sparse()) / num);
        mask_seed_ = Mix64(seed ^ 0x5eed5eed5eed5eedULL);
        sparse_ = true;
      }
    } else if (type == "xavier") {
      const double scale = std::sqrt(3.0 / std::max(1.0, fan));
      kind_ = kUniform, lo_ = -scale, hi_ = scale;
    } else if (type == "msra") {
      kind_ = kNormal, mean_ = 0.0, std_ = std::sqrt(2.0 / std::max(1.0, fan));
    } else if (type == "positive_unitball") {
      kind_ = kUniform, lo_ = 0.0, hi_ = 1.0, unitball_ = true;
    } else if (type == "bilinear") {
      if (shape.size() != 4 || shape[2] != shape[3])
        throw LayerError(where + ": bilinear filler needs a 4-d blob with square kernels, got " +
                         ShapeString(shape));
      kind_ = kBilinear;
      k_ = shape[3];
    } else {
      throw LayerError(where + ": unknown filler type '" + type +
                       "' (known: constant, uniform, gaussian, xavier, msra, positive_unitball, "
                       "bilinear)");
    }
  }

  /// False for positive_unitball (its values need their row's sum).
  bool elementwise() const { return !unitball_; }
  size_t count() const { return count_; }

  /// out[i - begin] = value i, for i in [begin, end) (one thread; callers split large ranges).
  void Fill(size_t begin, size_t end, float* out) const {
    switch (kind_) {
      case kConstant:
        std::fill(out, out + (end - begin), f_.value());
        break;
      case kUniform:
        UniformValues(seed_, begin, end, lo_, hi_, out);
        break;
      case kNormal: {
        // The ziggurat: a few integer operations per value (Box–Muller's logarithm and sine
        // were half of AlexNet's start-up), 16 values at a time where the CPU can.
        NormalValues(seed_, begin, end, static_cast<float>(mean_), static_cast<float>(std_), out);
        if (sparse_)
          for (size_t i = begin; i < end; ++i)
            if (!(Uniform01(mask_seed_, i) < keep_)) out[i - begin] = 0.0f;
        break;
      }
      case kBilinear: {
        const float f = std::ceil(k_ / 2.0f);
        const float c = (k_ - 1) / (2.0f * f);
        for (size_t i = begin; i < end; ++i) {
          const float x = static_cast<float>(i % k_), y = static_cast<float>((i / k_) % k_);
          out[i - begin] = (1 - std::fabs(x / f - c)) * (1 - std::fabs(y / f - c));
        }
        break;
      }
    }
  }

 private:
  enum Kind { kConstant, kUniform, kNormal, kBilinear };
  const caffe::FillerParameter& f_;
  uint64_t seed_;
  size_t count_ = 0;
  Kind kind_ = kConstant;
  double lo_ = 0, hi_ = 0, mean_ = 0, std_ = 0, keep_ = 1;
  uint64_t mask_seed_ = 0;
  bool sparse_ = false, unitball_ = false;
  int k_ = 1;
};

/// Folds the extremes of v[0, n) into *lo and *hi, NaN left out (a comparison with NaN is false),
/// in runs of a fixed length, which compilers vectorize.
void FoldRange(const float* v, size_t n, float* lo, float* hi) {
  constexpr int kRun = 16;
  float l[kRun], h[kRun];
  std::fill(l, l + kRun, *lo);
  std::fill(h, h + kRun, *hi);
  size_t k = 0;
  for (; k + kRun <= n; k += kRun)
    for (int m = 0; m < kRun; ++m) {
      l[m] = v[k + m] < l[m] ? v[k + m] : l[m];
      h[m] = v[k + m] > h[m] ? v[k + m] : h[m];
    }
  for (; k < n; ++k) {
    l[0] = v[k] < l[0] ? v[k] : l[0];
    h[0] = v[k] > h[0] ? v[k] : h[0];
  }
  for (int m = 0; m < kRun; ++m) {
    *lo = l[m] < *lo ? l[m] : *lo;
    *hi = h[m] > *hi ? h[m] : *hi;
  }
}

/// Values per block in ForEachFilledBlock: 64 KiB of floats, which stay in the core's cache
/// between being drawn and being stored.
constexpr size_t kFillBlock = 16384;

/// Draws values [0, n) of `filler` in blocks on every core (ParallelChunks) and calls
/// block(begin, end, values) on each: no array of all the values exists at any time.
template <typename Block>
void ForEachFilledBlock(const ElementFiller& filler, size_t n, Block block) {
  ParallelChunks(n, [&](size_t b, size_t e) {
    std::unique_ptr<float[]> values(new float[kFillBlock]);
    for (size_t i = b; i < e; i += kFillBlock) {
      const size_t end = std::min(e, i + kFillBlock);
      filler.Fill(i, end, values.get());
      block(i, end, values.get());
    }
  });
}

/// Draws values [0, n) of `filler` on every core, into out[0, n) (or, when out is null, a block at
/// a time into scratch space), and returns the range SetParamFromFloat would observe: from value
/// 0, then every value but NaN (in float: the same extremes as its double comparisons), each
/// block's while the block is in the cache.
std::pair<float, float> DrawnRange(const ElementFiller& filler, size_t n, float* out) {
  float first = 0.0f;
  filler.Fill(0, 1, &first);
  float lo = first, hi = first;
  std::mutex mutex;
  ParallelChunks(n, [&](size_t begin, size_t end) {
    float l = first, h = first;
    std::unique_ptr<float[]> scratch(out ? nullptr : new float[kFillBlock]);
    if (out) PrefaultForWrite(out + begin, (end - begin) * sizeof(float));
    for (size_t k = begin; k < end; k += kFillBlock) {
      const size_t stop = std::min(end, k + kFillBlock);
      float* v = out ? out + k : scratch.get();
      filler.Fill(k, stop, v);
      FoldRange(v, stop - k, &l, &h);
    }
    std::lock_guard<std::mutex> lock(mutex);
    lo = std::min(lo, l);
    hi = std::max(hi, h);
  });
  return {lo, hi};
}

}  // namespace

std::vector<float> FillValues(const caffe::FillerParameter& f, const std::vector<int>& shape,
                              uint64_t seed, const std::string& where) {
  const ElementFiller filler(f, shape, seed, where);
  const size_t count = filler.count();
  std::vector<float> v(count);
  ParallelChunks(count, [&](size_t b, size_t e) { filler.Fill(b, e, v.data() + b); });
  if (!filler.elementwise()) {  // positive_unitball: each row divided by its sum
    const int num = shape.empty() ? 1 : shape[0];
    const size_t dim = num ? count / num : 0;
    for (int n = 0; n < num; ++n) {
      double sum = 0;
      for (size_t j = 0; j < dim; ++j) sum += v[n * dim + j];
      for (size_t j = 0; j < dim; ++j) v[n * dim + j] = static_cast<float>(v[n * dim + j] / sum);
    }
  }
  return v;
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

void FusedEpilogue::Affine(int channels, std::vector<float>* scale,
                           std::vector<float>* shift) const {
  std::vector<uint64_t> versions;
  for (Layer* l : affine)
    for (const auto& b : l->blobs()) versions.push_back(b->data_version());
  if (channels == cached_channels_ && versions == cached_versions_) {
    *scale = cached_scale_;
    *shift = cached_shift_;
    return;
  }
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

Blob* Layer::AddParam(const std::vector<int>& shape, const caffe::FillerParameter& filler,
                      bool symmetric, bool per_channel) {
  const int index = static_cast<int>(blobs_.size());
  auto blob = std::make_shared<Blob>(*device_, compute_type_, shape,
                                     name() + "/param" + std::to_string(index));
  blobs_.push_back(blob);
  auto q = MakeQuantizer(param_.blobs_quantizer(), index, BlobQuantizerName(index), compute_type_,
                         compute_type_);
  q->set_symmetric(symmetric);
  if (q->weight_bits() == 4) {
    if (index != 0 || (param_.type() != "Convolution" && param_.type() != "InnerProduct"))
      Fail("weight_bits 4 is supported for the weights (parameter blob 0) of Convolution and "
           "InnerProduct layers only, given for parameter blob " + std::to_string(index));
    if (compute_type_ == DataType::kInt16Q)
      Fail("weight_bits 4 needs an int8 layer (8-bit activations), the layer computes in int16");
    if (shape.empty() || shape[0] <= 0) Fail("weight_bits 4 needs output channels on axis 0");
  } else if (per_channel && compute_type_ == DataType::kInt8Q && !shape.empty() && shape[0] > 0) {
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
    // Per-channel scales need each channel's values first, and positive_unitball its rows' sums:
    // those draw all values, then convert them.
    const bool per_tensor = !IsQuantized(b.type()) || (q.weight_bits() != 4 && !q.per_channel_weights());
    if (!values.elementwise() || !per_tensor || b.count() == 0) {
      SetParamFromFloat(static_cast<int>(i), FillValues(filler, b.shape(), seed, Describe()));
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

bool Layer::FillsPerTensorQuantized(int i) const {
  if (i >= static_cast<int>(pending_fill_.size()) || !pending_fill_[i]) return false;
  const quant::Quantizer& q = *blob_quantizers_.at(i);
  const std::string& type = pending_fill_[i]->type();
  return IsQuantized(blobs_.at(i)->type()) && q.weight_bits() != 4 && !q.per_channel_weights() &&
         type != "positive_unitball" && blobs_[i]->count() > 0;
}

void Layer::CopyParamValuesFrom(int i, Layer& src) {
  Blob& to = *blobs_.at(i);
  if (to.type() == DataType::kFloat32 && src.FillsPerTensorQuantized(i) &&
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

std::vector<quant::Quantizer*> Layer::quantizers() {
  std::vector<quant::Quantizer*> all;
  for (auto* list : {&bottom_quantizers_, &top_quantizers_, &blob_quantizers_})
    for (auto& q : *list) all.push_back(q.get());
  return all;
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
    if (b.type() == DataType::kFloat32 && (q.mode() == quant::QuantizerMode::kObserve ||
                                          q.mode() == quant::QuantizerMode::kPseudo))
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
