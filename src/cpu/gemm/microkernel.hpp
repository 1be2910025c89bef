// Declarations shared between the GEMM driver (gemm.cpp, baseline ISA) and the
// micro-kernel translation units that are compiled with wider ISA flags. Only plain
// declarations and constants live here: an inline function or template defined in a
// header included by an -mavx512f translation unit could be emitted there with AVX-512
// instructions and then chosen by the linker for the baseline code as well.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::cpu::detail {

// A micro-kernel multiplies a packed MR x kc sliver of A (a[p*MR + i]) by a packed
// kc x NR sliver of B (b[p*NR + j]) and writes rows i < m, columns j < n of the result to
// C (c[i*c_rs + j]), overwriting when load_c is false and adding otherwise. Packed
// slivers are zero-padded to full MR/NR, so a kernel may always compute the full tile.
template <class T>
using Ukernel = void (*)(std::size_t k, const T* a, const T* b, T* c, std::ptrdiff_t c_rs,
                         std::size_t m, std::size_t n, bool load_c);

// The same with B's rows read in place (Note [B rows in place] in gemm.hpp): row p of the
// tile is rows[p] + j, each readable for NR elements whatever n is.
template <class T>
using UkernelInPlace = void (*)(std::size_t k, const T* a, const T* const* rows, std::size_t j,
                                T* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                bool load_c);

// The same with A's columns read in place and B packed (Note [A columns in place] in
// gemm.hpp): step p of the tile's A is cols[p] + i .. + MR, each readable for the family's
// columns-in-place MR elements whatever m is.
template <class T>
using UkernelColsInPlace = void (*)(std::size_t k, const T* const* cols, std::size_t i, const T* b,
                                    T* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                    bool load_c);

// The same with A's rows read in place and B packed (Note [A rows in place] in gemm.hpp):
// element (i, p) of the tile's A at rows[i][p], rows[i] readable for k elements for every
// i < MR (rows past m repeat a real one).
template <class T>
using UkernelRowsInPlace = void (*)(std::size_t k, const T* const* rows, const T* b, T* c,
                                    std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c);

// AVX-512 (F, VL, BW, DQ) + FMA tiles.
inline constexpr int kAvx512MrF32 = 12, kAvx512NrF32 = 32;
inline constexpr int kAvx512MrF64 = 12, kAvx512NrF64 = 16;
void ukernel_avx512_f32(std::size_t k, const float* a, const float* b, float* c,
                        std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c);
void ukernel_avx512_f64(std::size_t k, const double* a, const double* b, double* c,
                        std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c);
void ukernel_in_place_avx512_f32(std::size_t k, const float* a, const float* const* rows,
                                 std::size_t j, float* c, std::ptrdiff_t c_rs, std::size_t m,
                                 std::size_t n, bool load_c);
void ukernel_in_place_avx512_f64(std::size_t k, const double* a, const double* const* rows,
                                 std::size_t j, double* c, std::ptrdiff_t c_rs, std::size_t m,
                                 std::size_t n, bool load_c);
void ukernel_rows_in_place_avx512_f32(std::size_t k, const float* const* rows, const float* b,
                                      float* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                      bool load_c);
void ukernel_rows_in_place_avx512_f64(std::size_t k, const double* const* rows, const double* b,
                                      double* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                      bool load_c);
// A's columns in place: 14 rows x 2 vectors, 28 of the 32 registers; tiles of 8 rows (maps
// 8, 16, 24, 32 wide) and of 7 have kernels of their own.
inline constexpr int kAvx512ColsMr = 14, kAvx512ColsMid = 8;
void ukernel_cols_in_place_avx512_f32(std::size_t k, const float* const* cols, std::size_t i,
                                      const float* b, float* c, std::ptrdiff_t c_rs, std::size_t m,
                                      std::size_t n, bool load_c);
void ukernel_cols_in_place_avx512_f64(std::size_t k, const double* const* cols, std::size_t i,
                                      const double* b, double* c, std::ptrdiff_t c_rs,
                                      std::size_t m, std::size_t n, bool load_c);

// AVX2 + FMA tiles.
inline constexpr int kAvx2MrF32 = 6, kAvx2NrF32 = 16;
inline constexpr int kAvx2MrF64 = 6, kAvx2NrF64 = 8;
void ukernel_avx2_f32(std::size_t k, const float* a, const float* b, float* c, std::ptrdiff_t c_rs,
                      std::size_t m, std::size_t n, bool load_c);
void ukernel_avx2_f64(std::size_t k, const double* a, const double* b, double* c,
                      std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c);
void ukernel_in_place_avx2_f32(std::size_t k, const float* a, const float* const* rows,
                               std::size_t j, float* c, std::ptrdiff_t c_rs, std::size_t m,
                               std::size_t n, bool load_c);
void ukernel_in_place_avx2_f64(std::size_t k, const double* a, const double* const* rows,
                               std::size_t j, double* c, std::ptrdiff_t c_rs, std::size_t m,
                               std::size_t n, bool load_c);
void ukernel_rows_in_place_avx2_f32(std::size_t k, const float* const* rows, const float* b,
                                    float* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                    bool load_c);
void ukernel_rows_in_place_avx2_f64(std::size_t k, const double* const* rows, const double* b,
                                    double* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                                    bool load_c);
// A's columns in place: 6 rows x 2 vectors, as the packed tile.
void ukernel_cols_in_place_avx2_f32(std::size_t k, const float* const* cols, std::size_t i,
                                    const float* b, float* c, std::ptrdiff_t c_rs, std::size_t m,
                                    std::size_t n, bool load_c);
void ukernel_cols_in_place_avx2_f64(std::size_t k, const double* const* cols, std::size_t i,
                                    const double* b, double* c, std::ptrdiff_t c_rs, std::size_t m,
                                    std::size_t n, bool load_c);

// bf16 dot-product tiles (gemm_bf16.cpp, Note [bf16 dot products] in gemm_bf16.hpp): C's
// MR x NR tile (f32) of a packed A sliver times a packed B sliver, kq = kc / 2 pairs of k
// steps, C overwritten or (load_c) added to, rows i < m and columns j < n only. Packed
// slivers are zero-padded like the f32 ones. Layouts, in bf16 elements:
//   pairs (Emulated, Avx512Bf16): A at [(q * MR + i) * 2 + t] = A(i, 2q + t),
//                                 B at [(q * NR + j) * 2 + t] = B(2q + t, j);
//   Amx: A row-major, [i * kc + p] = A(i, p) with kc a multiple of kAmxK; B as pairs.
using UkernelBf16 = void (*)(std::size_t kq, const std::uint16_t* a, const std::uint16_t* b,
                             float* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                             bool load_c);
inline constexpr int kBf16Mr = 12, kBf16Nr = 32;
inline constexpr int kAmxMr = 32, kAmxNr = 32, kAmxK = 32;
void ukernel_avx512bf16(std::size_t kq, const std::uint16_t* a, const std::uint16_t* b, float* c,
                        std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c);
void ukernel_amx_bf16(std::size_t kq, const std::uint16_t* a, const std::uint16_t* b, float* c,
                      std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c);

// int8 dot-product tiles (gemm_i8.cpp, Note [int8 sums] in gemm_i8.hpp): C's MR x NR tile
// (int32) of a packed u8 A sliver times a packed s8 B sliver, kq = kc / 4 quads of k steps,
// C overwritten or (load_c) added to, rows i < m and columns j < n only, slivers zero-padded.
// Layouts, in bytes:
//   quads (Portable, Avx512Vnni): A at [(q * MR + i) * 4 + t] = A(i, 4q + t),
//                                 B at [(q * NR + j) * 4 + t] = B(4q + t, j);
//   Amx: A row-major, [i * kc + p] = A(i, p) with kc a multiple of kAmxI8K; B as quads.
using UkernelI8 = void (*)(std::size_t kq, const std::uint8_t* a, const std::int8_t* b,
                           std::int32_t* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                           bool load_c);
inline constexpr int kI8Mr = 12, kI8Nr = 32;
inline constexpr int kAmxI8Mr = 32, kAmxI8Nr = 32, kAmxI8K = 64;
void ukernel_avx512vnni_u8s8(std::size_t kq, const std::uint8_t* a, const std::int8_t* b,
                             std::int32_t* c, std::ptrdiff_t c_rs, std::size_t m, std::size_t n,
                             bool load_c);
void ukernel_amx_u8s8(std::size_t kq, const std::uint8_t* a, const std::int8_t* b, std::int32_t* c,
                      std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c);

// Matrix-vector kernels for products with m == 1 or n == 1 (gemv.inc): no packing, the
// matrix is read once, in the order it lies in memory. `x` is contiguous.
//   dot:  y[i*ys] (= or +=) sum_p mat[i*rs + p] * x[p], for i < rows (rows contiguous);
//   axpy: y[j] (= or +=) sum_p x[p] * mat[p*rs + j], for j < n (columns contiguous, y too).
// Each output element sums its k terms in an order fixed by k alone, never by how the
// caller splits rows or columns over threads.
template <class T>
using GemvDot = void (*)(std::size_t rows, std::size_t k, const T* mat, std::ptrdiff_t rs,
                         const T* x, T* y, std::ptrdiff_t ys, bool accumulate);
template <class T>
using GemvAxpy = void (*)(std::size_t k, std::size_t n, const T* mat, std::ptrdiff_t rs, const T* x,
                          T* y, bool accumulate);

void gemv_dot_avx512_f32(std::size_t rows, std::size_t k, const float* mat, std::ptrdiff_t rs,
                         const float* x, float* y, std::ptrdiff_t ys, bool accumulate);
void gemv_dot_avx512_f64(std::size_t rows, std::size_t k, const double* mat, std::ptrdiff_t rs,
                         const double* x, double* y, std::ptrdiff_t ys, bool accumulate);
void gemv_axpy_avx512_f32(std::size_t k, std::size_t n, const float* mat, std::ptrdiff_t rs,
                          const float* x, float* y, bool accumulate);
void gemv_axpy_avx512_f64(std::size_t k, std::size_t n, const double* mat, std::ptrdiff_t rs,
                          const double* x, double* y, bool accumulate);
void gemv_dot_avx2_f32(std::size_t rows, std::size_t k, const float* mat, std::ptrdiff_t rs,
                       const float* x, float* y, std::ptrdiff_t ys, bool accumulate);
void gemv_dot_avx2_f64(std::size_t rows, std::size_t k, const double* mat, std::ptrdiff_t rs,
                       const double* x, double* y, std::ptrdiff_t ys, bool accumulate);
void gemv_axpy_avx2_f32(std::size_t k, std::size_t n, const float* mat, std::ptrdiff_t rs,
                        const float* x, float* y, bool accumulate);
void gemv_axpy_avx2_f64(std::size_t k, std::size_t n, const double* mat, std::ptrdiff_t rs,
                        const double* x, double* y, bool accumulate);

}  // namespace ember::cpu::detail
