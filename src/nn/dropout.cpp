// Dropout's forward.
#include "ember/nn/dropout.hpp"

#include <cmath>

namespace ember::nn {

namespace detail {
DynTensor dropout_forward(const DynTensor& x, double prob) {
  EMBER_CHECK(prob >= 0.0 && prob <= 1.0,
              "nn::Dropout: prob must be in [0, 1], got " + std::to_string(prob));
  EMBER_CHECK(x.kind() == Kind::Float,
              std::string("nn::Dropout: expected a float input, got ") + name(x.dtype()));
  if (!x.device().is_autodiff() || prob == 0.0) return x;
  if (prob == 1.0) return ops::binary_scalar(ir::BinaryFn::Mul, x, 0.0);
  DynTensor keep =
      ops::random(x.shape(), Distribution::bernoulli(1.0 - prob), x.dtype(), x.device());
  return ops::binary_scalar(ir::BinaryFn::Mul, ops::binary(ir::BinaryFn::Mul, x, std::move(keep)),
                            1.0 / (1.0 - prob));
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
