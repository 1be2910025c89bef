// The activation modules with more than one line of logic.
#include "ember/nn/activation.hpp"

#include <cmath>

namespace ember::nn {

namespace detail {
DynTensor rrelu_forward(const DynTensor& x, double lower, double upper) {
  EMBER_CHECK(lower <= upper && std::isfinite(lower) && std::isfinite(upper),
              "nn::RRelu: expected finite lower <= upper, got " + std::to_string(lower) + ", " +
                  std::to_string(upper));
  EMBER_CHECK(x.kind() == Kind::Float,
              std::string("nn::RRelu: expected a float input, got ") + name(x.dtype()));
  if (!x.device().is_autodiff()) return ops::unary(ir::UnaryFn::LeakyRelu, x, (lower + upper) / 2);
  const DynTensor slope =
      ops::random(x.shape(), Distribution::uniform(lower, upper), x.dtype(), x.device());
  const DynTensor negative = ops::binary_scalar(ir::BinaryFn::Lt, x, 0.0);
  return ops::mask_where(negative, ops::binary(ir::BinaryFn::Mul, x, slope), x);
}
}  // namespace detail

DynTensor PRelu::forward_dyn(const DynTensor& x) const {
  return detail::at_layer(*this, [&]() -> DynTensor {
    const std::size_t n = weight.shape()[0];
    DynTensor w = weight.val().dyn();
    if (n > 1) {
      EMBER_CHECK(x.rank() >= 2 && x.shape()[1] == n,
                  "nn::PRelu: " + std::to_string(n) + " parameters need an input [N, " +
                      std::to_string(n) + ", *], got shape " + x.shape().to_string());
      std::vector<std::size_t> s(x.rank(), 1);
      s[1] = n;
      w = ops::reshape(std::move(w), Shape(std::move(s)));
    }
    DynTensor pos = ops::clamp(x, 0.0, std::nullopt), neg = ops::clamp(x, std::nullopt, 0.0);
    return ops::binary(ir::BinaryFn::Add, std::move(pos),
                       ops::binary(ir::BinaryFn::Mul, std::move(neg), w));
  });
}

PRelu PReluConfig::init(const Device& device) const {
  EMBER_CHECK(num_parameters > 0, "nn::PReluConfig: num_parameters must be > 0");
  return PRelu{Param<Tensor<1>>(Tensor<1>::full(Shape{num_parameters}, init_value, device))};
}

}  // namespace ember::nn
