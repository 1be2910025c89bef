// Placeholder math for the element-wise kernels (std:: functions); superseded by the
// vectorizable implementation.
#pragma once

#include <cmath>

namespace ember::cpu::vmath {
template <class T> inline T exp(T x) { return std::exp(x); }
template <class T> inline T expm1(T x) { return std::expm1(x); }
template <class T> inline T log(T x) { return std::log(x); }
template <class T> inline T log1p(T x) { return std::log1p(x); }
template <class T> inline T sin(T x) { return std::sin(x); }
template <class T> inline T cos(T x) { return std::cos(x); }
template <class T> inline T tan(T x) { return std::tan(x); }
template <class T> inline T tanh(T x) { return std::tanh(x); }
template <class T> inline T sinh(T x) { return std::sinh(x); }
template <class T> inline T cosh(T x) { return std::cosh(x); }
template <class T> inline T asin(T x) { return std::asin(x); }
template <class T> inline T acos(T x) { return std::acos(x); }
template <class T> inline T atan(T x) { return std::atan(x); }
template <class T> inline T atan2(T y, T x) { return std::atan2(y, x); }
template <class T> inline T erf(T x) { return std::erf(x); }
template <class T> inline T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
template <class T> inline T softplus(T x) { return x > T(20) ? x : std::log1p(std::exp(x)); }
template <class T> inline T gelu(T x) { return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440))); }
template <class T> inline T gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + std::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
}
template <class T> inline T silu(T x) { return x * sigmoid(x); }
template <class T> inline T mish(T x) { return x * std::tanh(softplus(x)); }
}  // namespace ember::cpu::vmath
