// The Cpu's compile-time instantiation of the element-wise table (ir/scalar_table.hpp):
// eval<E, T>(a, b, p0, p1) expands the expression E::e into inline C++ over element type
// T, node by node with `if constexpr`, so the row loops that call it vectorize as
// hand-written code would. Primitive calls go to vmath (the vectorizable float versions)
// where it has the function and to <cmath> otherwise; the integer semantics are those of
// ir/scalar_expr.hpp (wrapping through the unsigned type, defined division and shifts).
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu/kernels/vmath.hpp"
#include "ember/ir/scalar_table.hpp"

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

template <class T>
constexpr Kind kind_of_type() {
  if constexpr (std::is_same_v<T, bool>) {
    return Kind::Bool;
  } else if constexpr (std::is_integral_v<T>) {
    return Kind::Int;
  } else {
    return Kind::Float;
  }
}

// The expression of UnaryFn / BinaryFn F for element type T, as a type eval can read.
template <ir::UnaryFn F, class T>
struct UnaryExpr {
  static constexpr const ir::sx::Expr& e = ir::sx::expr(ir::sx::def(F), kind_of_type<T>());
};
template <ir::BinaryFn F, class T>
struct BinaryExpr {
  static constexpr const ir::sx::Expr& e = ir::sx::expr(ir::sx::def(F), kind_of_type<T>());
};
// A reduction's identity, and its combine step for element type T: the combining
// function's expression, where bools (max / min for argmax / argmin) order as the integers
// 0 < 1.
template <ir::ReduceFn F>
struct ReduceIdentity {
  static constexpr ir::sx::Expr e = ir::sx::reduction(F).identity;
};
template <ir::ReduceFn F, class T>
struct ReduceStep {
  static constexpr const ir::sx::FnDef& def = ir::sx::def(ir::sx::reduction(F).combine);
  static constexpr Kind kind =
      kind_of_type<T>() == Kind::Bool && !ir::sx::defined_for(def, Kind::Bool) ? Kind::Int
                                                                               : kind_of_type<T>();
  static constexpr const ir::sx::Expr& e = ir::sx::expr(def, kind);
};

namespace eval_detail {

template <class T>
using Wide = std::make_unsigned_t<T>;
template <class T>
constexpr bool wraps = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <ir::sx::Math M, class T>
[[gnu::always_inline]] inline T call(T x, T y) {
  using ir::sx::Math;
  namespace vm = vmath;
  (void)y;
  if constexpr (M == Math::Fabs) {
    return std::fabs(x);
  } else if constexpr (M == Math::Sqrt) {
    return std::sqrt(x);
  } else if constexpr (M == Math::Exp) {
    return vm::exp(x);
  } else if constexpr (M == Math::Log) {
    return vm::log(x);
  } else if constexpr (M == Math::Log1p) {
    return vm::log1p(x);
  } else if constexpr (M == Math::Expm1) {
    return vm::expm1(x);
  } else if constexpr (M == Math::Sin) {
    return vm::sin(x);
  } else if constexpr (M == Math::Cos) {
    return vm::cos(x);
  } else if constexpr (M == Math::Tan) {
    return vm::tan(x);
  } else if constexpr (M == Math::Sinh) {
    return vm::sinh(x);
  } else if constexpr (M == Math::Cosh) {
    return vm::cosh(x);
  } else if constexpr (M == Math::Tanh) {
    return vm::tanh(x);
  } else if constexpr (M == Math::Asin) {
    return vm::asin(x);
  } else if constexpr (M == Math::Acos) {
    return vm::acos(x);
  } else if constexpr (M == Math::Atan) {
    return vm::atan(x);
  } else if constexpr (M == Math::Erf) {
    return vm::erf(x);
  } else if constexpr (M == Math::Erfc) {
    return std::erfc(x);
  } else if constexpr (M == Math::Floor) {
    return std::floor(x);
  } else if constexpr (M == Math::Ceil) {
    return std::ceil(x);
  } else if constexpr (M == Math::Rint) {  // half to even, as PyTorch
    return std::nearbyint(x);
  } else if constexpr (M == Math::Trunc) {
    return std::trunc(x);
  } else if constexpr (M == Math::Pow) {
    return std::pow(x, y);
  } else if constexpr (M == Math::Atan2) {
    return vm::atan2(x, y);
  } else {
    static_assert(M != M, "a primitive without a Cpu implementation");
  }
}

}  // namespace eval_detail

// The value of node I of E::e for operands a, b and parameters p0, p1 of type T.
template <class E, int I, class T>
[[gnu::always_inline]] inline auto eval_node(T a, T b, T p0, T p1) {
  using ir::sx::Op;
  using namespace eval_detail;
  constexpr ir::sx::Node n = E::e[I];
#define EM_ARG(k) eval_node<E, n.k, T>(a, b, p0, p1)
  if constexpr (n.op == Op::Const) {
    return static_cast<T>(n.value);
  } else if constexpr (n.op == Op::Lowest || n.op == Op::Highest) {
    constexpr bool lo = n.op == Op::Lowest;
    if constexpr (std::is_floating_point_v<T>) {
      return lo ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    } else {
      return lo ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
  } else if constexpr (n.op == Op::A) {
    return a;
  } else if constexpr (n.op == Op::B) {
    return b;
  } else if constexpr (n.op == Op::P0) {
    return p0;
  } else if constexpr (n.op == Op::P1) {
    return p1;
  } else if constexpr (n.op == Op::Neg) {
    if constexpr (wraps<T>) {
      return static_cast<T>(-static_cast<Wide<T>>(EM_ARG(a)));
    } else {
      return static_cast<T>(-EM_ARG(a));
    }
  } else if constexpr (n.op == Op::Not) {
    return !EM_ARG(a);
  } else if constexpr (n.op == Op::BitNot) {
    return static_cast<T>(~EM_ARG(a));
  } else if constexpr (n.op == Op::ToC) {
    return static_cast<T>(EM_ARG(a));
  } else if constexpr (n.op == Op::Add || n.op == Op::Sub || n.op == Op::Mul) {
    const T x = EM_ARG(a), y = EM_ARG(b);
    if constexpr (wraps<T>) {  // two's complement, never signed overflow
      const Wide<T> u = static_cast<Wide<T>>(x), v = static_cast<Wide<T>>(y);
      if constexpr (n.op == Op::Add) {
        return static_cast<T>(static_cast<Wide<T>>(u + v));
      } else if constexpr (n.op == Op::Sub) {
        return static_cast<T>(static_cast<Wide<T>>(u - v));
      } else {
        return static_cast<T>(static_cast<Wide<T>>(u * v));
      }
    } else if constexpr (n.op == Op::Add) {
      return static_cast<T>(x + y);
    } else if constexpr (n.op == Op::Sub) {
      return static_cast<T>(x - y);
    } else {
      return static_cast<T>(x * y);
    }
  } else if constexpr (n.op == Op::Div) {
    const T x = EM_ARG(a), y = EM_ARG(b);
    if constexpr (std::is_integral_v<T>) {
      // Zero divisors are rejected before the kernel runs; MIN / -1 wraps.
      return y == 0 ? T(0)
                    : (is_minus_one(y) ? static_cast<T>(-static_cast<Wide<T>>(x))
                                       : static_cast<T>(x / y));
    } else {
      return static_cast<T>(x / y);
    }
  } else if constexpr (n.op == Op::Mod) {
    const T x = EM_ARG(a), y = EM_ARG(b);
    if constexpr (std::is_integral_v<T>) {
      return (y == 0 || is_minus_one(y)) ? T(0) : static_cast<T>(x % y);
    } else {
      return std::fmod(x, y);
    }
  } else if constexpr (n.op == Op::Eq) {
    return EM_ARG(a) == EM_ARG(b);
  } else if constexpr (n.op == Op::Ne) {
    return EM_ARG(a) != EM_ARG(b);
  } else if constexpr (n.op == Op::Lt) {
    return EM_ARG(a) < EM_ARG(b);
  } else if constexpr (n.op == Op::Le) {
    return EM_ARG(a) <= EM_ARG(b);
  } else if constexpr (n.op == Op::Gt) {
    return EM_ARG(a) > EM_ARG(b);
  } else if constexpr (n.op == Op::Ge) {
    return EM_ARG(a) >= EM_ARG(b);
  } else if constexpr (n.op == Op::And) {
    return static_cast<bool>(EM_ARG(a) && EM_ARG(b));
  } else if constexpr (n.op == Op::Or) {
    return static_cast<bool>(EM_ARG(a) || EM_ARG(b));
  } else if constexpr (n.op == Op::BitAnd) {
    return static_cast<T>(EM_ARG(a) & EM_ARG(b));
  } else if constexpr (n.op == Op::BitOr) {
    return static_cast<T>(EM_ARG(a) | EM_ARG(b));
  } else if constexpr (n.op == Op::BitXor) {
    return static_cast<T>(EM_ARG(a) ^ EM_ARG(b));
  } else if constexpr (n.op == Op::Shl) {
    const T x = EM_ARG(a), s = EM_ARG(b);
    constexpr T bits = static_cast<T>(sizeof(T) * 8);
    return (is_negative(s) || s >= bits) ? T(0) : static_cast<T>(static_cast<Wide<T>>(x) << s);
  } else if constexpr (n.op == Op::Shr) {
    const T x = EM_ARG(a), s = EM_ARG(b);
    constexpr T bits = static_cast<T>(sizeof(T) * 8);
    return (is_negative(s) || s >= bits) ? static_cast<T>(is_negative(x) ? -1 : 0)
                                         : static_cast<T>(x >> s);
  } else if constexpr (n.op == Op::Select) {
    using R = decltype(EM_ARG(b));
    return EM_ARG(a) ? EM_ARG(b) : static_cast<R>(EM_ARG(c));
  } else if constexpr (n.op == Op::Call) {
    if constexpr (ir::sx::arity(n.fn) == 2) {
      return eval_detail::call<n.fn, T>(EM_ARG(a), EM_ARG(b));
    } else {
      return eval_detail::call<n.fn, T>(EM_ARG(a), T(0));
    }
  } else {
    static_assert(n.op != n.op, "unknown scalar expression node");
  }
#undef EM_ARG
}

// E::e at its root.
template <class E, class T>
[[gnu::always_inline]] inline auto eval(T a, T b, T p0, T p1) {
  static_assert(!E::e.empty(), "the function is not defined for this element type");
  return eval_node<E, E::e.root(), T>(a, b, p0, p1);
}

}  // namespace ember::cpu
