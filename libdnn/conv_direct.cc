// libdnn/conv_direct.cc — the direct kernel's forward launches (Convolution::ForwardDirect):
// the input's packing kernel per chunk of images where the input mode packs it (ConvInput:
// pairs, split pairs, byte quads, tiles, the grid form), then the forward kernel with the
// arguments of its mode's layout. Construction and the other families' launches: conv.cc.
#include <algorithm>
#include <cstdint>

#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"
#include "libdnn/scratch.h"

namespace mpcaffe::libdnn {

using namespace conv_internal;  // NOLINT: the convolution's private vocabulary

Event Convolution::ForwardDirect(const BufferRef& input, const BufferRef& bias_arg,
                                 const BufferRef& res_arg, const BufferRef& output, Queue* queue) {
  const ConvDesc& d = desc_;
  const size_t es = SizeOf(d.type);
  const int ocg = d.out_channels / d.groups, oh = d.out_h(), ow = d.out_w();
  const size_t lanes = size_t(config_.lanes);
  // Byte quads walk their packed planes (QuadLayout: a strided 1×1 window's hold only the
  // pixels it reads, tap quads' the padding; "Cg" is 4 per quad plane); tiles their grid
  // (TileLayout: the padding inside it, at stride 1); the grid form its planes of the output's
  // columns (QuadGridLayout: tap quads a window of one column over 4·planes channels whose rows
  // are the stride apart). Each layout once per call, for the packing and the forward launch.
  const bool quads = input_ == ConvInput::kPackedQuads;
  const bool tiles = input_ == ConvInput::kPackedTiles;
  const bool grid = input_ == ConvInput::kQuadGrid;
  const QuadLayout l = quads ? QuadLayoutOf(d) : QuadLayout{};
  const TileLayout tl = tiles ? TileLayoutOf(d) : TileLayout{};
  const QuadGridLayout gl = grid ? QuadGridLayoutOf(d) : QuadGridLayout{};
  // One launch over `images` images from `first`, reading `x` (the input or packed planes).
  auto launch = [&](int first, int images, DeviceMemory* x, size_t x_byte_offset,
                    size_t xs_byte_offset) {
    const size_t out_offset = size_t(first) * d.out_channels * oh * ow * es;
    forward_.ArgBuffer(x, x_byte_offset, IsPacked(input_) ? 4 : es)
        .ArgBuffer(packed_.get(), 0, PackedBytes(d.type, input_))
        .ArgBuffer(bias_arg.mem, d.bias ? bias_arg.byte_offset : 0, BiasBytes(d.type))
        .Arg(requant_)
        .ArgBuffer(res_arg.mem, res_arg.byte_offset + out_offset, es)
        .ArgBuffer(output.mem, output.byte_offset + out_offset, es);
    if (input_ == ConvInput::kPackedSplit) forward_.ArgBuffer(x, xs_byte_offset, 4).Arg(w_zero_);
    if (input_ == ConvInput::kDot4) forward_.Arg(w_zero_).Arg(wsum_);
    if (IsByteQuads(input_)) forward_.Arg(wsum_);
    const int h = quads ? l.h : tiles ? tl.h : grid ? gl.h : d.height;
    const int wd = quads ? l.w : tiles ? tl.w : grid ? gl.w : d.width;
    const int cg = quads ? 4 * l.planes : grid && gl.taps ? 4 * gl.planes : d.channels / d.groups;
    const int kw = quads ? l.kw : grid && gl.taps ? 1 : d.kernel_w;
    const int sh = quads ? l.sh : tiles || (grid && !gl.taps) ? 1 : d.stride_h;
    const int sw = quads ? l.sw : tiles || grid ? 1 : d.stride_w;
    const int ph = quads ? l.ph : tiles || grid ? 0 : d.pad_h;
    const int pw = quads ? l.pw : tiles || grid ? 0 : d.pad_w;
    const int dw = quads ? l.dw : grid && gl.taps ? 1 : d.dilation_w;
    for (int v : {d.channels,   h,
                  wd,           cg,
                  ocg,          oc_padded_,
                  oh,           ow,
                  d.kernel_h,   kw,
                  sh,           sw,
                  ph,           pw,
                  d.dilation_h, dw,
                  d.groups,     int(d.bias),
                  int(d.relu),  x_zero_,
                  c_zero_,      int(d.residual),
                  res_zero_,    res_m_,
                  res_s_,       rq_mode_})
      forward_.Arg(int32_t{v});
    const int positions = tiles ? tl.grid : grid ? gl.grid : oh * ow;
    const Dim3 global = {size_t(DivUp(positions, config_.px_per_item)) * lanes,
                         size_t(DivUp(ocg, config_.channels_per_group())),
                         size_t(images) * d.groups};
    return forward_.Launch(global, {lanes, 1, 1}, queue);
  };
  if (!IsPacked(input_)) return launch(0, d.batch, input.mem, input.byte_offset, 0);

  // Pack a chunk of images, convolve it, next chunk (the queue is in order, so a pack never
  // overwrites planes a previous launch still reads).
  const size_t per_image = PackedInputBytes(d, input_);
  const int chunk = int(std::clamp<size_t>(kPackChunkBytes / per_image, 1, size_t(d.batch)));
  TakeScratch(*device_, arena_.get(), queue, ScratchUse::kPackedInput, chunk * per_image,
              &xpacked_);
  const size_t hw = size_t(d.height) * d.width;
  Event last;
  for (int first = 0; first < d.batch; first += chunk) {
    const int images = std::min(chunk, d.batch - first);
    // Split planes: the lo/hi words of every (image, group), then the channel sums.
    const size_t xs_offset = images * (per_image - size_t(d.groups) * hw * 4);
    xpack_.ArgBuffer(input.mem, input.byte_offset + size_t(first) * d.channels * hw * es, es)
        .ArgBuffer(xpacked_.get(), 0, 4);
    if (input_ == ConvInput::kPackedSplit) xpack_.ArgBuffer(xpacked_.get(), xs_offset, 4);
    const size_t planes_hw = quads   ? size_t(l.h) * l.w
                             : tiles ? size_t(tl.plane)
                             : grid  ? size_t(gl.plane)
                                     : hw;
    xpack_.Arg(int32_t{d.channels / d.groups})
        .Arg(int32_t(planes_hw))
        .Arg(int32_t{images * d.groups})
        .Arg(int32_t{x_zero_});
    if (grid) {
      xpack_.Arg(int32_t{d.width}).Arg(int32_t(hw)).Arg(int32_t{gl.w});
      xpack_.Arg(int32_t{d.pad_h}).Arg(int32_t{d.pad_w}).Arg(int32_t{d.stride_w});
      xpack_.Arg(int32_t{d.dilation_w}).Arg(int32_t{gl.kq});
    }
    if (tiles) {
      const bool sub = QuadsSubsample(d);
      xpack_.Arg(int32_t{d.width}).Arg(int32_t(hw)).Arg(int32_t{tl.w});
      xpack_.Arg(int32_t{sub ? 0 : d.pad_h}).Arg(int32_t{sub ? 0 : d.pad_w});
      xpack_.Arg(int32_t{sub ? d.stride_h : 1}).Arg(int32_t{sub ? d.stride_w : 1});
    }
    if (quads) {
      const bool sub = QuadsSubsample(d);
      xpack_.Arg(int32_t{d.width}).Arg(int32_t(hw)).Arg(int32_t{l.w});
      if (l.taps)
        xpack_.Arg(int32_t{d.pad_h}).Arg(int32_t{d.pad_w}).Arg(int32_t{d.dilation_w});
      else
        xpack_.Arg(int32_t{sub ? d.stride_h : 1}).Arg(int32_t{sub ? d.stride_w : 1});
    }
    // Tap quads: a work-item per packed row; otherwise per pixel, over the planes.
    // Tiles: a work-item per 16 grid positions of a grid row (the plane's rows, the last
    // partial) and 64-channel block. The grid form: per packed row of its quad planes.
    const size_t items = size_t(images) * d.groups *
                         (l.taps  ? size_t(l.planes) * l.h
                          : grid  ? size_t(gl.planes) * gl.h
                          : tiles ? size_t(tl.blocks) * DivUp(tl.plane, tl.w) * DivUp(tl.w, 16)
                                  : planes_hw);
    if (tiles)  // few work-items of many lines each: groups of the forward kernel's size
      xpack_.Launch({items, 1, 1}, {size_t(config_.lanes), 1, 1}, queue);
    else
      xpack_.Launch1D(items, queue);
    last = launch(first, images, xpacked_.get(), 0, xs_offset);
  }
  return last;
}

}  // namespace mpcaffe::libdnn
