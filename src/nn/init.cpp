// Initializers, as torch.nn.init.
#include "ember/nn/init.hpp"

#include <cmath>
#include <vector>

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
    case Kind::Orthogonal:
      fail("nn::Initializer::orthogonal: a QR factor, not a distribution");
  }
  fail("nn::Initializer: unknown kind");
}

namespace {
// The orthogonal factor Q [m, n] (m >= n) of the row-major a [m, n] = Q R with R's diagonal
// positive (the factor PyTorch's sign correction gives), by modified Gram-Schmidt applied
// twice (re-orthogonalisation keeps Q orthonormal to f64 precision).
std::vector<double> orthonormal_columns(std::vector<double> a, std::size_t m, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (std::size_t k = 0; k < j; ++k) {
        double dot = 0;
        for (std::size_t i = 0; i < m; ++i) dot += a[i * n + k] * a[i * n + j];
        for (std::size_t i = 0; i < m; ++i) a[i * n + j] -= dot * a[i * n + k];
      }
    double norm = 0;
    for (std::size_t i = 0; i < m; ++i) norm += a[i * n + j] * a[i * n + j];
    norm = std::sqrt(norm);
    EMBER_CHECK(norm > 0, "nn::Initializer::orthogonal: a rank-deficient draw");
    for (std::size_t i = 0; i < m; ++i) a[i * n + j] /= norm;
  }
  return a;
}
}  // namespace

DynTensor Initializer::init(const Shape& shape, const Device& device, std::optional<Fans> fans,
                            std::optional<DType> dtype) const {
  const DType dt = dtype.value_or(device.default_float());
  if (kind == Kind::Constant) return ops::full(shape, a, dt, device);
  if (kind == Kind::Orthogonal) {
    EMBER_CHECK(shape.rank() >= 2 && shape.num_elements() > 0,
                "nn::Initializer::orthogonal: needs a non-empty tensor of rank >= 2, got " +
                    shape.to_string());
    const std::size_t rows = shape[0], cols = shape.num_elements() / rows;
    const bool wide = rows < cols;  // orthonormalise the transpose's columns
    const std::size_t m = wide ? cols : rows, n = wide ? rows : cols;
    std::vector<double> draw =
        ops::random(Shape{m, n}, Distribution::normal(0.0, 1.0), DType::F64, device)
            .to_data()
            .to_vector<double>();
    const std::vector<double> q = orthonormal_columns(std::move(draw), m, n);
    std::vector<double> w(rows * cols);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j)
        w[i * cols + j] = a * (wide ? q[j * n + i] : q[i * n + j]);
    return ops::cast(ops::from_data(TensorData::from(w, shape), device), dt);
  }
  return ops::random(shape, distribution(shape, fans), dt, device);
}

}  // namespace ember::nn
