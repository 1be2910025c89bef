// The element-wise IR functions (ir::UnaryFn, ir::BinaryFn) for the Cpu kernels, one
// scalar function each, instantiated from their one definition in ir/scalar_table.hpp
// (cpu/kernels/scalar_eval.hpp), so the row loops that call them vectorize. The
// activations with a tuned vectorized form in vmath (sigmoid, silu, softplus, gelu,
// gelu_tanh, mish) call it instead; tests/cpu/test_scalar_table.cpp checks every
// (function, dtype) cell of these kernels against the table's expressions.
#pragma once

#include <type_traits>

#include "cpu/kernels/scalar_eval.hpp"
#include "cpu/kernels/vmath.hpp"
#include "ember/ir/scalar_table.hpp"

namespace ember::cpu {

// Whether UnaryFn / BinaryFn F is defined for element type T (bool is the Bool kind).
template <ir::UnaryFn F, class T>
constexpr bool unary_defined() {
  return ir::sx::defined_for(ir::sx::def(F), kind_of_type<T>());
}
template <ir::BinaryFn F, class T>
constexpr bool binary_defined() {
  return ir::sx::defined_for(ir::sx::def(F), kind_of_type<T>());
}
template <ir::UnaryFn F>
constexpr bool unary_is_predicate() {
  return ir::sx::gives_bool(F);
}
template <ir::BinaryFn F>
constexpr bool binary_is_comparison() {
  return ir::sx::gives_bool(F);
}

template <ir::UnaryFn F, class T>
inline auto unary_apply(T x, T p0, T p1) {
  using U = ir::UnaryFn;
  namespace vm = vmath;
  if constexpr (F == U::Sigmoid) {
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
  } else {
    return eval<UnaryExpr<F, T>, T>(x, T(0), p0, p1);
  }
}

template <ir::BinaryFn F, class T>
inline auto binary_apply(T a, T b) {
  return eval<BinaryExpr<F, T>, T>(a, b, T(0), T(0));
}

}  // namespace ember::cpu
