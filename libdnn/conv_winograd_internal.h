// libdnn/conv_winograd_internal.h — what the Winograd family's kernel texts share
// (conv_winograd.cc: the fp32 kernels, the launches and these helpers;
// conv_winograd_int8_source.cc: the int8q kernels in integers; conv_winograd_input_source.cc:
// the input transform in chunks of a row's tiles). Not a public interface.
#pragma once

#include <string>
#include <vector>

#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"
#include "libdnn/conv_winograd.h"

namespace mpcaffe {
class VectorWords;  // codegen/vector_words.h
}

namespace mpcaffe::libdnn::winograd_internal {

using conv_internal::DivUp;

using Matrix = std::vector<std::vector<double>>;

/// F(m×m, 3×3)'s matrices (Lavin and Gray, "Fast Algorithms for Convolutional Neural
/// Networks"): Bᵀ (n×n) transforms an input tile, G (n×3) a window, Aᵀ (m×n) the products,
/// n = m + 2. F(4×4) interpolates at 0, ±1, ±2 and infinity.
struct Transforms {
  int m, n;
  Matrix bt, g, at;
};

/// F(2×2) or F(4×4)'s matrices.
const Transforms& TransformsOf(int m);

/// `v` as decimal text.
std::string Num(long v);

/// Text computing `out`<i>_<j> = (L · X · Rᵀ)[i][j] for the private values `in`<k>_<l> of X
/// (rows × cols, of `type`: float, or int with integer matrices), through temporaries
/// `tmp`<i>_<l>.
std::string Sandwich(const Matrix& left, const Matrix& right, const std::string& in, int cols,
                     const std::string& tmp, const std::string& out,
                     const std::string& type = "float");

/// F(2×2, 3×3) in integers for int8q: Bᵀ and Aᵀ are whole already; G's halves are doubled
/// (2G), so the products and their output transform come out 4 times the convolution's sums,
/// which the output kernel shifts back exactly.
const Matrix& DoubledG();

/// The sizes every kernel's text and launch share.
struct Shape {
  Shape(const ConvDesc& d, const WinogradConfig& c)
      : m(c.m), n(c.m + 2), th(DivUp(d.out_h(), c.m)), tw(DivUp(d.out_w(), c.m)),
        tiles(long(d.batch) * th * tw),
        padded((tiles + long(c.px) * c.vx - 1) / (long(c.px) * c.vx) * c.px * c.vx),
        ob(DivUp(d.out_channels, c.oc)),
        cp(d.type == DataType::kInt8Q ? DivUp(d.channels, 2) : d.channels),
        v_plane(d.type == DataType::kInt8Q ? 2 * (cp * padded + kSkew)
                                           : d.channels * padded + kSkew),
        m_plane(d.out_channels * padded + kSkew),
        img_in(d.channels),
        img_out(d.out_channels) {}
  // Each element's plane of V and M starts 128 bytes past a multiple of 4 KiB from the last:
  // planes a multiple of 4 KiB apart put the (m+2)² loads or stores of one tile in the same
  // cache set (more than the 8 ways of the L1 here) and alias the loads with the stores.
  static constexpr long kSkew = 32;
  int m, n, th, tw;
  long tiles, padded;  // P and P rounded up to whole blocks of px vectors
  int ob;              // blocks of oc output channels
  int cp;              // rows of V: input channels (int8q: pairs of them, 16 bits each)
  long v_plane, m_plane;  // elements (floats; int8q's V: shorts) from one plane to the next
  // Channels from one image to the next in the input and the output: a grouped convolution's
  // kernels run one group (GroupSlice) on planes of the whole images.
  int img_in, img_out;
  int elements() const { return n * n; }
};

/// One group of `d` as a convolution of its own (the whole of a one-group `d`).
ConvDesc GroupSlice(const ConvDesc& d);

/// The shape of one group's kernels on the whole images of `d`.
Shape ShapeOf(const ConvDesc& d, const WinogradConfig& c);

/// The input transform's prologue after its bounds check: tile p's image and corner (`q`, `img`,
/// `t`, `ty`, `tx`; tiles past P read nothing: `live`), and per row / column i of its window the
/// clamped offsets `cy`i, `cx`i and whether they lie inside the plane (`ry`i, `rx`i).
std::string TileWindow(const ConvDesc& d, const Shape& s);

/// The products kernel's prologue: work-item (pixel block `blk`, channel block `ob`, element
/// `e`) past the grid returns; `xn`, its block of V (`v_type`, `v_per_tile` values per tile and
/// row), and `wb`, its channel block's U (`u_type`, `rows` rows of oc).
std::string ProductsPrologue(const Shape& s, const WinogradConfig& c, const std::string& v_type,
                             int v_per_tile, const std::string& u_type, long rows);

/// The products kernel's stores: accumulator `acc`(o, q) (vectors of `vec`, lanes of `type`) of
/// output channel ob·oc + o to M at block `blk` of element `e`, channels past the last skipped.
template <typename Acc>
std::string ProductStores(const ConvDesc& d, const WinogradConfig& c, const Shape& s,
                          const std::string& type, const std::string& vec, Acc acc) {
  const int O = d.out_channels;
  std::string g = "  $global " + type + "* mo = prod + (long)e * " + Num(s.m_plane) +
                  " + (long)ob * " + Num(c.oc * s.padded) + " + blk * " + Num(long(c.px) * c.vx) +
                  ";\n";
  for (int o = 0; o < c.oc; ++o) {
    std::string store;
    for (int q = 0; q < c.px; ++q)
      store += " " + vec + "_STORE(" + acc(o, q) + ", mo + " +
               Num(long(o) * s.padded + q * c.vx) + ");";
    g += O % c.oc ? "  if (ob * " + Num(c.oc) + " + " + Num(o) + " < " + Num(O) + ") {" + store +
                        " }\n"
                  : " " + store + "\n";
  }
  return g;
}

/// The output kernel's body up to the epilogue: M's (m+2)² values of tile p and output channel
/// o (of `type`), Aᵀ·M·A as `r`i_j, and the tile's first output `base`.
std::string OutputTile(const ConvDesc& d, const Shape& s, const std::string& type);

/// The condition of output (i, j) of a tile whose corner is (`oy`, `ox`) lying inside the output
/// ("" where every tile's does).
std::string OutputInside(const ConvDesc& d, int m, int i, int j, const std::string& oy = "oy0",
                         const std::string& ox = "ox0");

/// Tiles per work-item of the output kernel of type `type`: int8q's 8 in vectors where the
/// dialect has vectors (Int8Source's vector output), else 1.
inline int OutputTilesPerItem(DataType type, const KernelTarget& target) {
  return type == DataType::kInt8Q && target.vector_builtins ? 8 : 1;
}

/// Tiles per work-item of the input kernel of F(m×m): 8 neighbouring tiles of one row in vectors
/// (ChunkPrologue …) for F(2×2) where the dialect has vectors, else 1.
inline int InputTilesPerItem(int m, const KernelTarget& target) {
  return m == 2 && target.vector_builtins ? 8 : 1;
}
/// The vector input kernel's chunks of up to 8 tiles per tile row, and its work-items along
/// dimension 0: a chunk per row and chunk, then those that zero V's tiles past P.
inline long InputChunksPerRow(const Shape& s) { return DivUp(s.tw, 8); }
inline long InputChunks(const ConvDesc& d, const Shape& s) {
  return long(d.batch) * s.th * InputChunksPerRow(s) + DivUp(s.padded - s.tiles, 8L);
}

/// F(2×2)'s input kernel in chunks of 8 tiles of one tile row (InputTilesPerItem 8;
/// conv_winograd_input_source.cc), shared by fp32's and int8q's kernels. ChunkPrologue: the
/// work-item's chunk and `channel` (dimension 1, below `channels`: a row of V), `vc` (that row's
/// start, of `word`s, elements `plane` apart), the zeros of V's tiles past P (work-items past the
/// chunks), and the chunk's tile row, `lanes`, `p0`, `inner` and window rows (`ry`i, `cy`i).
std::string ChunkPrologue(const VectorWords& v, const ConvDesc& d, const Shape& s,
                          const std::string& channel, long channels, const std::string& word,
                          long plane);
/// Declares the vectors `name`i_j: column j of window row i of the chunk's 8 tiles, read from
/// the plane at `ptr` (zeros where `live` is false or outside the plane): int lanes less
/// x_zero of bytes (`bytes`), else float lanes.
std::string ChunkWindow(const VectorWords& v, const ConvDesc& d, const Shape& s,
                        const std::string& name, const std::string& ptr, const std::string& live,
                        bool bytes);
/// Stores the vectors `name`a_b (element a·n + b) to vc: 8 neighbouring tiles at once, or lane
/// by lane for a chunk of fewer.
std::string ChunkStores(const VectorWords& v, const Shape& s, const std::string& name,
                        long plane);

/// int8q's four kernels (WinogradSource's, in integers): U = 2G·(g − z_w)·2Gᵀ and V = Bᵀ·(d −
/// z_x)·B as 16-bit values (|U| ≤ 9·255, |V| ≤ 4·255), two input channels per 32-bit word of U
/// and of V; the products in 16-bit pairs (KernelHelper::kPairProduct16) into
/// int32 lanes of 8 tiles; Aᵀ·M·A shifted right by 2 is Σ(x − z_x)(w − z_w), requantized as the
/// direct kernel's scalar epilogue does. `d` is one group (GroupSlice), `s` ShapeOf the whole
/// convolution.
std::string Int8Source(const KernelTarget& target, const ConvDesc& d, const WinogradConfig& c,
                       RequantKnown known, const Shape& s);

}  // namespace mpcaffe::libdnn::winograd_internal
