// Dropout's forward.
#include "ember/nn/dropout.hpp"

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
}  // namespace detail

Dropout DropoutConfig::init() const {
  EMBER_CHECK(prob >= 0.0 && prob <= 1.0,
              "nn::DropoutConfig: prob must be in [0, 1], got " + std::to_string(prob));
  return Dropout{prob};
}

}  // namespace ember::nn
