// Element-wise arithmetic on DynTensor for the update rules: short names over ops::binary
// and friends, so a rule reads as its formula. Each takes its first operand by value:
// pass std::move(x) when x is not needed afterwards and the op reuses x's buffer
// (Note [In-place step] in ember/optim/optimizer.hpp).
#pragma once

#include <utility>

#include "ember/tensor/ops.hpp"

namespace ember::optim::math {

inline DynTensor add(DynTensor a, DynTensor b) {
  return ops::binary(ir::BinaryFn::Add, std::move(a), std::move(b));
}
inline DynTensor sub(DynTensor a, DynTensor b) {
  return ops::binary(ir::BinaryFn::Sub, std::move(a), std::move(b));
}
inline DynTensor mul(DynTensor a, DynTensor b) {
  return ops::binary(ir::BinaryFn::Mul, std::move(a), std::move(b));
}
inline DynTensor div(DynTensor a, DynTensor b) {
  return ops::binary(ir::BinaryFn::Div, std::move(a), std::move(b));
}
inline DynTensor maximum(DynTensor a, DynTensor b) {
  return ops::binary(ir::BinaryFn::Max, std::move(a), std::move(b));
}
inline DynTensor scale(DynTensor a, double s) {
  return ops::binary_scalar(ir::BinaryFn::Mul, std::move(a), s);
}
inline DynTensor divide(DynTensor a, double s) {
  return ops::binary_scalar(ir::BinaryFn::Div, std::move(a), s);
}
inline DynTensor add_scalar(DynTensor a, double s) {
  return ops::binary_scalar(ir::BinaryFn::Add, std::move(a), s);
}
inline DynTensor sqrt(DynTensor a) { return ops::unary(ir::UnaryFn::Sqrt, std::move(a)); }
inline DynTensor square(DynTensor a) { return ops::unary(ir::UnaryFn::Square, std::move(a)); }
inline DynTensor sign(DynTensor a) { return ops::unary(ir::UnaryFn::Sign, std::move(a)); }
inline DynTensor zeros_like(const DynTensor& a) {
  return ops::zeros(a.shape(), a.dtype(), a.device());
}
// a + alpha * b
inline DynTensor axpy(DynTensor a, double alpha, DynTensor b) {
  return add(std::move(a), scale(std::move(b), alpha));
}
// beta * a + (1 - beta) * b: an exponential moving average of b
inline DynTensor lerp_to(DynTensor a, double beta, DynTensor b) {
  return add(scale(std::move(a), beta), scale(std::move(b), 1.0 - beta));
}
// The sum of every element, read on the host (a sync point).
double sum_value(DynTensor a);

}  // namespace ember::optim::math
