// Batched, broadcasting matmul over the GEMM (cpu/gemm). Operand views are passed with
// their strides, so transposed and sliced matrices need no copy; batch dims are walked
// as one strided dim where they collapse, else one GEMM call per batch index. And the
// singular value decomposition (Svd), by one-sided Jacobi in f64.
#include "cpu/kernels/matmul.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <type_traits>
#include <vector>

#include "cpu/gemm/gemm.hpp"
#include "cpu/gemm/gemm_bf16.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/kernels/packed_cache.hpp"
#include "cpu/strided.hpp"
#include "cpu/thread_pool.hpp"

namespace ember::cpu {

namespace {

// Note [Batch folded into rows]: where B is one matrix for every batch index (broadcast)
// and A's rows continue from one batch index to the next at a single stride, the batched
// product is one GEMM of batch * m rows: B is packed once instead of once per batch index,
// and the micro-kernel's row tiles are full (an imported model's [7, 2, 32] x [32, 96]
// ran as 7 GEMMs of 2 rows, each packing all of B). Each C element is the same dot product
// in the same order either way. Returns that row stride, or nullopt where A's rows do not
// line up or B differs across the batch.
std::optional<std::ptrdiff_t> folded_row_stride(const CpuTensor& a, const CpuTensor& b,
                                                const Shape& os) {
  const std::size_t r = os.rank();
  const std::size_t m = os[r - 2];
  std::optional<std::ptrdiff_t> s;  // one row's stride, once fixed
  if (m > 1) s = a.strides()[r - 2];
  std::size_t rows = m;  // rows inside the current batch dim
  bool batched = false;
  for (std::size_t i = r - 2; i-- > 0;) {
    if (os[i] == 1) continue;
    if (b.shape()[i] != 1 || a.shape()[i] != os[i]) return std::nullopt;
    const std::ptrdiff_t st = a.strides()[i];
    const auto span = static_cast<std::ptrdiff_t>(rows);
    if (!s) {
      if (st <= 0 || st % span != 0) return std::nullopt;
      s = st / span;
    } else if (st != *s * span) {
      return std::nullopt;
    }
    rows *= os[i];
    batched = true;
  }
  if (!batched || !s || *s <= 0) return std::nullopt;
  return s;
}

// The one batch dim of extent above 1 and above m, where B is the same matrix along it:
// then the product runs as m GEMMs of os[d] rows (row i of every batch index at A's stride
// along d) instead of os[d] GEMMs of m rows — B packed m times, not os[d] times. A's
// transposed [seq, batch, k] views (an imported Transformer's activations, the LSTM's
// input) take this path where their rows do not fold.
std::optional<std::size_t> swappable_dim(const CpuTensor& a, const CpuTensor& b, const Shape& os) {
  const std::size_t r = os.rank();
  std::optional<std::size_t> d;
  for (std::size_t i = 0; i + 2 < r; ++i) {
    if (os[i] == 1) continue;
    if (d || b.shape()[i] != 1 || a.shape()[i] != os[i]) return std::nullopt;
    d = i;
  }
  if (!d || os[*d] <= os[r - 2] || a.strides()[*d] == 0) return std::nullopt;
  return d;
}

// The GEMM of matmul's element types: f64 or f32 operands into their own dtype, bf16 operands
// (In = std::uint16_t, their bits) into f32 (gemm_bf16, which takes no epilogue).
template <class In, class T>
void gemm_of(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const In* a,
             std::ptrdiff_t a_bs, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs, const In* b,
             std::ptrdiff_t b_bs, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, T* c,
             std::ptrdiff_t c_bs, std::ptrdiff_t c_rs, const GemmEpilogue<T>* e) {
  if constexpr (std::is_same_v<In, double>) {
    gemm_f64(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c, c_bs, c_rs, false, e);
  } else if constexpr (std::is_same_v<In, float>) {
    gemm_f32(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c, c_bs, c_rs, false, e);
  } else {
    static_assert(std::is_same_v<In, std::uint16_t> && std::is_same_v<T, float>);
    EMBER_ASSERT(e == nullptr);
    gemm_bf16(batch, m, n, k, a, a_bs, a_rs, a_cs, b, b_bs, b_rs, b_cs, c, c_bs, c_rs);
  }
}

// A matmul's right operand packed once (Note [Prepacked B] in gemm.hpp), with the block of
// the backend's pool that holds its panels.
template <class T>
struct CachedB {
  PrepackedB<T> b;
  std::shared_ptr<CpuTensor> storage;
  CachedB(CpuContext& ctx, const CpuTensor& src, std::size_t k, std::size_t n, std::ptrdiff_t rs,
          std::ptrdiff_t cs)
      : b(k, n) {
    storage = ctx.empty(Shape{b.size()}, sizeof(T) == 4 ? DType::F32 : DType::F64);
    b.pack(storage->template data_as<T>(), src.data_as<const T>(), rs, cs);
  }
};

// matmul_into with the operands' element type In (see gemm_of).
// An epilogue seeing a GEMM call's block (product `batch`, rows from i0) at the output's
// batch first + batch * batch_step and rows i * row_step + batch * batch_row: a call's
// products numbered from a later batch (a shift), or products that are each a stride of
// the output's rows (a swapped dim: row_step m, batch_row 1, all in batch 0).
template <class T>
struct Remapped {
  const GemmEpilogue<T>* ep;
  std::size_t first, batch_step, row_step, batch_row;
  static void apply(const void* ctx, std::size_t batch, std::size_t i0, std::size_t j0, T* c,
                    std::ptrdiff_t c_rs, std::size_t rows, std::size_t cols) {
    const auto* s = static_cast<const Remapped*>(ctx);
    const std::size_t ob = s->first + batch * s->batch_step, shift = batch * s->batch_row;
    if (s->row_step == 1) return s->ep->apply(s->ep->ctx, ob, i0 + shift, j0, c, c_rs, rows, cols);
    for (std::size_t q = 0; q < rows; ++q) {  // rows apart in the output: one at a time
      s->ep->apply(s->ep->ctx, ob, (i0 + q) * s->row_step + shift, j0,
                   c + static_cast<std::ptrdiff_t>(q) * c_rs, c_rs, 1, cols);
    }
  }
};

template <class In, class T>
void matmul_of(CpuContext& ctx, const CpuTensor& a, const CpuTensor& b, const Shape& os, T* out,
               const GemmEpilogue<T>* epilogue) {
  const std::vector<std::int64_t> out_strides = contiguous_strides(os);
  const std::size_t r = os.rank();
  const std::size_t m = os[r - 2], n = os[r - 1], k = a.shape()[r - 1];
  if (os.num_elements() == 0) return;
  // Inner-matrix strides; a row stride of a single-row matrix is irrelevant but must not be 0
  // for the GEMM's packing to be well defined.
  const std::ptrdiff_t a_rs = a.strides()[r - 2], a_cs = a.strides()[r - 1];
  const std::ptrdiff_t b_rs = b.strides()[r - 2], b_cs = b.strides()[r - 1];
  // Batch dims, with broadcast dims as stride 0.
  StridedSpace<3> sp;
  for (std::size_t i = 0; i + 2 < r; ++i) {
    sp.shape.push_back(os[i]);
    sp.strides[0].push_back(a.shape()[i] == 1 ? 0 : a.strides()[i]);
    sp.strides[1].push_back(b.shape()[i] == 1 ? 0 : b.strides()[i]);
    sp.strides[2].push_back(out_strides[i]);
  }
  // Note [Batch folded into rows]. With an epilogue too, so that a fused group's product is
  // the plain matmul's GEMM calls, hence its sums, bit for bit (unfolded, a batch of
  // one-row products takes the matrix-vector kernels, whose sums are ordered otherwise).
  const auto gemm = [&](std::size_t batch, std::size_t rows, std::ptrdiff_t a_bs_,
                        std::ptrdiff_t a_rs_, std::ptrdiff_t c_bs_, std::ptrdiff_t c_rs_,
                        const GemmEpilogue<T>* e) {
    gemm_of<In, T>(batch, rows, n, k, a.data_as<const In>(), a_bs_, a_rs_, a_cs,
                   b.data_as<const In>(), 0, b_rs, b_cs, out, c_bs_, c_rs_, e);
  };
  // One product of `rows` rows at row stride rs, row i the output's row i (batch 0): with
  // B packed once and kept (Note [Prepacked B] in gemm.hpp, Note [Packed weight cache] in
  // packed_cache.hpp) where a B seen before unchanged is multiplied by few rows.
  const auto one_product = [&](std::size_t rows, std::ptrdiff_t rs) {
    if constexpr (std::is_same_v<In, T>) {
      if (prepacked_b_pays<T>(rows, n, k)) {
        const PackedKey key = packed_key(PackedUse::MatmulRight, b);
        const auto packed = cached_packing<CachedB<T>>(ctx, b, true, key, [&] {
          return std::make_shared<const CachedB<T>>(ctx, b, k, n, b_rs, b_cs);
        });
        if (packed) {
          gemm_prepacked_b(rows, a.data_as<const T>(), rs, a_cs, packed->b, out,
                           static_cast<std::ptrdiff_t>(n), false, epilogue);
          return;
        }
      }
    }
    gemm(1, rows, 0, rs, 0, static_cast<std::ptrdiff_t>(n), epilogue);
  };
  if (r == 2) return one_product(m, a_rs);
  if (const auto row_stride = folded_row_stride(a, b, os))
    return one_product(os.num_elements() / n, *row_stride);
  if (const auto d = swappable_dim(a, b, os)) {
    // Product i (of m) holds the output's rows r * m + i, r < os[d]: the epilogue sees each
    // of them as that row of batch 0.
    const Remapped<T> swapped{epilogue, 0, 0, m, 1};
    const GemmEpilogue<T> ep{&Remapped<T>::apply, &swapped};
    gemm(m, os[*d], a_rs, a.strides()[*d], static_cast<std::ptrdiff_t>(n), out_strides[*d],
         epilogue ? &ep : nullptr);
    return;
  }
  sp.shape.push_back(1);  // a trailing unit dim keeps the space non-empty
  for (auto& s : sp.strides) s.push_back(0);
  sp.collapse();
  const std::ptrdiff_t a_bs = sp.strides[0].back(), b_bs = sp.strides[1].back(),
                       c_bs = sp.strides[2].back();
  // Each GEMM call numbers its products from 0; out is contiguous, so the flat batch index
  // of a call's first product is its offset in out over m * n.
  sp.for_each_row(
      [&](const std::array<std::int64_t, 3>& off, std::size_t len) {
        const Remapped<T> shift{epilogue, static_cast<std::size_t>(off[2]) / (m * n), 1, 1, 0};
        const GemmEpilogue<T> ep{&Remapped<T>::apply, &shift};
        const GemmEpilogue<T>* e = epilogue ? &ep : nullptr;
        gemm_of<In, T>(len, m, n, k, a.data_as<const In>() + off[0], a_bs, a_rs, a_cs,
                       b.data_as<const In>() + off[1], b_bs, b_rs, b_cs, out + off[2], c_bs,
                       static_cast<std::ptrdiff_t>(n), e);
      },
      std::size_t(-1));  // the GEMM parallelises internally
}

}  // namespace

template <class T>
void matmul_into(CpuContext& ctx, const CpuTensor& a, const CpuTensor& b, const Shape& os, T* out,
                 const GemmEpilogue<T>* epilogue) {
  matmul_of<T, T>(ctx, a, b, os, out, epilogue);
}

template void matmul_into<float>(CpuContext&, const CpuTensor&, const CpuTensor&, const Shape&,
                                 float*, const GemmEpilogue<float>*);
template void matmul_into<double>(CpuContext&, const CpuTensor&, const CpuTensor&, const Shape&,
                                  double*, const GemmEpilogue<double>*);

ir::Handle matmul_bf16(CpuContext& ctx, const ir::Matmul& op) {
  const auto& a = as_cpu(op.a);
  const auto& b = as_cpu(op.b);
  EMBER_ASSERT(a.dtype() == DType::BF16 && b.dtype() == DType::BF16);
  auto out = ctx.empty(op.out_shape, DType::F32);
  matmul_of<std::uint16_t, float>(ctx, a, b, op.out_shape, out->data_as<float>(), nullptr);
  ir::Cast narrow{std::move(out), DType::BF16};
  return run(ctx, narrow);
}

ir::Handle run(CpuContext& ctx, ir::Matmul& op) {
  const auto& a = as_cpu(op.a);
  const auto& b = as_cpu(op.b);
  auto out = ctx.empty(op.out_shape, a.dtype());
  if (a.dtype() == DType::F64) {
    matmul_into<double>(ctx, a, b, op.out_shape, out->data_as<double>(), nullptr);
  } else {
    matmul_into<float>(ctx, a, b, op.out_shape, out->data_as<float>(), nullptr);
  }
  return out;
}

namespace {

// Note [One-sided Jacobi]: the SVD of a column-major r x c matrix a (r >= c) by
// Hestenes' method: plane rotations of column pairs (p, q), each making the two columns
// orthogonal, applied to a and accumulated in v (c x c), sweep after sweep until every
// pair is orthogonal to working precision (|a_p . a_q| <= 1e-15 |a_p| |a_q|). Then a = U S
// with S the column norms, and x = a_0 = U S V^T. It converges quadratically and gives
// small singular values to high relative accuracy; each sweep costs O(r c^2).
// A column of norm 0 gets a zero u (the gradient of a zero singular value is then 0).
void jacobi_svd(std::vector<double>& a, std::size_t r, std::size_t c, std::vector<double>& v,
                std::vector<double>& sigma) {
  v.assign(c * c, 0.0);
  for (std::size_t j = 0; j < c; ++j) v[j * c + j] = 1.0;
  const auto col = [&](std::vector<double>& m, std::size_t rows, std::size_t j) {
    return m.data() + j * rows;
  };
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (std::size_t p = 0; p + 1 < c; ++p) {
      for (std::size_t q = p + 1; q < c; ++q) {
        double* ap = col(a, r, p);
        double* aq = col(a, r, q);
        double alpha = 0, beta = 0, gamma = 0;
        for (std::size_t i = 0; i < r; ++i) {
          alpha += ap[i] * ap[i];
          beta += aq[i] * aq[i];
          gamma += ap[i] * aq[i];
        }
        if (gamma == 0 || std::fabs(gamma) <= 1e-15 * std::sqrt(alpha * beta)) continue;
        rotated = true;
        const double zeta = (beta - alpha) / (2 * gamma);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
        const double cs = 1 / std::sqrt(1 + t * t), sn = cs * t;
        for (std::size_t i = 0; i < r; ++i) {
          const double x = ap[i], y = aq[i];
          ap[i] = cs * x - sn * y;
          aq[i] = sn * x + cs * y;
        }
        double* vp = col(v, c, p);
        double* vq = col(v, c, q);
        for (std::size_t i = 0; i < c; ++i) {
          const double x = vp[i], y = vq[i];
          vp[i] = cs * x - sn * y;
          vq[i] = sn * x + cs * y;
        }
      }
    }
    if (!rotated) break;
  }
  sigma.assign(c, 0.0);
  for (std::size_t j = 0; j < c; ++j) {
    double* aj = col(a, r, j);
    double s2 = 0;
    for (std::size_t i = 0; i < r; ++i) s2 += aj[i] * aj[i];
    sigma[j] = std::sqrt(s2);
    for (std::size_t i = 0; i < r; ++i) aj[i] = sigma[j] > 0 ? aj[i] / sigma[j] : 0.0;
  }
}

}  // namespace

Outputs run(CpuContext& ctx, ir::Svd& op) {
  auto x = contiguous(ctx, op.x);
  const DType dt = x->dtype();
  const Shape& xs = x->shape();
  const std::size_t rank = xs.rank(), m = xs[rank - 2], n = xs[rank - 1], k = std::min(m, n);
  auto s_out = ctx.empty(ir::out_shape(op, 0), dt);
  auto u_out = ctx.empty(ir::out_shape(op, 1), dt);
  auto vh_out = ctx.empty(ir::out_shape(op, 2), dt);
  const std::size_t batch = m * n == 0 ? 0 : xs.num_elements() / (m * n);
  if (k == 0 || batch == 0) {
    // No singular values; U or Vh may still have elements (m x 0, 0 x n): none to write.
    return {s_out, u_out, vh_out};
  }
  const bool tall = m >= n;  // else decompose x^T = V S U^T
  const std::size_t r = tall ? m : n, c = k;
  const auto each = [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x->data_as<const T>();
    T* sp = s_out->data_as<T>();
    T* up = u_out->data_as<T>();
    T* vp = vh_out->data_as<T>();
    parallel_for(0, batch, 1, [&](std::size_t b0, std::size_t b1) {
      std::vector<double> a(r * c), v, sigma;
      std::vector<std::size_t> order(c);
      for (std::size_t b = b0; b < b1; ++b) {
        const T* mat = xp + b * m * n;
        // a, column-major r x c: x itself when tall (column j = x[:, j]), else x^T.
        for (std::size_t i = 0; i < m; ++i) {
          for (std::size_t j = 0; j < n; ++j) {
            const double e = static_cast<double>(mat[i * n + j]);
            if (tall) {
              a[j * r + i] = e;
            } else {
              a[i * r + j] = e;
            }
          }
        }
        jacobi_svd(a, r, c, v, sigma);
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t p, std::size_t q) { return sigma[p] > sigma[q]; });
        // tall: x = A' V^T with A' = a (r = m), so U = a, Vh = V^T.
        // wide: x^T = a V^T, so x = V a^T: U = V (m = c rows), Vh = a^T.
        for (std::size_t t = 0; t < k; ++t) {
          const std::size_t j = order[t];
          sp[b * k + t] = static_cast<T>(sigma[j]);
          for (std::size_t i = 0; i < m; ++i) {
            up[(b * m + i) * k + t] = static_cast<T>(tall ? a[j * r + i] : v[j * c + i]);
          }
          for (std::size_t i = 0; i < n; ++i) {
            vp[(b * k + t) * n + i] = static_cast<T>(tall ? v[j * c + i] : a[j * r + i]);
          }
        }
      }
    });
  };
  if (dt == DType::F64) {
    each(double{});
  } else {
    EMBER_ASSERT(dt == DType::F32);  // 16-bit floats are widened by the backend
    each(float{});
  }
  return {s_out, u_out, vh_out};
}

}  // namespace ember::cpu
