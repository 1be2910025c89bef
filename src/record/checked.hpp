// File ranges for the record readers, on base's checked size arithmetic
// (ember/base/checked.hpp: every size at most 2^62). Every length and offset read from a
// file goes through these or through checked_add / checked_mul / checked_bytes before it
// is used to allocate, seek or index, so a file with an oversized length is an
// ember::Error, never a wrap-around.
#pragma once

#include <cstdint>
#include <string>

#include "ember/base/checked.hpp"

namespace ember::record::detail {

// Whether [offset, offset + length) lies within [0, size), without overflow.
inline bool range_within(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}
// x rounded up to a multiple of `alignment` (a power of two), checked.
inline std::uint64_t checked_align_up(std::uint64_t x, std::uint64_t alignment,
                                      const std::string& what) {
  return checked_add(x, alignment - 1, what, "an aligned size") & ~(alignment - 1);
}

}  // namespace ember::record::detail
