// tests/libdnn/conv_launch_test.cc — the work-group shapes the pointwise plane form is launched
// with on a CPU runtime (conv_internal::SpreadLocal, PixelsFirstLocal): they divide the grid,
// fit the device's limit, leave the groups per compute unit asked for where the grid has them,
// and group the work-items the way conv_launch.cc says (pixels first: every block of channels of a few
// pixel blocks; spread: all pixel blocks of a few blocks of channels); and how a zipped tile's
// blocks of output channels are shared among work-items (PointwiseZipBlocks).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>

#include "device/device.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn {
namespace {

using Grid = std::array<size_t, 3>;

DeviceInfo Cpu(int units, size_t max_group) {
  DeviceInfo info;
  info.compute_units = units;
  info.max_work_group_size = max_group;
  return info;
}

size_t Groups(const Grid& global, const Grid& local) {
  for (int i = 0; i < 3; ++i)
    if (local[i] == 0 || global[i] % local[i]) return 0;
  return global[0] / local[0] * (global[1] / local[1]) * (global[2] / local[2]);
}

TEST(ConvLaunch, PixelsFirstTakesEveryBlockOfChannelsOfAFewPixels) {
  const DeviceInfo two = Cpu(2, 4096);
  // ResNet-50's 256 → 64 at 56×56 in fp32, blocks of 32 pixels × 8 channels: 98 pixel blocks
  // of 32 KB of input each, more than the L1 budget alone: one per group.
  EXPECT_EQ(conv_internal::PixelsFirstLocal({98, 8, 1}, two, 8, 32 << 10), (Grid{1, 8, 1}));
  // 32 channels at 112×112 (4 KB a block): four neighbouring blocks per group, 98 groups.
  EXPECT_EQ(conv_internal::PixelsFirstLocal({392, 8, 1}, two, 8, 4 << 10), (Grid{4, 8, 1}));
  // As many blocks as still leave 8 groups per core: 2 of 1 KB in 32 → 16 groups.
  EXPECT_EQ(conv_internal::PixelsFirstLocal({32, 4, 1}, two, 8, 1 << 10), (Grid{2, 4, 1}));
  // 7 pixel blocks give 7 groups: the 64 blocks of channels are split in 4 (28 groups).
  EXPECT_EQ(conv_internal::PixelsFirstLocal({7, 64, 1}, two, 8, 64 << 10), (Grid{1, 16, 1}));
  // Images are groups too: 4 images of 7 blocks are 28 groups, no split of the channels.
  EXPECT_EQ(conv_internal::PixelsFirstLocal({7, 64, 4}, two, 8, 64 << 10), (Grid{1, 64, 1}));
  // The device's limit is kept: 256 blocks of channels on a device of 64 work-items a group.
  const Grid capped = conv_internal::PixelsFirstLocal({98, 256, 1}, Cpu(2, 64), 8, 32 << 10);
  EXPECT_LE(capped[0] * capped[1], 64u);
  EXPECT_GE(Groups({98, 256, 1}, capped), 16u);
}

ConvDesc Plane(int side, int in, int out) {
  ConvDesc d;
  d.type = DataType::kInt8Q;
  d.channels = in, d.out_channels = out, d.height = d.width = side;
  return d;
}

// A zipped tile's (ob > 1) blocks of output channels are shared evenly among a pixel block's
// work-items, and split further where the pixel blocks alone leave the compute units fewer
// work-items than the spread asks (8 per unit on a CPU runtime).
TEST(ConvLaunch, ZippedTilesShareTheirChannelBlocksEvenly) {
  const DeviceInfo two = Cpu(2, 4096);
  const Convolution::PointwiseTile quads{16, 1, 16, 4, 64}, pairs{8, 1, 16, 2, 64};
  // 7×7: 4 pixel blocks of 16. 60 blocks of 16 channels in 4 groups of 15 (16 work-items).
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(7, 160, 960), quads, two), 15);
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(7, 320, 1280), quads, two), 20);
  // 10 blocks of 8 channels: 4 groups of 3 (the last of one), no fewer than 2 blocks a group.
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(7, 24, 76), pairs, two), 3);
  // 3 blocks: one group (two would hold one block).
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(7, 24, 20), pairs, two), 64);
  // 28×28 has 49 pixel blocks: one group where 64 blocks cover the channels, else even ones
  // (80 blocks: 40 and 40, not 64 and 16).
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(28, 96, 192), quads, two), 64);
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(28, 96, 1280), quads, two), 40);
  // No more blocks than the tile's ob: 5 blocks at ob 2 stay 3 groups.
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(7, 24, 40), {8, 1, 16, 2, 2}, two), 2);
  // Two blocks or none zipped: the tile's own.
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(7, 24, 16), pairs, two), 64);
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(7, 160, 960), {16, 1, 16, 4, 1}, two), 1);
  // Work-items in lanes (a GPU): the runtime spreads them, the groups are only evened.
  DeviceInfo gpu = two;
  gpu.is_gpu = true;
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(7, 160, 960), quads, gpu), 64);
  EXPECT_EQ(conv_internal::PointwiseZipBlocks(Plane(7, 320, 1280), quads, gpu), 40);
}

TEST(ConvLaunch, SpreadTakesWholeRowsOfPixels) {
  const DeviceInfo two = Cpu(2, 4096);
  // 16 blocks of channels of 98 pixel blocks: one block of channels per group, all its pixels.
  EXPECT_EQ(conv_internal::SpreadLocal({98, 16, 1}, two, 8), (Grid{98, 1, 1}));
  // 8 blocks of channels give 8 groups: the pixels are split in two (16 groups).
  EXPECT_EQ(conv_internal::SpreadLocal({98, 8, 1}, two, 8), (Grid{49, 1, 1}));
}

TEST(ConvLaunch, EveryShapeDividesTheGridAndLeavesTheGroupsAsked) {
  for (int units : {1, 2, 16})
    for (size_t pixels : {1u, 2u, 7u, 49u, 98u, 392u})
      for (size_t channels : {1u, 3u, 8u, 64u, 128u})
        for (size_t images : {1u, 3u}) {
          const Grid global{pixels, channels, images};
          const DeviceInfo info = Cpu(units, 256);
          const size_t want = std::min<size_t>(8 * size_t(units), pixels * channels * images);
          for (const Grid& local : {conv_internal::PixelsFirstLocal(global, info, 8, 4096),
                                    conv_internal::SpreadLocal(global, info, 8)}) {
            SCOPED_TRACE(std::to_string(units) + " units, grid " + std::to_string(pixels) + "×" +
                         std::to_string(channels) + "×" + std::to_string(images) + ", local " +
                         std::to_string(local[0]) + "×" + std::to_string(local[1]));
            const size_t groups = Groups(global, local);
            ASSERT_GT(groups, 0u) << "the work-group does not divide the grid";
            EXPECT_LE(local[0] * local[1] * local[2], 256u);
            EXPECT_GE(groups, want / 2) << "far fewer groups than asked";
          }
        }
}

}  // namespace
}  // namespace mpcaffe::libdnn
