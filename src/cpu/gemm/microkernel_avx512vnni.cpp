// The AVX512_VNNI micro-kernel of the int8 GEMM (see microkernel.hpp for the contract and the
// quad layout). Compiled with the AVX-512 flags and -mavx512vnni, and only called after a
// run-time check (cpu::int8_dot_supported), so, as microkernel_avx512.cpp, it defines nothing
// with external or vague linkage besides the kernel.
#include <immintrin.h>

#include <cstring>

#include "cpu/gemm/microkernel.hpp"

namespace ember::cpu::detail {
namespace {

constexpr int MR = kI8Mr, NR = kI8Nr, kLanes = 16;

// One quad of A's row i (four u8 k steps), as the 32-bit word every lane of a dot reads.
inline __attribute__((always_inline)) __m512i quad_of(const std::uint8_t* a) {
  std::uint32_t w;
  std::memcpy(&w, a, sizeof w);
  return _mm512_set1_epi32(static_cast<int>(w));
}

// MR rows x NV vectors of int32 accumulators (24 of the 32 registers at NV = 2); each quad is
// one vpdpbusd per accumulator: four u8 x s8 products added to each lane, wrapping (Note
// [int8 sums] in gemm_i8.hpp).
template <int NV>
inline __attribute__((always_inline)) void tile(std::size_t kq, const std::uint8_t* a,
                                                const std::int8_t* b, std::int32_t* c,
                                                std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                                bool load_c) {
  __m512i acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (std::size_t q = 0; q < kq; ++q) {
    __m512i bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_si512(b + 4 * (v * kLanes));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512i av = quad_of(a + 4 * i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], av, bv[v]);
    }
    a += 4 * MR;
    b += 4 * NR;
  }
  if (m == MR && n == static_cast<std::size_t>(NV * kLanes)) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      std::int32_t* row = c + i * c_rs;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        __m512i r = acc[i][v];
        if (load_c) r = _mm512_add_epi32(r, _mm512_loadu_si512(row + v * kLanes));
        _mm512_storeu_si512(row + v * kLanes, r);
      }
    }
    return;
  }
  alignas(64) std::int32_t out[MR][NV * kLanes];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_store_si512(&out[i][v * kLanes], acc[i][v]);
  for (std::size_t i = 0; i < m; ++i) {
    std::int32_t* row = c + static_cast<std::ptrdiff_t>(i) * c_rs;
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint32_t o = static_cast<std::uint32_t>(out[i][j]);
      row[j] = static_cast<std::int32_t>(load_c ? static_cast<std::uint32_t>(row[j]) + o : o);
    }
  }
}

}  // namespace

void ukernel_avx512vnni_u8s8(std::size_t kq, const std::uint8_t* a, const std::int8_t* b,
                             std::int32_t* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                             bool load_c) {
  if (n <= NR / 2) return tile<1>(kq, a, b, c, c_rs, m, n, load_c);
  tile<2>(kq, a, b, c, c_rs, m, n, load_c);
}

}  // namespace ember::cpu::detail
