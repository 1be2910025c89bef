// Initializers: how a layer fills a new parameter, as torch.nn.init. Random ones draw from
// the device's generator (Device::seed makes them reproducible). Fans follow PyTorch's
// _calculate_fan_in_and_fan_out: for a weight [out, in, *kernel], fan_in = in * prod(kernel)
// and fan_out = out * prod(kernel); layers whose weight is laid out otherwise pass the fans.
#pragma once

#include <cstddef>
#include <optional>

#include "ember/nn/config.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::nn {

enum class FanMode : std::uint8_t { FanIn, FanOut };
// The nonlinearities torch.nn.init.calculate_gain knows.
enum class Nonlinearity : std::uint8_t { Linear, Conv, Sigmoid, Tanh, Relu, LeakyRelu, Selu };
// torch.nn.init.calculate_gain; param is LeakyRelu's negative slope.
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

// The fans of a weight of this shape (rank >= 2), as PyTorch.
struct Fans {
  std::size_t fan_in = 0, fan_out = 0;
};
Fans fans_of(const Shape& shape);

struct Initializer {
  enum class Kind : std::uint8_t {
    Constant,
    Uniform,
    Normal,
    KaimingUniform,
    KaimingNormal,
    XavierUniform,
    XavierNormal,
    Orthogonal
  };
  Kind kind = Kind::Constant;
  double a = 0.0, b = 0.0;  // constant: a; uniform: [a, b); normal: mean a, std b;
                            // kaiming: negative slope a; xavier, orthogonal: gain a
  FanMode mode = FanMode::FanIn;
  Nonlinearity nonlinearity = Nonlinearity::LeakyRelu;

  static Initializer constant(double v) { return {Kind::Constant, v}; }
  static Initializer zeros() { return constant(0.0); }
  static Initializer ones() { return constant(1.0); }
  static Initializer uniform(double low, double high) { return {Kind::Uniform, low, high}; }
  static Initializer normal(double mean, double std) { return {Kind::Normal, mean, std}; }
  // torch.nn.init.kaiming_uniform_(w, a, mode, nonlinearity): U(-bound, bound) with
  // bound = gain * sqrt(3 / fan).
  static Initializer kaiming_uniform(double a = 0.0, FanMode mode = FanMode::FanIn,
                                     Nonlinearity nl = Nonlinearity::LeakyRelu) {
    return {Kind::KaimingUniform, a, 0.0, mode, nl};
  }
  // N(0, gain / sqrt(fan)).
  static Initializer kaiming_normal(double a = 0.0, FanMode mode = FanMode::FanIn,
                                    Nonlinearity nl = Nonlinearity::LeakyRelu) {
    return {Kind::KaimingNormal, a, 0.0, mode, nl};
  }
  // U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)).
  static Initializer xavier_uniform(double gain = 1.0) { return {Kind::XavierUniform, gain}; }
  // N(0, gain * sqrt(2 / (fan_in + fan_out))).
  static Initializer xavier_normal(double gain = 1.0) { return {Kind::XavierNormal, gain}; }
  // torch.nn.init.orthogonal_: the weight viewed as [shape[0], rest] is the Q of the QR
  // decomposition of a N(0, 1) draw (rows orthonormal when there are fewer rows than
  // columns, columns otherwise), signs fixed by R's diagonal, times the gain.
  static Initializer orthogonal(double gain = 1.0) { return {Kind::Orthogonal, gain}; }

  // A new tensor of `shape` in dtype (default: the device's float). Kaiming and Xavier
  // take their fans from `fans`, else from the shape (rank >= 2; an ember::Error otherwise).
  DynTensor init(const Shape& shape, const Device& device, std::optional<Fans> fans = std::nullopt,
                 std::optional<DType> dtype = std::nullopt) const;
  template <std::size_t D>
  Tensor<D> init(const Shape& shape, const Device& device,
                 std::optional<Fans> fans = std::nullopt) const {
    return Tensor<D>(init(shape, device, fans));
  }
  // The distribution the tensor is drawn from (Constant: the value in a). Orthogonal has
  // none (an ember::Error).
  Distribution distribution(const Shape& shape, std::optional<Fans> fans = std::nullopt) const;

  EMBER_CONFIG(Initializer, kind, a, b, mode, nonlinearity)
};

}  // namespace ember::nn
