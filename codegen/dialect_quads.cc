// codegen/dialect_quads.cc — the dialects' texts of the byte quads: their products
// (KernelHelper::kByteQuadProduct16) and sliding windows (KernelHelper::kByteQuadSlide16), kept
// apart from the dialect table in codegen/dialect.cc.
#include "codegen/dialect_texts.h"

namespace mpcaffe {

// Unsigned × signed byte quad products (KernelHelper::kByteQuadProduct16), one row per dialect,
// the same integers in every form. OpenCL: vpdpbusd where the device compiles it in a helper
// function (MP_BYTE_QUADS_VNNI: PoCL 3.1's LLVM 15 targets skylake-avx512 on this Zen 4 and
// takes no -mavx512vnni; the target attribute works on a noinline function, and aborts the
// process with "LLVM ERROR: Cannot select" on code inlined into the work-group function, so
// MP_QUAD_FN is never spelled inline in that form). The non-saturating vpdpbusd: sums wrap like
// int32, as the portable form's unsigned adds do. MPCAFFE_ISA below the CPU's level (the
// portable and 256-bit forms) leaves the built-in out. MP_NIBBLES64_LOAD (the 4-bit weights'
// quad tile) spreads each nibble to a byte as the pair products' MP_NIBBLES32 does.
const char* const kByteQuadProduct16OpenCLText =
    R"(// Byte quad products: 32-bit lanes acc.s(i) + x.b(4i)*w.b(4i) + ... + x.b(4i+3)*w.b(4i+3).
typedef int16 mp_i32x16;
#if defined(MP_BYTE_QUADS_VNNI) && !defined(MP_PORTABLE_FORMS) && !defined(MP_NO_512BIT_FORMS)
#define MP_QUAD_FN static __attribute__((target("avx512vnni,avx512f"), noinline))
#define MP_DPBUSD16(acc, x, w) as_int16(__builtin_ia32_vpdpbusd512((acc), (x), (w)))
#define MP_DPWSSD16(acc, x, w) as_int16(__builtin_ia32_vpdpwssd512((acc), (x), (w)))
#else
#define MP_QUAD_FN $device_fn
$device_fn mp_i32x16 mp_dpwssd16(mp_i32x16 acc, mp_i32x16 x, mp_i32x16 w) {
  const uint16 p = as_uint16(((x << 16) >> 16) * ((w << 16) >> 16)) + as_uint16((x >> 16) * (w >> 16));
  return as_int16(as_uint16(acc) + p);
}
#define MP_DPWSSD16(acc, x, w) mp_dpwssd16((acc), (x), (w))
$device_fn mp_i32x16 mp_dpbusd16(mp_i32x16 acc, mp_i32x16 x, mp_i32x16 w) {
  const uint16 wu = as_uint16(w);
  const int16 p = (x & 0xff) * (as_int16(wu << 24) >> 24) +
                  ((x >> 8) & 0xff) * (as_int16(wu << 16) >> 24) +
                  ((x >> 16) & 0xff) * (as_int16(wu << 8) >> 24) +
                  ((x >> 24) & 0xff) * (w >> 24);
  return as_int16(as_uint16(acc) + as_uint16(p));
}
#define MP_DPBUSD16(acc, x, w) mp_dpbusd16((acc), (x), (w))
#endif
$device_fn mp_i32x16 mp_zip4x16(const $global mp_u8* p0, const $global mp_u8* p1,
                                const $global mp_u8* p2, const $global mp_u8* p3) {
  return as_int16(convert_uint16(vload16(0, p0)) | (convert_uint16(vload16(0, p1)) << 8) |
                  (convert_uint16(vload16(0, p2)) << 16) | (convert_uint16(vload16(0, p3)) << 24));
}
#define MP_ZIP4X16(p0, p1, p2, p3) mp_zip4x16((p0), (p1), (p2), (p3))
#define MP_QUAD_WORD(w) ((mp_i32x16)(w))
#define MP_QUAD_LOAD(p) vload16(0, (p))
#define MP_QUAD_STORE(x, p) vstore16((x), 0, (p))
typedef int16 __attribute__((aligned(1))) mp_i32x16_u;
typedef uint8 __attribute__((aligned(1))) mp_u32x8_u;
#define MP_QUAD_LOAD_BYTES(p) (*(const $global mp_i32x16_u*)(p))
#define MP_QUAD_XOR(x, w) ((x) ^ (mp_i32x16)(w))
$device_fn int mp_quad_sum(mp_i32x16 x) {
  const uint8 h = as_uint8(x.lo) + as_uint8(x.hi);
  const uint4 q = h.lo + h.hi;
  return (int)(q.x + q.y + q.z + q.w);
}
#define MP_QUAD_SUM(x) mp_quad_sum(x)
$device_fn mp_i64 mp_quad_sum64(mp_i32x16 x) {
  const long8 h = convert_long8(x.lo) + convert_long8(x.hi);
  const long4 q = h.lo + h.hi;
  return q.x + q.y + q.z + q.w;
}
#define MP_QUAD_SUM64(x) mp_quad_sum64(x)
// The 32 bytes at p in lanes 0..7, zeros above; a word in lanes 0..7, zeros above.
#define MP_QUAD_LOAD_HALF_BYTES(p) ((mp_i32x16)(as_int8(*(const $global mp_u32x8_u*)(p)), (int8)(0)))
#define MP_QUAD_HALF_WORD(w) ((mp_i32x16)((int8)(w), (int8)(0)))
#define MP_QUAD_AND(x, w) ((x) & (mp_i32x16)(w))
#define MP_QUAD_SRL(x, n) as_int16(as_uint16(x) >> (uint)(n))
$device_fn mp_i32x16 mp_nibbles64(uint8 p) {
  const uint16 n = (uint16)(p, p >> (uint8)(4)) & (uint16)(0x0f0f0f0fu);
  return as_int16(((n ^ (uint16)(0x08080808u)) + (uint16)(0x78787878u)) ^ (uint16)(0x80808080u));
}
#define MP_NIBBLES64_LOAD(p) mp_nibbles64(*(const $global mp_u32x8_u*)(p))
#define MP_NIBBLES64_LOAD_P(p) mp_nibbles64(*(const mp_u32x8_u*)(p))
)";

// CUDA: a struct of 16 int lanes; dp4a (unsigned × signed bytes, wrapping int32) per lane on
// sm_61+, the same integers in plain arithmetic below. Compiled by NVRTC in the tests, never run
// (no NVIDIA GPU on the build machine).
const char* const kByteQuadProduct16CudaText =
    R"(// Byte quad products: 32-bit lanes acc.s[i] + x.b(4i)*w.b(4i) + ... + x.b(4i+3)*w.b(4i+3).
struct mp_i32x16 {
  int s[16];
  __device__ __forceinline__ mp_i32x16() {}
  __device__ __forceinline__ mp_i32x16(int x) {
    for (int l = 0; l < 16; ++l) s[l] = x;
  }
};
#define MP_QUAD_FN __device__ __forceinline__
__device__ __forceinline__ mp_i32x16 mp_dpbusd16(mp_i32x16 acc, const mp_i32x16& x,
                                                 const mp_i32x16& w) {
  for (int l = 0; l < 16; ++l) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(acc.s[l]) : "r"(x.s[l]), "r"(w.s[l]), "r"(acc.s[l]));
#else
    mp_u32 a = (mp_u32)acc.s[l];
    for (int k = 0; k < 32; k += 8)
      a += (mp_u32)((int)(((mp_u32)x.s[l] >> k) & 255u) * (int)(mp_i8)(((mp_u32)w.s[l] >> k) & 255u));
    acc.s[l] = (int)a;
#endif
  }
  return acc;
}
#define MP_DPBUSD16(acc, x, w) mp_dpbusd16((acc), (x), (w))
__device__ __forceinline__ mp_i32x16 mp_dpwssd16(mp_i32x16 acc, const mp_i32x16& x,
                                                 const mp_i32x16& w) {
  for (int l = 0; l < 16; ++l)
    acc.s[l] = (int)((mp_u32)acc.s[l] + (mp_u32)((int)(short)x.s[l] * (short)w.s[l]) +
                     (mp_u32)((x.s[l] >> 16) * (w.s[l] >> 16)));
  return acc;
}
#define MP_DPWSSD16(acc, x, w) mp_dpwssd16((acc), (x), (w))
__device__ __forceinline__ mp_i32x16 mp_zip4x16(const mp_u8* p0, const mp_u8* p1, const mp_u8* p2,
                                                const mp_u8* p3) {
  mp_i32x16 r;
  for (int l = 0; l < 16; ++l)
    r.s[l] = (int)((mp_u32)p0[l] | ((mp_u32)p1[l] << 8) | ((mp_u32)p2[l] << 16) |
                   ((mp_u32)p3[l] << 24));
  return r;
}
#define MP_ZIP4X16(p0, p1, p2, p3) mp_zip4x16((p0), (p1), (p2), (p3))
#define MP_QUAD_WORD(w) mp_i32x16((int)(w))
__device__ __forceinline__ mp_i32x16 mp_quad_load(const int* p) {
  mp_i32x16 r;
  for (int l = 0; l < 16; ++l) r.s[l] = p[l];
  return r;
}
#define MP_QUAD_LOAD(p) mp_quad_load(p)
__device__ __forceinline__ void mp_quad_store(const mp_i32x16& x, int* p) {
  for (int l = 0; l < 16; ++l) p[l] = x.s[l];
}
#define MP_QUAD_STORE(x, p) mp_quad_store((x), (p))
__device__ __forceinline__ mp_i32x16 mp_quad_load_bytes(const mp_u8* p) {
  mp_i32x16 r;
  for (int l = 0; l < 16; ++l)
    r.s[l] = (int)((mp_u32)p[4 * l] | ((mp_u32)p[4 * l + 1] << 8) |
                   ((mp_u32)p[4 * l + 2] << 16) | ((mp_u32)p[4 * l + 3] << 24));
  return r;
}
#define MP_QUAD_LOAD_BYTES(p) mp_quad_load_bytes((const mp_u8*)(p))
__device__ __forceinline__ mp_i32x16 mp_quad_xor(mp_i32x16 x, int w) {
  for (int l = 0; l < 16; ++l) x.s[l] ^= w;
  return x;
}
#define MP_QUAD_XOR(x, w) mp_quad_xor((x), (int)(w))
__device__ __forceinline__ int mp_quad_sum(const mp_i32x16& x) {
  mp_u32 s = 0;
  for (int l = 0; l < 16; ++l) s += (mp_u32)x.s[l];
  return (int)s;
}
#define MP_QUAD_SUM(x) mp_quad_sum(x)
__device__ __forceinline__ mp_i64 mp_quad_sum64(const mp_i32x16& x) {
  mp_i64 s = 0;
  for (int l = 0; l < 16; ++l) s += x.s[l];
  return s;
}
#define MP_QUAD_SUM64(x) mp_quad_sum64(x)
__device__ __forceinline__ mp_i32x16 mp_quad_and(mp_i32x16 x, int w) {
  for (int l = 0; l < 16; ++l) x.s[l] &= w;
  return x;
}
#define MP_QUAD_AND(x, w) mp_quad_and((x), (int)(w))
__device__ __forceinline__ mp_i32x16 mp_quad_load_half_bytes(const mp_u8* p) {
  mp_i32x16 r(0);
  for (int l = 0; l < 8; ++l)
    r.s[l] = (int)((mp_u32)p[4 * l] | ((mp_u32)p[4 * l + 1] << 8) |
                   ((mp_u32)p[4 * l + 2] << 16) | ((mp_u32)p[4 * l + 3] << 24));
  return r;
}
#define MP_QUAD_LOAD_HALF_BYTES(p) mp_quad_load_half_bytes((const mp_u8*)(p))
__device__ __forceinline__ mp_i32x16 mp_quad_half_word(int w) {
  mp_i32x16 r(0);
  for (int l = 0; l < 8; ++l) r.s[l] = w;
  return r;
}
#define MP_QUAD_HALF_WORD(w) mp_quad_half_word((int)(w))
__device__ __forceinline__ mp_i32x16 mp_quad_srl(mp_i32x16 x, int n) {
  for (int l = 0; l < 16; ++l) x.s[l] = (int)((mp_u32)x.s[l] >> n);
  return x;
}
#define MP_QUAD_SRL(x, n) mp_quad_srl((x), (int)(n))
__device__ __forceinline__ mp_i32x16 mp_nibbles64(const mp_u8* p) {
  mp_i32x16 r;
  for (int l = 0; l < 8; ++l) {
    const mp_u32 w = (mp_u32)p[4 * l] | ((mp_u32)p[4 * l + 1] << 8) |
                     ((mp_u32)p[4 * l + 2] << 16) | ((mp_u32)p[4 * l + 3] << 24);
    r.s[l] = (int)((((w & 0x0f0f0f0fu) ^ 0x08080808u) + 0x78787878u) ^ 0x80808080u);
    r.s[8 + l] = (int)(((((w >> 4) & 0x0f0f0f0fu) ^ 0x08080808u) + 0x78787878u) ^ 0x80808080u);
  }
  return r;
}
#define MP_NIBBLES64_LOAD(p) mp_nibbles64((const mp_u8*)(p))
#define MP_NIBBLES64_LOAD_P(p) mp_nibbles64((const mp_u8*)(p))
)";

// Byte quads of a sliding window along a row (KernelHelper::kByteQuadSlide16), OpenCL only (the
// depthwise kernel's byte-quad form, an OpenCL vector form). The VNNI form is one 64-byte load, a
// byte blend and one constant byte shuffle (Clang's shufflevector, which LLVM lowers to vpshufb /
// vpermb), so a row of 16 outputs' window quads costs a few instructions instead of 16 unaligned
// word loads; the portable form reads the bytes one by one, only those it uses.
const char* const kByteQuadSlide16OpenCLText =
    R"(// Sliding byte quads: lane i of MP_QUAD_SLIDE16(p, keep, z, s, f) holds bytes s*i+f ... s*i+f+3.
#if defined(MP_BYTE_QUADS_VNNI) && !defined(MP_PORTABLE_FORMS) && !defined(MP_NO_512BIT_FORMS)
typedef uchar mp_u8x64 __attribute__((ext_vector_type(64)));
typedef char mp_quad_keep __attribute__((ext_vector_type(64)));
typedef mp_u8x64 __attribute__((aligned(1))) mp_u8x64_u;
$device_fn mp_quad_keep mp_quad_keep64(int lo, int hi) {
  const mp_u8x64 k = (mp_u8x64)(
      0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
      22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41,
      42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61,
      62, 63);
  const mp_u8x64 l = (mp_u8x64)((uchar)clamp(lo, 0, 64)), h = (mp_u8x64)((uchar)clamp(hi, 0, 64));
  return (k >= l) & (k < h);
}
#define MP_QUAD_KEEP64(lo, hi) mp_quad_keep64((lo), (hi))
#define MP_SLIDE4(s, f, i) (s) * (i) + (f), (s) * (i) + (f) + 1, (s) * (i) + (f) + 2, (s) * (i) + (f) + 3
#define MP_QUAD_SLIDE16(p, keep, z, s, f)                                                   \
  __builtin_astype(                                                                         \
      __builtin_shufflevector((keep) ? *(const $global mp_u8x64_u*)(p) : (mp_u8x64)((uchar)(z)), \
    (mp_u8x64)(0), \
    MP_SLIDE4(s, f, 0), MP_SLIDE4(s, f, 1), MP_SLIDE4(s, f, 2), MP_SLIDE4(s, f, 3), \
    MP_SLIDE4(s, f, 4), MP_SLIDE4(s, f, 5), MP_SLIDE4(s, f, 6), MP_SLIDE4(s, f, 7), \
    MP_SLIDE4(s, f, 8), MP_SLIDE4(s, f, 9), MP_SLIDE4(s, f, 10), MP_SLIDE4(s, f, 11), \
    MP_SLIDE4(s, f, 12), MP_SLIDE4(s, f, 13), MP_SLIDE4(s, f, 14), MP_SLIDE4(s, f, 15)), \
      mp_i32x16)
#else
typedef int2 mp_quad_keep;
#define MP_QUAD_KEEP64(lo, hi) ((int2)((lo), (hi)))
$device_fn mp_u32 mp_quad_slide_word(const $global mp_u8* p, int2 keep, int z, int k) {
  mp_u32 w = 0u;
  for (int b = 0; b < 4; ++b)
    w |= (mp_u32)(k + b >= keep.x && k + b < keep.y ? p[k + b] : (mp_u8)z) << (8 * b);
  return w;
}
#define MP_SLIDE_WORD(p, keep, z, s, f, i) mp_quad_slide_word((p), (keep), (z), (s) * (i) + (f))
#define MP_QUAD_SLIDE16(p, keep, z, s, f)                                                  \
  as_int16((uint16)(                                                                        \
      MP_SLIDE_WORD(p, keep, z, s, f, 0), MP_SLIDE_WORD(p, keep, z, s, f, 1),               \
      MP_SLIDE_WORD(p, keep, z, s, f, 2), MP_SLIDE_WORD(p, keep, z, s, f, 3),               \
      MP_SLIDE_WORD(p, keep, z, s, f, 4), MP_SLIDE_WORD(p, keep, z, s, f, 5),               \
      MP_SLIDE_WORD(p, keep, z, s, f, 6), MP_SLIDE_WORD(p, keep, z, s, f, 7),               \
      MP_SLIDE_WORD(p, keep, z, s, f, 8), MP_SLIDE_WORD(p, keep, z, s, f, 9),               \
      MP_SLIDE_WORD(p, keep, z, s, f, 10), MP_SLIDE_WORD(p, keep, z, s, f, 11),             \
      MP_SLIDE_WORD(p, keep, z, s, f, 12), MP_SLIDE_WORD(p, keep, z, s, f, 13),             \
      MP_SLIDE_WORD(p, keep, z, s, f, 14), MP_SLIDE_WORD(p, keep, z, s, f, 15)))
#endif
)";

// Byte tile products (KernelHelper::kByteTileProduct), OpenCL only. The AMX form: PoCL compiles
// the tile built-ins, like VNNI's, only in a noinline function carrying the target attribute;
// every tile is configured as 16 rows of 64 bytes (palette 1) when the function starts and
// released when it ends, so nothing of the tile state outlives one call. The portable form keeps
// the eight tiles in a private array and computes the same wrapping int32 sums in noinline
// functions: inlined at every tile call site, their 16-row loops unrolled cost Intel's CPU
// compiler 37 s for one pointwise program, 4 s as calls (no default takes this form: it is the
// text a device without the tile units runs when a configuration asks for tiles).
const char* const kByteTileProductOpenCLText =
    R"(// Byte tile products: 8 tiles of 16 rows x 64 bytes;
// c.int[m][n] += a.byte[m][4k+j] * b.byte[k][4n+j].
#if defined(MP_BYTE_TILES_AMX) && !defined(MP_PORTABLE_FORMS) && !defined(MP_NO_512BIT_FORMS)
#define MP_TILE_FN static __attribute__((target("amx-tile,amx-int8,avx512f"), noinline))
static __attribute__((target("amx-tile"), noinline)) void mp_tiles_begin(void) {
  uchar cfg[64] __attribute__((aligned(64)));
  for (int i = 0; i < 64; ++i) cfg[i] = 0;
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = 64;
    cfg[48 + t] = 16;
  }
  __builtin_ia32_tile_loadconfig(cfg);
}
#define MP_TILES_BEGIN() mp_tiles_begin()
#define MP_TILES_END() __builtin_ia32_tilerelease()
#define MP_TILE_ZERO(t) __builtin_ia32_tilezero(t)
#define MP_TILE_LOAD(t, p, stride) \
  __builtin_ia32_tileloadd64((t), (const void*)(ulong)(p), (long)(stride))
#define MP_TILE_DPBUSD(c, a, b) __builtin_ia32_tdpbusd((c), (a), (b))
#define MP_TILE_DPBSUD(c, a, b) __builtin_ia32_tdpbsud((c), (a), (b))
#define MP_TILE_LOAD_P(t, p, stride) MP_TILE_LOAD(t, p, stride)
#define MP_TILE_STORE(t, p, stride) \
  __builtin_ia32_tilestored64((t), (void*)(ulong)(p), (long)(stride))
#else
#define MP_TILE_FN $device_fn
__attribute__((noinline)) void mp_tile_load(int* t, const $global uchar* p, int stride) {
  for (int r = 0; r < 16; ++r)
    for (int w = 0; w < 16; ++w) {
      const $global uchar* q = p + r * stride + 4 * w;
      t[16 * r + w] =
          (int)((uint)q[0] | ((uint)q[1] << 8) | ((uint)q[2] << 16) | ((uint)q[3] << 24));
    }
}
__attribute__((noinline)) void mp_tile_load_p(int* t, const uchar* p, int stride) {
  for (int r = 0; r < 16; ++r)
    for (int w = 0; w < 16; ++w) {
      const uchar* q = p + r * stride + 4 * w;
      t[16 * r + w] =
          (int)((uint)q[0] | ((uint)q[1] << 8) | ((uint)q[2] << 16) | ((uint)q[3] << 24));
    }
}
// a's bytes signed when a_signed, b's when not: tdpbsud, else tdpbusd.
__attribute__((noinline)) void mp_tile_dp(int* c, const int* a, const int* b, int a_signed) {
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      uint s = (uint)c[16 * m + n];
      for (int k = 0; k < 16; ++k) {
        const uint x = (uint)a[16 * m + k], w = (uint)b[16 * k + n];
        for (int j = 0; j < 32; j += 8) {
          const int xb = (int)((x >> j) & 255u), wb = (int)((w >> j) & 255u);
          s += a_signed ? (uint)((int)(char)xb * wb) : (uint)(xb * (int)(char)wb);
        }
      }
      c[16 * m + n] = (int)s;
    }
}
__attribute__((noinline)) void mp_tile_store(const int* t, int* p, int stride) {
  for (int r = 0; r < 16; ++r)
    for (int w = 0; w < 16; ++w) p[r * (stride / 4) + w] = t[16 * r + w];
}
#define MP_TILES_BEGIN() int mp_tiles[8][256]
#define MP_TILES_END()
#define MP_TILE_ZERO(t) for (int mp_i = 0; mp_i < 256; ++mp_i) mp_tiles[t][mp_i] = 0
#define MP_TILE_LOAD(t, p, stride) mp_tile_load(mp_tiles[t], (const $global uchar*)(p), (stride))
#define MP_TILE_DPBUSD(c, a, b) mp_tile_dp(mp_tiles[c], mp_tiles[a], mp_tiles[b], 0)
#define MP_TILE_DPBSUD(c, a, b) mp_tile_dp(mp_tiles[c], mp_tiles[a], mp_tiles[b], 1)
#define MP_TILE_LOAD_P(t, p, stride) mp_tile_load_p(mp_tiles[t], (const uchar*)(p), (stride))
#define MP_TILE_STORE(t, p, stride) mp_tile_store(mp_tiles[t], (p), (stride))
#endif
)";

}  // namespace mpcaffe
