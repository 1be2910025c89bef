#include "ember/base/tensor_data.hpp"

#include "ember/base/checked.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>

namespace ember {
namespace {

template <class F>
void visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F64:
      f(double{});
      break;
    case DType::F32:
      f(float{});
      break;
    case DType::F16:
      f(f16{});
      break;
    case DType::BF16:
      f(bf16{});
      break;
    case DType::I64:
      f(std::int64_t{});
      break;
    case DType::I32:
      f(std::int32_t{});
      break;
    case DType::I16:
      f(std::int16_t{});
      break;
    case DType::I8:
      f(std::int8_t{});
      break;
    case DType::U8:
      f(std::uint8_t{});
      break;
    case DType::Bool:
      f(bool{});
      break;
  }
}

template <class T>
double to_f64(T v) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// Float -> int conversion that never invokes undefined behaviour: NaN gives 0, values
// outside the target range saturate.
template <class To>
To from_f64(double v) {
  if constexpr (std::is_same_v<To, f16> || std::is_same_v<To, bf16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else {
    if (std::isnan(v)) return 0;
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  }
}

}  // namespace

void convert_elements(const void* src, DType from, void* dst, DType to, std::size_t n) {
  if (n == 0) return;  // empty tensors may have null data; memcpy(null, ...) is UB even for 0
  if (from == to) {
    std::memcpy(dst, src, n * size_of(from));
    return;
  }
  visit_dtype(from, [&](auto f) {
    using F = decltype(f);
    visit_dtype(to, [&](auto t) {
      using T = decltype(t);
      const F* s = static_cast<const F*>(src);
      T* d = static_cast<T*>(dst);
      if constexpr (std::is_integral_v<F> && std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(s[i]);  // wraps, as C++20
      } else if constexpr (std::is_same_v<T, bool>) {
        for (std::size_t i = 0; i < n; ++i) d[i] = to_f64(s[i]) != 0.0;
      } else {
        for (std::size_t i = 0; i < n; ++i) d[i] = from_f64<T>(to_f64(s[i]));
      }
    });
  });
}

TensorData::TensorData(std::vector<std::byte> bytes, Shape shape, DType dtype)
    : bytes_(std::move(bytes)), shape_(std::move(shape)), dtype_(dtype) {
  const std::size_t expected = checked_bytes(shape_, dtype_, "TensorData");
  EMBER_CHECK(bytes_.size() == expected, "TensorData: " + std::to_string(bytes_.size()) +
                                             " bytes given for shape " + shape_.to_string() +
                                             " of " + name(dtype_) + ", expected " +
                                             std::to_string(expected));
  if (dtype_ == DType::Bool) {
    for (auto& b : bytes_) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
  }
}

void TensorData::convert_out(void* dst, DType to) const {
  convert_elements(bytes_.data(), dtype_, dst, to, num_elements());
}

TensorData TensorData::convert(DType to) const {
  std::vector<std::byte> out(num_elements() * size_of(to));
  convert_elements(bytes_.data(), dtype_, out.data(), to, num_elements());
  return TensorData(std::move(out), shape_, to);
}

double TensorData::get_f64(std::size_t i) const {
  EMBER_CHECK(i < num_elements(), "TensorData::get_f64: index " + std::to_string(i) +
                                      " out of range for shape " + shape_.to_string());
  double v = 0;
  convert_elements(bytes_.data() + i * size_of(dtype_), dtype_, &v, DType::F64, 1);
  return v;
}

namespace {
// Index of the first element violating the tolerance, or npos.
std::size_t first_mismatch(const TensorData& a, const TensorData& b, double rtol, double atol) {
  const std::size_t n = a.num_elements();
  const auto va = a.to_vector<double>();
  const auto vb = b.to_vector<double>();
  for (std::size_t i = 0; i < n; ++i) {
    const double x = va[i], y = vb[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) && std::isnan(y)) continue;
      return i;
    }
    if (std::isinf(x) || std::isinf(y)) {
      if (x == y) continue;
      return i;
    }
    if (std::fabs(x - y) > atol + rtol * std::fabs(y)) return i;
  }
  return std::string::npos;
}
}  // namespace

namespace {
// A double as an ostream prints it with `precision` (%g): no iostreams, which an embedded
// build leaves out.
std::string format_g(double v, int precision = 6) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}
}  // namespace

bool TensorData::approx_eq(const TensorData& other, double rtol, double atol) const {
  return shape_ == other.shape_ && first_mismatch(*this, other, rtol, atol) == std::string::npos;
}

void TensorData::assert_approx_eq(const TensorData& other, double rtol, double atol) const {
  EMBER_CHECK(shape_ == other.shape_, "assert_approx_eq: shapes differ: " + shape_.to_string() +
                                          " vs " + other.shape_.to_string());
  const std::size_t i = first_mismatch(*this, other, rtol, atol);
  if (i == std::string::npos) return;
  fail("assert_approx_eq: element " + std::to_string(i) + " of shape " + shape_.to_string() +
       " is " + format_g(get_f64(i), 9) + ", expected " + format_g(other.get_f64(i), 9) +
       " (rtol " + format_g(rtol, 9) + ", atol " + format_g(atol, 9) + ")");
}

bool TensorData::operator==(const TensorData& other) const {
  return shape_ == other.shape_ && dtype_ == other.dtype_ && bytes_ == other.bytes_;
}

std::string TensorData::to_string(std::size_t max_elements) const {
  std::string s = "TensorData(" + std::string(name(dtype_)) + ", " + shape_.to_string() + ", [";
  const std::size_t n = num_elements();
  for (std::size_t i = 0; i < n && i < max_elements; ++i)
    s += (i ? ", " : "") + format_g(get_f64(i));
  if (n > max_elements) s += ", ...";
  return s + "])";
}

}  // namespace ember
