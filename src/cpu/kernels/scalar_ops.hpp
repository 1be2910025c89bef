// The scalar definition of every element-wise IR function (ir::UnaryFn, ir::BinaryFn) for
// the Cpu kernels: one `if constexpr` arm each, branch-free where the function allows, so
// the row loops that instantiate them vectorize. Semantics follow PyTorch: NaN propagates
// through max/min/relu/clamp, rem takes the divisor's sign, integer division truncates.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cpu/kernels/vmath.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cpu {

// x < 0 without -Wtype-limits warnings for unsigned types.
template <class T>
constexpr bool is_negative(T x) {
  if constexpr (std::is_signed_v<T>) {
    return x < T(0);
  } else {
    return false;
  }
}
// b == -1 for signed integers (the one divisor whose quotient can overflow).
template <class T>
constexpr bool is_minus_one(T b) {
  if constexpr (std::is_signed_v<T>) {
    return b == T(-1);
  } else {
    return false;
  }
}

// Whether UnaryFn F is defined for element type T (bool is the Bool kind).
template <ir::UnaryFn F, class T>
constexpr bool unary_defined() {
  using U = ir::UnaryFn;
  if constexpr (std::is_same_v<T, bool>) {
    return F == U::LogicalNot;
  } else if constexpr (std::is_integral_v<T>) {
    return F == U::Neg || F == U::Abs || F == U::Sign || F == U::Square || F == U::Clamp ||
           F == U::BitNot;
  } else {
    return F != U::LogicalNot && F != U::BitNot;
  }
}
template <ir::UnaryFn F>
constexpr bool unary_is_predicate() {
  return F == ir::UnaryFn::IsNan || F == ir::UnaryFn::IsInf || F == ir::UnaryFn::IsFinite;
}

template <ir::UnaryFn F, class T>
inline auto unary_apply(T x, T p0, T p1) {
  using U = ir::UnaryFn;
  namespace vm = vmath;
  if constexpr (F == U::Neg) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(x));  // wraps, no UB
    } else {
      return -x;
    }
  } else if constexpr (F == U::Abs) {
    if constexpr (std::is_integral_v<T>) {
      return is_negative(x) ? static_cast<T>(-static_cast<std::make_unsigned_t<T>>(x)) : x;
    } else {
      return std::fabs(x);
    }
  } else if constexpr (F == U::Sign) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>((x > 0) - is_negative(x));
    } else {
      return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);  // keeps NaN and signed zero
    }
  } else if constexpr (F == U::Square) {
    if constexpr (std::is_integral_v<T>) {
      using W = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<W>(static_cast<W>(x) * static_cast<W>(x)));
    } else {
      return x * x;
    }
  } else if constexpr (F == U::Recip) {
    return T(1) / x;
  } else if constexpr (F == U::Sqrt) {
    return std::sqrt(x);
  } else if constexpr (F == U::Rsqrt) {
    return T(1) / std::sqrt(x);
  } else if constexpr (F == U::Exp) {
    return vm::exp(x);
  } else if constexpr (F == U::Log) {
    return vm::log(x);
  } else if constexpr (F == U::Log1p) {
    return vm::log1p(x);
  } else if constexpr (F == U::Expm1) {
    return vm::expm1(x);
  } else if constexpr (F == U::Sin) {
    return vm::sin(x);
  } else if constexpr (F == U::Cos) {
    return vm::cos(x);
  } else if constexpr (F == U::Tan) {
    return vm::tan(x);
  } else if constexpr (F == U::Sinh) {
    return vm::sinh(x);
  } else if constexpr (F == U::Cosh) {
    return vm::cosh(x);
  } else if constexpr (F == U::Tanh) {
    return vm::tanh(x);
  } else if constexpr (F == U::Asin) {
    return vm::asin(x);
  } else if constexpr (F == U::Acos) {
    return vm::acos(x);
  } else if constexpr (F == U::Atan) {
    return vm::atan(x);
  } else if constexpr (F == U::Erf) {
    return vm::erf(x);
  } else if constexpr (F == U::Floor) {
    return std::floor(x);
  } else if constexpr (F == U::Ceil) {
    return std::ceil(x);
  } else if constexpr (F == U::Round) {
    return std::nearbyint(x);  // half to even, as PyTorch
  } else if constexpr (F == U::Trunc) {
    return std::trunc(x);
  } else if constexpr (F == U::Relu) {
    return x < T(0) ? T(0) : x;
  } else if constexpr (F == U::Sigmoid) {
    return vm::sigmoid(x);
  } else if constexpr (F == U::Gelu) {
    return vm::gelu(x);
  } else if constexpr (F == U::GeluTanh) {
    return vm::gelu_tanh(x);
  } else if constexpr (F == U::Silu) {
    return vm::silu(x);
  } else if constexpr (F == U::Softplus) {
    return vm::softplus(x);
  } else if constexpr (F == U::Mish) {
    return vm::mish(x);
  } else if constexpr (F == U::LeakyRelu) {
    return x < T(0) ? x * p0 : x;
  } else if constexpr (F == U::Elu) {
    return x < T(0) ? p0 * vm::expm1(x) : x;
  } else if constexpr (F == U::Clamp) {
    // For floats a NaN bound compares false, so it means no bound; NaN x stays NaN.
    const T lo = x < p0 ? p0 : x;
    return lo > p1 ? p1 : lo;
  } else if constexpr (F == U::PowScalar) {
    return p0 == T(2) ? x * x : std::pow(x, p0);
  } else if constexpr (F == U::IsNan) {
    return x != x;
  } else if constexpr (F == U::IsInf) {
    return std::fabs(x) == std::numeric_limits<T>::infinity();
  } else if constexpr (F == U::IsFinite) {
    return std::fabs(x) < std::numeric_limits<T>::infinity();
  } else if constexpr (F == U::LogicalNot) {
    return !x;
  } else if constexpr (F == U::BitNot) {
    return static_cast<T>(~x);
  }
}

template <ir::BinaryFn F, class T>
constexpr bool binary_defined() {
  using B = ir::BinaryFn;
  const bool cmp = F == B::Eq || F == B::Ne || F == B::Gt || F == B::Ge || F == B::Lt || F == B::Le;
  if constexpr (std::is_same_v<T, bool>) {
    return cmp || F == B::And || F == B::Or || F == B::Xor;
  } else if constexpr (std::is_integral_v<T>) {
    return cmp || F == B::Add || F == B::Sub || F == B::Mul || F == B::Div || F == B::Rem ||
           F == B::Max || F == B::Min || F == B::BitAnd || F == B::BitOr || F == B::BitXor ||
           F == B::Shl || F == B::Shr;
  } else {
    return cmp || F == B::Add || F == B::Sub || F == B::Mul || F == B::Div || F == B::Rem ||
           F == B::Pow || F == B::Atan2 || F == B::Max || F == B::Min;
  }
}
template <ir::BinaryFn F>
constexpr bool binary_is_comparison() {
  using B = ir::BinaryFn;
  return F == B::Eq || F == B::Ne || F == B::Gt || F == B::Ge || F == B::Lt || F == B::Le;
}

template <ir::BinaryFn F, class T>
inline auto binary_apply(T a, T b) {
  using B = ir::BinaryFn;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                (F == B::Add || F == B::Sub || F == B::Mul)) {
    // Integer arithmetic wraps (two's complement) instead of overflowing into UB.
    using W = std::make_unsigned_t<T>;
    const W x = static_cast<W>(a), y = static_cast<W>(b);
    if constexpr (F == B::Add) return static_cast<T>(static_cast<W>(x + y));
    if constexpr (F == B::Sub) return static_cast<T>(static_cast<W>(x - y));
    if constexpr (F == B::Mul) return static_cast<T>(static_cast<W>(x * y));
  } else if constexpr (F == B::Add) {
    return a + b;
  } else if constexpr (F == B::Sub) {
    return a - b;
  } else if constexpr (F == B::Mul) {
    return a * b;
  } else if constexpr (F == B::Div) {
    if constexpr (std::is_integral_v<T>) {
      // Zero divisors are rejected before the kernel runs; MIN / -1 wraps.
      return b == 0 ? T(0)
                    : (is_minus_one(b) ? static_cast<T>(-static_cast<std::make_unsigned_t<T>>(a))
                                       : static_cast<T>(a / b));
    } else {
      return a / b;
    }
  } else if constexpr (F == B::Rem) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0 || is_minus_one(b)) return T(0);
      T r = static_cast<T>(a % b);
      return (r != 0 && (is_negative(r) != is_negative(b))) ? static_cast<T>(r + b) : r;
    } else {
      T r = std::fmod(a, b);
      return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
    }
  } else if constexpr (F == B::Pow) {
    return std::pow(a, b);
  } else if constexpr (F == B::Atan2) {
    return vmath::atan2(a, b);
  } else if constexpr (F == B::Max) {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      return a != a ? a : (b != b ? b : (a > b ? a : b));
    }
  } else if constexpr (F == B::Min) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      return a != a ? a : (b != b ? b : (a < b ? a : b));
    }
  } else if constexpr (F == B::Eq) {
    return a == b;
  } else if constexpr (F == B::Ne) {
    return a != b;
  } else if constexpr (F == B::Gt) {
    return a > b;
  } else if constexpr (F == B::Ge) {
    return a >= b;
  } else if constexpr (F == B::Lt) {
    return a < b;
  } else if constexpr (F == B::Le) {
    return a <= b;
  } else if constexpr (F == B::And) {
    return static_cast<bool>(a && b);
  } else if constexpr (F == B::Or) {
    return static_cast<bool>(a || b);
  } else if constexpr (F == B::Xor) {
    return static_cast<bool>(a != b);
  } else if constexpr (F == B::BitAnd) {
    return static_cast<T>(a & b);
  } else if constexpr (F == B::BitOr) {
    return static_cast<T>(a | b);
  } else if constexpr (F == B::BitXor) {
    return static_cast<T>(a ^ b);
  } else if constexpr (F == B::Shl) {
    using W = std::make_unsigned_t<T>;
    constexpr T bits = static_cast<T>(sizeof(T) * 8);
    return (is_negative(b) || b >= bits) ? T(0) : static_cast<T>(static_cast<W>(a) << b);
  } else if constexpr (F == B::Shr) {
    constexpr T bits = static_cast<T>(sizeof(T) * 8);
    return (is_negative(b) || b >= bits) ? static_cast<T>(is_negative(a) ? -1 : 0)
                                         : static_cast<T>(a >> b);
  }
}

}  // namespace ember::cpu
