// AVX-512 matrix-vector kernels of the GEMM (contract in microkernel.hpp, loops in
// gemv.inc). Compiled with the AVX-512 F/VL/BW/DQ flags and only called after a run-time
// CPU check, so nothing here but the kernels themselves has external or vague linkage.
#include <immintrin.h>

#include <cstddef>

#include "cpu/gemm/microkernel.hpp"

namespace ember::cpu::detail {
namespace {

// Horizontal sum through memory, halving pairwise (once per output, so cost is no
// concern). GCC 12's _mm512_reduce_add_* and 256-bit extracts trip its own
// maybe-uninitialized warning on their _mm256_undefined_* operand.
template <class T, std::size_t N, class V>
T hsum_lanes(V v) {
  alignas(64) T t[N];
  static_assert(sizeof(V) == sizeof(t));
  __builtin_memcpy(t, &v, sizeof(t));
  for (std::size_t w = N / 2; w > 0; w /= 2)
    for (std::size_t i = 0; i < w; ++i) t[i] += t[i + w];
  return t[0];
}

struct VecF32 {
  using T = float;
  using V = __m512;
  static constexpr std::size_t kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const T* p) { return _mm512_loadu_ps(p); }
  static V set1(T v) { return _mm512_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static void store(T* p, V v) { _mm512_storeu_ps(p, v); }
  static T hsum(V v) { return hsum_lanes<T, kLanes>(v); }
};

struct VecF64 {
  using T = double;
  using V = __m512d;
  static constexpr std::size_t kLanes = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const T* p) { return _mm512_loadu_pd(p); }
  static V set1(T v) { return _mm512_set1_pd(v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static void store(T* p, V v) { _mm512_storeu_pd(p, v); }
  static T hsum(V v) { return hsum_lanes<T, kLanes>(v); }
};

#include "cpu/gemm/gemv.inc"

}  // namespace

void gemv_dot_avx512_f32(std::size_t rows, std::size_t k, const float* mat, std::ptrdiff_t rs,
                         const float* x, float* y, std::ptrdiff_t ys, bool accumulate) {
  gemv_dot<VecF32>(rows, k, mat, rs, x, y, ys, accumulate);
}
void gemv_dot_avx512_f64(std::size_t rows, std::size_t k, const double* mat, std::ptrdiff_t rs,
                         const double* x, double* y, std::ptrdiff_t ys, bool accumulate) {
  gemv_dot<VecF64>(rows, k, mat, rs, x, y, ys, accumulate);
}
void gemv_axpy_avx512_f32(std::size_t k, std::size_t n, const float* mat, std::ptrdiff_t rs,
                          const float* x, float* y, bool accumulate) {
  gemv_axpy<VecF32>(k, n, mat, rs, x, y, accumulate);
}
void gemv_axpy_avx512_f64(std::size_t k, std::size_t n, const double* mat, std::ptrdiff_t rs,
                          const double* x, double* y, bool accumulate) {
  gemv_axpy<VecF64>(k, n, mat, rs, x, y, accumulate);
}

}  // namespace ember::cpu::detail
