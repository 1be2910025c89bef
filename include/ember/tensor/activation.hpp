// Activation functions, as free functions over float tensors of any rank, with
// torch.nn.functional's names and defaults (and Burn's for shrink, hard_sigmoid and
// quiet_softmax). Each formula lives here once: the modules of nn/activation.hpp call these.
// Functions that check their arguments have a detail:: form taking the caller's name, so a
// module's error names the module ("nn::Glu: ...") and a direct call names the function.
#pragma once

#include <cmath>
#include <string>

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

namespace detail {

// x's two halves along dim (an even extent).
template <std::size_t D>
std::vector<Tensor<D>> halves(const Tensor<D>& x, std::int64_t dim, const char* who) {
  const std::size_t d = ops::normalize_dim(dim, D, who);
  EMBER_CHECK(x.shape()[d] % 2 == 0, std::string(who) + ": dim " + std::to_string(dim) +
                                         " of shape " + x.shape().to_string() +
                                         " must have an even extent");
  return x.chunk(2, std::int64_t(d));
}

template <std::size_t D>
Tensor<D> hardtanh(const Tensor<D>& x, double min_val, double max_val, const char* who) {
  EMBER_CHECK(min_val <= max_val, std::string(who) + ": min_val " + std::to_string(min_val) +
                                      " must not exceed max_val " + std::to_string(max_val));
  return x.clamp(min_val, max_val);
}

// Burn's shrink: x - bias above lambda, x + bias below -lambda, 0 between.
template <std::size_t D>
Tensor<D> shrink(const Tensor<D>& x, double lambda, double bias, const char* who) {
  EMBER_CHECK(std::isfinite(lambda) && std::isfinite(bias),
              std::string(who) + ": lambda and bias must be finite, got " + std::to_string(lambda) +
                  ", " + std::to_string(bias));
  const Tensor<D, Bool> inside = x.abs().lower_equal_elem(lambda);
  if (bias == 0.0) return x.mask_fill(inside, 0.0);
  return (x - x.sign().mul_scalar(bias)).mask_fill(inside, 0.0);
}

template <std::size_t D>
Tensor<D> softshrink(const Tensor<D>& x, double lambd, const char* who) {
  EMBER_CHECK(lambd >= 0, std::string(who) + ": lambd must be >= 0, got " + std::to_string(lambd));
  return shrink(x, lambd, lambd, who);
}

template <std::size_t D>
Tensor<D> celu(const Tensor<D>& x, double alpha, const char* who) {
  EMBER_CHECK(
      alpha != 0.0 && std::isfinite(alpha),
      std::string(who) + ": alpha must be finite and non-zero, got " + std::to_string(alpha));
  return Tensor<D>(ops::unary(ir::UnaryFn::Elu, x.div_scalar(alpha).dyn(), 1.0)).mul_scalar(alpha);
}

template <std::size_t D>
Tensor<D> glu(const Tensor<D>& x, std::int64_t dim, const char* who) {
  auto h = halves(x, dim, who);
  return h[0] * activation::sigmoid(h[1]);
}

// max(0, x) + weight min(0, x); weight [C] over dim 1 of [N, C, *], or one shared value.
template <std::size_t D>
Tensor<D> prelu(const Tensor<D>& x, const Tensor<1>& weight, const char* who) {
  const std::size_t n = weight.shape()[0];
  DynTensor w = weight.dyn();
  if (n > 1) {
    EMBER_CHECK(D >= 2 && x.shape()[1] == n, std::string(who) + ": a weight of " +
                                                 std::to_string(n) + " values needs an input [N, " +
                                                 std::to_string(n) + ", *], got shape " +
                                                 x.shape().to_string());
    std::vector<std::size_t> s(D, 1);
    s[1] = n;
    w = ops::reshape(std::move(w), Shape(std::move(s)));
  }
  return Tensor<D>(ops::binary(ir::BinaryFn::Add, x.clamp_min(0.0).dyn(),
                               ops::binary(ir::BinaryFn::Mul, x.clamp_max(0.0).dyn(), w)));
}

// Negative inputs scaled by a slope drawn from U(lower, upper) per element (from x's device
// generator) when training, by (lower + upper) / 2 otherwise.
template <std::size_t D>
Tensor<D> rrelu(const Tensor<D>& x, double lower, double upper, bool training, const char* who) {
  EMBER_CHECK(lower <= upper && std::isfinite(lower) && std::isfinite(upper),
              std::string(who) + ": expected finite lower <= upper, got " + std::to_string(lower) +
                  ", " + std::to_string(upper));
  if (!training) return Tensor<D>(ops::unary(ir::UnaryFn::LeakyRelu, x.dyn(), (lower + upper) / 2));
  const DynTensor slope =
      ops::random(x.shape(), Distribution::uniform(lower, upper), x.dtype(), x.device());
  return Tensor<D>(ops::mask_where(ops::binary_scalar(ir::BinaryFn::Lt, x.dyn(), 0.0),
                                   ops::binary(ir::BinaryFn::Mul, x.dyn(), slope), x.dyn()));
}

}  // namespace detail

// Softplus as torch.nn.functional.softplus: log(1 + exp(beta x)) / beta, and x itself where
// beta x > threshold.
template <std::size_t D>
Tensor<D> softplus(const Tensor<D>& x, double beta = 1.0, double threshold = 20.0) {
  const Tensor<D> bx = beta == 1.0 ? x : x.mul_scalar(beta);
  Tensor<D> y(ops::unary(ir::UnaryFn::Softplus, bx.dyn()));
  if (beta != 1.0) y = y.div_scalar(beta);
  return y.mask_where(bx.greater_elem(threshold), x);
}
// log(sigmoid(x)) = -softplus(-x), without softplus's threshold.
template <std::size_t D>
Tensor<D> logsigmoid(const Tensor<D>& x) {
  return -Tensor<D>(ops::unary(ir::UnaryFn::Softplus, (-x).dyn()));
}
template <std::size_t D>
Tensor<D> leaky_relu(const Tensor<D>& x, double negative_slope = 0.01) {
  return Tensor<D>(ops::unary(ir::UnaryFn::LeakyRelu, x.dyn(), negative_slope));
}
template <std::size_t D>
Tensor<D> elu(const Tensor<D>& x, double alpha = 1.0) {
  return Tensor<D>(ops::unary(ir::UnaryFn::Elu, x.dyn(), alpha));
}
// alpha elu(x / alpha); alpha must be non-zero.
template <std::size_t D>
Tensor<D> celu(const Tensor<D>& x, double alpha = 1.0) {
  return detail::celu(x, alpha, "activation::celu");
}
// scale elu(x, alpha) with PyTorch's constants.
template <std::size_t D>
Tensor<D> selu(const Tensor<D>& x) {
  return elu(x, 1.6732632423543772848170429916717).mul_scalar(1.0507009873554804934193349852946);
}
// clamp(alpha * x + beta, 0, 1); Burn's defaults alpha = 0.2, beta = 0.5 (PyTorch's
// Hardsigmoid is alpha = 1 / 6).
template <std::size_t D>
Tensor<D> hard_sigmoid(const Tensor<D>& x, double alpha = 0.2, double beta = 0.5) {
  return x.mul_scalar(alpha).add_scalar(beta).clamp(0.0, 1.0);
}
// x relu6(x + 3) / 6.
template <std::size_t D>
Tensor<D> hardswish(const Tensor<D>& x) {
  return x * hard_sigmoid(x, 1.0 / 6.0, 0.5);
}
// clamp(x, min_val, max_val).
template <std::size_t D>
Tensor<D> hardtanh(const Tensor<D>& x, double min_val = -1.0, double max_val = 1.0) {
  return detail::hardtanh(x, min_val, max_val, "activation::hardtanh");
}
template <std::size_t D>
Tensor<D> relu6(const Tensor<D>& x) {
  return detail::hardtanh(x, 0.0, 6.0, "activation::relu6");
}
// x / (1 + |x|).
template <std::size_t D>
Tensor<D> softsign(const Tensor<D>& x) {
  return x / (x.abs() + 1.0);
}
template <std::size_t D>
Tensor<D> tanhshrink(const Tensor<D>& x) {
  return x - activation::tanh(x);
}
// Burn's shrink (ONNX Shrink): x - bias where x > lambda, x + bias where x < -lambda, else 0.
// Burn's defaults (ONNX's bias is 0).
template <std::size_t D>
Tensor<D> shrink(const Tensor<D>& x, double lambda = 0.5, double bias = 0.5) {
  return detail::shrink(x, lambda, bias, "activation::shrink");
}
// x where |x| > lambd, else 0: shrink with bias 0.
template <std::size_t D>
Tensor<D> hardshrink(const Tensor<D>& x, double lambd = 0.5) {
  return detail::shrink(x, lambd, 0.0, "activation::hardshrink");
}
// x - lambd above lambd, x + lambd below -lambd, 0 between: shrink with bias = lambd >= 0.
template <std::size_t D>
Tensor<D> softshrink(const Tensor<D>& x, double lambd = 0.5) {
  return detail::softshrink(x, lambd, "activation::softshrink");
}
// x where x > threshold, else value.
template <std::size_t D>
Tensor<D> threshold(const Tensor<D>& x, double threshold, double value) {
  return x.mask_fill(x.lower_equal_elem(threshold), value);
}
// ONNX's ThresholdedRelu: x where x > alpha, else 0.
template <std::size_t D>
Tensor<D> thresholded_relu(const Tensor<D>& x, double alpha = 1.0) {
  return threshold(x, alpha, 0.0);
}
// x halved along dim into a, b: a sigmoid(b).
template <std::size_t D>
Tensor<D> glu(const Tensor<D>& x, std::int64_t dim = -1) {
  return detail::glu(x, dim, "activation::glu");
}
// silu(gate) * value (Burn's SwiGlu after its two projections).
template <std::size_t D>
Tensor<D> swiglu(const Tensor<D>& gate, const Tensor<D>& value) {
  return activation::silu(gate) * value;
}
// x halved along dim into a, b: silu(a) b.
template <std::size_t D>
Tensor<D> swiglu(const Tensor<D>& x, std::int64_t dim = -1) {
  auto h = detail::halves(x, dim, "activation::swiglu");
  return swiglu(h[0], h[1]);
}
// max(0, x) + weight min(0, x), weight [C] over dim 1 of [N, C, *] (or [1], shared).
template <std::size_t D>
Tensor<D> prelu(const Tensor<D>& x, const Tensor<1>& weight) {
  return detail::prelu(x, weight, "activation::prelu");
}
// As torch.nn.functional.rrelu: slopes drawn from U(lower, upper) when training (from x's
// device generator), (lower + upper) / 2 otherwise.
template <std::size_t D>
Tensor<D> rrelu(const Tensor<D>& x, double lower = 1.0 / 8.0, double upper = 1.0 / 3.0,
                bool training = false) {
  return detail::rrelu(x, lower, upper, training, "activation::rrelu");
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
