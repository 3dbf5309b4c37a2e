// cache/sha256.h — SHA-256 (FIPS 180-4), used for cache keys and binary checksums: a
// deterministic hash that is the same in every build, unlike std::hash.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mpcaffe::cache {

/// Incremental SHA-256. Update() any number of times, then Digest() once.
class Sha256 {
 public:
  using DigestBytes = std::array<uint8_t, 32>;

  Sha256();
  Sha256& Update(const void* data, size_t bytes);
  Sha256& Update(std::string_view text) { return Update(text.data(), text.size()); }
  /// Appends the length (8 bytes, little-endian) and then the bytes, so that consecutive
  /// fields cannot run into each other ("ab"+"c" hashes differently from "a"+"bc").
  Sha256& UpdateField(std::string_view field);
  /// Finishes the hash. The object must not be updated afterwards.
  DigestBytes Digest();

 private:
  void Block(const uint8_t* block);

  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

/// Lower-case hexadecimal spelling of bytes.
std::string ToHex(const uint8_t* bytes, size_t count);
/// SHA-256 of `data` as 64 hex digits.
std::string Sha256Hex(std::string_view data);

}  // namespace mpcaffe::cache
