// The Cpu backend's GEMM driver: splits C = A*B into cache-sized blocks (NC columns of B
// for L3, KC-deep panels for L2/L1, MC rows of A for L2), packs each block of A and B into
// contiguous, zero-padded slivers in the order the micro-kernel reads them (this is where
// arbitrary operand strides are absorbed), runs the blocks on the thread pool and picks
// the micro-kernel for the CPU at run time (cpu/isa.hpp). Products with one row or one column
// take the matrix-vector path instead (see Note [gemv]). An A that several products share
// may be packed once beforehand (PackedA, Note [Packed A] in gemm.hpp). This file is compiled
// for the baseline ISA; the vector kernels live in microkernel_avx2.cpp /
// microkernel_avx512.cpp and gemv_avx2.cpp / gemv_avx512.cpp.
#include "cpu/gemm/gemm.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "cpu/gemm/microkernel.hpp"
#include "cpu/gemm/packing.hpp"
#include "cpu/isa.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/base/config.hpp"
#include "ember/base/error.hpp"

namespace ember::cpu {
namespace {

using detail::GemmIsa;
using std::ptrdiff_t;
using std::size_t;

Atomic<GemmIsa> g_forced_isa{GemmIsa::Auto};

GemmIsa gemm_isa(Isa isa) {
  switch (isa) {
    case Isa::Avx512:
      return GemmIsa::Avx512;
    case Isa::Avx2:
      return GemmIsa::Avx2;
    case Isa::Scalar:
      break;
  }
  return GemmIsa::Scalar;
}

// The forced family (test hook) where this CPU runs it, else cpu::active_isa()'s.
GemmIsa resolve_isa() {
  const GemmIsa forced = g_forced_isa.load(std::memory_order_relaxed);
  if (forced == GemmIsa::Scalar) return GemmIsa::Scalar;
  if (forced == GemmIsa::Avx2 && isa_supported(Isa::Avx2)) return GemmIsa::Avx2;
  if (forced == GemmIsa::Avx512 && isa_supported(Isa::Avx512)) return GemmIsa::Avx512;
  return gemm_isa(active_isa());
}

// ---------------------------------------------------------------------------------------
// Portable fallback micro-kernel: plain loops over a small tile; the compiler vectorises
// the inner j loop with whatever the baseline ISA offers.
constexpr int kScalarMr = 4, kScalarNr = 8;

// The tile over element i of A's step p, a(p, i), and B's row p, b(p): packed slivers, or an
// operand read in place.
template <class T, class A, class B>
void scalar_tile(size_t k, const A& a, const B& b, T* c, ptrdiff_t c_rs, size_t m, size_t n,
                 bool load_c) {
  T acc[kScalarMr][kScalarNr] = {};
  for (size_t p = 0; p < k; ++p) {
    const T* row = b(p);
    for (int i = 0; i < kScalarMr; ++i) {
      const T av = a(p, i);
      for (int j = 0; j < kScalarNr; ++j) acc[i][j] += av * row[j];
    }
  }
  for (size_t i = 0; i < m; ++i) {
    T* row = c + static_cast<ptrdiff_t>(i) * c_rs;
    for (size_t j = 0; j < n; ++j) row[j] = load_c ? row[j] + acc[i][j] : acc[i][j];
  }
}

template <class T>
void ukernel_scalar(size_t k, const T* a, const T* b, T* c, ptrdiff_t c_rs, size_t m, size_t n,
                    bool load_c) {
  scalar_tile<T>(
      k, [a](size_t p, int i) { return a[p * kScalarMr + size_t(i)]; },
      [b](size_t p) { return b + p * kScalarNr; }, c, c_rs, m, n, load_c);
}

// B's rows read in place (Note [B rows in place] in gemm.hpp).
template <class T>
void ukernel_in_place_scalar(size_t k, const T* a, const T* const* rows, size_t j, T* c,
                             ptrdiff_t c_rs, size_t m, size_t n, bool load_c) {
  scalar_tile<T>(
      k, [a](size_t p, int i) { return a[p * kScalarMr + size_t(i)]; },
      [rows, j](size_t p) { return rows[p] + j; }, c, c_rs, m, n, load_c);
}

// A's columns read in place (Note [A columns in place] in gemm.hpp).
template <class T>
void ukernel_cols_in_place_scalar(size_t k, const T* const* cols, size_t i0, const T* b, T* c,
                                  ptrdiff_t c_rs, size_t m, size_t n, bool load_c) {
  scalar_tile<T>(
      k, [cols, i0](size_t p, int i) { return cols[p][i0 + size_t(i)]; },
      [b](size_t p) { return b + p * kScalarNr; }, c, c_rs, m, n, load_c);
}

// A's rows read in place (Note [A rows in place] in gemm.hpp).
template <class T>
void ukernel_rows_in_place_scalar(size_t k, const T* const* rows, const T* b, T* c, ptrdiff_t c_rs,
                                  size_t m, size_t n, bool load_c) {
  scalar_tile<T>(
      k, [rows](size_t p, int i) { return rows[i][p]; },
      [b](size_t p) { return b + p * kScalarNr; }, c, c_rs, m, n, load_c);
}

// ---------------------------------------------------------------------------------------
// Packing. A block (rows x kc) becomes ceil(rows/MR) slivers, each laid out k-major:
// dst[p*MR + i]; rows past the end are zero so the kernel can always run a full tile.
// B block (kc x cols) likewise becomes ceil(cols/NR) slivers laid out dst[p*NR + j].
// MR/NR are template parameters so the inner loops have constant trip counts.

// Row-major A is packed by transposing small register blocks (detail::transpose_rows, SSE2
// for f32: a 4x4 block; 2x2 for f64 below) where the plain loop would move one element at a
// time.
template <int MR>
void pack_a_rows(float* dst, const float* const* rp, size_t kc) {
  detail::transpose_rows<MR>(dst, rp, kc);
}

template <int MR>
void pack_a_rows(double* dst, const double* const* rp, size_t kc) {
  size_t p = 0;
#if defined(__SSE2__)
  if constexpr (MR % 2 == 0) {
    for (; p + 2 <= kc; p += 2) {
      double* d = dst + p * MR;
      for (int i = 0; i < MR; i += 2) {
        const __m128d r0 = _mm_loadu_pd(rp[i] + p), r1 = _mm_loadu_pd(rp[i + 1] + p);
        _mm_storeu_pd(d + i, _mm_unpacklo_pd(r0, r1));
        _mm_storeu_pd(d + MR + i, _mm_unpackhi_pd(r0, r1));
      }
    }
  }
#endif
  for (; p < kc; ++p)
    for (int i = 0; i < MR; ++i) dst[p * MR + i] = rp[i][p];
}

template <class T, int MR>
void pack_a(T* dst, const T* a, ptrdiff_t a_rs, ptrdiff_t a_cs, size_t rows, size_t kc) {
  for (size_t s = 0; s < rows; s += MR, dst += MR * kc) {
    const size_t r = std::min<size_t>(MR, rows - s);
    const T* src = a + static_cast<ptrdiff_t>(s) * a_rs;
    if (r == MR && a_rs == 1) {
      // Column-major A (e.g. a transposed row-major matrix): each k step is contiguous.
      for (size_t p = 0; p < kc; ++p) {
        const T* col = src + static_cast<ptrdiff_t>(p) * a_cs;
        for (int i = 0; i < MR; ++i) dst[p * MR + i] = col[i];
      }
      continue;
    }
    if (r == MR && a_cs == 1) {
      // Row-major A: read MR rows side by side so every load stream is sequential.
      const T* rp[MR];
      for (int i = 0; i < MR; ++i) rp[i] = src + i * a_rs;
      pack_a_rows<MR>(dst, rp, kc);
      continue;
    }
    for (size_t p = 0; p < kc; ++p) {
      const T* col = src + static_cast<ptrdiff_t>(p) * a_cs;
      for (size_t i = 0; i < r; ++i) dst[p * MR + i] = col[static_cast<ptrdiff_t>(i) * a_rs];
      for (size_t i = r; i < MR; ++i) dst[p * MR + i] = T(0);
    }
  }
}

// Packs slivers [s_begin, s_end) of a kc x cols block of B.
template <class T, int NR>
void pack_b(T* dst, const T* b, ptrdiff_t b_rs, ptrdiff_t b_cs, size_t cols, size_t kc,
            size_t s_begin, size_t s_end) {
  if (b_cs == 1) {
    // Row-major B: copy a group of full slivers row by row, so the reads run along B's
    // rows (a sliver at a time would touch a new cache line and often a new page on
    // every row) while the writes go to a few sequential streams.
    constexpr size_t kGroup = 8;
    const size_t full_end = std::min(s_end, cols / NR);
    while (s_begin < full_end) {
      const size_t g = std::min(kGroup, full_end - s_begin);
      T* d = dst + s_begin * NR * kc;
      const T* src = b + static_cast<ptrdiff_t>(s_begin * NR);
      for (size_t p = 0; p < kc; ++p) {
        const T* row = src + static_cast<ptrdiff_t>(p) * b_rs;
        // Fixed-size memcpy: becomes plain vector moves, and unlike a loop it need not be
        // proven free of aliasing to be vectorised.
        for (size_t q = 0; q < g; ++q)
          std::memcpy(d + q * NR * kc + p * NR, row + q * NR, NR * sizeof(T));
      }
      s_begin += g;
    }
  }
  for (size_t s = s_begin; s < s_end; ++s) {
    T* d = dst + s * NR * kc;
    const size_t j0 = s * NR;
    const size_t w = std::min<size_t>(NR, cols - j0);
    const T* src = b + static_cast<ptrdiff_t>(j0) * b_cs;
    if (w == NR && b_cs == 1) {
      for (size_t p = 0; p < kc; ++p) {
        const T* row = src + static_cast<ptrdiff_t>(p) * b_rs;
        for (int j = 0; j < NR; ++j) d[p * NR + j] = row[j];
      }
    } else if (w == NR && b_rs == 1) {
      // Column-major B (e.g. A * B^T with row-major B): each column is a run along k.
      if constexpr (std::is_same_v<T, float>) {
        // Transposed 4 x 4 at a time (as A's rows are: transpose_rows), where one element at
        // a time each store went to another line of the sliver.
        std::array<const float*, NR> cols;
        for (int j = 0; j < NR; ++j) cols[j] = src + j * b_cs;
        detail::transpose_rows<NR>(d, cols.data(), kc);
      } else {
        for (int j = 0; j < NR; ++j) {
          const T* col = src + j * b_cs;
          for (size_t p = 0; p < kc; ++p) d[p * NR + j] = col[p];
        }
      }
    } else {
      for (size_t p = 0; p < kc; ++p) {
        const T* row = src + static_cast<ptrdiff_t>(p) * b_rs;
        for (size_t j = 0; j < w; ++j) d[p * NR + j] = row[static_cast<ptrdiff_t>(j) * b_cs];
        for (size_t j = w; j < NR; ++j) d[p * NR + j] = T(0);
      }
    }
  }
}

// Everything the driver needs to know about one micro-kernel.
template <class T>
struct KernelInfo {
  size_t mr, nr;
  size_t kc, mc, nc;  // preferred block sizes (upper bounds; the driver balances them)
  detail::Ukernel<T> ukernel;
  detail::UkernelInPlace<T> ukernel_in_place;
  detail::UkernelColsInPlace<T> ukernel_cols_in_place;
  detail::UkernelRowsInPlace<T> ukernel_rows_in_place;
  size_t cols_mr, cols_mid;  // ukernel_cols_in_place's rows, and its middle kernel's (or 0)
  void (*pack_a)(T*, const T*, ptrdiff_t, ptrdiff_t, size_t, size_t);
  void (*pack_b)(T*, const T*, ptrdiff_t, ptrdiff_t, size_t, size_t, size_t, size_t);
};

template <class T, int MR, int NR, int ColsMR = MR, int ColsMid = 0>
constexpr KernelInfo<T> make_info(size_t kc, size_t mc, size_t nc, detail::Ukernel<T> uk,
                                  detail::UkernelInPlace<T> in_place,
                                  detail::UkernelColsInPlace<T> cols_in_place,
                                  detail::UkernelRowsInPlace<T> rows_in_place) {
  static_assert(NR <= kInPlaceRowSlack && ColsMR <= kInPlaceRowSlack,
                "Note [B rows in place], Note [A columns in place]: readable NR (MR) past n (m)");
  return {MR,
          NR,
          kc,
          mc,
          nc,
          uk,
          in_place,
          cols_in_place,
          rows_in_place,
          ColsMR,
          ColsMid,
          &pack_a<T, MR>,
          &pack_b<T, NR>};
}

// Block sizes: a KC x NR sliver of B stays in L1 while the MC x KC block of A streams from
// L2 and the KC x NC panel of B lives in L3.
template <class T>
KernelInfo<T> kernel_for(GemmIsa isa);

template <>
KernelInfo<float> kernel_for<float>(GemmIsa isa) {
  using namespace detail;
  switch (isa) {
#if EMBER_HAS_X86_KERNELS
    case GemmIsa::Avx512:
      return make_info<float, kAvx512MrF32, kAvx512NrF32, kAvx512ColsMr, kAvx512ColsMid>(
          256, 192, 4096, &ukernel_avx512_f32, &ukernel_in_place_avx512_f32,
          &ukernel_cols_in_place_avx512_f32, &ukernel_rows_in_place_avx512_f32);
    case GemmIsa::Avx2:
      return make_info<float, kAvx2MrF32, kAvx2NrF32>(
          256, 144, 4096, &ukernel_avx2_f32, &ukernel_in_place_avx2_f32,
          &ukernel_cols_in_place_avx2_f32, &ukernel_rows_in_place_avx2_f32);
#endif
    default:
      return make_info<float, kScalarMr, kScalarNr>(
          256, 128, 4096, &ukernel_scalar<float>, &ukernel_in_place_scalar<float>,
          &ukernel_cols_in_place_scalar<float>, &ukernel_rows_in_place_scalar<float>);
  }
}

template <>
KernelInfo<double> kernel_for<double>(GemmIsa isa) {
  using namespace detail;
  switch (isa) {
#if EMBER_HAS_X86_KERNELS
    case GemmIsa::Avx512:
      return make_info<double, kAvx512MrF64, kAvx512NrF64, kAvx512ColsMr, kAvx512ColsMid>(
          256, 96, 2048, &ukernel_avx512_f64, &ukernel_in_place_avx512_f64,
          &ukernel_cols_in_place_avx512_f64, &ukernel_rows_in_place_avx512_f64);
    case GemmIsa::Avx2:
      return make_info<double, kAvx2MrF64, kAvx2NrF64>(
          256, 72, 2048, &ukernel_avx2_f64, &ukernel_in_place_avx2_f64,
          &ukernel_cols_in_place_avx2_f64, &ukernel_rows_in_place_avx2_f64);
#endif
    default:
      return make_info<double, kScalarMr, kScalarNr>(
          128, 128, 2048, &ukernel_scalar<double>, &ukernel_in_place_scalar<double>,
          &ukernel_cols_in_place_scalar<double>, &ukernel_rows_in_place_scalar<double>);
  }
}

// Per-thread packing buffers (packing.hpp), released when the thread exits.
using detail::AlignedBuffer;
using detail::ceil_div;
using detail::round_up;
using detail::run_split;

EMBER_THREAD_LOCAL AlignedBuffer t_pack_a;
EMBER_THREAD_LOCAL AlignedBuffer t_pack_b;
EMBER_THREAD_LOCAL AlignedBuffer t_pack_a_whole;  // Note [Few rows by column blocks]

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr size_t kMinParallelMacs = size_t{1} << 20;

// The depth of a product's k blocks: at most the kernel's kc, balanced so the last block is
// not a sliver (k = 300 runs as 2 x 150 rather than 256 + 44). PackedA's panels follow it.
template <class T>
size_t k_block(const KernelInfo<T>& kr, size_t k) {
  return ceil_div(k, ceil_div(k, kr.kc));
}

// The providers of A's panels to gemm_blocked: a(pc, kcur, ic, mcur) returns the packed
// slivers of rows [ic, ic + mcur) and columns [pc, pc + kcur) of A (ic a multiple of MR).
// A strided A is packed into the calling thread's buffer, block by block.
template <class T>
struct StridedA {
  const KernelInfo<T>& kr;
  const T* a;
  ptrdiff_t rs, cs;
  const T* operator()(size_t pc, size_t kcur, size_t ic, size_t mcur) const {
    T* pa = static_cast<T*>(t_pack_a.get(kcur * round_up(mcur, kr.mr) * sizeof(T)));
    kr.pack_a(pa, a + static_cast<ptrdiff_t>(ic) * rs + static_cast<ptrdiff_t>(pc) * cs, rs, cs,
              mcur, kcur);
    return pa;
  }
};

// A PackedA's panels (Note [Packed A]): k block by k block, each the slivers of all of A's
// rows (rounded up to MR), so any block of rows that starts on a sliver is one piece.
template <class T>
struct PanelsA {
  const T* panels;
  size_t m_padded;
  const T* operator()(size_t pc, size_t kcur, size_t ic, size_t) const {
    return panels + pc * m_padded + ic * kcur;
  }
};

// A PrepackedB's panels (Note [Prepacked B]): k block by k block, each the slivers of all of
// B's columns (rounded up to NR), so the slivers of any run of columns that starts on a
// sliver are one piece, as pack_b would have written them: gemm_by_columns and gemm_blocked
// read them where they lie instead of packing.
template <class T>
struct PanelsB {
  const T* panels;
  size_t n_padded;
  const T* at(size_t pc, size_t kcur, size_t jc) const {
    return panels + pc * n_padded + jc * kcur;
  }
};
template <class PackB>
constexpr bool kPanelsB = false;
template <class T>
constexpr bool kPanelsB<PanelsB<T>> = true;

template <class T>
void zero_or_keep(size_t m, size_t n, T* c, ptrdiff_t c_rs, bool accumulate) {
  if (accumulate) return;
  for (size_t i = 0; i < m; ++i) std::fill_n(c + static_cast<ptrdiff_t>(i) * c_rs, n, T(0));
}

// ---------------------------------------------------------------------------------------
// Note [gemv]: with m == 1 or n == 1 a product is a matrix-vector product, bound by
// reading the matrix once. Packing would read and write it once more for no reuse, so
// these products skip it: the matrix is read where it lies, either along its contiguous
// rows (a dot product per output) or along its contiguous columns (the output
// accumulates one matrix row per vector step). Threads split the outputs; when there are
// few outputs, k is split into fixed-size chunks whose partial results are added in chunk
// order. Which split is used depends on the sizes only, so results never depend on the
// thread count.

template <class T>
struct GemvKernels {
  detail::GemvDot<T> dot;
  detail::GemvAxpy<T> axpy;
};

// Portable fallbacks: plain loops in the kernels' summation order shape.
template <class T>
void gemv_dot_scalar(size_t rows, size_t k, const T* mat, ptrdiff_t rs, const T* x, T* y,
                     ptrdiff_t ys, bool accumulate) {
  constexpr size_t L = 8;
  for (size_t i = 0; i < rows; ++i) {
    const T* row = mat + static_cast<ptrdiff_t>(i) * rs;
    T acc[L] = {};
    size_t p = 0;
    for (; p + L <= k; p += L)
      for (size_t j = 0; j < L; ++j) acc[j] += row[p + j] * x[p + j];
    T s = 0;
    for (size_t j = 0; j < L; ++j) s += acc[j];
    for (; p < k; ++p) s += row[p] * x[p];
    T& out = y[static_cast<ptrdiff_t>(i) * ys];
    out = accumulate ? out + s : s;
  }
}

template <class T>
void gemv_axpy_scalar(size_t k, size_t n, const T* mat, ptrdiff_t rs, const T* x, T* y,
                      bool accumulate) {
  if (!accumulate) std::fill_n(y, n, T(0));
  for (size_t p = 0; p < k; ++p) {
    const T* row = mat + static_cast<ptrdiff_t>(p) * rs;
    const T xp = x[p];
    for (size_t j = 0; j < n; ++j) y[j] += row[j] * xp;
  }
}

template <class T>
GemvKernels<T> gemv_for(GemmIsa isa);

template <>
GemvKernels<float> gemv_for<float>(GemmIsa isa) {
  using namespace detail;
  switch (isa) {
#if EMBER_HAS_X86_KERNELS
    case GemmIsa::Avx512:
      return {&gemv_dot_avx512_f32, &gemv_axpy_avx512_f32};
    case GemmIsa::Avx2:
      return {&gemv_dot_avx2_f32, &gemv_axpy_avx2_f32};
#endif
    default:
      return {&gemv_dot_scalar<float>, &gemv_axpy_scalar<float>};
  }
}

template <>
GemvKernels<double> gemv_for<double>(GemmIsa isa) {
  using namespace detail;
  switch (isa) {
#if EMBER_HAS_X86_KERNELS
    case GemmIsa::Avx512:
      return {&gemv_dot_avx512_f64, &gemv_axpy_avx512_f64};
    case GemmIsa::Avx2:
      return {&gemv_dot_avx2_f64, &gemv_axpy_avx2_f64};
#endif
    default:
      return {&gemv_dot_scalar<double>, &gemv_axpy_scalar<double>};
  }
}

// k is split into chunks of this many elements (dot) or matrix rows (axpy) when there are
// fewer outputs than these, too few to keep the threads busy. The choice depends on the
// sizes alone, never on the thread count, so neither do the results.
constexpr size_t kDotChunk = size_t{1} << 14;
constexpr size_t kAxpyChunk = 256;
constexpr size_t kFewDotRows = 16;
constexpr size_t kFewAxpyCols = 1024;

// y[i*ys] (= or +=) sum_p mat[i*rs + p] * x[p] for i < rows.
template <class T>
void gemv_dot_driver(const GemvKernels<T>& kr, size_t threads, size_t rows, size_t k, const T* mat,
                     ptrdiff_t rs, const T* x, T* y, ptrdiff_t ys, bool accumulate) {
  const size_t chunks = ceil_div(k, kDotChunk);
  if (rows >= kFewDotRows || chunks < 2) {
    const size_t grain = std::max<size_t>(4, 16384 / std::max<size_t>(k, 1));
    run_split(threads, rows, grain, [&](size_t r0, size_t r1) {
      kr.dot(r1 - r0, k, mat + static_cast<ptrdiff_t>(r0) * rs, rs, x,
             y + static_cast<ptrdiff_t>(r0) * ys, ys, accumulate);
    });
    return;
  }
  // Few long rows: partial dot products over fixed k chunks, then their ordered sum.
  std::vector<T> part(rows * chunks);
  run_split(threads, rows * chunks, 1, [&](size_t w0, size_t w1) {
    for (size_t w = w0; w < w1; ++w) {
      const size_t r = w / chunks, c = w % chunks;
      const size_t p0 = c * kDotChunk, len = std::min(kDotChunk, k - p0);
      kr.dot(1, len, mat + static_cast<ptrdiff_t>(r) * rs + static_cast<ptrdiff_t>(p0), rs, x + p0,
             &part[w], 1, false);
    }
  });
  for (size_t r = 0; r < rows; ++r) {
    T s = part[r * chunks];
    for (size_t c = 1; c < chunks; ++c) s += part[r * chunks + c];
    T& out = y[static_cast<ptrdiff_t>(r) * ys];
    out = accumulate ? out + s : s;
  }
}

// y[j] (= or +=) sum_p x[p] * mat[p*rs + j] for j < n; y contiguous.
template <class T>
void gemv_axpy_driver(const GemvKernels<T>& kr, size_t threads, size_t k, size_t n, const T* mat,
                      ptrdiff_t rs, const T* x, T* y, bool accumulate) {
  const size_t chunks = ceil_div(k, kAxpyChunk);
  if (n >= kFewAxpyCols || chunks < 2) {
    // Column blocks of 16 elements, so no two threads write one cache line of y.
    constexpr size_t kCols = 16;
    run_split(threads, ceil_div(n, kCols), 16, [&](size_t b0, size_t b1) {
      const size_t j0 = b0 * kCols, j1 = std::min(n, b1 * kCols);
      kr.axpy(k, j1 - j0, mat + j0, rs, x, y + j0, accumulate);
    });
    return;
  }
  // Few columns, many rows: partial outputs over fixed chunks of rows, added in order.
  std::vector<T> part(chunks * n);
  run_split(threads, chunks, 1, [&](size_t c0, size_t c1) {
    for (size_t c = c0; c < c1; ++c) {
      const size_t p0 = c * kAxpyChunk, len = std::min(kAxpyChunk, k - p0);
      kr.axpy(len, n, mat + static_cast<ptrdiff_t>(p0) * rs, rs, x + p0, &part[c * n], false);
    }
  });
  for (size_t j = 0; j < n; ++j) {
    T s = part[j];
    for (size_t c = 1; c < chunks; ++c) s += part[c * n + j];
    y[j] = accumulate ? y[j] + s : s;
  }
}

// One product with m == 1 or n == 1 (and k > 0) through the matrix-vector kernels.
// Returns false when the matrix operand has no unit stride, leaving it to the GEMM.
template <class T>
bool gemv_single(size_t threads, size_t m, size_t n, size_t k, const T* a, ptrdiff_t a_rs,
                 ptrdiff_t a_cs, const T* b, ptrdiff_t b_rs, ptrdiff_t b_cs, T* c, ptrdiff_t c_rs,
                 bool accumulate) {
  // The vector operand and the matrix, as mat[i*rs + p*cs] with i over the outputs.
  const bool col_out = n == 1;  // outputs run down C's only column
  const T* vec = col_out ? b : a;
  const ptrdiff_t vs = col_out ? b_rs : a_cs;
  const T* mat = col_out ? a : b;
  const size_t outs = col_out ? m : n;
  const ptrdiff_t mrs = col_out ? a_rs : b_cs, mcs = col_out ? a_cs : b_rs;
  const ptrdiff_t ys = col_out ? c_rs : 1;
  const bool dot = mcs == 1 || outs == 1;
  if (!dot && mrs != 1) return false;
  if (m * n * k < kMinParallelMacs) threads = 1;
  const GemvKernels<T> kr = gemv_for<T>(resolve_isa());
  // Strided vectors (at most k elements each) are gathered first.
  std::vector<T> x_buf, row_buf;
  const auto gather = [k](std::vector<T>& buf, const T* src, ptrdiff_t stride) {
    buf.resize(k);
    for (size_t p = 0; p < k; ++p) buf[p] = src[static_cast<ptrdiff_t>(p) * stride];
    return buf.data();
  };
  if (vs != 1) vec = gather(x_buf, vec, vs);
  if (outs == 1 && mcs != 1) mat = gather(row_buf, mat, mcs);
  if (dot) {
    gemv_dot_driver<T>(kr, threads, outs, k, mat, outs == 1 ? 0 : mrs, vec, c, ys, accumulate);
    return true;
  }
  if (ys == 1) {
    gemv_axpy_driver<T>(kr, threads, k, outs, mat, mcs, vec, c, accumulate);
    return true;
  }
  std::vector<T> y(outs);
  if (accumulate)
    for (size_t i = 0; i < outs; ++i) y[i] = c[static_cast<ptrdiff_t>(i) * ys];
  gemv_axpy_driver<T>(kr, threads, k, outs, mat, mcs, vec, y.data(), accumulate);
  for (size_t i = 0; i < outs; ++i) c[static_cast<ptrdiff_t>(i) * ys] = y[i];
  return true;
}

// Where a product's finished blocks go (Note [GEMM epilogue]): the epilogue, or none, and
// the product's index in its call's batch.
template <class T>
struct Finish {
  const GemmEpilogue<T>* ep = nullptr;
  size_t batch = 0;
  void operator()(size_t i0, size_t j0, T* c, ptrdiff_t c_rs, size_t rows, size_t cols) const {
    if (ep && rows > 0 && cols > 0) ep->apply(ep->ctx, batch, i0, j0, c, c_rs, rows, cols);
  }
};

// Columns of C an epilogue block spans (rounded to whole slivers): with the kernel's MC
// rows, a block of about 300 KB of f32 that is still in L2 (512 KB a core on the EPYC this
// was measured on) beside A's block when the epilogue reads it. 256 columns cost more: the
// epilogue's fixed work per tile (its inputs' pointers, the copy-out) is paid twice as
// often (BENCHMARKS.md, Fusion: matmul epilogues).
constexpr size_t kEpilogueCols = 512;

// Note [Packed A by column blocks]: a product whose A is packed already (PackedA: a
// convolution's weight, Note [Packed A] in gemm.hpp) is split over B's columns instead of
// run by gemm_blocked. Each column block of B — kc x nb, nb chosen so the block and C's
// rows of it take about kColumnBlockBytes, in L2 beside A's panels — is packed by the
// thread that multiplies it, right before use, into that thread's own buffer, then
// multiplied by every k block of A in turn. gemm_blocked instead packs a panel of up to
// 4096 columns with all threads (a convolution's 192 x 3136 window panel is 2.4 MB, out of
// L2 when the micro-kernels read it back) and meets them twice per k block; here the
// threads share only the read-only A and never wait for each other within a product, and
// C's block stays in L2 across the k blocks. The k blocks and slivers are gemm_blocked's,
// so every element of C sums the same products in the same order: the results are bit for
// bit gemm_blocked's, whatever the blocks and the thread count. gemm_blocked hands such
// products over when there are enough column blocks to give each thread a share
// (column_blocks); a product of few columns keeps gemm_blocked's split over the rows.
constexpr size_t kColumnBlockBytes = size_t{384} << 10;

// The number of column blocks of a packed-A product of n columns (0: keep gemm_blocked).
template <class T>
size_t column_blocks(const KernelInfo<T>& kr, size_t threads, size_t m, size_t n, size_t k) {
  const size_t n_slivers = ceil_div(n, kr.nr), kc = k_block(kr, k);
  const size_t per_block =
      std::max<size_t>(1, kColumnBlockBytes / sizeof(T) / ((kc + std::min(m, kr.mc)) * kr.nr));
  size_t blocks = ceil_div(n_slivers, per_block);
  if (threads <= 1) return blocks;
  if (n_slivers < 2 * threads) return 0;
  return std::min(n_slivers, round_up(blocks, threads));  // an equal share per thread
}

// The product of A's panels and a B given by pack_b (gemm_blocked's), `blocks` column blocks
// spread over `threads` (Note [Packed A by column blocks]). m, n, k > 0.
template <class T, class PackB>
void gemm_by_columns(const KernelInfo<T>& kr, size_t threads, size_t blocks, size_t m, size_t n,
                     size_t k, const PanelsA<T>& a_panels, const PackB& pack_b, T* c,
                     ptrdiff_t c_rs, bool accumulate, const Finish<T>& finish) {
  const size_t mr = kr.mr, nr = kr.nr, kc = k_block(kr, k);
  const size_t n_slivers = ceil_div(n, nr);
  const size_t mc = round_up(ceil_div(m, ceil_div(m, kr.mc)), mr);
  auto work = [&](size_t b0, size_t b1) {
    T* packed = nullptr;
    if constexpr (!kPanelsB<PackB>)
      packed = static_cast<T*>(t_pack_b.get(kc * ceil_div(n_slivers, blocks) * nr * sizeof(T)));
    for (size_t b = b0; b < b1; ++b) {
      const size_t s0 = n_slivers * b / blocks, s1 = n_slivers * (b + 1) / blocks;
      const size_t j0 = s0 * nr, ncur = std::min(n, s1 * nr) - j0;
      for (size_t pc = 0; pc < k; pc += kc) {
        const size_t kcur = std::min(kc, k - pc);
        const bool load_c = accumulate || pc > 0;
        const T* pb = packed;
        if constexpr (kPanelsB<PackB>) {
          pb = pack_b.at(pc, kcur, j0);
        } else {
          pack_b(packed, pc, kcur, j0, ncur, size_t{0}, s1 - s0);
        }
        for (size_t ic = 0; ic < m; ic += mc) {
          const size_t mcur = std::min(mc, m - ic);
          const T* pa = a_panels(pc, kcur, ic, mcur);
          T* c_blk = c + static_cast<ptrdiff_t>(ic) * c_rs + j0;
          // jr outer, ir inner: one B sliver stays in L1 while A's slivers stream from L2.
          for (size_t jr = 0; jr < s1 - s0; ++jr) {
            const size_t ncols = std::min(nr, ncur - jr * nr);
            const T* pbs = pb + jr * nr * kcur;
            for (size_t ir = 0; ir < mcur; ir += mr)
              kr.ukernel(kcur, pa + ir * kcur, pbs,
                         c_blk + static_cast<ptrdiff_t>(ir) * c_rs + jr * nr, c_rs,
                         std::min(mr, mcur - ir), ncols, load_c);
          }
          if (pc + kcur == k) finish(ic, j0, c_blk, c_rs, mcur, ncur);
        }
      }
    }
  };
  if (threads > 1 && blocks > 1) {
    parallel_for(0, blocks, 1, work);
  } else {
    work(0, blocks);
  }
}

// The blocked product of an A given by its panel provider (StridedA, PanelsA) and a B given
// by pack_b(dst, pc, kc, jc, ncur, s0, s1), which packs slivers [s0, s1) of the kc x ncur
// block of B at row pc, column jc into dst (the sliver layout of pack_b above), or by a
// PrepackedB's panels (PanelsB). `threads` is how many workers this call may spread over.
template <class T, class APanels, class PackB>
void gemm_blocked(const KernelInfo<T>& kr, size_t threads, size_t m, size_t n, size_t k,
                  const APanels& a_panels, const PackB& pack_b, T* c, ptrdiff_t c_rs,
                  bool accumulate, const Finish<T>& finish = {}) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    zero_or_keep(m, n, c, c_rs, accumulate);
    return finish(0, 0, c, c_rs, m, n);
  }
  if (m * n * k < kMinParallelMacs) threads = 1;
  if constexpr (std::is_same_v<APanels, PanelsA<T>>) {
    if (const size_t blocks = column_blocks(kr, threads, m, n, k); blocks > 0)
      return gemm_by_columns<T>(kr, threads, blocks, m, n, k, a_panels, pack_b, c, c_rs, accumulate,
                                finish);
  }
  // Note [Few rows by column blocks]: with at most one row block (m <= mc: a recurrent
  // step's [batch, hidden] by a weight, an MLP's batch), gemm_blocked below splits the
  // few rows over the threads and meets them twice per k block (B's shared panel packed,
  // then multiplied): an LSTM step's products are a few microseconds between meetings. So
  // A is packed whole here, once (m x k, small), into PanelsA's layout, and the product
  // runs by column blocks (Note [Packed A by column blocks]): one parallel region, each
  // thread packing and multiplying its own columns of B. The panels and the k blocks are
  // gemm_blocked's, so the results are bit for bit the same.
  if constexpr (std::is_same_v<APanels, StridedA<T>>) {
    if (threads > 1 && m <= kr.mc) {
      if (const size_t blocks = column_blocks(kr, threads, m, n, k); blocks > 0) {
        const size_t kc = k_block(kr, k), m_padded = round_up(m, kr.mr);
        T* panels = static_cast<T*>(t_pack_a_whole.get(m_padded * k * sizeof(T)));
        for (size_t pc = 0; pc < k; pc += kc) {
          const size_t kcur = std::min(kc, k - pc);
          for (size_t i0 = 0; i0 < m; i0 += kr.mr)
            kr.pack_a(panels + pc * m_padded + i0 * kcur,
                      a_panels.a + static_cast<ptrdiff_t>(i0) * a_panels.rs +
                          static_cast<ptrdiff_t>(pc) * a_panels.cs,
                      a_panels.rs, a_panels.cs, std::min(kr.mr, m - i0), kcur);
        }
        return gemm_by_columns<T>(kr, threads, blocks, m, n, k, PanelsA<T>{panels, m_padded},
                                  pack_b, c, c_rs, accumulate, finish);
      }
    }
  }

  const size_t mr = kr.mr, nr = kr.nr;
  const size_t kc = k_block(kr, k);
  const size_t nc = round_up(ceil_div(n, ceil_div(n, kr.nc)), nr);
  // Each thread owns an equal share of the MR-row slivers of C (so the split is even to
  // within one sliver) and walks it in L2-sized row blocks. When there are fewer slivers
  // than threads, the threads also split the columns.
  const size_t m_slivers = ceil_div(m, mr);
  const size_t row_parts = std::min(threads, m_slivers);
  const size_t n_parts = threads > row_parts ? threads / row_parts : 1;

  T* packed = nullptr;
  if constexpr (!kPanelsB<PackB>) packed = static_cast<T*>(t_pack_b.get(kc * nc * sizeof(T)));

  for (size_t jc = 0; jc < n; jc += nc) {
    const size_t ncur = std::min(nc, n - jc);
    const size_t n_slivers = ceil_div(ncur, nr);
    for (size_t pc = 0; pc < k; pc += kc) {
      const size_t kcur = std::min(kc, k - pc);
      const bool load_c = accumulate || pc > 0;
      // After the last k block, each run of `ep_slivers` slivers of a row block is final.
      const bool last_k = pc + kcur == k;
      const size_t ep_slivers = std::max<size_t>(1, kEpilogueCols / nr);
      const T* pb = packed;
      if constexpr (kPanelsB<PackB>) {
        pb = pack_b.at(pc, kcur, jc);
      } else if (threads > 1) {
        const size_t b_grain = std::max<size_t>(1, 4096 / kcur);
        parallel_for(0, n_slivers, b_grain,
                     [&](size_t s0, size_t s1) { pack_b(packed, pc, kcur, jc, ncur, s0, s1); });
      } else {
        pack_b(packed, pc, kcur, jc, ncur, size_t{0}, n_slivers);
      }

      T* c_blk = c + jc;
      auto work = [&](size_t w0, size_t w1) {
        for (size_t w = w0; w < w1; ++w) {
          const size_t rp = w / n_parts, part = w % n_parts;
          const size_t r0 = m_slivers * rp / row_parts * mr;
          const size_t r1 = std::min(m, m_slivers * (rp + 1) / row_parts * mr);
          const size_t n_blocks = ceil_div(r1 - r0, kr.mc);
          const size_t mc = round_up(ceil_div(r1 - r0, n_blocks), mr);
          const size_t js = n_slivers * part / n_parts, je = n_slivers * (part + 1) / n_parts;
          for (size_t ic = r0; ic < r1; ic += mc) {
            const size_t mcur = std::min(mc, r1 - ic);
            const T* pa = a_panels(pc, kcur, ic, mcur);
            // jr outer, ir inner: one B sliver stays in L1 while A's slivers stream from L2.
            size_t done = js;  // the first sliver no epilogue has seen
            for (size_t jr = js; jr < je; ++jr) {
              const size_t ncols = std::min(nr, ncur - jr * nr);
              const T* pbs = pb + jr * nr * kcur;
              for (size_t ir = 0; ir < mcur; ir += mr) {
                const size_t mrows = std::min(mr, mcur - ir);
                T* ct = c_blk + static_cast<ptrdiff_t>(ic + ir) * c_rs + jr * nr;
                kr.ukernel(kcur, pa + ir * kcur, pbs, ct, c_rs, mrows, ncols, load_c);
              }
              if (finish.ep && last_k && (jr + 1 == je || jr + 1 - done == ep_slivers)) {
                const size_t j0 = done * nr, j1 = std::min(ncur, (jr + 1) * nr);
                finish(ic, jc + j0, c_blk + static_cast<ptrdiff_t>(ic) * c_rs + j0, c_rs, mcur,
                       j1 - j0);
                done = jr + 1;
              }
            }
          }
        }
      };
      const size_t work_items = row_parts * n_parts;
      if (threads > 1) {
        parallel_for(0, work_items, 1, work);
      } else {
        work(0, work_items);
      }
    }
  }
}

// One (un-batched) product of the strided A (a, a_rs, a_cs) and B (b, b_rs, b_cs), whose
// panels a_panels (StridedA, or PanelsA when A is packed already) and b_panels (a packer,
// or PanelsB when B is packed already) provide; a product of one row or one column takes the
// matrix-vector path on a and b themselves (Note [gemv]).
template <class T, class APanels, class BPanels>
void gemm_product(const KernelInfo<T>& kr, size_t threads, size_t m, size_t n, size_t k, const T* a,
                  ptrdiff_t a_rs, ptrdiff_t a_cs, const APanels& a_panels, const T* b,
                  ptrdiff_t b_rs, ptrdiff_t b_cs, const BPanels& b_panels, T* c, ptrdiff_t c_rs,
                  bool accumulate, const Finish<T>& finish) {
  if (m == 0 || n == 0) return;
  if (k > 0 && (m == 1 || n == 1) &&
      gemv_single<T>(threads, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, accumulate))
    return finish(0, 0, c, c_rs, m, n);
  gemm_blocked<T>(kr, threads, m, n, k, a_panels, b_panels, c, c_rs, accumulate, finish);
}

// gemm_product with B packed block by block as the driver goes.
template <class T, class APanels>
void gemm_single(const KernelInfo<T>& kr, size_t threads, size_t m, size_t n, size_t k, const T* a,
                 ptrdiff_t a_rs, ptrdiff_t a_cs, const APanels& a_panels, const T* b,
                 ptrdiff_t b_rs, ptrdiff_t b_cs, T* c, ptrdiff_t c_rs, bool accumulate,
                 const Finish<T>& finish = {}) {
  const auto pack = [&](T* pb, size_t pc, size_t kcur, size_t jc, size_t ncur, size_t s0,
                        size_t s1) {
    kr.pack_b(pb, b + static_cast<ptrdiff_t>(pc) * b_rs + static_cast<ptrdiff_t>(jc) * b_cs, b_rs,
              b_cs, ncur, kcur, s0, s1);
  };
  gemm_product<T>(kr, threads, m, n, k, a, a_rs, a_cs, a_panels, b, b_rs, b_cs, pack, c, c_rs,
                  accumulate, finish);
}

// One product with an implicit B (gemm_f32_packed_b) and A's panels from a_panels.
template <class T, class APanels>
void gemm_packed_b_impl(const KernelInfo<T>& kr, size_t m, size_t n, size_t k,
                        const APanels& a_panels, const PackedB<T>& b, T* c, ptrdiff_t c_rs,
                        bool accumulate, const Finish<T>& finish = {}) {
  const auto pack = [&](T* pb, size_t pc, size_t kcur, size_t jc, size_t ncur, size_t s0,
                        size_t s1) {
    const size_t j0 = s0 * kr.nr, cols = std::min(ncur - j0, (s1 - s0) * kr.nr);
    b.pack(b.ctx, pb + s0 * kr.nr * kcur, kr.nr, pc, kcur, jc + j0, cols);
  };
  gemm_blocked<T>(kr, num_threads(), m, n, k, a_panels, pack, c, c_rs, accumulate, finish);
}

template <class T>
void gemm_packed_b_strided_a(size_t m, size_t n, size_t k, const T* a, ptrdiff_t a_rs,
                             ptrdiff_t a_cs, const PackedB<T>& b, T* c, ptrdiff_t c_rs,
                             bool accumulate) {
  const KernelInfo<T> kr = kernel_for<T>(resolve_isa());
  gemm_packed_b_impl<T>(kr, m, n, k, StridedA<T>{kr, a, a_rs, a_cs}, b, c, c_rs, accumulate);
}

template <class T>
PanelsA<T> panels_of(const PackedA<T>& a, const KernelInfo<T>& kr) {
  return {a.panels(), round_up(a.m(), kr.mr)};
}

template <class T>
void gemm_packed_a_strided_b(size_t n, const PackedA<T>& a, const T* b, ptrdiff_t b_rs,
                             ptrdiff_t b_cs, T* c, ptrdiff_t c_rs, bool accumulate,
                             const GemmEpilogue<T>* ep) {
  const KernelInfo<T> kr = kernel_for<T>(a.isa());
  gemm_single<T>(kr, num_threads(), a.m(), n, a.k(), a.source(), a.source_rs(), a.source_cs(),
                 panels_of(a, kr), b, b_rs, b_cs, c, c_rs, accumulate, Finish<T>{ep, 0});
}

template <class T>
void gemm_packed_a_packed_b(size_t n, const PackedA<T>& a, const PackedB<T>& b, T* c,
                            ptrdiff_t c_rs, bool accumulate, const GemmEpilogue<T>* ep) {
  const KernelInfo<T> kr = kernel_for<T>(a.isa());
  gemm_packed_b_impl<T>(kr, a.m(), n, a.k(), panels_of(a, kr), b, c, c_rs, accumulate,
                        Finish<T>{ep, 0});
}

template <class T>
void gemm_impl(size_t batch, size_t m, size_t n, size_t k, const T* a, ptrdiff_t a_bs,
               ptrdiff_t a_rs, ptrdiff_t a_cs, const T* b, ptrdiff_t b_bs, ptrdiff_t b_rs,
               ptrdiff_t b_cs, T* c, ptrdiff_t c_bs, ptrdiff_t c_rs, bool accumulate,
               const GemmEpilogue<T>* ep) {
  if (batch == 0 || m == 0 || n == 0) return;
  const KernelInfo<T> kr = kernel_for<T>(resolve_isa());
  const size_t threads = num_threads();
  const size_t macs = m * n * std::max<size_t>(k, 1);
  auto one = [&](size_t i, size_t t) {
    const ptrdiff_t bi = static_cast<ptrdiff_t>(i);
    const T* ai = a + bi * a_bs;
    gemm_single<T>(kr, t, m, n, k, ai, a_rs, a_cs, StridedA<T>{kr, ai, a_rs, a_cs}, b + bi * b_bs,
                   b_rs, b_cs, c + bi * c_bs, c_rs, accumulate, Finish<T>{ep, i});
  };
  // Batches are independent (unless they all write the same C), so spreading whole
  // products over threads avoids all intra-product synchronisation. That is the better
  // split when the products are small or the batches divide evenly among threads.
  const bool by_batch =
      batch > 1 && threads > 1 && c_bs != 0 &&
      (batch % threads == 0 || batch >= 4 * threads || macs < 8 * kMinParallelMacs);
  if (by_batch) {
    const size_t grain = std::max<size_t>(1, kMinParallelMacs / macs);
    parallel_for(0, batch, grain, [&](size_t b0, size_t b1) {
      for (size_t i = b0; i < b1; ++i) one(i, 1);
    });
  } else {
    for (size_t i = 0; i < batch; ++i) one(i, threads);
  }
}

}  // namespace

void gemm_f32(size_t batch, size_t m, size_t n, size_t k, const float* a, ptrdiff_t a_bs,
              ptrdiff_t a_rs, ptrdiff_t a_cs, const float* b, ptrdiff_t b_bs, ptrdiff_t b_rs,
              ptrdiff_t b_cs, float* c, ptrdiff_t c_bs, ptrdiff_t c_rs, bool accumulate,
              const GemmEpilogue<float>* epilogue) {
  gemm_impl<float>(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c, c_bs, c_rs,
                   accumulate, epilogue);
}

void gemm_f64(size_t batch, size_t m, size_t n, size_t k, const double* a, ptrdiff_t a_bs,
              ptrdiff_t a_rs, ptrdiff_t a_cs, const double* b, ptrdiff_t b_bs, ptrdiff_t b_rs,
              ptrdiff_t b_cs, double* c, ptrdiff_t c_bs, ptrdiff_t c_rs, bool accumulate,
              const GemmEpilogue<double>* epilogue) {
  gemm_impl<double>(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c, c_bs, c_rs,
                    accumulate, epilogue);
}

void gemm_f32_packed_b(size_t m, size_t n, size_t k, const float* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                       const PackedB<float>& b, float* c, ptrdiff_t c_rs, bool accumulate) {
  gemm_packed_b_strided_a<float>(m, n, k, a, a_rs, a_cs, b, c, c_rs, accumulate);
}

void gemm_f64_packed_b(size_t m, size_t n, size_t k, const double* a, ptrdiff_t a_rs,
                       ptrdiff_t a_cs, const PackedB<double>& b, double* c, ptrdiff_t c_rs,
                       bool accumulate) {
  gemm_packed_b_strided_a<double>(m, n, k, a, a_rs, a_cs, b, c, c_rs, accumulate);
}

// Note [B rows in place] (gemm.hpp): A's k blocks outer, then B's column tiles, then A's row
// slivers, so a tile's rows stay in L1 while every sliver of A meets them (or the other way
// round when A has more rows than B columns).
template <class T>
void gemm_in_place_impl(size_t n, const PackedA<T>& a, const T* const* rows, T* c, ptrdiff_t c_rs) {
  const size_t m = a.m(), k = a.k();
  if (m == 0 || n == 0) return;
  if (k == 0) return zero_or_keep(m, n, c, c_rs, false);
  const KernelInfo<T> kr = kernel_for<T>(a.isa());
  const size_t kc = k_block(kr, k), m_padded = round_up(m, kr.mr);
  for (size_t pc = 0; pc < k; pc += kc) {
    const size_t kcur = std::min(kc, k - pc);
    const T* pa = a.panels() + pc * m_padded;
    const auto tile = [&](size_t ir, size_t jr) {
      kr.ukernel_in_place(kcur, pa + ir * kcur, rows + pc, jr,
                          c + static_cast<ptrdiff_t>(ir) * c_rs + jr, c_rs, std::min(kr.mr, m - ir),
                          std::min(kr.nr, n - jr), pc > 0);
    };
    if (m <= n) {
      for (size_t jr = 0; jr < n; jr += kr.nr)
        for (size_t ir = 0; ir < m; ir += kr.mr) tile(ir, jr);
    } else {
      // More rows than columns (a late ResNet layer: 512 channels, 61 positions): A's k
      // block would leave L2 between column tiles, so each sliver of A meets every tile.
      for (size_t ir = 0; ir < m; ir += kr.mr)
        for (size_t jr = 0; jr < n; jr += kr.nr) tile(ir, jr);
    }
  }
}

template <class T>
PackedPanels<T>::PackedPanels() : isa_(resolve_isa()) {}

template class PackedPanels<float>;
template class PackedPanels<double>;

namespace {
// The packing of PackedA and PrepackedB: `items` pieces (of about 16 K elements each when
// spread) on the thread pool, where the panels are large enough to pay.
template <class Work>
void pack_items(size_t size, size_t items, size_t grain, const Work& work) {
  if (size < (size_t{1} << 16)) return work(size_t{0}, items);
  parallel_for(0, items, std::max<size_t>(1, grain), work);
}
}  // namespace

template <class T>
PackedA<T>::PackedA(size_t m, size_t k) : m_(m), k_(k) {
  const KernelInfo<T> kr = kernel_for<T>(this->isa_);
  this->size_ = round_up(m, kr.mr) * k;
}

template <class T>
void PackedA<T>::pack(T* storage, const T* a, ptrdiff_t a_rs, ptrdiff_t a_cs) {
  this->hold(storage, a, a_rs, a_cs);
  if (m_ == 0 || k_ == 0) return;
  const KernelInfo<T> kr = kernel_for<T>(this->isa_);
  const size_t kc = k_block(kr, k_), m_padded = round_up(m_, kr.mr);
  const size_t slivers = m_padded / kr.mr, items = ceil_div(k_, kc) * slivers;
  // One item a sliver of one k block, as gemm_blocked's pack_a would write it.
  const auto work = [&](size_t w0, size_t w1) {
    for (size_t w = w0; w < w1; ++w) {
      const size_t pc = w / slivers * kc, kcur = std::min(kc, k_ - pc), i0 = w % slivers * kr.mr;
      kr.pack_a(storage + pc * m_padded + i0 * kcur,
                a + static_cast<ptrdiff_t>(i0) * a_rs + static_cast<ptrdiff_t>(pc) * a_cs, a_rs,
                a_cs, std::min(kr.mr, m_ - i0), kcur);
    }
  };
  pack_items(this->size_, items, (size_t{1} << 14) / (kr.mr * kc), work);
}

template class PackedA<float>;
template class PackedA<double>;

template <class T>
PrepackedB<T>::PrepackedB(size_t k, size_t n) : k_(k), n_(n) {
  const KernelInfo<T> kr = kernel_for<T>(this->isa_);
  n_padded_ = round_up(n, kr.nr);
  this->size_ = n_padded_ * k;
}

template <class T>
void PrepackedB<T>::pack(T* storage, const T* b, ptrdiff_t b_rs, ptrdiff_t b_cs) {
  this->hold(storage, b, b_rs, b_cs);
  if (n_ == 0 || k_ == 0) return;
  const KernelInfo<T> kr = kernel_for<T>(this->isa_);
  const size_t kc = k_block(kr, k_), slivers = n_padded_ / kr.nr, blocks = ceil_div(k_, kc);
  // One item a run of slivers of one k block, as gemm_blocked's pack_b would write them.
  const size_t per_item = std::max<size_t>(1, (size_t{1} << 14) / (kr.nr * kc));
  const size_t runs = ceil_div(slivers, per_item);
  const auto work = [&](size_t w0, size_t w1) {
    for (size_t w = w0; w < w1; ++w) {
      const size_t pc = w / runs * kc, kcur = std::min(kc, k_ - pc);
      const size_t s0 = w % runs * per_item, s1 = std::min(slivers, s0 + per_item);
      kr.pack_b(storage + pc * n_padded_, b + static_cast<ptrdiff_t>(pc) * b_rs, b_rs, b_cs, n_,
                kcur, s0, s1);
    }
  };
  pack_items(this->size_, blocks * runs, 1, work);
}

template class PrepackedB<float>;
template class PrepackedB<double>;

template <class T>
bool prepacked_b_pays(size_t m, size_t n, size_t k) {
  return m > 1 && n > 1 && k > 0 && m <= kernel_for<T>(resolve_isa()).mc;
}
template bool prepacked_b_pays<float>(size_t, size_t, size_t);
template bool prepacked_b_pays<double>(size_t, size_t, size_t);

namespace {
template <class T>
void gemm_prepacked_b_impl(size_t m, const T* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                           const PrepackedB<T>& b, T* c, ptrdiff_t c_rs, bool accumulate,
                           const GemmEpilogue<T>* ep) {
  const KernelInfo<T> kr = kernel_for<T>(b.isa());
  gemm_product<T>(kr, num_threads(), m, b.n(), b.k(), a, a_rs, a_cs, StridedA<T>{kr, a, a_rs, a_cs},
                  b.source(), b.source_rs(), b.source_cs(), PanelsB<T>{b.panels(), b.n_padded()}, c,
                  c_rs, accumulate, Finish<T>{ep, 0});
}
}  // namespace

void gemm_prepacked_b(size_t m, const float* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                      const PrepackedB<float>& b, float* c, ptrdiff_t c_rs, bool accumulate,
                      const GemmEpilogue<float>* epilogue) {
  gemm_prepacked_b_impl<float>(m, a, a_rs, a_cs, b, c, c_rs, accumulate, epilogue);
}
void gemm_prepacked_b(size_t m, const double* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                      const PrepackedB<double>& b, double* c, ptrdiff_t c_rs, bool accumulate,
                      const GemmEpilogue<double>* epilogue) {
  gemm_prepacked_b_impl<double>(m, a, a_rs, a_cs, b, c, c_rs, accumulate, epilogue);
}

void gemm_packed_a(size_t n, const PackedA<float>& a, const float* b, ptrdiff_t b_rs,
                   ptrdiff_t b_cs, float* c, ptrdiff_t c_rs, bool accumulate,
                   const GemmEpilogue<float>* epilogue) {
  gemm_packed_a_strided_b<float>(n, a, b, b_rs, b_cs, c, c_rs, accumulate, epilogue);
}
void gemm_packed_a(size_t n, const PackedA<double>& a, const double* b, ptrdiff_t b_rs,
                   ptrdiff_t b_cs, double* c, ptrdiff_t c_rs, bool accumulate,
                   const GemmEpilogue<double>* epilogue) {
  gemm_packed_a_strided_b<double>(n, a, b, b_rs, b_cs, c, c_rs, accumulate, epilogue);
}
void gemm_packed_a(size_t n, const PackedA<float>& a, const PackedB<float>& b, float* c,
                   ptrdiff_t c_rs, bool accumulate, const GemmEpilogue<float>* epilogue) {
  gemm_packed_a_packed_b<float>(n, a, b, c, c_rs, accumulate, epilogue);
}
void gemm_packed_a(size_t n, const PackedA<double>& a, const PackedB<double>& b, double* c,
                   ptrdiff_t c_rs, bool accumulate, const GemmEpilogue<double>* epilogue) {
  gemm_packed_a_packed_b<double>(n, a, b, c, c_rs, accumulate, epilogue);
}

void gemm_packed_a_in_place(size_t n, const PackedA<float>& a, const float* const* rows, float* c,
                            ptrdiff_t c_rs) {
  gemm_in_place_impl<float>(n, a, rows, c, c_rs);
}
void gemm_packed_a_in_place(size_t n, const PackedA<double>& a, const double* const* rows,
                            double* c, ptrdiff_t c_rs) {
  gemm_in_place_impl<double>(n, a, rows, c, c_rs);
}

namespace {
// What the kernels compute at a product's edges (gemm_rows_computed and its kin, gemm.hpp):
// a packed A's last sliver of m mod MR rows runs a kernel of a third or two thirds of MR
// (Note [Short slivers] in microkernel.inc), a last sliver of at most NR / 2 columns one of
// half the vectors (Note [Half-width tile]), and a tile of A's columns in place one of
// cols_mr / 2, cols_mid or cols_mr rows (ukernel_cols_in_place).
template <class T>
size_t packed_tile_rows(const KernelInfo<T>& kr, size_t m) {
  if (kr.mr % 3 == 0 && m <= kr.mr / 3) return kr.mr / 3;
  if (kr.mr % 3 == 0 && m <= 2 * kr.mr / 3) return 2 * kr.mr / 3;
  return kr.mr;
}
template <class T>
size_t cols_tile_rows(const KernelInfo<T>& kr, size_t m) {
  if (m <= kr.cols_mr / 2) return kr.cols_mr / 2;
  if (kr.cols_mid > kr.cols_mr / 2 && m <= kr.cols_mid) return kr.cols_mid;
  return kr.cols_mr;
}

// A piece of m rows cut evenly into `count` tiles of at most `per` rows: of the cuts by
// each kernel's rows, the one computing fewest rows (the widest first on a tie).
struct ColsCut {
  size_t per, count, computed;
};
template <class T>
ColsCut cols_cut(const KernelInfo<T>& kr, size_t m) {
  ColsCut best{m, 1, SIZE_MAX};
  for (const size_t t : {kr.cols_mr, kr.cols_mid, kr.cols_mr / 2}) {
    if (t == 0 || m == 0) continue;
    const size_t count = ceil_div(m, t), per = ceil_div(m, count);
    const size_t computed = count * cols_tile_rows(kr, per);
    if (computed < best.computed) best = {per, count, computed};
  }
  return best;
}

// Note [A columns in place] (gemm.hpp): B's k blocks outer, then its slivers, so a sliver
// stays in L1 while every tile of every piece meets it.
template <class T>
void gemm_cols_impl(const ColsPiece* pieces, size_t count, const T* const* cols,
                    const PrepackedB<T>& b, T* c, ptrdiff_t c_rs) {
  const size_t k = b.k(), np = b.n_padded();
  if (np == 0) return;
  if (k == 0) {
    for (size_t q = 0; q < count; ++q)
      zero_or_keep(pieces[q].m, np, c + static_cast<ptrdiff_t>(pieces[q].c_row) * c_rs, c_rs,
                   false);
    return;
  }
  const KernelInfo<T> kr = kernel_for<T>(b.isa());
  const size_t kc = k_block(kr, k);
  // A piece's tile height, cut again only for a piece of another height (a convolution's
  // pieces are rows of one width).
  size_t cut_m = 0, per = 0;
  for (size_t pc = 0; pc < k; pc += kc) {
    const size_t kcur = std::min(kc, k - pc);
    const T* panel = b.panels() + pc * np;
    for (size_t jr = 0; jr < np; jr += kr.nr) {
      const T* sliver = panel + jr * kcur;
      for (size_t q = 0; q < count; ++q) {
        const ColsPiece& piece = pieces[q];
        if (piece.m != cut_m) cut_m = piece.m, per = cols_cut(kr, cut_m).per;
        for (size_t i = 0; i < piece.m; i += per)
          kr.ukernel_cols_in_place(
              kcur, cols + pc, piece.at + i, sliver,
              c + static_cast<ptrdiff_t>(piece.c_row + i) * c_rs + static_cast<ptrdiff_t>(jr), c_rs,
              std::min(per, piece.m - i), kr.nr, pc > 0);
      }
    }
  }
}

// Note [A rows in place] (gemm.hpp): k blocks as the plain GEMM's, B's block packed whole
// (every sliver of its columns) into the thread's buffer, then each sliver of A's rows
// meets every sliver of B.
template <class T>
void gemm_rows_impl(size_t m, size_t n, size_t k, const T* const* rows, const T* b, ptrdiff_t b_rs,
                    ptrdiff_t b_cs, T* c, ptrdiff_t c_rs, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) return zero_or_keep(m, n, c, c_rs, accumulate);
  const KernelInfo<T> kr = kernel_for<T>(resolve_isa());
  const size_t kc = k_block(kr, k), slivers = ceil_div(n, kr.nr);
  T* pb = static_cast<T*>(t_pack_b.get(kc * slivers * kr.nr * sizeof(T)));
  const T* tile_rows[32];
  for (size_t pc = 0; pc < k; pc += kc) {
    const size_t kcur = std::min(kc, k - pc);
    kr.pack_b(pb, b + static_cast<ptrdiff_t>(pc) * b_rs, b_rs, b_cs, n, kcur, 0, slivers);
    for (size_t ir = 0; ir < m; ir += kr.mr) {
      const size_t mcur = std::min(kr.mr, m - ir);
      for (size_t i = 0; i < kr.mr; ++i) tile_rows[i] = rows[ir + std::min(i, mcur - 1)] + pc;
      for (size_t s = 0; s < slivers; ++s)
        kr.ukernel_rows_in_place(
            kcur, tile_rows, pb + s * kr.nr * kcur,
            c + static_cast<ptrdiff_t>(ir) * c_rs + static_cast<ptrdiff_t>(s * kr.nr), c_rs, mcur,
            std::min(kr.nr, n - s * kr.nr), accumulate || pc > 0);
    }
  }
}
}  // namespace

template <class T>
std::size_t gemm_rows_computed(std::size_t m) {
  const KernelInfo<T> kr = kernel_for<T>(resolve_isa());
  return m / kr.mr * kr.mr + (m % kr.mr ? packed_tile_rows(kr, m % kr.mr) : 0);
}
template std::size_t gemm_rows_computed<float>(std::size_t);
template std::size_t gemm_rows_computed<double>(std::size_t);

template <class T>
std::size_t gemm_cols_computed(std::size_t n) {
  const KernelInfo<T> kr = kernel_for<T>(resolve_isa());
  const size_t rest = n % kr.nr;
  return n / kr.nr * kr.nr + (rest == 0 ? 0 : rest <= kr.nr / 2 ? kr.nr / 2 : kr.nr);
}
template std::size_t gemm_cols_computed<float>(std::size_t);
template std::size_t gemm_cols_computed<double>(std::size_t);

template <class T>
std::size_t gemm_cols_rows(std::size_t m) {
  return cols_cut(kernel_for<T>(resolve_isa()), m).computed;
}
template std::size_t gemm_cols_rows<float>(std::size_t);
template std::size_t gemm_cols_rows<double>(std::size_t);

void gemm_rows_in_place(size_t m, size_t n, size_t k, const float* const* rows, const float* b,
                        ptrdiff_t b_rs, ptrdiff_t b_cs, float* c, ptrdiff_t c_rs, bool accumulate) {
  gemm_rows_impl<float>(m, n, k, rows, b, b_rs, b_cs, c, c_rs, accumulate);
}
void gemm_rows_in_place(size_t m, size_t n, size_t k, const double* const* rows, const double* b,
                        ptrdiff_t b_rs, ptrdiff_t b_cs, double* c, ptrdiff_t c_rs,
                        bool accumulate) {
  gemm_rows_impl<double>(m, n, k, rows, b, b_rs, b_cs, c, c_rs, accumulate);
}

void gemm_cols_in_place(const ColsPiece* pieces, size_t count, const float* const* cols,
                        const PrepackedB<float>& b, float* c, ptrdiff_t c_rs) {
  gemm_cols_impl<float>(pieces, count, cols, b, c, c_rs);
}
void gemm_cols_in_place(const ColsPiece* pieces, size_t count, const double* const* cols,
                        const PrepackedB<double>& b, double* c, ptrdiff_t c_rs) {
  gemm_cols_impl<double>(pieces, count, cols, b, c, c_rs);
}

namespace detail {

void gemm_force_isa(GemmIsa isa) { g_forced_isa.store(isa, std::memory_order_relaxed); }

bool gemm_isa_supported(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::Avx512:
      return isa_supported(Isa::Avx512);
    case GemmIsa::Avx2:
      return isa_supported(Isa::Avx2);
    default:
      return true;
  }
}

GemmIsa gemm_active_isa() { return resolve_isa(); }

}  // namespace detail
}  // namespace ember::cpu
