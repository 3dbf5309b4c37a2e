// tests/quant/int4_test.cc — the packed 4-bit weight layout (quant/int4.h): nibble order, odd K,
// round trips over the whole range, and the error for out-of-range weights.
#include "quant/int4.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "device/error.h"

namespace mpcaffe::quant {
namespace {

TEST(Int4, RowBytesIsHalfRoundedUp) {
  EXPECT_EQ(Int4RowBytes(0), 0u);
  EXPECT_EQ(Int4RowBytes(1), 1u);
  EXPECT_EQ(Int4RowBytes(2), 1u);
  EXPECT_EQ(Int4RowBytes(7), 4u);
  EXPECT_EQ(Int4RowBytes(8), 4u);
}

TEST(Int4, LowNibbleIsEvenKAndOddKLeavesHighNibbleZero) {
  // Two channels of K = 3: {1, -1, -8} and {7, 0, 5}.
  const std::vector<int8_t> w = {1, -1, -8, 7, 0, 5};
  std::vector<uint8_t> p(2 * Int4RowBytes(3), 0xAA);
  PackInt4(w.data(), 2, 3, p.data());
  EXPECT_EQ(p, (std::vector<uint8_t>{0xF1, 0x08, 0x07, 0x05}));
  EXPECT_EQ(Int4At(p.data(), 2, 0, 1), -1);
  EXPECT_EQ(Int4At(p.data(), 2, 0, 2), -8);
  EXPECT_EQ(Int4At(p.data(), 2, 1, 0), 7);
  EXPECT_EQ(Int4At(p.data(), 2, 1, 2), 5);
}

TEST(Int4, RoundTripsEveryValueForOddAndEvenK) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> dist(kInt4Min, kInt4Max);
  for (size_t k : {1u, 2u, 15u, 16u, 33u}) {
    const size_t channels = 5;
    std::vector<int8_t> w(channels * k);
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<int8_t>(i < 16 ? kInt4Min + static_cast<int>(i) : dist(rng));
    }
    std::vector<uint8_t> p(channels * Int4RowBytes(k));
    PackInt4(w.data(), channels, k, p.data());
    std::vector<int8_t> back(w.size());
    UnpackInt4(p.data(), channels, k, back.data());
    EXPECT_EQ(back, w) << "k = " << k;
    if (k & 1) {
      for (size_t o = 0; o < channels; ++o) {
        EXPECT_EQ(p[o * Int4RowBytes(k) + k / 2] >> 4, 0) << "k = " << k << " channel " << o;
      }
    }
  }
}

TEST(Int4, PackRejectsValuesOutsideTheRange) {
  const std::vector<int8_t> w = {0, 1, 2, 8};
  std::vector<uint8_t> p(2);
  try {
    PackInt4(w.data(), 1, 4, p.data());
    FAIL() << "8 was packed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight 3 of channel 0 is 8"), std::string::npos) << e.what();
  }
  const std::vector<int8_t> low = {-9};
  EXPECT_THROW(PackInt4(low.data(), 1, 1, p.data()), Error);
}

}  // namespace
}  // namespace mpcaffe::quant
