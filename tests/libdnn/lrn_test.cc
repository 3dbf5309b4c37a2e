// tests/libdnn/lrn_test.cc — the across-channel LRN kernels against the plain C++ references:
// fp32, fp16, int8q and int16q forward and fp32 backward on 22 shapes (AlexNet's norm1/norm2
// scaled down, odd sizes, windows wider than the channel count, 1×1 planes), and the backward
// reference against finite differences.
#include "libdnn/lrn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/typed_buffer.h"
#include "device/device.h"
#include "quant/quant_params.h"
#include "tests/testing/close_to_reference.h"
#include "tests/testing/random_storage.h"

namespace mpcaffe::libdnn {
namespace {

using test_inputs::RealsOf;
using test_support::ExpectCloseToReference;

using Bytes = std::vector<uint8_t>;

struct Shape {
  int n, c, h, w, size;
  float alpha, beta, k;
};

// clang-format off
const Shape kShapes[] = {
    {1, 16, 13, 13, 5, 1e-4f, 0.75f, 1.0f},  // AlexNet norm1 (scaled), Caffe's parameters
    {1, 24, 7, 7, 5, 1e-4f, 0.75f, 1.0f},    // AlexNet norm2 (scaled)
    {2, 8, 5, 5, 5, 0.5f, 0.75f, 1.0f},      // strong normalization
    {1, 3, 4, 4, 5, 1.0f, 0.75f, 2.0f},      // window wider than the channels
    {1, 1, 6, 6, 3, 2.0f, 0.5f, 1.0f},       // one channel
    {3, 7, 1, 1, 3, 0.7f, 0.75f, 1.0f},      // 1×1 planes
    {1, 9, 3, 7, 1, 0.3f, 0.75f, 1.0f},      // size 1
    {1, 11, 5, 3, 7, 0.9f, 0.6f, 1.5f},      // size 7
    {2, 5, 2, 9, 9, 0.4f, 1.0f, 1.0f},       // size 9 > channels
    {1, 32, 2, 2, 5, 0.2f, 0.75f, 1.0f},
    {1, 6, 11, 11, 3, 1.5f, 0.75f, 0.5f},
    {4, 4, 3, 3, 3, 0.8f, 0.25f, 1.0f},
    {1, 13, 1, 5, 5, 0.6f, 0.75f, 1.0f},
    {1, 2, 8, 1, 3, 0.6f, 0.75f, 1.0f},
    {1, 17, 4, 6, 11, 0.35f, 0.9f, 1.2f},
    {2, 3, 3, 3, 3, 3.0f, 0.75f, 1.0f},
    {1, 20, 6, 6, 5, 1e-2f, 0.75f, 1.0f},
    {1, 48, 3, 3, 5, 1e-4f, 0.75f, 1.0f},
    {1, 5, 5, 5, 5, 0.5f, 2.0f, 1.0f},
    {2, 10, 2, 3, 7, 0.25f, 0.75f, 3.0f},
    {1, 7, 9, 2, 3, 1.0f, 0.1f, 1.0f},
    {1, 8, 1, 1, 5, 0.9f, 0.75f, 1.0f},
};
// clang-format on

LrnDesc DescOf(const Shape& s, DataType t) {
  LrnDesc d;
  d.type = t;
  d.batch = s.n, d.channels = s.c, d.height = s.h, d.width = s.w;
  d.local_size = s.size, d.alpha = s.alpha, d.beta = s.beta, d.k = s.k;
  return d;
}

Bytes RandomData(DataType t, size_t n, std::mt19937& rng) {
  return test_inputs::RandomRealStorage(t, n, -2, 2, rng);
}


std::shared_ptr<DeviceMemory> Upload(Device& dev, const void* p, size_t bytes) {
  auto m = dev.Allocate(std::max<size_t>(bytes, 4));
  dev.CopyToDevice(p, m.get(), 0, bytes);
  return m;
}

class LrnForward : public testing::TestWithParam<DataType> {};

TEST_P(LrnForward, MatchesReferenceOnEveryShape) {
  const DataType t = GetParam();
  Device& dev = DefaultDevice();
  std::mt19937 rng(11 + int(t));
  for (const Shape& s : kShapes) {
    const LrnDesc d = DescOf(s, t);
    SCOPED_TRACE(d.ToString());
    const Bytes x = RandomData(t, d.count(), rng);
    Bytes want(d.count() * SizeOf(t));
    std::vector<float> want_scale(d.count());
    LrnForwardReference(d, x.data(), want.data(), want_scale.data());

    Lrn lrn(dev, d);
    auto xm = Upload(dev, x.data(), x.size());
    auto ym = dev.Allocate(want.size()), sm = dev.Allocate(d.count() * 4);
    lrn.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0), BufferRef(sm.get(), 0));
    Bytes got(want.size());
    std::vector<float> scale(d.count());
    dev.CopyToHost(ym.get(), 0, got.data(), got.size());
    dev.CopyToHost(sm.get(), 0, scale.data(), scale.size() * 4);
    // fp16: one rounding of a value the kernel holds to fp32 accuracy — within an ulp of half.
    ExpectCloseToReference(RealsOf(t, got), RealsOf(t, want), t == DataType::kFloat32 ? 1e-5 : 1e-3,
                           "output");
    ExpectCloseToReference(scale, want_scale, 1e-5, "scale");
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, LrnForward,
                         testing::Values(DataType::kFloat32, DataType::kFloat16),
                         [](const testing::TestParamInfo<DataType>& i) {
                           return std::string(Name(i.param));
                         });

// Quantized codes in and out (int8q, int16q): on every shape, the codes the fp32 kernel's
// output quantizes to when it reads the dequantized codes (the conversions' own arithmetic,
// quant::DequantizeValue / QuantizeValue, the same bits as the convert kernels: QuantTensorTest),
// exactly; and within one code of the double-precision reference, almost all of them equal.
class LrnQuantized : public testing::TestWithParam<DataType> {};

TEST_P(LrnQuantized, GivesTheCodesOfTheFloatKernelBetweenConversions) {
  const DataType t = GetParam();
  const DataTypeTraits& traits = TraitsOf(t);
  Device& dev = DefaultDevice();
  std::mt19937 rng(31 + int(t));
  size_t total = 0, off_by_one = 0;
  for (const Shape& s : kShapes) {
    LrnDesc d = DescOf(s, t);
    // Codes over the whole range around a zero point inside it; the output's scale chosen so
    // the results cover its range and some saturate.
    const int span = int(traits.qmax - traits.qmin);
    d.quant = {4.0f / span * (t == DataType::kInt8Q ? 1.0f : 1.37f),
               int(traits.qmin) + span / 3, 3.0f / span, int(traits.qmin) + span / 2};
    SCOPED_TRACE(d.ToString());
    std::uniform_int_distribution<int> code(int(traits.qmin), int(traits.qmax));
    Bytes x(d.count() * SizeOf(t));
    for (size_t i = 0; i < d.count(); ++i) StoreQ(t, x.data(), i, code(rng));

    Lrn lrn(dev, d);
    auto xm = Upload(dev, x.data(), x.size());
    auto ym = dev.Allocate(x.size());
    lrn.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0));
    Bytes got(x.size());
    dev.CopyToHost(ym.get(), 0, got.data(), got.size());

    // The float kernel on the dequantized codes, its output quantized.
    LrnDesc f = d;
    f.type = DataType::kFloat32;
    std::vector<float> xf(d.count()), yf(d.count());
    for (size_t i = 0; i < d.count(); ++i)
      xf[i] = quant::DequantizeValue(LoadQ(t, x.data(), i), d.quant.x_scale, d.quant.x_zero);
    Lrn flrn(dev, f);
    auto xfm = Upload(dev, xf.data(), xf.size() * 4);
    auto yfm = dev.Allocate(yf.size() * 4);
    flrn.Forward(BufferRef(xfm.get(), 0), BufferRef(yfm.get(), 0));
    dev.CopyToHost(yfm.get(), 0, yf.data(), yf.size() * 4);

    Bytes want(x.size());
    LrnForwardReference(d, x.data(), want.data(), nullptr);
    int bad = 0;
    for (size_t i = 0; i < d.count(); ++i) {
      const int g = LoadQ(t, got.data(), i);
      const int chained = quant::QuantizeValue(yf[i], d.quant.y_scale, d.quant.y_zero,
                                               int32_t(traits.qmin), int32_t(traits.qmax));
      const int w = LoadQ(t, want.data(), i);
      if (g != chained && bad++ < 5)
        ADD_FAILURE() << "element " << i << ": " << g << ", the float kernel's " << chained;
      EXPECT_LE(std::abs(g - w), 1) << "element " << i;
      off_by_one += g != w;
      ++total;
    }
  }
  EXPECT_LE(off_by_one, total / 100) << off_by_one << " of " << total
                                     << " codes one off the reference";
}

INSTANTIATE_TEST_SUITE_P(QuantizedTypes, LrnQuantized,
                         testing::Values(DataType::kInt8Q, DataType::kInt16Q),
                         [](const testing::TestParamInfo<DataType>& i) {
                           return std::string(Name(i.param));
                         });

TEST(LrnForward, RejectsBadScalesAndEvenWindows) {
  LrnDesc d;
  d.type = DataType::kInt8Q;
  d.quant.y_scale = 0.0f;
  EXPECT_THROW(d.Validate(), Error);
  d.quant.y_scale = 1.0f;
  EXPECT_NO_THROW(d.Validate());
  d.type = DataType::kFloat32, d.local_size = 4;
  EXPECT_THROW(d.Validate(), Error);
}

TEST(LrnBackward, MatchesReferenceOnEveryShape) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(23);
  for (const Shape& s : kShapes) {
    const LrnDesc d = DescOf(s, DataType::kFloat32);
    SCOPED_TRACE(d.ToString());
    const auto x = RealsOf(d.type, RandomData(d.type, d.count(), rng));
    const auto top = RealsOf(d.type, RandomData(d.type, d.count(), rng));
    std::vector<float> y(d.count()), scale(d.count()), want(d.count());
    LrnForwardReference(d, x.data(), y.data(), scale.data());
    LrnBackwardReference(d, x.data(), y.data(), top.data(), scale.data(), want.data());

    Lrn lrn(dev, d);
    const size_t bytes = d.count() * 4;
    auto xm = Upload(dev, x.data(), bytes), tm = Upload(dev, top.data(), bytes);
    auto ym = dev.Allocate(bytes), sm = dev.Allocate(bytes), bm = dev.Allocate(bytes);
    lrn.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0), BufferRef(sm.get(), 0));
    lrn.Backward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0), BufferRef(tm.get(), 0),
                 BufferRef(sm.get(), 0), BufferRef(bm.get(), 0));
    std::vector<float> got(d.count());
    dev.CopyToHost(bm.get(), 0, got.data(), bytes);
    ExpectCloseToReference(got, want, 1e-5, "bottom_diff");
  }
}

// The backward reference is the gradient of L = Σ top·y (central differences in double
// precision through the forward reference's float results are too coarse; use a wide step).
TEST(LrnBackward, ReferenceMatchesFiniteDifferences) {
  std::mt19937 rng(8);
  for (int which : {2, 7, 8}) {
    const LrnDesc d = DescOf(kShapes[which], DataType::kFloat32);
    auto x = RealsOf(d.type, RandomData(d.type, d.count(), rng));
    const auto top = RealsOf(d.type, RandomData(d.type, d.count(), rng));
    std::vector<float> y(d.count()), scale(d.count()), grad(d.count());
    LrnForwardReference(d, x.data(), y.data(), scale.data());
    LrnBackwardReference(d, x.data(), y.data(), top.data(), scale.data(), grad.data());
    auto loss = [&]() {
      std::vector<float> yy(d.count());
      LrnForwardReference(d, x.data(), yy.data(), nullptr);
      double l = 0;
      for (size_t i = 0; i < yy.size(); ++i) l += double(top[i]) * yy[i];
      return l;
    };
    const float eps = 1e-2f;
    for (size_t i = 0; i < x.size(); i += 3) {
      const float keep = x[i];
      x[i] = keep + eps;
      const double up = loss();
      x[i] = keep - eps;
      const double down = loss();
      x[i] = keep;
      EXPECT_NEAR((up - down) / (2 * eps), grad[i], 3e-3) << d.ToString() << " index " << i;
    }
  }
}

}  // namespace
}  // namespace mpcaffe::libdnn
