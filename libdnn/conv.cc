// libdnn/conv.cc — the convolution kernels (implicit-GEMM forward for every data type, fp32
// backward through im2col / col2im and a small GEMM), their launches and host references.
#include "libdnn/conv.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "device/error.h"
#include "libdnn/conv_host.h"
#include "libdnn/tuner.h"  // TunedConvConfig
#include "device/settings.h"

namespace mpcaffe::libdnn {

namespace {

using host::Field;

int DivUp(int a, int b) { return (a + b - 1) / b; }

/// Packed-weight element type of the forward kernel: float for float types, the difference
/// type for quantized ones (w − z_w fits it), 16 bits for every channel-pair input.
const char* PackedType(DataType t, ConvInput input) {
  switch (t) {
    case DataType::kFloat32:
    case DataType::kFloat16:
      return "float";
    case DataType::kInt8Q:
      return input == ConvInput::kDot4 ? "mp_u8" : "mp_i16";
    case DataType::kInt16Q:
      return input == ConvInput::kPackedSplit ? "mp_i16" : "int";
  }
  return "float";
}
size_t PackedBytes(DataType t, ConvInput input) {
  if (input == ConvInput::kDot4) return 1;
  return t == DataType::kInt8Q || input == ConvInput::kPackedSplit ? 2 : 4;
}

/// Pair steps of a window at most this many between flushes of the int16 split path's int32
/// accumulators: a pair product of w − c (int16) with a lo (0..255) or hi (−256..255) pair
/// is at most 2·32768·256 = 2^24 in magnitude, and 127·2^24 < 2^31.
constexpr int kSplitFlushSteps = 127;

/// Packed input planes per Forward launch at most (several images per launch when they are
/// small, always at least one): the planes are twice (int8) / four times (int16) the input and
/// live as long as the Convolution, so they hold a chunk of the batch, not all of it. Measured
/// (ConvBench at batch 16, AlexNet int8, PoCL, chunk sizes interleaved): one image per launch,
/// 256 KiB, 1 MiB and the whole batch ran within 5% of each other.
constexpr size_t kPackChunkBytes = size_t(256) << 10;

/// How the forward kernel reads its input (see ConvInput). The pair forms need OpenCL vectors
/// of 8 output channels (one short16 pair product per vector) and `x_fits` (x − z_x within
/// 17 bits: a zero point in the type's range). The packed weights then interleave channel pairs
/// (wp[…][ic / 2][t][ic % 2], an odd Cg padded with a zero channel) and one MP_MADD16 adds
/// w(ic)·x(ic) + w(ic + 1)·x(ic + 1) for 8 output channels: both factors fit 16 bits and the
/// pair sums int32, so the result is the same integer.
ConvInput InputOf(Backend backend, const ConvDesc& d, const ConvConfig& c, bool x_fits) {
  // kp = 4 replicates z_x into the bytes of padding: a zero point within uint8.
  if (d.type == DataType::kInt8Q && c.kp == 4 && x_fits) return ConvInput::kDot4;
  if (backend != Backend::kOpenCL || c.vw != 8 || !x_fits) return ConvInput::kDirect;
  const int cg = d.channels / d.groups;
  // Packed planes are indexed with int: one image's words (two per pair for int16) and the
  // per-pixel channel sum Σ (x − z_x) (|x − z_x| ≤ 65535, int32 up to Cg = 32768) must fit.
  const double words = double(d.channels + d.groups) * d.height * d.width * 2;
  if (words >= 2147483647.0)
    return d.type == DataType::kInt8Q ? ConvInput::kPairs : ConvInput::kDirect;
  switch (d.type) {
    case DataType::kInt8Q: {
      // Packing costs a pass over the input; it pays when the forward kernel reads each input
      // pixel often: (channel blocks) · KH·KW / (stride_h·stride_w) times. Measured (ConvBench,
      // PoCL, interleaved): packed ahead by 10-25% on AlexNet's layers (reuse 9 to 72) and on a
      // 3×3 stride-1 layer with one block (reuse 9), level at 2.25 (3×3 stride 2, one block)
      // and on a 1×1 layer with 8 blocks; behind by 15-45% on 1×1 layers with reuse ≤ 1
      // (stride 2 with one or two blocks, stride 1 with one block).
      const int blocks =
          (d.out_channels / d.groups + c.channels_per_group() - 1) / c.channels_per_group();
      const double reuse =
          double(blocks) * d.kernel_h * d.kernel_w / (double(d.stride_h) * d.stride_w);
      return reuse >= 2 ? ConvInput::kPackedPairs : ConvInput::kPairs;
    }
    case DataType::kInt16Q:
      return cg <= 32768 ? ConvInput::kPackedSplit : ConvInput::kDirect;
    default:
      return ConvInput::kDirect;
  }
}
bool IsPacked(ConvInput m) { return m == ConvInput::kPackedPairs || m == ConvInput::kPackedSplit; }

/// Input channels per packed step: 4 (kDot4), 2 (channel pairs) or 1.
int ChannelsPerStep(ConvInput m) {
  return m == ConvInput::kDot4 ? 4 : m == ConvInput::kDirect ? 1 : 2;
}

/// Input channels per group as packed: Cg rounded up to the channels per step.
int PackedChannels(const ConvDesc& d, ConvInput m) {
  const int cg = d.channels / d.groups, cp = ChannelsPerStep(m);
  return (cg + cp - 1) / cp * cp;
}

/// Bytes of one image's packed input: per group ⌈Cg/2⌉ planes of 32-bit pairs (int16: a lo and
/// a hi word per pixel, then one plane of channel sums).
size_t PackedInputBytes(const ConvDesc& d, ConvInput m) {
  const size_t hw = size_t(d.height) * d.width, pairs = size_t(d.channels / d.groups + 1) / 2;
  if (m == ConvInput::kPackedPairs) return size_t(d.groups) * pairs * hw * 4;
  if (m == ConvInput::kPackedSplit) return size_t(d.groups) * (pairs * 2 + 1) * hw * 4;
  return 0;
}

/// Bias element bytes: fp32 for float types, the accumulator for quantized ones.
size_t BiasBytes(DataType t) { return t == DataType::kInt16Q ? 8 : 4; }

/// Weight storage spelling and load (signed int8/int16 storage for weights_signed).
void DeclareWeightStorage(KernelWriter& w, const ConvDesc& d) {
  if (IsQuantized(d.type) && d.weights_signed) {
    w.Define("Wstore", d.type == DataType::kInt8Q ? "mp_i8" : "mp_i16");
    w.Define("WLOAD(p, i)", "((int)(p)[i])");
  } else {
    w.Define("Wstore", "Dtype");
    w.Define("WLOAD(p, i)", "Dtype_LOAD(p, i)");
  }
}

/// The register-tile part of the forward body: `f(j, t)` gives the text for one accumulator.
template <typename F>
std::string ForEachTile(const ConvConfig& c, F f) {
  std::string s;
  for (int j = 0; j < c.oc_per_item; ++j)
    for (int t = 0; t < c.px_per_item; ++t) s += f(j, t);
  return s;
}
template <typename F>
std::string ForEachPixel(const ConvConfig& c, F f) {
  std::string s;
  for (int t = 0; t < c.px_per_item; ++t) s += f(t);
  return s;
}
template <typename F>
std::string ForEachChannel(const ConvConfig& c, F f) {
  std::string s;
  for (int j = 0; j < c.oc_per_item; ++j) s += f(j);
  return s;
}
std::string Sub(const char* pattern, int j, int t) {
  // Replaces every '#J' and '#T' in pattern by j and t.
  std::string s = pattern, out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '#' && i + 1 < s.size() && (s[i + 1] == 'J' || s[i + 1] == 'T')) {
      out += std::to_string(s[i + 1] == 'J' ? j : t);
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string BackwardKernelName(const char* what) { return std::string("conv_bwd_") + what; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Descriptions

int ConvDesc::out_h() const {
  return (height + 2 * pad_h - (dilation_h * (kernel_h - 1) + 1)) / stride_h + 1;
}
int ConvDesc::out_w() const {
  return (width + 2 * pad_w - (dilation_w * (kernel_w - 1) + 1)) / stride_w + 1;
}
double ConvDesc::Flops() const {
  return 2.0 * batch * out_channels * out_h() * out_w() * (channels / groups) * kernel_h * kernel_w;
}
size_t ConvDesc::input_count() const { return size_t(batch) * channels * height * width; }
size_t ConvDesc::weight_count() const {
  return size_t(out_channels) * (channels / groups) * kernel_h * kernel_w;
}
size_t ConvDesc::output_count() const { return size_t(batch) * out_channels * out_h() * out_w(); }

std::string ConvDesc::ToString() const {
  std::ostringstream s;
  s << Name(type) << " n" << batch << " c" << channels << " h" << height << " w" << width << " o"
    << out_channels << " k" << kernel_h << "x" << kernel_w << " s" << stride_h << "x" << stride_w
    << " p" << pad_h << "x" << pad_w << " d" << dilation_h << "x" << dilation_w << " g" << groups;
  if (bias) s << " bias";
  if (relu) s << " relu";
  if (weights_signed) s << " signed";
  return s.str();
}

void ConvDesc::Validate() const {
  auto fail = [&](const std::string& what) {
    throw Error("convolution " + ToString() + ": " + what);
  };
  for (auto [name, v] : {std::pair<const char*, int>{"batch", batch},
                         {"channels", channels},
                         {"height", height},
                         {"width", width},
                         {"out_channels", out_channels},
                         {"kernel_h", kernel_h},
                         {"kernel_w", kernel_w},
                         {"stride_h", stride_h},
                         {"stride_w", stride_w},
                         {"dilation_h", dilation_h},
                         {"dilation_w", dilation_w},
                         {"groups", groups}})
    if (v <= 0) fail(Field(name, v) + " must be positive");
  if (pad_h < 0 || pad_w < 0) fail("padding must not be negative");
  if (channels % groups)
    fail(Field("channels", channels) + " is not divisible by " + Field("groups", groups));
  if (out_channels % groups)
    fail(Field("out_channels", out_channels) + " is not divisible by " + Field("groups", groups));
  if (out_h() <= 0 || out_w() <= 0)
    fail("the dilated kernel does not fit the padded input (output " + std::to_string(out_h()) +
         "x" + std::to_string(out_w()) + ")");
  if (weights_signed && !IsQuantized(type)) fail("weights_signed needs a quantized type");
  const double biggest =
      std::max({double(input_count()), double(output_count()), double(weight_count()) * 2});
  if (biggest >= 2147483647.0) fail("tensors beyond 2^31 elements are not supported");
}

ConvQuant ConvQuant::From(const quant::QuantParams& input, const quant::QuantParams& weights,
                          const quant::QuantParams& output) {
  ConvQuant q;
  q.x_zero = input.zero_point_of(0);
  q.c_zero = output.zero_point_of(0);
  if (weights.per_channel() && weights.axis != 0)
    throw Error(
        "convolution quantization: per-channel weight parameters must be along axis 0 "
        "(output channels), got axis " +
        std::to_string(weights.axis));
  const size_t n = weights.per_channel() ? weights.channels() : 1;
  q.w_zero.assign(n, 0);
  q.multiplier.assign(n, {});
  for (size_t c = 0; c < n; ++c) {
    q.w_zero[c] = weights.zero_point_of(c);
    q.multiplier[c] =
        quant::RequantizationMultiplier(input.scale_of(0), weights.scale_of(c), output.scale_of(0));
  }
  return q;
}

const ConfigSchema<ConvConfig>& ConvConfig::Schema() {
  static const ConfigSchema<ConvConfig> schema(
      "", {{"l", &ConvConfig::lanes, ValueRange(1, 256)},
           {"oc", &ConvConfig::oc_per_item, ValueRange(1, 16)},
           {"px", &ConvConfig::px_per_item, ValueRange(1, 16)},
           {"v", &ConvConfig::vw, {1, 2, 4, 8, 16}},
           {"k", &ConvConfig::kp, {1, 4}, 1, /*always_printed=*/false}});
  return schema;
}

std::string ConvConfig::ToString() const { return Schema().Print(*this); }

void ConvConfig::Validate() const {
  const ConfigSchema<ConvConfig>& s = Schema();
  if (!s.InRange(*this) || oc_per_item * px_per_item > 64 || (kp == 4 && vw != 1))
    throw Error("convolution config " + ToString() + ": lanes must be in [" + s.AllowedText("l") +
                "], tiles in [" + s.AllowedText("oc") + "] with oc·px ≤ 64, vw " +
                s.AllowedText("v") + ", kp " + s.AllowedText("k") + " (4 with vw 1)");
}

ConvConfig DefaultConvConfig(const DeviceInfo& device, DataType type) {
  if (device.backend == Backend::kOpenCL && !device.is_gpu) {
    // Measured on PoCL (AVX2 code, 16 vector registers; shared, loaded machine, so only
    // side-by-side runs count): 4 vectors of 8 channels × 3 pixels (12 accumulators) was at
    // or near the top of the candidates on AlexNet's convolutions (ConvBench in
    // tests/libdnn/conv_test.cc compares them). int16q's split pairs (ConvInput) keep two
    // int32 sums per accumulator: 2 × 2 tiles (8 registers) do not spill, and ran 15-25% ahead
    // of 4 × 3 (24 sums, spilled) in four interleaved ConvBench runs (batch 1 and 16); 4 × 2
    // and 6 × 2 were level with 2 × 2.
    if (type == DataType::kInt16Q) return {1, 2, 2, 8};
    // int8 through a native dot product (kp = 4) is not the CPU default: on Intel's OpenCL CPU
    // runtime (AMD EPYC, AVX-512 VNNI; 2026-11-24; ConvBench.DISABLED_AlexNetBatch1, int8,
    // best of 6 per layer) the dot_4x8packed_* calls stay scalar (see DefaultGemmConfig) and
    // AlexNet's five convolutions ran at a geometric mean of 5.2 GFLOP/s with l32 oc2 px4 v1 k4
    // and 5.5 with l16 oc4 px4 v1 k4, against 15.0 for l32 oc2 px4 v1 (kp = 1) and 28.3 for
    // this default (channel pairs).
    return {1, 4, 3, 8};
  }
  // GPUs with a native 4-way dot product take int8 four channels per step: one dp4a (or
  // dot_4x8packed_*) does four of the one-channel loop's multiply-adds. Not measured here (no
  // GPU on the build machine); the Tuner's candidates hold kp = 1 beside it.
  if (type == DataType::kInt8Q && device.dot_product) return {32, 2, 4, 1, 4};
  return {32, 2, 4, 1};
}

std::vector<ConvConfig> ConvConfig::Candidates(const DeviceInfo& device, DataType type) {
  std::vector<ConvConfig> out = {DefaultConvConfig(device, type)};
  const std::vector<ConvConfig> all = {{1, 4, 3, 8}, {1, 2, 4, 8},  {1, 2, 6, 8},  {1, 1, 4, 16},
                                       {1, 3, 4, 8}, {1, 4, 2, 8},  {1, 6, 2, 8},  {1, 2, 2, 8},
                                       {1, 4, 3, 4}, {32, 2, 4, 1}, {64, 1, 4, 1}, {16, 4, 4, 1},
                                       {32, 4, 2, 1}};
  for (const ConvConfig& c : all)
    if (c.Supports(device.backend) && !(c == out[0])) out.push_back(c);
  // int8 with a native dot product: the scalar-lane tiles four channels per step too.
  if (type == DataType::kInt8Q && device.dot_product)
    for (const ConvConfig& c : all)
      if (c.vw == 1) {
        ConvConfig d = c;
        d.kp = 4;
        if (!(d == out[0])) out.push_back(d);
      }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Kernel texts

std::string Convolution::ForwardKernelName(const ConvDesc& d) {
  return std::string("conv_fwd_") + Name(d.type) + (d.weights_signed ? "_sw" : "");
}

std::string Convolution::ForwardSource(const KernelTarget& target, const ConvDesc& d,
                                       const ConvConfig& c, bool channel_pairs) {
  c.Validate();
  const ConvInput input = InputOf(target.backend, d, c, channel_pairs);
  const bool dot4 = input == ConvInput::kDot4;
  const bool pairs = input != ConvInput::kDirect && !dot4;
  const bool packed = IsPacked(input);
  const bool split = input == ConvInput::kPackedSplit;
  const bool q = IsQuantized(d.type);
  const bool wide = d.type == DataType::kInt16Q;
  KernelWriter w(target);
  w.AddType("Dtype", d.type);
  if (pairs) w.UseHelper(KernelHelper::kPairProduct16);
  if (dot4) {
    w.UseHelper(KernelHelper::kDot4);
    // The word of four packed weight bytes at p (4-byte aligned), and the input bytes of
    // channels 0 … 3 of a plane stride apart (x_zero past the group's last channel, `rem`).
    w.Define("WWORD(p)", w.Expand("(*(const $global mp_u32*)(p))"));
    w.Define("XBYTE(p, i, q, rem)",
             "((mp_u32)((q) < (rem) ? (p)[i] : (mp_u8)x_zero) << (8 * (q)))");
    w.Define(
        "XWORD4(p, o, hw)",
        "((mp_u32)(p)[o] | ((mp_u32)(p)[(o) + (hw)] << 8) | ((mp_u32)(p)[(o) + 2 * (hw)] << 16) | "
        "((mp_u32)(p)[(o) + 3 * (hw)] << 24))");
    w.Define(
        "XTAIL4(p, o, hw, rem)",
        "(XBYTE(p, o, 0, rem) | XBYTE(p, (o) + (hw), 1, rem) | XBYTE(p, (o) + 2 * (hw), 2, rem) | "
        "XBYTE(p, (o) + 3 * (hw), 3, rem))");
    w.Define("DOT4(x, w, acc)",
             d.weights_signed ? "mp_dot4_u8s8(x, w, acc)" : "mp_dot4_u8u8(x, w, acc)");
  }
  DeclareWeightStorage(w, d);
  w.Define("Ptype", PackedType(d.type, input));
  // The split path packs w − WCENTER (int16 whatever the zero point) and adds
  // (WCENTER − z_w)·Σ(x − z_x) per output.
  if (split) w.Define("WCENTER", d.weights_signed ? "0" : "32768");
  if (!q) {
    w.Define("Atype", "float");
    w.Define("Btype", "float");
    w.Define("Xtype", "float");
    w.Define("XVAL(v)", "(v)");
  } else {
    host::UseRequant(w, d.type);
    w.Define("Atype", wide ? "mp_i64" : "int");
    w.Define("Btype", wide ? "mp_i64" : "int");
    w.Define("Xtype", "int");
    w.Define("XVAL(v)", "((v) - x_zero)");
  }
  // Vectors of vw channels (OpenCL C vector types; plain scalars when vw == 1).
  const std::string n = std::to_string(c.vw);
  if (c.vw == 1) {
    w.Define("Vtype", "Atype");
    w.Define("WLDV(p)", "((Atype)(p)[0])");
    w.Define("VTO(x, t)", "((t)[0] = (x))");
  } else {
    const std::string scalar = !q ? "float" : (wide ? "long" : "int");
    w.Define("Vtype", scalar + n);
    w.Define("WLDV(p)",
             !q ? "vload" + n + "(0, (p))" : "convert_" + scalar + n + "(vload" + n + "(0, (p)))");
    w.Define("VTO(x, t)", "vstore" + n + "((x), 0, (t))");
  }
  w.Define("VMAC(acc, wv, xv)", wide ? "acc += (wv) * (mp_i64)(xv)" : "acc += (wv) * (xv)");
  w.Define("CONV_VW", n);
  w.Define("CONV_STEP", std::to_string(c.lanes * c.vw));  // channels between a work-item's vectors
  w.Define("CONV_TILE", std::to_string(c.channels_per_group()));
  w.Define("CONV_CP", std::to_string(ChannelsPerStep(input)));  // input channels per packed step

  // Repacking, one contiguous stream per (group, block of CONV_TILE channels):
  //   wp[g][blk][ky·KW + kx][ic][t] = w[g·OCg + blk·CONV_TILE + t][ic][ky][kx] − z_w (0 past OCg);
  // with channel pairs (CONV_CP = 2) wp[g][blk][ky·KW + kx][ic / 2][t][ic % 2] (0 past Cg);
  // kDot4 (CONV_CP = 4): the raw weight bytes (no z_w) as wp[…][ic / 4][t][ic % 4].
  const std::string suffix = std::string(Name(d.type)) + (d.weights_signed ? "_sw" : "");
  w.Kernel("conv_pack_" + suffix)
      .In("Wstore", "wsrc")
      .In("int", "wz")
      .Out("Ptype", "wp")
      .Value("int", "Cg")
      .Value("int", "OCg")
      .Value("int", "blocks")
      .Value("int", "KHW")
      .Value("int", "total")
      .Body(std::string(R"(  const int Cgp = (Cg + CONV_CP - 1) / CONV_CP;  // packed channel steps
  $loop(i, total) {
    const int s = i % CONV_CP;
    const int t = (i / CONV_CP) % CONV_TILE;
    int r = i / (CONV_CP * CONV_TILE);
    const int ic = (r % Cgp) * CONV_CP + s;
    r /= Cgp;
    const int kk = r % KHW;
    r /= KHW;
    const int ocp = (r % blocks) * CONV_TILE + t;
    const int g = r / blocks;
)") + (q ? "    int v = 0;\n" : "    float v = 0.0f;\n") +
            R"(    if (ocp < OCg && ic < Cg) {
      const int o = g * OCg + ocp;
)" +
            (!q || dot4 ? "      v = WLOAD(wsrc, (o * Cg + ic) * KHW + kk);\n"
             : split    ? "      v = WLOAD(wsrc, (o * Cg + ic) * KHW + kk) - WCENTER;\n"
                        : "      v = WLOAD(wsrc, (o * Cg + ic) * KHW + kk) - wz[o];\n") +
            R"(    }
    wp[i] = (Ptype)v;
  }
)");

  if (dot4) {
    // Σw of each output channel over its whole window (raw stored values).
    w.Kernel("conv_wsum_" + suffix)
        .In("Wstore", "wsrc")
        .Out("int", "wsum")
        .Value("int", "OC")
        .Value("int", "CKK")
        .Body(R"(  $loop(o, OC) {
    int s = 0;
    for (int i = 0; i < CKK; ++i) s += WLOAD(wsrc, o * CKK + i);
    wsum[o] = s;
  }
)");
  }

  if (packed) {
    // Input packing for one chunk of images (NG = images · groups): per (image, group) ⌈Cg/2⌉
    // planes of 32-bit words (x(2i) − z_x, x(2i + 1) − z_x) as two int16 halves, an odd Cg
    // padded with 0; the split path writes two words per pixel (the lo pair, then the hi pair
    // of v = hi·256 + lo) and a plane of Σ_ic v per (image, group).
    auto& xk = w.Kernel("conv_xpack_" + suffix).In("Dtype", "x").Out("int", "xq");
    if (split) xk.Out("int", "xs");
    xk.Value("int", "Cg").Value("int", "HW").Value("int", "NG").Value("int", "x_zero");
    std::string b = R"(  const int Cgh = (Cg + 1) / 2;
  $loop(i, NG * HW) {
    const int s = i % HW;
    const int ng = i / HW;
    const $global Dtype* src = x + ng * Cg * HW + s;
)";
    b += split ? R"(    $global int* dst = xq + ng * Cgh * HW * 2 + s * 2;
    int sum = 0;
)"
               : "    $global int* dst = xq + ng * Cgh * HW + s;\n";
    b += R"(    for (int pr = 0; pr < Cgh; ++pr) {
      const int v0 = Dtype_LOAD(src, 2 * pr * HW) - x_zero;
      const int v1 = 2 * pr + 1 < Cg ? Dtype_LOAD(src, (2 * pr + 1) * HW) - x_zero : 0;
)";
    b += split ? R"(      dst[pr * HW * 2] = (v0 & 255) | ((v1 & 255) << 16);
      dst[pr * HW * 2 + 1] = ((v0 >> 8) & 0xffff) | (int)((uint)(v1 >> 8) << 16);
      sum += v0 + v1;
    }
    xs[i] = sum;
  }
)"
               : R"(      dst[pr * HW] = (v0 & 0xffff) | (int)((uint)v1 << 16);
    }
  }
)";
    xk.Body(b);
  }

  // Forward. Work-groups: dimension 0 = pixel tiles (× lanes), 1 = channel blocks,
  // 2 = image × group; consecutive work-groups share one block's weights (cache reuse).
  std::string body = R"(  const int lane = $local_id(0);
  const int blk = $group_id(1);
  const int ocl = blk * CONV_TILE + lane * CONV_VW;
  const int P = OH * OW;
  const int p0 = $group_id(0) * )" +
                     std::to_string(c.px_per_item) + R"(;
  const int ng = $group_id(2);
  const int n = ng / G;
  const int g = ng - n * G;
  const int HW = H * W;
  const int Cgp = (Cg + CONV_CP - 1) / CONV_CP * CONV_CP;  // packed channels (even for pairs)
  const int KC = KH * KW * Cgp;
)";
  body += ForEachPixel(c, [&](int t) {
    return Sub(R"(  const int pv#T = p0 + #T < P;
  const int oy#T = (p0 + #T) / OW;
  const int iy0#T = oy#T * sh - ph;
  const int ix0#T = (p0 + #T - oy#T * OW) * sw - pw;
)",
               0, t);
  });
  body += ForEachTile(c, [&](int j, int t) { return Sub("  Vtype acc#J_#T = (Vtype)0;\n", j, t); });
  // kDot4: Σx over each pixel's window (padding and padded channels count as x_zero).
  if (dot4) body += ForEachPixel(c, [&](int t) { return Sub("  int sx#T = 0;\n", 0, t); });
  if (split) {
    // int32 partial sums of the lo and hi pair products, flushed into acc (int64) at most every
    // kSplitFlushSteps pair steps; sx = Σ (x − z_x) over each pixel's window.
    body += ForEachTile(c, [&](int j, int t) {
      return Sub("  int8 lo#J_#T = (int8)0, hi#J_#T = (int8)0;\n", j, t);
    });
    body += ForEachPixel(c, [&](int t) { return Sub("  mp_i64 sx#T = 0;\n", 0, t); });
    body += "  int pending = 0;  // pair steps in lo/hi since the last flush\n";
  }
  body += !packed ? "  const $global Dtype* xg = x + (n * C + g * Cg) * HW;\n"
                  : std::string("  const $global int* xg = xq + ng * (Cgp / 2) * HW") +
                        (split ? " * 2;\n  const $global int* xsg = xs + ng * HW;\n" : ";\n");
  body += R"(  const $global Ptype* wg =
      wp + (g * (OCpad / CONV_TILE) + blk) * KC * CONV_TILE + lane * CONV_VW * CONV_CP;
  for (int ky = 0; ky < KH; ++ky) {
    for (int kx = 0; kx < KW; ++kx) {
)";
  body += ForEachPixel(c, [&](int t) {
    return Sub(R"(      const int iy#T = iy0#T + ky * dh;
      const int ix#T = ix0#T + kx * dw;
      const int ok#T = pv#T && iy#T >= 0 && iy#T < H && ix#T >= 0 && ix#T < W;
      const int off#T = ok#T ? iy#T * W + ix#T : 0;
)",
               0, t);
  });
  std::string all_ok;
  for (int t = 0; t < c.px_per_item; ++t) all_ok += (t ? " && ok" : "ok") + std::to_string(t);
  auto pair_loop = [&](bool masked) {
    // Two input channels per step; an odd Cg ends with x(ic + 1) = 0 against zero weights.
    auto step = [&](bool second) {
      std::string s = ForEachPixel(c, [&](int t) {
        std::string x0 = Sub("XVAL(Dtype_LOAD(xp, off#T))", 0, t);
        std::string x1 = second ? Sub("XVAL(Dtype_LOAD(xp + HW, off#T))", 0, t) : "0";
        if (masked) {
          x0 = Sub("(ok#T ? ", 0, t) + x0 + " : 0)";
          if (second) x1 = Sub("(ok#T ? ", 0, t) + x1 + " : 0)";
        }
        return Sub("          const short16 x#T = MP_PAIR16(", 0, t) + x0 + ", " + x1 + ");\n";
      });
      s += ForEachChannel(c, [&](int j) {
        return Sub("          const short16 w#J = vload16(0, wk + #J * CONV_STEP * 2);\n", j, 0);
      });
      s += ForEachTile(c, [&](int j, int t) {
        return Sub("          acc#J_#T += MP_MADD16(w#J, x#T);\n", j, t);
      });
      return s;
    };
    return std::string(R"(        const $global Dtype* xp = xg;
        const $global Ptype* wk = wg + (ky * KW + kx) * Cgp * CONV_TILE;
        int ic = 0;
        for (; ic + 2 <= Cg; ic += 2) {
)") + step(true) +
           R"(          xp += 2 * HW;
          wk += 2 * CONV_TILE;
        }
        if (ic < Cg) {
)" + step(false) +
           "        }\n";
  };
  // Pre-packed pairs: one 32-bit load per pixel and step, broadcast as 8 equal pairs.
  auto packed_loop = [&](bool masked, const char* first, const char* last) {
    auto xword = [&](int t, const char* at) {
      const std::string load = Sub("xp[", 0, t) + at + "]";
      return masked ? Sub("(ok#T ? ", 0, t) + load + " : 0)" : load;
    };
    std::string s = std::string("        for (int s = ") + first + "; s < " + last + "; ++s) {\n";
    s += ForEachPixel(c, [&](int t) {
      if (!split)
        return Sub("          const short16 x#T = __builtin_astype((int8)(", 0, t) +
               xword(t, Sub("off#T", 0, t).c_str()) + "), short16);\n";
      return Sub("          const short16 l#T = __builtin_astype((int8)(", 0, t) +
             xword(t, Sub("2 * off#T", 0, t).c_str()) + "), short16);\n" +
             Sub("          const short16 h#T = __builtin_astype((int8)(", 0, t) +
             xword(t, Sub("2 * off#T + 1", 0, t).c_str()) + "), short16);\n";
    });
    s += ForEachChannel(c, [&](int j) {
      return Sub("          const short16 w#J = vload16(0, wk + #J * CONV_STEP * 2);\n", j, 0);
    });
    s += ForEachTile(c, [&](int j, int t) {
      return split ? Sub("          lo#J_#T += MP_MADD16(w#J, l#T);\n"
                         "          hi#J_#T += MP_MADD16(w#J, h#T);\n",
                         j, t)
                   : Sub("          acc#J_#T += MP_MADD16(w#J, x#T);\n", j, t);
    });
    s += split ? "          xp += 2 * HW;\n" : "          xp += HW;\n";
    s += "          wk += 2 * CONV_TILE;\n        }\n";
    return s;
  };
  const std::string flush = ForEachTile(c, [&](int j, int t) {
    return Sub(
        "    acc#J_#T += (convert_long8(hi#J_#T) << 8) + convert_long8(lo#J_#T);\n"
        "    lo#J_#T = (int8)0;\n    hi#J_#T = (int8)0;\n",
        j, t);
  });
  // Four channels per step as one word of input bytes per pixel (z_x replicated where the
  // window leaves the input) against one word of four weight bytes per channel.
  auto dot4_loop = [&](bool masked) {
    auto step = [&](const char* word) {
      std::string s = ForEachPixel(c, [&](int t) {
        const std::string x = Sub(word, 0, t);
        return Sub("          const mp_u32 x#T = ", 0, t) +
               (masked ? Sub("ok#T ? ", 0, t) + x + " : (mp_u32)x_zero * 0x01010101u" : x) + ";\n" +
               Sub("          sx#T = mp_dot4_u8u8(x#T, 0x01010101u, sx#T);\n", 0, t);
      });
      s += ForEachChannel(c, [&](int j) {
        return Sub("          const mp_u32 w#J = WWORD(wk + #J * CONV_STEP * 4);\n", j, 0);
      });
      s += ForEachTile(c, [&](int j, int t) {
        return Sub("          acc#J_#T = DOT4(x#T, w#J, acc#J_#T);\n", j, t);
      });
      return s;
    };
    return std::string(R"(        const $global Dtype* xp = xg;
        const $global Ptype* wk = wg + (ky * KW + kx) * Cgp * CONV_TILE;
        int ic = 0;
        for (; ic + 4 <= Cg; ic += 4) {
)") + step("XWORD4(xp, off#T, HW)") +
           R"(          xp += 4 * HW;
          wk += 4 * CONV_TILE;
        }
        if (ic < Cg) {
)" + step("XTAIL4(xp, off#T, HW, Cg - ic)") +
           "        }\n";
  };
  auto ic_loop = [&](bool masked) {
    if (dot4) return dot4_loop(masked);
    if (input == ConvInput::kPackedPairs) {
      return std::string(R"(        const $global int* xp = xg;
        const $global Ptype* wk = wg + (ky * KW + kx) * Cgp * CONV_TILE;
)") + packed_loop(masked, "0", "Cgp / 2");
    }
    if (pairs) return pair_loop(masked);
    std::string s = R"(        const $global Dtype* xp = xg;
        const $global Ptype* wk = wg + (ky * KW + kx) * Cg * CONV_TILE;
        for (int ic = 0; ic < Cg; ++ic) {
)";
    // Padding and pixels past the end read nothing: a safe offset, then masked to zero (for
    // quantized data the zero point, x − x_zero = 0).
    s += ForEachPixel(c, [&](int t) {
      return masked ? Sub("          Xtype x#T = XVAL(Dtype_LOAD(xp, off#T));\n"
                          "          x#T = ok#T ? x#T : 0;\n",
                          0, t)
                    : Sub("          const Xtype x#T = XVAL(Dtype_LOAD(xp, off#T));\n", 0, t);
    });
    s += ForEachChannel(c, [&](int j) {
      return Sub("          const Vtype w#J = WLDV(wk + #J * CONV_STEP);\n", j, 0);
    });
    s += ForEachTile(
        c, [&](int j, int t) { return Sub("          VMAC(acc#J_#T, w#J, x#T);\n", j, t); });
    s += R"(          xp += HW;
          wk += CONV_TILE;
        }
)";
    return s;
  };
  // Interior windows (every pixel of the tile inside the input) skip the masking.
  if (!split) {
    body += "      if (" + all_ok + ") {\n" + ic_loop(false) + "      } else {\n" + ic_loop(true) +
            "      }\n    }\n  }\n";
  } else {
    body +=
        ForEachPixel(c, [&](int t) { return Sub("      sx#T += ok#T ? xsg[off#T] : 0;\n", 0, t); });
    body += R"(      const $global int* xp = xg;
      const $global Ptype* wk = wg + (ky * KW + kx) * Cgp * CONV_TILE;
      for (int s0 = 0; s0 < Cgp / 2; s0 += )" +
            std::to_string(kSplitFlushSteps) + R"() {
        const int s1 = min(s0 + )" +
            std::to_string(kSplitFlushSteps) + R"(, Cgp / 2);
        if (pending + (s1 - s0) > )" +
            std::to_string(kSplitFlushSteps) + R"() {
)" + flush + R"(          pending = 0;
        }
        pending += s1 - s0;
        if ()" +
            all_ok + ") {\n" + packed_loop(false, "s0", "s1") + "        } else {\n" +
            packed_loop(true, "s0", "s1") + "        }\n      }\n    }\n  }\n" + flush;
  }
  body += "  Atype lanes_out[CONV_VW];\n";
  body += ForEachTile(c, [&](int j, int t) {
    std::string s = Sub(R"(  VTO(acc#J_#T, lanes_out);
  for (int v = 0; v < CONV_VW; ++v) {
    const int oc = ocl + #J * CONV_STEP + v;
    if (oc < OCg && pv#T) {
      const int o = g * OCg + oc;
      const int yi = (n * G * OCg + o) * P + p0 + #T;
)",
                        j, t);
    if (!q) {
      s += R"(      float f = lanes_out[v] + (has_bias ? bias[o] : 0.0f);
      if (relu) f = f > 0.0f ? f : 0.0f;
      Dtype_STORE(y, yi, f);
    }
  }
)";
    } else {
      // The split path's weights are w − WCENTER: (WCENTER − z_w)·Σ(x − z_x) restores w − z_w.
      std::string fix = split ? Sub(" + (mp_i64)(WCENTER - wz[o]) * sx#T", 0, t) : "";
      // kDot4: Σ(x − z_x)(w − z_w) from the raw Σxw over N = KH·KW·Cgp window entries.
      if (dot4)
        fix =
            Sub(" - (mp_i64)wz[o] * sx#T - (mp_i64)x_zero * wsum[o] + (mp_i64)(KH * KW * Cgp) * "
                "x_zero * wz[o]",
                0, t);
      s += "      mp_i64 r = (mp_i64)c_zero + MP_REQUANT(lanes_out[v]" + fix +
           R"( + (has_bias ? bias[o] : 0), rq[2 * o], rq[2 * o + 1]);
      const mp_i64 lo = relu ? (mp_i64)c_zero : (mp_i64)Dtype_QMIN;
      r = r < lo ? lo : (r > Dtype_QMAX ? (mp_i64)Dtype_QMAX : r);
      Dtype_STORE(y, yi, r);
    }
  }
)";
    }
    return s;
  });

  auto& k = w.Kernel(ForwardKernelName(d));
  if (packed)
    k.In("int", "xq");
  else
    k.In("Dtype", "x");
  k.In("Ptype", "wp").In("Btype", "bias").In("int", "rq").Out("Dtype", "y");
  if (split) k.In("int", "xs").In("int", "wz");
  if (dot4) k.In("int", "wz").In("int", "wsum");
  for (const char* name :
       {"C",  "H",  "W",  "Cg", "OCg", "OCpad", "OH",       "OW",   "KH",     "KW",    "sh",
        "sw", "ph", "pw", "dh", "dw",  "G",     "has_bias", "relu", "x_zero", "c_zero"})
    k.Value("int", name);
  k.Body(body);
  return w.Source();
}

std::string Convolution::BackwardSource(const KernelTarget& target) {
  KernelWriter w(target);
  w.AddType("Dtype", DataType::kFloat32);
  const char* geometry[] = {"Cg", "H",  "W",  "KH", "KW", "sh", "sw",
                            "ph", "pw", "dh", "dw", "OH", "OW"};
  auto& im2col = w.Kernel(BackwardKernelName("im2col")).In("float", "x").Out("float", "col");
  for (const char* g : geometry) im2col.Value("int", g);
  im2col.Body(R"(  const int P = OH * OW;
  $loop(i, Cg * KH * KW * P) {
    const int p = i % P;
    const int r = i / P;
    const int kx = r % KW;
    const int ky = (r / KW) % KH;
    const int ic = r / (KW * KH);
    const int oy = p / OW;
    const int iy = oy * sh - ph + ky * dh;
    const int ix = (p - oy * OW) * sw - pw + kx * dw;
    col[i] = iy >= 0 && iy < H && ix >= 0 && ix < W ? x[(ic * H + iy) * W + ix] : 0.0f;
  }
)");
  auto& col2im = w.Kernel(BackwardKernelName("col2im")).In("float", "col").Out("float", "x");
  for (const char* g : geometry) col2im.Value("int", g);
  col2im.Body(R"(  const int P = OH * OW;
  $loop(i, Cg * H * W) {
    const int ix = i % W;
    const int iy = (i / W) % H;
    const int ic = i / (W * H);
    float v = 0.0f;
    for (int ky = 0; ky < KH; ++ky) {
      const int ty = iy + ph - ky * dh;
      if (ty < 0 || ty % sh) continue;
      const int oy = ty / sh;
      if (oy >= OH) continue;
      for (int kx = 0; kx < KW; ++kx) {
        const int tx = ix + pw - kx * dw;
        if (tx < 0 || tx % sw) continue;
        const int ox = tx / sw;
        if (ox >= OW) continue;
        v += col[((ic * KH + ky) * KW + kx) * P + oy * OW + ox];
      }
    }
    x[i] = v;
  }
)");
  // C[m][n] (+)= Σ_k A[m·a_sm + k·a_sk] · B[k·b_sk + n·b_sn]; a work-item: 4 rows of one column.
  w.Kernel(BackwardKernelName("gemm"))
      .In("float", "a")
      .In("float", "b")
      .Out("float", "c")
      .Value("int", "M")
      .Value("int", "N")
      .Value("int", "K")
      .Value("int", "a_sm")
      .Value("int", "a_sk")
      .Value("int", "b_sk")
      .Value("int", "b_sn")
      .Value("int", "c_sm")
      .Value("int", "accumulate")
      .Body(R"(  const int n = $global_id(0);
  const int m0 = $global_id(1) * 4;
  if (n >= N || m0 >= M) return;
  const int m1 = m0 + 1 < M ? m0 + 1 : m0;
  const int m2 = m0 + 2 < M ? m0 + 2 : m0;
  const int m3 = m0 + 3 < M ? m0 + 3 : m0;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  for (int k = 0; k < K; ++k) {
    const float bv = b[k * b_sk + n * b_sn];
    s0 += a[m0 * a_sm + k * a_sk] * bv;
    s1 += a[m1 * a_sm + k * a_sk] * bv;
    s2 += a[m2 * a_sm + k * a_sk] * bv;
    s3 += a[m3 * a_sm + k * a_sk] * bv;
  }
  const float s[4] = {s0, s1, s2, s3};
  for (int r = 0; r < 4 && m0 + r < M; ++r) {
    const int ci = (m0 + r) * c_sm + n;
    c[ci] = (accumulate ? c[ci] : 0.0f) + s[r];
  }
)");
  w.Kernel(BackwardKernelName("bias"))
      .In("float", "top")
      .Out("float", "db")
      .Value("int", "N")
      .Value("int", "OC")
      .Value("int", "P")
      .Body(R"(  $loop(o, OC) {
    float s = 0.0f;
    for (int n = 0; n < N; ++n) {
      const $global float* t = top + (n * OC + o) * P;
      for (int p = 0; p < P; ++p) s += t[p];
    }
    db[o] += s;
  }
)");
  return w.Source();
}

// ---------------------------------------------------------------------------------------------
// Launches

namespace {

constexpr Dim3 kGemmLocal = {16, 4, 1};

BufferRef Offset(const BufferRef& b, size_t elements, size_t element_bytes) {
  return BufferRef(b.mem, b.byte_offset + elements * element_bytes);
}

void CheckBuffer(const ConvDesc& d, const char* what, const BufferRef& b, size_t count,
                 size_t element_bytes) {
  if (!b) throw Error("convolution " + d.ToString() + ": " + what + " buffer is missing");
  if (b.byte_offset + count * element_bytes > b.mem->bytes())
    throw Error("convolution " + d.ToString() + ": " + what + " buffer holds " +
                std::to_string(b.mem->bytes() - std::min(b.byte_offset, b.mem->bytes())) +
                " bytes past its offset, " + std::to_string(count * element_bytes) + " needed");
}

}  // namespace

namespace {

/// Whether the forward pass should be im2col + GEMM (Convolution::forward_gemm). Measured on
/// PoCL with AlexNet's conv1 at batch 16 (3 input channels, 11×11, stride 4; three alternating
/// runs each, loaded machine): int8 direct 144 / 95 / 93 ms against 72 / 108 / 77 ms through
/// the GEMM — the direct kernel's steps are channel pairs, and with 3 channels one pair in two
/// is half empty — while fp32 was level (113 / 77 / 72 against 77 / 89 / 77: the columns cost
/// about what the GEMM saves). So by default only int8 with at most 4 input channels.
bool WantsForwardGemm(const Device& device, const ConvDesc& d, const ConvQuant& q) {
  if (device.backend() != Backend::kOpenCL) return false;
  if (d.type != DataType::kFloat32 && d.type != DataType::kInt8Q) return false;
  if (d.groups != 1) return false;
  for (int32_t z : q.w_zero)
    if (z != q.w_zero[0]) return false;  // the GEMM takes one weight zero point
  const std::string& env = GetSettings().conv_gemm;
  if (env == "0") return false;
  if (env == "1") return true;
  return !device.info().is_gpu && d.type == DataType::kInt8Q && d.channels <= 4 &&
         d.kernel_h * d.kernel_w >= 9;
}

/// One image's columns: col[(c·KH + ky)·KW + kx][oy·OW + ox] = x[c][iy][ix], or the input's
/// zero (0, or z_x for quantized types) where the window leaves the input. A work-item per
/// (column row, oy) walks the OW outputs.
std::string Im2colSource(const KernelTarget& target, DataType type) {
  KernelWriter w(target);
  w.AddType("Dtype", type);
  auto& k = w.Kernel(std::string("conv_im2col_") + Name(type)).In("Dtype", "x").Out("Dtype", "col");
  for (const char* name : {"H", "W", "KH", "KW", "sh", "sw", "ph", "pw", "dh", "dw", "OH", "OW",
                           "rows", "pad"})
    k.Value("int", name);
  k.Body(R"(  $loop(r, rows) {
    const int oy = r % OH;
    const int kk = r / OH;  // (c·KH + ky)·KW + kx
    const int kx = kk % KW;
    const int ky = (kk / KW) % KH;
    const int c = kk / (KW * KH);
    const int iy = oy * sh - ph + ky * dh;
    const int out = kk * OH * OW + oy * OW;
    if (iy < 0 || iy >= H) {
      for (int ox = 0; ox < OW; ++ox) Dtype_STORE(col, out + ox, pad);
      continue;
    }
    const int in = (c * H + iy) * W;
    for (int ox = 0; ox < OW; ++ox) {
      const int ix = ox * sw - pw + kx * dw;
      Dtype_STORE(col, out + ox, ix >= 0 && ix < W ? Dtype_LOAD(x, in + ix) : pad);
    }
  }
)");
  return w.Source();
}

}  // namespace

Convolution::Convolution(Device& device, const ConvDesc& desc, const ConvQuant& quant)
    : Convolution(device, desc, quant, TunedConvConfig(device, desc)) {
  if (!WantsForwardGemm(device, desc_, quant)) return;
  GemmDesc g;
  g.type = g.out_type = desc_.type;
  g.M = desc_.out_channels;
  g.N = desc_.out_h() * desc_.out_w();
  g.K = desc_.channels * desc_.kernel_h * desc_.kernel_w;
  g.weights = WeightOperand::kA;
  g.bias = desc_.bias;
  g.relu = desc_.relu;
  GemmQuant gq;
  if (IsQuantized(desc_.type)) {
    g.weights_signed = desc_.weights_signed;
    g.per_channel = quant.multiplier.size() > 1;
    g.weight_zero = quant.w_zero[0] != 0;
    gq.x_zero = quant.x_zero;
    gq.w_zero = quant.w_zero[0];
    gq.c_zero = quant.c_zero;
    gq.multiplier = quant.multiplier;
  }
  gemm_ = std::make_unique<Gemm>(device, g, gq);
  im2col_ = device.GetProgram(Im2colSource(KernelTarget::Of(device), desc_.type), "",
                              ProgramHints::OneDimensional())
                ->GetKernel(std::string("conv_im2col_") + Name(desc_.type));
  packed_.reset();  // the direct kernel's weights are not needed
}

Convolution::Convolution(Device& device, const ConvDesc& desc, const ConvQuant& quant,
                         const ConvConfig& config)
    : device_(&device), desc_(desc), config_(config) {
  desc_.Validate();
  config_.Validate();
  if (!config_.Supports(device.backend()))
    throw Error("convolution " + desc_.ToString() + ": config " + config_.ToString() +
                " needs OpenCL vector types; use vw = 1 on " + BackendName(device.backend()));
  const int oc = desc_.out_channels, ocg = oc / desc_.groups;
  const int tile = config_.channels_per_group();
  oc_padded_ = DivUp(ocg, tile) * tile;

  const KernelTarget target = KernelTarget::Of(device);
  // Channel pairs hold x − z_x in 16 bits (int8q) or as lo/hi bytes of 17 bits (int16q): a
  // zero point within the type's range (any valid quantization).
  const bool pairs_ok =
      quant.x_zero >= 0 && quant.x_zero <= (desc_.type == DataType::kInt16Q ? 65535 : 255);
  input_ = InputOf(target.backend, desc_, config_, pairs_ok);
  ProgramHints hints;
  hints.local_sizes = {{size_t(config_.lanes), 1, 1}, {kLaunch1DLocalSize, 1, 1}};
  auto program =
      device.GetProgram(ForwardSource(target, desc_, config_, pairs_ok),
                        input_ == ConvInput::kDot4 ? target.Dot4BuildOptions() : "", hints);
  const std::string suffix = std::string(Name(desc_.type)) + (desc_.weights_signed ? "_sw" : "");
  forward_ = program->GetKernel(ForwardKernelName(desc_));
  pack_ = program->GetKernel("conv_pack_" + suffix);
  if (IsPacked(input_)) xpack_ = program->GetKernel("conv_xpack_" + suffix);
  if (input_ == ConvInput::kDot4) {
    wsum_kernel_ = program->GetKernel("conv_wsum_" + suffix);
    wsum_ = device.Alloc<int32_t>(size_t(oc));
  }

  std::vector<int32_t> rq(2 * size_t(oc), 0), wz(size_t(oc), 0);
  if (IsQuantized(desc_.type)) {
    auto per = [&](size_t n, const char* what) {
      if (n != 1 && n != size_t(oc))
        throw Error("convolution " + desc_.ToString() + ": " + what + " has " + std::to_string(n) +
                    " entries; 1 or out_channels (" + std::to_string(oc) + ") expected");
    };
    per(quant.w_zero.size(), "ConvQuant::w_zero");
    per(quant.multiplier.size(), "ConvQuant::multiplier");
    for (int o = 0; o < oc; ++o) {
      const auto& m = quant.multiplier[quant.multiplier.size() == 1 ? 0 : o];
      rq[2 * o] = m.multiplier;
      rq[2 * o + 1] = m.shift;
      wz[o] = quant.w_zero[quant.w_zero.size() == 1 ? 0 : o];
    }
    x_zero_ = quant.x_zero;
    c_zero_ = quant.c_zero;
  }
  requant_ = device.Alloc<int32_t>(rq.size());
  device.Write(requant_, rq.data(), rq.size());
  w_zero_ = device.Alloc<int32_t>(wz.size());
  device.Write(w_zero_, wz.data(), wz.size());
  const size_t khw = size_t(desc_.kernel_h) * desc_.kernel_w;
  packed_ = device.Allocate(size_t(desc_.groups) * khw * PackedChannels(desc_, input_) *
                            oc_padded_ * PackedBytes(desc_.type, input_));
}

Event Convolution::SetWeights(const BufferRef& weights, Queue* queue) {
  const ConvDesc& d = desc_;
  const size_t wbytes = IsQuantized(d.type) ? SizeOf(d.type) : SizeOf(d.type);
  CheckBuffer(d, "weights", weights, d.weight_count(), wbytes);
  if (gemm_) {
    const size_t bytes = d.weight_count() * wbytes;
    if (!gemm_weights_) gemm_weights_ = device_->Allocate(bytes);
    device_->CopyOnDevice(weights.mem, weights.byte_offset, gemm_weights_.get(), 0, bytes);
    packed_ready_ = true;
    if (!IsQuantized(d.type)) return {};
    if (!gemm_sums_) gemm_sums_ = device_->Allocate(size_t(d.out_channels) * 4);
    return gemm_->ComputeWeightSums(BufferRef(gemm_weights_.get(), 0), BufferRef(gemm_sums_.get(), 0),
                                    queue);
  }
  const int cg = d.channels / d.groups, khw = d.kernel_h * d.kernel_w;
  const int total = d.groups * khw * PackedChannels(d, input_) * oc_padded_;
  pack_.ArgBuffer(weights.mem, weights.byte_offset, wbytes)
      .Arg(w_zero_)
      .ArgBuffer(packed_.get(), 0, PackedBytes(d.type, input_))
      .Arg(int32_t{cg})
      .Arg(int32_t{d.out_channels / d.groups})
      .Arg(int32_t{oc_padded_ / config_.channels_per_group()})
      .Arg(int32_t{khw})
      .Arg(int32_t{total});
  packed_ready_ = true;
  Event packed = pack_.Launch1D(size_t(total), queue);
  if (input_ != ConvInput::kDot4) return packed;
  wsum_kernel_.ArgBuffer(weights.mem, weights.byte_offset, wbytes)
      .Arg(wsum_)
      .Arg(int32_t{d.out_channels})
      .Arg(int32_t{cg * khw});
  return wsum_kernel_.Launch1D(size_t(d.out_channels), queue);
}

Event Convolution::Forward(const BufferRef& input, const BufferRef& bias, const BufferRef& output,
                           Queue* queue) {
  const ConvDesc& d = desc_;
  if (!packed_ready_) throw Error("convolution " + d.ToString() + ": Forward before SetWeights");
  const size_t es = SizeOf(d.type);
  CheckBuffer(d, "input", input, d.input_count(), es);
  CheckBuffer(d, "output", output, d.output_count(), es);
  if (d.bias) CheckBuffer(d, "bias", bias, size_t(d.out_channels), BiasBytes(d.type));
  const BufferRef bias_arg = d.bias ? bias : output;  // any valid buffer when unused
  const int ocg = d.out_channels / d.groups, oh = d.out_h(), ow = d.out_w();
  if (gemm_) {
    // Per image: its columns, then C (out_channels × OH·OW) = W · columns straight into the
    // image's NCHW output.
    const size_t cols = size_t(gemm_->desc().K) * oh * ow;
    if (!gemm_col_) gemm_col_ = device_->Allocate(cols * es);
    const int rows = gemm_->desc().K * oh;  // (column row, oy) pairs
    Event last;
    for (int n = 0; n < d.batch; ++n) {
      im2col_.ArgBuffer(input.mem, input.byte_offset + size_t(n) * d.channels * d.height * d.width * es, es)
          .ArgBuffer(gemm_col_.get(), 0, es);
      for (int v : {d.height, d.width, d.kernel_h, d.kernel_w, d.stride_h, d.stride_w, d.pad_h,
                    d.pad_w, d.dilation_h, d.dilation_w, oh, ow, rows, x_zero_})
        im2col_.Arg(int32_t{v});
      im2col_.Launch1D(size_t(rows), queue);
      GemmArgs a;
      a.a = BufferRef(gemm_weights_.get(), 0);
      a.b = BufferRef(gemm_col_.get(), 0);
      a.c = BufferRef(output.mem, output.byte_offset + size_t(n) * d.out_channels * oh * ow * es);
      if (d.bias) a.bias = bias;
      if (gemm_sums_) a.weight_sums = BufferRef(gemm_sums_.get(), 0);
      last = gemm_->Run(a, queue);
    }
    return last;
  }
  const size_t lanes = size_t(config_.lanes);
  // One launch over `images` images from `first`, reading `x` (the input or packed planes).
  auto launch = [&](int first, int images, DeviceMemory* x, size_t x_byte_offset,
                    size_t xs_byte_offset) {
    const size_t out_offset = size_t(first) * d.out_channels * oh * ow * es;
    forward_.ArgBuffer(x, x_byte_offset, IsPacked(input_) ? 4 : es)
        .ArgBuffer(packed_.get(), 0, PackedBytes(d.type, input_))
        .ArgBuffer(bias_arg.mem, d.bias ? bias_arg.byte_offset : 0, BiasBytes(d.type))
        .Arg(requant_)
        .ArgBuffer(output.mem, output.byte_offset + out_offset, es);
    if (input_ == ConvInput::kPackedSplit) forward_.ArgBuffer(x, xs_byte_offset, 4).Arg(w_zero_);
    if (input_ == ConvInput::kDot4) forward_.Arg(w_zero_).Arg(wsum_);
    for (int v : {d.channels, d.height,    d.width,      d.channels / d.groups,
                  ocg,        oc_padded_,  oh,           ow,
                  d.kernel_h, d.kernel_w,  d.stride_h,   d.stride_w,
                  d.pad_h,    d.pad_w,     d.dilation_h, d.dilation_w,
                  d.groups,   int(d.bias), int(d.relu),  x_zero_,
                  c_zero_})
      forward_.Arg(int32_t{v});
    const Dim3 global = {size_t(DivUp(oh * ow, config_.px_per_item)) * lanes,
                         size_t(DivUp(ocg, config_.channels_per_group())),
                         size_t(images) * d.groups};
    return forward_.Launch(global, {lanes, 1, 1}, queue);
  };
  if (!IsPacked(input_)) return launch(0, d.batch, input.mem, input.byte_offset, 0);

  // Pack a chunk of images, convolve it, next chunk (the queue is in order, so a pack never
  // overwrites planes a previous launch still reads).
  const size_t per_image = PackedInputBytes(d, input_);
  const int chunk = int(std::clamp<size_t>(kPackChunkBytes / per_image, 1, size_t(d.batch)));
  if (!xpacked_ || xpacked_->bytes() < chunk * per_image)
    xpacked_ = device_->Allocate(chunk * per_image);
  const size_t hw = size_t(d.height) * d.width;
  Event last;
  for (int first = 0; first < d.batch; first += chunk) {
    const int images = std::min(chunk, d.batch - first);
    // Split planes: the lo/hi words of every (image, group), then the channel sums.
    const size_t xs_offset = images * (per_image - size_t(d.groups) * hw * 4);
    xpack_.ArgBuffer(input.mem, input.byte_offset + size_t(first) * d.channels * hw * es, es)
        .ArgBuffer(xpacked_.get(), 0, 4);
    if (input_ == ConvInput::kPackedSplit) xpack_.ArgBuffer(xpacked_.get(), xs_offset, 4);
    xpack_.Arg(int32_t{d.channels / d.groups})
        .Arg(int32_t(hw))
        .Arg(int32_t{images * d.groups})
        .Arg(int32_t{x_zero_});
    xpack_.Launch1D(size_t(images) * d.groups * hw, queue);
    last = launch(first, images, xpacked_.get(), 0, xs_offset);
  }
  return last;
}

namespace {

struct BackwardKernels {
  Kernel im2col, col2im, gemm, bias;
};

BackwardKernels GetBackward(Device& device) {
  ProgramHints hints = ProgramHints::OneDimensional();
  hints.local_sizes.push_back(kGemmLocal);
  auto program =
      device.GetProgram(Convolution::BackwardSource(KernelTarget::Of(device)), "", hints);
  return {program->GetKernel(BackwardKernelName("im2col")),
          program->GetKernel(BackwardKernelName("col2im")),
          program->GetKernel(BackwardKernelName("gemm")),
          program->GetKernel(BackwardKernelName("bias"))};
}

void SetGeometry(Kernel& k, const ConvDesc& d) {
  for (int v : {d.channels / d.groups, d.height, d.width, d.kernel_h, d.kernel_w, d.stride_h,
                d.stride_w, d.pad_h, d.pad_w, d.dilation_h, d.dilation_w, d.out_h(), d.out_w()})
    k.Arg(int32_t{v});
}

void LaunchGemm(Kernel& k, const BufferRef& a, const BufferRef& b, const BufferRef& c, int M, int N,
                int K, int a_sm, int a_sk, int b_sk, int b_sn, int c_sm, bool accumulate,
                Queue* queue) {
  k.ArgBuffer(a.mem, a.byte_offset, 4)
      .ArgBuffer(b.mem, b.byte_offset, 4)
      .ArgBuffer(c.mem, c.byte_offset, 4);
  for (int v : {M, N, K, a_sm, a_sk, b_sk, b_sn, c_sm, int(accumulate)}) k.Arg(int32_t{v});
  k.Launch({size_t(N), size_t(DivUp(M, 4)), 1}, kGemmLocal, queue);
}

}  // namespace

void Convolution::BackwardData(const BufferRef& top_diff, const BufferRef& weights,
                               const BufferRef& bottom_diff, Queue* queue) {
  const ConvDesc& d = desc_;
  if (d.type != DataType::kFloat32)
    throw Error("convolution " + d.ToString() + ": backward is fp32 only");
  CheckBuffer(d, "top_diff", top_diff, d.output_count(), 4);
  CheckBuffer(d, "weights", weights, d.weight_count(), 4);
  CheckBuffer(d, "bottom_diff", bottom_diff, d.input_count(), 4);
  BackwardKernels k = GetBackward(*device_);
  const int cg = d.channels / d.groups, ocg = d.out_channels / d.groups;
  const int kc = cg * d.kernel_h * d.kernel_w, p = d.out_h() * d.out_w();
  if (!col_ || col_->bytes() < size_t(kc) * p * 4) col_ = device_->Allocate(size_t(kc) * p * 4);
  const BufferRef col(col_.get(), 0);
  for (int n = 0; n < d.batch; ++n) {
    for (int g = 0; g < d.groups; ++g) {
      // col (kc × P) = W_g^T (kc × ocg) · top_g (ocg × P)
      LaunchGemm(k.gemm, Offset(weights, size_t(g) * ocg * kc, 4),
                 Offset(top_diff, (size_t(n) * d.out_channels + size_t(g) * ocg) * p, 4), col, kc,
                 p, ocg, /*a_sm=*/1, /*a_sk=*/kc, /*b_sk=*/p, /*b_sn=*/1, /*c_sm=*/p, false, queue);
      const BufferRef dst =
          Offset(bottom_diff, (size_t(n) * d.channels + size_t(g) * cg) * d.height * d.width, 4);
      k.col2im.ArgBuffer(col.mem, 0, 4).ArgBuffer(dst.mem, dst.byte_offset, 4);
      SetGeometry(k.col2im, d);
      k.col2im.Launch1D(size_t(cg) * d.height * d.width, queue);
    }
  }
}

void Convolution::BackwardWeights(const BufferRef& top_diff, const BufferRef& input,
                                  const BufferRef& weight_diff, const BufferRef& bias_diff,
                                  Queue* queue) {
  const ConvDesc& d = desc_;
  if (d.type != DataType::kFloat32)
    throw Error("convolution " + d.ToString() + ": backward is fp32 only");
  CheckBuffer(d, "top_diff", top_diff, d.output_count(), 4);
  CheckBuffer(d, "input", input, d.input_count(), 4);
  CheckBuffer(d, "weight_diff", weight_diff, d.weight_count(), 4);
  BackwardKernels k = GetBackward(*device_);
  const int cg = d.channels / d.groups, ocg = d.out_channels / d.groups;
  const int kc = cg * d.kernel_h * d.kernel_w, p = d.out_h() * d.out_w();
  if (!col_ || col_->bytes() < size_t(kc) * p * 4) col_ = device_->Allocate(size_t(kc) * p * 4);
  const BufferRef col(col_.get(), 0);
  for (int n = 0; n < d.batch; ++n) {
    for (int g = 0; g < d.groups; ++g) {
      const BufferRef src =
          Offset(input, (size_t(n) * d.channels + size_t(g) * cg) * d.height * d.width, 4);
      k.im2col.ArgBuffer(src.mem, src.byte_offset, 4).ArgBuffer(col.mem, 0, 4);
      SetGeometry(k.im2col, d);
      k.im2col.Launch1D(size_t(kc) * p, queue);
      // dW_g (ocg × kc) += top_g (ocg × P) · col^T (P × kc)
      LaunchGemm(k.gemm, Offset(top_diff, (size_t(n) * d.out_channels + size_t(g) * ocg) * p, 4),
                 col, Offset(weight_diff, size_t(g) * ocg * kc, 4), ocg, kc, p, /*a_sm=*/p,
                 /*a_sk=*/1, /*b_sk=*/1, /*b_sn=*/p, /*c_sm=*/kc, true, queue);
    }
  }
  if (bias_diff) {
    CheckBuffer(d, "bias_diff", bias_diff, size_t(d.out_channels), 4);
    k.bias.ArgBuffer(top_diff.mem, top_diff.byte_offset, 4)
        .ArgBuffer(bias_diff.mem, bias_diff.byte_offset, 4)
        .Arg(int32_t{d.batch})
        .Arg(int32_t{d.out_channels})
        .Arg(int32_t{p});
    k.bias.Launch1D(size_t(d.out_channels), queue);
  }
}

// ---------------------------------------------------------------------------------------------
// References

void ConvForwardReference(const ConvDesc& d, const ConvQuant& quant, const void* input,
                          const void* weights, const void* bias, void* output) {
  d.Validate();
  const bool q = IsQuantized(d.type);
  const int cg = d.channels / d.groups, ocg = d.out_channels / d.groups;
  const int oh = d.out_h(), ow = d.out_w();
  for (int n = 0; n < d.batch; ++n)
    for (int o = 0; o < d.out_channels; ++o) {
      const int g = o / ocg;
      const int32_t wz = q ? quant.w_zero[quant.w_zero.size() == 1 ? 0 : o] : 0;
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double facc = 0.0;
          int64_t iacc = 0;
          for (int ky = 0; ky < d.kernel_h; ++ky)
            for (int kx = 0; kx < d.kernel_w; ++kx) {
              const int iy = oy * d.stride_h - d.pad_h + ky * d.dilation_h;
              const int ix = ox * d.stride_w - d.pad_w + kx * d.dilation_w;
              if (iy < 0 || iy >= d.height || ix < 0 || ix >= d.width) continue;
              for (int ic = 0; ic < cg; ++ic) {
                const size_t xi =
                    ((size_t(n) * d.channels + g * cg + ic) * d.height + iy) * d.width + ix;
                const size_t wi = ((size_t(o) * cg + ic) * d.kernel_h + ky) * d.kernel_w + kx;
                if (q) {
                  iacc += int64_t(host::LoadQ(d.type, input, xi) - quant.x_zero) *
                          (host::LoadQ(d.type, weights, wi, d.weights_signed) - wz);
                } else {
                  facc += double(host::LoadF(d.type, input, xi)) *
                          double(host::LoadF(d.type, weights, wi));
                }
              }
            }
          const size_t yi = ((size_t(n) * d.out_channels + o) * oh + oy) * ow + ox;
          if (q) {
            if (d.bias)
              iacc += d.type == DataType::kInt16Q ? static_cast<const int64_t*>(bias)[o]
                                                  : static_cast<const int32_t*>(bias)[o];
            const auto& m = quant.multiplier[quant.multiplier.size() == 1 ? 0 : o];
            host::StoreQ(d.type, output, yi, quant.c_zero + host::Requant(d.type, iacc, m),
                         d.relu ? quant.c_zero : INT64_MIN);
          } else {
            if (d.bias) facc += static_cast<const float*>(bias)[o];
            if (d.relu && facc < 0) facc = 0;
            host::StoreF(d.type, output, yi, static_cast<float>(facc));
          }
        }
    }
}

void ConvBackwardDataReference(const ConvDesc& d, const float* top, const float* w, float* bottom) {
  d.Validate();
  const int cg = d.channels / d.groups, ocg = d.out_channels / d.groups;
  const int oh = d.out_h(), ow = d.out_w();
  std::vector<double> acc(d.input_count(), 0.0);
  for (int n = 0; n < d.batch; ++n)
    for (int o = 0; o < d.out_channels; ++o) {
      const int g = o / ocg;
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          const double t = top[((size_t(n) * d.out_channels + o) * oh + oy) * ow + ox];
          for (int ic = 0; ic < cg; ++ic)
            for (int ky = 0; ky < d.kernel_h; ++ky)
              for (int kx = 0; kx < d.kernel_w; ++kx) {
                const int iy = oy * d.stride_h - d.pad_h + ky * d.dilation_h;
                const int ix = ox * d.stride_w - d.pad_w + kx * d.dilation_w;
                if (iy < 0 || iy >= d.height || ix < 0 || ix >= d.width) continue;
                acc[((size_t(n) * d.channels + g * cg + ic) * d.height + iy) * d.width + ix] +=
                    t * w[((size_t(o) * cg + ic) * d.kernel_h + ky) * d.kernel_w + kx];
              }
        }
    }
  for (size_t i = 0; i < acc.size(); ++i) bottom[i] = static_cast<float>(acc[i]);
}

void ConvBackwardWeightsReference(const ConvDesc& d, const float* top, const float* x, float* wdiff,
                                  float* bdiff) {
  d.Validate();
  const int cg = d.channels / d.groups, ocg = d.out_channels / d.groups;
  const int oh = d.out_h(), ow = d.out_w();
  for (int o = 0; o < d.out_channels; ++o) {
    const int g = o / ocg;
    double b = 0.0;
    for (int ic = 0; ic < cg; ++ic)
      for (int ky = 0; ky < d.kernel_h; ++ky)
        for (int kx = 0; kx < d.kernel_w; ++kx) {
          double s = 0.0;
          for (int n = 0; n < d.batch; ++n)
            for (int oy = 0; oy < oh; ++oy)
              for (int ox = 0; ox < ow; ++ox) {
                const int iy = oy * d.stride_h - d.pad_h + ky * d.dilation_h;
                const int ix = ox * d.stride_w - d.pad_w + kx * d.dilation_w;
                if (iy < 0 || iy >= d.height || ix < 0 || ix >= d.width) continue;
                s += double(top[((size_t(n) * d.out_channels + o) * oh + oy) * ow + ox]) *
                     x[((size_t(n) * d.channels + g * cg + ic) * d.height + iy) * d.width + ix];
              }
          wdiff[((size_t(o) * cg + ic) * d.kernel_h + ky) * d.kernel_w + kx] +=
              static_cast<float>(s);
        }
    if (bdiff) {
      for (int n = 0; n < d.batch; ++n)
        for (int p = 0; p < oh * ow; ++p) b += top[(size_t(n) * d.out_channels + o) * oh * ow + p];
      bdiff[o] += static_cast<float>(b);
    }
  }
}

}  // namespace mpcaffe::libdnn
