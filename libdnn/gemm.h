// libdnn/gemm.h — generated GEMM C = α·op(A)·op(B) + β·C for fp32, fp16, int16q and int8q
// with a fused output pipeline (bias, ReLU, requantization or dequantization), its host
// reference, and the per-weight-tensor sums quantized GEMMs need.
//
// Contract (stable; layers/ and the tests build on it):
//   * Row-major. op(A) is M×K, op(B) is K×N, C is M×N. lda/ldb/ldc are the row strides of
//     the STORED matrices (A stored K×M when trans_a); 0 means packed.
//   * One operand is the weight tensor (GemmDesc::weights). Its output-channel axis is the
//     axis of C it indexes: rows (M) when the weights are A, columns (N) when they are B.
//     Bias and per-channel quantization parameters are indexed along that axis.
//   * Float types (fp32, fp16 storage with fp32 arithmetic):
//       C = relu?( α·Σ_k op(A)·op(B) + β·C + bias[ch] ), bias in float (fp32 buffer).
//   * Quantized types (int8q: uint8 activations; int16q: uint16 activations). The weights are
//     unsigned (uint8/uint16, any zero point) or, with weights_signed, signed (int8/int16,
//     normally zero point 0, "symmetric"). Acc = int32 (int8q) / int64 (int16q):
//       acc   = Σ_k (x − z_x)(w − z_w)
//             = Σ x·w − z_w·Σx − z_x·Σw + K·z_x·z_w            (what the kernel computes;
//               Σw per channel comes precomputed from Gemm::ComputeWeightSums, Σx inside)
//       v     = acc + bias[ch]              (bias in units of s_x·s_w; int32 / int64)
//       out   = clamp(z_c + Requantize(v, M[ch]), qmin, qmax), ReLU: clamp below at z_c
//               (Requantize = quant::Requantize32 for int8q, Requantize64 for int16q)
//     or, with out_type == kFloat32 (a final layer): out = (float)v · scale[ch] with
//     scale = s_x·s_w[ch], ReLU: max(out, 0). int8q arithmetic wraps modulo 2^32 like the
//     reference (no overflow below K = 33025). α and β must be 1 and 0.
//   * Results equal GemmReference exactly for the quantized types, within fp32 rounding for
//     fp32 (1e-5 relative), and within fp16 output rounding for fp16.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "libdnn/gemm_config.h"
#include "libdnn/scratch.h"
#include "quant/fixed_point.h"

namespace mpcaffe::libdnn {

/// Which operand of the GEMM holds the weights (its other axis is the output channels).
enum class WeightOperand { kA, kB };

/// An untyped device buffer reference: an allocation plus a byte offset. Made from any vptr.
struct BufferRef {
  DeviceMemory* mem = nullptr;
  size_t byte_offset = 0;
  BufferRef() = default;
  BufferRef(DeviceMemory* m, size_t off) : mem(m), byte_offset(off) {}
  template <typename T>
  BufferRef(const vptr<T>& p) : mem(p.mem.get()), byte_offset(p.byte_offset()) {}  // NOLINT
  explicit operator bool() const { return mem != nullptr; }
};

/// What a GEMM computes; everything here is fixed when the kernel is generated.
struct GemmDesc {
  DataType type = DataType::kFloat32;      // storage of A and B (activations' type)
  DataType out_type = DataType::kFloat32;  // C: `type`, or kFloat32 to dequantize a quantized GEMM
  bool trans_a = false;
  bool trans_b = false;
  int M = 0, N = 0, K = 0;
  int lda = 0, ldb = 0, ldc = 0;  // row strides of the stored A, B, C; 0 = packed
  WeightOperand weights = WeightOperand::kB;
  bool bias = false;  // add bias[ch]
  bool relu = false;  // fused ReLU
  // Quantized types only.
  bool weights_signed = false;  // weights stored as int8 (int8q) / int16 (int16q)
  bool per_channel = false;     // one multiplier (or dequantization scale) per output channel
  bool weight_zero = true;      // z_w may be nonzero (false: z_w is 0, the Σx term is skipped)
  /// Bits per stored weight: 8 (the type's storage), or 4 (int8w4: the weight operand is
  /// signed 4-bit packed two per byte per output channel, quant/int4.h's layout; each channel's
  /// K weights take Int4RowBytes(K) bytes, channel o at byte o·Int4RowBytes(K)). 4 needs type
  /// kInt8Q, weights_signed, weight_zero false, and K contiguous per channel: weights A not
  /// transposed or weights B transposed, with that operand's ld 0 or K. The arithmetic is the
  /// int8 GEMM's on the unpacked weights (the same results bit for bit).
  int weight_bits = 8;

  int lda_or_packed() const { return lda ? lda : (trans_a ? M : K); }
  int ldb_or_packed() const { return ldb ? ldb : (trans_b ? K : N); }
  int ldc_or_packed() const { return ldc ? ldc : N; }
  /// Number of output channels: M when the weights are A, N when they are B.
  int channels() const { return weights == WeightOperand::kA ? M : N; }
  /// Bytes of the weight operand: channels × Int4RowBytes(K) with weight_bits 4, else the
  /// stored matrix's channels (or K) rows of its ld elements.
  size_t weight_bytes() const;
  /// "fp32 M=.. N=.. K=.. ta=0 tb=1 ..." — also the tuning signature's exact form.
  std::string ToString() const;
  /// Throws mpcaffe::Error naming the field when the description is inconsistent.
  void Validate() const;
  /// An fp32 GEMM of the given shape, layout and leading dimensions (no bias, no ReLU): the
  /// convolutions' backward passes and the N-d convolution.
  static GemmDesc Float(int M, int N, int K, bool trans_a, bool trans_b, int lda, int ldb,
                        int ldc) {
    GemmDesc g;
    g.M = M, g.N = N, g.K = K;
    g.trans_a = trans_a, g.trans_b = trans_b;
    g.lda = lda, g.ldb = ldb, g.ldc = ldc;
    return g;
  }
};

/// Quantization parameters of one quantized GEMM (ignored for float types).
struct GemmQuant {
  int32_t x_zero = 0;  // zero point of the activation operand
  int32_t w_zero = 0;  // zero point of the weight operand (as stored: signed weights use 0)
  int32_t c_zero = 0;  // zero point of the quantized output
  /// Requantization multipliers M = s_x·s_w/s_c: 1, or channels() with per_channel.
  std::vector<quant::FixedPointMultiplier> multiplier;
  /// Dequantization scales s_x·s_w (out_type kFloat32): 1, or channels() with per_channel.
  std::vector<float> scale;
};

/// Run-time arguments. Element types: A, B as GemmDesc::type (weights int8/int16 when
/// weights_signed; packed 4-bit rows with weight_bits 4), C as out_type; bias fp32 for float types, int32 for int8q, int64 for
/// int16q; weight_sums int32 (int8q) / int64 (int16q), channels() of them.
struct GemmArgs {
  BufferRef a, b, c;
  float alpha = 1.0f, beta = 0.0f;  // float types only
  BufferRef bias;
  BufferRef weight_sums;
};

/// A GEMM prepared for one device and description: kernel generated (with the tuned
/// parameters from the cache's tuning table when present, else the device-class defaults,
/// else `config` when given) and quantization parameters uploaded. Reusable and cheap to
/// run; not thread-safe for concurrent Run calls on one object.
class Gemm {
 public:
  Gemm(Device& device, const GemmDesc& desc, const GemmQuant& quant = {});
  Gemm(Device& device, const GemmDesc& desc, const GemmQuant& quant, const GemmConfig& config);

  const GemmDesc& desc() const { return desc_; }
  const GemmConfig& config() const { return config_; }
  Device& device() const { return *device_; }

  /// Enqueues the GEMM; asynchronous (the returned event times its last kernel: an int8 GEMM
  /// with kp = 2 and weights A first expands A's pairs, so time it on the host).
  Event Run(const GemmArgs& args, Queue* queue = nullptr);

  /// Quantized types: writes channels() sums Σ_k w (stored values, signed if weights_signed)
  /// of the weight operand `weights` (laid out as A or B of this GEMM) to `sums`
  /// (int32 / int64). Once per weight tensor. 4-bit weights on the int8 kernels (a
  /// configuration without GemmConfig::kU8S4) are unpacked to bytes here and kept: runs on the
  /// same weight buffer take those bytes instead of unpacking them again.
  Event ComputeWeightSums(const BufferRef& weights, const BufferRef& sums, Queue* queue = nullptr);

  /// Frees the buffers a run fills before its kernel (packed or unpacked weights and
  /// activations); the next Run allocates them again. Reduced-memory inference calls it (through
  /// Convolution::ReleaseScratch) so idle GEMMs hold none; enqueued commands keep theirs.
  void ReleaseScratch();
  /// Takes the run's scratch from `arena` (shared with the net's other layers), again on every
  /// run; nullptr: buffers of its own, kept until ReleaseScratch.
  void set_scratch_arena(std::shared_ptr<ScratchArena> arena) { arena_ = std::move(arena); }

  /// The program text this GEMM runs.
  const std::string& source() const { return source_; }
  /// Whether the kernel multiplies four int8 k at a time through the device's native 4-way dot
  /// product (KernelHelper::kDot4 on a target with dot_product: dp4a on CUDA, the packed
  /// dot_4x8packed_* built-ins of cl_khr_integer_dot_product on OpenCL).
  bool native_dot4() const { return native_dot4_; }

  /// The generated program text (for tests and NVRTC compiles).
  static std::string Source(const KernelTarget& target, const GemmDesc& desc,
                            const GemmConfig& config);
  static std::string KernelName(const GemmDesc& desc);

 private:
  void Prepare(const GemmQuant& quant);
  Event RunKernel(const GemmArgs& args, Queue* queue);  // Run after the 4-bit weights' unpack
  // The scratch buffers below that this configuration uses, if freed (or from arena_).
  void AllocateScratch(Queue* queue);
  Device* device_;
  GemmDesc desc_;
  GemmConfig config_;
  GemmQuant quant_;
  std::string source_;
  bool native_dot4_ = false;
  Kernel kernel_;
  Kernel sums_kernel_;
  Kernel apack_kernel_;  // kp = 2 with weights A: op(A) pairs expanded before each run
  vptr<int32_t> apack_;  // M × ⌊K/2⌋ pairs (w − z_w of k, k + 1 as two 16-bit halves)
  vptr<int32_t> mult_, shift_;
  vptr<float> scale_;
  Kernel unpack_kernel_;                    // weight_bits 4 on the int8 kernels: nibbles to int8
  std::shared_ptr<DeviceMemory> unpacked_;  // channels() × K int8 of one run
  // The weights ComputeWeightSums unpacked (channels() × K int8) and where it read them.
  std::shared_ptr<DeviceMemory> kept_unpacked_;
  BufferRef kept_from_;
  Kernel xpack_kernel_;                     // native 4-bit kernels: the activations' packing
  std::shared_ptr<DeviceMemory> xq_;        // and their packed copy of one run
  std::shared_ptr<ScratchArena> arena_;
};

/// The host reference: exactly the integer pipeline above for quantized types (bit-exact),
/// double-free float arithmetic (fp32 accumulation in k order) for fp32, and for fp16 float
/// accumulation of the widened halves with one rounding to half at the end. Pointers are
/// host memory in the element types of GemmArgs; `c` is read when β ≠ 0.
void GemmReference(const GemmDesc& desc, const GemmQuant& quant, const void* a, const void* b,
                   void* c, float alpha = 1.0f, float beta = 0.0f, const void* bias = nullptr);

/// Host reference of Gemm::ComputeWeightSums (int32 or int64 per channel into `sums`).
void WeightSumsReference(const GemmDesc& desc, const void* weights, void* sums);

}  // namespace mpcaffe::libdnn
