// visit_dtype: calls f with a value of the C++ element type of a DType, so a kernel is
// written once as a template and instantiated for every dtype it supports.
#pragma once

#include <cstdint>

#include "ember/base/dtype.hpp"
#include "ember/base/error.hpp"

namespace ember::cpu {

// Numeric dtypes computed natively (16-bit floats are widened by the backend first).
template <class F>
decltype(auto) visit_numeric(DType t, F&& f) {
  switch (t) {
    case DType::F64:
      return f(double{});
    case DType::F32:
      return f(float{});
    case DType::I64:
      return f(std::int64_t{});
    case DType::I32:
      return f(std::int32_t{});
    case DType::I16:
      return f(std::int16_t{});
    case DType::I8:
      return f(std::int8_t{});
    case DType::U8:
      return f(std::uint8_t{});
    case DType::Bool:
      return f(bool{});
    default:
      break;
  }
  fail(std::string("cpu: dtype ") + name(t) + " is not computed natively");
}

// Element types by size, for kernels that only move bytes.
template <class F>
decltype(auto) visit_bytes(std::size_t elem, F&& f) {
  switch (elem) {
    case 1:
      return f(std::uint8_t{});
    case 2:
      return f(std::uint16_t{});
    case 4:
      return f(std::uint32_t{});
    default:
      return f(std::uint64_t{});
  }
}

}  // namespace ember::cpu
