// Activation modules, as torch.nn.ReLU, GELU, ...: each forward is const, takes a float
// tensor of any rank and returns the same shape. Parameters follow PyTorch's defaults.
// Only PRelu has a tensor (weight [num_parameters], 0.25).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"
#include "ember/tensor/activation.hpp"

namespace ember::nn {

#define EMBER_NN_ACTIVATION(Name, expr)           \
  struct Name {                                   \
    EMBER_MODULE(Name)                            \
    template <std::size_t D>                      \
    Tensor<D> forward(const Tensor<D>& x) const { \
      return expr;                                \
    }                                             \
  };

EMBER_NN_ACTIVATION(Relu, activation::relu(x))
EMBER_NN_ACTIVATION(Relu6, x.clamp(0.0, 6.0))
EMBER_NN_ACTIVATION(Sigmoid, activation::sigmoid(x))
EMBER_NN_ACTIVATION(Tanh, activation::tanh(x))
EMBER_NN_ACTIVATION(Silu, activation::silu(x))
EMBER_NN_ACTIVATION(Mish, activation::mish(x))
// SELU's constants, as PyTorch.
EMBER_NN_ACTIVATION(Selu, activation::elu(x, 1.6732632423543772848170429916717)
                              .mul_scalar(1.0507009873554804934193349852946))
EMBER_NN_ACTIVATION(Softsign, x / (x.abs() + 1.0))
// relu6(x + 3) / 6, as torch.nn.Hardsigmoid (not Burn's 0.2 slope).
EMBER_NN_ACTIVATION(HardSigmoid, activation::hard_sigmoid(x, 1.0 / 6.0, 0.5))
EMBER_NN_ACTIVATION(HardSwish, x* activation::hard_sigmoid(x, 1.0 / 6.0, 0.5))
EMBER_NN_ACTIVATION(LogSigmoid, -activation::softplus(-x))
EMBER_NN_ACTIVATION(Tanhshrink, x - activation::tanh(x))
#undef EMBER_NN_ACTIVATION

// approximate: "none" (erf) or "tanh".
struct Gelu {
  bool tanh_approximation = false;
  EMBER_MODULE(Gelu, tanh_approximation)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return tanh_approximation ? activation::gelu_tanh(x) : activation::gelu(x);
  }
};

struct LeakyRelu {
  double negative_slope = 0.01;
  EMBER_MODULE(LeakyRelu, negative_slope)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::leaky_relu(x, negative_slope);
  }
};

// RRelu, as torch.nn.RReLU: negative inputs scaled by a slope drawn from U(lower, upper) per
// element in training mode (an input on an autodiff device), by (lower + upper) / 2 otherwise.
namespace detail {
DynTensor rrelu_forward(const DynTensor& x, double lower, double upper);
}
struct RRelu {
  double lower = 1.0 / 8.0;
  double upper = 1.0 / 3.0;
  EMBER_MODULE(RRelu, lower, upper)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return Tensor<D>(detail::rrelu_forward(x.dyn(), lower, upper));
  }
};

struct Elu {
  double alpha = 1.0;
  EMBER_MODULE(Elu, alpha)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::elu(x, alpha);
  }
};

// alpha * elu(x / alpha).
struct Celu {
  double alpha = 1.0;
  EMBER_MODULE(Celu, alpha)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::elu(x.div_scalar(alpha), 1.0).mul_scalar(alpha);
  }
};

// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold, as PyTorch.
struct Softplus {
  double beta = 1.0, threshold = 20.0;
  EMBER_MODULE(Softplus, beta, threshold)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::softplus(x, beta).mask_where(x.mul_scalar(beta).greater_elem(threshold), x);
  }
};

struct Hardtanh {
  double min_val = -1.0, max_val = 1.0;
  EMBER_MODULE(Hardtanh, min_val, max_val)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return x.clamp(min_val, max_val);
  }
};

// x - lambda above lambda, x + lambda below -lambda, 0 between.
struct Softshrink {
  double lambda = 0.5;
  EMBER_MODULE(Softshrink, lambda)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return x - x.clamp(-lambda, lambda);
  }
};

// x where |x| > lambda, else 0.
struct Hardshrink {
  double lambda = 0.5;
  EMBER_MODULE(Hardshrink, lambda)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return x.mask_fill(x.abs().lower_equal_elem(lambda), 0.0);
  }
};

// x where x > threshold, else value.
struct Threshold {
  double threshold = 0.0, value = 0.0;
  EMBER_MODULE(Threshold, threshold, value)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return x.mask_fill(x.lower_equal_elem(threshold), value);
  }
};

// Halves x along dim into a, b and returns a * sigmoid(b).
struct Glu {
  std::int64_t dim = -1;
  EMBER_MODULE(Glu, dim)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    const std::size_t d = ops::normalize_dim(dim, D, "nn::Glu");
    EMBER_CHECK(x.shape()[d] % 2 == 0, "nn::Glu: dim " + std::to_string(dim) + " of shape " +
                                           x.shape().to_string() + " must have an even extent");
    auto halves = x.chunk(2, std::int64_t(d));
    return halves[0] * activation::sigmoid(halves[1]);
  }
};

struct Softmax {
  std::int64_t dim = -1;
  EMBER_MODULE(Softmax, dim)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::softmax(x, dim);
  }
};

struct LogSoftmax {
  std::int64_t dim = -1;
  EMBER_MODULE(LogSoftmax, dim)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::log_softmax(x, dim);
  }
};

// max(0, x) + weight * min(0, x), weight [num_parameters] over dim 1 (or one shared value).
struct PRelu {
  Param<Tensor<1>> weight;
  EMBER_MODULE(PRelu, weight)
  DynTensor forward_dyn(const DynTensor& x) const;
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return Tensor<D>(forward_dyn(x.dyn()));
  }
};

struct PReluConfig {
  std::size_t num_parameters = 1;
  double init_value = 0.25;
  EMBER_CONFIG(PReluConfig, num_parameters, init_value)
  PRelu init(const Device& device) const;
};

}  // namespace ember::nn
