// Activation modules, as torch.nn.ReLU, GELU, ... (and Burn's Shrink, ONNX's
// ThresholdedRelu): each forward is const, takes a float tensor of any rank and returns the
// same shape, computed by the function of the same name in activation:: (one formula, in
// tensor/activation.hpp). Parameters follow PyTorch's defaults. Only PRelu has a tensor
// (weight [num_parameters], 0.25).
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
EMBER_NN_ACTIVATION(Relu6, activation::relu6(x))
EMBER_NN_ACTIVATION(Sigmoid, activation::sigmoid(x))
EMBER_NN_ACTIVATION(Tanh, activation::tanh(x))
EMBER_NN_ACTIVATION(Silu, activation::silu(x))
EMBER_NN_ACTIVATION(Mish, activation::mish(x))
EMBER_NN_ACTIVATION(Selu, activation::selu(x))
EMBER_NN_ACTIVATION(Softsign, activation::softsign(x))
// relu6(x + 3) / 6, as torch.nn.Hardsigmoid (not Burn's 0.2 slope).
EMBER_NN_ACTIVATION(HardSigmoid, activation::hard_sigmoid(x, 1.0 / 6.0, 0.5))
EMBER_NN_ACTIVATION(HardSwish, activation::hardswish(x))
EMBER_NN_ACTIVATION(LogSigmoid, activation::logsigmoid(x))
EMBER_NN_ACTIVATION(Tanhshrink, activation::tanhshrink(x))
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
struct RRelu {
  double lower = 1.0 / 8.0;
  double upper = 1.0 / 3.0;
  EMBER_MODULE(RRelu, lower, upper)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::detail::rrelu(x, lower, upper, x.device().is_autodiff(), "nn::RRelu");
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
    return activation::detail::celu(x, alpha, "nn::Celu");
  }
};

// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold, as PyTorch.
struct Softplus {
  double beta = 1.0, threshold = 20.0;
  EMBER_MODULE(Softplus, beta, threshold)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::softplus(x, beta, threshold);
  }
};

struct Hardtanh {
  double min_val = -1.0, max_val = 1.0;
  EMBER_MODULE(Hardtanh, min_val, max_val)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::detail::hardtanh(x, min_val, max_val, "nn::Hardtanh");
  }
};

// Burn's Shrink (ONNX Shrink): x - bias above lambda, x + bias below -lambda, 0 between.
// Burn's defaults (ONNX's bias is 0).
struct Shrink {
  double lambda = 0.5, bias = 0.5;
  EMBER_MODULE(Shrink, lambda, bias)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::detail::shrink(x, lambda, bias, "nn::Shrink");
  }
};

// x - lambda above lambda, x + lambda below -lambda, 0 between.
struct Softshrink {
  double lambda = 0.5;
  EMBER_MODULE(Softshrink, lambda)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::detail::softshrink(x, lambda, "nn::Softshrink");
  }
};

// x where |x| > lambda, else 0.
struct Hardshrink {
  double lambda = 0.5;
  EMBER_MODULE(Hardshrink, lambda)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::detail::shrink(x, lambda, 0.0, "nn::Hardshrink");
  }
};

// x where x > threshold, else value.
struct Threshold {
  double threshold = 0.0, value = 0.0;
  EMBER_MODULE(Threshold, threshold, value)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::threshold(x, threshold, value);
  }
};

// ONNX's ThresholdedRelu: x where x > alpha, else 0.
struct ThresholdedRelu {
  double alpha = 1.0;
  EMBER_MODULE(ThresholdedRelu, alpha)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::thresholded_relu(x, alpha);
  }
};

// Halves x along dim into a, b and returns a * sigmoid(b).
struct Glu {
  std::int64_t dim = -1;
  EMBER_MODULE(Glu, dim)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return activation::detail::glu(x, dim, "nn::Glu");
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
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<D> {
      return activation::detail::prelu(x, weight.val(), "nn::PRelu");
    });
  }
};

struct PReluConfig {
  std::size_t num_parameters = 1;
  double init_value = 0.25;
  EMBER_CONFIG(PReluConfig, num_parameters, init_value)
  PRelu init(const Device& device) const;
};

}  // namespace ember::nn
