// libdnn/conv.h — 2-D convolution (NCHW) for fp32, fp16, int16q and int8q: an implicit-GEMM
// forward kernel (no im2col buffer) with groups, stride, padding, dilation and a fused output
// pipeline (bias, ReLU, requantization), fp32 backward for training, and host references.
//
// Contract (stable; layers/ builds on it):
//   * Layouts (all packed, NCHW):
//       input   [batch][channels][height][width]                     type storage
//       weights [out_channels][channels/groups][kernel_h][kernel_w]  (OIHW, Caffe's layout)
//       bias    [out_channels]      fp32 for fp32/fp16; int32 for int8q; int64 for int16q
//       output  [batch][out_channels][out_h][out_w]                  type storage
//     out_h = (height + 2·pad_h − (dilation_h·(kernel_h − 1) + 1)) / stride_h + 1 (Caffe's).
//     Group g reads input channels [g·C/G, (g+1)·C/G) and writes outputs [g·O/G, (g+1)·O/G).
//   * Float types (fp16: half storage, fp32 arithmetic, one rounding to half on store):
//       out = relu?( Σ x·w + bias[o] ), padding reads 0.
//   * Quantized types: activations unsigned (uint8 int8q / uint16 int16q) with zero point
//     x_zero; weights unsigned with zero points w_zero (per tensor or per output channel), or
//     with weights_signed signed int8 / int16 storage (then w_zero is normally 0).
//       acc = Σ (x − x_zero)(w − w_zero[o])      in int32 (int8q) / int64 (int16q); padding
//                                                reads x_zero (real 0), contributing nothing
//       out = clamp(c_zero + Requantize(acc + bias[o], M[o]), qmin, qmax)
//             ReLU: clamped below at c_zero. Requantize = quant::Requantize32 (int8q) /
//             quant::Requantize64 (int16q); M = s_x·s_w[o]/s_out (ConvQuant::From computes it).
//   * Results: quantized bit-exact with ConvForwardReference; fp32 within fp32 rounding of the
//     reference's sum (1e-5 relative); fp16 within half rounding of the output.
//   * Backward (fp32 only; Caffe's semantics): BackwardData overwrites bottom_diff;
//     BackwardWeights ADDS to weight_diff and bias_diff (the solver clears them);
//     BackwardDataAndWeights does both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"
#include "codegen/target_profile.h"
#include "device/device.h"
#include "libdnn/gemm.h"  // BufferRef
#include "quant/fixed_point.h"
#include "quant/quant_params.h"
#include "libdnn/config_schema.h"

namespace mpcaffe::libdnn {

/// What a convolution computes; fixed when its kernels are generated.
struct ConvDesc {
  DataType type = DataType::kFloat32;
  int batch = 1, channels = 1, height = 1, width = 1;
  int out_channels = 1;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
  bool bias = false;  // add bias[o]
  bool relu = false;  // fused ReLU
  bool residual = false;  // add residual[y index] before the ReLU (quantized: see ConvQuant)
  // Quantized types only.
  bool weights_signed = false;  // weights stored as int8 (int8q) / int16 (int16q)
  /// Bits per stored weight: 8, or 4 (int8w4: int8q with weights_signed, weight zero points 0;
  /// the OIHW weights packed per output channel as quant/int4.h says, K = channels/groups ·
  /// kernel_h · kernel_w). Results equal the int8 convolution's on the unpacked weights.
  int weight_bits = 8;

  int out_h() const;
  int out_w() const;
  /// 2·batch·out_channels·out_h·out_w·(channels/groups)·kernel_h·kernel_w (integer ops too).
  double Flops() const;
  size_t input_count() const;   // elements of the input
  size_t weight_count() const;  // elements of the weights
  /// Bytes of the weights as SetWeights takes them (packed rows with weight_bits 4).
  size_t weight_bytes() const;
  size_t output_count() const;  // elements of the output
  /// "int8q n1 c3 h227 w227 o96 k11x11 s4x4 p0x0 d1x1 g1 bias relu" — also a tuning signature.
  std::string ToString() const;
  /// Throws mpcaffe::Error naming the field when the description is impossible (non-positive
  /// sizes, channels not divisible by groups, empty output, ...).
  void Validate() const;
};

/// Quantization of a quantized convolution (ignored for float types).
struct ConvQuant {
  int32_t x_zero = 0;              // input zero point
  std::vector<int32_t> w_zero{0};  // weight zero point(s): 1 or out_channels
  int32_t c_zero = 0;              // output zero point
  /// M = s_x·s_w[o]/s_out: 1 or out_channels.
  std::vector<quant::FixedPointMultiplier> multiplier{quant::FixedPointMultiplier{}};
  /// A fused residual (ConvDesc::residual): its zero point and M_r = s_res/s_out; the output is
  /// c_zero + Requantize(acc + bias, M[o]) + Requantize(res − res_zero, M_r), then clamped.
  int32_t res_zero = 0;
  quant::FixedPointMultiplier res_multiplier;

  /// From the tensors' parameters (weights per tensor, or per channel along axis 0). Weights
  /// stored signed (weights_signed) pass their zero point as stored (normally 0).
  static ConvQuant From(const quant::QuantParams& input, const quant::QuantParams& weights,
                        const quant::QuantParams& output);
};

/// Tunable parameters of the forward kernel (compile-time constants of the generated text).
/// A work-item computes (oc_per_item · vw) output channels × px_per_item consecutive output
/// pixels: oc_per_item vectors of `vw` neighbouring channels (contiguous loads from the
/// repacked weights), the input pixels loaded once and broadcast. The `lanes` work-items of a
/// work-group take neighbouring channel vectors (GPUs: coalesced loads); channel of
/// (vector j, component v) = group_base + (j·lanes + lane)·vw + v.
/// vw > 1 uses OpenCL C vector types (OpenCL only; CUDA uses vw = 1).
struct ConvConfig {
  int lanes = 1;        // work-group size (dimension 0)
  int oc_per_item = 4;  // register tile: channel vectors per work-item
  int px_per_item = 3;  // register tile: output pixels per work-item
  int vw = 8;           // vector width along output channels (1, 2, 4, 8, 16)
  /// Input channels per multiply (int8q): 4 takes four channels per step through the 4-way
  /// byte dot product (KernelHelper::kDot4; ConvInput::kDot4) with scalar lanes (vw = 1), or
  /// byte quad products (KernelHelper::kByteQuadProduct16; ConvInput::kPackedQuads) with vw = 16;
  /// 64 (vw = 16, lanes = 1) takes 64 channels per step as byte tile products
  /// (KernelHelper::kByteTileProduct; ConvInput::kPackedTiles): px_per_item a multiple of 16.
  /// 4 with px_per_item a multiple of 16 (one lane, vw 4, 8 or 16) is the grid form
  /// (ConvInput::kQuadGrid at stride 1): vectors of 16 pixels, each of the oc·vw channels a
  /// broadcast word. 1 is the type's usual input path.
  int kp = 1;

  /// The fields: l (lanes), oc, px, v (vw), k (kp; written only when not 1), with their allowed
  /// values.
  static const ConfigSchema<ConvConfig>& Schema();
  std::string ToString() const;  // "l1 oc4 px3 v8", with " k4" when kp = 4
  /// Throws mpcaffe::Error: lanes in [1, 256], oc and px in [1, 16] (px to 48 with kp = 64
  /// and in the grid form), oc·px ≤ 64 (the grid form: see below), vw a width above,
  /// kp 1, 4 (with vw = 1 or 16; the grid form: one lane, vw 4, 8 or 16, px 16, 32 or 48 and
  /// at most 24 accumulators, oc·vw·px/16) or 64 (vw = 16, one lane, px a multiple of 16, and
  /// the accumulator, input and weight tiles at most 8: oc·px/16 + px/16 + oc ≤ 8).
  void Validate() const;
  /// kp 4 with px_per_item a multiple of 16: the grid form's tile (see kp).
  bool grid() const { return kp == 4 && px_per_item % 16 == 0; }
  /// Whether the config can run on a backend: every config on both (vw > 1 on CUDA through
  /// KernelWriter::AddVector's struct vectors, the channel-pair inputs through
  /// KernelHelper::kPairProduct16's CUDA row; see InputOf) but byte tile products (kp = 64),
  /// which only OpenCL C spells.
  /// The grid form's epilogue is OpenCL vector text too.
  bool Supports(Backend backend) const {
    return (kp != 64 && !grid()) || backend == Backend::kOpenCL;
  }
  /// Channels of one work-group: lanes · oc_per_item · vw.
  int channels_per_group() const { return lanes * oc_per_item * vw; }
  bool operator==(const ConvConfig& o) const { return Schema().Equal(*this, o); }
  /// Sensible candidates for a tuner to time on a device (all supported; the default for
  /// `type` first).
  static std::vector<ConvConfig> Candidates(const DeviceInfo& device,
                                            DataType type = DataType::kFloat32);
};

/// How the forward kernel reads input channels (Convolution::input() tells which one a
/// convolution uses). The pair forms run with vw = 8 on either backend and multiply 16-bit
/// pairs (MP_MADD16: `vpmaddwd` on x86, 16 products into 8 int32 lanes; lane loops on CUDA).
enum class ConvInput {
  kDirect,       // one channel per step, read from the input (every type, every backend)
  kPairs,        // int8q: two channels per step, each pair formed from two byte loads (where
                 // the input is read too few times for packing to pay: 1×1 windows)
  kPackedPairs,  // int8q: a pack kernel first writes 32-bit planes of pairs (x − z_x)
  kPackedSplit,  // int16q: v = x − z_x packed as pairs of lo = v & 255 and hi = v >> 8 (exact
                 // in int32 with flushes to int64; weights as w − 32768 / w, corrected by
                 // (32768 − z_w)·Σv — so any zero points work)
  kDot4,         // int8q with ConvConfig::kp = 4: four channels per step as raw bytes in 32-bit
                 // words, one mp_dot4 per accumulator (native where the target has a dot
                 // product); zero points after the window: Σxw − z_w·Σx − z_x·Σw + N·z_x·z_w
                 // (Σx beside the products, Σw per channel at SetWeights)
  kPackedQuads,  // int8q with kp = 4 and vw = 16: a pack kernel first writes 32-bit planes of
                 // four channels' bytes x (unsigned); per step one word per pixel in every
                 // lane times 16 channels' words of w − z_w (signed bytes) in one MP_DPBUSD16,
                 // minus z_x·Σ(w − z_w) after the window (padding reads z_x)
  kPackedTiles,  // int8q with kp = 64 at stride 1 (or a subsampled 1×1 window, QuadsSubsample):
                 // a pack kernel writes each pixel's channels as 16 words of byte quads per
                 // 64-channel block over the padded input (TileLayout); per window tap and
                 // block, 16 pixels' rows times 16 quads' rows of 16 channels' w − z_w in one
                 // MP_TILE_DPBUSD, corrected as kPackedQuads
  kQuadGrid,     // int8q in the grid form (ConvConfig::grid) at stride 1, or over fewer than
                 // 4 channels per group at any stride: a pack kernel writes planes of byte
                 // quads (4 channels of a pixel, or 4 taps of a window row at the stride;
                 // QuadGridLayout); per step a vector of 16 neighbouring output columns' words
                 // times one channel's word of w − z_w in every lane (MP_DPBUSD16), so the
                 // epilogue requantizes and stores 16 pixels of one channel at once; corrected
                 // as kPackedQuads
};

/// The default tile for a device class and data type: wide-vector register tiles with one
/// work-item per group on OpenCL CPUs (PoCL; a smaller one for int16q), scalar lanes in larger
/// work-groups elsewhere (int8q four channels per step, kp = 4, where the device has a native
/// 4-way dot product).
ConvConfig DefaultConvConfig(const DeviceInfo& device, DataType type = DataType::kFloat32);
/// The default tile for a description: DirectShapeDefaults' row where it has one, else the
/// data type's.
ConvConfig DefaultConvConfig(const DeviceInfo& device, const ConvDesc& desc);

/// The forward kernel families of a convolution, in the order its constructor tries them
/// (libdnn/conv_families.h: each one's rule of application, configuration and defaults table).
enum class ConvFamily { kDepthwise, kPointwise, kGemm, kWinograd, kDirect };

struct ConvPlan;
struct WinogradConfig;     // libdnn/conv_winograd.h
class WinogradForward;
struct WinogradQuant;

/// What the host checked of an int8q convolution's requantization (its ConvQuant), so that
/// the pointwise epilogue's text holds only the paths it takes: `high`, every channel's right
/// shift 31 − shift in 34 … 62 (VectorWords::RequantClamp's high_known); `residual_split`, the
/// fused residual's zero point in its storage range, right shift 17 … 47 and multiplier ≥ 0
/// (VectorResidual::split_known, where the target takes that form at all); `pre_shift`, with
/// `high`, the value is first clamped and shifted left by that much (quant::RequantPreShift).
struct RequantKnown {
  bool high = false, residual_split = false;
  int pre_shift = 0;
};

/// A convolution prepared for one device and description: kernels generated, quantization
/// parameters uploaded. Not thread-safe for concurrent calls on one object.
class Convolution {
 public:
  /// With the tuned configuration of `desc`, else DefaultConvConfig(device, desc.type).
  Convolution(Device& device, const ConvDesc& desc, const ConvQuant& quant = {});
  Convolution(Device& device, const ConvDesc& desc, const ConvQuant& quant,
              const ConvConfig& config);

  const ConvDesc& desc() const { return desc_; }
  const ConvConfig& config() const { return config_; }
  Device& device() const { return *device_; }
  /// The forward kernel family this convolution runs (fixed at construction).
  ConvFamily family() const { return family_; }
  /// How the forward kernel reads the input (fixed at construction).
  ConvInput input() const { return input_; }
  /// Whether Forward runs as im2col + LibDNN GEMM instead of the direct kernel. The
  /// constructor without a config chooses it for int8q convolutions with few input channels on
  /// CPUs (the direct kernel's channel pairs are then half empty: AlexNet's conv1, 3 channels);
  /// MPCAFFE_CONV_GEMM=0 never, =1 wherever it applies (OpenCL, fp32 / int8q, no residual, one
  /// weight zero point), groups too: per group im2col of its channel slice, a GEMM on its
  /// weight rows (packed 4-bit rows as they are: only those stay on the device, where the
  /// direct kernel keeps a repacked int8 copy) into its output channel slice.
  bool forward_gemm() const { return family_ == ConvFamily::kGemm; }
  /// Whether Forward runs the depthwise kernel (one input and one output channel per group,
  /// as MobileNet's 3×3 layers): a work-item per block of depthwise_rows() output rows of one
  /// channel's output column, or of depthwise_vx() neighbouring columns as OpenCL vectors
  /// (neighbouring work-items, neighbouring columns), the window's
  /// weights in registers and every size a constant of the kernel text, instead of channel
  /// tiles that such a layer would leave all but one lane of empty. The constructor without a
  /// config chooses it for every depthwise description; MPCAFFE_CONV_DEPTHWISE=0 turns it off.
  bool forward_depthwise() const { return family_ == ConvFamily::kDepthwise; }
  /// Output rows (of one column) per work-item of the depthwise kernel: the tuning table's
  /// record ("conv_dw", desc.ToString()) when there is one, else DefaultDepthwiseRows.
  int depthwise_rows() const { return depthwise_rows_; }
  /// Rows per work-item without tuning on a device of `profile` (DepthwiseRowDefaults): on a
  /// CPU runtime the largest divisor of the output height in [4, 14] (stride 1, at most 56
  /// output rows) or [4, 8] (otherwise) when there is one, else 8 (fewer for shorter outputs).
  static int DefaultDepthwiseRows(const ConvDesc& desc, const TargetProfile& profile = {});
  /// Work-group width (along the output row) of the depthwise kernel: a multiple of 8 covering
  /// the output width in as few groups of at most 64 as possible.
  static int DepthwiseLocalWidth(const ConvDesc& desc);
  /// Output columns per work-item of the depthwise kernel (its vector width; 1: the kernel of
  /// one column per work-item): 8 or 16 on OpenCL for fp32, and for int8q with an input zero
  /// point in [0, 255] (its window sums in float, or at stride 2 in int32 pair products:
  /// conv_internal::DepthwisePairs), strides 1 and 2; 1 otherwise.
  int depthwise_vx() const { return depthwise_vx_; }
  static int DepthwiseVectorWidth(const ConvDesc& desc, const KernelTarget& target,
                                  int32_t x_zero);
  /// The constructor of a depthwise description with a given number of rows per work-item
  /// (the tuner's candidates; `rows` in [1, 32]) and columns per work-item `vx` (0:
  /// DepthwiseVectorWidth; else 1, or 8 / 16 where DepthwiseVectorWidth is above 1 and
  /// vx · stride_w ≤ 16).
  /// vx 0 without `quads` is the default form (the byte-quad one where DepthwiseQuadDefaults
  /// takes it, else DepthwiseVectorWidth's). `quads`: the byte-quad form
  /// (conv_internal::DepthwiseQuadSource, 16 columns; where DepthwiseQuadsApply), vx 0 or 16.
  static Convolution Depthwise(Device& device, const ConvDesc& desc, const ConvQuant& quant,
                               int rows, int vx = 0, bool quads = false);
  /// Whether the depthwise kernel runs in byte quad products (the int8q form of 16 columns per
  /// work-item on AVX-512 VNNI in a helper, KernelTarget::byte_quads_in_helper).
  bool depthwise_quads() const { return depthwise_quads_; }
  /// Whether the byte-quad form can run `desc` with `quant` on `target`: int8q at strides 1 and
  /// 2, no horizontal dilation, windows at most 8 wide, an input zero point in [0, 255] and
  /// weights whose w − z_w fit signed bytes (z_w 0 for signed weights, 128 for unsigned ones).
  static bool DepthwiseQuadsApply(const ConvDesc& desc, const KernelTarget& target,
                                  const ConvQuant& quant);

  /// The pointwise kernel's register tile: `oc` output channels × `px` vectors of `vx`
  /// neighbouring pixels of one plane per work-item (libdnn/conv_pointwise_source.cc); int8q's
  /// plane form multiplies `k` input channels per step: 2 (16-bit pair products) or 4 (byte
  /// quad products, vx 16; where the weight zero points leave some w − z_w outside a signed
  /// byte the convolution runs k = 2 instead). In int8q's plane form a work-item may take up to
  /// `ob` blocks of `oc` output channels in turn over one zip of its pixels' input channels
  /// (pairs or quads kept in private memory, at most kMaxZippedColumnBytes); the convolution
  /// runs the ob that shares the blocks evenly and spreads the device (PointwiseZipBlocks:
  /// pointwise_tile() reports it).
  struct PointwiseTile {
    /// kx: the row form's window columns per product (2: int8q's pairs, RowPairsLoop).
    /// pf: fp32's plane form fetches the input `pf` channels ahead ($prefetch; 0: none).
    int oc = 4, px = 2, vx = 8, k = 2, ob = 1, kx = 1, pf = 0;
    /// "oc4 px2 v8", "oc8 px1 v16 k4", "oc16 px1 v16 k4 ob4", "oc8 px1 v8 kx2", "oc8 px2 v16
    /// pf4" (the tuning table's conv_pw records, MPCAFFE_KERNEL_CONFIG's conv_pw; k printed when
    /// it is not 2, ob when not 1, kx when not 1, pf when not 0).
    static const ConfigSchema<PointwiseTile>& Schema();
    std::string ToString() const;
    bool operator==(const PointwiseTile& o) const {
      return oc == o.oc && px == o.px && vx == o.vx && k == o.k && ob == o.ob && kx == o.kx &&
             pf == o.pf;
    }
  };
  /// Whether Forward runs the pointwise kernel (fp32 IsPointwise descriptions: vectors along
  /// the pixels of the NCHW planes, output channels in registers, no im2col, no packed input;
  /// on OpenCL its row form also takes one-group convolutions of at most kRowFormMaxChannels
  /// input channels, vectors along an output row).
  /// The constructor without a config chooses it wherever PointwiseApplies, with the tile of
  /// TunedPointwise (libdnn/tuner.h: the tuning table's choice, which may be the direct
  /// kernel, else DefaultPointwiseTile); MPCAFFE_KERNEL_CONFIG="conv_pw:off" turns it off,
  /// "conv_pw:oc4 px2 v8" sets the tile.
  bool forward_pointwise() const { return family_ == ConvFamily::kPointwise; }
  const PointwiseTile& pointwise_tile() const { return pointwise_tile_; }
  static bool PointwiseApplies(const ConvDesc& desc, const PointwiseTile& tile);
  /// 8 channels × one vector of 16 pixels; of 8 or 4 for planes of fewer than 16 pixels; int8q
  /// in byte quads where `profile` has byte_quad_products (PointwiseDefaults).
  static PointwiseTile DefaultPointwiseTile(const ConvDesc& desc,
                                            const TargetProfile& profile = {});
  /// The constructor of a pointwise description with a given tile (the tuner's candidates).
  static Convolution Pointwise(Device& device, const ConvDesc& desc, const PointwiseTile& tile,
                               const ConvQuant& quant = {});
  /// What the constructor without a config runs where the pointwise kernel is not taken (a
  /// tuning record "conv_pw:off"): the direct kernel, or im2col + GEMM where that is the default
  /// (int8 first layers on CPUs). The tuner times it against the pointwise tiles.
  static Convolution WithoutPointwise(Device& device, const ConvDesc& desc, const ConvQuant& quant);
  /// Whether Forward runs the Winograd family (libdnn/conv_winograd.h: fp32 3×3 stride-1
  /// one-group convolutions, where its defaults table, the tuning table or MPCAFFE_KERNEL_CONFIG
  /// "conv_wino:m2 oc8 v16" choose it; "conv_wino:off" never).
  bool forward_winograd() const { return family_ == ConvFamily::kWinograd; }
  /// The constructor of a Winograd description with a given configuration (the tuner's
  /// candidates, tests), and what the constructor without a config runs where the Winograd
  /// family is not taken (the tuner times it against them).
  static Convolution Winograd(Device& device, const ConvDesc& desc, const WinogradConfig& config,
                              const ConvQuant& quant = {});
  static Convolution WithoutWinograd(Device& device, const ConvDesc& desc,
                                     const ConvQuant& quant = {});
  static std::string PointwiseSource(const KernelTarget& target, const ConvDesc& desc,
                                     const PointwiseTile& tile, RequantKnown known = {});
  static std::string PointwiseKernelName(const ConvDesc& desc);
  /// The row form of the pointwise kernel (libdnn/conv_pointwise_source.cc) takes one-group
  /// convolutions of at most this many input channels (a net's first layer) on OpenCL.
  static constexpr int kRowFormMaxChannels = 4;
  /// An int8q tile of `ob` > 1 keeps its pixels' zipped input channels in private memory (4
  /// bytes per pixel and step of k channels): at most this many bytes (a level-1 data cache of
  /// the CPUs it is for).
  static constexpr long kMaxZippedColumnBytes = 32768;

  /// Repacks the OIHW `weights` (type storage; int8/int16 when weights_signed; packed 4-bit
  /// rows with weight_bits 4, unpacked on the device first) into the
  /// forward kernel's layout (zero points subtracted, channel-interleaved). Call it after
  /// every change of the weights and before Forward.
  Event SetWeights(const BufferRef& weights, Queue* queue = nullptr);
  /// output = conv(input, weights of the last SetWeights) (+ bias) (ReLU) (requantized).
  /// `bias` may be empty when desc().bias is false. Asynchronous. The packed inputs
  /// (ConvInput) go through one buffer of this object, a chunk of the batch at a time (a pack
  /// launch, then a forward launch, on `queue`): calls on different queues must not overlap.
  /// With desc().residual, `residual` (output-shaped, the output's type) is added before the
  /// ReLU.
  Event Forward(const BufferRef& input, const BufferRef& bias, const BufferRef& output,
                Queue* queue = nullptr, const BufferRef& residual = {});
  /// Frees the forward pass's scratch buffers (packed input planes, GEMM columns, the GEMMs'
  /// own: Gemm::ReleaseScratch); the next Forward allocates them again. Reduced-memory
  /// inference calls it after each Forward so convolutions do not each hold theirs (commands
  /// already enqueued keep their buffers).
  void ReleaseScratch();
  /// Takes the forward pass's scratch (and its GEMMs' and Winograd's) from `arena` on every
  /// Forward, a buffer per use and queue shared with the other objects given it (reduced-memory
  /// inference: the net's layers run one after another); nullptr: buffers of its own.
  void set_scratch_arena(std::shared_ptr<ScratchArena> arena);

  /// fp32 only: bottom_diff = ∂L/∂input from top_diff (output-shaped) and the OIHW weights.
  void BackwardData(const BufferRef& top_diff, const BufferRef& weights,
                    const BufferRef& bottom_diff, Queue* queue = nullptr);
  /// fp32 only: weight_diff += ∂L/∂w, bias_diff += ∂L/∂b (bias_diff may be empty).
  void BackwardWeights(const BufferRef& top_diff, const BufferRef& input,
                       const BufferRef& weight_diff, const BufferRef& bias_diff,
                       Queue* queue = nullptr);
  /// Both of the above in one walk over the batch (a layer's backward pass), each chunk of
  /// top_diff gathered once for the two GEMMs: the weight gradients when weight_diff is given
  /// (bias_diff may be empty), bottom_diff when it is given.
  void BackwardDataAndWeights(const BufferRef& top_diff, const BufferRef& input,
                              const BufferRef& weights, const BufferRef& weight_diff,
                              const BufferRef& bias_diff, const BufferRef& bottom_diff,
                              Queue* queue = nullptr);

  /// Generated program texts (tests compile them with NVRTC). int8q / int16q with vw = 8 take
  /// input channels in pairs (ConvInput) unless `channel_pairs` is false (the
  /// constructor passes false for an input zero point outside the type's range, where x − z_x
  /// would not fit the pair planes). `pre_shift`: RequantKnown's, for the int8 vector epilogue.
  static std::string ForwardSource(const KernelTarget& target, const ConvDesc& desc,
                                   const ConvConfig& config, bool channel_pairs = true,
                                   int pre_shift = 0);
  /// The fp32 backward program besides its two GEMMs (top-diff gather, im2col, col2im, bias
  /// sum); shape-independent.
  static std::string BackwardSource(const KernelTarget& target);
  /// The im2col program of `type` (every type; its one kernel is Im2colKernelName(type)):
  /// Im2colKernelName(type)(In x, Out col, int H, int W, int KH, int KW, int sh, int sw, int ph,
  /// int pw, int dh, int dw, int OH, int OW, int NC, int xs, int rows, int pad) writes, for NC
  /// images side by side (image n of x at n·xs),
  /// col[(c·KH + ky)·KW + kx][n·OH·OW + oy·OW + ox] = x[n][c][oy·sh − ph + ky·dh][ox·sw − pw +
  /// kx·dw], or `pad` outside the input, a work-item per (column row, image) pair: rows =
  /// channels·KH·KW·NC (NC = 1: one image's columns). BackwardSource's conv_bwd_col2im(In col,
  /// Out x, int Cg, then H … OW as above, int NC, int xs) is its adjoint:
  /// x[n][c][iy][ix] = Σ of the columns that read it (overwritten), a work-item per row
  /// (Cg·NC·H of them).
  static std::string Im2colSource(const KernelTarget& target, DataType type);
  static std::string Im2colKernelName(DataType type);
  /// The quantized types' im2col into another quantization (the Im2col layer when its top's
  /// scale or zero point differs from its bottom's): Im2colRequantKernelName(type)(the arguments
  /// above with pad = x's zero point, then int y_zero, int mult, int shift) stores each value v
  /// as clamp(y_zero + requant(v − pad, mult, shift)) — quant::Requant with
  /// quant::RescaleMultiplier(s_x, s_y) — and y_zero outside the input. Throws for float types.
  static std::string Im2colRequantSource(const KernelTarget& target, DataType type);
  static std::string Im2colRequantKernelName(DataType type);
  static std::string ForwardKernelName(const ConvDesc& desc);
  /// The depthwise program of a description with one input and output channel per group
  /// (forward_depthwise()); every type and backend.
  /// `rows` output rows per work-item (0: DefaultDepthwiseRows); `vx` > 1: vectors of `vx`
  /// output columns per work-item (OpenCL; DepthwiseVectorWidth says where they apply).
  /// `quads`: the byte-quad form (16 columns; DepthwiseQuadsApply). `known`: the int8q vector
  /// forms' requantization paths (RequantKnown).
  static std::string DepthwiseSource(const KernelTarget& target, const ConvDesc& desc,
                                     int rows = 0, int vx = 1, bool quads = false,
                                     RequantKnown known = {});
  static std::string DepthwiseKernelName(const ConvDesc& desc);
  /// The forward kernel the constructor without a config would run for `desc` on `device` —
  /// "depthwise", "pointwise", "gemm" (im2col + GEMM), "winograd" or "direct" — decided as the constructor
  /// decides (settings, tuning table), without building a program.
  static const char* ForwardPathOf(const Device& device, const ConvDesc& desc,
                                   const ConvQuant& quant = {});
  /// The forward kernel this convolution runs, named as ForwardPathOf names it.
  const char* forward_path() const;
  /// Whether `desc` has one input and one output channel per group.
  static bool IsDepthwise(const ConvDesc& desc);
  /// Whether `desc` is a pointwise (1×1, stride 1, no padding) convolution of one group: per
  /// image a plain GEMM W[out × in] · X[in × H·W] on the NCHW data, which forward_gemm() runs
  /// without im2col.
  static bool IsPointwise(const ConvDesc& desc);
  /// Whether `desc` is an fp32 or int8q 1×1 one-group unpadded convolution with a stride above 1
  /// (ResNet's downsampling 1×1 layers): the pointwise kernel's plane form runs on the input
  /// subsampled to the output's pixels (the 1×1 window's im2col columns) as the stride-1
  /// description SubsampledDesc, so one pass does the strided reads every output channel
  /// block would otherwise repeat.
  static bool IsStridedPointwise(const ConvDesc& desc);
  /// `desc` over its output's pixels with stride 1 (IsStridedPointwise descriptions).
  static ConvDesc SubsampledDesc(const ConvDesc& desc);

 private:
  /// The direct kernel's forward (conv_direct.cc): packing per chunk of images where the input
  /// mode packs, then the forward kernel; `bias` and `residual` any valid buffer when unused.
  Event ForwardDirect(const BufferRef& input, const BufferRef& bias, const BufferRef& residual,
                      const BufferRef& output, Queue* queue);

  Device* device_;
  ConvDesc desc_;
  ConvConfig config_;
  int oc_padded_ = 0;  // out_channels/groups rounded up to channels_per_group()
  ConvInput input_ = ConvInput::kDirect;
  Kernel pack_, forward_, xpack_;  // xpack_: the packed-input kernel (IsPacked inputs only)
  Kernel wsum_kernel_;             // kDot4: Σw per output channel
  vptr<int32_t> wsum_;
  vptr<int32_t> requant_;          // (multiplier, shift) per output channel
  vptr<int32_t> w_zero_;           // per output channel
  std::shared_ptr<DeviceMemory> packed_;
  bool packed_ready_ = false;
  std::shared_ptr<DeviceMemory> xpacked_;  // packed input planes of one chunk of the batch
  int32_t x_zero_ = 0, c_zero_ = 0;
  /// int8q: every w − w_zero fits a signed byte (weight zero points 128, or 0 for signed storage):
  /// the pointwise kernel's byte quads (PointwiseTile::k 4) hold them.
  bool weights_fit_bytes_ = false;
  int32_t res_zero_ = 0, res_m_ = 0, res_s_ = 0;  // ConvQuant's residual requantization
  int rq_mode_ = 0;  // the vector epilogue's requantization (conv.cc says which)
  RequantKnown requant_known_;  // the same checks, for the kernels specialized on them
  // The fp32 backward pass (conv_backward.cc), prepared at its first use: its LibDNN GEMMs over
  // a chunk of `images` images (data: colᵀ-shaped W_gᵀ · t_g; weights: t_g · colᵀ) and kernels.
  struct Backward {
    std::unique_ptr<Gemm> data, weights;
    Kernel gather, im2col, col2im, bias;
    int images = 1;
  };
  Backward& PrepareBackward();
  /// The chunk of top_diff from image `first_image` on, channel-major (OC × images·P), in top_t_.
  BufferRef GatherTop(const BufferRef& top_diff, int first_image, Queue* queue);
  /// One group's sizes: input and output channels, column rows (Cg·KH·KW), output pixels.
  struct GroupShape {
    explicit GroupShape(const ConvDesc& d);
    int cg, ocg, kc, p;
  };
  std::unique_ptr<Backward> backward_;
  std::shared_ptr<DeviceMemory> col_, top_t_;  // a chunk's columns of a group; GatherTop's
  // im2col + GEMM forward (forward_gemm()): one GEMM (M = out_channels/groups, K =
  // channels/groups·KH·KW) for all groups, or one per group when the requantization is per
  // channel (a Gemm holds its multipliers); the weights as SetWeights gave them (the caller
  // may free its copy), their per-channel sums, and one group's columns of one image.
  std::vector<std::unique_ptr<Gemm>> gemms_;
  Gemm& GroupGemm(int group) { return *gemms_[gemms_.size() == 1 ? 0 : size_t(group)]; }
  Kernel im2col_;
  // Depthwise forward (forward_depthwise()): its kernel and the weights as SetWeights gave them.
  int depthwise_rows_ = 0, depthwise_vx_ = 1;
  bool depthwise_quads_ = false;
  /// vx 0: the default form (DepthwiseQuadDefaults, else DepthwiseVectorWidth).
  void PrepareDepthwise(int rows, int vx = 0, bool quads = false);
  Kernel depthwise_kernel_;
  std::shared_ptr<DeviceMemory> depthwise_weights_;
  // Pointwise forward (forward_pointwise()): its kernel, the packing kernel and the weights in
  // its layout.
  PointwiseTile pointwise_tile_;
  void PreparePointwise(const PointwiseTile& tile);
  static void RowFormKernel(KernelWriter& w, const ConvDesc& desc, const PointwiseTile& tile,
                            RequantKnown known);
  Kernel pointwise_kernel_, pointwise_pack_;
  /// The plane form's grid and work-group (conv_internal::PointwisePlaneLaunch), fixed by the
  /// description, the tile and the device.
  std::array<size_t, 3> pointwise_global_{}, pointwise_local_{};
  std::shared_ptr<DeviceMemory> pointwise_weights_;
  std::shared_ptr<DeviceMemory> pointwise_wsum_;  // int8q: Σ(w − z_w) per output channel
  // Winograd forward (forward_winograd()): its kernels, transformed weights and scratch.
  std::shared_ptr<WinogradForward> winograd_;
  WinogradQuant WinogradArgs() const;  // int8q's quantization arguments of winograd_
  /// What Forward runs: the family of the plan the constructor followed (its configuration is
  /// config_, depthwise_rows_ / depthwise_vx_ or pointwise_tile_).
  ConvFamily family_ = ConvFamily::kDirect;
  Convolution(Device& device, const ConvDesc& desc, const ConvQuant& quant, const ConvPlan& plan);
  /// The common construction; `direct_kernel` false leaves out the direct forward program and
  /// its packed weights (a depthwise, pointwise or GEMM forward replaces them).
  Convolution(Device& device, const ConvDesc& desc, const ConvQuant& quant,
              const ConvConfig& config, bool direct_kernel);
  std::shared_ptr<DeviceMemory> gemm_weights_, gemm_sums_, gemm_col_;
  std::shared_ptr<ScratchArena> arena_;  // where xpacked_ and gemm_col_ come from, if set
  // weight_bits 4 outside the GEMM path: the unpack kernel (libdnn/int4_internal.h).
  Kernel unpack_;
};

/// Host references (host memory in the element types of the contract above).
/// `residual` (output-shaped) is read when desc.residual.
void ConvForwardReference(const ConvDesc& desc, const ConvQuant& quant, const void* input,
                          const void* weights, const void* bias, void* output,
                          const void* residual = nullptr);
void ConvBackwardDataReference(const ConvDesc& desc, const float* top_diff, const float* weights,
                               float* bottom_diff);
/// Adds to weight_diff and (when not null) bias_diff.
void ConvBackwardWeightsReference(const ConvDesc& desc, const float* top_diff, const float* input,
                                  float* weight_diff, float* bias_diff);

}  // namespace mpcaffe::libdnn
