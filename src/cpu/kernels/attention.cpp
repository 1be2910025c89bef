// Scaled dot-product attention (ir::Attention) and its gradient (ir::AttentionGrad), tiled
// as FlashAttention: a block of kQueryBlock queries meets the keys kKeyBlock at a time, the
// scores of one tile [kQueryBlock, kKeyBlock] are made by the GEMM (cpu/gemm) and turned
// into probabilities against a running row maximum and sum, so no [Lq, Lk] matrix is ever
// held. The forward keeps each row's log-sum-exp, from which the backward recomputes every
// probability tile (FlashAttention-2's scheme: D = rowsum(g o y), dS = P o (dP - D)).
// f32 and f64; 16-bit floats arrive widened to f32 (CpuBackend::execute_widened). Forward
// tasks are (batch, query block) pairs on the thread pool, backward tasks as Note [Backward
// passes] says; the GEMMs inside run on the calling thread (nested parallel_for is serial).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu/gemm/gemm.hpp"
#include "cpu/kernels/elementwise_table.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/thread_pool.hpp"

namespace ember::cpu {

namespace {

// Note [Attention tiles]: 64 queries against 64 keys. Measured against 64 x 128 / 256 and
// 128 x 128 / 256 at [2, 4, 1024, 64], one thread: within the machine's noise (+-30%).
constexpr std::size_t kQueryBlock = 64;
constexpr std::size_t kKeyBlock = 64;

void gemm(std::size_t m, std::size_t n, std::size_t k, const float* a, std::ptrdiff_t a_rs,
          std::ptrdiff_t a_cs, const float* b, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, float* c,
          std::ptrdiff_t c_rs, bool accumulate) {
  gemm_f32(1, m, n, k, a, 0, a_rs, a_cs, b, 0, b_rs, b_cs, c, 0, c_rs, accumulate);
}
void gemm(std::size_t m, std::size_t n, std::size_t k, const double* a, std::ptrdiff_t a_rs,
          std::ptrdiff_t a_cs, const double* b, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, double* c,
          std::ptrdiff_t c_rs, bool accumulate) {
  gemm_f64(1, m, n, k, a, 0, a_rs, a_cs, b, 0, b_rs, b_cs, c, 0, c_rs, accumulate);
}

// The operands of one attention op, contiguous, with the batch dims flattened: q [B, Lq, E],
// k [B, Lk, E], v [B, Lk, Ev]; the mask read through broadcast strides.
template <class T>
struct Problem {
  std::size_t batch = 1, lq = 0, lk = 0, e = 0, ev = 0;
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  bool causal = false;
  T scale = 1;
  // Mask: bool (true: the key takes part) or additive (T); null when absent. Element
  // (b, i, j) is at mask_offset(b) + i * mask_rs + j * mask_cs.
  const bool* bool_mask = nullptr;
  const T* add_mask = nullptr;
  std::vector<std::size_t> batch_dims;
  std::vector<std::ptrdiff_t> mask_batch_strides;
  std::ptrdiff_t mask_rs = 0, mask_cs = 0;

  std::ptrdiff_t mask_offset(std::size_t b) const {
    std::ptrdiff_t off = 0;
    for (std::size_t d = batch_dims.size(); d-- > 0;) {
      off += static_cast<std::ptrdiff_t>(b % batch_dims[d]) * mask_batch_strides[d];
      b /= batch_dims[d];
    }
    return off;
  }
  // The keys that can take part in any of queries [i0, i1): causal stops at key i1 - 1.
  std::size_t key_end(std::size_t i1) const { return causal ? std::min(lk, i1) : lk; }

  // Note [Score tiles]: the one place scores are made, for the forward and both backward
  // passes alike. s [rows, cols] (row stride kKeyBlock) = scale q[i0 + r] . k[j0 + c],
  // plus the additive mask; -inf where the bool mask or the causal order leaves the key
  // out. The backward recomputes exactly the forward's scores, so exp(s - lse) is the
  // forward's softmax.
  void scores(std::size_t b, std::size_t i0, std::size_t rows, std::size_t j0, std::size_t cols,
              T* s) const {
    const auto ld = static_cast<std::ptrdiff_t>(std::max<std::size_t>(e, 1));
    gemm(rows, cols, e, q + (b * lq + i0) * e, ld, 1, k + (b * lk + j0) * e, 1, ld, s,
         static_cast<std::ptrdiff_t>(kKeyBlock), false);
    const T neg_inf = -std::numeric_limits<T>::infinity();
    const std::ptrdiff_t moff = mask_offset(b);
    for (std::size_t r = 0; r < rows; ++r) {
      T* row = s + r * kKeyBlock;
      const std::size_t i = i0 + r;
      const std::ptrdiff_t mrow = moff + static_cast<std::ptrdiff_t>(i) * mask_rs;
      for (std::size_t c = 0; c < cols; ++c) row[c] *= scale;
      if (add_mask != nullptr) {
        for (std::size_t c = 0; c < cols; ++c)
          row[c] += add_mask[mrow + static_cast<std::ptrdiff_t>(j0 + c) * mask_cs];
      }
      if (bool_mask != nullptr) {
        for (std::size_t c = 0; c < cols; ++c)
          if (!bool_mask[mrow + static_cast<std::ptrdiff_t>(j0 + c) * mask_cs]) row[c] = neg_inf;
      }
      if (causal) {
        for (std::size_t c = (i >= j0 ? i - j0 + 1 : 0); c < cols; ++c) row[c] = neg_inf;
      }
    }
  }
};

template <class T>
Problem<T> problem(CpuContext& ctx, const ir::Handle& qh, const ir::Handle& kh,
                   const ir::Handle& vh, const ir::Handle& maskh, bool causal, double scale,
                   std::vector<std::shared_ptr<const CpuTensor>>& keep) {
  Problem<T> p;
  const Shape &qs = qh->shape(), &ks = kh->shape(), &vs = vh->shape();
  const std::size_t r = qs.rank();
  for (std::size_t d = 0; d + 2 < r; ++d) {
    p.batch *= qs[d];
    p.batch_dims.push_back(qs[d]);
  }
  p.lq = qs[r - 2];
  p.e = qs[r - 1];
  p.lk = ks[r - 2];
  p.ev = vs[r - 1];
  const auto hold = [&](const ir::Handle& h) {
    keep.push_back(contiguous(ctx, h));
    return keep.back();
  };
  p.q = hold(qh)->template data_as<const T>();
  p.k = hold(kh)->template data_as<const T>();
  p.v = hold(vh)->template data_as<const T>();
  p.causal = causal;
  p.scale = static_cast<T>(scale);
  if (maskh) {
    auto m = hold(maskh);
    const Shape& ms = m->shape();
    // Contiguous strides of the mask's own shape, 0 along its broadcast (extent 1) dims.
    std::vector<std::ptrdiff_t> st(r);
    std::ptrdiff_t acc = 1;
    for (std::size_t d = r; d-- > 0;) {
      st[d] = ms[d] == 1 ? 0 : acc;
      acc *= static_cast<std::ptrdiff_t>(ms[d]);
    }
    p.mask_batch_strides.assign(st.begin(), st.end() - 2);
    p.mask_rs = st[r - 2];
    p.mask_cs = st[r - 1];
    if (m->dtype() == DType::Bool) {
      p.bool_mask = m->template data_as<const bool>();
    } else {
      p.add_mask = m->template data_as<const T>();
    }
  } else {
    p.mask_batch_strides.assign(r - 2, 0);
  }
  return p;
}

std::size_t blocks(std::size_t n, std::size_t block) { return (n + block - 1) / block; }

// exp over n contiguous values in place, by the element-wise table's row kernel (the ISA's
// vectorised exp).
template <class T>
void exp_in_place(T* x, std::size_t n) {
  constexpr DType dt = std::is_same_v<T, double> ? DType::F64 : DType::F32;
  static const UnaryRow row =
      elementwise_table()
          .unary[static_cast<std::size_t>(ir::UnaryFn::Exp)][static_cast<std::size_t>(dt)];
  row(x, x, n, 0, 0);
}

// The forward over one (batch, query block): online softmax across key blocks.
template <class T>
void forward_block(const Problem<T>& p, std::size_t b, std::size_t i0, T* out, T* lse,
                   std::vector<T>& s, std::vector<T>& acc, std::vector<T>& mx,
                   std::vector<T>& sum) {
  const std::size_t rows = std::min(kQueryBlock, p.lq - i0);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::fill(acc.begin(), acc.begin() + static_cast<std::ptrdiff_t>(rows * p.ev), T(0));
  std::fill(mx.begin(), mx.end(), neg_inf);
  std::fill(sum.begin(), sum.end(), T(0));
  const std::size_t kend = p.key_end(i0 + rows);
  for (std::size_t j0 = 0; j0 < kend; j0 += kKeyBlock) {
    const std::size_t cols = std::min(kKeyBlock, kend - j0);
    p.scores(b, i0, rows, j0, cols, s.data());
    for (std::size_t r = 0; r < rows; ++r) {
      T* row = s.data() + r * kKeyBlock;
      T m = mx[r];
      for (std::size_t c = 0; c < cols; ++c) m = std::max(m, row[c]);
      if (m == neg_inf) {  // no key of this row so far: its probabilities are all 0
        std::fill(row, row + cols, T(0));
        continue;
      }
      const T alpha = std::exp(mx[r] - m);  // 0 for the first keys (mx -inf)
      mx[r] = m;
      for (std::size_t c = 0; c < cols; ++c) row[c] -= m;
      exp_in_place(row, cols);
      T rs = 0;
      for (std::size_t c = 0; c < cols; ++c) rs += row[c];
      sum[r] = sum[r] * alpha + rs;
      if (alpha != T(1)) {
        T* a = acc.data() + r * p.ev;
        for (std::size_t c = 0; c < p.ev; ++c) a[c] *= alpha;
      }
    }
    const auto ldv = static_cast<std::ptrdiff_t>(std::max<std::size_t>(p.ev, 1));
    gemm(rows, p.ev, cols, s.data(), static_cast<std::ptrdiff_t>(kKeyBlock), 1,
         p.v + (b * p.lk + j0) * p.ev, ldv, 1, acc.data(), ldv, true);
  }
  for (std::size_t r = 0; r < rows; ++r) {
    T* o = out + (b * p.lq + i0 + r) * p.ev;
    const T* a = acc.data() + r * p.ev;
    // Note [Rows with every key masked] (tensor/ops_attention.cpp): out 0, lse -inf.
    const T inv = sum[r] > T(0) ? T(1) / sum[r] : T(0);
    for (std::size_t c = 0; c < p.ev; ++c) o[c] = a[c] * inv;
    lse[b * p.lq + i0 + r] = sum[r] > T(0) ? mx[r] + std::log(sum[r]) : neg_inf;
  }
}

template <class T>
Outputs attention(CpuContext& ctx, ir::Attention& op) {
  std::vector<std::shared_ptr<const CpuTensor>> keep;
  const Problem<T> p = problem<T>(ctx, op.q, op.k, op.v, op.mask, op.causal, op.scale, keep);
  auto out = ctx.empty(ir::out_shape(op, 0), ir::out_dtype(op, 0));
  auto lse = ctx.empty(ir::out_shape(op, 1), ir::out_dtype(op, 1));
  T* o = out->data_as<T>();
  T* l = lse->data_as<T>();
  const std::size_t qb = blocks(p.lq, kQueryBlock);
  parallel_for(0, p.batch * qb, 1, [&](std::size_t t0, std::size_t t1) {
    std::vector<T> s(kQueryBlock * kKeyBlock), acc(kQueryBlock * std::max<std::size_t>(p.ev, 1)),
        mx(kQueryBlock), sum(kQueryBlock);
    for (std::size_t t = t0; t < t1; ++t)
      forward_block(p, t / qb, (t % qb) * kQueryBlock, o, l, s, acc, mx, sum);
  });
  return {std::move(out), std::move(lse)};
}

// One probability tile of the backward and its dS: p_tile = exp(s - lse) (0 where the
// key is left out or the row has no key), ds = p_tile o (dP - D) with dP = g v^T.
template <class T>
struct GradTile {
  std::vector<T> s, dp;
  GradTile() : s(kQueryBlock * kKeyBlock), dp(kQueryBlock * kKeyBlock) {}

  void make(const Problem<T>& p, std::size_t b, std::size_t i0, std::size_t rows, std::size_t j0,
            std::size_t cols, const T* lse, const T* d, const T* g) {
    p.scores(b, i0, rows, j0, cols, s.data());
    const T neg_inf = -std::numeric_limits<T>::infinity();
    for (std::size_t r = 0; r < rows; ++r) {
      T* row = s.data() + r * kKeyBlock;
      const T l = lse[b * p.lq + i0 + r];
      if (l == neg_inf) {
        std::fill(row, row + cols, neg_inf);  // exp gives 0
      } else {
        for (std::size_t c = 0; c < cols; ++c) row[c] -= l;
      }
    }
    for (std::size_t r = 0; r < rows; ++r) exp_in_place(s.data() + r * kKeyBlock, cols);
    const auto ldv = static_cast<std::ptrdiff_t>(std::max<std::size_t>(p.ev, 1));
    gemm(rows, cols, p.ev, g + (b * p.lq + i0) * p.ev, ldv, 1, p.v + (b * p.lk + j0) * p.ev, 1, ldv,
         dp.data(), static_cast<std::ptrdiff_t>(kKeyBlock), false);
    for (std::size_t r = 0; r < rows; ++r) {
      const T* pr = s.data() + r * kKeyBlock;
      T* row = dp.data() + r * kKeyBlock;
      const T dr = d[b * p.lq + i0 + r];
      for (std::size_t c = 0; c < cols; ++c) row[c] = pr[c] * (row[c] - dr);
    }
  }
};

template <class T>
Outputs attention_grad(CpuContext& ctx, ir::AttentionGrad& op) {
  std::vector<std::shared_ptr<const CpuTensor>> keep;
  const Problem<T> p = problem<T>(ctx, op.q, op.k, op.v, op.mask, op.causal, op.scale, keep);
  auto yc = contiguous(ctx, op.y), lc = contiguous(ctx, op.lse), gc = contiguous(ctx, op.g);
  const T* y = yc->data_as<const T>();
  const T* lse = lc->data_as<const T>();
  const T* g = gc->data_as<const T>();
  auto dq = ctx.empty(op.q->shape(), op.q->dtype());
  auto dk = ctx.empty(op.k->shape(), op.q->dtype());
  auto dv = ctx.empty(op.v->shape(), op.q->dtype());
  T* dqp = dq->data_as<T>();
  T* dkp = dk->data_as<T>();
  T* dvp = dv->data_as<T>();
  std::fill(dqp, dqp + op.q->shape().num_elements(), T(0));
  std::fill(dkp, dkp + op.k->shape().num_elements(), T(0));
  std::fill(dvp, dvp + op.v->shape().num_elements(), T(0));
  // D = rowsum(g o y), one value per query row.
  std::vector<T> d(p.batch * p.lq);
  parallel_for(0, d.size(), 256, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      T acc = 0;
      for (std::size_t c = 0; c < p.ev; ++c) acc += g[r * p.ev + c] * y[r * p.ev + c];
      d[r] = acc;
    }
  });
  // Row strides of at least 1 (a GEMM's packing needs them; with E or Ev 0 nothing is read).
  const auto ld = static_cast<std::ptrdiff_t>(std::max<std::size_t>(p.e, 1));
  const auto ldv = static_cast<std::ptrdiff_t>(std::max<std::size_t>(p.ev, 1));
  const auto ldt = static_cast<std::ptrdiff_t>(kKeyBlock);
  // Note [Backward passes]: dk and dv rows belong to a key block, dq rows to a query
  // block. With at least as many (batch) matrices as threads, a task takes whole matrices
  // and makes each tile once, writing all three (FlashAttention-2's five products a tile).
  // With fewer, tasks are (batch, key block) pairs that own their dk and dv rows, and a
  // second pass over (batch, query block) pairs makes dq, so that no two tasks write one
  // row; the price is the score and dP tiles made twice.
  const std::size_t kb = blocks(p.lk, kKeyBlock), qb = blocks(p.lq, kQueryBlock);
  const bool one_pass = p.batch >= num_threads();
  // The queries of key block j0 of matrix b: dv += P^T g, dk += dS^T q, and with_dq
  // dq += dS k (dk and dq scaled once, when complete).
  const auto key_block = [&](GradTile<T>& tile, std::size_t b, std::size_t j0, bool with_dq) {
    const std::size_t cols = std::min(kKeyBlock, p.lk - j0);
    // Causal: queries before j0 see none of these keys.
    const std::size_t first = p.causal ? j0 / kQueryBlock * kQueryBlock : 0;
    for (std::size_t i0 = first; i0 < p.lq; i0 += kQueryBlock) {
      const std::size_t rows = std::min(kQueryBlock, p.lq - i0);
      tile.make(p, b, i0, rows, j0, cols, lse, d.data(), g);
      gemm(cols, p.ev, rows, tile.s.data(), 1, ldt, g + (b * p.lq + i0) * p.ev, ldv, 1,
           dvp + (b * p.lk + j0) * p.ev, ldv, true);
      gemm(cols, p.e, rows, tile.dp.data(), 1, ldt, p.q + (b * p.lq + i0) * p.e, ld, 1,
           dkp + (b * p.lk + j0) * p.e, ld, true);
      if (with_dq)
        gemm(rows, p.e, cols, tile.dp.data(), ldt, 1, p.k + (b * p.lk + j0) * p.e, ld, 1,
             dqp + (b * p.lq + i0) * p.e, ld, true);
    }
    T* dkb = dkp + (b * p.lk + j0) * p.e;
    for (std::size_t x = 0; x < cols * p.e; ++x) dkb[x] *= p.scale;
  };
  if (one_pass) {
    parallel_for(0, p.batch, 1, [&](std::size_t b0, std::size_t b1) {
      GradTile<T> tile;
      for (std::size_t b = b0; b < b1; ++b) {
        for (std::size_t j0 = 0; j0 < p.lk; j0 += kKeyBlock) key_block(tile, b, j0, true);
        T* dqb = dqp + b * p.lq * p.e;
        for (std::size_t x = 0; x < p.lq * p.e; ++x) dqb[x] *= p.scale;
      }
    });
    return {std::move(dq), std::move(dk), std::move(dv)};
  }
  parallel_for(0, p.batch * kb, 1, [&](std::size_t t0, std::size_t t1) {
    GradTile<T> tile;
    for (std::size_t t = t0; t < t1; ++t) key_block(tile, t / kb, (t % kb) * kKeyBlock, false);
  });
  parallel_for(0, p.batch * qb, 1, [&](std::size_t t0, std::size_t t1) {
    GradTile<T> tile;
    for (std::size_t t = t0; t < t1; ++t) {
      const std::size_t b = t / qb, i0 = (t % qb) * kQueryBlock;
      const std::size_t rows = std::min(kQueryBlock, p.lq - i0);
      const std::size_t kend = p.key_end(i0 + rows);
      for (std::size_t j0 = 0; j0 < kend; j0 += kKeyBlock) {
        const std::size_t cols = std::min(kKeyBlock, kend - j0);
        tile.make(p, b, i0, rows, j0, cols, lse, d.data(), g);
        gemm(rows, p.e, cols, tile.dp.data(), ldt, 1, p.k + (b * p.lk + j0) * p.e, ld, 1,
             dqp + (b * p.lq + i0) * p.e, ld, true);
      }
      T* dqb = dqp + (b * p.lq + i0) * p.e;
      for (std::size_t x = 0; x < rows * p.e; ++x) dqb[x] *= p.scale;
    }
  });
  return {std::move(dq), std::move(dk), std::move(dv)};
}

}  // namespace

Outputs run(CpuContext& ctx, ir::Attention& op) {
  if (op.q->dtype() == DType::F64) return attention<double>(ctx, op);
  return attention<float>(ctx, op);
}

Outputs run(CpuContext& ctx, ir::AttentionGrad& op) {
  if (op.q->dtype() == DType::F64) return attention_grad<double>(ctx, op);
  return attention_grad<float>(ctx, op);
}

}  // namespace ember::cpu
