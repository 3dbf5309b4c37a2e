// tests/cache/sha256_test.cc — SHA-256 against the FIPS 180-4 / NIST example vectors, and the
// cache key derivation built on it.
#include "cache/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "cache/program_cache.h"

namespace mpcaffe::cache {
namespace {

TEST(Sha256, NistVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjk"
                      "lmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  // Lengths around the 55/56/64-byte padding edges, checked against Python's hashlib.
  EXPECT_EQ(Sha256Hex(std::string(55, 'x')),
            "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
  EXPECT_EQ(Sha256Hex(std::string(56, 'x')),
            "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
  EXPECT_EQ(Sha256Hex(std::string(64, 'x')),
            "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data += static_cast<char>(i * 7 + 3);
  for (size_t chunk : {1u, 3u, 63u, 64u, 65u, 200u}) {
    Sha256 h;
    for (size_t at = 0; at < data.size(); at += chunk) h.Update(data.substr(at, chunk));
    const auto d = h.Digest();
    EXPECT_EQ(ToHex(d.data(), d.size()), Sha256Hex(data)) << "chunk " << chunk;
  }
}

TEST(Sha256, FieldsDoNotRunTogether) {
  auto fields = [](std::string a, std::string b) {
    const auto d = Sha256().UpdateField(a).UpdateField(b).Digest();
    return ToHex(d.data(), d.size());
  };
  EXPECT_NE(fields("ab", "c"), fields("a", "bc"));
  EXPECT_EQ(fields("ab", "c"), fields("ab", "c"));
}

ProgramKey SampleKey() {
  return ProgramKey{
      "opencl",         "Portable Computing Language OpenCL 3.0 PoCL 3.1", "cpu-haswell", "3.1", "",
      "-cl-mad-enable", "kernel void f(global float* x) { x[0] = 1; }"};
}

TEST(ProgramKeyHash, EveryFieldChangesTheKey) {
  const ProgramKey base = SampleKey();
  const std::string h = ProgramKeyHash(base);
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h, ProgramKeyHash(SampleKey()));  // deterministic
  for (std::string ProgramKey::*field :
       {&ProgramKey::backend, &ProgramKey::platform, &ProgramKey::device, &ProgramKey::driver,
        &ProgramKey::arch, &ProgramKey::options, &ProgramKey::source}) {
    ProgramKey k = base;
    k.*field += " ";
    EXPECT_NE(ProgramKeyHash(k), h);
  }
  // Moving a character from one field to the next is a different key too.
  ProgramKey shifted = base;
  shifted.device = "cpu-haswel";
  shifted.driver = "l3.1";
  EXPECT_NE(ProgramKeyHash(shifted), h);
}

TEST(ProgramKeyHash, StableAcrossBuilds) {
  // Golden value computed independently (Python hashlib over the length-prefixed fields
  // "mpcaffe program cache", "1", then the key's seven fields). A change here means every
  // existing cache file misses: bump kCacheFormatVersion when the derivation changes.
  ASSERT_EQ(kCacheFormatVersion, 1);
  EXPECT_EQ(ProgramKeyHash(SampleKey()),
            "313ec3475cde21b5c28cdf5caf8abd4f455651f85b1c474e1de595c355446319");
}

}  // namespace
}  // namespace mpcaffe::cache
