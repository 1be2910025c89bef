// Checked size arithmetic: the one place where extents, element counts, byte counts,
// strides and window geometry are multiplied and added. Every size ember represents is at
// most kMaxSize (2^62), so the sum or difference of two sizes, and any size as a signed
// 64-bit offset or stride, cannot overflow. A request beyond it is an ember::Error naming
// the function the user called and what overflowed, raised before any allocation or kernel.
#pragma once

#include <cstddef>
#include <string>

#include "ember/base/dtype.hpp"
#include "ember/base/shape.hpp"

namespace ember {

// On a 32-bit target (embedded) the bound is 2^30, so that the same rule holds there.
inline constexpr unsigned kMaxSizeLog2 = sizeof(std::size_t) >= 8 ? 62 : 30;
inline constexpr std::size_t kMaxSize = std::size_t{1} << kMaxSizeLog2;

// a * b, a + b and a - b (a >= b), or ember::Error "<op>: <what> ... exceeds 2^62" when the
// result (or an operand) is beyond kMaxSize. `op` names the user-level function.
std::size_t checked_mul(std::size_t a, std::size_t b, const std::string& op, const char* what);
std::size_t checked_add(std::size_t a, std::size_t b, const std::string& op, const char* what);
// An extent, padding, stride or count given by the user: returns v, or fails when v > kMaxSize.
std::size_t checked_size(std::size_t v, const std::string& op, const char* what);

// The element count of shape (every extent and the product at most kMaxSize), or an
// ember::Error naming op and the shape.
std::size_t checked_num_elements(const Shape& shape, const std::string& op);
// The byte count of a tensor of shape and dtype (at most kMaxSize), or an ember::Error.
std::size_t checked_bytes(const Shape& shape, DType dtype, const std::string& op);

}  // namespace ember
