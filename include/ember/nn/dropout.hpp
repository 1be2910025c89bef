// Dropout, as torch.nn.Dropout: in training mode — an input on an autodiff device (Burn's
// rule) — each element is zeroed with probability prob and the rest scaled by
// 1 / (1 - prob); elsewhere the input passes through.
#pragma once

#include <cstddef>

#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

namespace detail {
DynTensor dropout_forward(const DynTensor& x, double prob);
DynTensor gaussian_noise_forward(const DynTensor& x, double std);
}  // namespace detail

struct Dropout {
  double prob = 0.5;
  EMBER_MODULE(Dropout, prob)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return detail::at_layer(
        *this, [&]() -> Tensor<D> { return Tensor<D>(detail::dropout_forward(x.dyn(), prob)); });
  }
};

struct DropoutConfig {
  double prob;
  EMBER_CONFIG(DropoutConfig, prob)
  Dropout init() const;
};

// Additive Gaussian noise (Burn's GaussianNoise): in training mode (an input on an autodiff
// device) x + N(0, std^2) drawn from the device's generator; elsewhere x passes through.
struct GaussianNoise {
  double std = 0.0;
  EMBER_MODULE(GaussianNoise, std)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<D> {
      return Tensor<D>(detail::gaussian_noise_forward(x.dyn(), std));
    });
  }
};

struct GaussianNoiseConfig {
  double std;
  EMBER_CONFIG(GaussianNoiseConfig, std)
  GaussianNoise init() const;
};

}  // namespace ember::nn
