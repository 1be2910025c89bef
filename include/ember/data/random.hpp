// The data layer's random numbers: one small, fully specified generator (SplitMix64), so
// that shuffles, samples and augmentations are the same on every platform and standard
// library (std::shuffle and std::uniform_int_distribution are not), and seeds derived from
// (seed, epoch, index) so that any item's randomness can be recomputed on any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::data {

// SplitMix64: a 64-bit counter passed through a bijective mixing function. Cheap to seed,
// copyable, and every stream is independent of how many others were drawn before it.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next_u64();
  // Uniform in [0, n) without modulo bias (rejection of the short cycle); n > 0.
  std::uint64_t below(std::uint64_t n);
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // True with probability p.
  bool bernoulli(double p) { return uniform() < p; }

  std::uint64_t state() const { return state_; }

 private:
  std::uint64_t state_;
};

// The seed of sub-stream `stream` of `seed`: distinct streams of one seed, and one stream
// of distinct seeds, give unrelated generators.
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream);

// A uniformly random permutation of 0..n-1 (Fisher-Yates driven by Rng(seed)).
std::vector<std::size_t> permutation(std::size_t n, std::uint64_t seed);

}  // namespace ember::data
