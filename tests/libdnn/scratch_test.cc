// tests/libdnn/scratch_test.cc — the scratch arena of reduced-memory inference: one buffer per
// use and queue, grown to the largest request, and convolutions of every family that take
// their scratch from one arena, back to back on a queue, giving what they give with buffers of
// their own.
#include "libdnn/scratch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "device/device.h"
#include "libdnn/conv.h"
#include "libdnn/conv_winograd.h"
#include "quant/fixed_point.h"
#include "tests/libdnn/conv_run.h"

namespace mpcaffe::libdnn {
namespace {

using test_conv::Bytes;
using test_conv::Upload;

TEST(ScratchArena, OneBufferPerUseAndQueueGrownToTheLargestRequest) {
  Device& dev = DefaultDevice();
  ScratchArena arena;
  const auto first = arena.Get(dev, nullptr, ScratchUse::kColumns, 1000);
  ASSERT_GE(first->bytes(), 1000u);
  EXPECT_EQ(arena.Get(dev, nullptr, ScratchUse::kColumns, 600), first);  // fits: the same
  EXPECT_EQ(arena.Get(dev, &dev.current_queue(), ScratchUse::kColumns, 1000), first);
  const auto larger = arena.Get(dev, nullptr, ScratchUse::kColumns, 3000);
  EXPECT_NE(larger, first);
  EXPECT_GE(larger->bytes(), 3000u);
  EXPECT_EQ(arena.Get(dev, nullptr, ScratchUse::kColumns, 1000), larger);
  const auto other_use = arena.Get(dev, nullptr, ScratchUse::kWinogradInput, 100);
  EXPECT_NE(other_use, larger);
  std::unique_ptr<Queue> queue = dev.CreateQueue();
  const auto other_queue = arena.Get(dev, queue.get(), ScratchUse::kColumns, 100);
  EXPECT_NE(other_queue, larger);
  EXPECT_EQ(arena.bytes(), larger->bytes() + other_use->bytes() + other_queue->bytes());
  // Without an arena every caller has a buffer of its own, kept while it is large enough.
  std::shared_ptr<DeviceMemory> mine, theirs;
  TakeScratch(dev, nullptr, nullptr, ScratchUse::kColumns, 10, &mine);
  TakeScratch(dev, nullptr, nullptr, ScratchUse::kColumns, 10, &theirs);
  EXPECT_NE(mine, theirs);
  const std::shared_ptr<DeviceMemory> before = mine;
  TakeScratch(dev, nullptr, nullptr, ScratchUse::kColumns, 8, &mine);
  EXPECT_EQ(mine, before);
  TakeScratch(dev, nullptr, nullptr, ScratchUse::kColumns, 100, &mine);
  EXPECT_GE(mine->bytes(), 100u);
  // With one, the arena's buffer whatever the caller held.
  TakeScratch(dev, &arena, nullptr, ScratchUse::kColumns, 10, &mine);
  EXPECT_EQ(mine, larger);
}

ConvDesc Desc(DataType t, int c, int hw, int o, int k, int stride, int pad) {
  ConvDesc d;
  d.type = t;
  d.batch = 2, d.channels = c, d.height = d.width = hw, d.out_channels = o;
  d.kernel_h = d.kernel_w = k;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  d.bias = true;
  return d;
}

/// The convolutions of a small net in type `t`, each family with scratch twice, the larger
/// first (so the smaller reads a buffer a larger one filled before): Winograd (transformed
/// input and products), im2col GEMM with few channels (columns, and int8's packed weight
/// pairs), strided 1×1 (subsampled input), and the planned kernel of a 3×3 stride-2 layer
/// (int8: packed input planes).
std::vector<Convolution> Layers(Device& dev, DataType t, const ConvQuant& q) {
  std::vector<Convolution> layers;
  for (int hw : {14, 9}) {
    const ConvDesc wino = Desc(t, 12, hw, 16, 3, 1, 1);
    if (WinogradApplies(wino))
      layers.push_back(Convolution::Winograd(dev, wino, WinogradCandidates({}, t)[0], q));
    layers.emplace_back(dev, Desc(t, 3, hw + 6, 10, 7, 2, 3), q);
    layers.emplace_back(dev, Desc(t, 16, hw, 24, 1, 2, 0), q);
    layers.emplace_back(dev, Desc(t, 20, hw, 18, 3, 2, 1), q);
  }
  return layers;
}

/// Every layer's output, the forwards enqueued back to back (no host wait between them);
/// with `arena` all layers take their scratch from it.
std::vector<Bytes> RunAll(Device& dev, std::vector<Convolution>& layers, ScratchArena* arena,
                          uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  auto random = [&](size_t n) {
    Bytes b(n);
    for (uint8_t& v : b) v = static_cast<uint8_t>(byte(rng));
    return b;
  };
  std::vector<std::shared_ptr<DeviceMemory>> keep, outputs;
  for (Convolution& conv : layers) {
    const ConvDesc& d = conv.desc();
    const bool q = IsQuantized(d.type);
    auto floats = [&](size_t n) {  // fp32 values in [−1, 1)
      std::vector<float> f(n);
      for (float& v : f) v = static_cast<float>(byte(rng)) / 128.0f - 1.0f;
      return Bytes(reinterpret_cast<uint8_t*>(f.data()), reinterpret_cast<uint8_t*>(f.data() + n));
    };
    const Bytes x = q ? random(d.input_count()) : floats(d.input_count());
    const Bytes w = q ? random(d.weight_count()) : floats(d.weight_count());
    std::vector<int32_t> bias_q(size_t(d.out_channels));
    for (int32_t& v : bias_q) v = byte(rng) * 16 - 2048;
    const Bytes bias = q ? Bytes(reinterpret_cast<uint8_t*>(bias_q.data()),
                                 reinterpret_cast<uint8_t*>(bias_q.data() + bias_q.size()))
                         : floats(size_t(d.out_channels));
    keep.push_back(Upload(dev, x));
    keep.push_back(Upload(dev, w));
    keep.push_back(Upload(dev, bias));
    outputs.push_back(dev.Allocate(d.output_count() * SizeOf(d.type)));
    if (arena) conv.set_scratch_arena(std::shared_ptr<ScratchArena>(arena, [](ScratchArena*) {}));
    conv.SetWeights(BufferRef(keep[keep.size() - 2].get(), 0));
    conv.Forward(BufferRef(keep[keep.size() - 3].get(), 0), BufferRef(keep.back().get(), 0),
                 BufferRef(outputs.back().get(), 0));
    conv.ReleaseScratch();  // as reduced-memory inference does after every layer
  }
  std::vector<Bytes> got;
  for (auto& y : outputs) {
    got.emplace_back(y->bytes());
    dev.CopyToHost(y.get(), 0, got.back().data(), got.back().size());
  }
  return got;
}

TEST(ScratchArena, ConvolutionsSharingOneArenaGiveTheirOwnResults) {
  Device& dev = DefaultDevice();
  for (DataType t : {DataType::kFloat32, DataType::kInt8Q}) {
    SCOPED_TRACE(Name(t));
    ConvQuant q;
    if (IsQuantized(t)) {
      q.x_zero = 7, q.w_zero = {131}, q.c_zero = 20;
      q.multiplier = {quant::QuantizeMultiplier(1.0 / 60000)};
    }
    std::vector<Convolution> own = Layers(dev, t, q), shared = Layers(dev, t, q);
    ScratchArena arena;
    for (uint32_t seed : {1u, 2u}) {  // the second pass finds the buffers the first filled
      const std::vector<Bytes> want = RunAll(dev, own, nullptr, seed);
      const std::vector<Bytes> got = RunAll(dev, shared, &arena, seed);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], want[i]) << shared[i].desc().ToString();
    }
    EXPECT_GT(arena.bytes(), 0u);  // the scratch came from the arena
  }
}

}  // namespace
}  // namespace mpcaffe::libdnn
