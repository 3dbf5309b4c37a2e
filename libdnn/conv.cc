// libdnn/conv.cc — the Convolution object: construction (input mode, kernel programs,
// quantization parameters, the im2col + GEMM forward path where it pays), SetWeights and the
// forward launches (the direct kernel's: conv_direct.cc). Descriptions and configurations:
// conv_desc.cc; kernel texts: conv_forward_source.cc; the backward pass: conv_backward.cc;
// references: conv_reference.cc.
#include "libdnn/conv.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "device/error.h"
#include "device/settings.h"
#include "libdnn/conv_families.h"
#include "libdnn/conv_internal.h"
#include "libdnn/conv_winograd.h"
#include "libdnn/int4_internal.h"
#include "libdnn/tuner.h"  // DepthwiseConfig

namespace mpcaffe::libdnn {

using namespace conv_internal;  // NOLINT: this file's private vocabulary

namespace {

/// Work-group width of the depthwise kernel: DepthwiseLocalWidth, or with vectors of `vx`
/// columns the vectors of one output row.
int DepthwiseLocal(const ConvDesc& d, int vx) {
  return vx > 1 ? DivUp(d.out_w(), vx) : Convolution::DepthwiseLocalWidth(d);
}

/// Whether each group's im2col columns are its input channels as they are (1×1, stride 1, no
/// padding: Convolution::IsPointwise per group), so the GEMM reads the image itself.
bool ColumnsAreTheInput(const ConvDesc& d) {
  ConvDesc one = d;
  one.groups = 1;
  return Convolution::IsPointwise(one);
}

const char* FamilyPathName(ConvFamily family) {
  switch (family) {
    case ConvFamily::kDepthwise: return "depthwise";
    case ConvFamily::kPointwise: return "pointwise";
    case ConvFamily::kGemm: return "gemm";
    case ConvFamily::kWinograd: return "winograd";
    case ConvFamily::kDirect: break;
  }
  return "direct";
}

}  // namespace

const char* Convolution::ForwardPathOf(const Device& device, const ConvDesc& desc,
                                       const ConvQuant& quant) {
  return FamilyPathName(PlanConvolution(device, desc, quant).family->family);
}

const char* Convolution::forward_path() const { return FamilyPathName(family_); }

Convolution::Convolution(Device& device, const ConvDesc& desc, const ConvQuant& quant)
    : Convolution(device, desc, quant, PlanConvolution(device, desc, quant)) {}

Convolution::Convolution(Device& device, const ConvDesc& desc, const ConvQuant& quant,
                         const ConvPlan& plan)
    : Convolution(device, desc, quant, plan.direct.config,
                  plan.family->family == ConvFamily::kDirect) {
  // What runs, noted for `mpcaffe time --explain` (the GEMMs of kGemm note their own).
  const ConvFamilyChoice& c = plan.choice;
  auto note = [&](const std::string& config) {
    if (KernelChoiceLogActive())
      NoteKernelChoice({plan.family->name, config, c.source, desc_.ToString()});
  };
  switch (plan.family->family) {
    case ConvFamily::kDepthwise:
      PrepareDepthwise(c.rows);
      note(DepthwiseConfig{c.rows}.ToString());
      return;
    case ConvFamily::kPointwise:
      PreparePointwise(c.tile);
      note(pointwise_tile_.ToString());
      return;
    case ConvFamily::kWinograd:
      family_ = ConvFamily::kWinograd;
      winograd_ = std::make_shared<WinogradForward>(device, desc_, c.wino, requant_known_);
      note(c.wino.ToString());
      return;
    case ConvFamily::kDirect:
      note(plan.direct.config.ToString());
      return;
    case ConvFamily::kGemm:
      note("");
      break;
  }
  family_ = ConvFamily::kGemm;
  const int groups = desc_.groups, ocg = desc_.out_channels / groups;
  GemmDesc g;
  g.type = g.out_type = desc_.type;
  g.M = ocg;
  g.N = desc_.out_h() * desc_.out_w();
  g.K = desc_.channels / groups * desc_.kernel_h * desc_.kernel_w;
  g.weights = WeightOperand::kA;
  g.bias = desc_.bias;
  g.relu = desc_.relu;
  GemmQuant gq;
  bool per_group = false;  // per-channel multipliers: each group's GEMM holds its slice
  if (IsQuantized(desc_.type)) {
    g.weights_signed = desc_.weights_signed;
    g.weight_bits = desc_.weight_bits;  // the GEMM reads the packed 4-bit rows itself
    g.per_channel = quant.multiplier.size() > 1;
    g.weight_zero = quant.w_zero[0] != 0;
    gq.x_zero = quant.x_zero;
    gq.w_zero = quant.w_zero[0];
    gq.c_zero = quant.c_zero;
    gq.multiplier = quant.multiplier;
    per_group = g.per_channel && groups > 1;
  }
  for (int group = 0; group < (per_group ? groups : 1); ++group) {
    GemmQuant q = gq;
    if (per_group)
      q.multiplier.assign(gq.multiplier.begin() + ptrdiff_t(group) * ocg,
                          gq.multiplier.begin() + ptrdiff_t(group + 1) * ocg);
    gemms_.push_back(std::make_unique<Gemm>(device, g, q));
  }
  if (ColumnsAreTheInput(desc_)) {
    packed_.reset();  // B is the image itself: no columns, no direct kernel
    return;
  }
  im2col_ = device
                .GetProgram(Im2colSource(KernelTarget::Of(device), desc_.type), "",
                            ProgramHints::OneDimensional())
                ->GetKernel(Im2colKernelName(desc_.type));
  packed_.reset();  // the direct kernel's weights are not needed
}

bool Convolution::DepthwiseQuadsApply(const ConvDesc& desc, const KernelTarget& target,
                                      const ConvQuant& quant) {
  return conv_internal::DepthwiseQuadsApply(desc, target) && quant.x_zero >= 0 &&
         quant.x_zero <= 255 &&
         std::all_of(quant.w_zero.begin(), quant.w_zero.end(),
                     [&](int32_t z) { return z == (desc.weights_signed ? 0 : 128); });
}

Convolution Convolution::Depthwise(Device& device, const ConvDesc& desc, const ConvQuant& quant,
                                   int rows, int vx, bool quads) {
  if (!IsDepthwise(desc))
    throw Error("convolution " + desc.ToString() +
                ": not depthwise (one input and output channel per group)");
  if (rows < 1 || rows > 32)
    throw Error("convolution " + desc.ToString() + ": " + std::to_string(rows) +
                " depthwise rows per work-item; 1 to 32 expected");
  if (quads && (!DepthwiseQuadsApply(desc, KernelTarget::Of(device), quant) || (vx != 0 && vx != 16)))
    throw Error("convolution " + desc.ToString() + ": no byte-quad depthwise form here (int8q, 16 "
                "columns, strides 1 and 2, windows at most 8 wide, z_x in [0, 255], weights "
                "fitting signed bytes, AVX-512 VNNI in a helper)");
  if (!quads && vx > 1 && (DepthwiseVectorWidth(desc, KernelTarget::Of(device), quant.x_zero) == 1 ||
                 (vx != 8 && vx != 16) || vx * desc.stride_w > 16))
    throw Error("convolution " + desc.ToString() + ": " + std::to_string(vx) +
                " depthwise columns per work-item; 1 expected here, or 8 / 16 with vx · stride ≤ "
                "16 for OpenCL fp32 and int8q with an input zero point in [0, 255]");
  if (vx < 0) throw Error("convolution " + desc.ToString() + ": negative depthwise vx");
  Convolution conv(device, desc, quant, DefaultConvConfig(device.info(), desc.type), false);
  conv.PrepareDepthwise(rows, quads ? 16 : vx, quads);
  return conv;
}

Convolution Convolution::Pointwise(Device& device, const ConvDesc& desc, const PointwiseTile& tile,
                                   const ConvQuant& quant) {
  Convolution conv(device, desc, quant, DefaultConvConfig(device.info(), desc.type), false);
  conv.PreparePointwise(tile);
  return conv;
}

Convolution Convolution::WithoutPointwise(Device& device, const ConvDesc& desc,
                                          const ConvQuant& quant) {
  return Convolution(device, desc, quant,
                     PlanConvolution(device, desc, quant, ConvFamily::kPointwise));
}

WinogradQuant Convolution::WinogradArgs() const {
  return {w_zero_, requant_, x_zero_, c_zero_, res_zero_, res_m_, res_s_};
}

Convolution Convolution::Winograd(Device& device, const ConvDesc& desc,
                                  const WinogradConfig& config, const ConvQuant& quant) {
  Convolution conv(device, desc, quant, DefaultConvConfig(device.info(), desc.type), false);
  conv.family_ = ConvFamily::kWinograd;
  conv.winograd_ = std::make_shared<WinogradForward>(device, desc, config, conv.requant_known_);
  return conv;
}

Convolution Convolution::WithoutWinograd(Device& device, const ConvDesc& desc,
                                         const ConvQuant& quant) {
  return Convolution(device, desc, quant,
                     PlanConvolution(device, desc, quant, ConvFamily::kWinograd));
}

void Convolution::ReleaseScratch() {
  xpacked_.reset();
  gemm_col_.reset();
  col_.reset();
  top_t_.reset();
  for (auto& gemm : gemms_) gemm->ReleaseScratch();
  if (winograd_) winograd_->ReleaseScratch();
}

void Convolution::set_scratch_arena(std::shared_ptr<ScratchArena> arena) {
  arena_ = arena;
  for (auto& gemm : gemms_) gemm->set_scratch_arena(arena);
  if (winograd_) winograd_->set_scratch_arena(arena);
}

void Convolution::PreparePointwise(const PointwiseTile& tile) {
  const ConvDesc& d = desc_;
  family_ = ConvFamily::kPointwise;
  pointwise_tile_ = tile;
  // Byte quads hold w − z_w as signed bytes; other weight zero points take the pair products.
  // Their zipped column takes twice the bytes: past kMaxZippedColumnBytes, a zip per block.
  if ((tile.k == 4 || tile.k == 64) && !weights_fit_bytes_) {
    pointwise_tile_.k = 2;
    if (!PointwiseApplies(d, pointwise_tile_)) pointwise_tile_.ob = 1;
  }
  pointwise_tile_.ob = PointwiseZipBlocks(d, pointwise_tile_, device_->info());
  auto program = device_->GetProgram(
      PointwiseSource(KernelTarget::Of(*device_), d, pointwise_tile_, requant_known_), "",
      ProgramHints::OneDimensional());
  pointwise_kernel_ = program->GetKernel(PointwiseKernelName(d));
  pointwise_pack_ = program->GetKernel("conv_pw_pack_" + std::string(Name(d.type)));
  if (IsPointwise(d) || IsStridedPointwise(d)) {  // the plane form
    const PlaneLaunch launch = PointwisePlaneLaunch(d, pointwise_tile_, device_->info());
    pointwise_global_ = launch.global;
    pointwise_local_ = launch.local;
  }
  if (IsStridedPointwise(d))  // Forward subsamples the input with the 1×1 window's im2col
    im2col_ = device_
                  ->GetProgram(Im2colSource(KernelTarget::Of(*device_), d.type), "",
                               ProgramHints::OneDimensional())
                  ->GetKernel(Im2colKernelName(d.type));
  if (d.type == DataType::kInt8Q) {
    // The plane form's pairs hold x itself (0..255) and z_x·Σ(w − z_w) is subtracted in int32;
    // the row form subtracts z_x per load, exact in float for such zero points.
    if (x_zero_ < 0 || x_zero_ > 255)
      throw Error("convolution " + d.ToString() + ": the int8q pointwise kernel needs an input "
                  "zero point in [0, 255], not " + std::to_string(x_zero_));
    if (IsPointwise(d) || IsStridedPointwise(d))  // the plane form
      pointwise_wsum_ = device_->Allocate(size_t(d.out_channels) * 4);
  }
}

void Convolution::PrepareDepthwise(int rows, int vx, bool quads) {
  const ConvDesc& d = desc_;
  const size_t planes = size_t(d.batch) * d.channels;
  const size_t max_planes = device_->info().max_groups_dim2;
  if (max_planes && planes > max_planes)
    throw Error("convolution " + d.ToString() + ": " + std::to_string(planes) +
                " image planes exceed the depthwise kernel's grid on this device (" +
                std::to_string(max_planes) + ")");
  family_ = ConvFamily::kDepthwise;
  depthwise_rows_ = rows;
  const KernelTarget target = KernelTarget::Of(*device_);
  if (vx == 0)  // weights_fit_bytes_: every z_w what DepthwiseQuadsApply asks
    quads = conv_internal::DepthwiseQuadsApply(d, target) && x_zero_ >= 0 && x_zero_ <= 255 &&
            weights_fit_bytes_ &&
            DefaultRowFor(DepthwiseQuadDefaults(), "conv_dw", TargetProfile::Of(device_->info()), d)
                .config;
  depthwise_quads_ = quads;
  depthwise_vx_ = quads ? 16 : vx > 0 ? vx : DepthwiseVectorWidth(d, target, x_zero_);
  ProgramHints hints;
  hints.local_sizes = {{size_t(DepthwiseLocal(d, depthwise_vx_)), 1, 1}};
  depthwise_kernel_ = device_
                          ->GetProgram(DepthwiseSource(target, d, rows, depthwise_vx_,
                                                       depthwise_quads_, requant_known_),
                                       "", hints)
                          ->GetKernel(DepthwiseKernelName(d));
  packed_.reset();  // the direct kernel's weights are not needed
}

Convolution::Convolution(Device& device, const ConvDesc& desc, const ConvQuant& quant,
                         const ConvConfig& config)
    : Convolution(device, desc, quant, config, true) {}

Convolution::Convolution(Device& device, const ConvDesc& desc, const ConvQuant& quant,
                         const ConvConfig& config, bool direct_kernel)
    : device_(&device), desc_(desc), config_(config) {
  desc_.Validate();
  config_.Validate();
  if (!config_.Supports(device.backend()))
    throw Error("convolution " + desc_.ToString() + ": config " + config_.ToString() +
                " needs OpenCL C's byte tile products; use kp 1 or 4 on " +
                BackendName(device.backend()));
  const int oc = desc_.out_channels, ocg = oc / desc_.groups;
  // Channel pairs hold x − z_x in 16 bits (int8q) or as lo/hi bytes of 17 bits (int16q): a
  // zero point within the type's range (any valid quantization).
  const bool pairs_ok =
      quant.x_zero >= 0 && quant.x_zero <= (desc_.type == DataType::kInt16Q ? 65535 : 255);
  // Byte quads and tiles (kp 4 or 64, vw 16) hold w − z_w as signed bytes: other weight zero
  // points take the channel pairs in a tile of as many vectors of 8 (tiles: the CPU default's).
  if (desc_.type == DataType::kInt8Q && (config_.kp == 4 || config_.kp == 64) &&
      config_.vw == 16 &&
      !(pairs_ok && std::all_of(quant.w_zero.begin(), quant.w_zero.end(), [&](int32_t z) {
          return z == (desc_.weights_signed ? 0 : 128);
        }))) {
    if (config_.kp == 64) config_ = ConvConfig{1, 4, 3, 8};
    config_.kp = 1;
    config_.vw = 8;
  }
  const int tile = config_.channels_per_group();
  oc_padded_ = DivUp(ocg, tile) * tile;

  const KernelTarget target = KernelTarget::Of(device);
  input_ = InputOf(target.backend, desc_, config_, pairs_ok);

  // The quantization first: the direct kernel's text holds its requantization's left shift.
  std::vector<int32_t> rq(2 * size_t(oc), 0), wz(size_t(oc), 0);
  if (IsQuantized(desc_.type)) {
    auto per = [&](size_t n, const char* what) {
      if (n != 1 && n != size_t(oc))
        throw Error("convolution " + desc_.ToString() + ": " + what + " has " + std::to_string(n) +
                    " entries; 1 or out_channels (" + std::to_string(oc) + ") expected");
    };
    per(quant.w_zero.size(), "ConvQuant::w_zero");
    per(quant.multiplier.size(), "ConvQuant::multiplier");
    for (int o = 0; o < oc; ++o) {
      const auto& m = quant.multiplier[quant.multiplier.size() == 1 ? 0 : o];
      rq[2 * o] = m.multiplier;
      rq[2 * o + 1] = m.shift;
      wz[o] = quant.w_zero[quant.w_zero.size() == 1 ? 0 : o];
    }
    x_zero_ = quant.x_zero;
    c_zero_ = quant.c_zero;
    // The vector epilogue's requantization (DirectVectorEpilogue): int32 lanes where every
    // channel's right shift 31 − shift is 34 … 62, 64-bit products where it is 1 … 62.
    auto all_right = [&](int lo, int hi) {
      return std::all_of(quant.multiplier.begin(), quant.multiplier.end(), [&](const auto& m) {
        return 31 - m.shift >= lo && 31 - m.shift <= hi;
      });
    };
    rq_mode_ = all_right(34, 62) ? 2 : all_right(1, 62) ? 1 : 0;
    // Right shifts below 34 (a first layer's large scale ratio: MobileNet v1's conv1 has 27 …
    // 29) take the int32 lanes after a left shift (quant::RequantPreShift): the epilogues clamp
    // the value where every channel's output saturates anyway (at 2^17 past any zero point below
    // 2^16), which a residual added after the requantization would not.
    const int pre = desc_.type == DataType::kInt8Q && !desc_.residual &&
                            std::abs(quant.c_zero) < (1 << 16)
                        ? quant::RequantPreShift(quant.multiplier, 1 << 17)
                        : 0;
    if (pre > 0) rq_mode_ = 2;
    weights_fit_bytes_ = std::all_of(wz.begin(), wz.end(), [&](int32_t z) {
      return desc_.type == DataType::kInt8Q && z == (desc_.weights_signed ? 0 : 128);
    });
    res_zero_ = quant.res_zero;
    res_m_ = quant.res_multiplier.multiplier;
    res_s_ = quant.res_multiplier.shift;
    const DataTypeTraits& traits = TraitsOf(desc_.type);
    requant_known_.high = rq_mode_ == 2;
    requant_known_.pre_shift = pre;
    requant_known_.residual_split = desc_.residual && res_zero_ >= traits.qmin &&
                                    res_zero_ <= traits.qmax && 31 - res_s_ >= 17 &&
                                    31 - res_s_ <= 47 && res_m_ >= 0;
  }
  if (direct_kernel) {
    ProgramHints hints;
    hints.local_sizes = {{size_t(config_.lanes), 1, 1}, {kLaunch1DLocalSize, 1, 1}};
    auto program =
        device.GetProgram(ForwardSource(target, desc_, config_, pairs_ok,
                                        requant_known_.pre_shift),
                          input_ == ConvInput::kDot4 ? target.Dot4BuildOptions() : "", hints);
    const std::string suffix = std::string(Name(desc_.type)) + (desc_.weights_signed ? "_sw" : "");
    forward_ = program->GetKernel(ForwardKernelName(desc_));
    pack_ = program->GetKernel("conv_pack_" + suffix);
    if (IsPacked(input_)) xpack_ = program->GetKernel("conv_xpack_" + suffix);
    if (input_ == ConvInput::kDot4 || IsByteQuads(input_)) {
      wsum_kernel_ = program->GetKernel("conv_wsum_" + suffix);
      wsum_ = device.Alloc<int32_t>(size_t(oc));
    }
  }
  if (desc_.weight_bits == 4) {
    for (int32_t z : wz)
      if (z != 0)
        throw Error("convolution " + desc_.ToString() + ": 4-bit weights are symmetric, but a "
                    "weight zero point is " + std::to_string(z) + " (0 expected)");
    unpack_ = device
                  .GetProgram(int4::UnpackSource(target), "", ProgramHints::OneDimensional())
                  ->GetKernel(int4::UnpackKernelName());
  }
  requant_ = device.Alloc<int32_t>(rq.size());
  device.Write(requant_, rq.data(), rq.size());
  w_zero_ = device.Alloc<int32_t>(wz.size());
  device.Write(w_zero_, wz.data(), wz.size());
  if (!direct_kernel) return;
  packed_ = device.Allocate(size_t(desc_.groups) * PackedWindow(desc_, input_) * oc_padded_ *
                            PackedBytes(desc_.type, input_));
}

Event Convolution::SetWeights(const BufferRef& packed_weights, Queue* queue) {
  const ConvDesc& d = desc_;
  const size_t wbytes = SizeOf(d.type);
  if (forward_gemm()) {
    // The GEMMs take the OIHW rows as they are (packed 4-bit rows too): only these stay on the
    // device. Group g's rows and sums start at its first output channel.
    const size_t bytes = d.weight_bytes();
    if (d.weight_bits == 4)
      CheckBuffer(d, "weights", packed_weights, bytes, 1);
    else
      CheckBuffer(d, "weights", packed_weights, d.weight_count(), wbytes);
    if (!gemm_weights_) gemm_weights_ = device_->Allocate(bytes);
    device_->CopyOnDevice(packed_weights.mem, packed_weights.byte_offset, gemm_weights_.get(), 0,
                          bytes);
    packed_ready_ = true;
    if (!IsQuantized(d.type)) return {};
    if (!gemm_sums_) gemm_sums_ = device_->Allocate(size_t(d.out_channels) * 4);
    const size_t ocg = size_t(d.out_channels / d.groups), row = bytes / size_t(d.out_channels);
    Event last;
    for (int group = 0; group < d.groups; ++group)
      last = GroupGemm(group).ComputeWeightSums(
          BufferRef(gemm_weights_.get(), group * ocg * row),
          BufferRef(gemm_sums_.get(), group * ocg * 4), queue);
    return last;
  }
  // The other paths read int8: 4-bit weights unpacked first into a buffer the launches below
  // keep alive (enqueued commands hold their buffers).
  std::shared_ptr<DeviceMemory> unpacked;
  BufferRef weights = packed_weights;
  if (d.weight_bits == 4) {
    unpacked = device_->Allocate(d.weight_count());
    int4::Unpack(unpack_, packed_weights, unpacked.get(), d.out_channels,
                 int(d.weight_count() / size_t(d.out_channels)), queue);
    weights = BufferRef(unpacked.get(), 0);
  }
  CheckBuffer(d, "weights", weights, d.weight_count(), wbytes);
  if (family_ == ConvFamily::kPointwise) {
    const PointwiseTile& t = pointwise_tile_;
    const size_t blocks = size_t(DivUp(d.out_channels, t.oc)) * size_t(t.oc);
    const size_t row = d.weight_count() / size_t(d.out_channels);  // weights per channel
    // A float per weight (int8q's row form: w − z_w) or an int per pair of window columns (its
    // kx 2), or int8q's plane form an int per pair (quad, k 4) of input channels and the sums
    // Σ(w − z_w).
    const bool q = d.type == DataType::kInt8Q, pairs = pointwise_wsum_ != nullptr;
    const size_t total =
        blocks * (pairs && t.k == 64 ? size_t(conv_internal::PointwiseTileQuads(int(row)))
                  : pairs         ? size_t(DivUp(int(row), t.k))
                  : t.kx == 2 ? row / size_t(d.kernel_w) * size_t(DivUp(d.kernel_w, 2))
                              : row);
    if (!pointwise_weights_) pointwise_weights_ = device_->Allocate(total * 4);
    pointwise_pack_.ArgBuffer(weights.mem, weights.byte_offset, wbytes);
    if (q) pointwise_pack_.Arg(w_zero_);
    pointwise_pack_.ArgBuffer(pointwise_weights_.get(), 0, 4);
    if (pairs) pointwise_pack_.ArgBuffer(pointwise_wsum_.get(), 0, 4);
    packed_ready_ = true;
    return pointwise_pack_.Launch1D(total, queue);
  }
  if (family_ == ConvFamily::kWinograd) {
    packed_ready_ = true;
    return winograd_->SetWeights(weights, queue, WinogradArgs());
  }
  if (family_ == ConvFamily::kDepthwise) {
    const size_t bytes = d.weight_count() * wbytes;
    if (!depthwise_weights_) depthwise_weights_ = device_->Allocate(bytes);
    device_->CopyOnDevice(weights.mem, weights.byte_offset, depthwise_weights_.get(), 0, bytes);
    packed_ready_ = true;
    return {};
  }
  const int cg = d.channels / d.groups, khw = d.kernel_h * d.kernel_w;
  const int total = d.groups * int(PackedWindow(d, input_)) * oc_padded_;
  pack_.ArgBuffer(weights.mem, weights.byte_offset, wbytes)
      .Arg(w_zero_)
      .ArgBuffer(packed_.get(), 0, PackedBytes(d.type, input_))
      .Arg(int32_t{cg})
      .Arg(int32_t{d.out_channels / d.groups})
      .Arg(int32_t{oc_padded_ / config_.channels_per_group()})
      .Arg(int32_t{khw})
      .Arg(int32_t{total});
  if (UsesTapQuads(d, input_)) pack_.Arg(int32_t{d.kernel_w});
  packed_ready_ = true;
  Event packed = pack_.Launch1D(size_t(total), queue);
  if (input_ != ConvInput::kDot4 && !IsByteQuads(input_)) return packed;
  wsum_kernel_.ArgBuffer(weights.mem, weights.byte_offset, wbytes)
      .Arg(wsum_)
      .Arg(int32_t{d.out_channels})
      .Arg(int32_t{cg * khw});
  if (IsByteQuads(input_)) wsum_kernel_.Arg(w_zero_);
  return wsum_kernel_.Launch1D(size_t(d.out_channels), queue);
}

Event Convolution::Forward(const BufferRef& input, const BufferRef& bias, const BufferRef& output,
                           Queue* queue, const BufferRef& residual) {
  const ConvDesc& d = desc_;
  if (!packed_ready_) throw Error("convolution " + d.ToString() + ": Forward before SetWeights");
  const size_t es = SizeOf(d.type);
  CheckBuffer(d, "input", input, d.input_count(), es);
  CheckBuffer(d, "output", output, d.output_count(), es);
  if (d.bias) CheckBuffer(d, "bias", bias, size_t(d.out_channels), BiasBytes(d.type));
  const BufferRef bias_arg = d.bias ? bias : output;  // any valid buffer when unused
  if (d.residual) CheckBuffer(d, "residual", residual, d.output_count(), es);
  const BufferRef res_arg = d.residual ? residual : output;
  const int ocg = d.out_channels / d.groups, oh = d.out_h(), ow = d.out_w();
  if (family_ == ConvFamily::kWinograd)
    return winograd_->Forward(input, bias_arg, res_arg, output, queue, WinogradArgs());
  if (family_ == ConvFamily::kDepthwise) {
    // The sizes are constants of the kernel text; the arguments are buffers and zero points.
    depthwise_kernel_.ArgBuffer(input.mem, input.byte_offset, es)
        .ArgBuffer(depthwise_weights_.get(), 0, SizeOf(d.type))
        .ArgBuffer(bias_arg.mem, d.bias ? bias_arg.byte_offset : 0, BiasBytes(d.type))
        .Arg(requant_)
        .Arg(w_zero_)
        .ArgBuffer(res_arg.mem, res_arg.byte_offset, es)
        .ArgBuffer(output.mem, output.byte_offset, es);
    for (int v : {x_zero_, c_zero_, res_zero_, res_m_, res_s_}) depthwise_kernel_.Arg(int32_t{v});
    const size_t local = size_t(DepthwiseLocal(d, depthwise_vx_));
    const size_t columns = depthwise_vx_ > 1 ? size_t(DivUp(ow, depthwise_vx_)) : size_t(ow);
    return depthwise_kernel_.Launch({columns, size_t(DivUp(oh, depthwise_rows_)),
                                     size_t(d.batch) * d.channels},
                                    {local, 1, 1}, queue);
  }
  if (family_ == ConvFamily::kPointwise) {
    const PointwiseTile& t = pointwise_tile_;
    const long hw = long(oh) * ow;
    BufferRef x = input;
    if (IsStridedPointwise(d)) {
      // Each image's channels subsampled to the output's pixels (its 1×1 columns), in turn
      // into one buffer that the stride-1 plane form reads.
      const size_t image = size_t(d.channels) * size_t(hw) * es;
      TakeScratch(*device_, arena_.get(), queue, ScratchUse::kColumns, size_t(d.batch) * image,
                  &gemm_col_);
      for (int n = 0; n < d.batch; ++n) {
        im2col_.ArgBuffer(input.mem, input.byte_offset + size_t(n) * d.channels * d.height *
                                                             d.width * es, es)
            .ArgBuffer(gemm_col_.get(), size_t(n) * image, es);
        for (int v : {d.height, d.width, 1, 1, d.stride_h, d.stride_w, 0, 0, 1, 1, oh, ow, 1, 0,
                      d.channels, x_zero_})
          im2col_.Arg(int32_t{v});
        im2col_.Launch1D(size_t(d.channels), queue);
      }
      x = BufferRef(gemm_col_.get(), 0);
    }
    pointwise_kernel_.ArgBuffer(x.mem, x.byte_offset, es)
        .ArgBuffer(pointwise_weights_.get(), 0, 4);
    if (pointwise_wsum_) pointwise_kernel_.ArgBuffer(pointwise_wsum_.get(), 0, 4);
    pointwise_kernel_.ArgBuffer(bias_arg.mem, d.bias ? bias_arg.byte_offset : 0, BiasBytes(d.type));
    const bool q = d.type == DataType::kInt8Q;
    if (q) pointwise_kernel_.Arg(requant_);
    pointwise_kernel_.ArgBuffer(res_arg.mem, res_arg.byte_offset, es)
        .ArgBuffer(output.mem, output.byte_offset, es);
    if (q)
      for (int v : {x_zero_, c_zero_, res_zero_, res_m_, res_s_}) pointwise_kernel_.Arg(int32_t{v});
    if (!IsPointwise(d) && !IsStridedPointwise(d))  // the row form: (column block, output row,
                                                    // image · channel block)
      return pointwise_kernel_.Launch({size_t(DivUp(ow, t.vx)), size_t(oh),
                                       size_t(d.batch) * size_t(DivUp(ocg, t.oc))},
                                      {0, 0, 0}, queue);
    const std::array<size_t, 3>&g = pointwise_global_, &l = pointwise_local_;
    return pointwise_kernel_.Launch({g[0], g[1], g[2]}, {l[0], l[1], l[2]}, queue);
  }
  if (forward_gemm()) {
    // Per image and group: the columns of the group's input channels, then C_g (out_channels/
    // groups × OH·OW) = W_g · columns straight into the group's channels of the NCHW output.
    // A pointwise group's columns are its input channels themselves (Cg·H·W = K × N): no
    // im2col.
    const int kg = GroupGemm(0).desc().K, cg = d.channels / d.groups;
    const size_t hw = size_t(d.height) * d.width, ohw = size_t(oh) * ow;
    const size_t row = d.weight_bytes() / size_t(d.out_channels);  // one channel's weights
    const bool pointwise = ColumnsAreTheInput(d);
    if (!pointwise)
      TakeScratch(*device_, arena_.get(), queue, ScratchUse::kColumns, size_t(kg) * ohw * es,
                  &gemm_col_);
    const int rows = kg;  // column rows of one image
    Event last;
    for (int n = 0; n < d.batch; ++n) {
      for (int group = 0; group < d.groups; ++group) {
        const BufferRef x(input.mem, input.byte_offset +
                                         (size_t(n) * d.channels + size_t(group) * cg) * hw * es);
        GemmArgs a;
        a.a = BufferRef(gemm_weights_.get(), size_t(group) * ocg * row);
        a.b = x;
        if (!pointwise) {
          im2col_.ArgBuffer(x.mem, x.byte_offset, es).ArgBuffer(gemm_col_.get(), 0, es);
          for (int v : {d.height, d.width, d.kernel_h, d.kernel_w, d.stride_h, d.stride_w,
                        d.pad_h, d.pad_w, d.dilation_h, d.dilation_w, oh, ow, 1, 0, rows,
                        x_zero_})
            im2col_.Arg(int32_t{v});
          im2col_.Launch1D(size_t(rows), queue);
          a.b = BufferRef(gemm_col_.get(), 0);
        }
        const size_t out_channel = size_t(n) * d.out_channels + size_t(group) * ocg;
        a.c = BufferRef(output.mem, output.byte_offset + out_channel * ohw * es);
        if (d.bias)
          a.bias = BufferRef(bias.mem, bias.byte_offset + size_t(group) * ocg * BiasBytes(d.type));
        if (gemm_sums_) a.weight_sums = BufferRef(gemm_sums_.get(), size_t(group) * ocg * 4);
        last = GroupGemm(group).Run(a, queue);
      }
    }
    return last;
  }
  return ForwardDirect(input, bias_arg, res_arg, output, queue);
}

}  // namespace mpcaffe::libdnn
