// Neural-network functions over float tensors that are more than one element-wise step:
// the free functions behind nn layers (as torch.nn.functional). Each validates its input
// and throws ember::Error naming itself and the shapes.
#pragma once

#include <cstddef>
#include <optional>

#include "ember/tensor/ops.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::module_ops {

// ---- layer_norm ----
// y = (x - mean) / sqrt(var + eps) * weight + bias over x's trailing dims, with the biased
// variance, as torch.nn.functional.layer_norm. The normalised dims are normalized_shape,
// or, in the overloads taking weight, the weight's W dims. weight and bias are optional.
template <std::size_t D, std::size_t W>
Tensor<D> layer_norm(const Tensor<D>& x, const Shape& normalized_shape,
                     const std::optional<Tensor<W>>& weight, const std::optional<Tensor<W>>& bias,
                     double eps = 1e-5) {
  static_assert(W >= 1 && W <= D, "layer_norm: weight and bias have 1..D dims");
  std::optional<DynTensor> w, b;
  if (weight) w = weight->dyn();
  if (bias) b = bias->dyn();
  return Tensor<D>(ops::layer_norm(x.dyn(), normalized_shape, std::move(w), std::move(b), eps));
}
// Without weight and bias.
template <std::size_t D>
Tensor<D> layer_norm(const Tensor<D>& x, const Shape& normalized_shape, double eps = 1e-5) {
  return Tensor<D>(ops::layer_norm(x.dyn(), normalized_shape, std::nullopt, std::nullopt, eps));
}
// Over the trailing W dims of x, with a weight (and a bias) of those dims.
template <std::size_t D, std::size_t W>
Tensor<D> layer_norm(const Tensor<D>& x, const Tensor<W>& weight, const Tensor<W>& bias,
                     double eps = 1e-5) {
  static_assert(W >= 1 && W <= D, "layer_norm: weight and bias have 1..D dims");
  return Tensor<D>(ops::layer_norm(x.dyn(), weight.shape(), weight.dyn(), bias.dyn(), eps));
}
template <std::size_t D, std::size_t W>
Tensor<D> layer_norm(const Tensor<D>& x, const Tensor<W>& weight, double eps = 1e-5) {
  static_assert(W >= 1 && W <= D, "layer_norm: weight has 1..D dims");
  return Tensor<D>(ops::layer_norm(x.dyn(), weight.shape(), weight.dyn(), std::nullopt, eps));
}

}  // namespace ember::module_ops
