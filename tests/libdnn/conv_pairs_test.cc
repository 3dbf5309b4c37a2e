// tests/libdnn/conv_pairs_test.cc — the convolution kernels' exact integer paths against the
// plain C++ reference on their edge cases: int8 channel pairs (packed planes, byte loads),
// int8 Winograd F(2×2), int8 four-channel dot products, int16 split pairs with extreme data, and
// few-channel layers through im2col + GEMM.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "device/device.h"
#include "device/settings.h"
#include "libdnn/conv.h"
#include "libdnn/conv_winograd.h"
#include "quant/fixed_point.h"
#include "tests/libdnn/conv_check.h"
#include "tests/testing/sweep.h"

namespace mpcaffe::libdnn {
namespace {

using namespace conv_check;  // NOLINT: the convolution tests' shared vocabulary

/// Whether ExpectExact checks the input form (ConvInput) a configuration takes: OpenCL's
/// vectors of 8 and the 4-channel dot products choose it from the shape.
bool ChecksInput(const ConvConfig& c, Backend backend) {
  return (backend == Backend::kOpenCL && c.vw == 8) || c.kp == 4;
}

/// Runs `d` on the device with the configs in `configs` that the backend supports and expects
/// the reference's bytes; `want_input` is the ConvInput expected where ChecksInput. Every config
/// under the exhaustive sweep; else, for a test's case number `turn` (≥ 0), the supported
/// configs in turn — config `turn` mod n, and the first that checks the input form when that one
/// does not — so that a test's cases meet every config and each case's input form is checked,
/// at one or two compiles a case instead of n (each config is a program of its own).
void ExpectExact(const ConvDesc& d, const ConvQuant& quant, const Bytes& x, const Bytes& w,
                 const Bytes& bias, const std::vector<ConvConfig>& configs, ConvInput want_input,
                 int turn = -1) {
  Device& dev = DefaultDevice();
  Bytes want(d.output_count() * SizeOf(d.type));
  ConvForwardReference(d, quant, x.data(), w.data(), d.bias ? bias.data() : nullptr, want.data());
  auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, bias);
  std::vector<ConvConfig> run;
  for (const ConvConfig& c : configs)
    if (c.Supports(dev.backend())) run.push_back(c);
  if (turn >= 0 && !test_support::ExhaustiveSweep() && run.size() > 1) {
    const ConvConfig chosen = run[size_t(turn) % run.size()];
    std::vector<ConvConfig> sample = {chosen};
    if (!ChecksInput(chosen, dev.backend()))
      for (const ConvConfig& c : run)
        if (ChecksInput(c, dev.backend())) {
          sample.push_back(c);
          break;
        }
    run = sample;
  }
  int runs = 0;
  for (const ConvConfig& c : run) {
    ++runs;
    SCOPED_TRACE(c.ToString() + " " + d.ToString());
    Convolution conv(dev, d, quant, c);
    if (dev.backend() == Backend::kOpenCL && c.vw == 8) {
      EXPECT_EQ(conv.input(), want_input);
    }
    if (c.kp == 4) {
      EXPECT_EQ(conv.input(), want_input);
    }
    auto ym = dev.Allocate(want.size());
    conv.SetWeights(BufferRef(wm.get(), 0));
    conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
    const Bytes got = Download(dev, ym, want.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[i] && mismatches++ < 5)
        ADD_FAILURE() << "output byte " << i << ": got " << int(got[i]) << " want " << int(want[i]);
    EXPECT_EQ(mismatches, 0u);
  }
  EXPECT_GT(runs, 0) << d.ToString() << ": the backend supports none of the configurations";
}

struct PairCase {
  int n, c, h, w, oc, k, stride, pad, dilation, groups;
  bool is_signed;
  int x_zero;  // -1: MakeQuant's
};

ConvDesc PairDesc(DataType t, const PairCase& cs) {
  ConvDesc d;
  d.type = t;
  d.batch = cs.n;
  d.channels = cs.c;
  d.height = cs.h;
  d.width = cs.w;
  d.out_channels = cs.oc;
  d.kernel_h = d.kernel_w = cs.k;
  d.stride_h = d.stride_w = cs.stride;
  d.pad_h = d.pad_w = cs.pad;
  d.dilation_h = d.dilation_w = cs.dilation;
  d.groups = cs.groups;
  d.bias = true;
  d.relu = cs.is_signed;
  d.weights_signed = cs.is_signed;
  return d;
}

/// A case's description, quantization (MakeQuant's, per channel when `per_channel`, with the
/// case's input zero point when it gives one) and random operands.
struct PairOperands {
  ConvDesc d;
  ConvQuant quant;
  Bytes x, w, bias;
};

PairOperands MakePairOperands(DataType t, const PairCase& cs, bool per_channel,
                              std::mt19937& rng) {
  PairOperands o;
  o.d = PairDesc(t, cs);
  o.quant = MakeQuant(o.d, per_channel, rng);
  if (cs.x_zero >= 0) o.quant.x_zero = cs.x_zero;
  o.x = RandomQ(t, o.d.input_count(), false, rng);
  o.w = RandomQ(t, o.d.weight_count(), o.d.weights_signed, rng);
  o.bias = RandomBias(o.d, rng);
  return o;
}

/// ExpectExact of a case's operands.
void ExpectExact(const PairOperands& o, const std::vector<ConvConfig>& configs,
                 ConvInput want_input, int turn) {
  ExpectExact(o.d, o.quant, o.x, o.w, o.bias, configs, want_input, turn);
}

TEST(ConvForward, Int8ChannelPairsMatchTheReference) {
  // int8 with vectors of 8 takes input channels in pairs (16-bit pair products), packed into
  // planes first where the input is read often (3×3 and larger windows), formed from byte
  // loads elsewhere (1×1 windows with few channel blocks): odd and even channels per group,
  // signed weights, padding, stride, dilation, batches over several pack chunks (256 KiB of
  // planes each), two vw = 8 tiles, and an input zero point beyond uint8 (x − z_x no longer
  // fits 16 bits: the one-channel loop instead).
  std::mt19937 rng(2026);
  const ConvInput packed = ConvInput::kPackedPairs, loads = ConvInput::kPairs;
  int turn = 0;
  for (const auto& [cs, want] :
       {std::pair{PairCase{2, 3, 11, 13, 20, 3, 2, 1, 1, 1, false, -1}, packed},
        {PairCase{2, 10, 9, 8, 12, 3, 1, 1, 1, 2, true, -1}, packed},
        {PairCase{2, 8, 7, 7, 9, 1, 1, 0, 1, 1, false, -1}, loads},
        {PairCase{3, 7, 12, 11, 40, 1, 2, 0, 1, 1, true, -1}, loads},
        {PairCase{2, 1, 6, 5, 8, 2, 1, 0, 1, 1, false, -1}, packed},
        {PairCase{2, 15, 10, 9, 21, 3, 2, 2, 2, 3, true, -1}, packed},  // dilation, groups of 5
        {PairCase{4, 9, 60, 60, 8, 3, 1, 1, 1, 1, false, -1}, packed},  // 3 images per chunk
        {PairCase{2, 5, 8, 9, 16, 3, 1, 1, 1, 1, false, 40000}, ConvInput::kDirect}}) {
    ExpectExact(MakePairOperands(DataType::kInt8Q, cs, cs.is_signed, rng),
                {DefaultConvConfig(DefaultDevice().info()), {1, 2, 4, 8}}, want, turn++);
  }
}

/// int8q Winograd F(2×2) (libdnn/conv_winograd.h) on the given operands against the reference,
/// bit-exact; returns the outputs inside (0, 255) (so a test knows it is not all saturation).
size_t ExpectWinogradExact(const ConvDesc& d, const ConvQuant& quant, const Bytes& x,
                           const Bytes& w, const Bytes& bias, const Bytes& res,
                           const WinogradConfig& config) {
  Bytes want(d.output_count());
  ConvForwardReference(d, quant, x.data(), w.data(), d.bias ? bias.data() : nullptr, want.data(),
                       res.data());
  Convolution conv = Convolution::Winograd(DefaultDevice(), d, config, quant);
  EXPECT_TRUE(conv.forward_winograd());
  const Bytes got = RunForward(conv, x, w, bias, res, want.size());
  size_t bad = 0, inside = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    inside += want[i] > 0 && want[i] < 255;
    if (got[i] != want[i] && bad++ < 5)
      ADD_FAILURE() << d.ToString() << " " << config.ToString() << ": output " << i << " got "
                    << int(got[i]) << " want " << int(want[i]);
  }
  EXPECT_EQ(bad, 0u) << d.ToString();
  return inside;
}

TEST(ConvForward, Int8WinogradMatchesTheReferenceExactly) {
  // F(2×2) in integers (2G, 16-bit pair products, the sums shifted right by 2): two images, an
  // odd channel count (the last pair half empty), uneven padding (partial tiles both ways),
  // output channels past the tile, per-layer and per-channel weights, signed weights, with and
  // without the fused bias, residual and ReLU, two groups; two tiles.
  std::mt19937 rng(2027);
  ConvDesc d;
  d.type = DataType::kInt8Q;
  d.batch = 2, d.channels = 5, d.height = 9, d.width = 11, d.out_channels = 13;
  d.kernel_h = d.kernel_w = 3, d.pad_h = 1, d.pad_w = 2;
  for (int variant = 0; variant < 4; ++variant) {
    ConvDesc v = d;
    v.bias = v.relu = v.residual = variant != 1;
    v.weights_signed = variant == 2;
    if (variant == 3) v.channels = 34, v.out_channels = 38, v.groups = 2;  // group by group
    const ConvQuant quant = TestQuant(v, variant != 0, rng);
    const Bytes x = RandomQ(v.type, v.input_count(), false, rng);
    const Bytes w = RandomQ(v.type, v.weight_count(), v.weights_signed, rng);
    const Bytes bias = RandomBias(v, rng), res = RandomQ(v.type, v.output_count(), false, rng);
    EXPECT_GT(ExpectWinogradExact(v, quant, x, w, bias, res,
                                  variant == 1 ? WinogradConfig{2, 8, 1, 8}
                                               : WinogradConfig{2, 6, 2, 8}),
              v.output_count() / 4);
  }
  // The input kernel's chunks of 8 tiles of a row (OpenCL): wide rows whose middle chunks lie
  // inside the plane (two 16-byte loads per window row), chunks at the edges and past the row's
  // last tile (a word per lane), rows narrower than a window row (byte by byte), no padding.
  for (const auto& [h, w, pad] : {std::array<int, 3>{5, 40, 1}, {6, 37, 0}, {3, 45, 2},
                                  {6, 3, 1}, {4, 2, 1}}) {
    ConvDesc v = d;
    v.height = h, v.width = w, v.pad_h = v.pad_w = pad;
    v.bias = v.relu = true;
    const ConvQuant quant = TestQuant(v, true, rng);
    const Bytes x = RandomQ(v.type, v.input_count(), false, rng);
    const Bytes wt = RandomQ(v.type, v.weight_count(), false, rng);
    const Bytes bias = RandomBias(v, rng), res = RandomQ(v.type, v.output_count(), false, rng);
    EXPECT_GT(ExpectWinogradExact(v, quant, x, wt, bias, res, {2, 6, 2, 8}), 0u);
  }
  // The channel bound at its worst: every product (255 − 0)·(0 − 255) over 900 channels, so the
  // output transform's sums reach 4·9·900·255² (just under 2^31).
  ConvDesc big = d;
  big.batch = 1, big.channels = kWinogradInt8MaxChannels, big.height = big.width = 4;
  big.out_channels = 2, big.pad_h = big.pad_w = 1;
  ASSERT_TRUE(WinogradApplies(big));
  big.channels += 1;
  EXPECT_FALSE(WinogradApplies(big));
  big.channels -= 1;
  ConvQuant q;
  q.x_zero = 0, q.c_zero = 128;
  q.w_zero = {255};
  q.multiplier = {quant::QuantizeMultiplier(1.0 / (9.0 * 900 * 255 * 255 / 100))};
  const Bytes x(big.input_count(), 255), w(big.weight_count(), 0);
  EXPECT_GT(ExpectWinogradExact(big, q, x, w, Bytes(8, 0), Bytes(big.output_count(), 0),
                                {2, 6, 2, 8}),
            0u);
}

TEST(ConvForward, Int8FourChannelDotProductsMatchTheReference) {
  // kp = 4 (int8, scalar lanes): four input channels per step as packed bytes through the
  // 4-way dot product, zero points applied after the window (Σx beside the products, Σw per
  // channel from SetWeights): Cg mod 4 = 0, 1, 2, 3 (the tail step reads x_zero past the
  // group's channels), groups, padding (x_zero words), stride, dilation, signed and unsigned
  // weights with per-channel zero points, several work-group shapes. Native dot products on a
  // device that has them (asserted in the text), portable shifts elsewhere; an input zero point
  // beyond uint8 takes the one-channel loop.
  Device& dev = DefaultDevice();
  const KernelTarget target = KernelTarget::Of(dev);
  std::mt19937 rng(44);
  const std::vector<ConvConfig> configs = {{32, 2, 4, 1, 4}, {1, 1, 1, 1, 4}, {4, 3, 2, 1, 4}};
  int turn = 0;
  for (const auto& [cs, want] :
       {std::pair{PairCase{2, 3, 11, 13, 20, 3, 2, 1, 1, 1, false, -1}, ConvInput::kDot4},
        {PairCase{2, 8, 9, 8, 12, 3, 1, 1, 1, 2, true, -1}, ConvInput::kDot4},     // Cg = 4
        {PairCase{2, 10, 7, 7, 9, 1, 1, 0, 1, 1, false, -1}, ConvInput::kDot4},    // Cg = 10
        {PairCase{1, 5, 6, 5, 8, 2, 1, 0, 1, 1, true, -1}, ConvInput::kDot4},      // Cg = 5
        {PairCase{2, 15, 10, 9, 21, 3, 2, 2, 2, 3, false, -1}, ConvInput::kDot4},  // dilation
        {PairCase{1, 32, 8, 8, 40, 3, 1, 1, 1, 1, true, -1}, ConvInput::kDot4},
        {PairCase{2, 5, 8, 9, 16, 3, 1, 1, 1, 1, false, 40000}, ConvInput::kDirect}}) {
    const PairOperands o = MakePairOperands(DataType::kInt8Q, cs, cs.is_signed, rng);
    const ConvDesc& d = o.d;
    ExpectExact(o, configs, want, turn++);
    if (want != ConvInput::kDot4) continue;
    const std::string text = Convolution::ForwardSource(target, d, configs[0]);
    EXPECT_NE(text.find("mp_dot4_u8"), std::string::npos);
    EXPECT_EQ(text.find("dot_4x8packed_") != std::string::npos,
              target.dot_product && target.backend == Backend::kOpenCL)
        << dev.info().name;
  }
}

TEST(ConvForward, Int16SplitPairsMatchTheReference) {
  // int16 with vectors of 8 multiplies pairs of v = x − z_x split into lo = v & 255 and
  // hi = v >> 8 against w − 32768 (unsigned storage) / w (signed), partial sums in int32
  // flushed to int64 at most every 127 pair steps. Extreme data make each pair product as
  // large as it gets (2·32768·256 = 2^24: 128 unflushed steps would overflow): weights
  // −32768/32767 or 0/65535 with zero points at the ends, inputs 0/65535 with x_zero 0 or
  // 65535; Cg = 300 flushes inside a window, Cg = 20 across windows. Random data cover odd Cg,
  // groups, stride, padding, dilation and several pack chunks.
  std::mt19937 rng(16);
  const std::vector<ConvConfig> configs = {
      DefaultConvConfig(DefaultDevice().info(), DataType::kInt16Q), {1, 4, 3, 8}, {1, 1, 4, 8}};
  int turn = 0;
  struct Extreme {
    PairCase shape;
    int32_t w_zero;
    bool all_max;  // every product at its largest magnitude (else random extremes)
  };
  for (const Extreme& e : {Extreme{{1, 300, 5, 5, 16, 3, 1, 1, 1, 1, true, 65535}, 0, true},
                           Extreme{{1, 300, 5, 5, 16, 3, 1, 1, 1, 1, true, 65535}, 0, false},
                           Extreme{{2, 20, 7, 7, 8, 5, 1, 2, 1, 1, true, 65535}, 0, true},
                           Extreme{{1, 301, 4, 4, 9, 3, 1, 1, 1, 1, false, 0}, 65535, false},
                           Extreme{{1, 300, 4, 4, 8, 3, 1, 0, 1, 1, false, 65535}, 0, true}}) {
    const ConvDesc d = PairDesc(DataType::kInt16Q, e.shape);
    ConvQuant quant;
    quant.x_zero = e.shape.x_zero;
    quant.w_zero = {e.w_zero};
    quant.c_zero = 32768;
    // x − z_x = ±65535 (hi = −256 for x_zero = 65535) and w − 32768 or w = −32768.
    const double k = double(d.channels / d.groups) * d.kernel_h * d.kernel_w;
    quant.multiplier = {
        quant::QuantizeMultiplier(20000.0 / (k * 65535.0 * 32768.0) * (e.all_max ? 1.0 : 8.0))};
    std::bernoulli_distribution coin(0.5);
    Bytes x(d.input_count() * 2), w(d.weight_count() * 2);
    for (size_t i = 0; i < d.input_count(); ++i) {
      const uint16_t v =
          e.all_max || coin(rng) ? uint16_t(65535 - quant.x_zero) : uint16_t(quant.x_zero);
      std::memcpy(x.data() + 2 * i, &v, 2);
    }
    for (size_t i = 0; i < d.weight_count(); ++i) {
      // Signed: −32768 (times hi = −256 the largest pair product); unsigned: the end away from
      // the zero point.
      const bool far = e.all_max || coin(rng);
      const uint16_t v = d.weights_signed ? uint16_t(far ? 0x8000 : 0x7fff)
                                          : uint16_t(far ? 65535 - e.w_zero : e.w_zero);
      std::memcpy(w.data() + 2 * i, &v, 2);
    }
    Bytes bias(size_t(d.out_channels) * 8, 0);
    SCOPED_TRACE(e.all_max ? "all products at the maximum" : "random extremes");
    ExpectExact(d, quant, x, w, bias, configs, ConvInput::kPackedSplit, turn++);
  }
  for (const PairCase& cs :
       {PairCase{2, 3, 11, 13, 20, 3, 2, 1, 1, 1, false, -1},
        PairCase{2, 10, 9, 8, 12, 3, 1, 1, 1, 2, true, -1},
        PairCase{2, 15, 10, 9, 21, 3, 2, 2, 2, 3, false, -1},
        PairCase{5, 16, 40, 40, 8, 3, 1, 1, 1, 1, false, -1},    // 2 images per chunk
        PairCase{2, 7, 6, 6, 9, 3, 1, 1, 1, 1, true, 65536}}) {  // zero point past uint16
    ExpectExact(MakePairOperands(DataType::kInt16Q, cs, !cs.is_signed, rng), configs,
                cs.x_zero > 65535 ? ConvInput::kDirect : ConvInput::kPackedSplit, turn++);
  }
}

TEST(ConvForward, FewChannelsRunAsIm2colGemm) {
  // Few input channels and a window of 9 or more (AlexNet's conv1): MPCAFFE_CONV_GEMM=1 runs the
  // forward pass as im2col + LibDNN GEMM on OpenCL, with the same integers as the reference
  // (padding reads the input zero point) and fp32 within rounding; by default (ConvGemmDefaults)
  // and with =0 another family runs.
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the GEMM forward is OpenCL only";
  std::mt19937 rng(77);
  for (const PairCase& cs : {PairCase{2, 3, 27, 27, 16, 11, 4, 0, 1, 1, false, -1},
                             PairCase{2, 1, 12, 12, 8, 5, 1, 2, 2, 1, true, -1},
                             PairCase{3, 4, 9, 10, 13, 3, 2, 1, 1, 1, false, -1},
                             PairCase{1, 3, 15, 14, 20, 5, 2, 2, 1, 1, true, -1}}) {
    for (DataType t : {DataType::kFloat32, DataType::kInt8Q}) {
      const bool q = IsQuantized(t);
      ConvDesc d = PairDesc(t, cs);
      d.weights_signed = q && cs.is_signed;
      SCOPED_TRACE(d.ToString());
      ConvQuant quant;
      if (q) {
        quant = MakeQuant(d, cs.is_signed, rng);
        quant.w_zero = {quant.w_zero[0]};  // the GEMM takes one weight zero point
      }
      const Bytes x = q ? RandomQ(t, d.input_count(), false, rng)
                        : RandomFloats(t, d.input_count(), -1, 1, rng);
      const Bytes w = q ? RandomQ(t, d.weight_count(), d.weights_signed, rng)
                        : RandomFloats(t, d.weight_count(), -1, 1, rng);
      const Bytes bias = RandomBias(d, rng);
      Bytes want(d.output_count() * SizeOf(t));
      ConvForwardReference(d, quant, x.data(), w.data(), bias.data(), want.data());
      auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, bias);
      for (const char* env : {"", "1", "0"}) {
        std::optional<ScopedSettings> forced;
        forced.emplace([env](Settings& s) { s.conv_gemm = env; });
        Convolution conv(dev, d, quant);
        forced.reset();
        const bool gemm = *env == '1';
        EXPECT_EQ(conv.forward_gemm(), gemm) << "MPCAFFE_CONV_GEMM=" << env;
        auto ym = dev.Allocate(want.size());
        conv.SetWeights(BufferRef(wm.get(), 0));
        conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
        const Bytes got = Download(dev, ym, want.size());
        if (q)
          EXPECT_EQ(got, want);
        else
          ExpectCloseToReference(RealsOf(t, got), RealsOf(t, want), 1e-5, d.ToString());
      }
    }
  }
}

}  // namespace
}  // namespace mpcaffe::libdnn
