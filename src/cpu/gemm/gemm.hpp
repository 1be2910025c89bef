// Internal interface of the Cpu backend's dense matrix multiply (GEMM). Operands are
// described by raw pointers and element strides so that transposed, sliced or broadcast
// tensors are multiplied without first being copied; the implementation packs them into
// cache-friendly panels itself and picks the widest micro-kernel the CPU supports.
#pragma once

#include <cstddef>

namespace ember::cpu {

// Note [GEMM epilogue]: work applied to each finished block of C while it is in cache. The
// driver calls apply(ctx, batch, i0, j0, c, c_rs, rows, cols) once for every block of C
// whose last k block has been accumulated — rows [i0, i0 + rows) and columns [j0, j0 + cols)
// of product `batch` (its index among this call's batch), element (i0 + i, j0 + j) at
// c[i * c_rs + j] — after which the GEMM never touches that block again. A block is one
// thread's row block (the kernel's MC rows, at most) by a run of column slivers (about 512
// columns), so it is in L2 when the epilogue reads it, having just been written. Blocks are
// disjoint, cover C exactly once, and are handed to concurrent threads; the values C holds
// are exactly those the same product without an epilogue stores (the blocking does not
// change), so an epilogue sees the unfused product bit for bit. It may overwrite its block
// (an in-place result). Products with one row or one column (Note [gemv] in gemm.cpp) and
// products with k == 0 have no blocks: their C is handed over whole once computed.
// The Fusion decorator's matmul groups use it (cpu/kernels/fused.cpp, Note [Fused matmul
// epilogues]), and so do its conv groups (Note [Fused conv epilogues]): a convolution's
// products (gemm_packed_a) run through the same blocked driver, so the epilogue is called
// with each product's [out channels, window positions] blocks, which the convolution maps
// to its output image by i0 (the channel) and j0 (the position) (conv_forward_into in
// cpu/kernels/conv.hpp) — nothing in the driver is specific to matmul.
template <class T>
struct GemmEpilogue {
  void (*apply)(const void* ctx, std::size_t batch, std::size_t i0, std::size_t j0, T* c,
                std::ptrdiff_t c_rs, std::size_t rows, std::size_t cols);
  const void* ctx;
};

// C[i*c_rs + j] (= or +=) sum_p A[i*a_rs + p*a_cs] * B[p*b_rs + j*b_cs], for i<m, j<n, p<k.
// Any strides for A and B (so transposed or sliced operands need no copy); C rows may be
// strided but columns are contiguous. accumulate=false overwrites C. k == 0 gives zeros
// (or leaves C when accumulating). Batched: batch b uses a + b*a_bs, b + b*b_bs, c + b*c_bs
// (a batch stride may be 0 for broadcasting). An epilogue (Note [GEMM epilogue]) is applied
// to each finished block of C.
void gemm_f32(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const float* a,
              std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const float* b,
              std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, float* c,
              std::ptrdiff_t c_bs, std::ptrdiff_t c_rs, bool accumulate,
              const GemmEpilogue<float>* epilogue = nullptr);
void gemm_f64(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const double* a,
              std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const double* b,
              std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, double* c,
              std::ptrdiff_t c_bs, std::ptrdiff_t c_rs, bool accumulate,
              const GemmEpilogue<double>* epilogue = nullptr);

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
// The micro-kernel families. Auto (the default of the test hook below) is
// cpu::active_isa()'s (cpu/isa.hpp: the best the CPU supports, or EMBER_CPU_ISA).
enum class GemmIsa { Auto, Scalar, Avx2, Avx512 };
}  // namespace detail

// Note [Packed A]: a left operand A [m, k] packed once into the GEMM's own panels, for
// products that reuse it (a convolution's weight, the same for every image of a batch and
// every run of window positions): a plain GEMM packs A again for every product and every
// row block. The panels are the plain GEMM's own (the same k blocks, the same slivers), so
// a product with a PackedA gives bit for bit the results of gemm_f32 / gemm_f64 with the
// A it was packed from. The layout belongs to the micro-kernel family chosen when the
// PackedA is made, and its products run that family. Products with one row or one column
// take the matrix-vector path (Note [gemv] in gemm.cpp) on the source A, as the plain
// GEMM does, so the source must outlive the PackedA's products as well as the storage.
// What PackedA and PrepackedB (Note [Prepacked B]) share: the micro-kernel family whose
// layout the panels have, the panels, and the source matrix the products with one row or
// one column read.
template <class T>
class PackedPanels {
 public:
  // Elements of storage that pack() fills.
  std::size_t size() const { return size_; }
  // What the products read (gemm.cpp): the kernel family, the panels and the source.
  detail::GemmIsa isa() const { return isa_; }
  const T* panels() const { return panels_; }
  const T* source() const { return src_; }
  std::ptrdiff_t source_rs() const { return src_rs_; }
  std::ptrdiff_t source_cs() const { return src_cs_; }

 protected:
  PackedPanels();  // the family the next GEMM would use (cpu::active_isa())
  void hold(T* storage, const T* src, std::ptrdiff_t rs, std::ptrdiff_t cs) {
    panels_ = storage;
    src_ = src;
    src_rs_ = rs;
    src_cs_ = cs;
  }
  detail::GemmIsa isa_;
  std::size_t size_ = 0;

 private:
  const T* panels_ = nullptr;
  const T* src_ = nullptr;
  std::ptrdiff_t src_rs_ = 0, src_cs_ = 0;
};

template <class T>
class PackedA : public PackedPanels<T> {
 public:
  // The layout of A [m, k] for the kernels the next GEMM would use (cpu::active_isa()).
  PackedA(std::size_t m, std::size_t k);
  // Packs A[i*a_rs + p*a_cs] (i < m, p < k) into storage (size() elements, owned by the
  // caller, which keeps it and A alive and unchanged while products use them), on the
  // thread pool.
  void pack(T* storage, const T* a, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs);

  std::size_t m() const { return m_; }
  std::size_t k() const { return k_; }

 private:
  std::size_t m_, k_;
};

// C[i*c_rs + j] (= or +=) sum_p A(i, p) * B[p*b_rs + j*b_cs] for i < a.m(), j < n, p < a.k():
// gemm_f32 / gemm_f64 with a packed A (bit for bit the same results). An epilogue (Note
// [GEMM epilogue]) is applied to each finished block of C, its batch 0.
void gemm_packed_a(std::size_t n, const PackedA<float>& a, const float* b, std::ptrdiff_t b_rs,
                   std::ptrdiff_t b_cs, float* c, std::ptrdiff_t c_rs, bool accumulate,
                   const GemmEpilogue<float>* epilogue = nullptr);
void gemm_packed_a(std::size_t n, const PackedA<double>& a, const double* b, std::ptrdiff_t b_rs,
                   std::ptrdiff_t b_cs, double* c, std::ptrdiff_t c_rs, bool accumulate,
                   const GemmEpilogue<double>* epilogue = nullptr);
// The same with B given by its packer: gemm_f32_packed_b / gemm_f64_packed_b with a packed A.
void gemm_packed_a(std::size_t n, const PackedA<float>& a, const PackedB<float>& b, float* c,
                   std::ptrdiff_t c_rs, bool accumulate,
                   const GemmEpilogue<float>* epilogue = nullptr);
void gemm_packed_a(std::size_t n, const PackedA<double>& a, const PackedB<double>& b, double* c,
                   std::ptrdiff_t c_rs, bool accumulate,
                   const GemmEpilogue<double>* epilogue = nullptr);

// Note [Prepacked B]: a right operand B [k, n] packed once into the GEMM's own panels, for
// products that reuse it with other left operands (a recurrent weight, multiplied by each
// step's state; a layer's weight run after run at a small batch): with few rows, a plain
// GEMM spends much of its time packing B — an LSTM step's [32, 256] x [256, 1024] reads and
// transposes all of W_hh^T for 32 rows. The panels are the plain GEMM's own (the same k
// blocks, the same slivers of NR columns, zero-padded), and the products run the plain
// driver with them in place of its packing, so the results are bit for bit gemm_f32 /
// gemm_f64's with the B it was packed from. The layout belongs to the micro-kernel family
// chosen when it is made. Products with one row or one column take the matrix-vector path
// (Note [gemv] in gemm.cpp) on the source B, as the plain GEMM does, so the source must
// outlive the products as well as the storage.
template <class T>
class PrepackedB : public PackedPanels<T> {
 public:
  // The layout of B [k, n] for the kernels the next GEMM would use (cpu::active_isa()).
  PrepackedB(std::size_t k, std::size_t n);
  // Packs B[p*b_rs + j*b_cs] (p < k, j < n) into storage (size() elements, owned by the
  // caller, which keeps it and B alive and unchanged while products use them), on the
  // thread pool.
  void pack(T* storage, const T* b, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs);

  std::size_t k() const { return k_; }
  std::size_t n() const { return n_; }
  // n rounded up to the panels' slivers.
  std::size_t n_padded() const { return n_padded_; }

 private:
  std::size_t k_, n_, n_padded_;
};

// Whether a product of m rows with a B [k, n] packs enough of B per row for a PrepackedB to
// pay: more than one row and column (not a matrix-vector product), and at most one of the
// micro-kernel's row blocks (a deeper product packs each panel of B once for many rows).
template <class T>
bool prepacked_b_pays(std::size_t m, std::size_t n, std::size_t k);

// C[i*c_rs + j] (= or +=) sum_p A[i*a_rs + p*a_cs] * B(p, j) for i < m, j < b.n(), p < b.k():
// gemm_f32 / gemm_f64 with a prepacked B (bit for bit the same results). An epilogue (Note
// [GEMM epilogue]) is applied to each finished block of C, its batch 0.
void gemm_prepacked_b(std::size_t m, const float* a, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs,
                      const PrepackedB<float>& b, float* c, std::ptrdiff_t c_rs, bool accumulate,
                      const GemmEpilogue<float>* epilogue = nullptr);
void gemm_prepacked_b(std::size_t m, const double* a, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs,
                      const PrepackedB<double>& b, double* c, std::ptrdiff_t c_rs, bool accumulate,
                      const GemmEpilogue<double>* epilogue = nullptr);

// Note [B rows in place]: C[i*c_rs + j] = sum_p A(i, p) * rows[p][j] for i < a.m(), j < n,
// p < a.k(), with B's rows read where they lie instead of packed: the micro-kernels load
// row p of a tile from rows[p] + j0 (a convolution's window rows, Note [Phase images] in
// cpu/kernels/conv.cpp, each a contiguous run of an image). Every row must be readable for
// 32 elements past n (the kernels load whole vectors; the columns past n are dropped).
// The k blocks are gemm_packed_a's, so each element sums the same products in the same
// order: bit for bit gemm_packed_a with the matrix of these rows. It runs on the calling
// thread alone (the caller spreads its products over the threads), C overwritten.
inline constexpr std::size_t kInPlaceRowSlack = 32;
void gemm_packed_a_in_place(std::size_t n, const PackedA<float>& a, const float* const* rows,
                            float* c, std::ptrdiff_t c_rs);
void gemm_packed_a_in_place(std::size_t n, const PackedA<double>& a, const double* const* rows,
                            double* c, std::ptrdiff_t c_rs);

// Note [A columns in place]: the product of an A whose columns are runs read where they lie
// and a prepacked B — a convolution's output positions by its output channels, where the
// window rows of Note [B rows in place] make A's columns (Note [Output rows as tiles] in
// cpu/kernels/conv.cpp). For each piece q of the list:
//   C[(q.c_row + i) * c_rs + j] = sum_p cols[p][q.at + i] * B(p, j),  i < q.m, p < b.k(),
// for every column j < b.n_padded(): the columns past b.n() come out zero (B's padding), so C
// needs room for them. A piece's rows are cut into tiles of at most the micro-kernel's rows,
// evenly, by the kernel's rows that compute fewest (a piece of 14 rows one tile of 14, not
// 12 + 2; of 32, four of 8 where the kernel has such tiles), and every column must be
// readable for kInPlaceRowSlack elements past at + m. The k blocks are the plain GEMM's, so
// each element sums the same products in the same order as gemm_f32 / gemm_f64 would for
// that A. It runs on the calling thread alone.
struct ColsPiece {
  std::size_t at, m, c_row;
};
// Note [A rows in place]: C[i*c_rs + j] (= or +=) sum_p rows[i][p] * B[p*b_rs + j*b_cs] for
// i < m, j < n, p < k: an A whose rows are runs read where they lie (a convolution's window
// rows, Note [Phase images] in cpu/kernels/conv.cpp) by a strided B the driver packs — the
// weight gradient's transposed product dW^T = cols(x) gy^T, whose packed operand is then
// gy (O/G rows) rather than the column matrix (C/G * K rows). Each row is read for k
// elements only. The k blocks are the plain GEMM's and each element sums its products in
// the same order, so the results are gemm_f32 / gemm_f64's with that A bit for bit. It runs
// on the calling thread alone.
void gemm_rows_in_place(std::size_t m, std::size_t n, std::size_t k, const float* const* rows,
                        const float* b, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, float* c,
                        std::ptrdiff_t c_rs, bool accumulate);
void gemm_rows_in_place(std::size_t m, std::size_t n, std::size_t k, const double* const* rows,
                        const double* b, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, double* c,
                        std::ptrdiff_t c_rs, bool accumulate);

// What the next GEMM's micro-kernels (cpu::active_isa()) compute at a product's edges, for
// callers that choose between products by their cost: the rows computed for m rows of a
// packed A (its short last sliver, Note [Short slivers]), the columns for n columns of B
// (its half-width last sliver, Note [Half-width tile]), and the rows gemm_cols_in_place
// computes for a piece of m rows (its tiles, as cut).
template <class T>
std::size_t gemm_rows_computed(std::size_t m);
template <class T>
std::size_t gemm_cols_computed(std::size_t n);
template <class T>
std::size_t gemm_cols_rows(std::size_t m);
void gemm_cols_in_place(const ColsPiece* pieces, std::size_t count, const float* const* cols,
                        const PrepackedB<float>& b, float* c, std::ptrdiff_t c_rs);
void gemm_cols_in_place(const ColsPiece* pieces, std::size_t count, const double* const* cols,
                        const PrepackedB<double>& b, double* c, std::ptrdiff_t c_rs);

namespace detail {

// Test hook: which micro-kernel family gemm uses (the enum is declared above, for PackedA).
void gemm_force_isa(GemmIsa isa);
// Whether this CPU (and OS) can run the given family; Auto and Scalar are always true.
bool gemm_isa_supported(GemmIsa isa);
// The family the next gemm call will actually use (never Auto).
GemmIsa gemm_active_isa();

}  // namespace detail
}  // namespace ember::cpu
