// codegen/dialect_quads.cc — the dialects' texts of the sliding byte quads
// (KernelHelper::kByteQuadSlide16), kept apart from the dialect table in codegen/dialect.cc.
#include "codegen/dialect_texts.h"

namespace mpcaffe {

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

}  // namespace mpcaffe
