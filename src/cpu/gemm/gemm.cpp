// Reference-speed GEMM, replaced by the blocked implementation.
#include "cpu/gemm/gemm.hpp"
namespace ember::cpu {
namespace {
template <class T>
void gemm(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const T* a,
          std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const T* b,
          std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, T* c, std::ptrdiff_t c_bs,
          std::ptrdiff_t c_rs, bool accumulate) {
  for (std::size_t q = 0; q < batch; ++q) {
    const T* A = a + static_cast<std::ptrdiff_t>(q) * a_bs;
    const T* B = b + static_cast<std::ptrdiff_t>(q) * b_bs;
    T* C = c + static_cast<std::ptrdiff_t>(q) * c_bs;
    for (std::size_t i = 0; i < m; ++i) {
      T* row = C + static_cast<std::ptrdiff_t>(i) * c_rs;
      if (!accumulate)
        for (std::size_t j = 0; j < n; ++j) row[j] = T(0);
      for (std::size_t p = 0; p < k; ++p) {
        const T av = A[static_cast<std::ptrdiff_t>(i) * a_rs + static_cast<std::ptrdiff_t>(p) * a_cs];
        const T* brow = B + static_cast<std::ptrdiff_t>(p) * b_rs;
        for (std::size_t j = 0; j < n; ++j) row[j] += av * brow[static_cast<std::ptrdiff_t>(j) * b_cs];
      }
    }
  }
}
}  // namespace
void gemm_f32(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const float* a,
              std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const float* b,
              std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, float* c,
              std::ptrdiff_t c_bs, std::ptrdiff_t c_rs, bool accumulate) {
  gemm(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c, c_bs, c_rs, accumulate);
}
void gemm_f64(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const double* a,
              std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const double* b,
              std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, double* c,
              std::ptrdiff_t c_bs, std::ptrdiff_t c_rs, bool accumulate) {
  gemm(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c, c_bs, c_rs, accumulate);
}
}  // namespace ember::cpu
