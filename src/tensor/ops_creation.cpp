// Creation functions: full, arange, random, from_data and the composites built on them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include "tensor/op_support.hpp"

namespace ember::ops {

using detail::run;

DynTensor from_data(const TensorData& data, const Device& device) {
  return ember::detail::catch_std(
      [&] { return DynTensor(device.backend().from_data(data), device); },
      [&](const char* what, bool out_of_memory) {
        fail("from_data: " + std::string(out_of_memory ? "out of memory" : what) +
             " copying a tensor of shape " + data.shape().to_string() + " and dtype " +
             name(data.dtype()) + " to " + device.name());
      });
}

std::optional<DynTensor> adopt_host(std::byte* data, const Shape& shape, DType dtype,
                                    std::shared_ptr<const void> owner, const Device& device) {
  ir::Handle h = device.backend().adopt_host(data, shape, dtype, std::move(owner));
  if (!h) return std::nullopt;
  return DynTensor(std::move(h), device);
}

std::optional<HostWritable> empty_host(const Shape& shape, DType dtype, const Device& device) {
  const std::size_t n = detail::check_size(shape, dtype, "empty_host", device);
  backend::Backend::HostTensor t = ember::detail::catch_std(
      [&] { return device.backend().empty_host(shape, dtype); },
      [&](const char* what, bool out_of_memory) {
        fail("empty_host: " + std::string(out_of_memory ? "out of memory" : what) +
             " making a tensor of shape " + shape.to_string() + " and dtype " + name(dtype) +
             " on " + device.name());
      });
  if (!t.handle) return std::nullopt;
  return HostWritable{DynTensor(std::move(t.handle), device), std::span<std::byte>(t.data, n)};
}

std::optional<std::span<const std::byte>> host_bytes(const DynTensor& t) {
  const std::byte* p = t.device().backend().host_data(t.handle());
  if (p == nullptr) return std::nullopt;
  return std::span<const std::byte>(p, checked_bytes(t.shape(), t.dtype(), "host_bytes"));
}

namespace {
std::int64_t saturate_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<std::int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(v);
}
}  // namespace

namespace detail {

std::pair<double, double> int_range(DType dtype) {
  switch (dtype) {
    case DType::I64:
      return {-9.2233720368547758e18, 9.2233720368547758e18};  // the max rounds up to 2^63
    case DType::I32:
      return {-2147483648.0, 2147483647.0};
    case DType::I16:
      return {-32768.0, 32767.0};
    case DType::I8:
      return {-128.0, 127.0};
    case DType::U8:
      return {0.0, 255.0};
    case DType::Bool:
      return {0.0, 1.0};
    default:
      return {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  }
}

double fill_value(double value, DType dtype, const std::string& op) {
  const auto bad = [&] {
    fail(op + ": the value " + std::to_string(value) + " cannot be converted to " + name(dtype) +
         " without overflow");
  };
  if (dtype == DType::Bool) return value;
  if (is_int(dtype)) {
    // As PyTorch: u8 takes a negative integer down to -255, wrapped modulo 256.
    if (dtype == DType::U8 && value < 0 && value >= -255 && std::trunc(value) == value) {
      return value + 256;
    }
    const auto [lo, hi] = int_range(dtype);
    // i64: hi is 2^63, one past the max; every double below it converts exactly.
    const bool in = dtype == DType::I64 ? value >= lo && value < hi : value >= lo && value <= hi;
    if (!in) bad();  // NaN and the infinities included
    return std::trunc(value);
  }
  double max = std::numeric_limits<float>::max();
  if (dtype == DType::F64) return value;
  if (dtype == DType::F16) max = 65504.0;
  if (dtype == DType::BF16) max = 3.3895313892515355e38;
  if (std::isfinite(value) && std::fabs(value) > max) bad();
  return value;
}

DynTensor fill(Shape shape, double value, DType dtype, const Device& device) {
  if (is_int(dtype)) {
    const auto [lo, hi] = int_range(dtype);
    value = std::isnan(value) ? 0.0 : std::clamp(value, lo, hi);
  }
  return run(device, ir::Fill{std::move(shape), dtype, value, saturate_int(value)});
}

}  // namespace detail

DynTensor full(const Shape& shape, double value, DType dtype, const Device& device) {
  detail::check_size(shape, dtype, "full", device);
  return detail::fill(shape, detail::fill_value(value, dtype, "full"), dtype, device);
}
DynTensor zeros(const Shape& shape, DType dtype, const Device& device) {
  detail::check_size(shape, dtype, "zeros", device);
  return detail::fill(shape, 0.0, dtype, device);
}
DynTensor ones(const Shape& shape, DType dtype, const Device& device) {
  detail::check_size(shape, dtype, "ones", device);
  return detail::fill(shape, 1.0, dtype, device);
}
DynTensor empty(const Shape& shape, DType dtype, const Device& device) {
  detail::check_size(shape, dtype, "empty", device);
  return detail::fill(shape, 0.0, dtype, device);
}

DynTensor arange(double start, double end, double step, DType dtype, const Device& device) {
  EMBER_CHECK(step != 0 && std::isfinite(step) && std::isfinite(start) && std::isfinite(end),
              "arange: start, end and step must be finite and step non-zero (got " +
                  std::to_string(start) + ", " + std::to_string(end) + ", " + std::to_string(step) +
                  ")");
  EMBER_CHECK(dtype != DType::Bool, "arange: bool dtype is not allowed");
  const double n = std::ceil((end - start) / step);
  EMBER_CHECK(n < 0x1p62, "arange: [" + std::to_string(start) + ", " + std::to_string(end) +
                              ") in steps of " + std::to_string(step) + " has " +
                              std::to_string(n) + " elements, more than 2^62");
  const std::size_t count = n > 0 ? static_cast<std::size_t>(n) : 0;
  detail::check_size(Shape{count}, dtype, "arange", device);
  return run(device, ir::Arange{start, step, count, dtype});
}

DynTensor linspace(double start, double end, std::size_t n, DType dtype, const Device& device) {
  EMBER_CHECK(is_float(dtype), std::string("linspace: expected a float dtype, got ") + name(dtype));
  EMBER_CHECK(std::isfinite(start) && std::isfinite(end),
              "linspace: start and end must be finite (got " + std::to_string(start) + ", " +
                  std::to_string(end) + ")");
  detail::check_size(Shape{n}, dtype, "linspace", device);
  const double step = n > 1 ? (end - start) / static_cast<double>(n - 1) : 0.0;
  return run(device, ir::Arange{start, step, n, dtype});
}

DynTensor eye(std::size_t n, DType dtype, const Device& device) {
  detail::check_size(Shape{n, n}, dtype, "eye", device);
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
  detail::check_size(shape, dtype, "random", device);
  return run(device, ir::Random{shape, dtype, dist});
}

namespace {
// j - i for the last two dims of shape, broadcast to shape.
DynTensor diagonal_offsets(const Shape& shape, const Device& device, const char* op) {
  EMBER_CHECK(shape.rank() >= 2,
              std::string(op) + ": expected rank >= 2, got shape " + shape.to_string());
  detail::check_size(shape, DType::I64, op, device);
  // An empty mask needs no offsets (and its rows or cols alone may be huge).
  if (shape.num_elements() == 0) return detail::fill(shape, 0.0, DType::I64, device);
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
TensorData DynTensor::to_data() const {
  return ember::detail::catch_std(
      [&] { return device_.backend().to_data(handle_); },
      [&](const char* what, bool out_of_memory) {
        fail("to_data: " + std::string(out_of_memory ? "out of memory" : what) +
             " copying a tensor of shape " + shape().to_string() + " and dtype " + name(dtype()) +
             " from " + device_.name() + " to the host");
      });
}
}  // namespace ember
