// libdnn/conv_launch.cc — the work-group shapes of the convolution launches on OpenCL CPU
// runtimes (conv_internal.h): spread over the compute units (SpreadLocal, the pointwise and
// Winograd launches), the pointwise plane form's groups of pixels first for an input larger
// than a core's L2 (PixelsFirstLocal), and the plane form's launch that chooses between them
// (PointwisePlaneLaunch). GPUs and llvmpipe leave the shape to their runtime.
#include <algorithm>
#include <array>
#include <cstddef>

#include "device/device.h"
#include "libdnn/conv_families.h"
#include "libdnn/conv_internal.h"

namespace mpcaffe::libdnn {

namespace {

/// The spread's work-groups per compute unit for `d` on `info`'s device (0: the runtime's
/// choice).
int SpreadPerUnit(const ConvDesc& d, const DeviceInfo& info) {
  return DefaultRowFor(PointwiseSpreadDefaults(), "conv_pw", TargetProfile::Of(info), d).config;
}

/// The largest divisor of n not above limit (at least 1).
size_t DivisorAtMost(size_t n, size_t limit) {
  for (size_t v = std::min(n, std::max<size_t>(limit, 1)); v > 1; --v)
    if (n % v == 0) return v;
  return 1;
}

/// `local` made to fit the device's work-group limit: its first dimension, then its second,
/// down to smaller divisors of `global`'s.
std::array<size_t, 3> WithinGroupLimit(std::array<size_t, 3> local,
                                       const std::array<size_t, 3>& global,
                                       const DeviceInfo& info) {
  const size_t max_group = std::max<size_t>(1, info.max_work_group_size);
  while (local[0] * local[1] > max_group) {
    if (local[0] > 1)
      local[0] = DivisorAtMost(global[0], local[0] - 1);
    else
      local[1] = DivisorAtMost(global[1], local[1] - 1);
  }
  return local;
}

}  // namespace

namespace conv_internal {

/// A work-group size dividing `global` that leaves at least `per_unit` work-groups per compute
/// unit where the grid has them: whole rows of dimension 0 (neighbouring pixel blocks share
/// weights), as few of dimension 1 as that takes. A runtime left to choose (PoCL) makes the
/// largest groups it can and then only as many as there are compute units: two groups of a 1×1
/// convolution on a 2-core machine, which a core delayed by anything else cannot hand over. Each
/// dimension's work-item limit is taken to be the work-group limit, as on PoCL and Intel's
/// runtime (DeviceInfo holds no per-dimension limits; GPUs do not take this path).
std::array<size_t, 3> SpreadLocal(const std::array<size_t, 3>& global, const DeviceInfo& info,
                                  int per_unit) {
  const size_t want = size_t(per_unit) * size_t(std::max(1, info.compute_units));
  std::array<size_t, 3> local{global[0], 1, 1};
  const size_t outer = global[1] * global[2];  // groups along 1 and 2 with local[1] = 1
  if (outer >= want) {
    local[1] = DivisorAtMost(global[1], std::max<size_t>(1, outer / want));
  } else {
    local[0] = DivisorAtMost(global[0], std::max<size_t>(1, global[0] * outer / want));
  }
  return WithinGroupLimit(local, global, info);
}

/// A work-group size for a grid of (pixel blocks, blocks of output channels, images) whose
/// work-items of one pixel block all read the same `pixel_bytes` of input (the pointwise plane
/// form: C channels of the block's pixels), for an input larger than a core's L2: each group
/// takes every block of channels of a few neighbouring pixel blocks. A CPU runtime runs a group
/// on one core, dimension 0 innermost, so the group's pixels come from memory once and again
/// from L1 (kL1Bytes) for each block of channels; SpreadLocal's groups (all pixels, some blocks
/// of channels) read the whole input from memory once per group. At least `per_unit` groups per
/// compute unit; where the pixels give fewer, the blocks of channels are split as well.
std::array<size_t, 3> PixelsFirstLocal(const std::array<size_t, 3>& global, const DeviceInfo& info,
                                       int per_unit, size_t pixel_bytes) {
  constexpr size_t kL1Bytes = 16 << 10;  // half the smallest L1 here: room for the weights
  const size_t want = size_t(per_unit) * size_t(std::max(1, info.compute_units));
  std::array<size_t, 3> local{1, global[1], 1};
  const size_t pixel_groups = global[0] * global[2];
  if (pixel_groups >= want) {
    for (size_t p = global[0]; p > 1; --p)
      if (global[0] % p == 0 && p * pixel_bytes <= kL1Bytes && global[0] / p * global[2] >= want) {
        local[0] = p;
        break;
      }
  } else {
    local[1] = DivisorAtMost(global[1], std::max<size_t>(1, global[1] * pixel_groups / want));
  }
  return WithinGroupLimit(local, global, info);
}

int PointwiseZipBlocks(const ConvDesc& d, const Convolution::PointwiseTile& t,
                       const DeviceInfo& info) {
  const int blocks = DivUp(d.out_channels, t.oc);
  if (t.ob <= 1 || blocks <= 2) return t.ob;
  // A 7×7 plane is 4 blocks of 16 pixels: at ob 64, MobileNet v2's 160 → 960 channels ran as 4
  // work-items on 2 cores, 1.25× the time of 8 or 16 (PoCL, AVX-512 VNNI). The spread's groups
  // per compute unit (PointwiseSpreadDefaults) are the work-items wanted; each group zips its
  // column once more, a 16th of one block's products and less.
  const long pixel_blocks = long(DivUp(d.out_h() * d.out_w(), t.px * t.vx)) * d.batch;
  const long want = long(SpreadPerUnit(d, info)) * std::max(1, info.compute_units);
  int groups = DivUp(blocks, t.ob);
  if (pixel_blocks * groups < want)  // no group of fewer than 2 blocks, none of more than ob
    groups = std::max<int>(groups, std::min<long>((want + pixel_blocks - 1) / pixel_blocks,
                                                  blocks / 2));
  if (groups == 1) return t.ob;  // one work-item per pixel block takes every block
  return std::max(2, DivUp(blocks, groups));
}

PlaneLaunch PointwisePlaneLaunch(const ConvDesc& d, const Convolution::PointwiseTile& t,
                                 const DeviceInfo& info) {
  const long hw = long(d.out_h()) * d.out_w(), block = long(t.px) * t.vx;
  const size_t es = SizeOf(d.type);
  PlaneLaunch l;
  l.global = {size_t(DivUp(int(hw), int(block))), size_t(DivUp(DivUp(d.out_channels, t.oc), t.ob)),
              size_t(d.batch)};
  const int per_unit = SpreadPerUnit(d, info);
  // An input larger than a core's L2 and no smaller than the output (ResNet-50's 256 → 64
  // channels at 56×56, MobileNet v1's 128 → 128) is read once in groups of a few pixels and
  // every block of channels; otherwise the groups stream whole planes of a few channels, which
  // keeps the stores (and a residual's loads) in long runs: the expansions (64 → 256 at 56×56)
  // and the 14×14 layers of large weights measured slower in whole nets the other way.
  constexpr size_t kL2Bytes = 1 << 20;  // the smallest L2 of the x86 CPUs here (Zen 4)
  const size_t in_bytes = size_t(d.channels) * size_t(hw) * es;
  const bool pixels_first = in_bytes > kL2Bytes && d.channels >= d.out_channels;
  l.local = per_unit == 0  ? std::array<size_t, 3>{0, 0, 0}
            : pixels_first ? PixelsFirstLocal(l.global, info, per_unit,
                                              size_t(d.channels) * size_t(block) * es)
                           : SpreadLocal(l.global, info, per_unit);
  return l;
}

}  // namespace conv_internal

}  // namespace mpcaffe::libdnn
