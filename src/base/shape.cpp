#include "ember/base/shape.hpp"

#include "ember/base/checked.hpp"

namespace ember {

std::size_t Shape::num_elements() const {
  std::size_t n = 1;
  bool over = false;
  for (std::size_t d : dims_) over |= d > kMaxSize || __builtin_mul_overflow(n, d, &n);
  // The functions that build shapes check them naming themselves (checked_num_elements);
  // this is the backstop, so that no wrapped count ever sizes a buffer or a loop.
  if (over || n > kMaxSize) checked_num_elements(*this, "shape");
  return n;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

std::string to_string(const Shape& s) { return s.to_string(); }

}  // namespace ember
