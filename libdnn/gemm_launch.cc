// libdnn/gemm_launch.cc — the GEMM at run time: weight preparation (sums, packed pairs, int4
// unpacking), scratch, launches, and the host reference the tests and tools compare with.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "codegen/typed_buffer.h"
#include "libdnn/gemm.h"
#include "libdnn/gemm_internal.h"
#include "libdnn/int4_internal.h"
#include "libdnn/tuner.h"  // TunedGemmConfig
#include "quant/int4.h"
#include "quant/fixed_point.h"
#include "quant/quant_params.h"

namespace mpcaffe::libdnn {

using gemm_internal::LocalSize;
using gemm_internal::PacksA;
using gemm_internal::UsesDot4;
using gemm_internal::WeightSumsKernelName;

void Gemm::Prepare(const GemmQuant& quant) {
  // int8q's kp = 2 holds w − z_w in 16-bit lanes: exact for a weight zero point inside the
  // weights' storage range (every valid quantization); any other takes the one-k loop. (int16q's
  // split form holds w − WCENTER, whatever z_w.)
  if (config_.kp == GemmConfig::kPairs && desc_.weight_zero && desc_.type == DataType::kInt8Q) {
    const int lo = desc_.weights_signed ? -128 : 0, hi = desc_.weights_signed ? 127 : 255;
    if (quant.w_zero < lo || quant.w_zero > hi) config_.kp = GemmConfig::kOneK;
  }
  const KernelTarget target = KernelTarget::Of(*device_);
  source_ = Source(target, desc_, config_);
  native_dot4_ = target.dot_product && UsesDot4(desc_, config_);
  ProgramHints hints;
  hints.local_sizes.push_back(LocalSize(config_));
  if (IsQuantized(desc_.type)) hints.local_sizes.push_back({kLaunch1DLocalSize, 1, 1});
  auto program = device_->GetProgram(
      source_, UsesDot4(desc_, config_) ? target.Dot4BuildOptions() : "", hints);
  kernel_ = program->GetKernel(KernelName(desc_));
  if (!IsQuantized(desc_.type)) return;
  sums_kernel_ = program->GetKernel(WeightSumsKernelName(desc_));
  if (int4::Native(desc_, config_)) {
    xpack_kernel_ = program->GetKernel(KernelName(desc_) + "_xpack");
  } else if (desc_.weight_bits == 4) {
    unpack_kernel_ = program->GetKernel(int4::UnpackKernelName());
  }
  if (PacksA(desc_, config_)) apack_kernel_ = program->GetKernel(KernelName(desc_) + "_apack");
  AllocateScratch(nullptr);
  quant_ = quant;
  const size_t want = desc_.per_channel ? static_cast<size_t>(desc_.channels()) : 1;
  auto bad = [&](const std::string& what) {
    throw Error("GEMM " + desc_.ToString() + ": " + what);
  };
  if (desc_.out_type == DataType::kFloat32) {
    if (quant.scale.size() != want)
      bad("needs " + std::to_string(want) + " dequantization scale(s), got " +
          std::to_string(quant.scale.size()));
    scale_ = device_->Alloc<float>(want);
    device_->Write(scale_, quant.scale.data(), want);
  } else {
    if (quant.multiplier.size() != want)
      bad("needs " + std::to_string(want) + " requantization multiplier(s), got " +
          std::to_string(quant.multiplier.size()));
    std::vector<int32_t> mult(want), shift(want);
    for (size_t i = 0; i < want; ++i) {
      mult[i] = quant.multiplier[i].multiplier;
      shift[i] = quant.multiplier[i].shift;
    }
    mult_ = device_->Alloc<int32_t>(want);
    shift_ = device_->Alloc<int32_t>(want);
    device_->Write(mult_, mult.data(), want);
    device_->Write(shift_, shift.data(), want);
  }
  if (!desc_.weight_zero && quant.w_zero != 0)
    bad("weight_zero is false but the weight zero point is " + std::to_string(quant.w_zero));
}

void Gemm::AllocateScratch(Queue* queue) {
  if (!IsQuantized(desc_.type)) return;
  auto take = [&](std::shared_ptr<DeviceMemory>* buffer, ScratchUse use, size_t bytes) {
    TakeScratch(*device_, arena_.get(), queue, use, bytes, buffer);
  };
  if (int4::Native(desc_, config_))
    take(&xq_, ScratchUse::kGemmActivations,
         std::max<size_t>(4, int4::PackedActivationBytes(desc_, config_)));
  else if (desc_.weight_bits == 4)
    take(&unpacked_, ScratchUse::kGemmUnpacked, size_t(desc_.channels()) * desc_.K);
  if (PacksA(desc_, config_))
    take(&apack_.mem, ScratchUse::kGemmPackedA,
         std::max<size_t>(1, size_t(desc_.M) * (desc_.K / 2)) * sizeof(int32_t));
}

void Gemm::ReleaseScratch() {
  xq_.reset();
  unpacked_.reset();
  apack_ = {};
}

Event Gemm::Run(const GemmArgs& args, Queue* queue) {
  const GemmDesc& d = desc_;
  auto bad = [&](const std::string& what) { throw Error("GEMM " + d.ToString() + ": " + what); };
  if (!args.a || !args.b || !args.c) bad("A, B and C buffers are required");
  if (d.bias && !args.bias) bad("the description has a bias but no bias buffer was given");
  if (d.weight_bits == 4 && !int4::Native(d, config_)) {
    // The int8 kernel on the weights unpacked to bytes: those ComputeWeightSums kept, or, for
    // other weights, unpacked for this run.
    const bool wa = d.weights == WeightOperand::kA;
    const BufferRef& weights = wa ? args.a : args.b;
    GemmArgs unpacked = args;
    BufferRef& bytes = wa ? unpacked.a : unpacked.b;
    if (kept_unpacked_ && weights.mem == kept_from_.mem &&
        weights.byte_offset == kept_from_.byte_offset) {
      bytes = BufferRef(kept_unpacked_.get(), 0);
    } else {
      AllocateScratch(queue);
      int4::Unpack(unpack_kernel_, weights, unpacked_.get(), d.channels(), d.K, queue);
      bytes = BufferRef(unpacked_.get(), 0);
    }
    return RunKernel(unpacked, queue);
  }
  AllocateScratch(queue);
  return RunKernel(args, queue);
}

Event Gemm::RunKernel(const GemmArgs& args, Queue* queue) {
  const GemmDesc& d = desc_;
  auto bad = [&](const std::string& what) { throw Error("GEMM " + d.ToString() + ": " + what); };
  const size_t in = SizeOf(d.type), cs = TraitsOf(d.type).acc_bytes();
  Kernel& k = kernel_;
  k.Arg(int32_t(d.M)).Arg(int32_t(d.N)).Arg(int32_t(d.K));
  k.ArgBuffer(args.a.mem, args.a.byte_offset, in).Arg(int32_t(d.lda_or_packed()));
  k.ArgBuffer(args.b.mem, args.b.byte_offset, in).Arg(int32_t(d.ldb_or_packed()));
  k.ArgBuffer(args.c.mem, args.c.byte_offset, SizeOf(d.out_type)).Arg(int32_t(d.ldc_or_packed()));
  if (IsQuantized(d.type)) {
    if (args.alpha != 1.0f || args.beta != 0.0f) bad("quantized GEMMs need alpha 1 and beta 0");
    if (!args.weight_sums) bad("a quantized GEMM needs the weight sums (ComputeWeightSums)");
    if (d.bias) k.ArgBuffer(args.bias.mem, args.bias.byte_offset, cs);
    k.ArgBuffer(args.weight_sums.mem, args.weight_sums.byte_offset, cs);
    if (d.out_type == DataType::kFloat32)
      k.Arg(scale_);
    else
      k.Arg(mult_).Arg(shift_);
    k.Arg(int32_t(quant_.x_zero)).Arg(int32_t(quant_.w_zero)).Arg(int32_t(quant_.c_zero));
    if (PacksA(d, config_)) {
      k.Arg(apack_);
      if (d.K >= 2) {
        apack_kernel_.Arg(int32_t(d.M)).Arg(int32_t(d.K));
        apack_kernel_.ArgBuffer(args.a.mem, args.a.byte_offset, in).Arg(int32_t(d.lda_or_packed()));
        apack_kernel_.Arg(int32_t(quant_.w_zero)).Arg(apack_);
        apack_kernel_.Launch1D(size_t(d.M) * (d.K / 2), queue);
      }
    }
    if (int4::Native(d, config_)) {
      k.ArgBuffer(xq_.get(), 0, 4);
      int4::PackActivations(xpack_kernel_, d, config_, args, xq_.get(), queue);
    }
  } else {
    k.Arg(args.alpha).Arg(args.beta);
    if (d.bias) k.ArgBuffer(args.bias.mem, args.bias.byte_offset, 4);
  }
  const size_t cols = config_.cols_per_item();
  const size_t n_tiles = (d.N + cols - 1) / cols;
  const size_t m_tiles = (d.M + config_.tm - 1) / static_cast<size_t>(config_.tm);
  const Dim3 global = config_.mf ? Dim3{m_tiles, n_tiles, 1} : Dim3{n_tiles, m_tiles, 1};
  return k.Launch(global, LocalSize(config_), queue);
}

Event Gemm::ComputeWeightSums(const BufferRef& weights, const BufferRef& sums, Queue* queue) {
  if (!IsQuantized(desc_.type))
    throw Error("GEMM " + desc_.ToString() + ": weight sums apply to quantized GEMMs only");
  const bool weights_a = desc_.weights == WeightOperand::kA;
  const size_t acc = TraitsOf(desc_.type).acc_bytes();
  BufferRef w = weights;
  if (desc_.weight_bits == 4 && !int4::Native(desc_, config_)) {
    const size_t bytes = size_t(desc_.channels()) * desc_.K;
    if (!kept_unpacked_) kept_unpacked_ = device_->Allocate(std::max<size_t>(1, bytes));
    int4::Unpack(unpack_kernel_, weights, kept_unpacked_.get(), desc_.channels(), desc_.K, queue);
    kept_from_ = weights;
    unpacked_.reset();  // runs on these weights need no unpack buffer of their own
    w = BufferRef(kept_unpacked_.get(), 0);
  }
  sums_kernel_.Arg(int32_t(desc_.channels())).Arg(int32_t(desc_.K));
  sums_kernel_.ArgBuffer(w.mem, w.byte_offset, SizeOf(desc_.type));
  sums_kernel_.Arg(int32_t(weights_a ? desc_.lda_or_packed() : desc_.ldb_or_packed()));
  sums_kernel_.ArgBuffer(sums.mem, sums.byte_offset, acc);
  return sums_kernel_.Launch1D(desc_.channels(), queue);
}

// ---------------------------------------------------------------------------------------------
// Host reference.

namespace {

/// clamp(z_c + r) to the output range (ReLU: from z_c up), computed without overflow.
int64_t ClampOut(const GemmDesc& d, const GemmQuant& q, int64_t r) {
  const int64_t lo = d.relu ? 0 : TraitsOf(d.type).qmin - q.c_zero;
  const int64_t hi = TraitsOf(d.type).qmax - q.c_zero;
  return std::clamp(r, lo, hi) + q.c_zero;
}

}  // namespace

void WeightSumsReference(const GemmDesc& d, const void* weights, void* sums) {
  const bool wa = d.weights == WeightOperand::kA;
  const size_t lda = d.lda_or_packed(), ldb = d.ldb_or_packed();
  const size_t row4 = quant::Int4RowBytes(size_t(d.K));
  for (int ch = 0; ch < d.channels(); ++ch) {
    int64_t s = 0;
    for (int k = 0; k < d.K; ++k) {
      if (d.weight_bits == 4) {
        s += quant::Int4At(static_cast<const uint8_t*>(weights), row4, ch, k);
        continue;
      }
      const size_t i = wa ? (d.trans_a ? k * lda + ch : ch * lda + k)
                          : (d.trans_b ? ch * ldb + k : k * ldb + ch);
      s += LoadQ(d.type, weights, i, d.weights_signed);
    }
    if (d.type == DataType::kInt8Q)
      static_cast<int32_t*>(sums)[ch] = static_cast<int32_t>(s);
    else
      static_cast<int64_t*>(sums)[ch] = s;
  }
}

void GemmReference(const GemmDesc& d, const GemmQuant& q, const void* a, const void* b, void* c,
                   float alpha, float beta, const void* bias) {
  d.Validate();
  const size_t lda = d.lda_or_packed(), ldb = d.ldb_or_packed(), ldc = d.ldc_or_packed();
  const bool wa = d.weights == WeightOperand::kA;
  for (int m = 0; m < d.M; ++m)
    for (int n = 0; n < d.N; ++n) {
      const size_t ia0 = d.trans_a ? m : m * lda, sa = d.trans_a ? lda : 1;
      const size_t ib0 = d.trans_b ? n * ldb : n, sb = d.trans_b ? 1 : ldb;
      const int ch = wa ? m : n;
      const size_t out = m * ldc + n;
      if (!IsQuantized(d.type)) {
        float acc = 0.0f;
        for (int k = 0; k < d.K; ++k)
          acc =
              std::fma(LoadF(d.type, a, ia0 + k * sa), LoadF(d.type, b, ib0 + k * sb), acc);
        float f = alpha * acc;
        if (beta != 0.0f) f += beta * LoadF(d.out_type, c, out);
        if (d.bias) f += static_cast<const float*>(bias)[ch];
        if (d.relu) f = f > 0.0f ? f : 0.0f;
        StoreF(d.out_type, c, out, f);
        continue;
      }
      // Σ (x − z_x)(w − z_w) directly (a different formula from the kernel's, same value).
      int64_t acc = 0;
      const size_t row4 = quant::Int4RowBytes(size_t(d.K));
      for (int k = 0; k < d.K; ++k) {
        // 4-bit weights: nibble k of the channel's packed row (z_w is 0).
        const int64_t av =
            wa && d.weight_bits == 4
                ? quant::Int4At(static_cast<const uint8_t*>(a), row4, m, k)
                : LoadQ(d.type, a, ia0 + k * sa, wa && d.weights_signed) -
                      (wa ? q.w_zero : q.x_zero);
        const int64_t bv =
            !wa && d.weight_bits == 4
                ? quant::Int4At(static_cast<const uint8_t*>(b), row4, n, k)
                : LoadQ(d.type, b, ib0 + k * sb, !wa && d.weights_signed) -
                      (wa ? q.x_zero : q.w_zero);
        acc += av * bv;
      }
      const size_t pc = d.per_channel ? ch : 0;
      // In the accumulator type: int8q's int32 wraps, as the kernel's arithmetic does.
      const bool acc32 = TraitsOf(d.type).acctype == Scalar::kI32;
      if (d.bias)
        acc += acc32 ? static_cast<const int32_t*>(bias)[ch]
                     : static_cast<const int64_t*>(bias)[ch];
      if (acc32) acc = static_cast<int32_t>(static_cast<uint32_t>(acc));
      if (d.out_type == DataType::kFloat32) {
        float f = static_cast<float>(acc) * q.scale[pc];
        if (d.relu) f = f > 0.0f ? f : 0.0f;
        static_cast<float*>(c)[out] = f;
      } else {
        StoreQ(d.type, c, out, ClampOut(d, q, quant::Requant(d.type, acc, q.multiplier[pc])));
      }
    }
}

}  // namespace mpcaffe::libdnn
