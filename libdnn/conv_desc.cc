// libdnn/conv_desc.cc — convolution descriptions (ConvDesc, ConvQuant), tiling configurations
// (ConvConfig: schema, defaults, candidates) and the forward kernel's input modes (ConvInput).
#include <algorithm>
#include <string>

#include "device/error.h"
#include "libdnn/conv.h"
#include "libdnn/conv_families.h"
#include "libdnn/conv_internal.h"
#include "libdnn/typed_host.h"
#include "quant/int4.h"

namespace mpcaffe::libdnn {

namespace conv_internal {

/// Packed-weight element type of the forward kernel: float for float types, the difference
/// type for quantized ones (w − z_w fits it), 16 bits for every channel-pair input.
const char* PackedType(DataType t, ConvInput input) {
  switch (t) {
    case DataType::kFloat32:
    case DataType::kFloat16:
      return "float";
    case DataType::kInt8Q:
      return input == ConvInput::kDot4 || IsByteQuads(input) ? "mp_u8" : "mp_i16";
    case DataType::kInt16Q:
      return input == ConvInput::kPackedSplit ? "mp_i16" : "int";
  }
  return "float";
}
size_t PackedBytes(DataType t, ConvInput input) {
  if (input == ConvInput::kDot4 || IsByteQuads(input)) return 1;
  return t == DataType::kInt8Q || input == ConvInput::kPackedSplit ? 2 : 4;
}

/// How the forward kernel reads its input (see ConvInput), on either backend. The pair forms
/// need vectors of 8 output channels (one 16-lane pair product per vector; KernelHelper::
/// kPairProduct16 on both dialects) and `x_fits` (x − z_x within
/// 17 bits: a zero point in the type's range). The packed weights then interleave channel pairs
/// (wp[…][ic / 2][t][ic % 2], an odd Cg padded with a zero channel) and one MP_MADD16 adds
/// w(ic)·x(ic) + w(ic + 1)·x(ic + 1) for 8 output channels: both factors fit 16 bits and the
/// pair sums int32, so the result is the same integer.
ConvInput InputOf(Backend backend, const ConvDesc& d, const ConvConfig& c, bool x_fits) {
  // kp = 4 replicates z_x into the bytes of padding: a zero point within uint8. The grid form
  // reads 16 neighbouring output columns under a step with one load: stride 1, or tap quads
  // packed at the stride (a strided layer of more channels takes the type's usual path below,
  // the tile as it is).
  if (d.type == DataType::kInt8Q && c.grid() && x_fits && GridApplies(d))
    return ConvInput::kQuadGrid;
  if (d.type == DataType::kInt8Q && c.kp == 4 && x_fits && !c.grid())
    return c.vw == 16 ? ConvInput::kPackedQuads : ConvInput::kDot4;
  // Tiles read 16 neighbouring pixels' rows with one stride: a window at stride 1 over the
  // padded input, or a subsampled 1×1 window; elsewhere the same tile in byte quads.
  if (d.type == DataType::kInt8Q && c.kp == 64 && x_fits)
    return TilesApply(d) ? ConvInput::kPackedTiles : ConvInput::kPackedQuads;
  if (c.vw != 8 || !x_fits) return ConvInput::kDirect;
  const int cg = d.channels / d.groups;
  // Packed planes are indexed with int: one image's words (two per pair for int16) and the
  // per-pixel channel sum Σ (x − z_x) (|x − z_x| ≤ 65535, int32 up to Cg = 32768) must fit.
  const double words = double(d.channels + d.groups) * d.height * d.width * 2;
  if (words >= 2147483647.0)
    return d.type == DataType::kInt8Q ? ConvInput::kPairs : ConvInput::kDirect;
  switch (d.type) {
    case DataType::kInt8Q: {
      // Packing costs a pass over the input; it pays when the forward kernel reads each input
      // pixel often: (channel blocks) · KH·KW / (stride_h·stride_w) times; packed ahead from a
      // reuse of 9, level near 2, behind at 1 (docs/BENCHMARKS.md, "Default configurations").
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
bool IsPacked(ConvInput m) {
  return m == ConvInput::kPackedPairs || m == ConvInput::kPackedSplit || IsByteQuads(m);
}
bool IsByteQuads(ConvInput m) {
  return m == ConvInput::kPackedQuads || m == ConvInput::kPackedTiles || m == ConvInput::kQuadGrid;
}

/// Input channels per packed step: 4 (kDot4, byte quads), 2 (channel pairs) or 1.
int ChannelsPerStep(ConvInput m) {
  return m == ConvInput::kDot4 || IsByteQuads(m) ? 4 : m == ConvInput::kDirect ? 1 : 2;
}

/// Input channels per group as packed: Cg rounded up to the channels per step.
int PackedChannels(const ConvDesc& d, ConvInput m) {
  const int cg = d.channels / d.groups, cp = ChannelsPerStep(m);
  return (cg + cp - 1) / cp * cp;
}

size_t PackedWindow(const ConvDesc& d, ConvInput m) {
  if (m == ConvInput::kPackedQuads) {
    const QuadLayout l = QuadLayoutOf(d);
    return size_t(d.kernel_h) * l.kw * l.planes * 4;
  }
  if (m == ConvInput::kPackedTiles)
    return size_t(d.kernel_h) * d.kernel_w * TileLayoutOf(d).blocks * 64;
  // kQuadGrid: the channel quads' packing (wp[g][blk][tap][q][t], a word per channel t), or
  // the tap quads' (wp[g][blk][ky][kq][ic][t]).
  if (m == ConvInput::kQuadGrid) {
    const QuadGridLayout l = QuadGridLayoutOf(d);
    if (l.taps) return size_t(d.kernel_h) * l.planes * 4;
  }
  return size_t(d.kernel_h) * d.kernel_w * PackedChannels(d, m);
}

QuadLayout QuadLayoutOf(const ConvDesc& d) {
  const int cg = d.channels / d.groups, cq = DivUp(cg, 4), kwq = DivUp(d.kernel_w, 4);
  QuadLayout l;
  l.taps = cg < 4 && d.kernel_w > 1 && !QuadsSubsample(d) && cg * kwq <= cq * d.kernel_w;
  if (l.taps) {
    l.planes = cg;
    l.h = d.height + 2 * d.pad_h;
    l.w = d.width + 2 * d.pad_w;
    l.kw = kwq;
    l.sh = d.stride_h, l.sw = d.stride_w;
    l.dw = 4 * d.dilation_w;
    return l;
  }
  const bool sub = QuadsSubsample(d);
  l.planes = cq;
  l.h = sub ? d.out_h() : d.height;
  l.w = sub ? d.out_w() : d.width;
  l.kw = d.kernel_w;
  l.sh = sub ? 1 : d.stride_h, l.sw = sub ? 1 : d.stride_w;
  l.ph = d.pad_h, l.pw = d.pad_w;
  l.dw = d.dilation_w;
  return l;
}

TileLayout TileLayoutOf(const ConvDesc& d) {
  const bool sub = QuadsSubsample(d);
  TileLayout l;
  l.h = sub ? d.out_h() : d.height + 2 * d.pad_h;
  l.w = sub ? d.out_w() : d.width + 2 * d.pad_w;
  l.grid = d.out_h() * l.w;
  // The last work-item's rows start before grid + 64 (px ≤ 48) and reach (KH − 1)·dh rows and
  // (KW − 1)·dw columns further: the forward kernel computes the same sum (TilePrologue).
  l.plane = DivUp(l.grid + 64 + (d.kernel_h - 1) * d.dilation_h * l.w +
                      (d.kernel_w - 1) * d.dilation_w,
                  16) *
            16;
  l.blocks = DivUp(d.channels / d.groups, 64);
  return l;
}

bool GridTapQuads(const ConvDesc& d) { return d.channels / d.groups < 4 && d.kernel_w > 1; }

bool UsesTapQuads(const ConvDesc& d, ConvInput m) {
  return (m == ConvInput::kPackedQuads && QuadLayoutOf(d).taps) ||
         (m == ConvInput::kQuadGrid && GridTapQuads(d));
}

bool GridApplies(const ConvDesc& d) {
  return (d.stride_h == 1 && d.stride_w == 1) || GridTapQuads(d);
}

QuadGridLayout QuadGridLayoutOf(const ConvDesc& d) {
  QuadGridLayout l;
  const int cg = d.channels / d.groups, xb = DivUp(d.out_w(), 16);
  l.taps = GridTapQuads(d);
  l.grid = 16 * d.out_h() * xb;
  // The last word a vector reads: its row's last block, 15 lanes on, at the window's far tap
  // (tap quads: the far window row; the columns are the output's).
  const int sh = l.taps ? d.stride_h : 1, kw = l.taps ? 1 : d.kernel_w;
  l.w = l.taps ? 16 * xb : d.width + 2 * d.pad_w;
  const long last = long((d.out_h() - 1) * sh + (d.kernel_h - 1) * d.dilation_h) * l.w + 16L * xb -
                    1 + long(kw - 1) * d.dilation_w;
  l.h = int(last / l.w) + 1;
  l.plane = l.h * l.w;
  l.kq = l.taps ? DivUp(d.kernel_w, 4) : 1;
  l.planes = l.taps ? cg * l.kq : DivUp(cg, 4);
  return l;
}

/// Bytes of one image's packed input: per group ⌈Cg/2⌉ planes of 32-bit pairs (int16: a lo and
/// a hi word per pixel, then one plane of channel sums), or byte quads' planes (QuadLayout).
size_t PackedInputBytes(const ConvDesc& d, ConvInput m) {
  const size_t hw = size_t(d.height) * d.width, pairs = size_t(d.channels / d.groups + 1) / 2;
  if (m == ConvInput::kPackedQuads) {
    const QuadLayout l = QuadLayoutOf(d);
    return size_t(d.groups) * size_t(l.planes) * size_t(l.h) * size_t(l.w) * 4;
  }
  if (m == ConvInput::kPackedTiles) {
    const TileLayout l = TileLayoutOf(d);
    return size_t(d.groups) * size_t(l.blocks) * size_t(l.plane) * 64;
  }
  if (m == ConvInput::kQuadGrid) {
    const QuadGridLayout l = QuadGridLayoutOf(d);
    return size_t(d.groups) * size_t(l.planes) * size_t(l.plane) * 4;
  }
  if (m == ConvInput::kPackedPairs) return size_t(d.groups) * pairs * hw * 4;
  if (m == ConvInput::kPackedSplit) return size_t(d.groups) * (pairs * 2 + 1) * hw * 4;
  return 0;
}

/// Bias element bytes: fp32 for float types, the accumulator for quantized ones.
size_t BiasBytes(DataType t) { return TraitsOf(t).acc_bytes(); }

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

}  // namespace conv_internal

using conv_internal::DivUp;
using host::Field;

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
size_t ConvDesc::weight_bytes() const {
  if (weight_bits == 4)
    return size_t(out_channels) * quant::Int4RowBytes(weight_count() / size_t(out_channels));
  return weight_count() * SizeOf(type);
}
size_t ConvDesc::output_count() const { return size_t(batch) * out_channels * out_h() * out_w(); }

std::string ConvDesc::ToString() const {
  std::ostringstream s;
  s << Name(type) << " n" << batch << " c" << channels << " h" << height << " w" << width << " o"
    << out_channels << " k" << kernel_h << "x" << kernel_w << " s" << stride_h << "x" << stride_w
    << " p" << pad_h << "x" << pad_w << " d" << dilation_h << "x" << dilation_w << " g" << groups;
  if (bias) s << " bias";
  if (relu) s << " relu";
  if (residual) s << " res";
  if (weights_signed) s << " signed";
  if (weight_bits != 8) s << " w" << weight_bits;
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
  if (weight_bits != 8 && weight_bits != 4) fail(Field("weight_bits", weight_bits) + " must be 8 or 4");
  if (weight_bits == 4 && (type != DataType::kInt8Q || !weights_signed))
    fail("4-bit weights (weight_bits 4) need type int8q with weights_signed");
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
           {"px", &ConvConfig::px_per_item, ValueRange(1, 48)},
           {"v", &ConvConfig::vw, {1, 2, 4, 8, 16}},
           {"k", &ConvConfig::kp, {1, 4, 64}, 1, /*always_printed=*/false}});
  return schema;
}

std::string ConvConfig::ToString() const { return Schema().Print(*this); }

void ConvConfig::Validate() const {
  const ConfigSchema<ConvConfig>& s = Schema();
  const int row_tiles = px_per_item / 16;
  const bool tiles_fit = px_per_item % 16 == 0 && vw == 16 && lanes == 1 &&
                         oc_per_item * row_tiles + row_tiles + oc_per_item <= 8;
  // The grid form: oc·vw channels by px/16 vectors of 16 pixels, one accumulator each, within
  // AVX-512's 32 registers beside the loaded input vectors.
  const bool grid_fits = lanes == 1 && vw >= 4 && oc_per_item * vw * row_tiles <= 24;
  if (!s.InRange(*this) || (!grid() && oc_per_item * px_per_item > 64) ||
      (kp != 64 && !grid() && px_per_item > 16) || (kp == 4 && !grid() && vw != 1 && vw != 16) ||
      (grid() && !grid_fits) || (kp == 64 && !tiles_fit))
    throw Error("convolution config " + ToString() + ": lanes must be in [" + s.AllowedText("l") +
                "], oc in [" + s.AllowedText("oc") + "], px in [1…16] (k64 and k4's grid " +
                "form: [" + s.AllowedText("px") + "]) with oc·px ≤ 64 (not in the grid form), vw " +
                s.AllowedText("v") + ", kp " + s.AllowedText("k") +
                " (4 with vw 1 or 16, or px a multiple of 16 with l1, vw 4, 8 or 16 and " +
                "oc·vw·px/16 ≤ 24; 64 with vw 16, l1, px a multiple of 16 and oc·px/16 + "
                "px/16 + oc ≤ 8)");
}

ConvConfig DefaultConvConfig(const DeviceInfo& device, DataType type) {
  return DefaultRowFor(DirectConvDefaults(), "conv", TargetProfile::Of(device), type).config;
}

ConvConfig DefaultConvConfig(const DeviceInfo& device, const ConvDesc& desc) {
  if (const auto shape =
          DefaultRowFor(DirectShapeDefaults(), "conv", TargetProfile::Of(device), desc).config)
    return *shape;
  return DefaultConvConfig(device, desc.type);
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
  // fp32: tiles of 16-channel vectors (whole registers at AVX-512).
  if (type == DataType::kFloat32)
    for (const ConvConfig& c : {ConvConfig{1, 4, 3, 16}, ConvConfig{1, 4, 4, 16},
                                ConvConfig{1, 2, 6, 16}})
      if (!(c == out[0])) out.push_back(c);
  // int8 where byte quad products run in a helper: tiles of byte-quad vectors of 16 channels.
  if (type == DataType::kInt8Q && TargetProfile::Of(device).byte_quad_products)
    for (const ConvConfig& c : {ConvConfig{1, 4, 3, 16, 4}, ConvConfig{1, 2, 6, 16, 4},
                                ConvConfig{1, 4, 4, 16, 4}, ConvConfig{1, 2, 4, 16, 4},
                                ConvConfig{1, 3, 4, 16, 4}})
      if (!(c == out[0])) out.push_back(c);
  // ... and the grid form's vectors of 16 pixels (stride 1).
  if (type == DataType::kInt8Q && TargetProfile::Of(device).byte_quad_products &&
      device.backend == Backend::kOpenCL)
    for (const ConvConfig& c :
         {ConvConfig{1, 1, 16, 16, 4}, ConvConfig{1, 1, 32, 8, 4}, ConvConfig{1, 1, 48, 8, 4}})
      if (!(c == out[0])) out.push_back(c);
  // int8 where byte tile products run in a helper: tiles of 16 pixels by 16 channels.
  if (type == DataType::kInt8Q && TargetProfile::Of(device).byte_tile_products)
    for (const ConvConfig& c : {ConvConfig{1, 2, 32, 16, 64}, ConvConfig{1, 1, 48, 16, 64},
                                ConvConfig{1, 3, 16, 16, 64}, ConvConfig{1, 2, 16, 16, 64},
                                ConvConfig{1, 1, 32, 16, 64}})
      if (!(c == out[0])) out.push_back(c);
  return out;
}
}  // namespace mpcaffe::libdnn
