// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014) with the finaliser constants of its published 64-bit variant.
#include "ember/data/random.hpp"

#include <numeric>
#include <utility>

namespace ember::data {

namespace {
constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

std::uint64_t Rng::next_u64() {
  state_ += kGolden;
  return mix64(state_);
}

std::uint64_t Rng::below(std::uint64_t n) {
  // x % n is uniform once the values below 2^64 mod n (the incomplete last cycle, moved to
  // the front) are rejected; at most one draw in two is rejected, usually none.
  const std::uint64_t threshold = (0 - n) % n;
  std::uint64_t x = next_u64();
  while (x < threshold) x = next_u64();
  return x % n;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  // Two rounds of mixing: the stream number is scrambled before it meets the seed, so
  // neighbouring (seed, stream) pairs do not give neighbouring states.
  return mix64(seed ^ mix64(stream * kGolden + 0x632BE59BD9B4E019ull));
}

std::vector<std::size_t> permutation(std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> p(n);
  std::iota(p.begin(), p.end(), std::size_t{0});
  Rng rng(seed);
  for (std::size_t i = n; i > 1; --i) {
    const auto j = static_cast<std::size_t>(rng.below(i));
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

}  // namespace ember::data
