// Activation functions, as free functions over float tensors of any rank.
#pragma once

#include "ember/tensor/tensor.hpp"

namespace ember::activation {

#define EMBER_ACTIVATION(fname, fn)                                    \
  template <std::size_t D>                                             \
  Tensor<D> fname(const Tensor<D>& x) {                                \
    return Tensor<D>(ops::unary(ir::UnaryFn::fn, x.dyn()));            \
  }                                                                    \
  template <std::size_t D>                                             \
  Tensor<D> fname(Tensor<D>&& x) {                                     \
    return Tensor<D>(ops::unary(ir::UnaryFn::fn, std::move(x).dyn())); \
  }
EMBER_ACTIVATION(relu, Relu)
EMBER_ACTIVATION(sigmoid, Sigmoid)
EMBER_ACTIVATION(gelu, Gelu)
EMBER_ACTIVATION(gelu_tanh, GeluTanh)
EMBER_ACTIVATION(silu, Silu)
EMBER_ACTIVATION(mish, Mish)
EMBER_ACTIVATION(tanh, Tanh)
#undef EMBER_ACTIVATION

template <std::size_t D>
Tensor<D> softplus(const Tensor<D>& x, double beta = 1.0) {
  if (beta == 1.0) return Tensor<D>(ops::unary(ir::UnaryFn::Softplus, x.dyn()));
  return Tensor<D>(ops::unary(ir::UnaryFn::Softplus, x.mul_scalar(beta).dyn())).div_scalar(beta);
}
template <std::size_t D>
Tensor<D> leaky_relu(const Tensor<D>& x, double negative_slope = 0.01) {
  return Tensor<D>(ops::unary(ir::UnaryFn::LeakyRelu, x.dyn(), negative_slope));
}
template <std::size_t D>
Tensor<D> elu(const Tensor<D>& x, double alpha = 1.0) {
  return Tensor<D>(ops::unary(ir::UnaryFn::Elu, x.dyn(), alpha));
}
// clamp(alpha * x + beta, 0, 1); Burn's defaults alpha = 0.2, beta = 0.5.
template <std::size_t D>
Tensor<D> hard_sigmoid(const Tensor<D>& x, double alpha = 0.2, double beta = 0.5) {
  return x.mul_scalar(alpha).add_scalar(beta).clamp(0.0, 1.0);
}
template <std::size_t D>
Tensor<D> softmax(const Tensor<D>& x, std::int64_t dim) {
  return Tensor<D>(ops::softmax(x.dyn(), dim));
}
template <std::size_t D>
Tensor<D> log_softmax(const Tensor<D>& x, std::int64_t dim) {
  return Tensor<D>(ops::log_softmax(x.dyn(), dim));
}

template <std::size_t D>
Tensor<D> softmin(const Tensor<D>& x, std::int64_t dim) {
  return Tensor<D>(ops::softmin(x.dyn(), dim));
}
// Burn's quiet_softmax: exp(x_i) / (1 + sum_j exp(x_j)).
template <std::size_t D>
Tensor<D> quiet_softmax(const Tensor<D>& x, std::int64_t dim) {
  return Tensor<D>(ops::quiet_softmax(x.dyn(), dim));
}

}  // namespace ember::activation
