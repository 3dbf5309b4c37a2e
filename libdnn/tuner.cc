// libdnn/tuner.cc — timing of GEMM and convolution configurations and BLAS libraries, winners
// stored in the cache's tuning table and looked up from it; the shape recorder.
#include "libdnn/tuner.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <sstream>

#include "cache/program_cache.h"

namespace mpcaffe::libdnn {

namespace {

size_t Elements(int rows, int cols, bool trans, int ld) {
  return static_cast<size_t>(trans ? cols : rows) * ld;
}

bool Store(const Device& device, const std::string& operation, const std::string& signature,
           const std::string& parameters, double ms) {
  auto store = cache::ActiveProgramCache();
  if (!store) return false;
  cache::TuningRecord r;
  r.device = cache::TuningDeviceKey(device.info());
  r.operation = operation;
  r.signature = signature;
  r.parameters = parameters;
  r.time_ms = ms;
  return store->PutTuning(r);
}

/// The active ShapeRecorder's lists (signatures keep each shape once).
struct Recorded {
  std::mutex mutex;
  bool active = false;
  std::vector<std::string> seen;
  std::vector<GemmDesc> gemms;
  std::vector<ConvDesc> convs;
};

Recorded& Recording() {
  static Recorded r;
  return r;
}

template <typename Desc>
void Record(const Desc& desc, std::vector<Desc> Recorded::*list, const char* kind) {
  Recorded& r = Recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.active) return;
  const std::string key = std::string(kind) + " " + desc.ToString();
  if (std::find(r.seen.begin(), r.seen.end(), key) != r.seen.end()) return;
  r.seen.push_back(key);
  (r.*list).push_back(desc);
}

std::optional<cache::TuningRecord> Lookup(const Device& device, const char* operation,
                                          const std::string& signature) {
  auto store = cache::ActiveProgramCache();
  if (!store) return std::nullopt;
  return store->GetTuning(cache::TuningDeviceKey(device.info()), operation, signature);
}

}  // namespace

GemmConfig TunedGemmConfig(const Device& device, const GemmDesc& desc) {
  Record(desc, &Recorded::gemms, "gemm");
  if (auto rec = Lookup(device, "gemm", desc.ToString()))
    if (auto tuned = GemmConfig::Parse(rec->parameters);
        tuned && tuned->Supports(desc, device.backend()))
      return *tuned;
  return DefaultGemmConfig(device.info(), desc);
}

ConvConfig TunedConvConfig(const Device& device, const ConvDesc& desc) {
  Record(desc, &Recorded::convs, "conv");
  if (auto rec = Lookup(device, "conv", desc.ToString()))
    if (auto tuned = ParseConvConfig(rec->parameters); tuned && tuned->Supports(device.backend()))
      return *tuned;
  return DefaultConvConfig(device.info(), desc.type);
}

std::optional<ConvConfig> ParseConvConfig(const std::string& text) {
  ConvConfig c;
  int used = 0;
  if (std::sscanf(text.c_str(), "l%d oc%d px%d v%d%n", &c.lanes, &c.oc_per_item, &c.px_per_item,
                  &c.vw, &used) != 4)
    return std::nullopt;
  // Then nothing, or " k4" (ConvConfig::ToString writes kp only when it is 4).
  const std::string rest = text.substr(size_t(used));
  if (rest == " k4")
    c.kp = 4;
  else if (!rest.empty())
    return std::nullopt;
  try {
    c.Validate();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return c;
}

ShapeRecorder::ShapeRecorder() {
  Recorded& r = Recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.active) throw Error("ShapeRecorder: another recorder is active");
  r.active = true;
  r.seen.clear();
  r.gemms.clear();
  r.convs.clear();
}

ShapeRecorder::~ShapeRecorder() {
  Recorded& r = Recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.active = false;
}

std::vector<GemmDesc> ShapeRecorder::gemms() const {
  Recorded& r = Recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.gemms;
}

std::vector<ConvDesc> ShapeRecorder::convs() const {
  Recorded& r = Recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.convs;
}

double TimeMs(const std::function<Event()>& run, int repeats) {
  // Wall clock from enqueue to completion: a library may enqueue several kernels (CLBlast's
  // indirect GEMM pads and copies) and return the event of the last one only.
  run().Wait();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run().Wait();
    best = std::min(
        best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count());
  }
  return best;
}

GemmOperands::GemmOperands(Device& device, const GemmDesc& d) {
  const size_t in = SizeOf(d.type);
  auto zeros = [&](size_t bytes) {
    vptr<uint8_t> p = device.Alloc<uint8_t>(std::max<size_t>(bytes, 1));
    device.Zero(p.mem.get(), 0, p.mem->bytes());
    return p;
  };
  a = zeros(Elements(d.M, d.K, d.trans_a, d.lda_or_packed()) * in);
  b = zeros(Elements(d.K, d.N, d.trans_b, d.ldb_or_packed()) * in);
  c = zeros(static_cast<size_t>(d.M) * d.ldc_or_packed() * SizeOf(d.out_type));
  bias = zeros(static_cast<size_t>(d.channels()) * 8);
  sums = zeros(static_cast<size_t>(d.channels()) * 8);
  device.Finish();
}

GemmArgs GemmOperands::args() const {
  GemmArgs g;
  g.a = a;
  g.b = b;
  g.c = c;
  g.bias = bias;
  g.weight_sums = sums;
  return g;
}

GemmQuant PlaceholderQuant(const GemmDesc& d) {
  GemmQuant q;
  const size_t n = d.per_channel ? d.channels() : 1;
  q.multiplier.assign(n, quant::QuantizeMultiplier(1.0 / 4096));
  q.scale.assign(n, 1.0f / 4096);
  return q;
}

Tuner::Tuner(Device& device, int repeats) : device_(device), repeats_(std::max(1, repeats)) {}

double Tuner::Time(BlasGemm& gemm, const GemmArgs& args) {
  return TimeMs([&] { return gemm.Run(args); }, repeats_);
}

GemmTuneResult Tuner::TuneGemm(const GemmDesc& desc, double give_up, size_t max_candidates) {
  desc.Validate();
  GemmOperands ops(device_, desc);
  const GemmArgs args = ops.args();
  const GemmQuant quant = PlaceholderQuant(desc);
  GemmTuneResult result;
  std::vector<GemmConfig> candidates = GemmCandidates(device_.info(), desc);
  if (max_candidates > 0 && candidates.size() > max_candidates) candidates.resize(max_candidates);
  double best = std::numeric_limits<double>::infinity();
  for (const GemmConfig& c : candidates) {
    Gemm gemm(device_, desc, quant, c);
    auto run = [&] { return gemm.Run(args); };
    double ms = TimeMs(run, 1);  // after a warm-up (PoCL specializes at first launch)
    if (ms < give_up * best && repeats_ > 1) ms = std::min(ms, TimeMs(run, repeats_ - 1));
    result.measured.emplace_back(c, ms);
    if (&c == &candidates.front()) result.default_ms = ms;
    if (ms < best) {
      best = ms;
      result.best = c;
    }
  }
  result.best_ms = best;
  result.stored = Store(device_, "gemm", desc.ToString(), result.best.ToString(), best);
  return result;
}

ConvOperands::ConvOperands(Device& device, const ConvDesc& d) {
  const size_t in = SizeOf(d.type);
  auto zeros = [&](size_t bytes) {
    auto m = device.Allocate(std::max<size_t>(bytes, 1));
    device.Zero(m.get(), 0, m->bytes());
    return m;
  };
  input = zeros(d.input_count() * in);
  weights = zeros(d.weight_count() * in);
  output = zeros(d.output_count() * in);
  bias = zeros(size_t(d.out_channels) * 8);
  device.Finish();
}

ConvQuant PlaceholderConvQuant() {
  ConvQuant quant;  // one multiplier: the time does not depend on its value
  quant.multiplier = {quant::QuantizeMultiplier(1.0 / 4096)};
  return quant;
}

double Tuner::TimeConv(const ConvDesc& desc, const ConvConfig& config, const ConvOperands& ops,
                       int repeats) {
  Convolution conv(device_, desc, PlaceholderConvQuant(), config);
  conv.SetWeights(BufferRef(ops.weights.get(), 0));
  auto run = [&] {
    return conv.Forward(BufferRef(ops.input.get(), 0),
                        desc.bias ? BufferRef(ops.bias.get(), 0) : BufferRef(),
                        BufferRef(ops.output.get(), 0));
  };
  return TimeMs(run, repeats < 1 ? repeats_ : repeats);
}

ConvTuneResult Tuner::TuneConv(const ConvDesc& desc, double give_up, size_t max_candidates) {
  desc.Validate();
  const ConvOperands ops(device_, desc);
  ConvTuneResult result;
  std::vector<ConvConfig> candidates = ConvConfig::Candidates(device_.info(), desc.type);
  if (max_candidates > 0 && candidates.size() > max_candidates) candidates.resize(max_candidates);
  double best = std::numeric_limits<double>::infinity();
  for (const ConvConfig& c : candidates) {
    double ms = TimeConv(desc, c, ops, 1);  // after a warm-up (PoCL specializes at first launch)
    if (ms < give_up * best && repeats_ > 1) ms = std::min(ms, TimeConv(desc, c, ops, repeats_ - 1));
    result.measured.emplace_back(c, ms);
    if (&c == &candidates.front()) result.default_ms = ms;
    if (ms < best) {
      best = ms;
      result.best = c;
    }
  }
  result.best_ms = best;
  result.stored = Store(device_, "conv", desc.ToString(), result.best.ToString(), best);
  return result;
}

BlasTuneResult Tuner::TuneBlas(const GemmDesc& desc) {
  GemmOperands ops(device_, desc);
  GemmArgs args = ops.args();
  const GemmQuant quant = PlaceholderQuant(desc);
  BlasTuneResult result;
  double best = std::numeric_limits<double>::infinity();
  for (BlasImpl impl : {BlasImpl::kLibDNN, BlasImpl::kCLBlast, BlasImpl::kCuBLAS}) {
    if (!Available(impl, device_, desc)) continue;
    BlasGemm gemm(device_, desc, quant, impl);
    const double ms = Time(gemm, args);
    result.measured.emplace_back(impl, ms);
    if (ms < best) {
      best = ms;
      result.best = impl;
    }
  }
  result.stored = Store(device_, "blas_gemm", desc.ToString(), BlasImplName(result.best), best);
  return result;
}

}  // namespace mpcaffe::libdnn
