// codegen/kernel_writer.h — KernelWriter: builds one kernel text for a (dialect, data types)
// pair. Kernel bodies are written once with `$` placeholders for the dialect's words; only the
// Dialect table knows how OpenCL C and CUDA C spell them.
#pragma once

#include <array>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "codegen/datatype.h"
#include "device/device.h"

namespace mpcaffe {

/// How a backend spells what kernels need. Data, not code: one row per backend.
struct Dialect {
  Backend backend;
  const char* kernel;        // function qualifier of a kernel
  /// The qualifier of a kernel whose work-items compute in vectors of @N lanes of a scalar
  /// (@O its OpenCL spelling) already (KernelBuilder::VectorWidth).
  const char* kernel_vector_width;
  const char* device_fn;     // qualifier of a helper function
  const char* global_ptr;    // address-space qualifier of a global pointer ("" on CUDA)
  const char* local_ptr;     // address-space qualifier of a local/shared pointer
  const char* shared_decl;   // declaration qualifier of a local/shared array
  const char* restrict_kw;   // pointer restrict keyword
  const char* barrier;       // work-group barrier for local memory
  std::array<const char*, 3> global_id, local_id, group_id, local_size, num_groups, global_size;
  const char* mul_hi_u64;    // high 64 bits of a 64×64 unsigned product
  const char* atomic_cas_u32;   // compare-and-swap on a 32-bit word: f(ptr, expected, desired)
  const char* atomic_add_i32;   // integer atomic add: f(ptr, value)
  const char* float_as_uint;    // reinterpret float bits as uint
  const char* uint_as_float;    // and back
  const char* rint;             // round half to even (float)
  /// KernelHelper::kDot4 on a target with a native 4-way byte dot product (dp4a on CUDA
  /// sm_61+, cl_khr_integer_dot_product's packed form on OpenCL), and the build options such
  /// a program needs (OpenCL C 3.0: the built-ins and their feature macro exist only there).
  const char* dot4_native;
  const char* dot4_build_options;
  /// KernelHelper::kSelect's MP_SELECT(a, b, c): c ? b : a without a branch (OpenCL's
  /// select(); PoCL 3.1 runs the ?: form of a ReLU far slower than select on its CPU target:
  /// docs/BENCHMARKS.md, "Default configurations").
  const char* select;
  /// KernelWriter::AddVector's declaration of a vector type of `@N` lanes of a scalar (`@S`
  /// portable alias, `@O` OpenCL spelling) named `@V`, and its @V_LOAD(p) (same scalar),
  /// @V_LOAD_HALF(p) (from fp16 storage), @V_LOAD_CONV(p) (from another integer storage) and
  /// @V_STORE(x, p): OpenCL's built-in vectors and vloadn/vstoren; on CUDA a struct of @N
  /// lanes with the element-wise operators the kernels use (+ - * += and, for float lanes,
  /// fma), loaded and stored lane by lane (operands start at any element, so wider aligned
  /// loads cannot be assumed) — except as `vector_words` adds.
  const char* vector_decl;
  /// For a vector of a whole number (`@W`) of 16-byte words: loads and stores of its own lane
  /// type that move whole words where the address is 16-byte aligned (CUDA: alignas(16)
  /// structs, one 128-bit access per word, lane by lane otherwise); "" where vector_decl's
  /// loads are already the machine's vector loads (OpenCL's vloadn).
  const char* vector_words;
  const char* vector_fma;  // the float-lane fma(a, b, c) of such a vector ("" where built in)
  /// The lane-wise @V_MAX(a, b) of such a vector, declared on request (AddVector's with_max).
  const char* vector_max;
  /// KernelHelper::kPairProduct16's text (MP_MADD16, MP_PAIR16 over the dialect's 16-lane
  /// short vector); nullptr where the dialect has no form of it yet.
  const char* pair_product16;
  /// KernelHelper::kBytePairProduct16's text (MP_MADDUBS over mp_i32x8 / mp_i16x16: OpenCL's
  /// int8 / short16 with AVX2 built-ins beside a portable form, CUDA structs).
  const char* byte_pair_product16;
  /// KernelHelper::kByteQuadProduct16's text (OpenCL: the VNNI built-in behind
  /// MP_BYTE_QUADS_VNNI and a portable form; CUDA: dp4a per lane).
  const char* byte_quad_product16;
  /// KernelHelper::kByteQuadSlide16's text (OpenCL: the VNNI form's byte shuffle and a portable
  /// form); nullptr where the dialect has none (CUDA: its depthwise kernel has no vector forms).
  const char* byte_quad_slide16;
  /// KernelHelper::kByteTileProduct's text (OpenCL: AMX's built-ins behind MP_BYTE_TILES_AMX
  /// and a portable form); nullptr where the dialect has none (CUDA).
  const char* byte_tile_product;
  /// KernelHelper::kByteVectorStore's text; nullptr where the dialect has no such form (CUDA:
  /// its vectors store lane by lane already).
  const char* byte_vector_store;
  /// Whether vectors have OpenCL's built-in functions (select, clamp, abs, convert_*,
  /// vload/vstore of other types): generators may use them only then.
  bool vector_builtins;
  /// VectorWords' forms (codegen/vector_words.h): @S a scalar, @N lanes, @T a vector type, @P a
  /// pointer, @X @A @B @C operands; nullptr where the dialect has no such word (CUDA: its
  /// vectors are AddVector's structs).
  const char* vector_type;        // the type of @N lanes of @S
  const char* vector_load;        // @N values from @P
  const char* vector_load_half;   // @N floats from fp16 storage at @P
  const char* vector_store;       // stores @X to @P
  const char* vector_store_half;  // stores the floats @X to fp16 storage at @P, rounding to even
  const char* vector_convert;     // @X's values as @T
  const char* vector_as;          // @X's bits as @T
  const char* vector_select;      // @C ? @B : @A lane by lane
  const char* vector_clamp;       // @X clamped to [@A, @B]
  const char* vector_abs;         // |@X|
  const char* vector_even;        // the even lanes of @X
  const char* vector_odd;         // the odd lanes of @X
  const char* vector_splat;       // the scalar @X in every lane of @T
  const char* vector_of;          // the @T of the comma-separated lanes @X
  const char* vector_lane;        // the lanes @N (hexadecimal digits) of @X

  static const Dialect& For(Backend backend);
};

/// What the generated code may assume about its target.
struct KernelTarget {
  Backend backend = Backend::kOpenCL;
  bool fp16_arith = false;   // half arithmetic (cl_khr_fp16, CUDA sm_53+)
  /// Native 4-way int8 dot product: CUDA sm_61+ dp4a, or OpenCL cl_khr_integer_dot_product
  /// with packed 4×8-bit inputs on an OpenCL 3.0 device (DeviceInfo::dot_product).
  bool dot_product = false;
  /// Which forms the x86-specific helper branches take (KernelHelper::kPairProduct16's
  /// MP_MADD16 and MP_MADD32, kBytePairProduct16's MP_MADDUBS, the int8 GEMM's MP_APAIR_P):
  /// kNative, the built-ins of every instruction set the OpenCL compiler targets; kUpTo256Bit,
  /// the AVX2 ones at most (MP_MADD32 undefined, as on an AVX2-only compiler); kPortable, none
  /// (every helper in its portable form, MP_MADD32's included, as on a compiler that targets no
  /// x86: the 512-bit lane layout then runs everywhere). The same integers in every form; the
  /// text defines MP_NO_512BIT_FORMS or MP_PORTABLE_FORMS for the lower two.
  enum class HelperForms { kNative, kUpTo256Bit, kPortable };
  HelperForms helper_forms = HelperForms::kNative;
  /// The compiler miscompiles a signed comparison of a 64-bit integer widened from 32 bits
  /// with a constant (DeviceInfo::long_compare_of_int_broken: Mesa 22.3's rusticl). Kernel
  /// texts widen ints with $long_of_int and test an mp_i64's sign with $negative_i64, which
  /// spell the plain cast and comparison elsewhere (the same text as before the quirk was
  /// known) and, here, forms that compiler gets right.
  bool long_compare_of_int_broken = false;
  /// fma() is a software routine on this device (DeviceInfo::fma_in_software): $fma(a, b, c)
  /// spells `mad(a, b, c)` there (rounding left to the implementation) and `fma(a, b, c)`
  /// elsewhere.
  bool fma_in_software = false;
  /// The compiler takes Clang vectors of more than 16 lanes (DeviceInfo::
  /// vectors_beyond_16_lanes); where it does not, the text defines MP_NO_32_LANE_VECTORS and
  /// the portable forms leave MP_MADD32 undefined (its callers take their 256-bit loops).
  bool vectors_beyond_16_lanes = true;
  /// The dialect has OpenCL C's vector types and built-ins (Dialect::vector_builtins: the
  /// VectorWords rows): the vector forms of libdnn's and layers' kernels exist only then.
  bool vector_builtins = true;
  /// A work-item runs as one thread's loop (UsesCpuVectorDefaults: an OpenCL CPU runtime), so
  /// $vector_loop gives each work-item one contiguous range: the grid-stride form puts one
  /// work-item's successive vectors a whole launch apart, and a CPU thread then streams from a
  /// hundred places at once, which its prefetchers do not follow (docs/BENCHMARKS.md, "Default
  /// configurations"). GPUs keep the grid stride, whose neighbouring work-items touch
  /// neighbouring addresses.
  bool work_item_is_thread = false;
  /// KernelHelper::kByteQuadProduct16 takes its AVX-512 VNNI form (MP_QUAD_FN functions carry
  /// the target attribute; the text defines MP_BYTE_QUADS_VNNI): ByteQuadsInHelper.
  bool byte_quads_in_helper = false;
  /// KernelHelper::kByteTileProduct takes its AMX form (MP_TILE_FN functions carry the target
  /// attribute; the text defines MP_BYTE_TILES_AMX): ByteTilesInHelper.
  bool byte_tiles_in_helper = false;
  /// $prefetch(p) asks for the cache line at p (DeviceInfo::software_prefetch): a CPU's
  /// prefetchers follow no stride that crosses a page, which a walk down the channels of large
  /// NCHW planes does at every step.
  bool software_prefetch = false;

  /// The device's target. fp16_arith follows DeviceInfo::fp16 unless MPCAFFE_FP16_ARITH=0
  /// (fp16 then computes in float, as on a device without half arithmetic); helper_forms
  /// follows MPCAFFE_ISA where it lowers the level below the CPU's (device/host_isa.h: avx2
  /// kUpTo256Bit, generic kPortable), so one setting lowers the x86 level of the host paths and
  /// of the kernel text.
  static KernelTarget Of(const Device& device);
  /// Build options of a program that uses KernelHelper::kDot4 on this target: "" or, for
  /// OpenCL's integer dot product built-ins, "-cl-std=CL3.0".
  std::string Dot4BuildOptions() const;
  /// A CUDA target of a given compute capability (e.g. 80), for compiling without a device.
  static KernelTarget Cuda(int compute_capability);
};

/// Optional helper functions a kernel text may ask for.
enum class KernelHelper {
  kRequantize,    // mp_requant32(int acc, int mult, int shift), mp_requant64(mp_i64, int, int)
  kAtomicAddF32,  // mp_atomic_add_f32($global float* p, float v)
  /// mp_dot4_u8s8 / mp_dot4_s8s8 / mp_dot4_u8u8(uint a, uint b, int acc): acc + the sum of
  /// the four byte products of a and b (u8s8: bytes of a unsigned, of b signed), wrapping like
  /// int32. Portable shifts, or the dialect's native row (Dialect::dot4_native) when the
  /// target has dot_product; either gives the same integers.
  kDot4,
  /// 16-bit pair products (exact for operands within ±32767 whose pair sums fit int32), what
  /// int8 GEMMs with kp = 2 and the int8/int16 convolutions' pair inputs multiply with; one row
  /// per dialect (Dialect::pair_product16: OpenCL's short16 and Clang built-ins, CUDA structs):
  ///   mp_short16        16 lanes of 16 bits; (mp_short16)(x) broadcasts, `-` subtracts
  ///   acc += MP_MADD16(x, y)  adds x.s0·y.s0 + x.s1·y.s1, x.s2·y.s2 + x.s3·y.s3, … to the
  ///                     8 int32 lanes of acc (one vpmaddwd where OpenCL's compiler targets AVX2)
  ///   MP_PAIR16(a0, a1) the pair (a0, a1) of ints holding 16-bit values, 8 times
  ///   MP_PAIR16_WORD(w) the pair packed in one int (low half first), 8 times
  ///   MP_ZIP16(p0, p1)  p0[0], p1[0], p0[1], p1[1], … p0[7], p1[7] (any storage type)
  ///   MP_SHORT16_FROM(g) / MP_SHORT16_LOAD(p)  16 values of an int array / of 16-bit storage
  ///   mp_pair_acc, MP_PAIR_FLUSH(acc, lo, hi)  8 int32 partial sums; acc += hi·256 + lo into
  ///                     64-bit lanes (the int16 split path)
  /// and, in OpenCL where the compiler targets AVX-512 BW only (test `#if defined(MP_MADD32)`),
  /// the same over 32 lanes in one 512-bit vpmaddwd: mp_short32, MP_MADD32 (16 int32 lanes),
  /// MP_PAIR32_WORD(w) (16 times), MP_ZIP32(p0, p1) (p0[0], p1[0], … p0[15], p1[15]),
  /// MP_CAT32(lo, hi) (the 16 lanes of the mp_short16 lo, then hi's).
  /// MP_MADD32_NATIVE is defined where MP_MADD32 is the compiler's own 512-bit vpmaddwd (not
  /// the portable form, which Intel's runtime 2026.2 splits into 256-bit halves).
  kPairProduct16,
  /// Unsigned × signed byte pair products into 16-bit lanes, what GEMMs with 4-bit weights
  /// (int8w4) multiply with; one row per dialect (Dialect::byte_pair_product16: OpenCL's int8 /
  /// short16 vectors with AVX2 built-ins behind __AVX2__ and a portable form beside them, CUDA
  /// structs in the portable arithmetic), the same integers in every form:
  ///   mp_i32x8          8 int lanes (32 bytes; the int32 accumulators); (mp_i32x8)(x) broadcasts,
  ///                     += adds (wrapping)
  ///   mp_i16x16         16 lanes of partial sums (short; int in OpenCL's portable form, which
  ///                     holds the same integers while they fit int16); (mp_i16x16)(0), += adds
  ///   MP_MADDUBS(x, w)  mp_i16x16 of x.b0·w.b0 + x.b1·w.b1, x.b2·w.b2 + x.b3·w.b3, … for
  ///                     mp_i32x8 x, w holding 32 bytes (x's unsigned, w's signed); one
  ///                     vpmaddubsw where the compiler targets AVX2 (which saturates each sum to
  ///                     int16), portable code elsewhere (CUDA truncates it; OpenCL keeps it in
  ///                     an int lane): the same integers
  ///                     whenever the pair sums fit int16, as they do for weights in [-8, 7]
  ///                     (|sum| ≤ 4080)
  ///   MP_WIDEN16(p)     mp_i32x8 of p.s0 + p.s1, p.s2 + p.s3, … (vpmaddwd with ones on AVX2)
  ///   MP_I32X8_LOAD(p) / MP_I32X8_STORE(x, p)  8 ints from / to p[0 … 7] (any alignment)
  ///   MP_I32X8_SUM(x)   the sum of the 8 lanes (wrapping int32)
  ///   MP_ZIP4_U8X8(p, ld)  8 words, word e holding the bytes p[e], p[ld + e], p[2·ld + e],
  ///                     p[3·ld + e] (low first): 4 rows of 8 bytes interleaved (global p)
  ///   MP_NIBBLES32_LOAD(p)  mp_i32x8 of the 32 nibbles of 16 bytes p[0 … 15] sign-extended to
  ///                     bytes: the low nibbles of bytes 0 … 15, then their high nibbles
  kBytePairProduct16,
  /// Unsigned × signed byte quad products into 32-bit lanes, what the int8 pointwise kernel's
  /// 4-channel steps and the int8 GEMM's quad tiles multiply with (Dialect::byte_quad_product16),
  /// the same integers in every form:
  ///   MP_QUAD_FN        the qualifier of a helper function whose body calls MP_DPBUSD16: with
  ///                     KernelTarget::byte_quads_in_helper (MP_BYTE_QUADS_VNNI) a static
  ///                     noinline function compiled for AVX-512 VNNI (the attribute works on
  ///                     PoCL only on a function that is not inlined into the kernel); else the
  ///                     dialect's inline helper qualifier. Kernels call such a function for
  ///                     their whole K loop, so the call costs once per tile.
  ///   mp_i32x16         16 int lanes (64 bytes; OpenCL's int16)
  ///   MP_DPBUSD16(acc, x, w)  acc + per lane i Σ_j x.b(4i+j)·w.b(4i+j) (x's bytes unsigned, w's
  ///                     signed), wrapping int32: one vpdpbusd in the VNNI form (non-saturating)
  ///   MP_ZIP4X16(p0, p1, p2, p3)  mp_i32x16 whose lane i holds the bytes p0[i], p1[i], p2[i],
  ///                     p3[i] (low first): 4 rows of 16 bytes interleaved (global uchar rows)
  ///   MP_QUAD_WORD(w)   the int w (4 bytes) in every lane
  ///   MP_QUAD_LOAD(p)   the 16 ints p[0 … 15] (a global pointer) as the lanes
  ///   MP_QUAD_STORE(x, p)  x's lanes to the private ints p[0 … 15]
  ///   MP_QUAD_LOAD_BYTES(p)  the 64 bytes p[0 … 63] (global, any alignment): lane i holds
  ///                     p[4i] … p[4i + 3], low first
  ///   MP_QUAD_XOR(x, w) every lane of x xor the int w
  ///   MP_QUAD_SUM(x)    the sum of the 16 lanes (wrapping int32)
  ///   MP_NIBBLES64_LOAD(p)  the 64 nibbles of the 32 bytes p[0 … 31] (global, any alignment)
  ///                     sign-extended to bytes: the low nibbles of bytes 0 … 31 (lanes 0 … 7),
  ///                     then their high nibbles (lanes 8 … 15); MP_NIBBLES64_LOAD_P(p) the same
  ///                     from private bytes
  kByteQuadProduct16,
  /// Sliding-window byte quads along a row for kByteQuadProduct16's MP_DPBUSD16 (the int8
  /// depthwise kernel's byte-quad form; OpenCL only, Dialect::byte_quad_slide16; using it uses
  /// kByteQuadProduct16 too):
  ///   mp_quad_keep     the positions of a row's 64 bytes a slide keeps
  ///   MP_QUAD_KEEP64(lo, hi)  positions lo ≤ k < hi (computed once, used for every row)
  ///   MP_QUAD_SLIDE16(p, keep, z, s, f)  mp_i32x16 whose lane i holds the bytes q[s·i + f],
  ///                     q[s·i + f + 1], q[s·i + f + 2], q[s·i + f + 3] (low first), where
  ///                     q[k] = p[k] at the positions `keep` keeps and z elsewhere; s and f integer
  ///                     literals with s·15 + f + 3 < 64. The VNNI form (beside
  ///                     MP_BYTE_QUADS_VNNI) loads p[0 … 63] (global, any alignment; the caller
  ///                     keeps them inside the buffer); the portable form reads only the bytes it
  ///                     keeps.
  kByteQuadSlide16,
  /// Byte tile products: eight tiles, numbered 0 … 7 (integer literals), each 16 rows of 64
  /// bytes (Dialect::byte_tile_product; OpenCL only), the same integers in every form:
  ///   MP_TILE_FN        the qualifier of the one function that uses the tiles: with
  ///                     KernelTarget::byte_tiles_in_helper (MP_BYTE_TILES_AMX) a static noinline
  ///                     function compiled for AMX (as MP_QUAD_FN for VNNI); else the dialect's
  ///                     inline helper qualifier, the tiles then private arrays
  ///   MP_TILES_BEGIN()  first statement of that function (configures or declares the tiles)
  ///   MP_TILES_END()    its last statement (releases them)
  ///   MP_TILE_ZERO(t)   every byte of tile t 0
  ///   MP_TILE_LOAD(t, p, stride)  row r of tile t the 64 bytes at p + r·stride (a global
  ///                     pointer, stride in bytes)
  ///   MP_TILE_LOAD_P(t, p, stride)  the same from private memory
  ///   MP_TILE_DPBUSD(c, a, b)  tile c as int32 [16][16] += Σ_k Σ_j a.byte[m][4k + j] ·
  ///                     b.byte[k][4n + j] (a's bytes unsigned, b's signed), wrapping int32
  ///   MP_TILE_DPBSUD(c, a, b)  the same with a's bytes signed and b's unsigned
  ///   MP_TILE_STORE(t, p, stride)  tile t's rows to the private ints at p, stride bytes apart
  kByteTileProduct,
  /// MP_SELECT(a, b, c): c ? b : a, elementwise and branch-free where the dialect has it
  /// (Dialect::select); and <alias>_SELECT(a, b, c) per AddType alias, for values of its compute
  /// type (the condition as the integer of that size OpenCL's select() wants: short for half).
  kSelect,
  /// MP_STORE_UCHAR<n>(x, p) / MP_STORE_USHORT<n>(x, p), n = 2, 4, 8, 16: stores the vector x
  /// of that type to the global pointer p, which may have any byte alignment, in one move (OpenCL
  /// only, Dialect::byte_vector_store). PoCL 3.1 compiles vstore<n> of a uchar or ushort vector
  /// to n scalar moves, each lane extracted first; a store through a 1-byte-aligned vector type
  /// is one unaligned vector move there, and no different from vstore<n> on Intel's runtime.
  /// MP_LOAD_UCHAR16(p) / MP_LOAD_USHORT16(p): 16 lanes from any address in one move (PoCL 3.1
  /// loads vload16's lanes one by one, merged only where every lane is used).
  kByteVectorStore,
};

class KernelWriter;

/// One kernel's signature and body. Arguments are declared in the order the host sets them.
class KernelBuilder {
 public:
  /// A by-value argument of a portable scalar type ("int", "float", "mp_i64", a type alias).
  KernelBuilder& Value(const std::string& type, const std::string& name);
  /// A read-only global pointer (OpenCL: buffer + element offset).
  KernelBuilder& In(const std::string& type, const std::string& name);
  /// A writable global pointer (OpenCL: buffer + element offset).
  KernelBuilder& Out(const std::string& type, const std::string& name);
  /// A local/shared memory pointer whose size the host gives at launch (Kernel::Local).
  KernelBuilder& LocalPtr(const std::string& type, const std::string& name);
  /// Appends body text; `$` placeholders are expanded by the writer (see KernelWriter).
  KernelBuilder& Body(const std::string& text);
  /// Says that each work-item computes in vectors of `lanes` × `s` already (the family's
  /// explicit vectors): OpenCL's vec_type_hint. Intel's CPU compiler otherwise packs 8 or 16
  /// work-items on top of such vectors, and compiles several times longer (docs/BENCHMARKS.md,
  /// "Default configurations"). Lanes 1 changes nothing.
  KernelBuilder& VectorWidth(Scalar s, int lanes);

 private:
  friend class KernelWriter;
  enum class Kind { kValue, kIn, kOut, kLocal };
  struct Arg {
    Kind kind;
    std::string type, name;
  };
  std::string name_;
  std::vector<Arg> args_;
  std::string body_;
  Scalar width_scalar_ = Scalar::kF32;
  int width_lanes_ = 1;
};

/// Builds a program text of one kernel family. Placeholders in bodies and helper text:
///   $global_id(d) $local_id(d) $group_id(d) $local_size(d) $num_groups(d) $global_size(d)
///   $barrier  $global (pointer qualifier)  $local (pointer qualifier)  $shared (array decl)
///   $device_fn  $loop(i, n) (grid-stride loop header over int i in [0, n))
///   $vector_loop(i, n) (the same indices for a kernel whose work-items compute in their own
///       vectors: one contiguous range per work-item where KernelTarget::work_item_is_thread)
///   $long_of_int(x) / $long_of_int(x, N)  the int (intN) x as mp_i64 (longN): `(mp_i64)x` /
///       `convert_longN(x)`, or mp_long_of_int(x) where KernelTarget::long_compare_of_int_broken
///       (x a primary or postfix expression: a name, call, subscript or parenthesized)
///   $negative_i64(x)  1 when the mp_i64 x is negative, else 0 (`x < 0`, or its sign bit)
///   $fma(a, b, c)  a·b + c in float lanes: `fma(a, b, c)`, or `mad(a, b, c)` where
///       KernelTarget::fma_in_software (also in Define's values)
///   $prefetch(p)  a hint to fetch the cache line at the global address p (a statement's
///       expression, never a fault): `__builtin_prefetch(p)` where
///       KernelTarget::software_prefetch, else `(void)0`
/// Generated text is deterministic: the same calls give the same bytes.
///
/// `family` names the kernel family the program belongs to ("gemm", "conv_forward", …; lower
/// case, digits and '_'), written as a string literal at the construction: it heads the text
/// (see FamilyOf) and must be registered with a CUDA enumerator in tests/testing/kernel_families.cc
/// (tests/cuda/kernel_families_test.cc fails for a family the source tree constructs but the
/// registry lacks; see docs/ARCHITECTURE.md, "Kernel families").
class KernelWriter {
 public:
  KernelWriter(const KernelTarget& target, std::string family);

  const KernelTarget& target() const { return target_; }
  const std::string& family() const { return family_; }
  /// The family named in a program text's first line ("" if it has none).
  static std::string FamilyOf(const std::string& source);
  /// Every family whose Source() this process has generated, sorted (the test suites check
  /// that each is registered; tests/testing/kernel_families.cc).
  static std::vector<std::string> GeneratedFamilies();
  const Dialect& dialect() const { return dialect_; }

  /// Declares a type alias for a data type: typedef `alias` (storage), `alias_c` (compute),
  /// `alias_diff`, `alias_acc`, `alias_mult`, and `alias_LOAD(p, i)` / `alias_STORE(p, i, v)`
  /// (values in the compute type) plus, for quantized types, `alias_QMIN`/`alias_QMAX` and the
  /// clamps to that range: `alias_SAT(v)` to [QMIN, QMAX] and `alias_SAT_FROM(v, lo)` to
  /// [lo, QMAX] (lo >= QMIN: a ReLU's zero point), both in the type of `v` (mp_i64 for the
  /// results of MP_REQUANT).
  KernelWriter& AddType(const std::string& alias, DataType type);
  /// Declares a vector type `alias` of `lanes` lanes (2, 4, 8 or 16) of scalar `s`, with
  /// `alias_LOAD(p)`, `alias_LOAD_HALF(p)`, `alias_LOAD_CONV(p)` and `alias_STORE(x, p)`
  /// (Dialect::vector_decl); `(alias)(x)` broadcasts a scalar in either dialect.
  /// `with_max`: also the lane-wise `alias_MAX(a, b)` (Dialect::vector_max).
  KernelWriter& AddVector(const std::string& alias, Scalar s, int lanes, bool with_max = false);
  /// The requantization of `type`'s accumulator (the one definition of MP_REQUANT):
  /// KernelHelper::kRequantize and MP_REQUANT(acc, m, s) → mp_i64, mp_requant32 of `acc` as an
  /// int for an int32 accumulator (int8q), mp_requant64 for an int64 one (int16q).
  KernelWriter& UseRequant(DataType type);
  /// #define name value.
  KernelWriter& Define(const std::string& name, const std::string& value);
  KernelWriter& UseHelper(KernelHelper helper);
  /// A function of the program (full text, `$` placeholders expanded), placed after the helpers
  /// and before the kernels: e.g. a kernel's K loop in an MP_QUAD_FN function.
  KernelWriter& Function(const std::string& text);
  /// Starts a kernel (the reference stays valid for the writer's lifetime).
  KernelBuilder& Kernel(const std::string& name);

  /// Expands the dialect placeholders in `text`.
  std::string Expand(const std::string& text) const;
  /// The complete program text.
  std::string Source() const;

 private:
  std::string Preamble() const;
  std::string KernelText(const KernelBuilder& k) const;

  KernelTarget target_;
  const Dialect& dialect_;
  std::string family_;
  bool uses_fp16_ = false;
  std::vector<std::string> type_blocks_;
  /// Per AddType alias: the integer type of its compute type's size (select()'s mask).
  std::vector<std::pair<std::string, std::string>> select_masks_;
  std::vector<std::string> defines_;
  std::vector<KernelHelper> helpers_;
  std::vector<std::string> functions_;
  std::deque<KernelBuilder> kernels_;
};

}  // namespace mpcaffe
