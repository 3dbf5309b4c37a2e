// codegen/datatype.h — the runtime data types (fp32, fp16, int16q, int8q) and the one trait
// table that says, per type, how it is stored, widened, accumulated and spelled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mpcaffe {

/// The data types mpcaffe computes in. Values match nothing on disk (see proto/ for that).
enum class DataType { kFloat32, kFloat16, kInt16Q, kInt8Q };

/// Scalar types that kernels use for storage and arithmetic.
enum class Scalar { kF32, kF16, kU8, kI8, kU16, kI16, kI32, kU32, kI64, kU64 };

/// Per-scalar spellings and properties. `alias` is the portable name every kernel text uses
/// (the writer's preamble typedefs it to the dialect's spelling).
struct ScalarTraits {
  Scalar scalar;
  const char* alias;   // "mp_u8"
  const char* opencl;  // "uchar"
  const char* cuda;    // "unsigned char"
  int bits;
  bool is_float;
  bool is_signed;
};

const ScalarTraits& TraitsOf(Scalar s);

/// Per-data-type traits (DESIGN.md "Data types").
struct DataTypeTraits {
  DataType type;
  const char* name;      // "fp32" | "fp16" | "int16q" | "int8q" (kernel-name suffixes, CLI)
  Scalar storage;        // element in memory
  Scalar difftype;       // wide enough for q − zero_point (float types: themselves)
  Scalar acctype;        // accumulator of products and sums
  Scalar multtype;       // fixed-point multiplier of the requantization
  Scalar signed_storage; // storage of signed weights (quantized types; float types: storage)
  bool quantized;        // affine-quantized integer type
  int64_t qmin, qmax;    // representable integer range (quantized types)
  size_t bytes() const;  // storage size
  size_t acc_bytes() const;  // accumulator size (float, int32 or int64: bias, weight sums)
  /// The portable spelling of the accumulator scalar ("float", "int", "mp_i64"): what the
  /// kernels sum products and requantize in.
  const char* acc_alias() const;
  /// The portable spelling of signed_storage ("mp_i8", "mp_i16").
  const char* signed_alias() const;
};

const DataTypeTraits& TraitsOf(DataType t);

inline const char* Name(DataType t) { return TraitsOf(t).name; }
inline size_t SizeOf(DataType t) { return TraitsOf(t).bytes(); }
inline bool IsQuantized(DataType t) { return TraitsOf(t).quantized; }

/// Parses "fp32"/"float"/"fp16"/"half"/"int16q"/"int16"/"int8q"/"int8"; throws
/// std::invalid_argument naming the accepted spellings otherwise.
DataType ParseDataType(const std::string& name);

/// IEEE binary16 bits to float (exact) and float to binary16 (round to nearest even,
/// overflow to infinity, NaN kept).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);

/// All four data types in a fixed order (fp32, fp16, int16q, int8q).
inline constexpr DataType kAllDataTypes[] = {DataType::kFloat32, DataType::kFloat16,
                                             DataType::kInt16Q, DataType::kInt8Q};

}  // namespace mpcaffe
