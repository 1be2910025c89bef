// Vectorizable elementwise math for ember's CPU kernels.
//
// The standard library's <cmath> functions are opaque calls, so a loop such as
// `for (i) y[i] = std::exp(x[i]);` runs one element at a time.  The float versions here are
// written in plain, branch-free C++ (polynomials, bit manipulation, and conditional selects that
// GCC turns into vector blends) so that GCC 12 auto-vectorizes such loops at -O3 without
// -ffast-math, on AVX-512 and AVX2 alike.  They follow IEEE/std:: semantics for NaN, +-inf,
// +-0, overflow and underflow (subnormal results are produced, not flushed), and stay within a
// few ulp of the correctly rounded result (tests/cpu/test_vmath.cpp measures and enforces the
// bounds).  The double versions exist as high-precision references and call std:: functions
// (they do not vectorize).
//
// Polynomial coefficients and Cody-Waite constants come from tools/fit_vmath.py (near-minimax
// fits on Chebyshev nodes); rerun it to reproduce them.
//
// Accuracy of the float kernels assumes hardware FMA (__FMA__, e.g. -mfma or -march=x86-64-v3):
// without it `fmadd` falls back to a separately rounded multiply-add and results lose up to ~1
// ulp more; range reduction stays exact in both modes because the constants differ.
//
// Known limits (measured by the tests, f32): most functions are within 2 ulp; tan 3.5, tanh
// 2.3, sinh 2.2, sigmoid 2.2, silu 2.7, mish 3.8, gelu 6.1 (near |x| ~ 1.3, where 1 + erf
// cancels), gelu_tanh ~20 ulp for x in [-5, -1] because the rounding of its computed argument
// is amplified by the steep tail (absolute error < 1e-9 everywhere).  sin/cos/tan reduce
// accurately for |x| <= 1e5; beyond that results are not meaningful (|x| >= 2^22 garbage).
// gelu, gelu_tanh, silu and mish return -0 at -inf (the limit) instead of NaN from -inf * 0.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace ember::cpu::vmath {

namespace detail {

inline float fmadd(float a, float b, float c) {
#ifdef __FMA__
  return __builtin_fmaf(a, b, c);  // a single vfmadd; std::fma would be a libm call without FMA
#else
  return a * b + c;
#endif
}

inline std::int32_t bits(float x) { return std::bit_cast<std::int32_t>(x); }
inline float from_bits(std::int32_t i) { return std::bit_cast<float>(i); }
inline float fabs_(float x) { return from_bits(bits(x) & 0x7fffffff); }
// |mag| with the sign of sgn; mag must be non-negative (or NaN).
inline float with_sign_of(float mag, float sgn) {
  return from_bits(bits(mag) | (bits(sgn) & static_cast<std::int32_t>(0x80000000u)));
}

// c ? a : b as a bitwise blend.  A plain ?: whose operands are computed only for it lets GCC
// sink that computation into a branch, and with -ftrapping-math (the default) if-conversion
// then cannot speculate it, so the loop stays scalar on AVX2 (AVX-512 masks it instead).
inline float sel(bool c, float a, float b) {
  const std::int32_t m = -static_cast<std::int32_t>(c);
  return from_bits((bits(a) & m) | (bits(b) & ~m));
}

// 2^n for n in [-126, 127] (other n give garbage, never UB: NaN lanes reach here).
inline float pow2i(std::int32_t n) {
  return from_bits(static_cast<std::int32_t>(static_cast<std::uint32_t>(n + 127) << 23));
}

// min/max that keep a NaN x (the comparison is false), as blends for the same reason.
inline float min_(float x, float c) { return sel(x > c, c, x); }
inline float max_(float x, float c) { return sel(x < c, c, x); }

// c0 + x * (c1 + x * (c2 + ...)), Horner with FMA; expands at compile time.
template <class... C>
inline float poly(float x, float c0, C... cs) {
  if constexpr (sizeof...(cs) == 0) {
    return c0;
  } else {
    return fmadd(poly(x, cs...), x, c0);
  }
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Adding then subtracting 1.5 * 2^23 rounds a float with |v| < 2^22 to the nearest integer, and
// the low mantissa bits of the sum hold that integer: no float->int conversion (UB for NaN).
constexpr float kRound = 0x1.8p23f;

// ln2 = kLn2Hi + kLn2Lo; kLn2Hi has 13 significant bits so k * kLn2Hi is exact for |k| < 2^11.
constexpr float kLn2Hi = 0x1.62ep-1f, kLn2Lo = 0x1.0bfbe8p-15f;
constexpr float kPio2Hi = 0x1.921fb6p+0f, kPio2Lo = -0x1.777a5cp-25f;
constexpr float kPiHi = 0x1.921fb6p+1f, kPiLo = -0x1.777a5cp-24f;

// e^r = 1 + r + r^2 P(r) on |r| <= ln2/2; P is fitted so that r + r^2 P(r) is also a
// relatively accurate expm1(r).
inline float expm1_poly(float r) {
  const float p =
      poly(r, 0x1.fffffep-2f, 0x1.5554b2p-3f, 0x1.5556f2p-5f, 0x1.1226e2p-7f, 0x1.6b9df4p-10f);
  return fmadd(r * r, p, r);
}

// x = n ln2 + r with |r| <= ln2/2 (Cody-Waite; exact because k * kLn2Hi is exact).
struct ExpReduced {
  float r;
  std::int32_t n;
};
inline ExpReduced exp_reduce(float x) {
  const float kf = fmadd(x, 0x1.715476p+0f, kRound);
  const float n = kf - kRound;
  float r = fmadd(n, -kLn2Hi, x);
  r = fmadd(n, -kLn2Lo, r);
  return {r, bits(kf) - bits(kRound)};
}

// e^x * 2^k for small k (-1 .. 24): the power of two is applied as two factors so results
// between FLT_MAX/2^k and the subnormal range are formed without intermediate overflow or
// underflow.  k > 0 lets callers keep a would-be subnormal e^x at full precision.
inline float exp_scaled(float x, std::int32_t k) {
  x = min_(x, 90.f);  // comparisons are false for NaN, so NaN passes through
  x = max_(x, -104.f - 0.6931472f * static_cast<float>(k));  // result rounds to 0 below
  const ExpReduced red = exp_reduce(x);
  const float p = expm1_poly(red.r) + 1.f;
  const std::int32_t n = red.n + k;
  const std::int32_t n1 = n >> 1, n2 = n - n1;
  return p * pow2i(n1) * pow2i(n2);
}

// e^x - 1 for finite x <= 89, without the special-value fix-ups.
inline float expm1_core(float x) {
  x = min_(x, 89.f);
  x = max_(x, -30.f);  // below about -17.4 the result is -1 anyway
  const ExpReduced red = exp_reduce(x);
  const float em = expm1_poly(red.r);
  // e^x - 1 = 2^n em + (2^n - 1); 2^n - 1 is exact while n <= 24 and harmless beyond.
  const float half = pow2i(red.n - 1);  // 2^(n-1), valid up to n = 128
  const float s = half * 2.f;
  const float small = fmadd(s, em, s - 1.f);
  const float big = (half * (em + 1.f)) * 2.f;  // n = 128: 2^n itself would overflow
  return sel(red.n > 127, big, small);
}

// log(1 + f) = f + f^2 Q(f) for f in [sqrt(1/2) - 1, sqrt(2) - 1].
inline float log1p_poly(float f) {
  const float q =
      poly(f, -0x1.fffff8p-2f, 0x1.55555p-2f, -0x1.000438p-2f, 0x1.99a428p-3f, -0x1.542402p-3f,
           0x1.226b2ap-3f, -0x1.0f4f0ep-3f, 0x1.087e6p-3f, -0x1.383ebcp-4f);
  return fmadd(f * f, q, f);
}

// log(x) + c for positive normal x, where c is a small correction added before the exponent
// term (used by log1p).  x = 2^e m with m in [sqrt(1/2), sqrt(2)).
inline float log_core(float x, float c, std::int32_t e_bias) {
  constexpr std::uint32_t kSqrtHalf = 0x3f3504f3;
  // Unsigned: x may be negative or NaN here (those lanes are replaced by the caller).
  const auto ix = static_cast<std::int32_t>(static_cast<std::uint32_t>(bits(x)) - kSqrtHalf);
  const std::int32_t e = (ix >> 23) + e_bias;
  const float m = from_bits((ix & 0x7fffff) + 0x3f3504f3);
  const float ef = static_cast<float>(e);
  const float lp = log1p_poly(m - 1.f) + c;
  return fmadd(ef, kLn2Hi, fmadd(ef, kLn2Lo, lp));
}

// log1p(x) for x >= 0 finite (or NaN), no special-value fix-ups.
inline float log1p_core(float x) {
  const float u = 1.f + x;
  // log1p(x) = log(u) + log(1 + (x - (u - 1)) / u): corrects the rounding of 1 + x.
  const float c = (x - (u - 1.f)) / u;
  return log_core(u, c, 0);
}

// sqrt(z) for z = 0 or normal z >= 0 without calling sqrtf (with -fmath-errno GCC keeps a
// scalar errno path that blocks vectorization): two Newton steps on 1/sqrt from a bit-trick
// guess (~3.4% -> 5e-6), then one FMA-based correction of the square root (-> ~0.5 ulp).
inline float sqrt_nonneg(float z) {
  float y = from_bits(0x5f3759df - (bits(z) >> 1));
  const float hz = 0.5f * z;
  y = y * fmadd(-hz * y, y, 1.5f);
  y = y * fmadd(-hz * y, y, 1.5f);
  const float s = z * y;
  return fmadd(fmadd(-s, s, z), 0.5f * y, s);
}

// asin(w) = w + w^3 B(w^2) for |w| <= 1/2; w2 = w^2.
inline float asin_poly(float w, float w2) {
  const float b =
      poly(w2, 0x1.5555c8p-3f, 0x1.3301fcp-4f, 0x1.747d06p-5f, 0x1.8c2d86p-6f, 0x1.596d5cp-5f);
  return fmadd(w * w2, b, w);
}

// atan(t) = t + t^3 A(t^2) for t in [0, 1].
inline float atan_poly(float t) {
  const float t2 = t * t;
  const float a =
      poly(t2, -0x1.55553ep-2f, 0x1.9991e4p-3f, -0x1.242084p-3f, 0x1.c08c1ap-4f, -0x1.580814p-4f,
           0x1.da24cap-5f, -0x1.fd6fbcp-6f, 0x1.6410e4p-7f, -0x1.d32dacp-10f);
  return fmadd(t * t2, a, t);
}

// Reduces x by multiples of pi/2: x = q pi/2 + r, |r| <= pi/4 (+ rounding).  Accurate for
// |x| up to ~1e5; the quotient must stay below 2^22 for the rounding trick.
struct TrigReduced {
  float r;
  std::int32_t q;
};
inline TrigReduced trig_reduce(float x) {
  const float kf = fmadd(x, 0x1.45f306p-1f, kRound);  // x * 2/pi
  const float n = kf - kRound;
#ifdef __FMA__
  // Each fma forms n * part exactly, so three full-precision parts of pi/2 suffice.
  float r = fmadd(n, -0x1.921fb6p+0f, x);
  r = fmadd(n, 0x1.777a5cp-25f, r);
  r = fmadd(n, 0x1.ee59dap-50f, r);
#else
  // Without FMA each product must be exact on its own: 12-bit parts (|n| < 2^12).
  float r = x - n * 0x1.922p+0f;
  r = r - n * -0x1.2aep-18f;
  r = r - n * -0x1.deap-31f;
  r = r - n * 0x1.184698p-44f;
#endif
  return {r, bits(kf) - bits(kRound)};
}

inline float sin_poly(float r, float r2) {
  const float s = poly(r2, -0x1.555556p-3f, 0x1.111174p-7f, -0x1.a05968p-13f, 0x1.7c3672p-19f);
  return fmadd(r * r2, s, r);
}
inline float cos_poly(float r2) {
  const float c = poly(r2, 0x1.555556p-5f, -0x1.6c175ep-10f, 0x1.a071c4p-16f, -0x1.361b34p-22f);
  return fmadd(r2 * r2, c, fmadd(r2, -0.5f, 1.f));
}

// sin(x) if q_offset == 0, cos(x) if q_offset == 1.
inline float sincos_impl(float x, std::int32_t q_offset) {
  const TrigReduced red = trig_reduce(x);
  const std::int32_t q = red.q + q_offset;
  const float r2 = red.r * red.r;
  const float s = sin_poly(red.r, r2), c = cos_poly(r2);
  const float v = sel(q & 1, c, s);
  return from_bits(bits(v) ^ ((q & 2) << 30));  // quadrants 2 and 3 negate
}

// erf(x) = x + x E(x^2) for |x| <= 0.875; returns E(x2).
inline float erf_small_poly(float x2) {
  return poly(x2, 0x1.06eba8p-3f, -0x1.81274p-2f, 0x1.ce2d58p-4f, -0x1.b7fe1ep-6f, 0x1.540798p-8f,
              -0x1.a0eb54p-11f, 0x1.21a666p-14f, 0x1.2eccep-18f);
}

// erfc(z) = exp(-z^2) * u * G(u), u = 1/z, for z in [0.875, ~10.6].  G uses one of two
// coefficient sets (z < 2.5 or not) chosen per lane, so there is a single Horner chain.
// z2hi + z2lo must equal z^2 (exactly, when FMA is available) because at z ~ 10 the rounding
// of z^2 alone would cost ~100 ulp through the exponential.
inline constexpr float kErfcA[10] = {
    0x1.208608p-1f,  0x1.1f5e38p-7f, -0x1.4f0878p-2f, 0x1.79b03ap-4f, 0x1.0911a4p-1f,
    -0x1.e0baacp-1f, 0x1.ad6796p-1f, -0x1.c36652p-2f, 0x1.0b4574p-3f, -0x1.14ba42p-6f};
inline constexpr float kErfcB[10] = {
    0x1.20dd72p-1f, 0x1.c4ec08p-18f, -0x1.211496p-2f, 0x1.e0e656p-9f,  0x1.881e12p-2f,
    0x1.2a2acep-2f, -0x1.3b7588p+1f, 0x1.176c7ap+2f,  -0x1.da939ap+1f, 0x1.505018p+0f};
// Returns erfc(z) * 2^k (k >= 0 keeps subnormal results at full precision).
inline float erfc_core(float z, float z2hi, float z2lo, std::int32_t k) {
  const float u = 1.f / z;
  const bool near = z < 2.5f;
  float g = sel(near, kErfcA[9], kErfcB[9]);
#pragma GCC unroll 16
  for (int k = 8; k >= 0; --k) g = fmadd(g, u, sel(near, kErfcA[k], kErfcB[k]));
  // exp(-hi - lo) = exp(-hi) * (1 - lo) to first order; |lo| <= ulp(hi) / 2.
  const float e = exp_scaled(-z2hi, k) * (1.f - z2lo);
  return e * (u * g);
}

// Exact square split: x^2 = hi + lo (lo = 0 without FMA).
struct Split {
  float hi, lo;
};
inline Split square(float x) {
  const float hi = x * x;
#ifdef __FMA__
  return {hi, __builtin_fmaf(x, x, -hi)};
#else
  return {hi, 0.f};
#endif
}

// Double helpers (references; precision over speed).
inline double sigmoid_d(double x) {
  const double e = std::exp(-std::fabs(x));
  return (x >= 0 ? 1.0 : e) / (1.0 + e);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// exp, expm1

template <class T>
inline T exp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return detail::exp_scaled(x, 0);
  } else {
    return std::exp(x);
  }
}

template <class T>
inline T expm1(T x) {
  if constexpr (std::is_same_v<T, float>) {
    const float r = detail::expm1_core(x);
    return detail::sel(x == 0.f, x, r);  // keeps -0
  } else {
    return std::expm1(x);
  }
}

// ---------------------------------------------------------------------------------------------
// log, log1p

template <class T>
inline T log(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    const bool sub = x < 0x1p-126f;  // scale subnormals into the normal range
    const float xs = sel(sub, x * 0x1p23f, x);
    float r = log_core(xs, 0.f, sub ? -23 : 0);
    r = sel(x == kInf, x, r);
    r = sel(x == 0.f, -kInf, r);
    r = sel(x < 0.f, kNaN, r);
    return sel(x != x, x, r);
  } else {
    return std::log(x);
  }
}

template <class T>
inline T log1p(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    float r = log1p_core(x);
    r = sel(fabs_(x) < 0x1p-24f, x, r);  // log1p(x) rounds to x; also keeps -0 and subnormals
    r = sel(x == kInf, x, r);
    r = sel(x == -1.f, -kInf, r);
    r = sel(x < -1.f, kNaN, r);
    return sel(x != x, x, r);
  } else {
    return std::log1p(x);
  }
}

// ---------------------------------------------------------------------------------------------
// sin, cos, tan: Cody-Waite reduction by pi/2 (see trig_reduce for the valid range).

template <class T>
inline T sin(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return detail::sel(x == 0.f, x, detail::sincos_impl(x, 0));  // keeps -0
  } else {
    return std::sin(x);
  }
}

template <class T>
inline T cos(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return detail::sincos_impl(x, 1);
  } else {
    return std::cos(x);
  }
}

template <class T>
inline T tan(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    const TrigReduced red = trig_reduce(x);
    const float r2 = red.r * red.r;
    const float s = sin_poly(red.r, r2), c = cos_poly(r2);
    const bool odd = red.q & 1;                                 // tan(r + pi/2) = -cos(r) / sin(r)
    return sel(x == 0.f, x, sel(odd, -c, s) / sel(odd, s, c));  // keeps -0
  } else {
    return std::tan(x);
  }
}

// ---------------------------------------------------------------------------------------------
// tanh, sinh, cosh

template <class T>
inline T tanh(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    float a = fabs_(x);
    a = min_(a, 9.5f);  // tanh rounds to 1 beyond ~9.01; avoids inf / inf
    const float em = expm1_core(2.f * a);
    return with_sign_of(em / (em + 2.f), x);  // (e^2a - 1) / (e^2a + 1)
  } else {
    return std::tanh(x);
  }
}

template <class T>
inline T sinh(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    const float a = fabs_(x);
    // Moderate |x|: (e^a - e^-a) / 2 from expm1, accurate near 0.  Large: e^a / 2, where e^-a
    // is below half an ulp, computed without overflowing for e^a > FLT_MAX >= e^a / 2.
    const float em = expm1_core(min_(a, 12.f));
    const float small = 0.5f * (em + em / (em + 1.f));
    const float big = exp_scaled(a, -1);
    return with_sign_of(sel(a > 12.f, big, small), x);
  } else {
    return std::sinh(x);
  }
}

template <class T>
inline T cosh(T x) {
  if constexpr (std::is_same_v<T, float>) {
    const float h = detail::exp_scaled(detail::fabs_(x), -1);  // e^|x| / 2
    return h + 0.25f / h;
  } else {
    return std::cosh(x);
  }
}

// ---------------------------------------------------------------------------------------------
// asin, acos, atan, atan2

template <class T>
inline T asin(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    const float a = fabs_(x);
    // |x| > 1/2: asin(a) = pi/2 - 2 asin(sqrt((1 - a) / 2)); 1 - a is exact there.
    const bool big = a > 0.5f;
    const float z = (1.f - a) * 0.5f;
    const float w = sel(big, sqrt_nonneg(max_(z, 0.f)), a);
    const float p = asin_poly(w, sel(big, z, a * a));
    float r = sel(big, fmadd(-2.f, p, kPio2Hi) + kPio2Lo, p);
    r = sel(a > 1.f, kNaN, r);
    return with_sign_of(r, x);
  } else {
    return std::asin(x);
  }
}

template <class T>
inline T acos(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    const float a = fabs_(x);
    const bool big = a > 0.5f;
    const float z = (1.f - a) * 0.5f;
    const float w = sel(big, sqrt_nonneg(max_(z, 0.f)), a);
    const float p = asin_poly(w, sel(big, z, a * a));
    // |x| <= 1/2: pi/2 - asin(x).  x > 1/2: 2 asin(w).  x < -1/2: pi - 2 asin(w).
    const float small = kPio2Hi - (with_sign_of(p, x) - kPio2Lo);
    const float neg = fmadd(-2.f, p, kPiHi) + kPiLo;
    const float r = sel(big, sel(x > 0.f, 2.f * p, neg), small);
    return sel(a > 1.f, kNaN, r);
  } else {
    return std::acos(x);
  }
}

template <class T>
inline T atan(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    const float a = fabs_(x);
    const bool big = a > 1.f;  // atan(a) = pi/2 - atan(1/a)
    const float p = atan_poly(sel(big, 1.f / a, a));
    return with_sign_of(sel(big, (kPio2Hi - p) + kPio2Lo, p), x);
  } else {
    return std::atan(x);
  }
}

template <class T>
inline T atan2(T y, T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    const float ax = fabs_(x), ay = fabs_(y);
    const bool swap = ay > ax;
    const float num = sel(swap, ax, ay), den = sel(swap, ay, ax);
    float t = num / den;                        // in [0, 1]
    t = sel(den == 0.f, 0.f, t);                // atan2(+-0, +-0)
    t = sel(ax == kInf && ay == kInf, 1.f, t);  // atan2(+-inf, +-inf) = +-pi/4 or +-3pi/4
    const float p = atan_poly(t);
    const bool xneg = bits(x) < 0;  // includes -0: atan2(+-0, -0) = +-pi
    // Result = base + sign * p with base in {0, pi/2, pi}, added with one rounding.
    const float hi = sel(swap, kPio2Hi, sel(xneg, kPiHi, 0.f));
    const float lo = sel(swap, kPio2Lo, sel(xneg, kPiLo, 0.f));
    const float sp = sel(swap != xneg, -p, p);
    const float r = with_sign_of((hi + sp) + lo, y);
    return sel(x != x || y != y, x + y, r);
  } else {
    return std::atan2(y, x);
  }
}

// ---------------------------------------------------------------------------------------------
// erf

template <class T>
inline T erf(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    const float a = fabs_(x);
    const float small = fmadd(a, erf_small_poly(a * a), a);
    const float z = min_(a, 4.f);  // erf rounds to 1 beyond ~3.92
    const Split z2 = square(z);
    const float big = 1.f - erfc_core(z, z2.hi, z2.lo, 0);
    return with_sign_of(sel(a < 0.875f, small, big), x);
  } else {
    return std::erf(x);
  }
}

// ---------------------------------------------------------------------------------------------
// Activations.  At -inf the products x * 0 (gelu, silu, mish, gelu_tanh) return the limit -0
// rather than NaN.

template <class T>
inline T sigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) {
    const float e = detail::exp_scaled(-detail::fabs_(x), 0);  // never overflows
    return detail::sel(x >= 0.f, 1.f, e) / (1.f + e);
  } else {
    return detail::sigmoid_d(x);
  }
}

template <class T>
inline T silu(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    // x < 0: x e / (1 + e) with e = e^x scaled by 2^24, so that a subnormal result is rounded
    // once (by the division) instead of inheriting the precision lost by a subnormal e.
    const float es = exp_scaled(-fabs_(x), 24);
    const float e = es * 0x1p-24f;
    const float xc = max_(x, -200.f);  // x * e would be -inf * 0
    const bool pos = x >= 0.f;
    return sel(pos, x, xc * es) / sel(pos, 1.f + e, (1.f + e) * 0x1p24f);
  } else {
    // Long double keeps x e^x exact enough even where e^x is subnormal in double.
    if (x < -12000.0) return -0.0;  // -inf * 0 otherwise
    const long double xl = x;
    return static_cast<double>(xl / (1.0L + std::exp(-xl)));
  }
}

template <class T>
inline T softplus(T x) {
  if constexpr (std::is_same_v<T, float>) {
    // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow, exact x for large x.
    const float e = detail::exp_scaled(-detail::fabs_(x), 0);
    return detail::sel(x > 0.f, x, 0.f) + detail::log1p_core(e);
  } else {
    return (x > 0 ? x : 0.0) + std::log1p(std::exp(-std::fabs(x)));
  }
}

template <class T>
inline T gelu(T x) {
  if constexpr (std::is_same_v<T, float>) {
    using namespace detail;
    const float z = x * 0x1.6a09e6p-1f;  // x / sqrt(2)
    const float az = fabs_(z);
    // |z| < 0.875: 1 + erf(z) = (1 + z) + z E(z^2); 1 + z is exact or tiny-error and the rest
    // is added with one rounding, so x < 0 (where 1 + erf cancels) stays accurate.
    const float onep = fmadd(z, erf_small_poly(z * z), 1.f + z);
    const float small = 0.5f * x * onep;
    // |z| >= 0.875: gelu = x - x/2 erfc(z) (x > 0) or x/2 erfc(-z) (x < 0), with x^2 / 2
    // split exactly so the exponential sees the true argument.
    const float xc = min_(max_(x, -16.f), 16.f);
    const Split x2 = square(xc);
    // erfc is computed times 2^24 so that subnormal tails are rounded once, at the end.
    const float ec = erfc_core(fabs_(xc) * 0x1.6a09e6p-1f, 0.5f * x2.hi, 0.5f * x2.lo, 24);
    const float hx = 0.5f * xc;
    const float big = sel(x > 0.f, fmadd(-hx, ec * 0x1p-24f, x), (hx * ec) * 0x1p-24f);
    return sel(az < 0.875f, small, big);
  } else {
    // Long double: the tail erfc(-x / sqrt(2)) is so steep that rounding x / sqrt(2) in double
    // would cost hundreds of ulp, and 11 extra bits cover it; x < -38.6 underflows anyway.
    if (x < -40.0) return -0.0;  // -inf * 0 otherwise
    const long double xl = x;
    return static_cast<double>(0.5L * xl *
                               std::erfc(-xl * 0.707106781186547524400844362104849039L));
  }
}

template <class T>
inline T gelu_tanh(T x) {
  if constexpr (std::is_same_v<T, float>) {
    // 0.5 x (1 + tanh(w)) = x / (1 + e^(-2w)), w = sqrt(2/pi) (x + 0.044715 x^3): no
    // cancellation for x < 0.
    const float xc = detail::max_(x, -12.f);  // result underflows to -0 below ~-10.5
    const float m2w = (-2.f * 0x1.988454p-1f * xc) * detail::fmadd(0.044715f, xc * xc, 1.f);
    return xc / (1.f + detail::exp_scaled(m2w, 0));
  } else {
    // Long double for the same reason as gelu: the tail amplifies rounding of the argument.
    const long double xl = x < -40.0 ? -40.0L : static_cast<long double>(x);
    const long double m2w =
        -2 * 0.797884560802865355879892119868763737L * xl * (1 + 0.044715L * xl * xl);
    return static_cast<double>(xl / (1 + std::exp(m2w)));
  }
}

template <class T>
inline T mish(T x) {
  if constexpr (std::is_same_v<T, float>) {
    // tanh(log(1 + e)) = n / (n + 2) with n = e (e + 2), e = e^x.
    using namespace detail;
    const float xl = max_(x, -150.f);
    const float es = exp_scaled(min_(xl, 20.f), 24);  // e * 2^24, see silu
    const float e = es * 0x1p-24f;
    const float ns = es * (e + 2.f);  // n * 2^24
    const float n = ns * 0x1p-24f;
    return sel(x > 20.f, x, ((xl * ns) / (n + 2.f)) * 0x1p-24f);
  } else {
    const long double xl = x < -800.0 ? -800.0L : static_cast<long double>(x);
    const long double e = std::exp(xl > 40 ? 40.0L : xl);
    const long double n = e * (e + 2);
    return x > 40.0 ? x : static_cast<double>(xl * n / (n + 2));
  }
}

}  // namespace ember::cpu::vmath
