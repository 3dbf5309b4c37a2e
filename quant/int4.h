// quant/int4.h — packing of signed 4-bit weights two per byte (the int8w4 weight format shared
// by the host, the device buffers and the caffemodel).
//
// Layout: per output channel, its K weights (K = the channel's reduction length, in the blob's
// natural order) occupy Int4RowBytes(K) = ceil(K/2) bytes; weight k is in byte k/2, the LOW
// nibble for even k and the HIGH nibble for odd k, as two's complement in [-8, 7]. An odd K
// leaves the last high nibble 0. Channel o starts at byte o·Int4RowBytes(K).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpcaffe::quant {

/// Smallest and largest signed 4-bit value.
constexpr int kInt4Min = -8;
constexpr int kInt4Max = 7;

/// Bytes one channel of k packed 4-bit weights occupies: ceil(k/2).
inline size_t Int4RowBytes(size_t k) { return (k + 1) / 2; }

/// Packs channels × k int8 weights (row-major, each in [-8, 7]) into channels × Int4RowBytes(k)
/// bytes. Throws mpcaffe::Error naming the channel, index and value of the first weight outside
/// [-8, 7].
void PackInt4(const int8_t* w, size_t channels, size_t k, uint8_t* out);

/// The inverse of PackInt4: channels × k sign-extended weights from the packed rows.
void UnpackInt4(const uint8_t* p, size_t channels, size_t k, int8_t* out);

/// Weight k of channel o (sign-extended) from packed rows of k_row_bytes bytes each.
inline int8_t Int4At(const uint8_t* p, size_t k_row_bytes, size_t o, size_t k) {
  const uint8_t byte = p[o * k_row_bytes + k / 2];
  const int nibble = (k & 1) ? (byte >> 4) : (byte & 0x0F);
  return static_cast<int8_t>(nibble >= 8 ? nibble - 16 : nibble);
}

}  // namespace mpcaffe::quant
