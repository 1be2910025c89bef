// The AVX512_BF16 micro-kernel of the bf16 GEMM (see microkernel.hpp for the contract and the
// pair layout). Compiled with the AVX-512 flags and -mavx512bf16, and only called after a
// run-time check (cpu::dot_isa_supported), so, as microkernel_avx512.cpp, it defines nothing
// with external or vague linkage besides the kernel.
#include <immintrin.h>

#include <cstring>

#include "cpu/gemm/microkernel.hpp"

namespace ember::cpu::detail {
namespace {

constexpr int MR = kBf16Mr, NR = kBf16Nr, kLanes = 16;

// One k pair of A's row i, as the 32-bit word every lane of a dot product reads.
inline __attribute__((always_inline)) __m512bh pair_of(const std::uint16_t* a) {
  std::uint32_t w;
  std::memcpy(&w, a, sizeof w);
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(w)));
}

// MR rows x NV vectors of f32 accumulators (24 of the 32 registers at NV = 2); each k pair
// is one vdpbf16ps per accumulator: the odd product added, then the even one (Note [bf16
// dot products] in gemm_bf16.hpp). NV = 1 is the half-width tile (Note [Half-width tile]).
template <int NV>
inline __attribute__((always_inline)) void tile(std::size_t kq, const std::uint16_t* a,
                                                const std::uint16_t* b, float* c,
                                                std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                                bool load_c) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (std::size_t q = 0; q < kq; ++q) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + 2 * (v * kLanes)));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512bh av = pair_of(a + 2 * i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
    a += 2 * MR;
    b += 2 * NR;
  }
  if (m == MR && n == static_cast<std::size_t>(NV * kLanes)) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      float* row = c + i * c_rs;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        __m512 r = acc[i][v];
        if (load_c) r = _mm512_add_ps(r, _mm512_loadu_ps(row + v * kLanes));
        _mm512_storeu_ps(row + v * kLanes, r);
      }
    }
    return;
  }
  alignas(64) float out[MR][NV * kLanes];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_store_ps(&out[i][v * kLanes], acc[i][v]);
  for (std::size_t i = 0; i < m; ++i) {
    float* row = c + static_cast<std::ptrdiff_t>(i) * c_rs;
    for (std::size_t j = 0; j < n; ++j) row[j] = load_c ? row[j] + out[i][j] : out[i][j];
  }
}

}  // namespace

void ukernel_avx512bf16(std::size_t kq, const std::uint16_t* a, const std::uint16_t* b, float* c,
                        std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c) {
  if (n <= NR / 2) return tile<1>(kq, a, b, c, c_rs, m, n, load_c);
  tile<2>(kq, a, b, c, c_rs, m, n, load_c);
}

}  // namespace ember::cpu::detail
