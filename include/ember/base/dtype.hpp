// DType: the run-time element type of a tensor, and the 16-bit float storage types.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace ember {

enum class DType : std::uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool };

// The three compile-time tensor kinds; the element type within a kind is a DType.
enum class Kind : std::uint8_t { Float, Int, Bool };
struct Float {
  static constexpr Kind kind = Kind::Float;
};
struct Int {
  static constexpr Kind kind = Kind::Int;
};
struct Bool {
  static constexpr Kind kind = Kind::Bool;
};

// The bytes of one element. Inline and constexpr: every op asks it, and the element-wise
// table (ir/scalar_table.hpp) needs it at compile time.
constexpr std::size_t size_of(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
      return 2;
    case DType::I8:
    case DType::U8:
    case DType::Bool:
      return 1;
  }
  return 0;
}
const char* name(DType t);  // "f32", "i64", ...
std::string to_string(DType t);
// The kind of a dtype (constexpr: the element-wise table selects expressions by it).
constexpr Kind kind_of(DType t) {
  switch (t) {
    case DType::F64:
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return Kind::Float;
    case DType::Bool:
      return Kind::Bool;
    case DType::I64:
    case DType::I32:
    case DType::I16:
    case DType::I8:
    case DType::U8:
      break;
  }
  return Kind::Int;
}
constexpr bool is_float(DType t) { return kind_of(t) == Kind::Float; }
// The 16-bit floats, which the Cpu-side backends compute in f32.
constexpr bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }
constexpr bool is_int(DType t) { return kind_of(t) == Kind::Int; }
const char* name(Kind k);

// IEEE binary16, storage only: arithmetic converts to float.
struct f16 {
  std::uint16_t bits = 0;
  f16() = default;
  explicit f16(float v);
  explicit operator float() const;
};
// bfloat16 (the upper half of an f32), storage only; rounds to nearest even.
struct bf16 {
  std::uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<std::uint16_t>(u >> 16);
    }
  }
  explicit operator float() const {
    std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  }
};

// The DType of a C++ element type.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<double>() {
  return DType::F64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<f16>() {
  return DType::F16;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::BF16;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::I64;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::I32;
}
template <>
constexpr DType dtype_of<std::int16_t>() {
  return DType::I16;
}
template <>
constexpr DType dtype_of<std::int8_t>() {
  return DType::I8;
}
template <>
constexpr DType dtype_of<std::uint8_t>() {
  return DType::U8;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}

}  // namespace ember
