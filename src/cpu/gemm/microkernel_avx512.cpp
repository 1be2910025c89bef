// AVX-512 micro-kernels of the GEMM (see microkernel.hpp for the contract). This file
// is compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma -mavx2 and only called after a
// run-time CPU check, so it must not define anything with external or vague linkage besides the
// kernels themselves: helpers live in an anonymous namespace and no standard-library templates are
// used.
#include <immintrin.h>

#include "cpu/gemm/microkernel.hpp"

namespace ember::cpu::detail {
namespace {

struct VecF32 {
  using T = float;
  using V = __m512;
  static constexpr int kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const T* p) { return _mm512_loadu_ps(p); }
  static V bcast(const T* p) { return _mm512_set1_ps(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static void store(T* p, V v) { _mm512_storeu_ps(p, v); }
};

struct VecF64 {
  using T = double;
  using V = __m512d;
  static constexpr int kLanes = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const T* p) { return _mm512_loadu_pd(p); }
  static V bcast(const T* p) { return _mm512_set1_pd(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static void store(T* p, V v) { _mm512_storeu_pd(p, v); }
};

// MR rows x NV vectors of accumulators stay in registers for the whole k loop (12 x 2 = 24
// of the 32 zmm registers, leaving room for the two B vectors and A broadcasts, which the
// compiler can fold into the FMA as an embedded {1toN} memory broadcast).
// BS is the packed B sliver's width (its row stride), NV * kLanes unless the kernel computes
// only the first half of a sliver (Note [Half-width tile]).
template <class Op, int MR, int NV, int BS = NV* Op::kLanes>
inline __attribute__((always_inline)) void kernel(std::size_t k, const typename Op::T* a,
                                                  const typename Op::T* b, typename Op::T* c,
                                                  std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                                  bool load_c) {
  using T = typename Op::T;
  using V = typename Op::V;
  constexpr int NR = NV * Op::kLanes;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[i][v] = Op::zero();

  // The C tile is only touched after the k loop; start pulling it into cache now.
  const std::size_t rows = m < MR ? m : MR;
  for (std::size_t i = 0; i < rows; ++i) {
    T* row = c + static_cast<std::ptrdiff_t>(i) * c_rs;
    _mm_prefetch(reinterpret_cast<const char*>(row), _MM_HINT_T0);
    // The row's last element may sit on the next cache line; only form that address
    // when the tile is full width, so no pointer past the end of C is ever made.
    if (n == NR) _mm_prefetch(reinterpret_cast<const char*>(row + NR - 1), _MM_HINT_T0);
  }

#pragma GCC unroll 4
  for (std::size_t p = 0; p < k; ++p) {
    V bv[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) bv[v] = Op::load(b + v * Op::kLanes);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const V av = Op::bcast(a + i);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[i][v] = Op::fma(av, bv[v], acc[i][v]);
    }
    a += MR;
    b += BS;
  }

  if (m == MR && n == NR) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      T* row = c + i * c_rs;
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        V r = acc[i][v];
        if (load_c) r = Op::add(r, Op::load(row + v * Op::kLanes));
        Op::store(row + v * Op::kLanes, r);
      }
    }
    return;
  }
  // Edge tile: spill to a local tile and copy only the valid part, so nothing outside
  // C is read or written.
  alignas(64) T tile[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) Op::store(&tile[i][v * Op::kLanes], acc[i][v]);
  for (std::size_t i = 0; i < m; ++i) {
    T* row = c + static_cast<std::ptrdiff_t>(i) * c_rs;
    if (load_c) {
      for (std::size_t j = 0; j < n; ++j) row[j] += tile[i][j];
    } else {
      for (std::size_t j = 0; j < n; ++j) row[j] = tile[i][j];
    }
  }
}

}  // namespace

// A tile of at most half a sliver's columns: Note [Half-width tile] (microkernel_avx2.cpp).
void ukernel_avx512_f32(std::size_t k, const float* a, const float* b, float* c,
                        std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c) {
  if (n <= kAvx512NrF32 / 2)
    return kernel<VecF32, kAvx512MrF32, kAvx512NrF32 / 32, kAvx512NrF32>(k, a, b, c, c_rs, m, n,
                                                                         load_c);
  kernel<VecF32, kAvx512MrF32, kAvx512NrF32 / 16>(k, a, b, c, c_rs, m, n, load_c);
}

void ukernel_avx512_f64(std::size_t k, const double* a, const double* b, double* c,
                        std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c) {
  if (n <= kAvx512NrF64 / 2)
    return kernel<VecF64, kAvx512MrF64, kAvx512NrF64 / 16, kAvx512NrF64>(k, a, b, c, c_rs, m, n,
                                                                         load_c);
  kernel<VecF64, kAvx512MrF64, kAvx512NrF64 / 8>(k, a, b, c, c_rs, m, n, load_c);
}

}  // namespace ember::cpu::detail
