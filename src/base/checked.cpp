#include "ember/base/checked.hpp"

#include "ember/base/error.hpp"

namespace ember {
namespace {
[[noreturn]] void overflow(const std::string& op, const char* what, const std::string& expr) {
  fail(op + ": " + what + " " + expr + " exceeds the largest size ember represents (2^" +
       std::to_string(kMaxSizeLog2) + ")");
}
}  // namespace

std::size_t checked_mul(std::size_t a, std::size_t b, const std::string& op, const char* what) {
  std::size_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxSize) {
    overflow(op, what, std::to_string(a) + " * " + std::to_string(b));
  }
  return r;
}

std::size_t checked_add(std::size_t a, std::size_t b, const std::string& op, const char* what) {
  std::size_t r = 0;
  if (__builtin_add_overflow(a, b, &r) || r > kMaxSize) {
    overflow(op, what, std::to_string(a) + " + " + std::to_string(b));
  }
  return r;
}

std::size_t checked_size(std::size_t v, const std::string& op, const char* what) {
  if (v > kMaxSize) overflow(op, what, std::to_string(v));
  return v;
}

std::size_t checked_num_elements(const Shape& shape, const std::string& op) {
  std::size_t n = 1;
  bool over = false;
  for (std::size_t d : shape) {
    over = over || d > kMaxSize || __builtin_mul_overflow(n, d, &n) || n > kMaxSize;
  }
  // A zero extent makes the product 0 however large the others are; those extents still
  // count: strides and offsets are computed from them.
  if (over) overflow(op, "the element count of shape", shape.to_string());
  return n;
}

std::size_t checked_bytes(const Shape& shape, DType dtype, const std::string& op) {
  const std::size_t n = checked_num_elements(shape, op);
  std::size_t r = 0;
  if (__builtin_mul_overflow(n, size_of(dtype), &r) || r > kMaxSize) {
    overflow(op, "the byte count of shape",
             shape.to_string() + " of " + name(dtype) + " (" + std::to_string(n) + " elements)");
  }
  return r;
}

}  // namespace ember
