#pragma once
#include <cstddef>
namespace ember::cpu {
// C[i*c_rs + j] (= or +=) sum_p A[i*a_rs + p*a_cs] * B[p*b_rs + j*b_cs]; batched with batch
// strides (0 broadcasts).
void gemm_f32(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const float* a,
              std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const float* b,
              std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, float* c,
              std::ptrdiff_t c_bs, std::ptrdiff_t c_rs, bool accumulate);
void gemm_f64(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const double* a,
              std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const double* b,
              std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, double* c,
              std::ptrdiff_t c_bs, std::ptrdiff_t c_rs, bool accumulate);
}  // namespace ember::cpu
