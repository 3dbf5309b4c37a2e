// tests/layers/spp_quantized_test.cc — SPP in int8 and int16 computes natively: each pyramid level
// is libdnn's requantizing pooling from the bottom's quantization into the top's, the levels'
// codes concatenated unchanged — bit-exact with the pooling reference level by level.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "layers/blob.h"
#include "layers/layer_registry.h"
#include "libdnn/pool.h"
#include "tests/testing/net_support.h"

namespace mpcaffe {
namespace {

using test_support::LayerText;

Device& Dev() { return DefaultDevice(); }

TEST(SPPQuantized, EveryLevelMatchesTheRequantizingPoolingReference) {
  for (DataType t : {DataType::kInt8Q, DataType::kInt16Q})
    for (const char* pool : {"MAX", "AVE"})
      for (int height : {1, 3}) {
        const std::string text = std::string("name: 'spp' type: 'SPP' spp_param { pyramid_height: ") +
                                 std::to_string(height) + " pool: " + pool + " }" +
                                 " bottom_quantizer { observed_min: -2 observed_max: 2 }"
                                 " top_quantizer { observed_min: -1 observed_max: 1.5 }";
        const std::string what = text + " " + Name(t);
        const int N = 2, C = 3, H = 7, W = 6;
        Blob x(Dev(), t, {N, C, H, W}, "x"), y(Dev(), t, {}, "y");
        std::vector<Blob*> bottom{&x}, top{&y};
        std::mt19937 rng(3);
        const auto& tr = TraitsOf(t);
        std::uniform_int_distribution<int64_t> code(tr.qmin, tr.qmax);
        std::vector<float> codes(x.count());
        for (auto& c : codes) c = static_cast<float>(code(rng));
        x.FromFloat(codes);
        auto layer = CreateLayer(LayerText(text, t), Dev());
        layer->SetUp(bottom, top);
        layer->Forward(bottom, top);
        const Affine xa = layer->BottomAffine(0), ya = layer->TopAffine(0);
        ASSERT_NE(xa.scale, ya.scale) << "the test needs a requantization between the sides";
        const libdnn::PoolQuant q{xa.scale, xa.zero_point, ya.scale, ya.zero_point};
        // The reference: level by level, each image's levels one after the other.
        std::vector<std::vector<float>> levels;
        for (int l = 0; l < height; ++l) {
          libdnn::PoolDesc d;
          d.type = t;
          d.method = std::string(pool) == "MAX" ? libdnn::PoolMethod::kMax : libdnn::PoolMethod::kAverage;
          d.batch = N, d.channels = C, d.height = H, d.width = W;
          const int bins = 1 << l;
          d.kernel_h = d.stride_h = (H + bins - 1) / bins;
          d.kernel_w = d.stride_w = (W + bins - 1) / bins;
          d.pad_h = (d.kernel_h * bins - H + 1) / 2;
          d.pad_w = (d.kernel_w * bins - W + 1) / 2;
          Blob out(Dev(), t, {N, C, d.out_h(), d.out_w()});
          libdnn::PoolForwardReference(d, q, x.host_data(), out.mutable_host_data(), nullptr);
          levels.push_back(out.ToFloat());
        }
        std::vector<float> want;
        for (int n = 0; n < N; ++n)
          for (const auto& level : levels) {
            const size_t per_image = level.size() / N;
            want.insert(want.end(), level.begin() + n * per_image, level.begin() + (n + 1) * per_image);
          }
        const std::vector<float> got = y.ToFloat();
        ASSERT_EQ(got.size(), want.size()) << what;
        for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << what << " [" << i << "]";
      }
}

}  // namespace
}  // namespace mpcaffe
