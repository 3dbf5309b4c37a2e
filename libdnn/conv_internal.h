// libdnn/conv_internal.h — what the convolution's files share privately (conv.cc: the object
// and its forward launches; conv_desc.cc: descriptions, configurations, input modes;
// conv_forward_source.cc: the forward kernel texts; conv_backward.cc: the fp32 backward pass;
// conv_reference.cc: host references): how the forward kernel reads its input and the sizes
// that follow from it, the one im2col kernel both passes use, and buffer checks.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "codegen/kernel_writer.h"
#include "codegen/vector_words.h"
#include "libdnn/conv.h"

namespace mpcaffe::libdnn::conv_internal {

inline int DivUp(int a, int b) { return (a + b - 1) / b; }

/// VectorResidual::below_2_16_if of the quantized kernels' fused residual on `target`: its zero
/// point in its storage's range (every x − z then below 2^16 in magnitude), where a work-item is
/// a CPU thread's loop and the explicit vectors run as its SIMD registers, whose 64-bit lanes
/// cost several instructions each (RequantResidual's 32-bit form measured faster on PoCL and
/// Intel's runtime); "" elsewhere: rusticl (llvmpipe) runs work-items as lanes and the vectors
/// as scalar code, and MobileNet v2 int8's residual layers took 75–83 ms there in the 64-bit
/// form against 90–91 in the 32-bit one (mpcaffe time --explain, 3 alternating rounds,
/// 2026-11-30).
inline std::string ResidualBelow2To16If(const KernelTarget& target) {
  return target.work_item_is_thread ? "res_zero >= Dtype_QMIN && res_zero <= Dtype_QMAX" : "";
}

/// The int8q vector epilogues' fused residual: `codes` (int lanes of the residual's storage)
/// minus res_zero, to the output's scale with res_m and res_s; in 32-bit lanes as
/// ResidualBelow2To16If has it, alone where `known` says the host checked it applies.
inline VectorResidual ResidualOf(const KernelTarget& target, const std::string& codes,
                                 RequantKnown known) {
  const std::string below = ResidualBelow2To16If(target);
  return {codes + " - res_zero", "res_m", "res_s", below, !below.empty() && known.residual_split};
}

/// Whether the pointwise family runs `d` in its row form (few input channels under a window: a
/// first layer) rather than its plane form (1×1, strided ones on their subsampled input).
inline bool PointwiseRowForm(const ConvDesc& d) {
  return !Convolution::IsPointwise(d) && !Convolution::IsStridedPointwise(d);
}

/// The int8q pointwise plane form's K loop in byte quads (PointwiseTile::k 4), an MP_QUAD_FN
/// function conv_pw_quads(x, wb, acc) (conv_pointwise_quads_source.cc says how).
/// Quads per output channel in byte tiles (PointwiseTile::k 64): ⌈C/4⌉ rounded up to 16.
inline int PointwiseTileQuads(int channels) { return (channels + 63) / 64 * 16; }
/// The byte tiles' K loop (conv_pointwise_quads_source.cc), conv_pw_tiles(xq, wb, acc).
std::string PointwiseTileLoop(const ConvDesc& d, const Convolution::PointwiseTile& t);
std::string PointwiseQuadLoop(const ConvDesc& d, const Convolution::PointwiseTile& t);
/// A tile of ob > 1's zip, in the kernel's text: the work-item's px vectors of 16 pixels of
/// every input channel from `xn` into `xq` as byte quads.
std::string PointwiseZip(const ConvDesc& d, const Convolution::PointwiseTile& t);

/// OpenCL text of the lanes of `vx` neighbouring output columns, for kernels with vectors along
/// the output row (the depthwise vector kernel, the pointwise kernel's row form): `lx` (each
/// lane's input column offset, stride_w apart) and per window column kx `ix<kx>` (its input
/// columns, from `ixb`, the first lane's first window column, which the text must define) and
/// `cm<kx>` (-1 where that column lies inside the input row, else 0).
std::string VectorColumnLanes(const ConvDesc& d, int vx);

/// The depthwise kernel's signature, the same for all its forms (conv.cc's launch sets these
/// arguments in this order): x, wt, bias, rq, wz, res, y, then x_zero, c_zero, res_zero, res_m,
/// res_s.
KernelBuilder& DeclareDepthwiseKernel(KernelWriter& w, const ConvDesc& d);
/// The int8q depthwise vector forms' types and helpers: Dtype, the weight storage, requantization,
/// byte-vector stores, Btype (the bias's int32).
void DeclareDepthwiseInt8Vectors(KernelWriter& w, const ConvDesc& d);
/// The depthwise vector forms' first lines: ox0 (the first of `vx` output columns), oy0 (the first
/// of `rows` output rows), nc (image · channel), ch, xc (its input plane), iyb / ixb (the block's
/// first input row and column, padding included).
std::string DepthwiseVectorPrologue(const ConvDesc& d, int rows, int vx);

/// The depthwise vector forms' epilogue: per output row t of a block of `rows` the accumulator
/// vector `acc<t>` of vx lanes (float, or int with `int_acc`) plus the bias and residual, ReLU,
/// requantization and clamp (int8q: minus `wxz`, z_x·Σ(w − z_w)), stored as one vector, a
/// partial last vector as vectors of its remainder's powers of two. The text must define nc,
/// ch, ox0, oy0. `wxz` empty: the int accumulators hold the bias and −z_x·Σ(w − z_w) already.
/// `known`: the host's checks of the requantization (RequantKnown), the paths the text keeps.
std::string DepthwiseVectorEpilogue(const KernelTarget& target, const ConvDesc& d, int rows,
                                    int vx, bool int_acc, const std::string& wxz,
                                    RequantKnown known);

/// Text opening `if (…) {` for the work-items of the depthwise vector forms whose loads stay
/// inside the input buffer: every input row of the block (`in_rows` from iyb) clipped to the
/// input, from column ixb to ixb + span (the text must define nc, iyb, ixb).
std::string DepthwiseLoadsInsideBuffer(const ConvDesc& d, int in_rows, int span);

/// Whether the depthwise vector form of `vx` columns takes 16-bit pair products
/// (DepthwisePairSource): int8q at stride 2 with 8 columns, no horizontal dilation.
bool DepthwisePairs(const ConvDesc& d, int vx);
/// That form's kernel text (conv_depthwise_pair_source.cc).
std::string DepthwisePairSource(const KernelTarget& target, const ConvDesc& d, int rows,
                                RequantKnown known);

/// Whether the byte-quad depthwise form (DepthwiseQuadSource) can run `d` on `target`, as far as
/// the description and target say (Convolution::DepthwiseQuadsApply adds the zero points).
bool DepthwiseQuadsApply(const ConvDesc& d, const KernelTarget& target);
/// That form's kernel text (conv_depthwise_quad_source.cc): 16 output columns per work-item.
std::string DepthwiseQuadSource(const KernelTarget& target, const ConvDesc& d, int rows,
                                RequantKnown known);

/// The int8 direct forward kernel's epilogue for the tile's channel vector `tj` whose CONV_VW
/// channels are all in range (conv_epilogue_source.cc): per part of at most 8 channels, their
/// bias (less z_x·Σ(w − z_w) with `quads`), multipliers and shifts loaded once, then per pixel
/// `tile[tj·px + tt]` requantized in vectors (the kernel argument rq_mode: 2, VectorWords::
/// RequantHigh, after VectorWords::PreShifted's left shift by `pre_shift` (RequantKnown's);
/// 1, RequantWide without a residual; else Requant's long lanes), the residual, zero
/// point and clamps, and one byte store per channel (NCHW: the channels are P apart; with 4
/// pixels per work-item all in range and rq_mode 1 or 2, one word of the 4 pixels per
/// channel). Text `if (…) {…} else` before the statement of the lane-by-lane epilogue; the text
/// must define oc0, the channel vector's first channel.
std::string DirectVectorEpilogue(const KernelTarget& target, const ConvConfig& c, bool quads,
                                 bool tiles = false, int pre_shift = 0);

/// One int8q output's scalar epilogue as statements indented by `indent`: `acc` (an int
/// expression, the sum with its bias) requantized with the channel's `rqm` and `rqs`, plus
/// c_zero, plus where d.residual the residual `res`[`at`] less res_zero requantized with res_m
/// and res_s, clamped (at c_zero under d.relu) and stored to `y`[`at`] (conv_epilogue_source.cc;
/// the names are the kernels' arguments).
std::string ScalarInt8Output(const ConvDesc& d, const std::string& acc, const std::string& res,
                             const std::string& y, const std::string& at, int indent);

/// Defines the weight storage spelling `Wstore` and its load `WLOAD(p, i)` (an int for quantized
/// types) of `d`'s kernels: signed int8/int16 storage for weights_signed, else Dtype.
void DeclareWeightStorage(KernelWriter& w, const ConvDesc& d);

/// Packed-weight element type of the forward kernel (float for float types, the difference
/// type for quantized ones, 16 bits for channel pairs, bytes for kDot4) and its size.
const char* PackedType(DataType t, ConvInput input);
size_t PackedBytes(DataType t, ConvInput input);

/// Packed input planes per Forward launch at most (several images per launch when they are
/// small, always at least one): the planes are twice (int8) / four times (int16) the input and
/// live as long as the Convolution, so they hold a chunk of the batch, not all of it. Measured
/// (ConvBench at batch 16, AlexNet int8, PoCL, chunk sizes interleaved): one image per launch,
/// 256 KiB, 1 MiB and the whole batch ran within 5% of each other.
constexpr size_t kPackChunkBytes = size_t(256) << 10;

/// How the forward kernel reads its input (see ConvInput and the definition in conv_desc.cc):
/// `x_fits` is whether x − z_x fits the pair planes (a zero point in the type's range).
ConvInput InputOf(Backend backend, const ConvDesc& d, const ConvConfig& c, bool x_fits);
bool IsPacked(ConvInput m);
/// The byte-quad inputs (kPackedQuads, kPackedTiles, kQuadGrid): unsigned x against w − z_w,
/// corrected by z_x·Σ(w − z_w) after the window (conv_wsum).
bool IsByteQuads(ConvInput m);
/// Input channels per packed step: 4 (kDot4, kPackedQuads), 2 (channel pairs) or 1.
int ChannelsPerStep(ConvInput m);

/// kPackedQuads (conv_quads_source.cc): the body of conv_xpack_<type> (arguments x, xq, Cg, HW,
/// NG, x_zero, XW, XHW, PW, sh, sw: per image and group ⌈Cg/4⌉ planes of HW 32-bit words of
/// four channels' bytes, PW per row, from every sh-th row and sw-th column of the input planes of
/// XW columns and XHW pixels; QuadsSubsample), and
/// the window loop `conv_quads(xg, wg, H, W, Cq, KH, KW, dh, dw, x_zero, pix, out)`, an
/// MP_QUAD_FN function: `pix` holds (valid, iy0, ix0) per pixel of the tile, `out` gets the
/// oc·px accumulators of 16 channels each (Σ x·(w − z_w), padding read as z_x), in tile order.
std::string QuadPackInputBody();
/// Whether kPackedQuads packs only the pixels `d` reads (an unpadded 1×1 window at a stride):
/// the forward kernel then runs at stride 1 over the packed planes of the output's size.
inline bool QuadsSubsample(const ConvDesc& d) {
  return d.kernel_h == 1 && d.kernel_w == 1 && d.pad_h == 0 && d.pad_w == 0 &&
         (d.stride_h > 1 || d.stride_w > 1);
}
/// kPackedQuads' layout of one convolution (QuadLayoutOf): what one quad holds, the packed planes
/// and the window the forward kernel walks over them.
///  - Channel quads: 4 input channels of one pixel per word, ⌈Cg/4⌉ planes of the input's size
///    (of the output's for QuadsSubsample) per (image, group); a step per window tap.
///  - Tap quads (`taps`): 4 neighbouring taps of one window row of one channel per word, the
///    input bytes at columns x, x + dw, x + 2dw, x + 3dw of the padded input (z_x outside it):
///    Cg planes of the padded input's size per (image, group); a step per ⌈KW/4⌉ columns of
///    each window row, the columns 4·dw apart. Where Cg < 4 (first layers) the channel quads
///    are mostly padding and a step per tap costs its address math for one product; the taps'
///    words come from a pack that already holds the padding, so every step reads in bounds.
struct QuadLayout {
  bool taps = false;
  int planes = 0;                     // quad planes per (image, group)
  int h = 0, w = 0;                   // rows and columns of a packed plane
  int kw = 0;                         // window columns in steps
  int sh = 1, sw = 1, ph = 0, pw = 0;  // stride and padding over the packed planes
  int dw = 1;                         // columns between steps
};
/// Tap quads where Cg < 4 and they take no more steps than channel quads (a window wider than
/// one column, not a subsampled 1×1 window).
QuadLayout QuadLayoutOf(const ConvDesc& d);
/// Tap quads' bodies (conv_quads_source.cc). conv_xpack_<type>: (x, xq, Cg, HW, NG, x_zero, XW,
/// XHW, PW, ph, pw, dw; a work-item per packed row), per (image, group) Cg planes of HW words,
/// PW per row, row r and column c of a plane the input's bytes at row r − ph and columns
/// c − pw + j·dw (j = 0 … 3, z_x outside the input) of planes of XW columns and XHW pixels. conv_pack_<type>: (wsrc, wz, wp, Cg, OCg,
/// blocks, KHW, total, KW), wp[g][blk][ky][kq][ic][t][j] = w[o][ic][ky][4kq + j] − z_w, 0 past
/// KW and past OCg.
std::string QuadTapPackInputBody();
std::string QuadTapPackWeightsBody();
std::string QuadWindowFunction(const ConvConfig& c);
/// The forward body of kPackedQuads up to the epilogue: the work-item's pixels and channel
/// block, and the call of conv_quads leaving the accumulators in the private ints `accs`.
std::string QuadPrologue(const ConvConfig& c);
/// kPackedTiles' layout of one convolution (TileLayoutOf). The packed input is a grid of h × w
/// positions (the padded input, or the pixels a subsampled 1×1 window reads), each 64-channel
/// block of a (image, group) a plane of `plane` positions of 16 words (64 bytes: the block's
/// channels' bytes, 0 past Cg, z_x outside the input). The forward kernel computes the output
/// at every grid position of its first OH rows (`grid`; the columns past OW are dropped), so the
/// input rows of 16 neighbouring positions under one window tap are 64 bytes apart.
struct TileLayout {
  int h = 0, w = 0;  // grid rows and columns
  int grid = 0;      // positions computed: OH · w
  int plane = 0;     // positions per plane: grid, the window's reach and a tile's overhang
  int blocks = 0;    // 64-channel blocks per group
};
TileLayout TileLayoutOf(const ConvDesc& d);
/// Whether kPackedTiles serves `d`: a window at stride 1, or a subsampled 1×1 window.
inline bool TilesApply(const ConvDesc& d) {
  return (d.stride_h == 1 && d.stride_w == 1) || QuadsSubsample(d);
}
/// kPackedTiles' bodies (conv_quads_source.cc). conv_xpack_<type>: (x, xq, Cg, HW, NG, x_zero,
/// XW, XHW, PW, ph, pw, sh, sw), HW the plane and PW the grid's columns (TileLayout); the
/// forward's window function conv_tiles(xg, wg, PS, PW, QB, KH, KW, dh, dw, out) and its
/// prologue, which leaves the accumulators in `accs` (as QuadPrologue) and the output index of
/// each of its pixels in `pix_at` (−1 for a position past the output).
std::string TilePackInputBody();
std::string TileWindowFunction(const ConvConfig& c);
std::string TilePrologue(const ConvConfig& c);
/// kQuadGrid's layout (QuadGridLayoutOf): per (image, group) `planes` planes of `plane` = h · w
/// words; an output row is ⌈OW/16⌉ vectors of 16 columns, `grid` = 16 · OH · ⌈OW/16⌉ positions
/// (the lanes past OW are computed and not stored).
///  - Channel quads (stride 1): ⌈Cg/4⌉ planes over the padded input, w its columns, h enough
///    rows for every vector's reach; a step per window tap and plane.
///  - Tap quads (`taps`: fewer than 4 input channels per group under a window wider than one
///    column, a first layer; any stride): a plane per (quad kq of window columns, channel),
///    row r, column c the input bytes at padded row r, columns c·sw + (4kq + j)·dw (j = 0 … 3):
///    w = 16·⌈OW/16⌉ output columns, h the padded rows the window reaches; a step per window
///    row and plane, `kq` quads per window row (the weights as tap quads' QuadTapPackWeights).
/// The kernel text derives h and w from its arguments the same way (GridPrologue).
struct QuadGridLayout {
  bool taps = false;
  int h = 0, w = 0, grid = 0, plane = 0, planes = 0, kq = 1;
};
QuadGridLayout QuadGridLayoutOf(const ConvDesc& d);
/// The grid form's tap quads (QuadGridLayout::taps): fewer than 4 input channels per group
/// under a window wider than one column.
bool GridTapQuads(const ConvDesc& d);
/// Whether input mode `m` packs `d`'s weights and input as tap quads (QuadLayout::taps in byte
/// quads, GridTapQuads in the grid form): the weight pack then takes the window's width.
bool UsesTapQuads(const ConvDesc& d, ConvInput m);
/// Whether the grid form serves `d`: a window at stride 1, or tap quads at any stride.
bool GridApplies(const ConvDesc& d);
/// kQuadGrid's bodies (conv_grid_source.cc): conv_xpack_<type> (x, xq, Cg, HW, NG, x_zero, XW,
/// XHW, PW, ph, pw, sw, dw, KQ: HW the plane, PW its columns; a work-item per packed row) of
/// channel quads and of tap quads (GridTapPackInputBody), the window function conv_grid(xg, wg,
/// PS, PW, Cq, KH, KW, dh, dw, offsets…, out) with the packed weights of the channel quads
/// (wp[g][blk][tap][q][t]; tap quads: KW 1 and a plane per step), its prologue (the
/// accumulators in `accs`, 16 pixels of channel t in vector t·px/16 + v) and the epilogue, which
/// requantizes and stores each vector (the forward kernel's arguments as kPackedQuads').
std::string GridPackInputBody(const KernelTarget& target);
std::string GridTapPackInputBody(const KernelTarget& target);
std::string GridWindowFunction(const ConvConfig& c);
std::string GridPrologue(const ConvConfig& c);
std::string GridEpilogue(const KernelTarget& target, const ConvConfig& c, int pre_shift);
/// Input channels per group as packed: Cg rounded up to the channels per step.
int PackedChannels(const ConvDesc& d, ConvInput m);
/// Packed weights per output channel of a group: the window's steps times the channels per step.
size_t PackedWindow(const ConvDesc& d, ConvInput m);
/// Bytes of one image's packed input planes (0 for unpacked inputs).
size_t PackedInputBytes(const ConvDesc& d, ConvInput m);
/// Bias element bytes: fp32 for float types, the accumulator for quantized ones.
size_t BiasBytes(DataType t);

/// The im2col kernel of `type` (conv_im2col_<type>), added to `w`, whose "Dtype" is `type`:
/// col[(c·KH + ky)·KW + kx][oy·OW + ox] = x[c][iy][ix], or `pad` (0, or z_x for quantized
/// types) where the window leaves the input; a work-item per (column row, oy) walks the OW
/// outputs. The forward GEMM path runs it over a whole image, the backward pass per group.
std::string Im2colKernelName(DataType type);
void AddIm2colKernel(KernelWriter& w, DataType type);
/// A program of just that kernel.
std::string Im2colSource(const KernelTarget& target, DataType type);
/// The program of conv_im2col_rq_<type> (quantized types; mpcaffe::Error otherwise): the same
/// walk and arguments with `pad` = x's zero point, then (int y_zero, int mult, int shift): each
/// value v stored as clamp(y_zero + MP_REQUANT(v − pad, mult, shift)), the padding as y_zero.
std::string Im2colRequantKernelName(DataType type);
std::string Im2colRequantSource(const KernelTarget& target, DataType type);

/// A work-group size dividing `global` that leaves at least `per_unit` work-groups per compute
/// unit where the grid has them (conv_launch.cc says how); the pointwise and Winograd launches
/// take it.
std::array<size_t, 3> SpreadLocal(const std::array<size_t, 3>& global, const DeviceInfo& info,
                                  int per_unit);
/// The pointwise plane form's for an input larger than L2: each group every block of channels
/// of a few pixel blocks, whose input (`pixel_bytes` per pixel block) it reads once
/// (conv_launch.cc says how).
std::array<size_t, 3> PixelsFirstLocal(const std::array<size_t, 3>& global,
                                       const DeviceInfo& info, int per_unit, size_t pixel_bytes);
/// The pointwise plane form's launch of `d` with tile `t` on `info`'s device: the grid of
/// (pixel blocks, groups of ob blocks of output channels, images) and its work-group —
/// the runtime's choice where PointwiseSpreadDefaults says so (GPUs, llvmpipe), else
/// PixelsFirstLocal or SpreadLocal by the size of the input (conv_launch.cc).
struct PlaneLaunch {
  std::array<size_t, 3> global, local;
};
PlaneLaunch PointwisePlaneLaunch(const ConvDesc& d, const Convolution::PointwiseTile& t,
                                 const DeviceInfo& info);
/// A zipped tile's (ob > 1) blocks of output channels per work-item on `info`'s device: at most
/// t.ob, shared evenly among the work-items of a pixel block, and fewer where the pixel blocks
/// alone give under PointwiseSpreadDefaults' work-items per compute unit (conv_launch.cc).
int PointwiseZipBlocks(const ConvDesc& d, const Convolution::PointwiseTile& t,
                       const DeviceInfo& info);

/// `b` advanced by `elements` elements of `element_bytes`.
BufferRef Offset(const BufferRef& b, size_t elements, size_t element_bytes);
/// Throws mpcaffe::Error naming the convolution and `what` when `b` is missing or holds fewer
/// than `count` elements past its offset.
void CheckBuffer(const ConvDesc& d, const char* what, const BufferRef& b, size_t count,
                 size_t element_bytes);

}  // namespace mpcaffe::libdnn::conv_internal
