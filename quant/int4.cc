// quant/int4.cc — packing and unpacking of signed 4-bit weights (layout in quant/int4.h).
#include "quant/int4.h"

#include <string>

#include "device/error.h"

namespace mpcaffe::quant {

void PackInt4(const int8_t* w, size_t channels, size_t k, uint8_t* out) {
  const size_t row = Int4RowBytes(k);
  for (size_t o = 0; o < channels; ++o) {
    const int8_t* src = w + o * k;
    uint8_t* dst = out + o * row;
    for (size_t b = 0; b < row; ++b) dst[b] = 0;
    for (size_t i = 0; i < k; ++i) {
      const int v = src[i];
      if (v < kInt4Min || v > kInt4Max) {
        throw Error("PackInt4: weight " + std::to_string(i) + " of channel " + std::to_string(o) +
                    " is " + std::to_string(v) + ", outside the signed 4-bit range [-8, 7]");
      }
      const uint8_t nibble = static_cast<uint8_t>(v) & 0x0F;
      dst[i / 2] |= (i & 1) ? static_cast<uint8_t>(nibble << 4) : nibble;
    }
  }
}

void UnpackInt4(const uint8_t* p, size_t channels, size_t k, int8_t* out) {
  const size_t row = Int4RowBytes(k);
  for (size_t o = 0; o < channels; ++o) {
    for (size_t i = 0; i < k; ++i) out[o * k + i] = Int4At(p, row, o, i);
  }
}

}  // namespace mpcaffe::quant
