// libdnn/tuner.cc — timing of GEMM and convolution configurations and BLAS libraries, winners
// stored in the cache's tuning table and looked up from it; the shape recorder.
#include "libdnn/tuner.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <sstream>

#include "cache/program_cache.h"
#include "libdnn/conv_families.h"
#include "libdnn/kernel_config.h"

namespace mpcaffe::libdnn {

namespace {

size_t Elements(int rows, int cols, bool trans, int ld) {
  return static_cast<size_t>(trans ? cols : rows) * ld;
}

/// Stores the winner of `family` for `signature` as "family:config".
bool Store(const Device& device, const std::string& family, const std::string& signature,
           const std::string& config, double ms) {
  auto store = cache::ActiveProgramCache();
  if (!store) return false;
  cache::TuningRecord r;
  r.device = cache::TuningDeviceKey(device.info());
  r.operation = family;
  r.signature = signature;
  r.parameters = KernelConfigText{family, config}.ToString();
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

/// The config text of the tuning record of `family` for `signature` ("family:config"): nothing
/// without a record, or when the record is not of that family.
std::optional<std::string> Lookup(const Device& device, const std::string& family,
                                  const std::string& signature) {
  auto store = cache::ActiveProgramCache();
  if (!store) return std::nullopt;
  const auto rec = store->GetTuning(cache::TuningDeviceKey(device.info()), family, signature);
  if (!rec) return std::nullopt;
  const std::optional<KernelConfigText> t = SplitKernelConfig(rec->parameters);
  if (!t || t->family != family) return std::nullopt;
  return t->config;
}

/// The override's config text of `family` parsed by `parse` (an Error naming the setting when
/// it does not parse); nothing without an override or when it says "off".
template <typename Config, typename Parse>
std::optional<Config> Forced(const std::string& family, const Parse& parse) {
  const std::optional<KernelConfigText> o = KernelConfigOverride(family);
  if (!o || o->off()) return std::nullopt;
  return parse(o->config, "MPCAFFE_KERNEL_CONFIG");
}

/// Whether MPCAFFE_KERNEL_CONFIG says "family:off".
bool ForcedOff(const std::string& family) {
  const std::optional<KernelConfigText> o = KernelConfigOverride(family);
  return o && o->off();
}

}  // namespace

GemmConfig ParseGemmConfig(const std::string& text, const std::string& where) {
  std::string why;
  if (auto c = GemmConfig::Parse(text, &why)) return *c;
  throw Error(where + ": gemm:" + text + ": " + why);
}

Chosen<GemmConfig> ChooseGemmConfig(const Device& device, const GemmDesc& desc) {
  Record(desc, &Recorded::gemms, "gemm");
  if (auto forced = Forced<GemmConfig>("gemm", ParseGemmConfig);
      forced && forced->Supports(desc, device.backend()))
    return {*forced, ConfigSource::kOverride};
  if (auto rec = Lookup(device, "gemm", desc.ToString()))
    if (auto tuned = GemmConfig::Parse(*rec); tuned && tuned->Supports(desc, device.backend()))
      return {*tuned, ConfigSource::kTuned};
  return {DefaultGemmConfig(device.info(), desc), ConfigSource::kDefault};
}

GemmConfig TunedGemmConfig(const Device& device, const GemmDesc& desc) {
  return ChooseGemmConfig(device, desc).config;
}

Chosen<ConvConfig> ChooseConvConfig(const Device& device, const ConvDesc& desc) {
  Record(desc, &Recorded::convs, "conv");
  auto parse = [](const std::string& text, const std::string& where) {
    const ConvConfig c = ParseFamilyConfig(ConvConfig::Schema(), "conv", text, where);
    c.Validate();
    return c;
  };
  if (auto forced = Forced<ConvConfig>("conv", parse); forced && forced->Supports(device.backend()))
    return {*forced, ConfigSource::kOverride};
  if (auto rec = Lookup(device, "conv", desc.ToString()))
    if (auto tuned = ParseConvConfig(*rec); tuned && tuned->Supports(device.backend()))
      return {*tuned, ConfigSource::kTuned};
  return {DefaultConvConfig(device.info(), desc), ConfigSource::kDefault};
}

ConvConfig TunedConvConfig(const Device& device, const ConvDesc& desc) {
  return ChooseConvConfig(device, desc).config;
}

const ConfigSchema<DepthwiseConfig>& DepthwiseConfig::Schema() {
  static const ConfigSchema<DepthwiseConfig> schema(
      "", {{"rows", &DepthwiseConfig::rows, ValueRange(1, 32)}});
  return schema;
}

std::string DepthwiseConfig::ToString() const { return Schema().Print(*this); }

bool DepthwiseOff() { return ForcedOff("conv_dw"); }

Chosen<int> ChooseDepthwiseRows(const Device& device, const ConvDesc& desc) {
  Record(desc, &Recorded::convs, "conv");
  auto parse = [](const std::string& text, const std::string& where) {
    return ParseFamilyConfig(DepthwiseConfig::Schema(), "conv_dw", text, where);
  };
  if (auto forced = Forced<DepthwiseConfig>("conv_dw", parse))
    return {forced->rows, ConfigSource::kOverride};
  if (auto rec = Lookup(device, "conv_dw", desc.ToString()))
    if (auto tuned = DepthwiseConfig::Schema().Parse(*rec)) return {tuned->rows, ConfigSource::kTuned};
  return {Convolution::DefaultDepthwiseRows(desc, TargetProfile::Of(device.info())),
          ConfigSource::kDefault};
}

int TunedDepthwiseRows(const Device& device, const ConvDesc& desc) {
  return ChooseDepthwiseRows(device, desc).config;
}

std::vector<int> DepthwiseRowCandidates(const ConvDesc& desc, const TargetProfile& profile) {
  std::vector<int> c{Convolution::DefaultDepthwiseRows(desc, profile)};
  for (int r : {1, 2, 4, 7, 8, 14, 16})
    if (r <= desc.out_h() && std::find(c.begin(), c.end(), r) == c.end()) c.push_back(r);
  return c;
}

std::optional<Convolution::PointwiseTile> ParsePointwiseTile(const std::string& text) {
  return Convolution::PointwiseTile::Schema().Parse(text);
}

Chosen<PointwiseChoice> ChoosePointwise(const Device& device, const ConvDesc& desc) {
  Record(desc, &Recorded::convs, "conv");
  if (ForcedOff("conv_pw")) return {std::nullopt, ConfigSource::kOverride};
  auto parse = [](const std::string& text, const std::string& where) {
    return ParseFamilyConfig(Convolution::PointwiseTile::Schema(), "conv_pw", text, where);
  };
  if (auto forced = Forced<Convolution::PointwiseTile>("conv_pw", parse);
      forced && Convolution::PointwiseApplies(desc, *forced))
    return {forced, ConfigSource::kOverride};
  if (auto rec = Lookup(device, "conv_pw", desc.ToString())) {
    if (*rec == "off") return {std::nullopt, ConfigSource::kTuned};
    if (auto t = ParsePointwiseTile(*rec); t && Convolution::PointwiseApplies(desc, *t))
      return {t, ConfigSource::kTuned};
  }
  return {Convolution::DefaultPointwiseTile(desc, TargetProfile::Of(device.info())),
          ConfigSource::kDefault};
}

Chosen<WinogradChoice> ChooseWinograd(const Device& device, const ConvDesc& desc) {
  Record(desc, &Recorded::convs, "conv");
  if (ForcedOff("conv_wino")) return {std::nullopt, ConfigSource::kOverride};
  auto parse = [](const std::string& text, const std::string& where) {
    return ParseFamilyConfig(WinogradConfig::Schema(), "conv_wino", text, where);
  };
  // A forced configuration applies where it fits the description (int8q: m 2, v 8).
  if (auto forced = Forced<WinogradConfig>("conv_wino", parse);
      forced && WinogradConfigFits(desc, *forced))
    return {forced, ConfigSource::kOverride};
  if (auto rec = Lookup(device, "conv_wino", desc.ToString())) {
    if (*rec == "off") return {std::nullopt, ConfigSource::kTuned};
    if (auto c = WinogradConfig::Schema().Parse(*rec); c && WinogradConfigFits(desc, *c))
      return {c, ConfigSource::kTuned};
  }
  return {DefaultRowFor(WinogradDefaults(), "conv_wino", TargetProfile::Of(device.info()), desc)
              .config,
          ConfigSource::kDefault};
}

PointwiseChoice TunedPointwise(const Device& device, const ConvDesc& desc) {
  return ChoosePointwise(device, desc).config;
}

std::vector<PointwiseChoice> PointwiseCandidates(const ConvDesc& desc,
                                                 const TargetProfile& profile) {
  std::vector<PointwiseChoice> c{Convolution::DefaultPointwiseTile(desc, profile), std::nullopt};
  std::vector<Convolution::PointwiseTile> tiles{{4, 2, 8},  {4, 1, 8},  {6, 2, 8},  {8, 1, 8},
                                                {4, 3, 8},  {2, 4, 8},  {8, 2, 8},  {3, 4, 8},
                                                {4, 1, 16}, {4, 2, 16}, {8, 1, 16}, {2, 2, 16},
                                                {8, 1, 16, 2, 64},  // int8q: one zip
                                                {8, 1, 8, 2, 1, 2}, {16, 1, 8, 2, 1, 2}};  // kx2
  if (profile.byte_quad_products)  // int8q's byte quads (vx 16); ob 8 keeps more work-items
    for (Convolution::PointwiseTile t : {Convolution::PointwiseTile{4, 1, 16, 4},
                                         {8, 1, 16, 4}, {12, 1, 16, 4}, {16, 1, 16, 4},
                                         {4, 2, 16, 4}, {8, 2, 16, 4}, {16, 1, 16, 4, 8}})
      tiles.push_back(t);
  if (profile.byte_tile_products)  // int8q's byte tiles: 16 channels by 16 or 32 pixels
    for (Convolution::PointwiseTile t : {Convolution::PointwiseTile{16, 1, 16, 64, 64},
                                         {16, 2, 16, 64, 64}})
      tiles.push_back(t);
  for (const Convolution::PointwiseTile& t : tiles)
    if (Convolution::PointwiseApplies(desc, t) && std::find(c.begin(), c.end(), t) == c.end())
      c.push_back(t);
  return c;
}

std::optional<ConvConfig> ParseConvConfig(const std::string& text) {
  const std::optional<ConvConfig> c = ConvConfig::Schema().Parse(text);
  if (!c) return std::nullopt;
  try {
    c->Validate();
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

void GemmOperands::PrepareWeights(Gemm& gemm) const {
  const GemmDesc& d = gemm.desc();
  if (!IsQuantized(d.type)) return;
  gemm.ComputeWeightSums(d.weights == WeightOperand::kA ? a : b, sums).Wait();
}

void GemmOperands::PrepareWeights(BlasGemm& gemm) const {
  if (gemm.libdnn()) PrepareWeights(*gemm.libdnn());
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

namespace {

/// Times `candidates` (the default first; the first `max_candidates` when > 0): `prepare(c)`
/// builds candidate c and returns its timer (minimum ms over n runs after a warm-up); each
/// candidate runs once, and `repeats` − 1 more times unless it was slower than `give_up` × the
/// best so far.
template <typename Config, typename Prepare>
TuneResult<Config> TimeCandidates(std::vector<Config> candidates, size_t max_candidates,
                                  double give_up, int repeats, Prepare&& prepare) {
  if (max_candidates > 0 && candidates.size() > max_candidates) candidates.resize(max_candidates);
  TuneResult<Config> result;
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Config& c = candidates[i];
    auto time = prepare(c);
    double ms = time(1);  // after a warm-up (PoCL specializes at first launch)
    if (ms < give_up * best && repeats > 1) ms = std::min(ms, time(repeats - 1));
    result.measured.emplace_back(c, ms);
    if (i == 0) result.default_ms = ms;
    if (ms < best) {
      best = ms;
      result.best = c;
    }
  }
  result.best_ms = best;
  return result;
}

}  // namespace

GemmTuneResult Tuner::TuneGemm(const GemmDesc& desc, double give_up, size_t max_candidates) {
  desc.Validate();
  GemmOperands ops(device_, desc);
  const GemmArgs args = ops.args();
  const GemmQuant quant = PlaceholderQuant(desc);
  GemmTuneResult result = TimeCandidates(
      GemmCandidates(device_.info(), desc), max_candidates, give_up, repeats_,
      [&](const GemmConfig& c) {
        auto gemm = std::make_shared<Gemm>(device_, desc, quant, c);
        ops.PrepareWeights(*gemm);
        return [gemm, args](int repeats) { return TimeMs([&] { return gemm->Run(args); }, repeats); };
      });
  result.stored = Store(device_, "gemm", desc.ToString(), result.best.ToString(), result.best_ms);
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
  if (d.residual) residual = zeros(d.output_count() * in);
  bias = zeros(size_t(d.out_channels) * 8);
  device.Finish();
}

ConvQuant PlaceholderConvQuant(const ConvDesc& desc) {
  ConvQuant quant;  // one multiplier: the time does not depend on its value
  quant.multiplier = {quant::QuantizeMultiplier(1.0 / 4096)};
  // Symmetric weight zero points, as the nets' int8 weights have: the form the nets run (byte
  // quads and tiles hold w − z_w only for those; a zero point of 0 on unsigned weights would
  // time the 16-bit pair form instead).
  quant.w_zero = {desc.type == DataType::kInt8Q && !desc.weights_signed ? 128 : 0};
  return quant;
}

namespace {

/// The timer of a prepared convolution on `ops` (weights set here): the minimum ms over n
/// forward passes after a warm-up, as TimeCandidates takes it.
std::function<double(int)> ConvTimer(std::shared_ptr<Convolution> conv, const ConvDesc& desc,
                                     const ConvOperands& ops) {
  conv->SetWeights(BufferRef(ops.weights.get(), 0));
  return [conv, &desc, &ops](int repeats) {
    return TimeMs(
        [&] {
          return conv->Forward(BufferRef(ops.input.get(), 0),
                               desc.bias ? BufferRef(ops.bias.get(), 0) : BufferRef(),
                               BufferRef(ops.output.get(), 0), nullptr,
                               desc.residual ? BufferRef(ops.residual.get(), 0) : BufferRef());
        },
        repeats);
  };
}

}  // namespace

double Tuner::TimeConv(const ConvDesc& desc, const ConvConfig& config, const ConvOperands& ops,
                       int repeats) {
  return ConvTimer(
      std::make_shared<Convolution>(device_, desc, PlaceholderConvQuant(desc), config),
                   desc, ops)(repeats < 1 ? repeats_ : repeats);
}

ConvTuneResult Tuner::TuneConv(const ConvDesc& desc, double give_up, size_t max_candidates) {
  desc.Validate();
  const ConvOperands ops(device_, desc);
  ConvTuneResult result = TimeCandidates(
      ConvConfig::Candidates(device_.info(), desc.type), max_candidates, give_up, repeats_,
      [&](const ConvConfig& c) {
        return [this, &desc, &ops, c](int repeats) { return TimeConv(desc, c, ops, repeats); };
      });
  result.stored = Store(device_, "conv", desc.ToString(), result.best.ToString(), result.best_ms);
  return result;
}

DepthwiseTuneResult Tuner::TuneDepthwise(const ConvDesc& desc, double give_up) {
  desc.Validate();
  if (!Convolution::IsDepthwise(desc))
    throw Error("tune: convolution " + desc.ToString() + " is not depthwise");
  const ConvOperands ops(device_, desc);
  const std::vector<int> candidates =
      DepthwiseRowCandidates(desc, TargetProfile::Of(device_.info()));
  const ConvQuant quant = PlaceholderConvQuant(desc);
  DepthwiseTuneResult result = TimeCandidates(candidates, 0, give_up, repeats_, [&](int rows) {
    return ConvTimer(
        std::make_shared<Convolution>(Convolution::Depthwise(device_, desc, quant, rows)), desc,
        ops);
  });
  result.stored = Store(device_, "conv_dw", desc.ToString(),
                        DepthwiseConfig{result.best}.ToString(), result.best_ms);
  return result;
}

PointwiseTuneResult Tuner::TunePointwise(const ConvDesc& desc, double give_up) {
  desc.Validate();
  if (!Convolution::PointwiseApplies(desc, Convolution::DefaultPointwiseTile(desc)))
    throw Error("tune: convolution " + desc.ToString() +
                " has no pointwise kernel (fp32 1×1 unpadded one-group convolutions; on "
                "OpenCL also one-group convolutions of few input channels)");
  const ConvOperands ops(device_, desc);
  const ConvQuant quant = PlaceholderConvQuant(desc);
  PointwiseTuneResult result = TimeCandidates(
      PointwiseCandidates(desc, TargetProfile::Of(device_.info())), 0, give_up, repeats_,
      [&](const PointwiseChoice& choice) {
        return ConvTimer(std::make_shared<Convolution>(
                             choice ? Convolution::Pointwise(device_, desc, *choice, quant)
                                    : Convolution::WithoutPointwise(device_, desc, quant)),
                         desc, ops);
      });
  result.stored = Store(device_, "conv_pw", desc.ToString(),
                        result.best ? result.best->ToString() : "off", result.best_ms);
  return result;
}

WinogradTuneResult Tuner::TuneWinograd(const ConvDesc& desc, double give_up) {
  desc.Validate();
  if (!WinogradApplies(desc))
    throw Error("tune: convolution " + desc.ToString() +
                " has no Winograd kernel (fp32 or int8q, one group, 3×3 window, stride 1, "
                "dilation 1)");
  const ConvOperands ops(device_, desc);
  // The default first (the direct kernel where the defaults say off), then the other.
  const WinogradChoice first =
      DefaultRowFor(WinogradDefaults(), "conv_wino", TargetProfile::Of(device_.info()), desc)
          .config;
  std::vector<WinogradChoice> candidates{first};
  for (const WinogradConfig& c : WinogradCandidates(first.value_or(WinogradConfig{}), desc.type))
    if (!(first && c == *first)) candidates.push_back(c);
  if (first) candidates.insert(candidates.begin() + 1, std::nullopt);
  const ConvQuant quant = PlaceholderConvQuant(desc);
  WinogradTuneResult result = TimeCandidates(
      candidates, 0, give_up, repeats_, [&](const WinogradChoice& choice) {
        return ConvTimer(std::make_shared<Convolution>(
                             choice ? Convolution::Winograd(device_, desc, *choice, quant)
                                    : Convolution::WithoutWinograd(device_, desc, quant)),
                         desc, ops);
      });
  result.stored = Store(device_, "conv_wino", desc.ToString(),
                        result.best ? result.best->ToString() : "off", result.best_ms);
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
    ops.PrepareWeights(gemm);
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
