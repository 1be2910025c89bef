// Internal interface of the Cpu backend's dense matrix multiply (GEMM). Operands are
// described by raw pointers and element strides so that transposed, sliced or broadcast
// tensors are multiplied without first being copied; the implementation packs them into
// cache-friendly panels itself and picks the widest micro-kernel the CPU supports.
#pragma once

#include <cstddef>

namespace ember::cpu {

// C[i*c_rs + j] (= or +=) sum_p A[i*a_rs + p*a_cs] * B[p*b_rs + j*b_cs], for i<m, j<n, p<k.
// Any strides for A and B (so transposed or sliced operands need no copy); C rows may be
// strided but columns are contiguous. accumulate=false overwrites C. k == 0 gives zeros
// (or leaves C when accumulating). Batched: batch b uses a + b*a_bs, b + b*b_bs, c + b*c_bs
// (a batch stride may be 0 for broadcasting).
void gemm_f32(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const float* a,
              std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const float* b,
              std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, float* c,
              std::ptrdiff_t c_bs, std::ptrdiff_t c_rs, bool accumulate);
void gemm_f64(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const double* a,
              std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const double* b,
              std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, double* c,
              std::ptrdiff_t c_bs, std::ptrdiff_t c_rs, bool accumulate);

// A B operand [k, n] that is not a strided matrix but is written straight into the GEMM's
// packed panels (an implicit matrix, as convolution's window columns): pack(ctx, dst, nr,
// p0, kc, j0, cols) writes rows [p0, p0 + kc) and columns [j0, j0 + cols) of B as
// ceil(cols / nr) slivers, sliver s at dst + s * nr * kc holding B(p0 + p, j0 + s * nr + j)
// at [p * nr + j], zero for columns past cols. Called concurrently on disjoint column ranges.
template <class T>
struct PackedB {
  void (*pack)(const void* ctx, T* dst, std::size_t nr, std::size_t p0, std::size_t kc,
               std::size_t j0, std::size_t cols);
  const void* ctx;
};

// C[i*c_rs + j] (= or +=) sum_p A[i*a_rs + p*a_cs] * B(p, j), for i<m, j<n, p<k, with B
// given by its packer; the blocking, threads and micro-kernels are gemm_f32's.
void gemm_f32_packed_b(std::size_t m, std::size_t n, std::size_t k, const float* a,
                       std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const PackedB<float>& b, float* c,
                       std::ptrdiff_t c_rs, bool accumulate);
void gemm_f64_packed_b(std::size_t m, std::size_t n, std::size_t k, const double* a,
                       std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const PackedB<double>& b,
                       double* c, std::ptrdiff_t c_rs, bool accumulate);

namespace detail {

// Test hook: which micro-kernel family gemm uses. Auto (the default) is cpu::active_isa()'s
// (cpu/isa.hpp: the best the CPU supports, or EMBER_CPU_ISA); forcing one this CPU lacks
// falls back to Auto.
enum class GemmIsa { Auto, Scalar, Avx2, Avx512 };
void gemm_force_isa(GemmIsa isa);
// Whether this CPU (and OS) can run the given family; Auto and Scalar are always true.
bool gemm_isa_supported(GemmIsa isa);
// The family the next gemm call will actually use (never Auto).
GemmIsa gemm_active_isa();

}  // namespace detail
}  // namespace ember::cpu
