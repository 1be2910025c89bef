// Initializers, as torch.nn.init.
#include "ember/nn/init.hpp"

#include <cmath>

namespace ember::nn {

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::Relu:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyRelu:
      return std::sqrt(2.0 / (1.0 + param * param));
    case Nonlinearity::Selu:
      return 3.0 / 4.0;
  }
  fail("calculate_gain: unknown nonlinearity");
}

Fans fans_of(const Shape& shape) {
  EMBER_CHECK(shape.rank() >= 2,
              "nn::init: fan in and fan out need a weight of rank >= 2, got " + shape.to_string());
  std::size_t receptive = 1;
  for (std::size_t i = 2; i < shape.rank(); ++i) receptive *= shape[i];
  return {shape[1] * receptive, shape[0] * receptive};
}

Distribution Initializer::distribution(const Shape& shape, std::optional<Fans> fans) const {
  const auto get_fans = [&] { return fans ? *fans : fans_of(shape); };
  switch (kind) {
    case Kind::Constant:
      return Distribution::uniform(a, a);
    case Kind::Uniform:
      EMBER_CHECK(a <= b, "nn::Initializer::uniform: low " + std::to_string(a) + " > high " +
                              std::to_string(b));
      return Distribution::uniform(a, b);
    case Kind::Normal:
      EMBER_CHECK(b >= 0, "nn::Initializer::normal: std " + std::to_string(b) + " < 0");
      return Distribution::normal(a, b);
    case Kind::KaimingUniform:
    case Kind::KaimingNormal: {
      const Fans f = get_fans();
      const std::size_t fan = mode == FanMode::FanIn ? f.fan_in : f.fan_out;
      EMBER_CHECK(fan > 0, "nn::Initializer: kaiming init of a tensor with a zero fan, shape " +
                               shape.to_string());
      const double std = calculate_gain(nonlinearity, a) / std::sqrt(double(fan));
      if (kind == Kind::KaimingNormal) return Distribution::normal(0.0, std);
      const double bound = std::sqrt(3.0) * std;
      return Distribution::uniform(-bound, bound);
    }
    case Kind::XavierUniform:
    case Kind::XavierNormal: {
      const Fans f = get_fans();
      EMBER_CHECK(
          f.fan_in + f.fan_out > 0,
          "nn::Initializer: xavier init of a tensor with zero fans, shape " + shape.to_string());
      const double std = a * std::sqrt(2.0 / double(f.fan_in + f.fan_out));
      if (kind == Kind::XavierNormal) return Distribution::normal(0.0, std);
      const double bound = std::sqrt(3.0) * std;
      return Distribution::uniform(-bound, bound);
    }
  }
  fail("nn::Initializer: unknown kind");
}

DynTensor Initializer::init(const Shape& shape, const Device& device, std::optional<Fans> fans,
                            std::optional<DType> dtype) const {
  const DType dt = dtype.value_or(device.default_float());
  if (kind == Kind::Constant) return ops::full(shape, a, dt, device);
  return ops::random(shape, distribution(shape, fans), dt, device);
}

}  // namespace ember::nn
