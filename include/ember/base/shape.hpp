// Shape: the extent of each dimension of a tensor. A plain value type: indexable,
// comparable, printable.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

namespace ember {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::size_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<std::size_t> dims) : dims_(std::move(dims)) {}
  template <class It>
  Shape(It first, It last) : dims_(first, last) {}

  std::size_t rank() const { return dims_.size(); }
  std::size_t size() const { return dims_.size(); }
  // The product of the extents; throws ember::Error when an extent or the product exceeds
  // 2^62 (ember/base/checked.hpp), never a wrapped count.
  std::size_t num_elements() const;
  std::size_t operator[](std::size_t i) const { return dims_[i]; }
  std::size_t& operator[](std::size_t i) { return dims_[i]; }
  const std::vector<std::size_t>& dims() const { return dims_; }
  std::vector<std::size_t>& dims() { return dims_; }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }

  friend bool operator==(const Shape&, const Shape&) = default;
  std::string to_string() const;  // "[2, 3]"

 private:
  std::vector<std::size_t> dims_;
};

std::string to_string(const Shape& s);

}  // namespace ember
