// Dropout's forward.
#include "ember/nn/dropout.hpp"

#include <cmath>

#include "ember/tensor/module_ops.hpp"

namespace ember::nn {

namespace detail {
DynTensor dropout_forward(const DynTensor& x, double prob) {
  // Training is an autodiff device's forward (module_ops::dropout's `training`).
  return module_ops::detail::dropout(x, prob, x.device().is_autodiff(), "nn::Dropout");
}

DynTensor gaussian_noise_forward(const DynTensor& x, double std) {
  EMBER_CHECK(std >= 0.0 && std::isfinite(std),
              "nn::GaussianNoise: std must be finite and >= 0, got " + std::to_string(std));
  EMBER_CHECK(x.kind() == Kind::Float,
              std::string("nn::GaussianNoise: expected a float input, got ") + name(x.dtype()));
  if (!x.device().is_autodiff() || std == 0.0) return x;
  return ops::binary(ir::BinaryFn::Add, x,
                     ops::random(x.shape(), Distribution::normal(0.0, std), x.dtype(), x.device()));
}
}  // namespace detail

Dropout DropoutConfig::init() const {
  EMBER_CHECK(prob >= 0.0 && prob <= 1.0,
              "nn::DropoutConfig: prob must be in [0, 1], got " + std::to_string(prob));
  return Dropout{prob};
}

GaussianNoise GaussianNoiseConfig::init() const {
  EMBER_CHECK(std >= 0.0 && std::isfinite(std),
              "nn::GaussianNoiseConfig: std must be finite and >= 0, got " + std::to_string(std));
  return GaussianNoise{std};
}

}  // namespace ember::nn
