// codegen/dialect.cc — the dialect table: how OpenCL C and CUDA C spell what the kernels need
// (qualifiers, work-item indices, atomics, vectors) and the per-backend helper texts (byte dot
// products, vector types, pair products, byte-vector stores) KernelWriter splices in; the byte
// quads' texts are in codegen/dialect_quads.cc.
#include <stdexcept>
#include <string>

#include "codegen/dialect_texts.h"
#include "codegen/kernel_writer.h"

namespace mpcaffe {

namespace {

// CUDA sm_61+: the hardware instruction (inline PTX for the mixed-sign forms __dp4a lacks).
const char* kDot4CudaText = R"(// 4-way byte dot products on the dp4a instruction.
$device_fn int mp_dot4_u8s8(mp_u32 a, mp_u32 b, int acc) {
  int r;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
  return r;
}
$device_fn int mp_dot4_s8s8(mp_u32 a, mp_u32 b, int acc) {
  return __dp4a((int)a, (int)b, acc);
}
$device_fn int mp_dot4_u8u8(mp_u32 a, mp_u32 b, int acc) {
  return (int)__dp4a(a, b, (unsigned int)acc);
}
)";

// OpenCL with cl_khr_integer_dot_product (packed 4×8-bit inputs; OpenCL C 3.0, so built with
// Dialect::dot4_build_options). The non-saturating forms, added in wrapping uint arithmetic:
// the same integers as dp4a and the portable row. `us`: first operand's bytes unsigned, the
// second's signed (checked on Intel's CPU runtime: us(0xff, 0x02) = 510, su(0xff, 0x02) = -2).
const char* kDot4OpenCLText = R"(// 4-way byte dot products on cl_khr_integer_dot_product.
#ifndef __opencl_c_integer_dot_product_input_4x8bit_packed
#error "mp_dot4 needs __opencl_c_integer_dot_product_input_4x8bit_packed: build with -cl-std=CL3.0"
#endif
$device_fn int mp_dot4_u8s8(mp_u32 a, mp_u32 b, int acc) {
  return (int)((mp_u32)acc + (mp_u32)dot_4x8packed_us_int(a, b));
}
$device_fn int mp_dot4_s8s8(mp_u32 a, mp_u32 b, int acc) {
  return (int)((mp_u32)acc + (mp_u32)dot_4x8packed_ss_int(a, b));
}
$device_fn int mp_dot4_u8u8(mp_u32 a, mp_u32 b, int acc) {
  return (int)((mp_u32)acc + dot_4x8packed_uu_uint(a, b));
}
)";

const char* kVectorOpenCLText = R"(typedef @O@N @V;
#define @V_LOAD(p) vload@N(0, (p))
#define @V_LOAD_HALF(p) vload_half@N(0, (p))
#define @V_LOAD_CONV(p) convert_@O@N(vload@N(0, (p)))
#define @V_STORE(x, p) vstore@N((x), 0, (p))
)";

const char* kVectorMaxOpenCLText = R"(#define @V_MAX(a, b) max((a), (b))
)";
const char* kVectorMaxCudaText = R"(__device__ __forceinline__ @V @V_max(@V a, const @V& b) {
  for (int l = 0; l < @N; ++l) a.s[l] = a.s[l] < b.s[l] ? b.s[l] : a.s[l];
  return a;
}
#define @V_MAX(a, b) @V_max((a), (b))
)";

const char* kVectorCudaText = R"(struct @A@V {
  @S s[@N];
  __device__ __forceinline__ @V() {}
  __device__ __forceinline__ @V(@S x) {
    for (int l = 0; l < @N; ++l) s[l] = x;
  }
};
__device__ __forceinline__ @V operator+(@V a, const @V& b) {
  for (int l = 0; l < @N; ++l) a.s[l] += b.s[l];
  return a;
}
__device__ __forceinline__ @V operator-(@V a, const @V& b) {
  for (int l = 0; l < @N; ++l) a.s[l] -= b.s[l];
  return a;
}
__device__ __forceinline__ @V operator*(@V a, const @V& b) {
  for (int l = 0; l < @N; ++l) a.s[l] *= b.s[l];
  return a;
}
__device__ __forceinline__ @V& operator+=(@V& a, const @V& b) {
  for (int l = 0; l < @N; ++l) a.s[l] += b.s[l];
  return a;
}
template <typename T>
__device__ __forceinline__ @V @V_load(const T* p) {
  @V r;
  for (int l = 0; l < @N; ++l) r.s[l] = (@S)p[l];
  return r;
}
template <typename T>
__device__ __forceinline__ void @V_store(const @V& x, T* p) {
  for (int l = 0; l < @N; ++l) p[l] = (T)x.s[l];
}
#define @V_LOAD(p) @V_load(p)
#define @V_LOAD_HALF(p) @V_load(p)
#define @V_LOAD_CONV(p) @V_load(p)
#define @V_STORE(x, p) @V_store((x), (p))
)";

// CUDA vectors of a whole number of 16-byte words (AddVector declares them alignas(16)): loads
// and stores of the lane type itself move whole words where the address is 16-byte aligned
// (one ld/st.v4 per word) and go lane by lane otherwise. Operands may start at any element
// (buffer offsets, any ld), so the alignment is tested, not assumed: a warp's test is uniform
// wherever its vectors are (the packed weights, the im2col columns, aligned rows).
const char* kVectorWordsCudaText = R"(#ifndef MP_WORDS16
#define MP_WORDS16
struct alignas(16) mp_words16 {
  unsigned int w[4];
};
#endif
__device__ __forceinline__ @V @V_load(const @S* p) {
  @V r;
  if ((reinterpret_cast<unsigned long long>(p) & 15) == 0) {
    for (int i = 0; i < @W; ++i)
      reinterpret_cast<mp_words16*>(r.s)[i] = reinterpret_cast<const mp_words16*>(p)[i];
  } else {
    for (int l = 0; l < @N; ++l) r.s[l] = p[l];
  }
  return r;
}
__device__ __forceinline__ void @V_store(const @V& x, @S* p) {
  if ((reinterpret_cast<unsigned long long>(p) & 15) == 0) {
    for (int i = 0; i < @W; ++i)
      reinterpret_cast<mp_words16*>(p)[i] = reinterpret_cast<const mp_words16*>(x.s)[i];
  } else {
    for (int l = 0; l < @N; ++l) p[l] = x.s[l];
  }
}
)";

const char* kVectorFmaCudaText = R"(__device__ __forceinline__ @V fma(@V a, const @V& b, const @V& c) {
  for (int l = 0; l < @N; ++l) a.s[l] = fmaf(a.s[l], b.s[l], c.s[l]);
  return a;
}
)";

// 16-bit pair products (KernelHelper::kPairProduct16), one row per dialect; both give the
// same integers. The x86 built-in branches give way to the portable forms where the text
// defines MP_PORTABLE_FORMS, and the 512-bit one where it defines MP_NO_512BIT_FORMS
// (KernelTarget::helper_forms); the portable forms include MP_MADD32's, so the 512-bit lane
// layout runs on every device. OpenCL: LLVM (PoCL's 15) does not form vpmaddwd from a portable form, so
// AVX2 targets call the builtin. Other targets (Intel's CPU runtime compiles for a SPIR target,
// without x86 built-ins) take the portable form, spelled as the products of all 16 lanes
// widened, then their even + odd lanes: Intel's runtime 2026.2 (LLVM 23) makes that one
// vpdpwssd (AVX-512 VNNI) per MP_MADD16, where the former spelling, products of the .even
// lanes plus products of the .odd lanes, became two vpdpwssd on masked and shifted copies
// (dumped with CL_CONFIG_DUMP_DISASSEMBLY=True, 2026-11-24).
const char* kPairProduct16OpenCLText =
    R"(// 16-bit pair products: lanes x.s(2i)*y.s(2i) + x.s(2i+1)*y.s(2i+1).
typedef short16 mp_short16;
#if defined(__AVX2__) && !defined(MP_PORTABLE_FORMS)
#define MP_MADD16(x, y) __builtin_ia32_pmaddwd256((x), (y))
#else
$device_fn int8 mp_madd16(short16 x, short16 y) {
  const int16 p = convert_int16(x) * convert_int16(y);
  return p.even + p.odd;
}
#define MP_MADD16(x, y) mp_madd16((x), (y))
#endif
#define MP_PAIR16(a0, a1) __builtin_astype((int8)(((a0) & 0xffff) | (int)((uint)(a1) << 16)), short16)
#define MP_PAIR16_WORD(w) __builtin_astype((int8)(w), short16)
#define MP_ZIP16(p0, p1) __builtin_convertvector(__builtin_shufflevector(vload8(0, (p0)), vload8(0, (p1)), 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15), short16)
#define MP_SHORT16_FROM(g) __builtin_convertvector(vload16(0, (g)), short16)
// The 8 overlapping pairs (g[i], g[i + 1]) of the 9 values at g (one 16-lane load, a shuffle).
#define MP_SHORT16_NEIGHBOURS(g) __builtin_convertvector(__builtin_shufflevector(vload16(0, (g)), vload16(0, (g)), 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8), short16)
#define MP_SHORT16_LOAD(p) vload16(0, (p))
// 16 unsigned 16-bit values at p as int16 lanes: their low bytes, high bytes, and x − 32768.
#define MP_SHORT16_SPLIT_LO(p) as_short16(vload16(0, (p)) & (ushort)0xff)
#define MP_SHORT16_SPLIT_HI(p) as_short16(vload16(0, (p)) >> (ushort)8)
#define MP_SHORT16_CENTERED(p) as_short16(vload16(0, (p)) ^ (ushort)0x8000)
typedef int8 mp_pair_acc;
#define MP_PAIR_FLUSH(acc, lo, hi) ((acc) += (convert_long8(hi) << 8) + convert_long8(lo))
#if (defined(MP_PORTABLE_FORMS) && !defined(MP_NO_32_LANE_VECTORS)) || \
    (defined(__AVX512BW__) && !defined(MP_NO_512BIT_FORMS))
// 32 lanes in one 512-bit vpmaddwd: 16 int32 pair sums.
typedef short mp_short32 __attribute__((ext_vector_type(32)));
#if defined(MP_PORTABLE_FORMS)
typedef int mp_int32x32 __attribute__((ext_vector_type(32)));
$device_fn int16 mp_madd32(mp_short32 x, mp_short32 y) {
  const mp_int32x32 p = __builtin_convertvector(x, mp_int32x32) * __builtin_convertvector(y, mp_int32x32);
  return p.even + p.odd;
}
#define MP_MADD32(x, y) mp_madd32((x), (y))
#else
#define MP_MADD32(x, y) __builtin_ia32_pmaddwd512((x), (y))
#define MP_MADD32_NATIVE 1
#endif
#define MP_PAIR32_WORD(w) __builtin_astype((int16)(w), mp_short32)
#define MP_ZIP32(p0, p1) __builtin_convertvector(__builtin_shufflevector(vload16(0, (p0)), vload16(0, (p1)), 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), mp_short32)
#define MP_CAT32(lo, hi) __builtin_shufflevector((mp_short16)(lo), (mp_short16)(hi), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31)
#endif
)";

// CUDA: a struct of 16 shorts; `acc += MP_MADD16(x, y)` adds the 8 pair sums to the lanes .s[0..7]
// of any 8-lane int accumulator (a KernelWriter::AddVector struct or mp_pair_acc), in wrapping
// int32; MP_PAIR_FLUSH adds int32 partial sums hi·256 + lo into 64-bit lanes.
const char* kPairProduct16CudaText =
    R"(// 16-bit pair products: lanes x.s[2i]*y.s[2i] + x.s[2i+1]*y.s[2i+1].
struct mp_short16 {
  short s[16];
  __device__ __forceinline__ mp_short16() {}
  __device__ __forceinline__ mp_short16(short x) {
    for (int l = 0; l < 16; ++l) s[l] = x;
  }
};
__device__ __forceinline__ mp_short16 operator-(mp_short16 a, const mp_short16& b) {
  for (int l = 0; l < 16; ++l) a.s[l] = (short)(a.s[l] - b.s[l]);
  return a;
}
struct mp_madd16_operands {
  mp_short16 x, y;
};
#define MP_MADD16(x, y) (mp_madd16_operands{(x), (y)})
template <typename V>
__device__ __forceinline__ V& operator+=(V& acc, const mp_madd16_operands& p) {
  for (int l = 0; l < 8; ++l)
    acc.s[l] = (int)((unsigned)acc.s[l] + (unsigned)((int)p.x.s[2 * l] * p.y.s[2 * l]) +
                     (unsigned)((int)p.x.s[2 * l + 1] * p.y.s[2 * l + 1]));
  return acc;
}
__device__ __forceinline__ mp_short16 mp_pair16(int a0, int a1) {
  mp_short16 r;
  for (int l = 0; l < 16; l += 2) {
    r.s[l] = (short)a0;
    r.s[l + 1] = (short)a1;
  }
  return r;
}
#define MP_PAIR16(a0, a1) mp_pair16((int)(a0), (int)(a1))
#define MP_PAIR16_WORD(w) mp_pair16((int)(w), (int)(w) >> 16)
template <typename T>
__device__ __forceinline__ mp_short16 mp_zip16(const T* p0, const T* p1) {
  mp_short16 r;
  for (int l = 0; l < 8; ++l) {
    r.s[2 * l] = (short)p0[l];
    r.s[2 * l + 1] = (short)p1[l];
  }
  return r;
}
#define MP_ZIP16(p0, p1) mp_zip16((p0), (p1))
template <typename T>
__device__ __forceinline__ mp_short16 mp_short16_from(const T* g) {
  mp_short16 r;
  for (int l = 0; l < 16; ++l) r.s[l] = (short)g[l];
  return r;
}
#define MP_SHORT16_FROM(g) mp_short16_from(g)
template <typename T>
__device__ __forceinline__ mp_short16 mp_short16_neighbours(const T* g) {
  mp_short16 r;
  for (int l = 0; l < 16; ++l) r.s[l] = (short)g[(l + 1) / 2];
  return r;
}
#define MP_SHORT16_NEIGHBOURS(g) mp_short16_neighbours(g)
#define MP_SHORT16_LOAD(p) mp_short16_from(p)
// 16 unsigned 16-bit values at p as int16 lanes: their low bytes, high bytes, and x − 32768.
template <typename T>
__device__ __forceinline__ mp_short16 mp_short16_split(const T* g, int shift, unsigned mask,
                                                       unsigned flip) {
  mp_short16 r;
  for (int l = 0; l < 16; ++l) r.s[l] = (short)((((unsigned short)g[l] >> shift) & mask) ^ flip);
  return r;
}
#define MP_SHORT16_SPLIT_LO(p) mp_short16_split((p), 0, 0xffu, 0u)
#define MP_SHORT16_SPLIT_HI(p) mp_short16_split((p), 8, 0xffu, 0u)
#define MP_SHORT16_CENTERED(p) mp_short16_split((p), 0, 0xffffu, 0x8000u)
struct mp_pair_acc {
  int s[8];
  __device__ __forceinline__ mp_pair_acc() {}
  __device__ __forceinline__ mp_pair_acc(int x) {
    for (int l = 0; l < 8; ++l) s[l] = x;
  }
};
template <typename A>
__device__ __forceinline__ void mp_pair_flush(A& acc, const mp_pair_acc& lo, const mp_pair_acc& hi) {
  for (int l = 0; l < 8; ++l) acc.s[l] += (mp_i64)hi.s[l] * 256 + (mp_i64)lo.s[l];
}
#define MP_PAIR_FLUSH(acc, lo, hi) mp_pair_flush((acc), (lo), (hi))
)";

// Unsigned × signed byte pair products (KernelHelper::kBytePairProduct16, 4-bit weights), one
// row per dialect; both give the same integers whenever the pair sums fit int16. OpenCL: the AVX2
// built-ins take 32-byte char vectors (OpenCL C has none of 32 lanes: clang's ext_vector_type
// declares one). The portable form keeps the 16 pair sums in int lanes (mp_i16x16 is int16
// there: 16 lanes of partial sums, wider than the built-ins' but holding the same integers
// while they fit int16), the 32 bytes widened whole and multiplied in 32 lanes: Intel's CPU
// runtime 2026.2 (LLVM 23, AVX-512 VNNI) makes each MP_MADDUBS one zmm vpdpwssd on
// vpmovzxbw / vpmovsxbw operands, where packing the sums into 16-bit lanes cost two vpmaddwd,
// a vpackssdw and a vpermq per call (CL_CONFIG_DUMP_DISASSEMBLY=True, 2026-11-24). The nibble
// unpack spreads each nibble n to a byte as ((n ^ 8) + 0x78) ^ 0x80 (n − 16 for n ≥ 8; no carry
// leaves its byte).
const char* kBytePairProduct16OpenCLText =
    R"(// Byte pair products: 16-bit lanes x.b(2i)*w.b(2i) + x.b(2i+1)*w.b(2i+1).
typedef int8 mp_i32x8;
#define MP_I32X8_LOAD(p) vload8(0, (p))
#define MP_I32X8_STORE(x, p) vstore8((x), 0, (p))
$device_fn int mp_i32x8_sum(mp_i32x8 x) {
  const int4 h = x.lo + x.hi;
  const int2 q = h.lo + h.hi;
  return q.x + q.y;
}
#define MP_I32X8_SUM(x) mp_i32x8_sum(x)
$device_fn mp_i32x8 mp_zip4_u8x8(const $global mp_u8* p, int ld) {
  uint8 v = (uint8)(0u);
  for (int q = 0; q < 4; ++q) v |= convert_uint8(vload8(0, p + q * ld)) << (uint8)(8 * q);
  return as_int8(v);
}
#define MP_ZIP4_U8X8(p, ld) mp_zip4_u8x8((p), (ld))
#define MP_NIBBLES32(p) as_int8(((as_uint8((int8)(as_int4((p) & (uchar16)(15)), as_int4((p) >> (uchar16)(4)))) ^ (uint8)(0x08080808u)) + (uint8)(0x78787878u)) ^ (uint8)(0x80808080u))
#define MP_NIBBLES32_LOAD(p) MP_NIBBLES32(vload16(0, (p)))
#if defined(__AVX2__) && !defined(MP_PORTABLE_FORMS)
typedef short16 mp_i16x16;
typedef char mp_char32 __attribute__((ext_vector_type(32)));
#define MP_MADDUBS(x, w) __builtin_ia32_pmaddubsw256(__builtin_astype((x), mp_char32), __builtin_astype((w), mp_char32))
#define MP_WIDEN16(p) __builtin_ia32_pmaddwd256((p), (short16)(1))
#elif defined(MP_NO_32_LANE_VECTORS)
// The portable form in two halves of OpenCL C's 16-lane vectors.
typedef int16 mp_i16x16;
$device_fn mp_i16x16 mp_maddubs(mp_i32x8 x, mp_i32x8 w) {
  const int16 pl = convert_int16(as_uchar16(x.lo)) * convert_int16(as_char16(w.lo));
  const int16 ph = convert_int16(as_uchar16(x.hi)) * convert_int16(as_char16(w.hi));
  return (int16)(pl.even + pl.odd, ph.even + ph.odd);
}
#define MP_MADDUBS(x, w) mp_maddubs((x), (w))
#define MP_WIDEN16(p) ((p).even + (p).odd)
#else
typedef int16 mp_i16x16;
typedef uchar mp_u8x32 __attribute__((ext_vector_type(32)));
typedef char mp_s8x32 __attribute__((ext_vector_type(32)));
typedef int mp_i32x32 __attribute__((ext_vector_type(32)));
$device_fn mp_i16x16 mp_maddubs(mp_i32x8 x, mp_i32x8 w) {
  const mp_i32x32 p = __builtin_convertvector(__builtin_astype(x, mp_u8x32), mp_i32x32) *
                      __builtin_convertvector(__builtin_astype(w, mp_s8x32), mp_i32x32);
  return p.even + p.odd;
}
#define MP_MADDUBS(x, w) mp_maddubs((x), (w))
#define MP_WIDEN16(p) ((p).even + (p).odd)
#endif
)";

// CUDA: structs of 8 int and 16 short lanes, lane loops (32-bit lanes add in wrapping unsigned
// arithmetic, 16-bit lanes truncate: the same integers as the OpenCL rows while the pair sums fit
// int16); loads assemble words byte by byte (any alignment).
const char* kBytePairProduct16CudaText =
    R"(// Byte pair products: 16-bit lanes x.b(2i)*w.b(2i) + x.b(2i+1)*w.b(2i+1).
struct mp_i32x8 {
  int s[8];
  __device__ __forceinline__ mp_i32x8() {}
  __device__ __forceinline__ mp_i32x8(int x) {
    for (int l = 0; l < 8; ++l) s[l] = x;
  }
};
struct mp_i16x16 {
  short s[16];
  __device__ __forceinline__ mp_i16x16() {}
  __device__ __forceinline__ mp_i16x16(short x) {
    for (int l = 0; l < 16; ++l) s[l] = x;
  }
};
__device__ __forceinline__ mp_i32x8& operator+=(mp_i32x8& a, const mp_i32x8& b) {
  for (int l = 0; l < 8; ++l) a.s[l] = (int)((mp_u32)a.s[l] + (mp_u32)b.s[l]);
  return a;
}
__device__ __forceinline__ mp_i16x16& operator+=(mp_i16x16& a, const mp_i16x16& b) {
  for (int l = 0; l < 16; ++l) a.s[l] = (short)(a.s[l] + b.s[l]);
  return a;
}
template <typename T>
__device__ __forceinline__ mp_i32x8 mp_i32x8_load(const T* p) {
  mp_i32x8 r;
  for (int l = 0; l < 8; ++l) r.s[l] = (int)p[l];
  return r;
}
#define MP_I32X8_LOAD(p) mp_i32x8_load(p)
template <typename T>
__device__ __forceinline__ void mp_i32x8_store(const mp_i32x8& x, T* p) {
  for (int l = 0; l < 8; ++l) p[l] = (T)x.s[l];
}
#define MP_I32X8_STORE(x, p) mp_i32x8_store((x), (p))
__device__ __forceinline__ int mp_i32x8_sum(const mp_i32x8& x) {
  mp_u32 s = 0u;
  for (int l = 0; l < 8; ++l) s += (mp_u32)x.s[l];
  return (int)s;
}
#define MP_I32X8_SUM(x) mp_i32x8_sum(x)
__device__ __forceinline__ mp_i32x8 mp_zip4_u8x8(const mp_u8* p, int ld) {
  mp_i32x8 r;
  for (int l = 0; l < 8; ++l)
    r.s[l] = (int)((mp_u32)p[l] | ((mp_u32)p[ld + l] << 8) | ((mp_u32)p[2 * ld + l] << 16) |
                   ((mp_u32)p[3 * ld + l] << 24));
  return r;
}
#define MP_ZIP4_U8X8(p, ld) mp_zip4_u8x8((p), (ld))
__device__ __forceinline__ int mp_nibbles4(mp_u32 n) {
  return (int)((((n & 0x0f0f0f0fu) ^ 0x08080808u) + 0x78787878u) ^ 0x80808080u);
}
__device__ __forceinline__ mp_i32x8 mp_nibbles32_load(const mp_u8* p) {
  mp_i32x8 r;
  for (int i = 0; i < 4; ++i) {
    const mp_u32 w = (mp_u32)p[4 * i] | ((mp_u32)p[4 * i + 1] << 8) |
                     ((mp_u32)p[4 * i + 2] << 16) | ((mp_u32)p[4 * i + 3] << 24);
    r.s[i] = mp_nibbles4(w);
    r.s[4 + i] = mp_nibbles4(w >> 4);
  }
  return r;
}
#define MP_NIBBLES32_LOAD(p) mp_nibbles32_load(p)
__device__ __forceinline__ mp_i16x16 mp_maddubs(const mp_i32x8& x, const mp_i32x8& w) {
  mp_i16x16 r;
  for (int l = 0; l < 8; ++l) {
    const mp_u32 a = (mp_u32)x.s[l], b = (mp_u32)w.s[l];
    const int lo = (int)(a & 255u) * (int)(mp_i8)(b & 255u) +
                   (int)((a >> 8) & 255u) * (int)(mp_i8)((b >> 8) & 255u);
    const int hi = (int)((a >> 16) & 255u) * (int)(mp_i8)((b >> 16) & 255u) +
                   (int)(a >> 24) * (int)(mp_i8)(b >> 24);
    r.s[2 * l] = (short)lo;
    r.s[2 * l + 1] = (short)hi;
  }
  return r;
}
#define MP_MADDUBS(x, w) mp_maddubs((x), (w))
__device__ __forceinline__ mp_i32x8 mp_widen16(const mp_i16x16& p) {
  mp_i32x8 r;
  for (int l = 0; l < 8; ++l) r.s[l] = (int)p.s[2 * l] + (int)p.s[2 * l + 1];
  return r;
}
#define MP_WIDEN16(p) mp_widen16(p)
)";

// KernelHelper::kByteVectorStore in OpenCL: a vector type declared 1-byte aligned (a typedef may
// lower alignment in Clang, which every OpenCL compiler here is built on) makes the store one
// unaligned move. PoCL 3.1 made every vstore16 / vstore8 of a uchar vector (the int8 depthwise
// and pointwise outputs) a byte move per lane, each lane extracted first; stored this way, the
// int8 depthwise kernels of MobileNet v1 took 22% fewer CPU samples (perf, 2026-11-28). Intel's
// runtime makes vstore<n> one move already.
const char* kByteVectorStoreOpenCLText = R"(// Byte-vector stores to any address in one move.
typedef uchar2 __attribute__((aligned(1))) mp_uchar2_u;
#define MP_STORE_UCHAR2(x, p) (*(__global mp_uchar2_u*)(p) = (x))
typedef uchar4 __attribute__((aligned(1))) mp_uchar4_u;
#define MP_STORE_UCHAR4(x, p) (*(__global mp_uchar4_u*)(p) = (x))
typedef uchar8 __attribute__((aligned(1))) mp_uchar8_u;
#define MP_STORE_UCHAR8(x, p) (*(__global mp_uchar8_u*)(p) = (x))
typedef uchar16 __attribute__((aligned(1))) mp_uchar16_u;
#define MP_STORE_UCHAR16(x, p) (*(__global mp_uchar16_u*)(p) = (x))
typedef ushort2 __attribute__((aligned(1))) mp_ushort2_u;
#define MP_STORE_USHORT2(x, p) (*(__global mp_ushort2_u*)(p) = (x))
typedef ushort4 __attribute__((aligned(1))) mp_ushort4_u;
#define MP_STORE_USHORT4(x, p) (*(__global mp_ushort4_u*)(p) = (x))
typedef ushort8 __attribute__((aligned(1))) mp_ushort8_u;
#define MP_STORE_USHORT8(x, p) (*(__global mp_ushort8_u*)(p) = (x))
typedef ushort16 __attribute__((aligned(1))) mp_ushort16_u;
#define MP_STORE_USHORT16(x, p) (*(__global mp_ushort16_u*)(p) = (x))
#define MP_LOAD_UCHAR4(p) (*(const __global mp_uchar4_u*)(p))
#define MP_LOAD_UCHAR16(p) (*(const __global mp_uchar16_u*)(p))
#define MP_LOAD_USHORT16(p) (*(const __global mp_ushort16_u*)(p))
typedef float16 __attribute__((aligned(4))) mp_float16_u;
#define MP_LOAD_FLOAT16(p) (*(const __global mp_float16_u*)(p))
)";

// clang-format off
const Dialect kOpenCL = {
    Backend::kOpenCL,
    /*kernel=*/"__kernel void",
    /*kernel_vector_width=*/"__kernel __attribute__((vec_type_hint(@O@N))) void",
    // always_inline: PoCL's LLVM kept mp_requant32 a call at each of the int8 convolution's
    // 24+ epilogue sites (16% of ResNet-50's int8 CPU time in the call, 2026-11-24).
    /*device_fn=*/"inline __attribute__((always_inline))",
    /*global_ptr=*/"__global ",
    /*local_ptr=*/"__local ",
    /*shared_decl=*/"__local ",
    /*restrict_kw=*/"restrict",
    /*barrier=*/"barrier(CLK_LOCAL_MEM_FENCE)",
    /*global_id=*/{"get_global_id(0)", "get_global_id(1)", "get_global_id(2)"},
    /*local_id=*/{"get_local_id(0)", "get_local_id(1)", "get_local_id(2)"},
    /*group_id=*/{"get_group_id(0)", "get_group_id(1)", "get_group_id(2)"},
    /*local_size=*/{"get_local_size(0)", "get_local_size(1)", "get_local_size(2)"},
    /*num_groups=*/{"get_num_groups(0)", "get_num_groups(1)", "get_num_groups(2)"},
    /*global_size=*/{"get_global_size(0)", "get_global_size(1)", "get_global_size(2)"},
    /*mul_hi_u64=*/"mul_hi",
    /*atomic_cas_u32=*/"atomic_cmpxchg",
    /*atomic_add_i32=*/"atomic_add",
    /*float_as_uint=*/"as_uint",
    /*uint_as_float=*/"as_float",
    /*rint=*/"rint",
    /*dot4_native=*/kDot4OpenCLText,
    /*dot4_build_options=*/"-cl-std=CL3.0",
    /*select=*/"#define MP_SELECT(a, b, c) select((a), (b), (c))\n",
    /*vector_decl=*/kVectorOpenCLText,
    /*vector_words=*/"",
    /*vector_fma=*/"",
    /*vector_max=*/kVectorMaxOpenCLText,
    /*pair_product16=*/kPairProduct16OpenCLText,
    /*byte_pair_product16=*/kBytePairProduct16OpenCLText,
    /*byte_quad_product16=*/kByteQuadProduct16OpenCLText,
    /*byte_quad_slide16=*/kByteQuadSlide16OpenCLText,
    /*byte_tile_product=*/kByteTileProductOpenCLText,
    /*byte_vector_store=*/kByteVectorStoreOpenCLText,
    /*vector_builtins=*/true,
    /*vector_type=*/"@S@N",
    /*vector_load=*/"vload@N(0, @P)",
    /*vector_load_half=*/"vload_half@N(0, @P)",
    /*vector_store=*/"vstore@N(@X, 0, @P)",
    /*vector_store_half=*/"vstore_half@N_rte(@X, 0, @P)",
    /*vector_convert=*/"convert_@T(@X)",
    /*vector_as=*/"as_@T(@X)",
    /*vector_select=*/"select(@A, @B, @C)",
    /*vector_clamp=*/"clamp(@X, @A, @B)",
    /*vector_abs=*/"abs(@X)",
    /*vector_even=*/"@X.even",
    /*vector_odd=*/"@X.odd",
    /*vector_splat=*/"(@T)(@X)",
    /*vector_of=*/"(@T)(@X)",
    /*vector_lane=*/"@X.s@N",
};

const Dialect kCuda = {
    Backend::kCuda,
    /*kernel=*/"extern \"C\" __global__ void",
    /*kernel_vector_width=*/"extern \"C\" __global__ void",
    /*device_fn=*/"__device__ __forceinline__",
    /*global_ptr=*/"",
    /*local_ptr=*/"",
    /*shared_decl=*/"__shared__ ",
    /*restrict_kw=*/"__restrict__",
    /*barrier=*/"__syncthreads()",
    /*global_id=*/{"(int)(blockIdx.x * blockDim.x + threadIdx.x)",
                   "(int)(blockIdx.y * blockDim.y + threadIdx.y)",
                   "(int)(blockIdx.z * blockDim.z + threadIdx.z)"},
    /*local_id=*/{"(int)threadIdx.x", "(int)threadIdx.y", "(int)threadIdx.z"},
    /*group_id=*/{"(int)blockIdx.x", "(int)blockIdx.y", "(int)blockIdx.z"},
    /*local_size=*/{"(int)blockDim.x", "(int)blockDim.y", "(int)blockDim.z"},
    /*num_groups=*/{"(int)gridDim.x", "(int)gridDim.y", "(int)gridDim.z"},
    /*global_size=*/{"(int)(gridDim.x * blockDim.x)", "(int)(gridDim.y * blockDim.y)",
                     "(int)(gridDim.z * blockDim.z)"},
    /*mul_hi_u64=*/"__umul64hi",
    /*atomic_cas_u32=*/"atomicCAS",
    /*atomic_add_i32=*/"atomicAdd",
    /*float_as_uint=*/"__float_as_uint",
    /*uint_as_float=*/"__uint_as_float",
    /*rint=*/"rintf",
    /*dot4_native=*/kDot4CudaText,
    /*dot4_build_options=*/"",
    /*select=*/"#define MP_SELECT(a, b, c) ((c) ? (b) : (a))\n",
    /*vector_decl=*/kVectorCudaText,
    /*vector_words=*/kVectorWordsCudaText,
    /*vector_fma=*/kVectorFmaCudaText,
    /*vector_max=*/kVectorMaxCudaText,
    /*pair_product16=*/kPairProduct16CudaText,
    /*byte_pair_product16=*/kBytePairProduct16CudaText,
    /*byte_quad_product16=*/kByteQuadProduct16CudaText,
    /*byte_quad_slide16=*/nullptr,
    /*byte_tile_product=*/nullptr,
    /*byte_vector_store=*/nullptr,
    /*vector_builtins=*/false,
    // The vector words of OpenCL C have no row here yet: CUDA's vectors are AddVector's structs.
    /*vector_type=*/nullptr,
    /*vector_load=*/nullptr,
    /*vector_load_half=*/nullptr,
    /*vector_store=*/nullptr,
    /*vector_store_half=*/nullptr,
    /*vector_convert=*/nullptr,
    /*vector_as=*/nullptr,
    /*vector_select=*/nullptr,
    /*vector_clamp=*/nullptr,
    /*vector_abs=*/nullptr,
    /*vector_even=*/nullptr,
    /*vector_odd=*/nullptr,
    /*vector_splat=*/nullptr,
    /*vector_of=*/nullptr,
    /*vector_lane=*/nullptr,
};
// clang-format on

}  // namespace

const Dialect& Dialect::For(Backend backend) {
  // One case per backend, no default: a backend added to the enum without a row is a compiler
  // warning here and an error at run time, never another dialect's text.
  switch (backend) {
    case Backend::kOpenCL:
      return kOpenCL;
    case Backend::kCuda:
      return kCuda;
  }
  throw std::invalid_argument("codegen: no dialect row for backend " +
                              std::to_string(static_cast<int>(backend)));
}

}  // namespace mpcaffe
