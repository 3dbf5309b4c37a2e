// libdnn/gemm_config.cc — GEMM kernel parameters: their text form, what each supports, and the
// tuner's candidate set (the defaults per device class: gemm_defaults.cc).
#include "libdnn/gemm_config.h"

#include <sstream>

#include "libdnn/gemm.h"
#include "libdnn/gemm_internal.h"

namespace mpcaffe::libdnn {

namespace gemm_internal {

bool DotLayout(const GemmDesc& d) {
  return !d.trans_a && (d.trans_b || (d.N == 1 && d.ldb_or_packed() == 1));
}

GemmConfig Tile(GemmConfig::Algorithm algorithm, int tm, int tn, int vw, int wg, int mf, int kp,
                int ku) {
  GemmConfig c;
  c.algorithm = algorithm;
  c.tm = tm;
  c.tn = tn;
  c.vw = vw;
  c.wg = wg;
  c.mf = mf;
  c.kp = kp;
  c.ku = ku;
  return c;
}

bool Int4DotLayout(const GemmDesc& desc) {
  return DotLayout(desc) && (desc.weights == WeightOperand::kB || desc.N == 1);
}

}  // namespace gemm_internal

namespace {

using gemm_internal::DotLayout;
using gemm_internal::Int4DotLayout;
using gemm_internal::kOuterTile;
using gemm_internal::Tile;

std::vector<GemmConfig> Int4Candidates() {
  std::vector<GemmConfig> out;
  for (auto [tm, tn] : {std::pair{4, 1}, {4, 2}, {6, 2}, {8, 1}, {2, 2}, {3, 3}, {2, 4}, {3, 4},
                        {2, 6}, {4, 3}, {4, 4}})
    for (int mf : {0, 1}) out.push_back(Tile(kOuterTile, tm, tn, 8, 1, mf, GemmConfig::kU8S4));
  for (int vw : {8, 16})  // byte pairs, byte quads (gemm_int4.cc)
    for (auto [tm, tn] : {std::pair{1, 1}, {1, 4}, {4, 1}, {2, 2}, {8, 1}, {1, 8}, {4, 2}, {4, 4}})
      out.push_back(Tile(GemmConfig::Algorithm::kDot, tm, tn, vw, 1, 0, GemmConfig::kU8S4));
  return out;
}

/// Scalar work-items (vw = 1) in work-groups of 8–64 along N (mf = 0: dimension 0 walks the
/// N tiles, so neighbouring work-items own neighbouring columns of C and share their rows of
/// op(A)), each computing a small tm × tn block. For OpenCL CPU compilers that vectorise
/// across work-items, as Intel's CPU runtime does (it packs 8 or 16 work-items of dimension
/// 0 into SIMD lanes, like a GPU warp): op(B) rows become contiguous vector loads, op(A)
/// values uniform broadcasts. PoCL's work-item loops do not vectorise such scalar code
/// (docs/BENCHMARKS.md, kernel design), so it keeps its explicit-vector default; the Tuner
/// decides per device. Work-groups wider than N are left out (their lanes would idle). On
/// Intel's CPU runtime the vw = 8/16 tiles still won every AlexNet shape (docs/BENCHMARKS.md,
/// "Default configurations"): the kernel's per-work-item edge branch in N is divergent across
/// work-items, so such a compiler may run both K loops masked.
template <typename Add>
void AddWorkItemPerOutputTiles(const GemmDesc& desc, Add&& add) {
  for (int wg : {8, 16, 32, 64}) {
    if (wg > desc.N) continue;
    for (auto [tm, tn] : {std::pair{1, 1}, {2, 1}, {4, 1}, {8, 1}, {4, 4}})
      add(Tile(kOuterTile, tm, tn, 1, wg, 0));
  }
}

}  // namespace

const ConfigSchema<GemmConfig>& GemmConfig::Schema() {
  static const ConfigSchema<GemmConfig> schema(
      "=", {{"tm", &GemmConfig::tm, ValueRange(1, 16)},
            {"tn", &GemmConfig::tn, ValueRange(1, 16)},
            {"vw", &GemmConfig::vw, {1, 2, 4, 8, 16}},
            {"wg", &GemmConfig::wg, ValueRange(1, 1024)},
            {"ku", &GemmConfig::ku, {1, 2, 4}, std::nullopt, true, {1, 2}},
            {"mf", &GemmConfig::mf, {0, 1}, std::nullopt, true, {0, 1}},
            {"kp", &GemmConfig::kp, {kOneK, kPairs, kDot4, kU8S4}, kOneK},
            {"lm", &GemmConfig::lm, {0, 1}, 0}});
  return schema;
}

std::string GemmConfig::ToString() const {
  return std::string(algorithm == Algorithm::kOuter ? "outer " : "dot ") + Schema().Print(*this);
}

std::optional<GemmConfig> GemmConfig::Parse(const std::string& text, std::string* why) {
  const size_t space = text.find(' ');
  const std::string word = text.substr(0, space);
  GemmConfig c;
  if (word == "outer")
    c.algorithm = Algorithm::kOuter;
  else if (word == "dot")
    c.algorithm = Algorithm::kDot;
  else {
    if (why) *why = "the first word '" + word + "' is neither outer nor dot";
    return std::nullopt;
  }
  return Schema().Parse(space == std::string::npos ? "" : text.substr(space + 1), c, why);
}

bool GemmConfig::Supports(const GemmDesc& desc, Backend backend) const {
  if (algorithm == Algorithm::kDot && !DotLayout(desc)) return false;
  // kp = 2: the outer tile's k pairs, or the dot tile's 16 k per step (8 lanes, no local tile);
  // int16q splits its activations into bytes in the dot tile only, 16 k per step in 8 lanes or
  // 32 in 16 (the byte quads' helper row, gemm_quads.cc).
  const bool pair_lanes =
      vw == 8 || (vw == 16 && desc.type == DataType::kInt16Q && algorithm == Algorithm::kDot);
  if (kp == GemmConfig::kPairs &&
      ((desc.type != DataType::kInt8Q && desc.type != DataType::kInt16Q) || !pair_lanes ||
       (algorithm == Algorithm::kDot && lm != 0) ||
       (desc.type == DataType::kInt16Q && algorithm != Algorithm::kDot)))
    return false;
  if (kp == GemmConfig::kU8S4 &&
      (desc.weight_bits != 4 || (vw != 8 && (vw != 16 || algorithm != Algorithm::kDot)) ||
       lm != 0 ||
       (algorithm == Algorithm::kOuter && desc.weights != WeightOperand::kA) ||
       (algorithm == Algorithm::kDot && !Int4DotLayout(desc))))
    return false;
  // kp = 4: 4-way dot products in scalar lanes (the outer tile), or byte quads in 16 lanes: the
  // dot tile's 64 k per step, the outer tile's 4 k of 16 columns (weights A, neither operand
  // transposed, N ≥ 16).
  if (kp == GemmConfig::kDot4 &&
      (desc.type != DataType::kInt8Q || lm != 0 || (vw != 1 && vw != 16) ||
       (algorithm == Algorithm::kDot && vw != 16) ||
       (algorithm == Algorithm::kOuter && vw == 16 &&
        (desc.weights != WeightOperand::kA || desc.trans_a || desc.trans_b || desc.N < 16))))
    return false;
  if (lm == 1) {
    // Staging needs the outer product's one-k step (kp = 2 interleaves k pairs from global
    // memory) and a 2-D split of wg.
    if (algorithm != Algorithm::kOuter || kp != GemmConfig::kOneK || (wg & (wg - 1)) != 0) return false;
    // 32 KiB: the OpenCL minimum for a full-profile device, under CUDA's 48 KiB static limit.
    if (LocalBytes(desc) > 32 * 1024) return false;
  }
  return true;
}

int GemmConfig::group_n() const {
  if (lm != 1) return wg;
  int n = 1;
  while (n * n < wg) n *= 2;
  return std::max(1, std::min(n, wg));
}

size_t GemmConfig::LocalBytes(const GemmDesc& desc) const {
  if (lm != 1) return 0;
  const size_t cs = TraitsOf(desc.type).acc_bytes();  // float, int or 64-bit integers
  const int rows = group_m() * tm, cols = group_n() * cols_per_item();
  return cs * kLocalK * (LocalStrideA(desc, rows) + LocalStrideB(desc, cols));
}

int GemmConfig::LocalStrideA(const GemmDesc& desc, int rows) { return rows + !desc.trans_a; }
int GemmConfig::LocalStrideB(const GemmDesc& desc, int cols) { return cols + desc.trans_b; }

bool GemmConfig::operator==(const GemmConfig& o) const {
  return algorithm == o.algorithm && Schema().Equal(*this, o);
}

const GemmFamily& GemmForwardFamily() {
  static const GemmFamily family = {
      "gemm", [](const GemmDesc&, const TargetProfile&) { return true; }, GemmConfig::Parse,
      GemmConfig::Schema, GemmDefaults};
  return family;
}

std::vector<GemmConfig> GemmCandidates(const DeviceInfo& device, const GemmDesc& desc) {
  const Backend backend = device.backend;
  std::vector<GemmConfig> out;
  auto add = [&](const GemmConfig& c) {
    if (!c.Supports(desc, backend)) return;
    // Within this device's local memory and work-group size (when it reports them).
    if (c.lm == 1 && ((device.local_mem_bytes && c.LocalBytes(desc) > device.local_mem_bytes) ||
                      (device.max_work_group_size && size_t(c.wg) > device.max_work_group_size)))
      return;
    for (const auto& seen : out)
      if (seen == c) return;
    out.push_back(c);
  };
  const GemmConfig base = DefaultGemmConfig(device, desc);
  add(base);
  // 4-bit weights on OpenCL CPUs and on CUDA (KernelHelper::kBytePairProduct16 has both
  // dialects): the byte-pair tiles, then every int8 candidate (which run on the weights unpacked
  // to bytes). CUDA's default stays the unpacked int8 with dp4a; the tuner times these beside it.
  if (desc.weight_bits == 4 && TimesPairProductTiles(device))
    for (const GemmConfig& c : Int4Candidates()) add(c);
  // int8 on OpenCL CPUs and on CUDA (KernelHelper::kPairProduct16 has both dialects): the
  // other K mode of the default, then pair products for each vw = 8 outer tile below.
  const bool cpu_or_cuda = TimesPairProductTiles(device);
  const bool pairs = desc.type == DataType::kInt8Q && cpu_or_cuda;
  // int16q: the split pair products in the dot tiles (vw = 8 and 16) below.
  const bool split_pairs = desc.type == DataType::kInt16Q && cpu_or_cuda;
  if (pairs) {
    GemmConfig other = base;
    other.kp = base.kp == GemmConfig::kPairs ? GemmConfig::kOneK : GemmConfig::kPairs;
    add(other);
  }
  // Vector widths on both backends (CUDA: KernelWriter::AddVector's struct vectors), and on
  // CUDA the scalar tiles of its default beside them.
  const std::vector<int> widths = VectorsAreLaneStructs(device) ? std::vector<int>{1, 4, 8, 16}
                                                            : std::vector<int>{4, 8, 16};
  const std::vector<int> groups = UsesLaneDefaults(device) || VectorsAreLaneStructs(device)
                                      ? std::vector<int>{32, 64, 128}
                                      : std::vector<int>{1};
  for (int vw : widths)
    for (int wg : groups) {
      for (auto [tm, tn] : {std::pair{4, 1}, {6, 2}, {8, 1}, {4, 2}, {4, 3}, {8, 2}}) {
        GemmConfig c = Tile(kOuterTile, tm, vw == 16 ? std::max(1, tn / 2) : tn, vw, wg, base.mf);
        if (pairs && vw == 8) {
          c.kp = GemmConfig::kPairs;
          add(c);
          c.kp = GemmConfig::kOneK;
        }
        add(c);
      }
      for (auto [tm, tn] : {std::pair{4, 1}, {8, 1}, {2, 2}, {4, 2}, {4, 4}, {1, 4}, {1, 8}}) {
        GemmConfig c = Tile(GemmConfig::Algorithm::kDot, tm, tn, vw, wg, base.mf);
        if ((pairs && vw == 8) || (split_pairs && vw >= 8)) {
          c.kp = GemmConfig::kPairs;
          add(c);
          if (split_pairs) {  // both orders: which operand's rows neighbouring items share
            GemmConfig o = c;
            o.mf = 1 - c.mf;
            add(o);
          }
          c.kp = GemmConfig::kOneK;
        }
        add(c);
      }
    }
  // Byte quads (kp = 4, vw = 16) in the dot and outer tiles: VNNI where the profile runs it in a
  // helper, dp4a per lane on CUDA, the portable form elsewhere. The outer quad tile is no default:
  // zipping 4 rows of op(B) per step cost what the quads saved on AlexNet's convolution GEMMs
  // (docs/BENCHMARKS.md, "Default configurations").
  if (pairs)
    for (int wg : groups) {
      for (auto [tm, tn] :
           {std::pair{1, 4}, {1, 8}, {1, 1}, {2, 2}, {4, 1}, {4, 2}, {4, 4}, {2, 8}})
        add(Tile(GemmConfig::Algorithm::kDot, tm, tn, 16, wg, base.mf, GemmConfig::kDot4));
      for (auto [tm, tn] : {std::pair{6, 2}, {4, 3}, {4, 2}})
        add(Tile(kOuterTile, tm, tn, 16, wg, base.mf, GemmConfig::kDot4));
    }
  // Native 4-way dot products (kp = 4, scalar lanes), and the one-k loop beside a kp = 4
  // default.
  if (desc.type == DataType::kInt8Q && device.dot_product) {
    const std::vector<int> dot_groups = UsesLaneDefaults(device) || VectorsAreLaneStructs(device)
                                            ? std::vector<int>{32, 64, 128}
                                            : std::vector<int>{1, 16};
    for (int wg : dot_groups)
      for (auto [tm, tn] : {std::pair{4, 4}, {8, 1}, {4, 2}, {6, 2}})
        add(Tile(kOuterTile, tm, tn, 1, wg, base.mf, GemmConfig::kDot4));
    GemmConfig one_k = base;
    one_k.kp = GemmConfig::kOneK;
    add(one_k);
  }
  // The schema's variations of the default: the K loop unrolled, the other work-group order.
  for (const GemmConfig& c : GemmConfig::Schema().Variations(out.front())) add(c);
  if (cpu_or_cuda) AddWorkItemPerOutputTiles(desc, add);
  // Local-memory tiles (lm = 1). On GPUs and CUDA a work-group of 32–128 shares each op(A)
  // and op(B) element among its group_n() or group_m() work-items; the same columns per
  // work-item as the vw = 1 tiles (tn / vw vectors). Untimed here (no GPU on the build
  // machine), so they are candidates, not defaults.
  if (UsesLaneDefaults(device) || VectorsAreLaneStructs(device)) {
    for (int vw : widths)
      for (int wg : groups)
        for (auto [tm, tn] : {std::pair{4, 4}, {8, 4}, {4, 2}, {8, 8}}) {
          GemmConfig c = Tile(kOuterTile, tm, std::max(1, tn / vw), vw, wg, base.mf);
          c.lm = 1;
          add(c);
          c.ku = 2;
          add(c);
        }
  } else if (base.algorithm == GemmConfig::Algorithm::kOuter) {
    // CPUs have no local memory: PoCL maps it to ordinary memory, runs a work-group's items
    // in loops between barriers and keeps what lives across a barrier (the accumulators) in
    // memory, which made the staged tile several times slower than the default on PoCL
    // (docs/BENCHMARKS.md): one candidate, so the Tuner can confirm it on other CPUs.
    GemmConfig c = base;
    c.kp = GemmConfig::kOneK;
    c.lm = 1;
    c.wg = 4;
    add(c);
  }
  return out;
}

}  // namespace mpcaffe::libdnn
