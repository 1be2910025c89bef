// PRelu's config: the activation formulas live in tensor/activation.hpp.
#include "ember/nn/activation.hpp"

namespace ember::nn {

PRelu PReluConfig::init(const Device& device) const {
  EMBER_CHECK(num_parameters > 0, "nn::PReluConfig: num_parameters must be > 0");
  return PRelu{Param<Tensor<1>>(Tensor<1>::full(Shape{num_parameters}, init_value, device))};
}

}  // namespace ember::nn
