// libdnn/conv_winograd.h — the Winograd forward family of fp32 3×3 stride-1 convolutions
// ("conv_wino"): F(m×m, 3×3) computes each m×m block of output pixels from an (m+2)×(m+2) input
// tile with (m+2)² multiplies per input and output channel instead of 9·m², as (m+2)² GEMMs
// between transformed weights and transformed input tiles.
//
// Four kernels per description (sizes are constants of the text): conv_wino_wt (at SetWeights:
// U = G·g·Gᵀ per output and input channel), conv_wino_in (V = Bᵀ·d·B per input channel and
// tile), conv_wino_gemm (per element e of the (m+2)² products M_e[O × P] = U_e[O × C] ·
// V_e[C × P], a register tile of `oc` output channels × `px` vectors of `vx` tiles) and
// conv_wino_out (Y = Aᵀ·M·A per output channel and tile, then the direct kernel's epilogue:
// bias, residual, ReLU). Tiles of all images form one row of P = batch·⌈OH/m⌉·⌈OW/m⌉ tiles,
// padded to a multiple of px·vx with zero tiles.
//
// F(4×4) multiplies a quarter as often as the direct kernel (F(2×2): 4/9) but its interpolation
// points (0, ±1, ±2) amplify rounding past the fp32 tolerance on layers of many input channels
// (docs/BENCHMARKS.md, "Default configurations"): it runs only where named (MPCAFFE_KERNEL_CONFIG,
// a tuning record), never from the tuner's candidates or the defaults.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "libdnn/config_schema.h"
#include "libdnn/conv.h"
#include "libdnn/scratch.h"

namespace mpcaffe::libdnn {

/// The family's configuration ("m2 oc8 px1 v16": MPCAFFE_KERNEL_CONFIG's and the tuning table's
/// conv_wino text).
struct WinogradConfig {
  int m = 2;    ///< output tile m×m: F(2×2, 3×3) or F(4×4, 3×3)
  int oc = 8;   ///< GEMM register tile: output channels per work-item
  int px = 1;   ///< GEMM register tile: vectors of tiles per work-item (oc·px ≤ 24)
  int vx = 16;  ///< GEMM register tile: tiles per vector (4, 8, 16)
  static const ConfigSchema<WinogradConfig>& Schema();
  std::string ToString() const;
  bool operator==(const WinogradConfig& o) const { return Schema().Equal(*this, o); }
};

/// int8q's bound on input channels: the output transform's sums are 4 times the convolution's,
/// 4 · 9 · C · 255 · 255 of them within int32 (the products themselves wrap harmlessly: every
/// transform is an integer combination, so the result is right modulo 2^32 and fits).
constexpr int kWinogradInt8MaxChannels = 900;

/// Grouped convolutions run group by group: at most this many groups.
constexpr int kWinogradMaxGroups = 4;

/// Whether the family computes `desc` at all: fp32, or int8q with at most
/// kWinogradInt8MaxChannels input channels per group; one group, or up to kWinogradMaxGroups of
/// at least 16 input and 16 output channels each (run one after the other); a 3×3 window,
/// stride 1, dilation 1 (any padding, bias, residual and ReLU; 8-bit or 4-bit weights, the
/// latter unpacked by Convolution::SetWeights before the transform). int8q runs F(2×2) in integers
/// (2G for G, the products 16-bit pairs, the sums shifted right by 2 at the end): the same
/// integers as the direct kernel.
bool WinogradApplies(const ConvDesc& desc);
/// Whether `config` can run `desc` (where WinogradApplies): any for fp32; int8q m 2 and v 8.
bool WinogradConfigFits(const ConvDesc& desc, const WinogradConfig& config);
/// The tuner's candidates for a description of `type`: `first` (the default) first where it
/// fits the type (WinogradConfigFits: int8q's are m 2, v 8), then the others that fit.
std::vector<WinogradConfig> WinogradCandidates(const WinogradConfig& first,
                                               DataType type = DataType::kFloat32);

/// int8q's quantization arguments of the transform and output kernels (Convolution's own).
struct WinogradQuant {
  vptr<int32_t> w_zero;   // per output channel
  vptr<int32_t> requant;  // (multiplier, shift) per output channel
  int32_t x_zero = 0, c_zero = 0, res_zero = 0, res_m = 0, res_s = 0;
};

/// The program of the four kernels; throws mpcaffe::Error naming the description when the
/// family does not apply or the configuration is outside its schema.
/// `known`: what the host checked of int8q's requantization (RequantKnown), the paths the
/// output kernel's text keeps.
std::string WinogradSource(const KernelTarget& target, const ConvDesc& desc,
                           const WinogradConfig& config, RequantKnown known = {});

/// The family's kernels, transformed weights and scratch for one description on one device.
class WinogradForward {
 public:
  WinogradForward(Device& device, const ConvDesc& desc, const WinogradConfig& config,
                  RequantKnown known = {});
  const WinogradConfig& config() const { return config_; }
  /// Transforms the OIHW `weights` (checked by the caller) into U; int8q reads `quant`'s
  /// weight zero points.
  Event SetWeights(const BufferRef& weights, Queue* queue, const WinogradQuant& quant = {});
  /// output = conv(input) (+ bias) (+ residual) (ReLU), int8q requantized with `quant`; the
  /// buffers are checked by the caller, `bias` and `residual` any valid buffer when the
  /// description has none.
  Event Forward(const BufferRef& input, const BufferRef& bias, const BufferRef& residual,
                const BufferRef& output, Queue* queue, const WinogradQuant& quant = {});
  /// Frees the transformed input and products (allocated again by the next Forward).
  void ReleaseScratch();
  /// Takes them from `arena` on every Forward instead (nullptr: buffers of its own).
  void set_scratch_arena(std::shared_ptr<ScratchArena> arena) { arena_ = std::move(arena); }

 private:
  Device& device_;
  ConvDesc desc_;
  WinogradConfig config_;
  Kernel wt_, in_, gemm_, out_;
  int out_tiles_per_item_ = 1;  // winograd_internal::OutputTilesPerItem
  // The input kernel's work-items along dimension 0: a tile each, or a chunk of a row's tiles
  // (winograd_internal::InputTilesPerItem, InputChunks).
  size_t in_items_ = 0;
  std::shared_ptr<DeviceMemory> u_, v_, m_;
  std::shared_ptr<ScratchArena> arena_;
};

}  // namespace mpcaffe::libdnn
