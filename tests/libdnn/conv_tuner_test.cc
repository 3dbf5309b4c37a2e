// tests/libdnn/conv_tuner_test.cc — the depthwise and pointwise tuners (every candidate
// timed, the winner stored and followed) and disabled benchmarks of the zoo's pointwise and
// depthwise layers.
#include "libdnn/conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <memory>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include "cache/program_cache.h"
#include "codegen/datatype.h"
#include "device/device.h"
#include "tests/testing/random_storage.h"
#include "tests/testing/sweep.h"
#include "libdnn/tuner.h"
#include "quant/fixed_point.h"
#include "device/settings.h"

namespace mpcaffe::libdnn {
namespace {

// The depthwise tuner: every candidate timed, the winner stored under "conv_dw" ("conv_dw:rowsN")
// and taken by the next Convolution of the shape; a record naming other rows is followed, a
// malformed one, one of another family or of the old syntax (no family) ignored (the default
// then).
TEST(Tuner, DepthwiseRowsAreStoredAndFollowed) {
  Device& dev = DefaultDevice();
  auto store = cache::ActiveProgramCache();
  if (!store) GTEST_SKIP() << "kernel cache disabled (MPCAFFE_CACHE=off): no tuning table";
  ConvDesc d;  // an odd shape that nothing else tunes, 5 output rows: 4 candidates to build
  d.channels = d.out_channels = d.groups = 5;
  d.height = 5, d.width = 23;
  d.kernel_h = d.kernel_w = 3;
  d.pad_h = d.pad_w = 1;
  d.relu = true;
  Tuner tuner(dev, 2);
  const DepthwiseTuneResult r = tuner.TuneDepthwise(d);
  const TargetProfile profile = TargetProfile::Of(dev.info());
  EXPECT_EQ(r.measured.size(), DepthwiseRowCandidates(d, profile).size());
  EXPECT_EQ(r.measured.front().first, Convolution::DefaultDepthwiseRows(d, profile));
  EXPECT_TRUE(r.stored);
  EXPECT_EQ(TunedDepthwiseRows(dev, d), r.best);
  EXPECT_EQ(Convolution(dev, d).depthwise_rows(), r.best);
  const std::string key = cache::TuningDeviceKey(dev.info());
  EXPECT_EQ(store->GetTuning(key, "conv_dw", d.ToString())->parameters,
            "conv_dw:rows" + std::to_string(r.best));
  store->PutTuning({key, "conv_dw", d.ToString(), "conv_dw:rows3", 1.0, ""});
  EXPECT_EQ(Convolution(dev, d).depthwise_rows(), 3);
  for (const char* bad : {"conv_dw:rows0", "conv_dw:rows99", "conv_dw:rows", "conv_dw:rows7x",
                          "conv_dw:l1 oc4 px3 v8", "conv:rows3", "rows3"}) {
    store->PutTuning({key, "conv_dw", d.ToString(), bad, 1.0, ""});
    EXPECT_EQ(TunedDepthwiseRows(dev, d), Convolution::DefaultDepthwiseRows(d, profile)) << bad;
  }
  EXPECT_THROW(Convolution::Depthwise(dev, d, {}, 0), Error);
  ConvDesc full = d;
  full.groups = 1;
  EXPECT_THROW(Convolution::Depthwise(dev, full, {}, 4), Error);
  EXPECT_THROW(tuner.TuneDepthwise(full), Error);
}

// The pointwise tuner: the default tile, the direct kernel and the other tiles timed, the
// winner stored under "conv_pw" ("conv_pw:oc4 px2 v8", or "conv_pw:off" for the direct kernel)
// and taken by the next Convolution of the shape; a record naming the direct kernel or another
// tile is followed, a malformed, inapplicable or old-syntax one ignored.
TEST(Tuner, PointwiseTilesAreStoredAndFollowed) {
  Device& dev = DefaultDevice();
  auto store = cache::ActiveProgramCache();
  if (!store) GTEST_SKIP() << "kernel cache disabled (MPCAFFE_CACHE=off): no tuning table";
  ConvDesc d;  // an odd shape that nothing else tunes
  d.channels = 7, d.out_channels = 9, d.height = 3, d.width = 7;
  d.bias = true;
  Tuner tuner(dev, 2);
  const PointwiseTuneResult r = tuner.TunePointwise(d);
  EXPECT_EQ(r.measured.size(), PointwiseCandidates(d).size());
  const Convolution::PointwiseTile def =
      Convolution::DefaultPointwiseTile(d, TargetProfile::Of(dev.info()));
  EXPECT_TRUE(r.measured.front().first == def);
  EXPECT_FALSE(r.measured[1].first.has_value());  // the direct kernel
  EXPECT_TRUE(r.stored);
  EXPECT_EQ(TunedPointwise(dev, d), r.best);
  EXPECT_EQ(Convolution(dev, d).forward_pointwise(), r.best.has_value());
  const std::string key = cache::TuningDeviceKey(dev.info());
  EXPECT_EQ(store->GetTuning(key, "conv_pw", d.ToString())->parameters,
            "conv_pw:" + (r.best ? r.best->ToString() : std::string("off")));
  store->PutTuning({key, "conv_pw", d.ToString(), "conv_pw:off", 1.0, ""});
  EXPECT_FALSE(Convolution(dev, d).forward_pointwise());
  store->PutTuning({key, "conv_pw", d.ToString(), "conv_pw:oc3 px1 v16", 1.0, ""});
  Convolution c(dev, d);
  EXPECT_TRUE(c.forward_pointwise());
  EXPECT_TRUE(c.pointwise_tile() == (Convolution::PointwiseTile{3, 1, 16}));
  // 21 pixels: four vectors of 16 do not fit.
  for (const char* bad : {"conv_pw:oc0 px1 v8", "conv_pw:oc4 px4 v16", "conv_pw:oc4 px1 v5",
                          "conv_pw:oc4 px1", "conv_pw:rows4", "conv_dw:oc3 px1 v16", "oc3 px1 v16",
                          "direct"}) {
    store->PutTuning({key, "conv_pw", d.ToString(), bad, 1.0, ""});
    EXPECT_TRUE(TunedPointwise(dev, d) == def) << bad;
  }
  // A 3×3 window over more input channels than the row form takes.
  ConvDesc window = d;
  window.kernel_h = window.kernel_w = 3;
  window.pad_h = window.pad_w = 1;
  EXPECT_THROW(tuner.TunePointwise(window), Error);
  EXPECT_THROW(Convolution::Pointwise(dev, window, {}), Error);
}

/// Times {in, out, input side, stride} layers at batch 1 with bias and ReLU through the
/// pointwise tuner and prints each one's candidates.
void TimePointwiseLayers(DataType type, const std::vector<std::array<int, 4>>& layers) {
  Device& dev = DefaultDevice();
  Tuner tuner(dev, 5);
  for (const auto& l : layers) {
    ConvDesc d;
    d.type = type;
    d.channels = l[0], d.out_channels = l[1], d.height = d.width = l[2];
    d.stride_h = d.stride_w = l[3];
    d.bias = d.relu = true;
    d.weights_signed = IsQuantized(type);
    const PointwiseTuneResult r = tuner.TunePointwise(d);
    std::string line = d.ToString() + ": " + std::to_string(d.Flops() / 1e9 / r.best_ms * 1e3) +
                       " GFLOP/s best";
    for (const auto& [choice, ms] : r.measured)
      line += ", " + (choice ? choice->ToString() : std::string("direct")) + " " +
              std::to_string(ms);
    std::printf("%s\n", line.c_str());
  }
}

// Not a test: the 1×1 layers of MobileNet v1 / v2, SqueezeNet 1.1, GoogLeNet and ResNet-50
// (batch 1, bias and ReLU) timed through the pointwise tuner: the default tile, the direct
// kernel and the other tiles (the winners go to MPCAFFE_CACHE's tuning table). Run with
// --gtest_also_run_disabled_tests --gtest_filter='*ZooPointwise' (fp32) or '*ZooPointwiseInt8'.
/// The distinct stride-1 1×1 layers of those nets at batch 1: {in, out, plane side}.
std::vector<std::array<int, 3>> ZooPointwiseShapes() {
  return {
      {32, 16, 112}, {16, 96, 112}, {96, 24, 56},  {24, 144, 56}, {144, 24, 56}, {144, 32, 28},
      {32, 192, 28}, {192, 32, 28}, {192, 64, 14}, {64, 384, 14}, {384, 64, 14}, {384, 96, 14},
      {96, 576, 14}, {576, 96, 14}, {576, 160, 7}, {160, 960, 7}, {960, 160, 7}, {960, 320, 7},
      {320, 1280, 7}, {32, 64, 112}, {64, 128, 56}, {128, 128, 56}, {256, 256, 28},
      {512, 512, 14}, {1024, 1024, 7}, {64, 16, 56}, {16, 64, 56},  {128, 32, 28}, {256, 48, 14},
      {48, 192, 14}, {512, 64, 14}, {64, 256, 14}, {192, 64, 28}, {480, 192, 14}, {832, 384, 7},
      {64, 64, 56},  {256, 64, 56}, {64, 256, 56}, {512, 128, 28}, {1024, 256, 14},
      {2048, 512, 7}, {512, 2048, 7}};
}

/// The zoo nets' first layers, which the pointwise kernel's row form runs: {out, plane side,
/// window, stride, pad} over 3 channels — ResNet-50's and GoogLeNet's 7×7 stride 2, MobileNet
/// v1's and v2's 3×3 stride 2, SqueezeNet 1.1's unpadded 3×3 stride 2, VGG's 3×3 stride 1.
std::vector<std::array<int, 5>> ZooFirstLayerShapes() {
  return {{64, 224, 7, 2, 3}, {32, 224, 3, 2, 1}, {64, 227, 3, 2, 0}, {64, 224, 3, 1, 1}};
}

void TimeZooPointwise(DataType type) {
  std::vector<std::array<int, 4>> layers;  // {in, out, plane side, stride}
  for (const auto& l : ZooPointwiseShapes()) layers.push_back({l[0], l[1], l[2], 1});
  TimePointwiseLayers(type, layers);
}

TEST(ConvBench, DISABLED_ZooPointwise) { TimeZooPointwise(DataType::kFloat32); }
// The same layers in int8 (signed weights, as calibration gives them).
TEST(ConvBench, DISABLED_ZooPointwiseInt8) { TimeZooPointwise(DataType::kInt8Q); }
/// PW_BENCH_TILES' ';'-separated tiles or configs (Config::Schema()'s text) into `out`; a
/// failure names the part that is none.
template <typename Config>
testing::AssertionResult ParseList(const std::string& list, std::vector<Config>* out) {
  std::stringstream in(list);
  for (std::string part; std::getline(in, part, ';');) {
    const auto parsed = Config::Schema().Parse(part);
    if (!parsed) return testing::AssertionFailure() << "PW_BENCH_TILES: '" << part << "' is none";
    out->push_back(*parsed);
  }
  return testing::AssertionSuccess();
}

// Not a test: those int8 layers (bias, ReLU, signed weights) with each tile of PW_BENCH_TILES
// (';'-separated, the first the reference) in PW_BENCH_ROUNDS alternating rounds (default 5) of
// 5 runs of 20 forwards per host synchronization (a Finish costs about as much as a small
// layer on PoCL); per layer the minimum ms per forward of each tile, then the sums and the
// geometric mean of each tile's time over the first's. PW_BENCH_LAYERS (e.g.
// "c512 h14 w14 o512,c32 h112") keeps the layers whose description contains one of its
// ','-separated texts; PW_BENCH_TYPE=fp32 times the layers in fp32 instead;
// PW_BENCH_SHAPES=first times the nets' first layers (ZooFirstLayerShapes: the row form)
// instead of the 1×1 ones. Run with --gtest_also_run_disabled_tests
// --gtest_filter='*PointwiseInt8Tiles'.
TEST(ConvBench, DISABLED_PointwiseInt8Tiles) {
  Device& dev = DefaultDevice();
  const char* tiles_env = std::getenv("PW_BENCH_TILES");
  const char* rounds_env = std::getenv("PW_BENCH_ROUNDS");
  if (!tiles_env) GTEST_SKIP() << "PW_BENCH_TILES names no tiles";
  std::vector<Convolution::PointwiseTile> tiles;
  ASSERT_TRUE(ParseList(tiles_env, &tiles));
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 5;
  std::vector<std::string> keep;
  if (const char* layers_env = std::getenv("PW_BENCH_LAYERS")) {
    std::stringstream in(layers_env);
    for (std::string part; std::getline(in, part, ',');) keep.push_back(part);
  }
  const char* type_env = std::getenv("PW_BENCH_TYPE");
  const bool fp32 = type_env && std::string(type_env) == "fp32";
  constexpr int kForwards = 20;
  std::vector<double> sums(tiles.size(), 0.0), log_ratio(tiles.size(), 0.0);
  int layers = 0;
  std::vector<ConvDesc> descs;
  const char* shapes_env = std::getenv("PW_BENCH_SHAPES");
  const bool first = shapes_env && std::string(shapes_env) == "first";
  for (const auto& l : ZooPointwiseShapes()) {
    ConvDesc d;
    d.channels = l[0], d.out_channels = l[1], d.height = d.width = l[2];
    if (!first) descs.push_back(d);
  }
  for (const auto& l : ZooFirstLayerShapes()) {
    ConvDesc d;
    d.channels = 3, d.out_channels = l[0], d.height = d.width = l[1];
    d.kernel_h = d.kernel_w = l[2], d.stride_h = d.stride_w = l[3], d.pad_h = d.pad_w = l[4];
    if (first) descs.push_back(d);
  }
  for (ConvDesc d : descs) {
    d.type = fp32 ? DataType::kFloat32 : DataType::kInt8Q;
    d.bias = d.relu = true;
    d.weights_signed = !fp32;
    if (!keep.empty() && std::none_of(keep.begin(), keep.end(), [&](const std::string& k) {
          return d.ToString().find(k) != std::string::npos;
        }))
      continue;
    const ConvOperands ops(dev, d);
    ConvQuant quant;  // one multiplier: the time does not depend on its value
    if (!fp32) {
      quant.multiplier = {quant::QuantizeMultiplier(1.0 / 4096)};
      quant.w_zero = {0};
    }
    std::vector<std::shared_ptr<Convolution>> convs;
    for (const auto& t : tiles)
      convs.push_back(Convolution::PointwiseApplies(d, t)
                          ? std::make_shared<Convolution>(Convolution::Pointwise(dev, d, t, quant))
                          : nullptr);
    if (!convs[0]) continue;
    std::vector<double> best(tiles.size(), std::numeric_limits<double>::infinity());
    for (auto& c : convs)
      if (c) c->SetWeights(BufferRef(ops.weights.get(), 0));
    for (int r = 0; r < rounds; ++r)
      for (size_t i = 0; i < tiles.size(); ++i)
        if (convs[i])
          best[i] = std::min(best[i], TimeMs([&] {
                               for (int k = 1; k < kForwards; ++k)
                                 convs[i]->Forward(BufferRef(ops.input.get(), 0),
                                                   BufferRef(ops.bias.get(), 0),
                                                   BufferRef(ops.output.get(), 0));
                               return convs[i]->Forward(BufferRef(ops.input.get(), 0),
                                                        BufferRef(ops.bias.get(), 0),
                                                        BufferRef(ops.output.get(), 0));
                             }, 5) / kForwards);
    std::string line = d.ToString();
    for (size_t i = 0; i < tiles.size(); ++i) {
      const double ms = convs[i] ? best[i] : best[0];  // not applicable: the reference's
      sums[i] += ms;
      log_ratio[i] += std::log(ms / best[0]);
      line += "  " + tiles[i].ToString() + " " + std::to_string(ms);
    }
    std::printf("%s\n", line.c_str());
    ++layers;
  }
  for (size_t i = 0; i < tiles.size(); ++i)
    std::printf("%-24s sum %.3f ms, geometric mean over the first %.3f (%d layers)\n",
                tiles[i].ToString().c_str(), sums[i], std::exp(log_ratio[i] / layers), layers);
}
// MobileNet v1's 1×1 layers (the default tile per CPU level: run at both).
TEST(ConvBench, DISABLED_MobileNetPointwise) {
  TimePointwiseLayers(DataType::kFloat32,
                      {{32, 64, 112, 1}, {64, 128, 56, 1}, {128, 128, 56, 1}, {128, 256, 28, 1},
                       {256, 256, 28, 1}, {256, 512, 14, 1}, {512, 512, 14, 1},
                       {512, 1024, 7, 1}, {1024, 1024, 7, 1}});
}
// ResNet-50's 3×3 layers (batch 1, bias and ReLU; fp32, or int8 with signed weights where
// PW_BENCH_TYPE=int8) through the direct kernel's tuner: every candidate tile's time and GFLOP/s
// (G ops/s); with PW_BENCH_TILES (';'-separated direct configs, e.g. 'l1 oc4 px4 v16 k4;l1 oc2
// px32 v16 k64') those alone, 5 alternating rounds, the minimum ms of each. Run with
// --gtest_also_run_disabled_tests --gtest_filter='ConvBench.DISABLED_ResNet3x3'.
TEST(ConvBench, DISABLED_ResNet3x3) {
  Device& dev = DefaultDevice();
  Tuner tuner(dev, 5);
  const char* type_env = std::getenv("PW_BENCH_TYPE");
  const bool int8 = type_env && std::string(type_env) == "int8";
  for (auto [c, hw] : {std::array<int, 2>{64, 56}, {128, 28}, {256, 14}, {512, 7}}) {
    ConvDesc d;
    d.channels = d.out_channels = c;
    d.height = d.width = hw;
    d.kernel_h = d.kernel_w = 3;
    d.pad_h = d.pad_w = 1;
    d.bias = d.relu = true;
    d.type = int8 ? DataType::kInt8Q : DataType::kFloat32;
    d.weights_signed = int8;
    if (const char* tiles_env = std::getenv("PW_BENCH_TILES")) {
      // The ';'-separated direct-kernel configs alone, alternating, minimum ms of each.
      std::vector<ConvConfig> configs;
      ASSERT_TRUE(ParseList(tiles_env, &configs));
      const ConvOperands ops(dev, d);
      std::vector<double> best(configs.size(), std::numeric_limits<double>::infinity());
      for (int r = 0; r < 5; ++r)
        for (size_t i = 0; i < configs.size(); ++i)
          best[i] = std::min(best[i], tuner.TimeConv(d, configs[i], ops));
      std::string line = d.ToString() + ":";
      for (size_t i = 0; i < configs.size(); ++i)
        line += "  " + configs[i].ToString() + " " + std::to_string(best[i]);
      std::printf("%s\n", line.c_str());
      continue;
    }
    const ConvTuneResult r = tuner.TuneConv(d, 100.0);
    std::printf("%s: best %s %.3f ms (%.1f GFLOP/s)\n", d.ToString().c_str(),
                r.best.ToString().c_str(), r.best_ms, d.Flops() / r.best_ms * 1e-6);
    for (const auto& [config, ms] : r.measured)
      std::printf("  %-16s %.3f ms %.1f GFLOP/s\n", config.ToString().c_str(), ms,
                  d.Flops() / ms * 1e-6);
  }
}
// ResNet-50's stride-2 1×1 layers in fp32 (the plane form on the subsampled input, or the
// direct kernel).
TEST(ConvBench, DISABLED_ResNetStridedPointwise) {
  TimePointwiseLayers(DataType::kFloat32, {{256, 512, 56, 2}, {256, 128, 56, 2},
                                           {512, 1024, 28, 2}, {512, 256, 28, 2},
                                           {1024, 2048, 14, 2}, {1024, 512, 14, 2}});
}

// Not a test: MobileNet v1's depthwise layers (batch 1, fp32 or int8, bias and ReLU fused) timed with
// each rows-per-work-item candidate through the tuner (the winners go to MPCAFFE_CACHE's tuning
// table). Run with --gtest_also_run_disabled_tests --gtest_filter='*MobileNetDepthwiseRows*'.
void TimeMobileNetDepthwiseRows(DataType type) {
  Device& dev = DefaultDevice();
  Tuner tuner(dev, 5);
  const int layers[][3] = {{32, 112, 1},  {64, 112, 2}, {128, 56, 1}, {128, 56, 2},
                           {256, 28, 1},  {256, 28, 2}, {512, 14, 1}, {512, 14, 2},
                           {1024, 7, 1}};
  for (const auto& l : layers) {
    ConvDesc d;
    d.channels = d.out_channels = d.groups = l[0];
    d.height = d.width = l[1];
    d.kernel_h = d.kernel_w = 3;
    d.stride_h = d.stride_w = l[2];
    d.pad_h = d.pad_w = 1;
    d.bias = d.relu = true;
    d.type = type;
    d.weights_signed = IsQuantized(type);
    const DepthwiseTuneResult r = tuner.TuneDepthwise(d);
    std::string line;
    for (const auto& [rows, ms] : r.measured)
      line += " rows" + std::to_string(rows) + " " + std::to_string(ms).substr(0, 5);
    std::printf("%-50s %.2f MFLOP best rows%d %.3f ms (%.1f GFLOP/s), default %.3f ms:%s\n",
                d.ToString().c_str(), d.Flops() * 1e-6, r.best, r.best_ms,
                d.Flops() / r.best_ms * 1e-6, r.default_ms, line.c_str());
  }
}

TEST(ConvBench, DISABLED_MobileNetDepthwiseRows) { TimeMobileNetDepthwiseRows(DataType::kFloat32); }
// The same layers in int8 (signed weights, as calibration gives them).
TEST(ConvBench, DISABLED_MobileNetDepthwiseRowsInt8) {
  TimeMobileNetDepthwiseRows(DataType::kInt8Q);
}

}  // namespace
}  // namespace mpcaffe::libdnn
