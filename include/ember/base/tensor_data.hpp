// TensorData: a tensor's elements on the host, row-major and contiguous, with its shape
// and dtype. The unit of exchange between users, backends and files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ember/base/dtype.hpp"
#include "ember/base/error.hpp"
#include "ember/base/shape.hpp"

namespace ember {

class TensorData {
 public:
  TensorData() = default;
  // Takes raw bytes; throws ember::Error when their count does not match shape and dtype
  // (or the shape's byte count exceeds 2^62).
  TensorData(std::vector<std::byte> bytes, Shape shape, DType dtype);

  template <class T>
  static TensorData from(const std::vector<T>& values, Shape shape) {
    std::vector<std::byte> bytes(values.size() * sizeof(T));
    copy_in(bytes.data(), values.data(), values.size(), dtype_of<T>());
    return TensorData(std::move(bytes), std::move(shape), dtype_of<T>());
  }
  // A rank-1 tensor of the values.
  template <class T>
  static TensorData from(const std::vector<T>& values) {
    return from(values, Shape{values.size()});
  }

  // The elements converted to T (any numeric or bool dtype converts; bf16/f16 widen).
  template <class T>
  std::vector<T> to_vector() const {
    std::vector<T> out(num_elements());
    convert_out(out.data(), dtype_of<T>());
    return out;
  }

  // Same data converted to another dtype.
  TensorData convert(DType to) const;

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  std::size_t num_elements() const { return shape_.num_elements(); }
  const std::vector<std::byte>& bytes() const { return bytes_; }
  std::vector<std::byte>& bytes() { return bytes_; }
  const void* data() const { return bytes_.data(); }
  void* data() { return bytes_.data(); }

  // Element i converted to double (bool -> 0/1).
  double get_f64(std::size_t i) const;

  // True when shapes match and every element satisfies |a-b| <= atol + rtol*|b| (b =
  // other); NaN equals NaN, infinities must match exactly.
  bool approx_eq(const TensorData& other, double rtol = 1e-5, double atol = 1e-6) const;
  // As approx_eq, but throws ember::Error describing the first mismatch.
  void assert_approx_eq(const TensorData& other, double rtol = 1e-5, double atol = 1e-6) const;
  // Exact equality of shape, dtype and values.
  bool operator==(const TensorData& other) const;
  std::string to_string(std::size_t max_elements = 64) const;

 private:
  static void copy_in(std::byte* dst, const void* src, std::size_t n, DType t) {
    if (n == 0) return;  // an empty vector's data() may be null: memcpy(null, ..., 0) is UB
    std::memcpy(dst, src, n * size_of(t));
  }
  void convert_out(void* dst, DType to) const;

  std::vector<std::byte> bytes_;
  Shape shape_;
  DType dtype_ = DType::F32;
};

// Element-wise conversion of n elements between any two dtypes (bool: x != 0).
void convert_elements(const void* src, DType from, void* dst, DType to, std::size_t n);

}  // namespace ember
