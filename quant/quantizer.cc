// quant/quantizer.cc — Quantizer modes (observe on the device, pseudo-quantize in place,
// parameters and conversions for active low-precision kernels) and their kernel texts.
#include "quant/quantizer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "codegen/elementwise.h"
#include "device/error.h"

namespace mpcaffe::quant {

namespace {

constexpr uint32_t kPlusInfBits = 0x7f800000u;
constexpr uint32_t kMinusInfBits = 0xff800000u;

float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

const char* QuantizerModeName(QuantizerMode mode) {
  switch (mode) {
    case QuantizerMode::kPassive:
      return "passive";
    case QuantizerMode::kObserve:
      return "observe";
    case QuantizerMode::kPseudo:
      return "pseudo";
    case QuantizerMode::kActive:
      return "active";
  }
  return "unknown";
}

std::string ObserveRangeSource(const KernelTarget& target) {
  KernelWriter w(target, "observe_range");
  w.Define("MP_OBSERVE_LOCAL", std::to_string(kObserveLocalSize));
  w.Kernel(kObserveRangeKernel)
      .Value("int", "n")
      .In("float", "x")
      .Out("mp_u32", "range")
      .Body(R"(  $shared float group_min[MP_OBSERVE_LOCAL];
  $shared float group_max[MP_OBSERVE_LOCAL];
  float lo = $uint_as_float(0x7f800000u);
  float hi = $uint_as_float(0xff800000u);
  $loop(i, n) {
    float v = x[i];
    if (v == v) {  // NaN is not a value to observe
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
  }
  const int t = $local_id(0);
  group_min[t] = lo;
  group_max[t] = hi;
  $barrier;
  for (int s = MP_OBSERVE_LOCAL / 2; s > 0; s >>= 1) {
    if (t < s) {
      group_min[t] = group_min[t + s] < group_min[t] ? group_min[t + s] : group_min[t];
      group_max[t] = group_max[t + s] > group_max[t] ? group_max[t + s] : group_max[t];
    }
    $barrier;
  }
  if (t == 0) {
    // Fold the group's range into the running range: compare-and-swap on the float bits.
    // The first read is atomic too (a CAS of 0 by 0 changes nothing and returns the word):
    // a plain load races with other groups' CAS (Oclgrind --data-races reported it).
    const float gmin = group_min[0], gmax = group_max[0];
    mp_u32 seen = $atomic_cas_u32(&range[0], 0u, 0u);
    while ($uint_as_float(seen) > gmin) {
      const mp_u32 old = seen;
      seen = $atomic_cas_u32(&range[0], old, $float_as_uint(gmin));
      if (seen == old) break;
    }
    seen = $atomic_cas_u32(&range[1], 0u, 0u);
    while ($uint_as_float(seen) < gmax) {
      const mp_u32 old = seen;
      seen = $atomic_cas_u32(&range[1], old, $float_as_uint(gmax));
      if (seen == old) break;
    }
  }
)");
  return w.Source();
}

std::string PseudoKernelName(DataType type) { return std::string("pseudo_") + Name(type); }

std::string PseudoSource(const KernelTarget& target, DataType type) {
  KernelWriter w(target, "pseudo_quant");
  auto& k = w.Kernel(PseudoKernelName(type))
                .Value("int", "n")
                .Out("float", "x")
                .Value("float", "scale")
                .Value("int", "zero_point");
  if (IsQuantized(type)) {
    w.AddType("Qtype", type);
    // Exactly QuantizeValue then DequantizeValue (quant_params.h).
    k.Body(R"(  $loop(i, n) {
    float v = x[i];
    int q = zero_point;
    if (v == v) {
      float r = $rint(v / scale) + (float)zero_point;
      r = r <= (float)Qtype_QMIN ? (float)Qtype_QMIN : r;
      r = r >= (float)Qtype_QMAX ? (float)Qtype_QMAX : r;
      q = (int)r;
    }
    x[i] = scale * (float)(q - zero_point);
  }
)");
  } else if (type == DataType::kFloat16) {
    w.AddType("Htype", DataType::kFloat16);
    // Round to the nearest half (even on ties) and back through a one-element private word,
    // so the writer's load/store spelling (vstore_half_rte, __float2half_rn, ...) is used. The
    // word is 16-bit storage viewed as half: OpenCL without cl_khr_fp16 allows half pointers
    // but no half variables.
    k.Body(R"(  $loop(i, n) {
    mp_u16 h[1];
    Htype_STORE((Htype*)h, 0, x[i]);
    x[i] = (float)Htype_LOAD((const Htype*)h, 0);
  }
)");
  } else {
    k.Body(R"(  // fp32 is its own grid: nothing to snap.
  $loop(i, n) {
    x[i] = x[i];
  }
)");
  }
  return w.Source();
}

namespace {
std::atomic<uint64_t> g_state_generation{0};
}  // namespace

uint64_t QuantizerStateGeneration() { return g_state_generation.load(std::memory_order_relaxed); }

void Quantizer::Changed() { g_state_generation.fetch_add(1, std::memory_order_relaxed); }

Quantizer::Quantizer(Device& device, std::string name, int64_t zone)
    : device_(&device), name_(std::move(name)), zone_(zone) {
  Changed();
}

Kernel Quantizer::GetKernel(const std::string& source, const std::string& kernel_name) {
  return device_->GetProgram(source, "", ProgramHints::OneDimensional())->GetKernel(kernel_name);
}

void Quantizer::EnsureRangeBuffer() {
  if (range_) return;
  range_ = device_->Alloc<uint32_t>(2);
  const uint32_t init[2] = {kPlusInfBits, kMinusInfBits};
  device_->Write(range_, init, 2);
}

void Quantizer::Forward(const vptr<float>& data, size_t n) {
  switch (mode_) {
    case QuantizerMode::kObserve:
      Observe(data, n);
      break;
    case QuantizerMode::kPseudo:
      Pseudo(data, n);
      break;
    case QuantizerMode::kPassive:
    case QuantizerMode::kActive:
      break;
  }
}

void Quantizer::Observe(const vptr<float>& data, size_t n) {
  EnsureRangeBuffer();
  device_observed_ = true;
  Changed();
  if (n == 0) return;
  if (n > static_cast<size_t>(INT32_MAX))
    throw Error("Quantizer '" + name_ + "': Observe of " + std::to_string(n) +
                " elements exceeds the int index range");
  Kernel k = GetKernel(ObserveRangeSource(KernelTarget::Of(*device_)), kObserveRangeKernel);
  k.Arg(static_cast<int32_t>(n)).Arg(data).Arg(range_);
  const size_t groups =
      std::min<size_t>((n + kObserveLocalSize - 1) / kObserveLocalSize,
                       std::max<size_t>(16, 4 * std::max(1, device_->info().compute_units)));
  k.Launch({groups * kObserveLocalSize, 1, 1}, {kObserveLocalSize, 1, 1});
}

void Quantizer::Pseudo(const vptr<float>& data, size_t n) {
  if (pseudo_reset_observed_) ResetObserved();
  Observe(data, n);
  if (n == 0 || pseudo_target_type_ == DataType::kFloat32) return;
  float scale = 1.0f;
  int32_t zero_point = 0;
  if (IsQuantized(pseudo_target_type_)) {
    double lo, hi;
    ReadRange(&lo, &hi);
    if (lo > hi) return;  // only NaN seen: nothing to build a grid from
    const QuantParams p = ChooseQuantParams(lo, hi, pseudo_target_type_, symmetric_);
    scale = p.scale[0];
    zero_point = p.zero_point[0];
  }
  Kernel k = GetKernel(PseudoSource(KernelTarget::Of(*device_), pseudo_target_type_),
                       PseudoKernelName(pseudo_target_type_));
  k.Arg(static_cast<int32_t>(n)).Arg(data).Arg(scale).Arg(zero_point);
  k.Launch1D(n);
}

void Quantizer::ReadRange(double* min, double* max) {
  *min = loaded_min_;
  *max = loaded_max_;
  if (!device_observed_) return;
  uint32_t bits[2];
  device_->Read(range_, bits, 2);
  const double dmin = BitsToFloat(bits[0]), dmax = BitsToFloat(bits[1]);
  if (dmin > dmax) return;  // the device saw no value (all NaN or empty)
  if (loaded_min_ > loaded_max_) {
    *min = dmin;
    *max = dmax;
  } else {
    *min = std::min(loaded_min_, dmin);
    *max = std::max(loaded_max_, dmax);
  }
}

bool Quantizer::has_observed() {
  double lo, hi;
  ReadRange(&lo, &hi);
  return lo <= hi;
}

double Quantizer::observed_min() {
  double lo, hi;
  ReadRange(&lo, &hi);
  if (lo > hi) throw Error("Quantizer '" + name_ + "': no range observed yet");
  return lo;
}

double Quantizer::observed_max() {
  double lo, hi;
  ReadRange(&lo, &hi);
  if (lo > hi) throw Error("Quantizer '" + name_ + "': no range observed yet");
  return hi;
}

void Quantizer::ResetObserved() {
  loaded_min_ = 0.0;
  loaded_max_ = -1.0;
  if (range_) {
    const uint32_t init[2] = {kPlusInfBits, kMinusInfBits};
    device_->Write(range_, init, 2);
  }
  device_observed_ = false;
  Changed();
}

void Quantizer::SetObserved(double min, double max) {
  ResetObserved();
  loaded_min_ = min;
  loaded_max_ = max;
  Changed();
}

void Quantizer::SetInputRange(double min, double max) {
  has_in_ = true;
  min_in_ = min;
  max_in_ = max;
  Changed();
}

void Quantizer::SetOutputRange(double min, double max) {
  has_out_ = true;
  min_out_ = min;
  max_out_ = max;
  Changed();
}

QuantParams Quantizer::ObservedParams(DataType type) {
  double lo, hi;
  ReadRange(&lo, &hi);
  if (lo > hi)
    throw Error("Quantizer '" + name_ + "': parameters for " + Name(type) +
                " need a range, and none was observed or loaded");
  return ChooseQuantParams(lo, hi, type, symmetric_);
}

QuantParams Quantizer::InputParams() {
  if (!IsQuantized(input_type_))
    throw Error("Quantizer '" + name_ + "': input type " + Name(input_type_) +
                " has no quantization parameters");
  return has_in_ ? ChooseQuantParams(min_in_, max_in_, input_type_, symmetric_)
                 : ObservedParams(input_type_);
}

QuantParams Quantizer::OutputParams() {
  if (!IsQuantized(output_type_))
    throw Error("Quantizer '" + name_ + "': output type " + Name(output_type_) +
                " has no quantization parameters");
  return has_out_ ? ChooseQuantParams(min_out_, max_out_, output_type_, symmetric_)
                  : ObservedParams(output_type_);
}

void Quantizer::CheckConvertTypes(size_t x_bytes, size_t y_bytes) const {
  if (x_bytes != SizeOf(input_type_) || y_bytes != SizeOf(output_type_))
    throw Error("Quantizer '" + name_ + "': Convert from " + Name(input_type_) + " to " +
                Name(output_type_) + " given buffers of " + std::to_string(x_bytes) + "- and " +
                std::to_string(y_bytes) + "-byte elements");
}

Kernel Quantizer::ConvertKernel() {
  return GetKernel(ConvertSource(KernelTarget::Of(*device_), input_type_, output_type_),
                   ConvertKernelName(input_type_, output_type_));
}

void Quantizer::SetConvertArgs(Kernel& k) {
  float x_scale = 1.0f, y_scale = 1.0f;
  int32_t x_zero = 0, y_zero = 0;
  FixedPointMultiplier m;
  if (IsQuantized(input_type_)) {
    const QuantParams p = InputParams();
    x_scale = p.scale[0];
    x_zero = p.zero_point[0];
  }
  if (IsQuantized(output_type_)) {
    const QuantParams p = OutputParams();
    y_scale = p.scale[0];
    y_zero = p.zero_point[0];
  }
  if (IsQuantized(input_type_) && IsQuantized(output_type_))
    m = RescaleMultiplier(x_scale, y_scale);
  k.Arg(x_scale).Arg(x_zero).Arg(y_scale).Arg(y_zero).Arg(m.multiplier).Arg(m.shift);
}

}  // namespace mpcaffe::quant
