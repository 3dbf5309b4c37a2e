// tests/testing/logit_agreement.h — how a quantized net's output is compared with the fp32 net's:
// on the logits (probabilities hide errors behind the softmax), each sample within a fraction of
// the spread of its fp32 logits (an absolute bound passes any net whose logits are small, a
// bound on the largest logit any net whose logits are large), and with the same top class.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <sstream>
#include <vector>

namespace mpcaffe::test_support {

/// Success when `got` (the quantized net's logits, `rows` samples of equal length, real values)
/// is within `fraction` · (max − min of the sample's fp32 logits) of `want` everywhere and each
/// sample's argmax is the fp32 one; otherwise what differed, with the sizes a reader needs.
inline testing::AssertionResult LogitsAgree(const std::vector<float>& want,
                                            const std::vector<float>& got, size_t rows,
                                            double fraction) {
  if (rows == 0 || want.size() != got.size() || want.size() % rows != 0 || want.size() < 2 * rows)
    return testing::AssertionFailure()
           << want.size() << " fp32 and " << got.size() << " quantized logits do not form " << rows
           << " samples of two classes or more";
  const size_t classes = want.size() / rows;
  std::ostringstream failures;
  double worst = 0;  // the largest error as a fraction of its sample's spread
  for (size_t r = 0; r < rows; ++r) {
    const auto w = want.begin() + static_cast<long>(r * classes);
    const auto g = got.begin() + static_cast<long>(r * classes);
    const auto [lo, hi] = std::minmax_element(w, w + static_cast<long>(classes));
    const double spread = double(*hi) - *lo;
    if (!(spread > 0)) {
      failures << " sample " << r << ": every fp32 logit is " << *lo << " (no class stands out);";
      continue;
    }
    double err = 0;
    for (size_t c = 0; c < classes; ++c) {
      if (!std::isfinite(g[c])) err = INFINITY;
      err = std::max(err, std::fabs(double(g[c]) - w[c]));
    }
    worst = std::max(worst, err / spread);
    const long top_want = std::max_element(w, w + static_cast<long>(classes)) - w;
    const long top_got = std::max_element(g, g + static_cast<long>(classes)) - g;
    if (err > fraction * spread)
      failures << " sample " << r << ": max |quantized − fp32| " << err << " > " << fraction
               << " × spread " << spread << ";";
    if (top_want != top_got)
      failures << " sample " << r << ": top class " << top_got << " (logit " << g[top_got]
               << "), fp32's is " << top_want << " (logit " << w[top_want] << ", " << g[top_want]
               << " quantized);";
  }
  std::printf(
      "[ logits   ] %zu samples of %zu classes: largest error %.3g of the spread (bound %g)\n",
      rows, classes, worst, fraction);
  if (failures.str().empty()) return testing::AssertionSuccess();
  return testing::AssertionFailure() << failures.str();
}

}  // namespace mpcaffe::test_support
