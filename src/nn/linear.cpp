// Linear's forward and init.
#include "ember/nn/linear.hpp"

namespace ember::nn {

namespace detail {
DynTensor linear(const DynTensor& x, const DynTensor& weight, const std::optional<DynTensor>& bias,
                 const char* layer) {
  const std::size_t in = weight.shape()[1];
  EMBER_CHECK(x.rank() >= 1 && x.shape()[x.rank() - 1] == in,
              std::string(layer) + ": input of shape " + x.shape().to_string() +
                  " must end in d_input = " + std::to_string(in) + " (weight " +
                  weight.shape().to_string() + ")");
  DynTensor w_t = ops::transpose(weight);
  DynTensor y = x.rank() == 2 ? ops::matmul(x, std::move(w_t)) : [&] {
    Shape out = x.shape();
    out[out.rank() - 1] = weight.shape()[0];
    DynTensor flat = ops::reshape(x, std::vector<std::int64_t>{-1, std::int64_t(in)});
    return ops::reshape(ops::matmul(std::move(flat), std::move(w_t)), out);
  }();
  if (bias) y = ops::binary(ir::BinaryFn::Add, std::move(y), *bias);
  return y;
}
}  // namespace detail

Linear LinearConfig::init(const Device& device) const {
  EMBER_CHECK(d_input > 0 && d_output > 0,
              "nn::LinearConfig: d_input and d_output must be > 0, got " + std::to_string(d_input) +
                  " and " + std::to_string(d_output));
  const Fans fans{d_input, d_output};
  Linear l{Param<Tensor<2>>(initializer.init<2>(Shape{d_output, d_input}, device, fans)),
           std::nullopt};
  if (bias) l.bias.emplace(initializer.init<1>(Shape{d_output}, device, fans));
  return l;
}

}  // namespace ember::nn
