// AVX2 + FMA matrix-vector kernels of the GEMM (contract in microkernel.hpp, loops in
// gemv.inc). Compiled with -mavx2 -mfma and only called after a run-time CPU check, so
// nothing here but the kernels themselves has external or vague linkage.
#include <immintrin.h>

#include <cstddef>

#include "cpu/gemm/microkernel.hpp"

namespace ember::cpu::detail {
namespace {

struct VecF32 {
  using T = float;
  using V = __m256;
  static constexpr std::size_t kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const T* p) { return _mm256_loadu_ps(p); }
  static V set1(T v) { return _mm256_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static void store(T* p, V v) { _mm256_storeu_ps(p, v); }
  static T hsum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

struct VecF64 {
  using T = double;
  using V = __m256d;
  static constexpr std::size_t kLanes = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const T* p) { return _mm256_loadu_pd(p); }
  static V set1(T v) { return _mm256_set1_pd(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static void store(T* p, V v) { _mm256_storeu_pd(p, v); }
  static T hsum(V v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
  }
};

#include "cpu/gemm/gemv.inc"

}  // namespace

void gemv_dot_avx2_f32(std::size_t rows, std::size_t k, const float* mat, std::ptrdiff_t rs,
                       const float* x, float* y, std::ptrdiff_t ys, bool accumulate) {
  gemv_dot<VecF32>(rows, k, mat, rs, x, y, ys, accumulate);
}
void gemv_dot_avx2_f64(std::size_t rows, std::size_t k, const double* mat, std::ptrdiff_t rs,
                       const double* x, double* y, std::ptrdiff_t ys, bool accumulate) {
  gemv_dot<VecF64>(rows, k, mat, rs, x, y, ys, accumulate);
}
void gemv_axpy_avx2_f32(std::size_t k, std::size_t n, const float* mat, std::ptrdiff_t rs,
                        const float* x, float* y, bool accumulate) {
  gemv_axpy<VecF32>(k, n, mat, rs, x, y, accumulate);
}
void gemv_axpy_avx2_f64(std::size_t k, std::size_t n, const double* mat, std::ptrdiff_t rs,
                        const double* x, double* y, bool accumulate) {
  gemv_axpy<VecF64>(k, n, mat, rs, x, y, accumulate);
}

}  // namespace ember::cpu::detail
