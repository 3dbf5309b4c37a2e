// layers/filler_values.cc — FillValues and the helpers of filler_values.h: pages mapped before
// they are written, the drawn values' range, per-channel weights drawn and quantized at once.
#include "layers/filler_values.h"

#include <mutex>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace mpcaffe {

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

namespace {

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

}  // namespace

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

std::vector<float> DrawChannelsQuantized(const ElementFiller& filler, size_t channels, size_t k,
                                         DataType type, void* out, float* real,
                                         std::pair<float, float>* range) {
  std::vector<float> scales(channels);
  const size_t size = SizeOf(type);
  auto* stored = static_cast<uint8_t*>(out);
  float lo = 0.0f, hi = 0.0f;
  std::mutex mutex;
  ParallelChunks(channels * k, [&](size_t begin, size_t end) {
    const size_t first = (begin + k - 1) / k, last = (end + k - 1) / k;  // rows starting here
    if (first >= last) return;
    PrefaultForWrite(stored + first * k * size, (last - first) * k * size);
    if (real) PrefaultForWrite(real + first * k, (last - first) * k * sizeof(float));
    std::unique_ptr<float[]> scratch(real ? nullptr : new float[k]);
    float l = 0.0f, h = 0.0f;
    for (size_t c = first; c < last; ++c) {
      float* v = real ? real + c * k : scratch.get();
      filler.Fill(c * k, (c + 1) * k, v);
      float row_lo = 0.0f, row_hi = 0.0f;  // ChooseWeightChannelParams' range: from 0, no NaN
      FoldRange(v, k, &row_lo, &row_hi);
      const quant::QuantParams p =
          quant::ChoosePerChannelQuantParams({row_lo}, {row_hi}, 0, type, /*symmetric=*/true);
      scales[c] = p.scale[0];
      quant::QuantizeTensor(v, k, p, stored + c * k * size, k);
      if (real) quant::DequantizeTensor(stored + c * k * size, k, p, v, k);
      l = std::min(l, row_lo);
      h = std::max(h, row_hi);
    }
    std::lock_guard<std::mutex> lock(mutex);
    lo = std::min(lo, l);
    hi = std::max(hi, h);
  });
  *range = {lo, hi};
  return scales;
}

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

}  // namespace mpcaffe
