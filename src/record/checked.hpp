// Overflow-checked size arithmetic for the record readers. Every length and offset read
// from a file goes through these before it is used to allocate, seek or index, so a file
// with an oversized length is an ember::Error, never a wrap-around. (Local to record/ until
// base/ has checked arithmetic of its own.)
#pragma once

#include <cstdint>
#include <string>

#include "ember/base/error.hpp"

namespace ember::record::detail {

// a + b, or an ember::Error naming `what` when the sum does not fit in 64 bits.
inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, const std::string& what) {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(what + ": size overflows 64 bits");
  return r;
}
// a * b, or an ember::Error naming `what` on overflow.
inline std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, const std::string& what) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(what + ": size overflows 64 bits");
  return r;
}
// Whether [offset, offset + length) lies within [0, size), without overflow.
inline bool range_within(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}
// x rounded up to a multiple of `alignment` (a power of two), checked.
inline std::uint64_t checked_align_up(std::uint64_t x, std::uint64_t alignment,
                                      const std::string& what) {
  return checked_add(x, alignment - 1, what) & ~(alignment - 1);
}

}  // namespace ember::record::detail
