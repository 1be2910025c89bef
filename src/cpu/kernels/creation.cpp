// Creation kernels: fill, arange and random. Random numbers come from a counter-based
// generator: element i of a draw hashes (seed, counter + i), so a draw is the same however
// it is split across threads or tiles, and seeding the device restarts the sequence. A draw
// takes its counters when it runs (run) or when the Fusion decorator records it (draw, at
// counters reserve_random took: Note [Reserved draws] in backend/fused_group.hpp); fused
// groups draw their tiles with the same draw_values.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu/kernels/dtype_dispatch.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/kernels/random.hpp"
#include "cpu/thread_pool.hpp"

namespace ember::cpu {
namespace {

// A 64-bit mix (an avalanche of multiply-xorshift rounds) of the key and the counter.
inline std::uint64_t mix(std::uint64_t key, std::uint64_t ctr) {
  std::uint64_t z = key ^ (ctr * 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  z = (z ^ (z >> 29)) * 0xbf58476d1ce4e5b9ULL;
  return z ^ (z >> 32);
}
// Uniform in [0, 1) with 53 random bits.
inline double uniform01(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    // Saturating, and NaN -> 0, so no value is undefined behaviour.
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

}  // namespace

ir::Handle run(CpuContext& ctx, ir::Fill& op) {
  auto out = ctx.empty(op.shape, op.dtype);
  const std::size_t n = op.shape.num_elements();
  if (op.dtype == DType::F16 || op.dtype == DType::BF16) {
    const float v = static_cast<float>(op.value);
    std::byte one[2];
    convert_elements(&v, DType::F32, one, op.dtype, 1);
    for (std::size_t i = 0; i < n; ++i) std::memcpy(out->data() + 2 * i, one, 2);
    return out;
  }
  visit_numeric(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = std::is_integral_v<T> && !std::is_same_v<T, bool> ? static_cast<T>(op.int_value)
                                                                  : from_double<T>(op.value);
    T* y = out->data_as<T>();
    parallel_for(0, n, 1 << 16, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) y[i] = v;
    });
  });
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Arange& op) {
  auto out = ctx.empty(Shape{op.n}, op.dtype);
  if (op.dtype == DType::F16 || op.dtype == DType::BF16) {
    for (std::size_t i = 0; i < op.n; ++i) {
      const float v = static_cast<float>(op.start + static_cast<double>(i) * op.step);
      convert_elements(&v, DType::F32, out->data() + 2 * i, op.dtype, 1);
    }
    return out;
  }
  visit_numeric(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = out->data_as<T>();
    for (std::size_t i = 0; i < op.n; ++i) {
      y[i] = from_double<T>(op.start + static_cast<double>(i) * op.step);
    }
  });
  return out;
}

namespace {

// Element values of a draw at counter c, before the conversion to the dtype.
template <Distribution::Kind K>
inline double random_value(std::uint64_t key, std::uint64_t c, double a, double b) {
  const std::uint64_t r = mix(key, c);
  if constexpr (K == Distribution::Kind::Normal) {
    // Box-Muller from two independent uniforms of the same counter.
    const double u1 = 1.0 - uniform01(r);  // (0, 1]
    const double u2 = uniform01(mix(key ^ 0x6a09e667f3bcc909ULL, c));
    return a + b * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  } else if constexpr (K == Distribution::Kind::Bernoulli) {
    // 1.0 or +0.0 from the comparison's bits, not a branch: which way it goes is random,
    // and GCC's branch mispredicted on about a quarter of the elements of dropout's mask,
    // at more than the cost of the hash.
    const std::uint64_t keep = std::uint64_t{0} - std::uint64_t(uniform01(r) < a);
    return std::bit_cast<double>(std::bit_cast<std::uint64_t>(1.0) & keep);
  } else if constexpr (K == Distribution::Kind::Uniform) {
    return a + (b - a) * uniform01(r);
  } else {
    return uniform01(r);
  }
}

template <class T, Distribution::Kind K>
void draw_as(std::uint64_t key, std::uint64_t first, const Distribution& dist, T* y,
             std::size_t n) {
  const double a = dist.a, b = dist.b;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = random_value<K>(key, first + i, a, b);
    if constexpr (std::is_floating_point_v<T>) {
      T t = static_cast<T>(v);
      if constexpr (K == Distribution::Kind::Uniform || K == Distribution::Kind::Default) {
        // Rounding may carry a value up to the excluded upper bound; keep [a, b).
        const T hi = static_cast<T>(K == Distribution::Kind::Uniform ? b : 1.0);
        if (t >= hi && hi > static_cast<T>(K == Distribution::Kind::Uniform ? a : 0.0)) {
          t = std::nextafter(hi, -std::numeric_limits<T>::infinity());
        }
      }
      y[i] = t;
    } else {
      y[i] = from_double<T>(std::floor(v));
    }
  }
}

}  // namespace

void draw_values(std::uint64_t key, std::uint64_t first, const Distribution& dist, DType ct,
                 void* out, std::size_t n) {
  visit_numeric(ct, [&](auto tag) {
    using T = decltype(tag);
    T* y = static_cast<T*>(out);
    switch (dist.kind) {
      case Distribution::Kind::Normal:
        return draw_as<T, Distribution::Kind::Normal>(key, first, dist, y, n);
      case Distribution::Kind::Bernoulli:
        return draw_as<T, Distribution::Kind::Bernoulli>(key, first, dist, y, n);
      case Distribution::Kind::Uniform:
        return draw_as<T, Distribution::Kind::Uniform>(key, first, dist, y, n);
      case Distribution::Kind::Default:
        return draw_as<T, Distribution::Kind::Default>(key, first, dist, y, n);
    }
  });
}

ir::Handle draw(CpuContext& ctx, const ir::Random& op, const backend::RandomCounters& at) {
  const std::size_t n = op.shape.num_elements();
  const DType compute = random_compute_type(op.dtype);
  auto out = ctx.empty(op.shape, compute);
  std::byte* y = out->data();
  const std::size_t elem = size_of(compute);
  parallel_for(0, n, 1 << 14, [&](std::size_t b, std::size_t e) {
    draw_values(at.seed, at.first + b, op.dist, compute, y + b * elem, e - b);
  });
  if (compute == op.dtype) return out;
  auto h = ctx.empty(op.shape, op.dtype);
  convert_elements(out->data(), DType::F32, h->data(), op.dtype, n);
  return h;
}

ir::Handle run(CpuContext& ctx, ir::Random& op) {
  return draw(ctx, op, reserve_counters(ctx, op.shape.num_elements()));
}

}  // namespace ember::cpu
