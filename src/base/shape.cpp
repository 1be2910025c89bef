#include "ember/base/shape.hpp"

namespace ember {

std::size_t Shape::num_elements() const {
  std::size_t n = 1;
  for (std::size_t d : dims_) n *= d;
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
