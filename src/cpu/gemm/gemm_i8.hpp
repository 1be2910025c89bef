// The Cpu backend's int8 GEMM, the product quantized layers are built on: unsigned 8-bit A
// times signed 8-bit B, summed in 32-bit integers (an activation with its zero point times a
// symmetric weight, as quantized inference stores them), by the CPU's int8 dot-product
// instructions where it has them (cpu/isa.hpp's Int8Dot: AVX512_VNNI's vpdpbusd, AMX-INT8's
// tdpbusd) and a portable loop elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::cpu {

// C[i*c_rs + j] = sum_p A[i*a_rs + p*a_cs] * B[p*b_rs + j*b_cs] for i<m, j<n, p<k, A u8 and
// B s8, with any strides; C rows may be strided, its columns are contiguous; k == 0 gives
// zeros. Batched as gemm_f32: batch b uses a + b*a_bs, b + b*b_bs, c + b*c_bs (a batch
// stride may be 0).
// Note [int8 sums]: every product is exact, and the sum is taken modulo 2^32 (two's
// complement, as vpdpbusd and tdpbusd add without saturating), so integer addition's order
// never shows: every kernel gives the same bits, and they are the exact sum wherever it
// fits in an int32 (always for k <= 66,000: |a b| <= 255 * 128).
void gemm_u8s8(std::size_t batch, std::size_t m, std::size_t n, std::size_t k,
               const std::uint8_t* a, std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs,
               const std::int8_t* b, std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs,
               std::int32_t* c, std::ptrdiff_t c_bs, std::ptrdiff_t c_rs);

namespace detail {
// The kernel families of gemm_u8s8: Portable is plain C++ on the quad layout (any CPU).
enum class I8Kernel { Auto, Portable, Avx512Vnni, Amx };
// Test hook: which family gemm_u8s8 uses (Auto: the best this CPU runs under EMBER_CPU_ISA).
void gemm_u8s8_force(I8Kernel kernel);
// Whether this CPU (and OS) runs the family; Auto and Portable always.
bool gemm_u8s8_supported(I8Kernel kernel);
// The family the next gemm_u8s8 call uses (never Auto).
I8Kernel gemm_u8s8_active();
}  // namespace detail

}  // namespace ember::cpu
