#include "ember/base/hash.hpp"

#include <bit>
#include <cstring>

namespace ember {

namespace {
constexpr std::uint64_t kMul1 = 0x9e3779b97f4a7c15ULL, kMul2 = 0xbf58476d1ce4e5b9ULL,
                        kMul3 = 0x94d049bb133111ebULL;
constexpr std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
// Each word is multiplied, rotated and multiplied again before it enters the state, so a
// change in any bit of a word reaches every bit of the state; the length goes in first, so
// strings that differ only by trailing zero bytes differ.
constexpr std::uint64_t absorb(std::uint64_t h, std::uint64_t w) {
  return rotl(h ^ (rotl(w * kMul1, 31) * kMul2), 27) * kMul1 + kMul3;
}
}  // namespace

std::uint64_t hash_bytes(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = absorb(0x243f6a8885a308d3ULL, static_cast<std::uint64_t>(n));
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    if constexpr (std::endian::native == std::endian::big)
      w = __builtin_bswap64(w);  // (as read little-endian)
    h = absorb(h, w);
  }
  if (i < n) {
    std::uint64_t w = 0;
    for (std::size_t j = 0; i + j < n; ++j) w |= static_cast<std::uint64_t>(p[i + j]) << (8 * j);
    h = absorb(h, w);
  }
  // A final avalanche (splitmix64's), so that keys differing in their last word differ in
  // every bit.
  h ^= h >> 30;
  h *= kMul2;
  h ^= h >> 27;
  h *= kMul3;
  return h ^ (h >> 31);
}

}  // namespace ember
