// Accuracy and special-value tests for src/cpu/kernels/vmath.hpp.
//
// Each f32 function is compared with the std:: double (or a long double formula) reference on a
// dense sweep: a stride through every finite float bit pattern (tiny, subnormal, huge, both
// signs) plus a uniform sweep over the function's interesting range.  Errors are measured in
// ulp of the reference rounded to the target type; where a function crosses zero away from the
// origin (sin, cos, tan) or decays to zero (activation tails), an absolute bound relative to the
// function's scale is accepted instead, as documented in the header.  The loops are written like
// the kernels' callers so that the vectorized code paths are the ones exercised.
#include "cpu/kernels/vmath.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace vm = ember::cpu::vmath;

namespace {

using LD = long double;

template <class T>
LD ulp_of(LD ref) {
  const LD a = std::fabs(ref);
  const int min_exp = std::numeric_limits<T>::min_exponent - 1;  // exponent of the min normal
  const int digits = std::numeric_limits<T>::digits;
  int e = a == 0 ? min_exp : std::ilogb(a);
  if (e < min_exp) e = min_exp;
  return std::ldexp(LD(1), e - digits + 1);
}

struct Result {
  double max_ulp = 0;
  double worst_x = 0;
  std::int64_t bad = 0;  // points failing both bounds
  double worst_bad_x = 0;
};

// Checks y = f(x) against ref(x) (long double) for all xs: pass if ulp error <= ulp_bound or
// absolute error <= abs_bound.  NaN references require NaN, infinities exact equality.
template <class T>
Result check(const std::vector<T>& xs, const std::vector<T>& ys, const std::function<LD(LD)>& ref,
             double ulp_bound, double abs_bound) {
  Result res;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const LD r = ref(LD(xs[i]));
    const T y = ys[i];
    bool ok;
    double u = 0;
    if (std::isnan(r)) {
      ok = std::isnan(y);
    } else if (std::isnan(y)) {
      ok = false;
      u = 1e30;
    } else {
      const T rt = static_cast<T>(r);  // reference rounded to T (may overflow to inf)
      if (std::isinf(rt) || std::isinf(y)) {
        ok = rt == y;
        u = ok ? 0 : 1e30;
      } else {
        const LD err = std::fabs(LD(y) - r);
        u = static_cast<double>(err / ulp_of<T>(r));
        ok = u <= ulp_bound || err <= abs_bound;
        // Report the ulp error only where the ulp criterion applies.
        if (err <= abs_bound && u > ulp_bound) u = 0;
      }
    }
    if (u > res.max_ulp) {
      res.max_ulp = u;
      res.worst_x = static_cast<double>(xs[i]);
    }
    if (!ok) {
      if (res.bad == 0) res.worst_bad_x = static_cast<double>(xs[i]);
      ++res.bad;
    }
  }
  return res;
}

// Sanitizer builds run ~10x slower: they sweep a tenth of the points.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kThin = 10;
#else
constexpr int kThin = 1;
#endif

// Inputs: every finite float/double bit pattern with a stride (both signs), limited to
// [lo, hi], plus n uniform points in [ulo, uhi].
template <class T>
std::vector<T> inputs(T lo, T hi, T ulo, T uhi, int n = 1000000) {
  std::vector<T> xs;
  if constexpr (sizeof(T) == 4) {
    for (std::uint64_t b = 0; b < 0x7f800000u; b += 2039 * kThin) {
      const float v = std::bit_cast<float>(static_cast<std::uint32_t>(b));
      for (float s : {v, -v})
        if (s >= lo && s <= hi) xs.push_back(s);
    }
  } else {
    for (std::uint64_t b = 0; b < 0x7ff0000000000000ull;
         b += 0x7ff0000000000000ull / (400000 / kThin)) {
      const double v = std::bit_cast<double>(b);
      for (double s : {v, -v})
        if (s >= lo && s <= hi) xs.push_back(s);
    }
  }
  n /= kThin;
  for (int i = 0; i < n; ++i) xs.push_back(ulo + (uhi - ulo) * (T(i) / T(n - 1)));
  return xs;
}

template <class T, class F>
std::vector<T> apply(const std::vector<T>& xs, F f) {
  std::vector<T> ys(xs.size());
  const T* __restrict x = xs.data();
  T* __restrict y = ys.data();
  const std::size_t n = xs.size();
  for (std::size_t i = 0; i < n; ++i) y[i] = f(x[i]);
  return ys;
}

template <class T, class F>
void run(const char* name, F f, const std::function<LD(LD)>& ref, T lo, T hi, T ulo, T uhi,
         double ulp_bound, double abs_bound = 0) {
  const auto xs = inputs<T>(lo, hi, ulo, uhi);
  const auto ys = apply(xs, f);
  const Result r = check<T>(xs, ys, ref, ulp_bound, abs_bound);
  std::printf("[ vmath ] %-10s %s  max ulp %8.3f at x=%.9g  (bound %.1f ulp, abs %.1g)\n", name,
              sizeof(T) == 4 ? "f32" : "f64", r.max_ulp, r.worst_x, ulp_bound, abs_bound);
  EXPECT_EQ(r.bad, 0) << name << " first failure at x=" << r.worst_bad_x;
}

constexpr float kFMax = std::numeric_limits<float>::max();
constexpr LD kSqrt1_2 = 0.707106781186547524400844362104849039L;
constexpr LD kSqrt2OverPi = 0.797884560802865355879892119868763737L;

LD gelu_ref(LD x) { return 0.5L * x * std::erfc(-x * kSqrt1_2); }
LD gelu_tanh_ref(LD x) {
  return x / (1 + std::exp(-2 * kSqrt2OverPi * (x + 0.044715L * x * x * x)));
}
LD sigmoid_ref(LD x) { return 1 / (1 + std::exp(-x)); }
LD softplus_ref(LD x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
LD mish_ref(LD x) { return x * std::tanh(softplus_ref(x)); }

// Per-function bounds: {f32 ulp, f64 ulp}.  f32 trig inputs are limited to |x| <= 1e5.
#define EMBER_UNARY_TEST(fn, ref, lo, hi, ulo, uhi, ulp32, abs32, ulp64, abs64)        \
  TEST(VMath, fn##_f32) {                                                              \
    run<float>(                                                                        \
        #fn, [](float v) { return vm::fn(v); }, ref, lo, hi, ulo, uhi, ulp32, abs32);  \
  }                                                                                    \
  TEST(VMath, fn##_f64) {                                                              \
    run<double>(                                                                       \
        #fn, [](double v) { return vm::fn(v); }, ref, lo, hi, ulo, uhi, ulp64, abs64); \
  }

#define R(expr) [](LD x) -> LD { return expr; }

EMBER_UNARY_TEST(exp, R(std::exp(x)), -kFMax, kFMax, -110, 90, 2, 0, 1, 0)
EMBER_UNARY_TEST(expm1, R(std::expm1(x)), -kFMax, kFMax, -20, 90, 2, 0, 1, 0)
EMBER_UNARY_TEST(log, R(std::log(x)), -kFMax, kFMax, 0, 10, 2, 0, 1, 0)
EMBER_UNARY_TEST(log1p, R(std::log1p(x)), -kFMax, kFMax, -1, 10, 2, 0, 1, 0)
EMBER_UNARY_TEST(sin, R(std::sin(x)), -1e5, 1e5, -1e4, 1e4, 2, 2e-7, 1, 0)
EMBER_UNARY_TEST(cos, R(std::cos(x)), -1e5, 1e5, -1e4, 1e4, 2, 2e-7, 1, 0)
EMBER_UNARY_TEST(tan, R(std::tan(x)), -1e5, 1e5, -10, 10, 4, 2e-7, 1, 0)
EMBER_UNARY_TEST(tanh, R(std::tanh(x)), -kFMax, kFMax, -10, 10, 3, 0, 3, 0)
EMBER_UNARY_TEST(sinh, R(std::sinh(x)), -kFMax, kFMax, -90, 90, 3, 0, 2, 0)
EMBER_UNARY_TEST(cosh, R(std::cosh(x)), -kFMax, kFMax, -90, 90, 3, 0, 1, 0)
EMBER_UNARY_TEST(asin, R(std::asin(x)), -kFMax, kFMax, -1.001, 1.001, 2, 0, 1, 0)
EMBER_UNARY_TEST(acos, R(std::acos(x)), -kFMax, kFMax, -1.001, 1.001, 2, 0, 1, 0)
EMBER_UNARY_TEST(atan, R(std::atan(x)), -kFMax, kFMax, -10, 10, 2, 0, 1, 0)
EMBER_UNARY_TEST(erf, R(std::erf(x)), -kFMax, kFMax, -5, 5, 2, 0, 1, 0)
EMBER_UNARY_TEST(sigmoid, R(sigmoid_ref(x)), -kFMax, kFMax, -110, 30, 3, 0, 3, 0)
EMBER_UNARY_TEST(silu, R(x* sigmoid_ref(x)), -kFMax, kFMax, -110, 30, 3, 0, 2, 0)
EMBER_UNARY_TEST(softplus, R(softplus_ref(x)), -kFMax, kFMax, -110, 30, 3, 0, 2, 0)
EMBER_UNARY_TEST(gelu, R(gelu_ref(x)), -kFMax, kFMax, -16, 16, 7, 0, 2, 0)
EMBER_UNARY_TEST(gelu_tanh, R(gelu_tanh_ref(x)), -kFMax, kFMax, -12, 12, 24, 1e-9, 2, 0)
EMBER_UNARY_TEST(mish, R(mish_ref(x)), -kFMax, kFMax, -110, 30, 4, 0, 2, 0)

template <class T>
void atan2_sweep(double ulp_bound) {
  // Pairs on a polar grid of radii (tiny to huge) and angles, plus axis/diagonal cases.
  std::vector<T> ys, xs;
  const T radii[] = {T(1e-40), T(1e-30), T(1e-5), T(0.5), T(1), T(3), T(1e10), T(1e30)};
  for (T r : radii) {
    for (int k = 0; k < 100000; ++k) {
      const double a = -M_PI + 2 * M_PI * (k + 0.5) / 100000;
      ys.push_back(static_cast<T>(r * std::sin(a)));
      xs.push_back(static_cast<T>(r * std::cos(a)));
    }
  }
  std::vector<T> out(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) out[i] = vm::atan2(ys[i], xs[i]);
  double max_ulp = 0;
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const LD r = std::atan2(LD(ys[i]), LD(xs[i]));
    const double u = static_cast<double>(std::fabs(LD(out[i]) - r) / ulp_of<T>(r));
    max_ulp = std::max(max_ulp, u);
    bad += !(u <= ulp_bound);
  }
  std::printf("[ vmath ] atan2      %s  max ulp %8.3f  (bound %.1f ulp)\n",
              sizeof(T) == 4 ? "f32" : "f64", max_ulp, ulp_bound);
  EXPECT_EQ(bad, 0);
}

TEST(VMath, atan2_f32) { atan2_sweep<float>(2); }
TEST(VMath, atan2_f64) { atan2_sweep<double>(1); }

template <class T>
void special_values() {
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T pi = T(M_PI), pio2 = T(M_PI / 2);
  auto nan_in_nan_out = [&](auto f) { EXPECT_TRUE(std::isnan(f(nan))); };
  nan_in_nan_out([](T v) { return vm::exp(v); });
  nan_in_nan_out([](T v) { return vm::expm1(v); });
  nan_in_nan_out([](T v) { return vm::log(v); });
  nan_in_nan_out([](T v) { return vm::log1p(v); });
  nan_in_nan_out([](T v) { return vm::sin(v); });
  nan_in_nan_out([](T v) { return vm::cos(v); });
  nan_in_nan_out([](T v) { return vm::tan(v); });
  nan_in_nan_out([](T v) { return vm::tanh(v); });
  nan_in_nan_out([](T v) { return vm::sinh(v); });
  nan_in_nan_out([](T v) { return vm::cosh(v); });
  nan_in_nan_out([](T v) { return vm::asin(v); });
  nan_in_nan_out([](T v) { return vm::acos(v); });
  nan_in_nan_out([](T v) { return vm::atan(v); });
  nan_in_nan_out([](T v) { return vm::erf(v); });
  nan_in_nan_out([](T v) { return vm::sigmoid(v); });
  nan_in_nan_out([](T v) { return vm::softplus(v); });
  nan_in_nan_out([](T v) { return vm::gelu(v); });
  nan_in_nan_out([](T v) { return vm::gelu_tanh(v); });
  nan_in_nan_out([](T v) { return vm::silu(v); });
  nan_in_nan_out([](T v) { return vm::mish(v); });
  EXPECT_TRUE(std::isnan(vm::atan2(nan, T(1))));
  EXPECT_TRUE(std::isnan(vm::atan2(T(1), nan)));

  EXPECT_EQ(vm::exp(-inf), T(0));
  EXPECT_EQ(vm::exp(inf), inf);
  EXPECT_EQ(vm::exp(T(1000)), inf);
  EXPECT_EQ(vm::exp(T(-1000)), T(0));
  EXPECT_EQ(vm::expm1(-inf), T(-1));
  EXPECT_EQ(vm::expm1(inf), inf);
  EXPECT_TRUE(std::signbit(vm::expm1(T(-0.0))));
  EXPECT_EQ(vm::log(T(0)), -inf);
  EXPECT_EQ(vm::log(T(-0.0)), -inf);
  EXPECT_TRUE(std::isnan(vm::log(T(-1))));
  EXPECT_TRUE(std::isnan(vm::log(-inf)));
  EXPECT_EQ(vm::log(inf), inf);
  EXPECT_EQ(vm::log(T(1)), T(0));
  EXPECT_EQ(vm::log1p(T(-1)), -inf);
  EXPECT_TRUE(std::isnan(vm::log1p(T(-2))));
  EXPECT_EQ(vm::log1p(inf), inf);
  EXPECT_TRUE(std::signbit(vm::log1p(T(-0.0))));
  EXPECT_TRUE(std::isnan(vm::sin(inf)));
  EXPECT_TRUE(std::isnan(vm::cos(-inf)));
  EXPECT_TRUE(std::isnan(vm::tan(inf)));
  EXPECT_TRUE(std::signbit(vm::sin(T(-0.0))));
  EXPECT_TRUE(std::signbit(vm::tan(T(-0.0))));
  EXPECT_EQ(vm::cos(T(0)), T(1));
  EXPECT_EQ(vm::tanh(inf), T(1));
  EXPECT_EQ(vm::tanh(-inf), T(-1));
  EXPECT_TRUE(std::signbit(vm::tanh(T(-0.0))));
  EXPECT_EQ(vm::sinh(inf), inf);
  EXPECT_EQ(vm::sinh(-inf), -inf);
  EXPECT_EQ(vm::cosh(-inf), inf);
  EXPECT_TRUE(std::signbit(vm::sinh(T(-0.0))));
  EXPECT_TRUE(std::isnan(vm::asin(T(1.5))));
  EXPECT_TRUE(std::isnan(vm::acos(-inf)));
  EXPECT_NEAR(vm::asin(T(1)), pio2, pio2 * std::numeric_limits<T>::epsilon());
  EXPECT_NEAR(vm::acos(T(-1)), pi, pi * std::numeric_limits<T>::epsilon());
  EXPECT_EQ(vm::acos(T(1)), T(0));
  EXPECT_NEAR(vm::atan(inf), pio2, pio2 * std::numeric_limits<T>::epsilon());
  EXPECT_NEAR(vm::atan(-inf), -pio2, pio2 * std::numeric_limits<T>::epsilon());
  EXPECT_TRUE(std::signbit(vm::atan(T(-0.0))));
  EXPECT_EQ(vm::erf(inf), T(1));
  EXPECT_EQ(vm::erf(-inf), T(-1));
  EXPECT_TRUE(std::signbit(vm::erf(T(-0.0))));
  EXPECT_EQ(vm::sigmoid(-inf), T(0));
  EXPECT_EQ(vm::sigmoid(inf), T(1));
  EXPECT_EQ(vm::softplus(inf), inf);
  EXPECT_EQ(vm::softplus(-inf), T(0));
  EXPECT_EQ(vm::softplus(T(1e6)), T(1e6));
  EXPECT_EQ(vm::gelu(inf), inf);
  EXPECT_EQ(vm::gelu(-inf), T(0));
  EXPECT_EQ(vm::gelu_tanh(inf), inf);
  EXPECT_EQ(vm::gelu_tanh(-inf), T(0));
  EXPECT_EQ(vm::silu(inf), inf);
  EXPECT_EQ(vm::silu(-inf), T(0));
  EXPECT_EQ(vm::mish(inf), inf);
  EXPECT_EQ(vm::mish(-inf), T(0));
  // atan2 special cases (C99 Annex F).
  for (T y : {T(0), T(-0.0), T(1), T(-1), inf, -inf}) {
    for (T x : {T(0), T(-0.0), T(1), T(-1), inf, -inf}) {
      const T got = vm::atan2(y, x);
      const T want = std::atan2(y, x);
      // pi/4-type results may differ from the correctly rounded value by 1 ulp.
      EXPECT_NEAR(got, want, std::fabs(want) * std::numeric_limits<T>::epsilon())
          << "atan2(" << y << ", " << x << ")";
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << "atan2(" << y << ", " << x << ")";
    }
  }
}

TEST(VMath, special_values_f32) { special_values<float>(); }
TEST(VMath, special_values_f64) { special_values<double>(); }

}  // namespace
