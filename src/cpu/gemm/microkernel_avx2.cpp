// AVX2 + FMA micro-kernels of the GEMM (see microkernel.hpp for the contract). This file
// is compiled with -mavx2 -mfma and only called after a run-time CPU check, so it must
// not define anything with external or vague linkage besides the kernels themselves:
// helpers live in an anonymous namespace and no standard-library templates are used.
#include <immintrin.h>

#include "cpu/gemm/microkernel.hpp"

namespace ember::cpu::detail {
namespace {

struct VecF32 {
  using T = float;
  using V = __m256;
  static constexpr int kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const T* p) { return _mm256_loadu_ps(p); }
  static V bcast(const T* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static void store(T* p, V v) { _mm256_storeu_ps(p, v); }
};

struct VecF64 {
  using T = double;
  using V = __m256d;
  static constexpr int kLanes = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const T* p) { return _mm256_loadu_pd(p); }
  static V bcast(const T* p) { return _mm256_broadcast_sd(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static void store(T* p, V v) { _mm256_storeu_pd(p, v); }
};

// MR rows x NV vectors of accumulators stay in registers for the whole k loop (6 x 2 = 12
// of the 16 ymm registers, leaving room for the two B vectors and one A broadcast).
#include "cpu/gemm/microkernel.inc"

}  // namespace

void ukernel_avx2_f32(std::size_t k, const float* a, const float* b, float* c, std::ptrdiff_t c_rs,
                      std::size_t m, std::size_t n, bool load_c) {
  ukernel<VecF32, kAvx2MrF32, kAvx2NrF32>(k, a, b, c, c_rs, m, n, load_c);
}

void ukernel_avx2_f64(std::size_t k, const double* a, const double* b, double* c,
                      std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c) {
  ukernel<VecF64, kAvx2MrF64, kAvx2NrF64>(k, a, b, c, c_rs, m, n, load_c);
}

void ukernel_in_place_avx2_f32(std::size_t k, const float* a, const float* const* rows,
                               std::size_t j, float* c, std::ptrdiff_t c_rs, std::size_t m,
                               std::size_t n, bool load_c) {
  ukernel_in_place<VecF32, kAvx2MrF32, kAvx2NrF32>(k, a, rows, j, c, c_rs, m, n, load_c);
}

void ukernel_in_place_avx2_f64(std::size_t k, const double* a, const double* const* rows,
                               std::size_t j, double* c, std::ptrdiff_t c_rs, std::size_t m,
                               std::size_t n, bool load_c) {
  ukernel_in_place<VecF64, kAvx2MrF64, kAvx2NrF64>(k, a, rows, j, c, c_rs, m, n, load_c);
}

void ukernel_cols_in_place_avx2_f32(std::size_t k, const float* const* cols, std::size_t i,
                                    const float* b, float* c, std::ptrdiff_t c_rs, std::size_t m,
                                    std::size_t n, bool load_c) {
  ukernel_cols_in_place<VecF32, kAvx2MrF32, 0, kAvx2NrF32>(k, cols, i, b, c, c_rs, m, n, load_c);
}

void ukernel_cols_in_place_avx2_f64(std::size_t k, const double* const* cols, std::size_t i,
                                    const double* b, double* c, std::ptrdiff_t c_rs, std::size_t m,
                                    std::size_t n, bool load_c) {
  ukernel_cols_in_place<VecF64, kAvx2MrF64, 0, kAvx2NrF64>(k, cols, i, b, c, c_rs, m, n, load_c);
}

void ukernel_rows_in_place_avx2_f32(std::size_t k, const float* const* rows, const float* b,
                                    float* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                    bool load_c) {
  ukernel_rows_in_place<VecF32, kAvx2MrF32, kAvx2NrF32>(k, rows, b, c, c_rs, m, n, load_c);
}

void ukernel_rows_in_place_avx2_f64(std::size_t k, const double* const* rows, const double* b,
                                    double* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                    bool load_c) {
  ukernel_rows_in_place<VecF64, kAvx2MrF64, kAvx2NrF64>(k, rows, b, c, c_rs, m, n, load_c);
}

}  // namespace ember::cpu::detail
