// The Cpu backend's bf16 GEMM: bf16 operands multiplied with f32 accumulation by the CPU's
// bf16 dot-product instructions (cpu/isa.hpp's DotIsa: AVX512_BF16's vdpbf16ps, AMX's
// tdpbf16ps). Where the CPU has neither, bf16 products are widened to f32 and run by
// gemm_f32 instead (cpu_backend.cpp), which this file does not replace.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::cpu {

// C[i*c_rs + j] = sum_p A[i*a_rs + p*a_cs] * B[p*b_rs + j*b_cs] in f32, for i<m, j<n, p<k,
// with A and B bf16 (their bits, as ember's bf16 stores them) and any strides; C rows may
// be strided, its columns are contiguous; k == 0 gives zeros. Batched as gemm_f32: batch b
// uses a + b*a_bs, b + b*b_bs, c + b*c_bs (a batch stride may be 0).
// Note [bf16 dot products]: each pair of k steps (2q, 2q+1) is one dot-product step, the
// odd product added first, each addition rounded to f32 (products of bf16 values are exact
// in f32), with bf16 inputs below f32's normal range read as zero and results below it
// flushed to zero, as vdpbf16ps defines it; a k block's sum is added to C once at its end.
// So a result differs from the widened f32 product in the order of its additions and the
// flushing of subnormals only. AMX's tiles sum in an order of their own, which Intel leaves
// unspecified; tests hold them to the f64 product within f32 accumulation's bound.
void gemm_bf16(std::size_t batch, std::size_t m, std::size_t n, std::size_t k,
               const std::uint16_t* a, std::ptrdiff_t a_bs, std::ptrdiff_t a_rs,
               std::ptrdiff_t a_cs, const std::uint16_t* b, std::ptrdiff_t b_bs,
               std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, float* c, std::ptrdiff_t c_bs,
               std::ptrdiff_t c_rs);

// Whether bf16 products run here (a dot-product ISA is active, cpu/isa.hpp, or a kernel is
// forced by the test hook) rather than widened to f32.
bool gemm_bf16_native();

namespace detail {
// The kernel families of gemm_bf16. Emulated is a portable scalar model of vdpbf16ps's
// arithmetic (Note [bf16 dot products]), for tests on any CPU and as the reference the
// AVX512_BF16 kernel must match bit for bit.
enum class Bf16Kernel { Auto, Emulated, Avx512Bf16, Amx };
// Test hook: which family gemm_bf16 uses (Auto: cpu::active_dot_isa()'s, or none).
void gemm_bf16_force(Bf16Kernel kernel);
// Whether this CPU (and OS) runs the family; Auto and Emulated always.
bool gemm_bf16_supported(Bf16Kernel kernel);
// The family the next gemm_bf16 call uses (Auto where none is active).
Bf16Kernel gemm_bf16_active();
}  // namespace detail

}  // namespace ember::cpu
