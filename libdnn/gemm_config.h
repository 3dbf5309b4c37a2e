// libdnn/gemm_config.h — the tunable parameters of the generated GEMM kernels: their text form
// (stored in the cache's tuning table), the defaults per device class, and the candidate set
// the Tuner times.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "device/device.h"
#include "libdnn/config_schema.h"
#include "libdnn/defaults_table.h"

namespace mpcaffe::libdnn {

struct GemmDesc;

/// Parameters of one generated GEMM kernel. Every field is part of the kernel text, hence of
/// the program cache key.
struct GemmConfig {
  enum class Algorithm {
    /// Outer products: each work-item keeps a tm × (tn·vw) register tile of C, reading
    /// op(B) rows as vectors of vw along N and broadcasting op(A) scalars. Any layout (a
    /// transposed B is gathered lane by lane).
    kOuter,
    /// Dot products along K: each work-item keeps tm × tn accumulators that are vectors of
    /// vw along K, reduced at the end. Needs op(A) and op(B) contiguous in K (A not
    /// transposed; B transposed, or N == 1 packed): matrix × vector and Caffe's
    /// InnerProduct layout.
    kDot,
  };
  Algorithm algorithm = Algorithm::kOuter;
  int tm = 6;  // rows of C per work-item
  int tn = 2;  // kOuter: vectors of vw columns per work-item; kDot: columns per work-item
  int vw = 8;  // vector width (1, 2, 4, 8, 16; CUDA: KernelWriter::AddVector structs)
  int wg = 1;  // work-items per work-group along dimension 0 (local size (wg, 1, 1))
  int ku = 1;  // K loop unroll factor (1, 2, 4)
  /// Work-group order: 1 walks M tiles first (dimension 0) so consecutive work-groups reuse one
  /// B panel from cache; 0 walks N tiles first, reusing an A strip.
  int mf = 0;
  /// K pairs (int8q, kOuter, vw = 8 only; either backend): 2 multiplies two k at a time as 16-bit
  /// pair products summed into int32 lanes (x86 `vpmaddwd`: 16 MACs per instruction where int32
  /// lanes give 8), with op(B) rows k and k+1 interleaved in registers and z_w subtracted from
  /// the weights as they are loaded (weights as a not transposed A are first expanded to 32-bit
  /// pairs by a small kernel per run); exact for 8-bit operands. 1 is the one-k-per-step loop.
  /// 4 (int8q, kOuter, vw = 1, lm = 0, either backend): four k per step through the 4-way byte
  /// dot product (KernelHelper::kDot4: dp4a, cl_khr_integer_dot_product, or portable shifts),
  /// op(A)'s and op(B)'s bytes of k … k + 3 packed into 32-bit words, K mod 4 by one-k steps.
  /// (kDot with vw = 1 on int8q always multiplies this way.) With kDot and vw = 16 (int8q, lm = 0;
  /// libdnn/gemm_quads.cc): byte quads, 64 k per step, a 64-byte load of each row of op(A) and
  /// op(B) whose 16 lanes hold four neighbouring k, multiplied by KernelHelper::
  /// kByteQuadProduct16 (one vpdpbusd where the device runs AVX-512 VNNI in a helper function);
  /// unsigned weights enter as w − 128 and the kernel adds 128·Σx back.
  /// 8 (4-bit weights, GemmDesc::weight_bits = 4; vw = 8, or 16 with kDot; lm = 0;
  /// libdnn/gemm_int4.cc):
  /// unsigned activation × signed weight byte pairs into 16-bit lanes (KernelHelper::
  /// kBytePairProduct16: `vpmaddubsw`, 32 MACs per instruction), the weights' nibbles
  /// sign-extended to bytes in registers, up to 8 steps summed in 16 bits (|pair| ≤ 2·255·8, so
  /// 8 steps stay within ±32640: exact) and then widened to int32 (`vpmaddwd` with ones).
  /// kOuter: weights A not transposed, four k per 32-bit lane of a vector of 8 columns, each
  /// row's 16 packed bytes of a block of 32 k unpacked in registers to 8 such words, the
  /// activations first packed to words in the same k order by a small kernel per run; kDot: 32 k
  /// per vector, the activation rows first permuted to the nibbles' order (even k, then odd k).
  /// kDot with vw = 16: byte quads (KernelHelper::kByteQuadProduct16), 64 k per vpdpbusd into
  /// int32 lanes, each weight row's 32 bytes of a block unpacked in registers.
  int kp = 1;
  static constexpr int kOneK = 1;   ///< kp: one k per step
  static constexpr int kPairs = 2;  ///< kp: 16-bit pair products
  static constexpr int kDot4 = 4;   ///< kp: 4-way byte dot products
  static constexpr int kU8S4 = 8;   ///< kp: 4-bit weights' byte pair products
  /// Local memory (kOuter with kp = 1 only): 1 has the work-group, laid out 2-D as
  /// group_n() × group_m() work-items, stage slabs of kLocalK rows of K of op(A) (its
  /// group_m()·tm rows) and op(B) (its group_n()·tn·vw columns) in local/shared memory, every
  /// work-item loading its share between barriers, and compute its register tile from there:
  /// each global element is read once per work-group instead of once per work-item that uses
  /// it. A work-item's rows are then m0 + i·group_m() and its vectors n0 + j·group_n()·vw
  /// (strided, so neighbours read neighbouring local words). 0 reads operands from global
  /// memory, one work-item per tile as described above.
  int lm = 0;
  /// Depth in K of one lm = 1 slab (fixed; ku unrolls the loop over it).
  static constexpr int kLocalK = 16;

  /// The fields after the algorithm word: tm, tn, vw, wg, ku, mf, kp, lm with their allowed
  /// values (kp and lm may be missing, as in tables written before they existed: 1 and 0;
  /// the Tuner's variations: ku 1/2, mf 0/1).
  static const ConfigSchema<GemmConfig>& Schema();
  /// "outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1 lm=0" — the tuning table's parameters column.
  std::string ToString() const;
  /// Parses ToString()'s form (Schema()); nothing when malformed or out of range, with `why`
  /// (when given) naming the word or field at fault.
  static std::optional<GemmConfig> Parse(const std::string& text, std::string* why = nullptr);
  /// Whether this config can run `desc` on a target of `backend` (layout, vector widths; kp = 2
  /// only for int8q with vw = 8, kp = 4 for int8q with lm = 0 and vw = 1 (kOuter) or 16 (kDot);
  /// lm = 1 only for kOuter with kp = 1, a
  /// power-of-two wg and slabs within 32 KiB of local memory).
  bool Supports(const GemmDesc& desc, Backend backend) const;
  /// Columns of C per work-item (tn·vw for kOuter, tn for kDot).
  int cols_per_item() const { return algorithm == Algorithm::kOuter ? tn * vw : tn; }
  /// lm = 1: work-items of a work-group along N and along M, wg split as evenly as powers of
  /// two allow (64 → 8 × 8, 32 → 8 × 4). (lm = 0 work-groups are wg × 1 along the first
  /// launch dimension, which mf chooses: wg and 1 here.)
  int group_n() const;
  int group_m() const { return wg / group_n(); }
  /// lm = 1: bytes of local memory one work-group uses for `desc` (both slabs, compute type).
  size_t LocalBytes(const GemmDesc& desc) const;
  /// lm = 1: row strides (elements) of the op(A) slab of `rows` rows and the op(B) slab of
  /// `cols` columns: one element of padding where the copy walks k fastest (A not
  /// transposed, B transposed), against local memory bank conflicts.
  static int LocalStrideA(const GemmDesc& desc, int rows);
  static int LocalStrideB(const GemmDesc& desc, int cols);
  bool operator==(const GemmConfig& o) const;
};

/// The GEMM's defaults per device class and description (rows of the outer product, the dot
/// product along K and the 4-bit weights' own kernel).
const DefaultsTable<GemmConfig, GemmDesc>& GemmDefaults();
/// The work-item order of the default (GemmConfig::mf) where a shape rule overrides its
/// configuration row's: mf = 1 puts neighbouring work-items on neighbouring activation rows, so
/// they share each weight row in cache, which pays where the weights are the larger operand.
/// -1: the row's own order.
const DefaultsTable<int, GemmDesc>& GemmOrderDefaults();
/// The GEMM as a family row, as the convolution's, pooling's and LRN's are: its name (the
/// records' and `mpcaffe time --explain`'s), its rule of application (every GEMM description:
/// the library's one matrix product), its text form and schema, and its defaults table.
struct GemmFamily {
  const char* name;  ///< "gemm"
  bool (*applies)(const GemmDesc& desc, const TargetProfile& profile);
  /// GemmConfig::Parse: the algorithm word, then the schema's fields.
  std::optional<GemmConfig> (*parse)(const std::string& text, std::string* why);
  const ConfigSchema<GemmConfig>& (*schema)();
  const DefaultsTable<GemmConfig, GemmDesc>& (*defaults)();
};
const GemmFamily& GemmForwardFamily();

/// The first row of GemmForwardFamily's defaults serving `desc` on `device`.
GemmConfig DefaultGemmConfig(const DeviceInfo& device, const GemmDesc& desc);

/// The configurations the Tuner times for `desc` (the default first), all supported.
std::vector<GemmConfig> GemmCandidates(const DeviceInfo& device, const GemmDesc& desc);

}  // namespace mpcaffe::libdnn
