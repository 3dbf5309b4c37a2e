// codegen/datatype.cc — the scalar and data-type trait tables.
#include "codegen/datatype.h"

#include <cstring>
#include <stdexcept>

namespace mpcaffe {

namespace {

// clang-format off
constexpr ScalarTraits kScalars[] = {
    // scalar       alias      opencl    cuda                  bits float  signed
    {Scalar::kF32, "float",   "float",  "float",              32, true,  true},
    {Scalar::kF16, "mp_half", "half",   "__half",             16, true,  true},
    {Scalar::kU8,  "mp_u8",   "uchar",  "unsigned char",       8, false, false},
    {Scalar::kI8,  "mp_i8",   "char",   "signed char",         8, false, true},
    {Scalar::kU16, "mp_u16",  "ushort", "unsigned short",     16, false, false},
    {Scalar::kI16, "mp_i16",  "short",  "short",              16, false, true},
    {Scalar::kI32, "int",     "int",    "int",                32, false, true},
    {Scalar::kU32, "mp_u32",  "uint",   "unsigned int",       32, false, false},
    {Scalar::kI64, "mp_i64",  "long",   "long long",          64, false, true},
    {Scalar::kU64, "mp_u64",  "ulong",  "unsigned long long", 64, false, false},
};

constexpr DataTypeTraits kDataTypes[] = {
    // type               name      storage      difftype     acctype      multtype     signed_storage quantized qmin qmax
    {DataType::kFloat32, "fp32",   Scalar::kF32, Scalar::kF32, Scalar::kF32, Scalar::kF32, Scalar::kF32, false, 0, 0},
    {DataType::kFloat16, "fp16",   Scalar::kF16, Scalar::kF32, Scalar::kF32, Scalar::kF32, Scalar::kF16, false, 0, 0},
    {DataType::kInt16Q,  "int16q", Scalar::kU16, Scalar::kI32, Scalar::kI64, Scalar::kI32, Scalar::kI16, true,  0, 65535},
    {DataType::kInt8Q,   "int8q",  Scalar::kU8,  Scalar::kI16, Scalar::kI32, Scalar::kI32, Scalar::kI8,  true,  0, 255},
};
// clang-format on

}  // namespace

const ScalarTraits& TraitsOf(Scalar s) { return kScalars[static_cast<int>(s)]; }

const DataTypeTraits& TraitsOf(DataType t) { return kDataTypes[static_cast<int>(t)]; }

size_t DataTypeTraits::bytes() const { return TraitsOf(storage).bits / 8; }
size_t DataTypeTraits::acc_bytes() const { return TraitsOf(acctype).bits / 8; }
const char* DataTypeTraits::acc_alias() const { return TraitsOf(acctype).alias; }
const char* DataTypeTraits::signed_alias() const { return TraitsOf(signed_storage).alias; }

DataType ParseDataType(const std::string& name) {
  if (name == "fp32" || name == "float" || name == "float32") return DataType::kFloat32;
  if (name == "fp16" || name == "half" || name == "float16") return DataType::kFloat16;
  if (name == "int16q" || name == "int16") return DataType::kInt16Q;
  if (name == "int8q" || name == "int8") return DataType::kInt8Q;
  throw std::invalid_argument("unknown data type '" + name +
                              "' (expected fp32, fp16, int16q or int8q)");
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal half: normalize
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to beyond 65504: infinity
  if (abs < 0x38800000u) {                        // subnormal or zero in half
    if (abs < 0x33000000u) return sign;           // below half the smallest subnormal
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(exponent);  // 14 + (112 - exponent) - 1 + ...
    uint32_t value = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (value & 1u))) ++value;
    return sign | static_cast<uint16_t>(value);
  }
  uint32_t value = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (value & 1u))) ++value;
  return sign | static_cast<uint16_t>(value);
}

}  // namespace mpcaffe
