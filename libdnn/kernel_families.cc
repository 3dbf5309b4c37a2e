// libdnn/kernel_families.cc — the registry of libdnn's kernel families (kernel_families.h): a
// row per family with its choice names (each with its schema and defaults tables) and its sample
// program texts.
#include "libdnn/kernel_families.h"

#include <array>
#include <iterator>
#include <string>

#include "libdnn/conv.h"
#include "libdnn/conv_families.h"
#include "libdnn/conv_internal.h"
#include "libdnn/conv_nd.h"
#include "libdnn/gemm.h"
#include "libdnn/gemm_config.h"
#include "libdnn/int4_internal.h"
#include "libdnn/lrn.h"
#include "libdnn/pool.h"
#include "libdnn/pool_stochastic.h"
#include "libdnn/row_groups.h"
#include "libdnn/tuner.h"

namespace mpcaffe::libdnn {

namespace {

using Samples = std::vector<KernelSample>;
/// The device a target stands for, as the default-configuration choosers want it: a native dot
/// product (dp4a) where the target has one, the backend's scheduling otherwise.
DeviceInfo InfoOf(const KernelTarget& k) {
  DeviceInfo info;
  info.backend = k.backend;
  info.dot_product = k.dot_product;
  return info;
}

/// Every data type and weight signedness (int8 on a dot-product target: four channels per dp4a,
/// ConvInput::kDot4).
std::vector<ConvDesc> ConvDescs() {
  std::vector<ConvDesc> ds;
  for (DataType t : kAllDataTypes)
    for (bool sw : {false, true}) {
      if (sw && !IsQuantized(t)) continue;
      ConvDesc d;
      d.type = t, d.weights_signed = sw;
      ds.push_back(d);
    }
  return ds;
}

/// GEMM's sample problems: outer-product (B rows) and dot-product (matrix × vector) shapes of
/// every type with the fused pipeline.
std::vector<GemmDesc> GemmSampleDescs() {
  std::vector<GemmDesc> ds;
  for (DataType t : kAllDataTypes)
    for (int n : {48, 1}) {
      GemmDesc d;
      d.type = d.out_type = t;
      d.M = 64, d.N = n, d.K = 96, d.bias = true, d.relu = true;
      d.weights = WeightOperand::kA;
      d.per_channel = IsQuantized(t);
      ds.push_back(d);
    }
  return ds;
}

/// The 4-bit weights' outer-product and dot-product problems.
GemmDesc Int4Desc(bool outer) {
  GemmDesc d;
  d.type = d.out_type = DataType::kInt8Q;
  d.weight_bits = 4, d.weights_signed = true, d.weight_zero = false;
  d.M = 64, d.N = outer ? 64 : 1, d.K = 96, d.bias = true, d.relu = true;
  d.weights = WeightOperand::kA;
  d.per_channel = true;
  return d;
}

/// `text` read by `parse` (nothing, with `why`, when malformed or rejected), printed back.
template <typename Config, typename Parse>
std::optional<std::string> RoundTrip(const std::string& text, std::string* why, Parse parse) {
  std::optional<Config> c;
  try {
    c = parse(text, why);
  } catch (const std::exception& e) {  // a check beyond the schema's ranges (ConvConfig)
    if (why) *why = e.what();
    return std::nullopt;
  }
  if (!c) return std::nullopt;
  return c->ToString();
}

/// `text` read by Config::Schema() (no check beyond its fields' ranges), printed back.
template <typename Config>
std::optional<std::string> SchemaRoundTrip(const std::string& text, std::string* why) {
  return RoundTrip<Config>(text, why, [](const std::string& t, std::string* w) {
    return Config::Schema().Parse(t, Config{}, w);
  });
}

template <typename Config>
std::string SchemaKeys() {
  return Config::Schema().Keys();
}

/// The rows of `table`, printed with `print`.
template <typename Table, typename Print>
void AddRows(std::vector<ChoiceDefaultsRow>* rows, const char* what, const Table& table,
             bool is_config, Print print) {
  for (const auto& row : table)
    rows->push_back({what, row.device_class, print(row.config), row.provenance, is_config});
}

/// The launch table's rows of the family named `name` among row-walking `families`.
template <typename Family>
std::vector<ChoiceDefaultsRow> LaunchRows(const std::vector<Family>& families, const char* name) {
  std::vector<ChoiceDefaultsRow> rows;
  for (const Family& f : families)
    if (f.launch && std::string(f.name) == name)
      AddRows(&rows, "launch", f.launch(), true, [](const RowGroups& r) { return r.ToString(); });
  return rows;
}

const ChoiceSchema kGemmSchema = {
    [] { return "the algorithm (outer, dot), then " + GemmForwardFamily().schema().Keys(); },
    [](const std::string& text, std::string* why) {
      return RoundTrip<GemmConfig>(text, why, GemmForwardFamily().parse);
    },
    [](const DeviceInfo& info) {
      std::vector<ChoiceCandidate> out;
      std::vector<GemmDesc> ds = GemmSampleDescs();
      for (bool outer : {true, false}) ds.push_back(Int4Desc(outer));
      for (const GemmDesc& d : ds)
        for (const GemmConfig& c : GemmCandidates(info, d))
          out.push_back({c.ToString(), d.ToString(), c.Supports(d, info.backend)});
      return out;
    }};

const ChoiceSchema kConvSchema = {
    SchemaKeys<ConvConfig>,
    [](const std::string& text, std::string* why) {
      return RoundTrip<ConvConfig>(text, why, [](const std::string& t, std::string* w) {
        std::optional<ConvConfig> c = ConvConfig::Schema().Parse(t, ConvConfig{}, w);
        if (c) c->Validate();
        return c;
      });
    },
    [](const DeviceInfo& info) {
      std::vector<ChoiceCandidate> out;
      for (DataType t : kAllDataTypes)
        for (const ConvConfig& c : ConvConfig::Candidates(info, t)) {
          bool valid = c.Supports(info.backend);
          try {
            c.Validate();
          } catch (const std::exception&) {
            valid = false;
          }
          out.push_back({c.ToString(), Name(t), valid});
        }
      return out;
    }};

/// Depthwise problems: MobileNet's first (112 rows) and a stride-2 one, and a 5-row plane.
std::vector<ConvDesc> DepthwiseSampleDescs() {
  std::vector<ConvDesc> ds;
  for (auto [c, hw, stride] : {std::array<int, 3>{32, 112, 1}, {256, 28, 2}, {6, 5, 1}}) {
    ConvDesc d;
    d.channels = d.out_channels = d.groups = c;
    d.height = d.width = hw;
    d.kernel_h = d.kernel_w = 3;
    d.pad_h = d.pad_w = 1;
    d.stride_h = d.stride_w = stride;
    ds.push_back(d);
  }
  return ds;
}

const ChoiceSchema kDepthwiseSchema = {
    SchemaKeys<DepthwiseConfig>, SchemaRoundTrip<DepthwiseConfig>, [](const DeviceInfo&) {
      std::vector<ChoiceCandidate> out;
      for (const ConvDesc& d : DepthwiseSampleDescs())
        for (int rows : DepthwiseRowCandidates(d))
          out.push_back(
              {DepthwiseConfig{rows}.ToString(), d.ToString(), rows >= 1 && rows <= d.out_h()});
      return out;
    }};

const ChoiceSchema kPointwiseSchema = {
    SchemaKeys<Convolution::PointwiseTile>, SchemaRoundTrip<Convolution::PointwiseTile>,
    [](const DeviceInfo&) {
      std::vector<ChoiceCandidate> out;
      for (auto [c, oc, h, w] : {std::array<int, 4>{11, 13, 5, 9}, {64, 128, 28, 28}}) {
        ConvDesc d;
        d.channels = c, d.out_channels = oc, d.height = h, d.width = w;
        for (const PointwiseChoice& tile : PointwiseCandidates(d))
          if (tile)  // nothing: the direct kernel ("conv_pw:off"), another family's
            out.push_back(
                {tile->ToString(), d.ToString(), Convolution::PointwiseApplies(d, *tile)});
      }
      return out;
    }};

/// Winograd configurations on an odd-sized padded problem and one of ResNet-50's 3x3 layers.
std::vector<ConvDesc> WinogradSampleDescs() {
  std::vector<ConvDesc> ds;
  for (auto [c, oc, hw] : {std::array<int, 3>{5, 11, 9}, {64, 64, 56}}) {
    ConvDesc d;
    d.channels = c, d.out_channels = oc, d.height = d.width = hw;
    d.kernel_h = d.kernel_w = 3;
    d.pad_h = d.pad_w = 1;
    ds.push_back(d);
  }
  return ds;
}

const ChoiceSchema kWinogradSchema = {
    SchemaKeys<WinogradConfig>, SchemaRoundTrip<WinogradConfig>, [](const DeviceInfo&) {
      std::vector<ChoiceCandidate> out;
      for (const ConvDesc& d : WinogradSampleDescs())
        for (const WinogradConfig& c : WinogradCandidates(WinogradConfig{}))
          out.push_back({c.ToString(), d.ToString(), WinogradApplies(d)});
      return out;
    }};

/// Pooling's and LRN's launches: chosen by their tables, never timed by the tuner.
const ChoiceSchema kRowGroupsSchema = {SchemaKeys<RowGroups>, SchemaRoundTrip<RowGroups>, nullptr};

std::vector<ChoiceDefaultsRow> GemmRows() {
  std::vector<ChoiceDefaultsRow> rows;
  AddRows(&rows, "configuration", GemmForwardFamily().defaults(), true,
          [](const GemmConfig& c) { return c.ToString(); });
  AddRows(&rows, "work-item order", GemmOrderDefaults(), false, [](int mf) {
    return mf < 0 ? std::string("the configuration's") : "mf=" + std::to_string(mf);
  });
  return rows;
}

std::vector<ChoiceDefaultsRow> DirectConvRows() {
  std::vector<ChoiceDefaultsRow> rows;
  AddRows(&rows, "configuration", DirectConvDefaults(), true,
          [](const ConvConfig& c) { return c.ToString(); });
  AddRows(&rows, "configuration by shape", DirectShapeDefaults(), false,
          [](const std::optional<ConvConfig>& c) {
            return c ? c->ToString() : std::string("the data type's configuration");
          });
  return rows;
}

std::vector<ChoiceDefaultsRow> PointwiseRows() {
  std::vector<ChoiceDefaultsRow> rows;
  AddRows(&rows, "configuration", PointwiseDefaults(), true,
          [](const Convolution::PointwiseTile& t) { return t.ToString(); });
  AddRows(&rows, "strided 1x1 layers", StridedPointwiseDefaults(), false, [](bool plane) {
    return std::string(plane ? "the plane form on the subsampled input"
                             : "off (the next family)");
  });
  AddRows(&rows, "int8q first layers", FirstLayerPointwiseDefaults(), false, [](bool row) {
    return std::string(row ? "the row form" : "off (the direct kernel's grid form)");
  });
  AddRows(&rows, "input prefetch", PointwisePrefetchDefaults(), false, [](int ahead) {
    return ahead ? std::to_string(ahead) + " input channels ahead" : std::string("none");
  });
  AddRows(&rows, "launch", PointwiseSpreadDefaults(), false, [](int per_unit) {
    return per_unit ? "at least " + std::to_string(per_unit) + " work-groups per compute unit"
                    : std::string("the runtime's work-groups");
  });
  return rows;
}

/// Rows per work-item of the depthwise kernel: a range by device class, the rule
/// (Convolution::DefaultDepthwiseRows) picking within it per shape — not a configuration text.
std::vector<ChoiceDefaultsRow> DepthwiseRows() {
  std::vector<ChoiceDefaultsRow> rows;
  AddRows(&rows, "rows", DepthwiseRowDefaults(), false,
          [](const DepthwiseRowRange& r) { return r.ToString(); });
  AddRows(&rows, "int8 form", DepthwiseQuadDefaults(), false, [](bool quads) {
    return std::string(quads ? "byte quads, 16 columns" : "float and pair forms");
  });
  return rows;
}

std::vector<ChoiceDefaultsRow> WinogradRows() {
  std::vector<ChoiceDefaultsRow> rows;
  // "off" rows name the next family, not a configuration of this one.
  for (const auto& row : WinogradDefaults())
    rows.push_back({"configuration", row.device_class,
                    row.config ? row.config->ToString() : std::string("off"), row.provenance,
                    row.config.has_value()});
  return rows;
}

std::vector<ChoiceDefaultsRow> ConvGemmRows() {
  std::vector<ChoiceDefaultsRow> rows;
  AddRows(&rows, "default forward", ConvGemmDefaults(), false,
          [](bool gemm) { return std::string(gemm ? "im2col + GEMM" : "off (the next family)"); });
  return rows;
}

std::vector<KernelFamilyEntry> Build() {
  std::vector<KernelFamilyEntry> f;
  // GEMM: outer-product (B rows) and dot-product (matrix × vector) kernels with the fused
  // pipeline, in their default configurations (tests/cuda/candidates_test.cc compiles every
  // tuner candidate).
  f.push_back(
      {"gemm", {{GemmForwardFamily().name, &kGemmSchema, GemmRows}}, [](const KernelTarget& k) {
         Samples s;
         for (const GemmDesc& d : GemmSampleDescs())
           s.push_back({Gemm::KernelName(d), Gemm::Source(k, d, DefaultGemmConfig(InfoOf(k), d))});
         return s;
       }});
  // The 4-bit weight unpack kernel (both backends) and the native byte-pair kernels
  // (GemmConfig::kU8S4: an outer product and a dot product along K), chosen as "gemm" configs.
  f.push_back({"int4_unpack", {}, [](const KernelTarget& k) {
                 return Samples{{int4::UnpackKernelName(), int4::UnpackSource(k)}};
               }});
  f.push_back({"gemm_int4", {}, [](const KernelTarget& k) {
                 Samples s;
                 for (bool outer : {true, false}) {
                   const GemmDesc d = Int4Desc(outer);
                   for (const GemmConfig& c : GemmCandidates(InfoOf(k), d))
                     if (int4::Native(d, c) &&
                         (c.algorithm == GemmConfig::Algorithm::kOuter) == outer) {
                       s.push_back({Gemm::KernelName(d), int4::NativeSource(k, d, c)});
                       break;
                     }
                 }
                 return s;
               }});
  // The convolution's forward families (conv_families.h), in their default configurations.
  f.push_back({"conv_forward", {{"conv", &kConvSchema, DirectConvRows}}, [](const KernelTarget& k) {
                 Samples s;
                 for (const auto& d : ConvDescs())
                   s.push_back(
                       {Convolution::ForwardKernelName(d),
                        Convolution::ForwardSource(k, d, DefaultConvConfig(InfoOf(k), d.type))});
                 // int8q's grid form (OpenCL): channel quads under a 3x3 window, and a first
                 // layer's tap quads at stride 2 (DirectShapeDefaults takes both where byte
                 // quads run).
                 if (k.backend == Backend::kOpenCL)
                   for (ConvDesc d : ConvDescs()) {
                     if (d.type != DataType::kInt8Q) continue;
                     d.height = d.width = 9, d.out_channels = 8;
                     d.kernel_h = d.kernel_w = 3;
                     for (const int c : {8, 3}) {
                       d.channels = c, d.stride_h = d.stride_w = c == 3 ? 2 : 1;
                       s.push_back({Convolution::ForwardKernelName(d),
                                    Convolution::ForwardSource(k, d, {1, 1, 32, 8, 4})});
                     }
                   }
                 return s;
               }});
  f.push_back(
      {"conv_depthwise", {{"conv_dw", &kDepthwiseSchema, DepthwiseRows}}, [](const KernelTarget& k) {
         Samples s;
         for (const auto& d : ConvDescs())
           s.push_back({Convolution::DepthwiseKernelName(d), Convolution::DepthwiseSource(k, d)});
         return s;
       }});
  f.push_back(
      {"conv_pointwise",
       {{"conv_pw", &kPointwiseSchema, PointwiseRows}},
       [](const KernelTarget& k) {
         // fp32: the default tile and one with a partial channel block, bias,
         // residual and ReLU (every branch of the epilogue).
         ConvDesc d;
         d.channels = 6, d.height = 5, d.width = 7, d.out_channels = 10;
         ConvDesc e = d;
         e.bias = e.relu = e.residual = true;
         Samples s{
             {Convolution::PointwiseKernelName(d),
              Convolution::PointwiseSource(k, d, Convolution::DefaultPointwiseTile(d))},
             {Convolution::PointwiseKernelName(e), Convolution::PointwiseSource(k, e, {3, 3, 4})}};
         if (k.vector_builtins) {
           // int8q (vector dialects only): the plane form with every epilogue branch,
           // and the row form of a first layer.
           ConvDesc q = e;
           q.type = DataType::kInt8Q;
           q.height = 4;
           ConvDesc r = q;
           r.channels = 3, r.kernel_h = r.kernel_w = 3, r.stride_h = r.stride_w = 2;
           r.height = r.width = 17;
           for (const ConvDesc& c : {q, r})
             s.push_back(
                 {Convolution::PointwiseKernelName(c),
                  Convolution::PointwiseSource(k, c, Convolution::DefaultPointwiseTile(c))});
         }
         return s;
       }});
  // Winograd ("conv_wino"): F(2x2) with bias, residual and ReLU on an odd padded problem and
  // F(4x4) without them, two vectors of tiles, and int8q's F(2x2) (every branch of the text).
  f.push_back({"conv_winograd", {{"conv_wino", &kWinogradSchema, WinogradRows}},
               [](const KernelTarget& k) {
                 ConvDesc d = WinogradSampleDescs()[0];
                 ConvDesc e = d;
                 e.bias = e.relu = e.residual = true;
                 e.pad_h = 0, e.pad_w = 2;
                 ConvDesc q = e;  // int8q: integer transforms, 16-bit pair products
                 q.type = DataType::kInt8Q;
                 return Samples{{"conv_wino_gemm", WinogradSource(k, e, {2, 8, 1, 16})},
                                {"conv_wino_gemm", WinogradSource(k, d, {4, 4, 2, 8})},
                                {"conv_wino_gemm", WinogradSource(k, q, {2, 6, 2, 8})}};
               }});
  // im2col + GEMM ("conv_gemm"): the im2col kernel of every type (the GEMM is gemm's).
  f.push_back({"im2col", {{"conv_gemm", nullptr, ConvGemmRows}}, [](const KernelTarget& k) {
                 return PerTypeSamples(AllTypes(), k, conv_internal::Im2colKernelName,
                                       conv_internal::Im2colSource);
               }});
  // The Im2col layer's quantized columns into another scale and zero point.
  f.push_back({"im2col_rq", {}, [](const KernelTarget& k) {
                 return PerTypeSamples({DataType::kInt16Q, DataType::kInt8Q}, k,
                                       conv_internal::Im2colRequantKernelName,
                                       conv_internal::Im2colRequantSource);
               }});
  f.push_back({"conv_backward", {}, [](const KernelTarget& k) {
                 return Samples{{"conv_bwd_col2im", Convolution::BackwardSource(k)}};
               }});
  f.push_back({"conv_nd", {}, [](const KernelTarget& k) {
                 return Samples{{"conv_nd_col2im", ConvolutionNd::Source(k)}};
               }});
  // Pooling ("pool_walk_max", "pool_plane_max", "pool_vector_max": the max kernel's vector
  // forms, in the same program; "pool_plane_ave": the whole-plane average, in the average
  // kernel's).
  f.push_back(
      {"pool_forward",
       {{"pool_walk_max", &kRowGroupsSchema,
         [] { return LaunchRows(PoolForwardFamilies(), "pool_walk_max"); }},
        {"pool_plane_max", &kRowGroupsSchema,
         [] { return LaunchRows(PoolForwardFamilies(), "pool_plane_max"); }},
        {"pool_vector_max", &kRowGroupsSchema,
         [] { return LaunchRows(PoolForwardFamilies(), "pool_vector_max"); }},
        {"pool_plane_ave"},
        {"pool"}},
       [](const KernelTarget& k) {
         Samples s;
         for (DataType t : kAllDataTypes)
           for (auto m : {PoolMethod::kMax, PoolMethod::kAverage})
             s.push_back({Pooling::ForwardKernelName(t, m), Pooling::ForwardSource(k, t, m)});
         return s;
       }});
  f.push_back({"pool_backward", {}, [](const KernelTarget& k) {
                 Samples s;
                 for (auto m : {PoolMethod::kMax, PoolMethod::kAverage})
                   s.push_back({Pooling::BackwardKernelName(m), Pooling::BackwardSource(k, m)});
                 return s;
               }});
  // Float types' forward kernels; fp32's program also carries the backward kernel.
  f.push_back({"pool_stochastic", {}, [](const KernelTarget& k) {
                 return PerTypeSamples(FloatTypes(), k, StochasticPooling::TrainKernelName,
                                       StochasticPooling::Source);
               }});
  f.push_back({"lrn_forward",
               {{"lrn_vector16", &kRowGroupsSchema,
                 [] { return LaunchRows(LrnForwardFamilies(), "lrn_vector16"); }},
                {"lrn_vector", &kRowGroupsSchema,
                 [] { return LaunchRows(LrnForwardFamilies(), "lrn_vector"); }},
                {"lrn", &kRowGroupsSchema, [] { return LaunchRows(LrnForwardFamilies(), "lrn"); }}},
               [](const KernelTarget& k) {
                 Samples s;  // quantized: the codes in and out of float arithmetic
                 for (DataType t : kAllDataTypes)
                   for (int lanes : {8, 16})
                     s.push_back({Lrn::ForwardKernelName(t),
                                  Lrn::ForwardSource(k, t, 5, 0.75f, lanes)});
                 return s;
               }});
  f.push_back({"lrn_backward", {}, [](const KernelTarget& k) {
                 return Samples{{Lrn::BackwardKernelName(), Lrn::BackwardSource(k)}};
               }});
  return f;
}

}  // namespace

const std::vector<DataType>& AllTypes() {
  static const std::vector<DataType> types(std::begin(kAllDataTypes), std::end(kAllDataTypes));
  return types;
}

const std::vector<DataType>& FloatTypes() {
  static const std::vector<DataType> types = {DataType::kFloat32, DataType::kFloat16};
  return types;
}

const std::vector<KernelFamilyEntry>& KernelFamilyRegistry() {
  static const std::vector<KernelFamilyEntry> families = Build();
  return families;
}

}  // namespace mpcaffe::libdnn
