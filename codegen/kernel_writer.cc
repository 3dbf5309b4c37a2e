// codegen/kernel_writer.cc — the dialect table and the text assembly of KernelWriter.
#include "codegen/kernel_writer.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "device/settings.h"

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
// same integers. OpenCL: LLVM (PoCL's 15) does not form vpmaddwd from a portable form, so
// AVX2 targets call the builtin. Other targets (Intel's CPU runtime compiles for a SPIR target,
// without x86 built-ins) take the portable form, spelled as the products of all 16 lanes
// widened, then their even + odd lanes: Intel's runtime 2026.2 (LLVM 23) makes that one
// vpdpwssd (AVX-512 VNNI) per MP_MADD16, where the former spelling, products of the .even
// lanes plus products of the .odd lanes, became two vpdpwssd on masked and shifted copies
// (dumped with CL_CONFIG_DUMP_DISASSEMBLY=True, 2026-11-24).
const char* kPairProduct16OpenCLText =
    R"(// 16-bit pair products: lanes x.s(2i)*y.s(2i) + x.s(2i+1)*y.s(2i+1).
typedef short16 mp_short16;
#if defined(__AVX2__)
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
#define MP_SHORT16_LOAD(p) vload16(0, (p))
typedef int8 mp_pair_acc;
#define MP_PAIR_FLUSH(acc, lo, hi) ((acc) += (convert_long8(hi) << 8) + convert_long8(lo))
#if defined(__AVX512BW__)
// 32 lanes in one 512-bit vpmaddwd: 16 int32 pair sums.
typedef short mp_short32 __attribute__((ext_vector_type(32)));
#define MP_MADD32(x, y) __builtin_ia32_pmaddwd512((x), (y))
#define MP_PAIR32_WORD(w) __builtin_astype((int16)(w), mp_short32)
#define MP_ZIP32(p0, p1) __builtin_convertvector(__builtin_shufflevector(vload16(0, (p0)), vload16(0, (p1)), 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), mp_short32)
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
#define MP_SHORT16_LOAD(p) mp_short16_from(p)
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
#if defined(__AVX2__)
typedef short16 mp_i16x16;
typedef char mp_char32 __attribute__((ext_vector_type(32)));
#define MP_MADDUBS(x, w) __builtin_ia32_pmaddubsw256(__builtin_astype((x), mp_char32), __builtin_astype((w), mp_char32))
#define MP_WIDEN16(p) __builtin_ia32_pmaddwd256((p), (short16)(1))
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
)";

// clang-format off
const Dialect kOpenCL = {
    Backend::kOpenCL,
    /*kernel=*/"__kernel void",
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
    /*byte_vector_store=*/kByteVectorStoreOpenCLText,
    /*vector_builtins=*/true,
};

const Dialect kCuda = {
    Backend::kCuda,
    /*kernel=*/"extern \"C\" __global__ void",
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
    /*byte_vector_store=*/nullptr,
    /*vector_builtins=*/false,
};
// clang-format on

// Helper functions, written once with placeholders.
const char* kRequantizeText = R"(// Fixed-point requantization with one rounding (quant/fixed_point.h is the host reference).
$device_fn mp_i64 mp_requant64(mp_i64 acc, int mult, int shift) {
  int right = 31 - shift;
  int negative = $negative_i64(acc);
  mp_u64 a = negative ? (mp_u64)0 - (mp_u64)acc : (mp_u64)acc;
  mp_u64 m = (mp_u64)(mp_u32)mult;
  mp_u64 lo = a * m;
  mp_u64 hi = $mul_hi_u64(a, m);
  mp_u64 r;
  int overflow = 0;
  if (right <= 0) {
    r = lo;
    overflow = hi != 0;
  } else if (right >= 128) {
    r = 0;
  } else {
    if (right - 1 < 64) {
      mp_u64 nudge = (mp_u64)1 << (right - 1);
      mp_u64 sum = lo + nudge;
      hi += sum < lo ? 1 : 0;
      lo = sum;
    } else {
      hi += (mp_u64)1 << (right - 1 - 64);
    }
    if (right < 64) {
      r = (hi << (64 - right)) | (lo >> right);
      overflow = (hi >> right) != 0;
    } else {
      r = hi >> (right - 64);
    }
  }
  const mp_u64 limit = (mp_u64)0x7fffffffffffffffULL;
  if (overflow || r > limit) r = limit;
  return negative ? -(mp_i64)r : (mp_i64)r;
}
$device_fn int mp_requant32(int acc, int mult, int shift) {
  int right = 31 - shift;
  mp_i64 r;
  if (right >= 1 && right <= 62) {
    // |acc|·mult < 2^63 and the nudge ≤ 2^61: the 64-bit sum is exact (the int8 epilogue's
    // usual case, without mp_requant64's 128-bit product).
    mp_i64 p = (mp_i64)acc * (mp_i64)(mp_u32)mult;
    mp_u64 a = p < 0 ? (mp_u64)0 - (mp_u64)p : (mp_u64)p;
    mp_u64 q = (a + ((mp_u64)1 << (right - 1))) >> right;
    r = p < 0 ? -(mp_i64)q : (mp_i64)q;
  } else {
    r = mp_requant64((mp_i64)acc, mult, shift);
  }
  return r > 2147483647 ? 2147483647 : (r < -2147483647 - 1 ? -2147483647 - 1 : (int)r);
}
)";

// $long_of_int where KernelTarget::long_compare_of_int_broken (Mesa 22.3's rusticl): an int
// widened by a cast or convert_long compares wrongly with constants there, the same value
// assembled from its two halves by upsample (OpenCL C: (long)hi << 32 | lo) compares right.
const char* kLongOfIntText = R"(// mp_long_of_int: ints widened so that compares of them come out right.
#define MP_LONG_OF_INT(T, L, U) \
  inline __attribute__((overloadable, always_inline)) L mp_long_of_int(T x) { \
    return upsample(x >> 31, U(x)); \
  }
MP_LONG_OF_INT(int, long, as_uint)
MP_LONG_OF_INT(int2, long2, as_uint2)
MP_LONG_OF_INT(int4, long4, as_uint4)
MP_LONG_OF_INT(int8, long8, as_uint8)
MP_LONG_OF_INT(int16, long16, as_uint16)
#undef MP_LONG_OF_INT
)";

const char* kAtomicAddF32Text = R"(// Float atomic add as a compare-and-swap loop on the word's bits.
$device_fn void mp_atomic_add_f32($global float* p, float v) {
  $global mp_u32* word = ($global mp_u32*)p;
  // The first read is atomic too (CAS of 0 by 0: no change): a plain load races with other
  // work-items' CAS (Oclgrind --data-races).
  mp_u32 expected = $atomic_cas_u32(word, 0u, 0u);
  for (;;) {
    mp_u32 desired = $float_as_uint($uint_as_float(expected) + v);
    mp_u32 seen = $atomic_cas_u32(word, expected, desired);
    if (seen == expected) break;
    expected = seen;
  }
}
)";

const char* kDot4PortableText = R"(// 4-way byte dot products: acc + sum_k a.byte[k] * b.byte[k].
$device_fn int mp_dot4_u8s8(mp_u32 a, mp_u32 b, int acc) {
  for (int k = 0; k < 32; k += 8)
    acc += (int)((a >> k) & 0xffu) * (int)(mp_i8)((b >> k) & 0xffu);
  return acc;
}
$device_fn int mp_dot4_s8s8(mp_u32 a, mp_u32 b, int acc) {
  for (int k = 0; k < 32; k += 8)
    acc += (int)(mp_i8)((a >> k) & 0xffu) * (int)(mp_i8)((b >> k) & 0xffu);
  return acc;
}
$device_fn int mp_dot4_u8u8(mp_u32 a, mp_u32 b, int acc) {
  for (int k = 0; k < 32; k += 8)
    acc += (int)((a >> k) & 0xffu) * (int)((b >> k) & 0xffu);
  return acc;
}
)";

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

const Dialect& Dialect::For(Backend backend) {
  return backend == Backend::kOpenCL ? kOpenCL : kCuda;
}

KernelTarget KernelTarget::Of(const Device& device) {
  KernelTarget t;
  t.backend = device.backend();
  // MPCAFFE_FP16_ARITH=0: fp16 as storage only, so native half and fp16-in-float can be
  // compared on one device.
  t.fp16_arith = device.info().fp16 && GetSettings().fp16_arith != "0";
  t.dot_product = device.info().dot_product;
  t.long_compare_of_int_broken = device.info().long_compare_of_int_broken;
  return t;
}

std::string KernelTarget::Dot4BuildOptions() const {
  return dot_product ? Dialect::For(backend).dot4_build_options : "";
}

KernelTarget KernelTarget::Cuda(int cc) {
  KernelTarget t;
  t.backend = Backend::kCuda;
  t.fp16_arith = cc >= 53;
  t.dot_product = cc >= 61;
  return t;
}

KernelBuilder& KernelBuilder::Value(const std::string& type, const std::string& name) {
  args_.push_back({Kind::kValue, type, name});
  return *this;
}
KernelBuilder& KernelBuilder::In(const std::string& type, const std::string& name) {
  args_.push_back({Kind::kIn, type, name});
  return *this;
}
KernelBuilder& KernelBuilder::Out(const std::string& type, const std::string& name) {
  args_.push_back({Kind::kOut, type, name});
  return *this;
}
KernelBuilder& KernelBuilder::LocalPtr(const std::string& type, const std::string& name) {
  args_.push_back({Kind::kLocal, type, name});
  return *this;
}
KernelBuilder& KernelBuilder::Body(const std::string& text) {
  body_ += text;
  return *this;
}

KernelWriter::KernelWriter(const KernelTarget& target, std::string family)
    : target_(target), dialect_(Dialect::For(target.backend)), family_(std::move(family)) {
  const bool named = !family_.empty() && std::all_of(family_.begin(), family_.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (!named)
    throw std::invalid_argument("kernel family \"" + family_ +
                                "\": a name of lower-case letters, digits and '_'");
}

namespace {
const char kFamilyWord[] = "), kernel family ";

std::mutex& FamiliesMutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& Families() {
  static std::set<std::string> families;
  return families;
}
}  // namespace

std::vector<std::string> KernelWriter::GeneratedFamilies() {
  std::lock_guard<std::mutex> lock(FamiliesMutex());
  return {Families().begin(), Families().end()};
}

std::string KernelWriter::FamilyOf(const std::string& source) {
  const size_t line_end = source.find('\n');
  const size_t at = source.substr(0, line_end).find(kFamilyWord);
  if (at == std::string::npos) return "";
  const size_t from = at + sizeof(kFamilyWord) - 1;
  const size_t to = source.find('.', from);
  return to == std::string::npos || to > line_end ? "" : source.substr(from, to - from);
}

KernelWriter& KernelWriter::AddType(const std::string& a, DataType type) {
  const DataTypeTraits& t = TraitsOf(type);
  const bool cuda = target_.backend == Backend::kCuda;
  std::string block = "// " + a + ": " + t.name + "\n";
  block += std::string("typedef ") + TraitsOf(t.storage).alias + " " + a + ";\n";
  std::string compute, load, store;
  if (type == DataType::kFloat32) {
    compute = "float";
    load = "((p)[i])";
    store = "((p)[i] = (v))";
  } else if (type == DataType::kFloat16) {
    uses_fp16_ = true;
    if (cuda) {
      compute = target_.fp16_arith ? "__half" : "float";
      load = target_.fp16_arith ? "((p)[i])" : "__half2float((p)[i])";
      store = target_.fp16_arith ? "((p)[i] = (v))" : "((p)[i] = __float2half_rn(v))";
    } else if (target_.fp16_arith) {
      compute = "half";
      load = "((p)[i])";
      store = "((p)[i] = (v))";
    } else {
      // No cl_khr_fp16: half is storage only; vload_half/vstore_half are core OpenCL 1.2.
      compute = "float";
      load = "vload_half((i), (p))";
      store = "vstore_half_rte((v), (i), (p))";
    }
  } else {
    compute = "int";
    load = "((int)(p)[i])";
    store = "((p)[i] = (" + a + ")(v))";
  }
  block += "typedef " + compute + " " + a + "_c;\n";
  select_masks_.emplace_back(a, compute == "half" || compute == "__half" ? "short" : "int");
  block += std::string("typedef ") + TraitsOf(t.difftype).alias + " " + a + "_diff;\n";
  block += std::string("typedef ") + TraitsOf(t.acctype).alias + " " + a + "_acc;\n";
  block += std::string("typedef ") + TraitsOf(t.multtype).alias + " " + a + "_mult;\n";
  block += "#define " + a + "_LOAD(p, i) " + load + "\n";
  block += "#define " + a + "_STORE(p, i, v) " + store + "\n";
  if (t.quantized) {
    block += "#define " + a + "_QMIN " + std::to_string(t.qmin) + "\n";
    block += "#define " + a + "_QMAX " + std::to_string(t.qmax) + "\n";
    block += "#define " + a + "_SAT(v) " + a + "_SAT_FROM(v, " + a + "_QMIN)\n";
    block += "#define " + a + "_SAT_FROM(v, lo) ((v) < (lo) ? (lo) : ((v) > " + a + "_QMAX ? " +
             a + "_QMAX : (v)))\n";
  }
  type_blocks_.push_back(block);
  return *this;
}

KernelWriter& KernelWriter::AddVector(const std::string& alias, Scalar s, int lanes,
                                      bool with_max) {
  if (lanes != 2 && lanes != 4 && lanes != 8 && lanes != 16)
    throw std::invalid_argument("vector " + alias + ": " + std::to_string(lanes) +
                                " lanes (2, 4, 8 or 16)");
  const ScalarTraits& t = TraitsOf(s);
  if (s == Scalar::kF16) uses_fp16_ = true;
  std::string text = std::string("// ") + alias + ": " + std::to_string(lanes) + " x " + t.alias +
                     "\n" + dialect_.vector_decl;
  if (t.is_float) text += dialect_.vector_fma;
  if (with_max) text += dialect_.vector_max;
  // Vectors of whole 16-byte words: aligned, with word loads and stores where the dialect has
  // them (Dialect::vector_words).
  const int words = t.bits * lanes % 128 == 0 ? t.bits * lanes / 128 : 0;
  if (words) text += dialect_.vector_words;
  auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  };
  replace("@A", words && *dialect_.vector_words ? "alignas(16) " : "");
  replace("@W", std::to_string(words));
  replace("@V", alias);
  replace("@S", t.alias);
  replace("@O", t.opencl);
  replace("@N", std::to_string(lanes));
  type_blocks_.push_back(text);
  return *this;
}

KernelWriter& KernelWriter::UseRequant(DataType type) {
  if (!IsQuantized(type))
    throw std::invalid_argument(std::string("MP_REQUANT: ") + Name(type) + " is not quantized");
  UseHelper(KernelHelper::kRequantize);
  const std::string define = "#define MP_REQUANT(acc, m, s) ";
  for (const auto& d : defines_)
    if (d.compare(0, define.size(), define) == 0) return *this;
  // int8q's result is an int widened for the caller's clamps: $long_of_int.
  return Define("MP_REQUANT(acc, m, s)",
                TraitsOf(type).acctype == Scalar::kI64
                    ? "mp_requant64((mp_i64)(acc), m, s)"
                    : Expand("$long_of_int(mp_requant32((int)(acc), m, s))"));
}

KernelWriter& KernelWriter::Define(const std::string& name, const std::string& value) {
  defines_.push_back("#define " + name + " " + value + "\n");
  return *this;
}

KernelWriter& KernelWriter::UseHelper(KernelHelper helper) {
  if (std::find(helpers_.begin(), helpers_.end(), helper) == helpers_.end())
    helpers_.push_back(helper);
  return *this;
}

KernelBuilder& KernelWriter::Kernel(const std::string& name) {
  kernels_.emplace_back();
  kernels_.back().name_ = name;
  return kernels_.back();
}

std::string KernelWriter::Expand(const std::string& text) const {
  const Dialect& d = dialect_;
  auto dim_word = [&](const std::array<const char*, 3>& words, char digit) -> std::string {
    if (digit < '0' || digit > '2') throw std::invalid_argument("dimension must be 0, 1 or 2");
    return words[digit - '0'];
  };
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '$') {
      out += text[i++];
      continue;
    }
    size_t j = i + 1;
    while (j < text.size() && IsIdentChar(text[j])) ++j;
    const std::string word = text.substr(i + 1, j - i - 1);
    // Parenthesized arguments, if any.
    std::vector<std::string> args;
    size_t end = j;
    if (j < text.size() && text[j] == '(') {
      int depth = 0;
      std::string current;
      for (end = j; end < text.size(); ++end) {
        char c = text[end];
        if (c == '(') {
          if (depth++ > 0) current += c;
        } else if (c == ')') {
          if (--depth == 0) {
            args.push_back(current);
            ++end;
            break;
          }
          current += c;
        } else if (c == ',' && depth == 1) {
          args.push_back(current);
          current.clear();
        } else {
          current += c;
        }
      }
      for (auto& a : args) {
        a.erase(0, a.find_first_not_of(' '));
        a.erase(a.find_last_not_of(' ') + 1);
      }
    }
    auto one_dim = [&](const std::array<const char*, 3>& words) {
      if (args.size() != 1 || args[0].size() != 1)
        throw std::invalid_argument("$" + word + " takes one dimension argument");
      out += dim_word(words, args[0][0]);
      i = end;
    };
    if (word == "global_id") {
      one_dim(d.global_id);
    } else if (word == "local_id") {
      one_dim(d.local_id);
    } else if (word == "group_id") {
      one_dim(d.group_id);
    } else if (word == "local_size") {
      one_dim(d.local_size);
    } else if (word == "num_groups") {
      one_dim(d.num_groups);
    } else if (word == "global_size") {
      one_dim(d.global_size);
    } else if (word == "long_of_int") {
      // KernelTarget::long_compare_of_int_broken: see kLongOfIntText.
      if (args.empty() || args.size() > 2)
        throw std::invalid_argument("$long_of_int takes (x) or (x, lanes)");
      args[0] = Expand(args[0]);
      if (target_.long_compare_of_int_broken)
        out += "mp_long_of_int(" + args[0] + ")";
      else if (args.size() == 1)
        out += "(mp_i64)" + args[0];
      else if (d.vector_builtins)
        out += "convert_long" + args[1] + "(" + args[0] + ")";
      else
        throw std::invalid_argument("$long_of_int(x, lanes): " +
                                    std::string(BackendName(target_.backend)) +
                                    " has no built-in vectors");
      i = end;
    } else if (word == "negative_i64") {
      if (args.size() != 1) throw std::invalid_argument("$negative_i64 takes (x)");
      args[0] = Expand(args[0]);
      out += target_.long_compare_of_int_broken ? "(int)((mp_u64)(" + args[0] + ") >> 63)"
                                                : args[0] + " < 0";
      i = end;
    } else if (word == "loop") {
      if (args.size() != 2) throw std::invalid_argument("$loop takes (index, count)");
      out += "for (int " + args[0] + " = " + d.global_id[0] + "; " + args[0] + " < " + args[1] +
             "; " + args[0] + " += " + d.global_size[0] + ")";
      i = end;
    } else {
      std::string replacement;
      if (word == "barrier") replacement = d.barrier;
      else if (word == "global") replacement = d.global_ptr;
      else if (word == "local") replacement = d.local_ptr;
      else if (word == "shared") replacement = d.shared_decl;
      else if (word == "device_fn") replacement = d.device_fn;
      else if (word == "mul_hi_u64") replacement = d.mul_hi_u64;
      else if (word == "atomic_cas_u32") replacement = d.atomic_cas_u32;
      else if (word == "atomic_add_i32") replacement = d.atomic_add_i32;
      else if (word == "float_as_uint") replacement = d.float_as_uint;
      else if (word == "uint_as_float") replacement = d.uint_as_float;
      else if (word == "rint") replacement = d.rint;
      else throw std::invalid_argument("unknown kernel placeholder $" + word);
      out += replacement;
      i = j;
    }
  }
  return out;
}

std::string KernelWriter::Preamble() const {
  const bool cuda = target_.backend == Backend::kCuda;
  std::string p = "// Generated by mpcaffe codegen (" + std::string(BackendName(target_.backend)) +
                  kFamilyWord + family_ + ".\n";
  if (uses_fp16_) {
    if (cuda)
      p += "#include <cuda_fp16.h>\n";
    else if (target_.fp16_arith)
      p += "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n";
  }
  // Portable scalar names from the trait table.
  for (Scalar s : {Scalar::kF16, Scalar::kU8, Scalar::kI8, Scalar::kU16, Scalar::kI16,
                   Scalar::kU32, Scalar::kI64, Scalar::kU64}) {
    if (s == Scalar::kF16 && !uses_fp16_) continue;
    const ScalarTraits& t = TraitsOf(s);
    p += std::string("typedef ") + (cuda ? t.cuda : t.opencl) + " " + t.alias + ";\n";
  }
  if (target_.long_compare_of_int_broken && target_.backend == Backend::kOpenCL)
    p += kLongOfIntText;
  for (const auto& block : type_blocks_) p += block;
  for (const auto& define : defines_) p += define;
  // A helper only some dialects have: its row's text, or an error naming the backend.
  auto dialect_row = [&](const char* text, const char* what) {
    if (!text)
      throw std::invalid_argument(std::string(what) + " have no " + BackendName(target_.backend) +
                                  " form");
    return Expand(text);
  };
  for (KernelHelper h : helpers_) {
    switch (h) {
      case KernelHelper::kRequantize: p += Expand(kRequantizeText); break;
      case KernelHelper::kAtomicAddF32: p += Expand(kAtomicAddF32Text); break;
      case KernelHelper::kDot4:
        p += Expand(target_.dot_product ? dialect_.dot4_native : kDot4PortableText);
        break;
      case KernelHelper::kPairProduct16:
        p += dialect_row(dialect_.pair_product16, "16-bit pair products");
        break;
      case KernelHelper::kBytePairProduct16:
        p += Expand(dialect_.byte_pair_product16);
        break;
      case KernelHelper::kByteVectorStore:
        p += dialect_row(dialect_.byte_vector_store, "byte-vector stores");
        break;
      case KernelHelper::kSelect:
        p += dialect_.select;
        for (const auto& [alias, mask] : select_masks_)
          p += "#define " + alias + "_SELECT(a, b, c) MP_SELECT((a), (b), (" + mask + ")(c))\n";
        break;
    }
  }
  return p;
}

std::string KernelWriter::KernelText(const KernelBuilder& k) const {
  const Dialect& d = dialect_;
  const bool opencl = target_.backend == Backend::kOpenCL;
  std::string params, prologue;
  bool has_local = false;
  for (const auto& a : k.args_) {
    if (!params.empty()) params += ",\n    ";
    switch (a.kind) {
      case KernelBuilder::Kind::kValue:
        params += "const " + a.type + " " + a.name;
        break;
      case KernelBuilder::Kind::kIn:
      case KernelBuilder::Kind::kOut: {
        const std::string cq = a.kind == KernelBuilder::Kind::kIn ? "const " : "";
        const std::string ptr = std::string(d.global_ptr) + cq + a.type + "* " + d.restrict_kw;
        if (opencl) {
          params += ptr + " " + a.name + "_base, const ulong " + a.name + "_off";
          prologue += "  " + ptr + " " + a.name + " = " + a.name + "_base + " + a.name + "_off;\n";
        } else {
          params += ptr + " " + a.name;
        }
        break;
      }
      case KernelBuilder::Kind::kLocal:
        if (opencl) {
          params += std::string(d.local_ptr) + a.type + "* " + a.name;
        } else {
          has_local = true;
          params += "const unsigned int " + a.name + "_off";
          prologue += "  " + a.type + "* " + a.name + " = (" + a.type + "*)(mp_dyn_smem + " +
                      a.name + "_off);\n";
        }
        break;
    }
  }
  if (has_local)
    prologue = "  extern __shared__ __align__(16) unsigned char mp_dyn_smem[];\n" + prologue;
  return std::string(d.kernel) + " " + k.name_ + "(\n    " + params + ") {\n" + prologue +
         Expand(k.body_) + "}\n";
}

std::string KernelWriter::Source() const {
  {
    std::lock_guard<std::mutex> lock(FamiliesMutex());
    Families().insert(family_);
  }
  std::string s = Preamble();
  for (const auto& k : kernels_) s += "\n" + KernelText(k);
  return s;
}

}  // namespace mpcaffe
