// ember::hash_bytes: its keys against tests/base/hash_reference.py (the definition written
// again in Python), and the properties the caches rely on.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "ember/base/hash.hpp"

using ember::hash_bytes;

TEST(Hash, KeysAgreeWithTheReferenceDefinition) {
  std::vector<unsigned char> all(256);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(hash_bytes(""), 0x9018ae6d27af717dULL);
  EXPECT_EQ(hash_bytes("a"), 0xc4b3f4012679dcf2ULL);
  EXPECT_EQ(hash_bytes(std::string("a\0", 2)), 0xc2821fcfc792dfbbULL);
  EXPECT_EQ(hash_bytes("The quick brown fox jumps over the lazy dog"), 0xcc2fe7faa3247523ULL);
  EXPECT_EQ(hash_bytes(all.data(), all.size()), 0x56d9d275e2d12481ULL);
}

// Every bit of the input reaches the key: each one-bit change of a 37-byte string (a whole
// word and a tail) changes it, in about half its bits on average.
TEST(Hash, EveryInputBitChangesTheKey) {
  std::string s =
      "ew\x03\x01\x02\x05"
      "fused group signature: 37 bytes";
  ASSERT_EQ(s.size(), 37u);
  const std::uint64_t base = hash_bytes(s);
  double flipped = 0;
  for (std::size_t bit = 0; bit < 8 * s.size(); ++bit) {
    std::string t = s;
    t[bit / 8] = static_cast<char>(t[bit / 8] ^ (1 << (bit % 8)));
    const std::uint64_t h = hash_bytes(t);
    EXPECT_NE(h, base) << "bit " << bit;
    flipped += std::popcount(h ^ base);
  }
  const double mean = flipped / double(8 * s.size());
  EXPECT_GT(mean, 28.0);
  EXPECT_LT(mean, 36.0);
}

TEST(Hash, LengthIsPartOfTheKey) {
  std::string z;
  std::uint64_t last = hash_bytes(z);
  for (int n = 1; n <= 17; ++n) {  // zero bytes only: the length alone tells them apart
    z.push_back('\0');
    const std::uint64_t h = hash_bytes(z);
    EXPECT_NE(h, last) << n << " zero bytes";
    last = h;
  }
}
