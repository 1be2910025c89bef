// Creation functions: full, arange, random, from_data and the composites built on them.
#include <cmath>
#include <limits>

#include "tensor/op_support.hpp"

namespace ember::ops {

using detail::run;

DynTensor from_data(const TensorData& data, const Device& device) {
  return DynTensor(device.backend().from_data(data), device);
}

namespace {
std::int64_t saturate_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<std::int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(v);
}
}  // namespace

DynTensor full(const Shape& shape, double value, DType dtype, const Device& device) {
  return run(device, ir::Fill{shape, dtype, value, saturate_int(value)});
}
DynTensor zeros(const Shape& shape, DType dtype, const Device& device) {
  return full(shape, 0.0, dtype, device);
}
DynTensor ones(const Shape& shape, DType dtype, const Device& device) {
  return full(shape, 1.0, dtype, device);
}
DynTensor empty(const Shape& shape, DType dtype, const Device& device) {
  return full(shape, 0.0, dtype, device);
}

DynTensor arange(double start, double end, double step, DType dtype, const Device& device) {
  EMBER_CHECK(step != 0 && std::isfinite(step) && std::isfinite(start) && std::isfinite(end),
              "arange: start, end and step must be finite and step non-zero (got " +
                  std::to_string(start) + ", " + std::to_string(end) + ", " + std::to_string(step) +
                  ")");
  EMBER_CHECK(dtype != DType::Bool, "arange: bool dtype is not allowed");
  const double n = std::ceil((end - start) / step);
  EMBER_CHECK(n < 1e12, "arange: too many elements (" + std::to_string(n) + ")");
  const std::size_t count = n > 0 ? static_cast<std::size_t>(n) : 0;
  return run(device, ir::Arange{start, step, count, dtype});
}

DynTensor linspace(double start, double end, std::size_t n, DType dtype, const Device& device) {
  EMBER_CHECK(is_float(dtype), std::string("linspace: expected a float dtype, got ") + name(dtype));
  const double step = n > 1 ? (end - start) / static_cast<double>(n - 1) : 0.0;
  return run(device, ir::Arange{start, step, n, dtype});
}

DynTensor eye(std::size_t n, DType dtype, const Device& device) {
  auto i = arange(0, static_cast<double>(n), 1, DType::I64, device);
  auto rows = reshape(i, Shape{n, 1});
  auto cols = reshape(std::move(i), Shape{1, n});
  return cast(binary(ir::BinaryFn::Eq, std::move(rows), std::move(cols)), dtype);
}

DynTensor random(const Shape& shape, const Distribution& dist, DType dtype, const Device& device) {
  if (dist.kind == Distribution::Kind::Uniform) {
    EMBER_CHECK(dist.a <= dist.b && std::isfinite(dist.a) && std::isfinite(dist.b),
                "random: uniform needs finite low <= high (got " + std::to_string(dist.a) + ", " +
                    std::to_string(dist.b) + ")");
  } else if (dist.kind == Distribution::Kind::Normal) {
    EMBER_CHECK(dist.b >= 0 && std::isfinite(dist.a) && std::isfinite(dist.b),
                "random: normal needs a finite mean and std >= 0 (got " + std::to_string(dist.a) +
                    ", " + std::to_string(dist.b) + ")");
  } else if (dist.kind == Distribution::Kind::Bernoulli) {
    EMBER_CHECK(dist.a >= 0 && dist.a <= 1,
                "random: bernoulli needs 0 <= p <= 1 (got " + std::to_string(dist.a) + ")");
  }
  return run(device, ir::Random{shape, dtype, dist});
}

namespace {
// j - i for the last two dims of shape, broadcast to shape.
DynTensor diagonal_offsets(const Shape& shape, const Device& device, const char* op) {
  EMBER_CHECK(shape.rank() >= 2,
              std::string(op) + ": expected rank >= 2, got shape " + shape.to_string());
  const std::size_t r = shape[shape.rank() - 2], c = shape[shape.rank() - 1];
  auto rows = reshape(arange(0, double(r), 1, DType::I64, device), Shape{r, 1});
  auto cols = reshape(arange(0, double(c), 1, DType::I64, device), Shape{1, c});
  auto diff = binary(ir::BinaryFn::Sub, std::move(cols), std::move(rows));
  return expand(std::move(diff), shape);
}
}  // namespace

DynTensor triu_mask(const Shape& shape, std::int64_t offset, const Device& device) {
  return binary_scalar(ir::BinaryFn::Gt, diagonal_offsets(shape, device, "triu_mask"),
                       double(offset));
}
DynTensor tril_mask(const Shape& shape, std::int64_t offset, const Device& device) {
  return binary_scalar(ir::BinaryFn::Lt, diagonal_offsets(shape, device, "tril_mask"),
                       double(offset));
}
DynTensor tril(DynTensor x, std::int64_t diagonal) {
  auto mask = triu_mask(x.shape(), diagonal, x.device());
  return mask_fill(std::move(x), std::move(mask), 0.0);
}
DynTensor triu(DynTensor x, std::int64_t diagonal) {
  auto mask = tril_mask(x.shape(), diagonal, x.device());
  return mask_fill(std::move(x), std::move(mask), 0.0);
}

DynTensor to_device(DynTensor x, const Device& device) {
  if (x.device() == device) return x;
  return from_data(x.to_data(), device);
}

}  // namespace ember::ops

namespace ember {
DynTensor DynTensor::from_data(const TensorData& data, const Device& device) {
  return ops::from_data(data, device);
}
TensorData DynTensor::to_data() const { return device_.backend().to_data(handle_); }
}  // namespace ember
