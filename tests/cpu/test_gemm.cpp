// Tests of the Cpu GEMM (src/cpu/gemm): every micro-kernel family is forced in turn and
// compared against a naive double-precision triple loop over many shapes (including the
// empty and edge-tile ones), operand layouts (row-major, transposed, strided), overwrite
// and accumulate, and batched products with broadcast operands. C is surrounded by
// sentinel values to catch writes outside the matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "cpu/gemm/gemm.hpp"
#include "cpu/gemm_layouts.hpp"

namespace ember::cpu {
namespace {

using detail::GemmIsa;
using std::ptrdiff_t;
using std::size_t;

using testing::Layout;
using testing::make_layout;
using testing::Operand;

struct Case {
  size_t batch = 1, m = 0, n = 0, k = 0;
  Layout la = Layout::RowMajor, lb = Layout::RowMajor;
  bool accumulate = false;
  bool bcast_a = false, bcast_b = false, shared_c = false;
};

std::string describe(const Case& t) {
  return "batch=" + std::to_string(t.batch) + " m=" + std::to_string(t.m) +
         " n=" + std::to_string(t.n) + " k=" + std::to_string(t.k) +
         " la=" + std::to_string(static_cast<int>(t.la)) +
         " lb=" + std::to_string(static_cast<int>(t.lb)) + " acc=" + std::to_string(t.accumulate) +
         " bcast_a=" + std::to_string(t.bcast_a) + " bcast_b=" + std::to_string(t.bcast_b) +
         " shared_c=" + std::to_string(t.shared_c);
}

template <class T>
void gemm(size_t batch, size_t m, size_t n, size_t k, const T* a, ptrdiff_t a_bs, ptrdiff_t a_rs,
          ptrdiff_t a_cs, const T* b, ptrdiff_t b_bs, ptrdiff_t b_rs, ptrdiff_t b_cs, T* c,
          ptrdiff_t c_bs, ptrdiff_t c_rs, bool accumulate) {
  if constexpr (sizeof(T) == 4) {
    gemm_f32(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c, c_bs, c_rs, accumulate);
  } else {
    gemm_f64(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c, c_bs, c_rs, accumulate);
  }
}

template <class T>
void run_case(const Case& t, std::mt19937& rng) {
  SCOPED_TRACE(describe(t));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const Operand oa = make_layout(t.la, t.m, t.k), ob = make_layout(t.lb, t.k, t.n);
  const ptrdiff_t a_bs = t.bcast_a ? 0 : static_cast<ptrdiff_t>(oa.elems);
  const ptrdiff_t b_bs = t.bcast_b ? 0 : static_cast<ptrdiff_t>(ob.elems);
  const size_t a_count = t.bcast_a ? 1 : t.batch, b_count = t.bcast_b ? 1 : t.batch;
  std::vector<T> a(oa.elems * a_count), b(ob.elems * b_count);
  for (auto& v : a) v = static_cast<T>(dist(rng));
  for (auto& v : b) v = static_cast<T>(dist(rng));

  // C: rows strided (n + 4), a guard band before and after each matrix.
  const ptrdiff_t c_rs = static_cast<ptrdiff_t>(t.n + 4);
  const size_t guard = 16;
  const size_t c_elems = t.m * static_cast<size_t>(c_rs) + guard;
  const ptrdiff_t c_bs = t.shared_c ? 0 : static_cast<ptrdiff_t>(c_elems);
  const size_t c_count = t.shared_c ? 1 : t.batch;
  const T sentinel = static_cast<T>(1234.5);
  std::vector<T> c(guard + c_elems * c_count, sentinel);
  auto c_at = [&](size_t bi, size_t i, size_t j) -> T& {
    return c[guard + static_cast<size_t>(static_cast<ptrdiff_t>(bi) * c_bs) +
             i * static_cast<size_t>(c_rs) + j];
  };
  for (size_t bi = 0; bi < c_count; ++bi)
    for (size_t i = 0; i < t.m; ++i)
      for (size_t j = 0; j < t.n; ++j) c_at(bi, i, j) = static_cast<T>(dist(rng));
  const std::vector<T> c0 = c;

  gemm<T>(t.batch, t.m, t.n, t.k, a.data(), a_bs, oa.rs, oa.cs, b.data(), b_bs, ob.rs, ob.cs,
          c.data() + guard, c_bs, c_rs, t.accumulate);

  // Reference in double, plus a bound on the rounding error: every product and partial
  // sum may be off by about eps relative to sum |a||b|.
  const double eps = std::numeric_limits<T>::epsilon();
  std::vector<double> ref(t.m * t.n), mag(t.m * t.n);
  for (size_t bi = 0; bi < c_count; ++bi) {
    // With a shared C (c_bs == 0) the batches run in order into the same matrix.
    const size_t first = t.shared_c ? 0 : bi, last = t.shared_c ? t.batch : bi + 1;
    for (size_t i = 0; i < t.m; ++i)
      for (size_t j = 0; j < t.n; ++j) {
        double r = t.accumulate ? static_cast<double>(c0[&c_at(bi, i, j) - c.data()]) : 0.0;
        double mg = std::fabs(r);
        for (size_t bb = first; bb < last; ++bb) {
          if (!t.accumulate && t.shared_c) r = 0.0, mg = 0.0;  // each batch overwrites
          const T* ab = a.data() + static_cast<ptrdiff_t>(bb) * a_bs;
          const T* bp = b.data() + static_cast<ptrdiff_t>(bb) * b_bs;
          for (size_t p = 0; p < t.k; ++p) {
            const double x =
                ab[static_cast<ptrdiff_t>(i) * oa.rs + static_cast<ptrdiff_t>(p) * oa.cs];
            const double y =
                bp[static_cast<ptrdiff_t>(p) * ob.rs + static_cast<ptrdiff_t>(j) * ob.cs];
            r += x * y;
            mg += std::fabs(x * y);
          }
        }
        ref[i * t.n + j] = r;
        mag[i * t.n + j] = mg;
      }
    const double kk = static_cast<double>(t.k * (t.shared_c ? t.batch : 1) + 2);
    size_t failures = 0;
    for (size_t i = 0; i < t.m && failures < 5; ++i)
      for (size_t j = 0; j < t.n && failures < 5; ++j) {
        const double got = c_at(bi, i, j);
        const double tol = 2.0 * kk * eps * mag[i * t.n + j] + 1e-30;
        if (!(std::fabs(got - ref[i * t.n + j]) <= tol)) {
          ADD_FAILURE() << "batch " << bi << " C[" << i << "][" << j << "] = " << got
                        << ", expected " << ref[i * t.n + j] << " (tol " << tol << ")";
          ++failures;
        }
      }
    ASSERT_EQ(failures, 0u);
  }
  // Nothing outside the m x n windows of C may change.
  for (size_t bi = 0; bi < c_count; ++bi)
    for (size_t i = 0; i < t.m; ++i)
      for (size_t j = t.n; j < static_cast<size_t>(c_rs); ++j)
        ASSERT_EQ(c_at(bi, i, j), sentinel) << "padding written at row " << i << " col " << j;
  for (size_t g = 0; g < guard; ++g) ASSERT_EQ(c[g], sentinel) << "wrote before C";
  for (size_t g = 0; g < guard; ++g) ASSERT_EQ(c[c.size() - 1 - g], sentinel) << "wrote after C";
}

const size_t kSizes[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 65, 127, 129, 255, 300};
constexpr Layout kLayouts[] = {Layout::RowMajor, Layout::ColMajor, Layout::Strided};

// A deterministic sample of shape / layout combinations: all edge sizes appear in every
// position, paired with a spread of the others, and layouts and accumulate rotate.
std::vector<Case> sampled_cases() {
  std::vector<Case> cases;
  std::mt19937 pick(42);
  const size_t ns = std::size(kSizes);
  for (size_t i = 0; i < ns; ++i) {
    for (int rep = 0; rep < 4; ++rep) {
      Case t;
      const size_t s1 = kSizes[i], s2 = kSizes[pick() % ns], s3 = kSizes[pick() % ns];
      switch (rep % 3) {
        case 0:
          t.m = s1, t.n = s2, t.k = s3;
          break;
        case 1:
          t.m = s2, t.n = s1, t.k = s3;
          break;
        default:
          t.m = s2, t.n = s3, t.k = s1;
          break;
      }
      t.la = kLayouts[pick() % 3];
      t.lb = kLayouts[pick() % 3];
      t.accumulate = (pick() & 1) != 0;
      cases.push_back(t);
    }
  }
  // Large enough for several row blocks, k blocks and threads; and one wide enough for
  // several column blocks.
  for (Layout la : kLayouts)
    for (Layout lb : kLayouts)
      cases.push_back({1, 300, 257, 300, la, lb, (la == lb), false, false, false});
  cases.push_back({1, 5, 4200, 9, Layout::RowMajor, Layout::RowMajor, false, false, false, false});
  cases.push_back({1, 2, 33, 1000, Layout::ColMajor, Layout::Strided, true, false, false, false});
  return cases;
}

class GemmTest : public ::testing::TestWithParam<GemmIsa> {
 protected:
  void SetUp() override {
    if (!detail::gemm_isa_supported(GetParam()))
      GTEST_SKIP() << "this CPU lacks the instructions of the forced micro-kernel family ("
                   << (GetParam() == GemmIsa::Avx512 ? "AVX-512 F/VL/BW/DQ" : "AVX2+FMA") << ")";
    detail::gemm_force_isa(GetParam());
    ASSERT_EQ(detail::gemm_active_isa(), GetParam());
  }
  void TearDown() override { detail::gemm_force_isa(GemmIsa::Auto); }
};

TEST_P(GemmTest, ShapesAndLayoutsF32) {
  std::mt19937 rng(1);
  for (const Case& t : sampled_cases()) run_case<float>(t, rng);
}

TEST_P(GemmTest, ShapesAndLayoutsF64) {
  std::mt19937 rng(2);
  for (const Case& t : sampled_cases()) run_case<double>(t, rng);
}

std::vector<Case> batch_cases() {
  std::vector<Case> cases;
  // Small products (spread over threads by batch) and large ones (threaded inside).
  for (size_t s : {size_t{7}, size_t{33}, size_t{129}, size_t{200}})
    for (size_t batch : {size_t{1}, size_t{2}, size_t{3}, size_t{5}}) {
      cases.push_back(
          {batch, s, s + 1, s + 2, Layout::RowMajor, Layout::RowMajor, false, false, false, false});
      cases.push_back(
          {batch, s, s, s, Layout::ColMajor, Layout::RowMajor, true, true, false, false});
      cases.push_back(
          {batch, s + 3, s, s, Layout::RowMajor, Layout::Strided, false, false, true, false});
    }
  // All batches into one C: accumulate sums them; overwrite keeps the last.
  cases.push_back({3, 17, 40, 9, Layout::RowMajor, Layout::RowMajor, true, false, false, true});
  cases.push_back({4, 65, 70, 33, Layout::Strided, Layout::ColMajor, true, true, false, true});
  cases.push_back({3, 16, 16, 16, Layout::RowMajor, Layout::RowMajor, false, false, true, true});
  cases.push_back({4, 5, 6, 0, Layout::RowMajor, Layout::RowMajor, false, false, false, false});
  cases.push_back({4, 5, 6, 0, Layout::RowMajor, Layout::RowMajor, true, true, true, false});
  return cases;
}

TEST_P(GemmTest, BatchedF32) {
  std::mt19937 rng(3);
  for (const Case& t : batch_cases()) run_case<float>(t, rng);
}

TEST_P(GemmTest, BatchedF64) {
  std::mt19937 rng(4);
  for (const Case& t : batch_cases()) run_case<double>(t, rng);
}

// Products with one row or one column (the matrix-vector path): every operand layout,
// k around the vector widths, and sizes that cross each threading split (outputs split
// over threads, and k split into chunks when there are too few outputs).
std::vector<Case> gemv_cases() {
  std::vector<Case> cases;
  std::mt19937 pick(7);
  const size_t outs[] = {1, 2, 5, 16, 17, 63, 300, 1100};
  const size_t ks[] = {0, 1, 3, 8, 9, 15, 16, 17, 31, 33, 100, 517};
  for (size_t o : outs)
    for (size_t k : ks)
      for (bool row : {true, false}) {
        Case t;
        t.m = row ? 1 : o;
        t.n = row ? o : 1;
        t.k = k;
        t.la = kLayouts[pick() % 3];
        t.lb = kLayouts[pick() % 3];
        t.accumulate = (pick() & 1) != 0;
        cases.push_back(t);
      }
  for (Layout la : kLayouts)
    for (Layout lb : kLayouts) {
      cases.push_back({1, 1, 1, 70000, la, lb, false, false, false, false});  // one long dot
      cases.push_back({1, 3, 1, 40000, la, lb, true, false, false, false});   // few long rows
      cases.push_back({1, 1, 3, 40000, la, lb, false, false, false, false});
      cases.push_back({1, 1, 20, 5000, la, lb, true, false, false, false});  // few columns
      cases.push_back({1, 20, 1, 5000, la, lb, false, false, false, false});
      cases.push_back({1, 1, 5000, 301, la, lb, false, false, false, false});  // many outputs
      cases.push_back({1, 5000, 1, 301, la, lb, true, false, false, false});
    }
  // Batched, with broadcast operands and a shared C.
  for (size_t batch : {size_t{2}, size_t{3}, size_t{8}}) {
    cases.push_back(
        {batch, 1, 129, 67, Layout::RowMajor, Layout::RowMajor, false, false, false, false});
    cases.push_back(
        {batch, 129, 1, 67, Layout::RowMajor, Layout::RowMajor, true, false, true, false});
    cases.push_back(
        {batch, 1, 2000, 700, Layout::ColMajor, Layout::ColMajor, false, true, false, false});
    cases.push_back(
        {batch, 2000, 1, 700, Layout::ColMajor, Layout::RowMajor, false, false, false, false});
    cases.push_back(
        {batch, 1, 33, 40, Layout::RowMajor, Layout::RowMajor, true, false, false, true});
    cases.push_back(
        {batch, 33, 1, 40, Layout::ColMajor, Layout::RowMajor, false, false, false, true});
  }
  return cases;
}

TEST_P(GemmTest, MatrixVectorF32) {
  std::mt19937 rng(5);
  for (const Case& t : gemv_cases()) run_case<float>(t, rng);
}

TEST_P(GemmTest, MatrixVectorF64) {
  std::mt19937 rng(6);
  for (const Case& t : gemv_cases()) run_case<double>(t, rng);
}

// Note [Packed A] (gemm.hpp): a product with a packed A gives bit for bit the plain GEMM's
// results (checked against the f64 reference above), with B strided or given by a packer,
// and the packed A serves several products. Shapes cross the k blocks (k up to 600), the
// row slivers and the matrix-vector path (m or n == 1).
template <class T>
void check_packed_a(std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  // B's packer: a row-major [k, n] matrix, written sliver by sliver.
  struct Dense {
    const T* b;
    size_t n;
    static void pack(const void* ctx, T* dst, size_t nr, size_t p0, size_t kc, size_t j0,
                     size_t cols) {
      const auto& d = *static_cast<const Dense*>(ctx);
      for (size_t s = 0; s * nr < cols; ++s)
        for (size_t p = 0; p < kc; ++p)
          for (size_t j = 0; j < nr; ++j) {
            const size_t col = s * nr + j;
            dst[(s * kc + p) * nr + j] = col < cols ? d.b[(p0 + p) * d.n + j0 + col] : T(0);
          }
    }
  };
  const size_t shapes[][3] = {{1, 1, 1},      {1, 40, 7},     {40, 1, 7},     {5, 9, 0},
                              {13, 37, 5},    {64, 196, 288}, {288, 227, 64}, {7, 300, 600},
                              {300, 17, 257}, {130, 70, 513}};
  for (const auto& sh : shapes)
    for (Layout la : kLayouts) {
      const size_t m = sh[0], n = sh[1], k = sh[2];
      SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) +
                   " k=" + std::to_string(k) + " la=" + std::to_string(static_cast<int>(la)));
      const Operand oa = make_layout(la, m, k);
      std::vector<T> a(oa.elems), b(std::max<size_t>(k * n, 1));
      for (auto& v : a) v = static_cast<T>(dist(rng));
      for (auto& v : b) v = static_cast<T>(dist(rng));
      PackedA<T> packed(m, k);
      std::vector<T> panels(packed.size());
      packed.pack(panels.data(), a.data(), oa.rs, oa.cs);
      const Dense dense{b.data(), n};
      const PackedB<T> pb{&Dense::pack, &dense};
      for (bool accumulate : {false, true}) {
        std::vector<T> c0(m * n);
        for (auto& v : c0) v = static_cast<T>(dist(rng));
        std::vector<T> plain = c0, with_a = c0, with_both = c0, implicit = c0;
        const ptrdiff_t ln = static_cast<ptrdiff_t>(n);
        gemm<T>(1, m, n, k, a.data(), 0, oa.rs, oa.cs, b.data(), 0, ln, 1, plain.data(), 0, ln,
                accumulate);
        gemm_packed_a(n, packed, b.data(), ln, 1, with_a.data(), ln, accumulate);
        gemm_packed_a(n, packed, pb, with_both.data(), ln, accumulate);
        if constexpr (sizeof(T) == 4)
          gemm_f32_packed_b(m, n, k, a.data(), oa.rs, oa.cs, pb, implicit.data(), ln, accumulate);
        else
          gemm_f64_packed_b(m, n, k, a.data(), oa.rs, oa.cs, pb, implicit.data(), ln, accumulate);
        for (size_t i = 0; i < m * n; ++i) {
          ASSERT_EQ(std::memcmp(&plain[i], &with_a[i], sizeof(T)), 0)
              << "strided B, element " << i << ": " << with_a[i] << " vs " << plain[i];
          ASSERT_EQ(std::memcmp(&implicit[i], &with_both[i], sizeof(T)), 0)
              << "packed B, element " << i << ": " << with_both[i] << " vs " << implicit[i];
        }
        if (accumulate) continue;
        // Note [B rows in place]: B's rows where they lie, in reverse order, each followed by
        // its readable slack of NaNs (columns the kernels load and drop): the packed B's
        // results bit for bit (C overwritten).
        const size_t pitch = n + kInPlaceRowSlack + 5;
        std::vector<T> lying(k * pitch + kInPlaceRowSlack, std::numeric_limits<T>::quiet_NaN());
        std::vector<const T*> rows(k);
        for (size_t p = 0; p < k; ++p) {
          T* row = lying.data() + (k - 1 - p) * pitch;
          std::copy(b.begin() + p * n, b.begin() + (p + 1) * n, row);
          rows[p] = row;
        }
        std::vector<T> in_place = c0;
        gemm_packed_a_in_place(n, packed, rows.data(), in_place.data(), ln);
        for (size_t i = 0; i < m * n; ++i)
          ASSERT_EQ(std::memcmp(&with_both[i], &in_place[i], sizeof(T)), 0)
              << "rows in place, element " << i << ": " << in_place[i] << " vs " << with_both[i];
      }
    }
}

TEST_P(GemmTest, PackedAIsThePlainProductF32) {
  std::mt19937 rng(8);
  check_packed_a<float>(rng);
}

TEST_P(GemmTest, PackedAIsThePlainProductF64) {
  std::mt19937 rng(9);
  check_packed_a<double>(rng);
}

// Note [Prepacked B] (gemm.hpp): a product with a prepacked B gives bit for bit the plain
// GEMM's results, for any layout of B, with C overwritten or accumulated into, and one
// prepacked B serves several products with different A. Shapes cross the k blocks, the
// column slivers and column blocks (an LSTM step's 32 x 1024 x 256, split over the
// threads), the kernel's row block (300 rows) and the matrix-vector path (m or n == 1,
// which reads the source B); the plain products are checked against f64 sums too.
// Whether got is want bit for bit, and want the f64 sums of a(i, p) * b(p, j) (+ c0 when
// accumulating) at a sample of elements: C [m, n] row-major.
template <class T, class A, class B>
::testing::AssertionResult plain_product(const std::vector<T>& want, const std::vector<T>& got,
                                         size_t m, size_t n, size_t k, const A& a, const B& b,
                                         const std::vector<T>* c0) {
  for (size_t i = 0; i < m * n; ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(T)) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs " << want[i] << " bit for bit";
  for (size_t i = 0; i < m; i += std::max<size_t>(1, m / 7))
    for (size_t j = 0; j < n; j += std::max<size_t>(1, n / 11)) {
      double sum = c0 ? double((*c0)[i * n + j]) : 0.0;
      for (size_t p = 0; p < k; ++p) sum += double(a(i, p)) * double(b(p, j));
      if (std::abs(double(want[i * n + j]) - sum) > (sizeof(T) == 4 ? 1e-4 : 1e-12) * double(k + 1))
        return ::testing::AssertionFailure()
               << "element (" << i << ", " << j << "): " << want[i * n + j] << " vs f64 " << sum;
    }
  return ::testing::AssertionSuccess();
}

template <class T>
void check_prepacked_b(std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const size_t shapes[][3] = {{1, 40, 7},     {40, 1, 7},      {2, 3, 1},     {5, 9, 0},
                              {13, 37, 5},    {32, 1024, 256}, {7, 300, 600}, {192, 70, 513},
                              {300, 17, 257}, {3, 2000, 20}};
  for (const auto& sh : shapes)
    for (Layout lb : kLayouts) {
      const size_t m = sh[0], n = sh[1], k = sh[2];
      SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) +
                   " k=" + std::to_string(k) + " lb=" + std::to_string(static_cast<int>(lb)));
      const Operand ob = make_layout(lb, k, n);
      std::vector<T> b(std::max<size_t>(ob.elems, 1));
      for (auto& v : b) v = static_cast<T>(dist(rng));
      PrepackedB<T> packed(k, n);
      std::vector<T> panels(packed.size());
      packed.pack(panels.data(), b.data(), ob.rs, ob.cs);
      for (Layout la : {Layout::RowMajor, Layout::ColMajor})
        for (bool accumulate : {false, true}) {
          const Operand oa = make_layout(la, m, k);
          std::vector<T> a(std::max<size_t>(oa.elems, 1)), c0(m * n);
          for (auto& v : a) v = static_cast<T>(dist(rng));
          for (auto& v : c0) v = static_cast<T>(dist(rng));
          std::vector<T> plain = c0, with_b = c0;
          const ptrdiff_t ln = static_cast<ptrdiff_t>(n);
          gemm<T>(1, m, n, k, a.data(), 0, oa.rs, oa.cs, b.data(), 0, ob.rs, ob.cs, plain.data(), 0,
                  ln, accumulate);
          gemm_prepacked_b(m, a.data(), oa.rs, oa.cs, packed, with_b.data(), ln, accumulate);
          ASSERT_TRUE(plain_product(
              plain, with_b, m, n, k, [&](size_t i, size_t p) { return a[i * oa.rs + p * oa.cs]; },
              [&](size_t p, size_t j) { return b[p * ob.rs + j * ob.cs]; },
              accumulate ? &c0 : nullptr));
        }
    }
}

// Note [A rows in place]: A's rows read where they lie (anywhere in one buffer, overlapping,
// in any order) give the plain GEMM's product bit for bit, overwriting and accumulating:
// rows past a sliver of rows (a short last one), columns past a sliver, k past a k block,
// k == 0; and the f64 sums.
template <class T>
void check_rows_in_place(std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const size_t shapes[][3] = {{2, 3, 1},     {5, 9, 0},      {13, 37, 5},   {40, 70, 300},
                              {25, 33, 600}, {300, 17, 257}, {12, 32, 256}, {7, 64, 513}};
  for (const auto& sh : shapes)
    for (Layout lb : kLayouts)
      for (bool accumulate : {false, true}) {
        const size_t m = sh[0], n = sh[1], k = sh[2];
        SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) +
                     " k=" + std::to_string(k) + " lb=" + std::to_string(static_cast<int>(lb)) +
                     (accumulate ? " accumulate" : ""));
        std::vector<T> pool(m * k + 64);
        for (auto& v : pool) v = static_cast<T>(dist(rng));
        std::uniform_int_distribution<size_t> at(0, pool.size() - k);
        std::vector<const T*> rows(m);
        std::vector<T> a(std::max<size_t>(m * k, 1));
        for (size_t i = 0; i < m; ++i) {
          rows[i] = pool.data() + at(rng);
          std::copy(rows[i], rows[i] + k, a.begin() + static_cast<ptrdiff_t>(i * k));
        }
        const Operand ob = make_layout(lb, k, n);
        std::vector<T> b(std::max<size_t>(ob.elems, 1)), c0(m * n);
        for (auto& v : b) v = static_cast<T>(dist(rng));
        for (auto& v : c0) v = static_cast<T>(dist(rng));
        std::vector<T> plain = c0, in_place = c0;
        const ptrdiff_t ln = static_cast<ptrdiff_t>(n), lk = static_cast<ptrdiff_t>(k);
        gemm<T>(1, m, n, k, a.data(), 0, lk, 1, b.data(), 0, ob.rs, ob.cs, plain.data(), 0, ln,
                accumulate);
        gemm_rows_in_place(m, n, k, rows.data(), b.data(), ob.rs, ob.cs, in_place.data(), ln,
                           accumulate);
        ASSERT_TRUE(plain_product(
            plain, in_place, m, n, k, [&](size_t i, size_t p) { return rows[i][p]; },
            [&](size_t p, size_t j) { return b[p * ob.rs + j * ob.cs]; },
            accumulate ? &c0 : nullptr));
      }
}

TEST_P(GemmTest, RowsInPlaceAreThePlainProductF32) {
  std::mt19937 rng(20);
  check_rows_in_place<float>(rng);
}

TEST_P(GemmTest, RowsInPlaceAreThePlainProductF64) {
  std::mt19937 rng(21);
  check_rows_in_place<double>(rng);
}

TEST_P(GemmTest, PrepackedBIsThePlainProductF32) {
  std::mt19937 rng(18);
  check_prepacked_b<float>(rng);
}

TEST_P(GemmTest, PrepackedBIsThePlainProductF64) {
  std::mt19937 rng(19);
  check_prepacked_b<double>(rng);
}

// k == 0 must zero C even if it held NaNs, and overwrite must ignore NaN garbage in C.
TEST_P(GemmTest, OverwriteIgnoresOldContents) {
  const size_t m = 13, n = 37, k = 5;
  std::vector<float> a(m * k, 1.0f), b(k * n, 2.0f);
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  gemm_f32(1, m, n, 0, a.data(), 0, k, 1, b.data(), 0, n, 1, c.data(), 0, n, false);
  for (float v : c) ASSERT_EQ(v, 0.0f);
  std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
  gemm_f32(1, m, n, k, a.data(), 0, k, 1, b.data(), 0, n, 1, c.data(), 0, n, false);
  for (float v : c) ASSERT_EQ(v, 10.0f);
}

// Note [GEMM epilogue]: the epilogue is called once for every element of C (blocks
// disjoint, covering C), each block holding the product's final values — those of the same
// product without an epilogue, bit for bit — and what it writes in place stays. Shapes: one
// element, the matrix-vector paths (one row, one column), k == 0, k past a k block with rows
// past a row block and columns past an epilogue block, columns past a column panel, batched.
template <class T>
void check_epilogue(std::mt19937& rng) {
  struct Shape3 {
    size_t batch, m, n, k;
  };
  const Shape3 shapes[] = {{1, 1, 1, 1},    {1, 1, 300, 40},    {1, 37, 1, 20},
                           {1, 13, 37, 0},  {1, 151, 290, 300}, {1, 8, 4100, 10},
                           {3, 20, 33, 17}, {2, 200, 300, 64}};
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (const Shape3& z : shapes) {
    SCOPED_TRACE("batch=" + std::to_string(z.batch) + " m=" + std::to_string(z.m) +
                 " n=" + std::to_string(z.n) + " k=" + std::to_string(z.k));
    std::vector<T> a(z.batch * z.m * std::max<size_t>(z.k, 1)),
        b(z.batch * std::max<size_t>(z.k, 1) * z.n);
    for (auto& v : a) v = static_cast<T>(dist(rng));
    for (auto& v : b) v = static_cast<T>(dist(rng));
    const auto mn = static_cast<ptrdiff_t>(z.m * z.n);
    const auto mk = static_cast<ptrdiff_t>(z.m * z.k), kn = static_cast<ptrdiff_t>(z.k * z.n);
    const auto k = static_cast<ptrdiff_t>(z.k), n = static_cast<ptrdiff_t>(z.n);
    std::vector<T> plain(z.batch * z.m * z.n), c(plain.size(), std::numeric_limits<T>::quiet_NaN());
    gemm<T>(z.batch, z.m, z.n, z.k, a.data(), mk, k, 1, b.data(), kn, n, 1, plain.data(), mn, n,
            false);
    struct Seen {
      const std::vector<T>* plain;
      size_t m, n;
      std::mutex mu;
      std::vector<int> visits;
      bool values_ok = true;
      static void apply(const void* ctx, size_t batch, size_t i0, size_t j0, T* c, ptrdiff_t c_rs,
                        size_t rows, size_t cols) {
        auto* s = static_cast<Seen*>(const_cast<void*>(ctx));
        std::lock_guard lk(s->mu);
        for (size_t i = 0; i < rows; ++i) {
          for (size_t j = 0; j < cols; ++j) {
            const size_t at = (batch * s->m + i0 + i) * s->n + j0 + j;
            T& v = c[static_cast<ptrdiff_t>(i) * c_rs + static_cast<ptrdiff_t>(j)];
            ++s->visits[at];
            s->values_ok = s->values_ok && std::memcmp(&v, &(*s->plain)[at], sizeof(T)) == 0;
            v = 2 * v + 1;  // in place
          }
        }
      }
    } seen{&plain, z.m, z.n, {}, std::vector<int>(plain.size(), 0), true};
    const GemmEpilogue<T> ep{&Seen::apply, &seen};
    if constexpr (sizeof(T) == 4) {
      gemm_f32(z.batch, z.m, z.n, z.k, a.data(), mk, k, 1, b.data(), kn, n, 1, c.data(), mn, n,
               false, &ep);
    } else {
      gemm_f64(z.batch, z.m, z.n, z.k, a.data(), mk, k, 1, b.data(), kn, n, 1, c.data(), mn, n,
               false, &ep);
    }
    EXPECT_TRUE(seen.values_ok);
    for (size_t i = 0; i < plain.size(); ++i) {
      ASSERT_EQ(seen.visits[i], 1) << i;
      ASSERT_EQ(c[i], 2 * plain[i] + 1) << i;
    }
  }
}

TEST_P(GemmTest, EpilogueSeesEachFinishedBlockOnceF32) {
  std::mt19937 rng(10);
  check_epilogue<float>(rng);
}

TEST_P(GemmTest, EpilogueSeesEachFinishedBlockOnceF64) {
  std::mt19937 rng(11);
  check_epilogue<double>(rng);
}

INSTANTIATE_TEST_SUITE_P(Isa, GemmTest,
                         ::testing::Values(GemmIsa::Scalar, GemmIsa::Avx2, GemmIsa::Avx512),
                         [](const ::testing::TestParamInfo<GemmIsa>& info) {
                           switch (info.param) {
                             case GemmIsa::Scalar:
                               return std::string("Scalar");
                             case GemmIsa::Avx2:
                               return std::string("Avx2");
                             case GemmIsa::Avx512:
                               return std::string("Avx512");
                             default:
                               return std::string("Auto");
                           }
                         });

}  // namespace
}  // namespace ember::cpu
