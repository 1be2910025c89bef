#include "ember/base/dtype.hpp"

#include <cmath>

namespace ember {

const char* name(DType t) {
  switch (t) {
    case DType::F64:
      return "f64";
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::I64:
      return "i64";
    case DType::I32:
      return "i32";
    case DType::I16:
      return "i16";
    case DType::I8:
      return "i8";
    case DType::U8:
      return "u8";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

std::string to_string(DType t) { return name(t); }

const char* name(Kind k) {
  switch (k) {
    case Kind::Float:
      return "Float";
    case Kind::Int:
      return "Int";
    case Kind::Bool:
      return "Bool";
  }
  return "?";
}

// binary16 <-> binary32 by bit manipulation, round to nearest even.
f16::f16(float v) {
  std::uint32_t x;
  std::memcpy(&x, &v, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t absx = x & 0x7fffffffu;
  std::uint16_t h;
  if (absx > 0x7f800000u) {
    h = static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  } else if (absx >= 0x477ff000u) {
    h = static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow (rounds to) inf
  } else if (absx < 0x38800000u) {                   // subnormal or zero in f16
    if (absx < 0x33000000u) {
      h = static_cast<std::uint16_t>(sign);
    } else {
      const std::uint32_t e = absx >> 23;
      const std::uint32_t m = (absx & 0x7fffffu) | 0x800000u;
      // value = m * 2^(e-150); in units of 2^-24 (f16's smallest subnormal) that is
      // m * 2^(e-126): shift right by 126 - e, rounding to nearest even.
      const std::uint32_t shift = 126 - e;
      std::uint32_t r = m >> shift;
      const std::uint32_t rem = m & ((1u << shift) - 1);
      const std::uint32_t half = 1u << (shift - 1);
      if (rem > half || (rem == half && (r & 1u))) ++r;
      h = static_cast<std::uint16_t>(sign | r);
    }
  } else {
    std::uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15
    const std::uint32_t rem = r & 0x1fffu;
    r >>= 13;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
    h = static_cast<std::uint16_t>(sign | r);
  }
  bits = h;
}

f16::operator float() const {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t e = (bits >> 10) & 0x1fu;
  const std::uint32_t m = bits & 0x3ffu;
  float v;
  if (e == 0) {
    v = std::ldexp(static_cast<float>(m), -24);
    if (sign) v = -v;
    return v;
  }
  std::uint32_t x;
  if (e == 31) {
    x = sign | 0x7f800000u | (m << 13);
  } else {
    x = sign | ((e + 112) << 23) | (m << 13);
  }
  std::memcpy(&v, &x, 4);
  return v;
}

}  // namespace ember
