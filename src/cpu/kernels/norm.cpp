// Layer norm: x, weight and bias made contiguous, then the ISA row kernel
// (elementwise_rows.inc) over each normalised row, rows spread over the threads.
// Batch norm and its gradient: channels spread over the threads, each channel's N rows of
// L = prod(*) elements read once for its sums and once to write, so the second pass finds
// them in cache. Group norm and its gradient: the same row kernels, (sample, group) pairs
// spread over the threads, the per-channel affine in the writing pass. RMS norm and its
// gradient: rows spread over the threads as layer norm's.
// 16-bit floats arrive widened to f32 (CpuBackend::execute_widened).
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "cpu/kernels/elementwise_table.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/thread_pool.hpp"

namespace ember::cpu {

ir::Handle run(CpuContext& ctx, ir::LayerNorm& op) {
  auto x = contiguous(ctx, op.x);
  const Shape& s = x->shape();
  auto out = ctx.empty(s, x->dtype());
  std::size_t n = 1;
  for (std::size_t d = s.rank() - op.dims; d < s.rank(); ++d) n *= s[d];
  const std::size_t rows = n == 0 ? 0 : s.num_elements() / n;
  if (rows == 0) return out;
  const LayerNormRows kernel = elementwise_table().layer_norm[static_cast<std::size_t>(x->dtype())];
  EMBER_ASSERT(kernel != nullptr);
  std::shared_ptr<const CpuTensor> w, b;
  if (op.weight) w = contiguous(ctx, op.weight);
  if (op.bias) b = contiguous(ctx, op.bias);
  const std::byte* wp = w ? w->data() : nullptr;
  const std::byte* bp = b ? b->data() : nullptr;
  const std::size_t elem = size_of(x->dtype());
  const std::byte* xp = x->data();
  std::byte* yp = out->data();
  parallel_for(0, rows, std::max<std::size_t>(1, 16384 / n), [&](std::size_t r0, std::size_t r1) {
    kernel(xp + r0 * n * elem, wp, bp, yp + r0 * n * elem, n, r1 - r0, op.eps);
  });
  return out;
}

namespace {

// x [N, C, *] seen as N x C rows of L contiguous elements.
struct Channels {
  std::size_t n, c, l;
  explicit Channels(const Shape& s) : n(s[0]), c(s[1]), l(1) {
    for (std::size_t d = 2; d < s.rank(); ++d) l *= s[d];
  }
  std::size_t values() const { return n * l; }  // per channel
  std::size_t row(std::size_t img, std::size_t ch) const { return (img * c + ch) * l; }
  // Channels per parallel_for chunk: about 16k values each.
  std::size_t grain() const {
    return std::max<std::size_t>(1, 16384 / std::max<std::size_t>(values(), 1));
  }
};

// Element i of a [C] or [2, C] f32 / f64 tensor as f64 (fallback when absent).
double at(const std::shared_ptr<const CpuTensor>& t, std::size_t i, double fallback) {
  if (!t) return fallback;
  return t->dtype() == DType::F64 ? t->data_as<const double>()[i]
                                  : static_cast<double>(t->data_as<const float>()[i]);
}
void put(const std::shared_ptr<CpuTensor>& t, std::size_t i, double v) {
  if (t->dtype() == DType::F64) {
    t->data_as<double>()[i] = v;
  } else {
    t->data_as<float>()[i] = static_cast<float>(v);
  }
}

}  // namespace

// Per channel: the sums of x - s and (x - s)^2 with the shift s = the channel's first
// value (as layer_norm_rows: the variance cancels only as far as the mean is from s in
// standard deviations), then y = (x - mean) * rstd * weight + bias.
Outputs run(CpuContext& ctx, ir::BatchNorm& op) {
  auto x = contiguous(ctx, op.x);
  const DType dt = x->dtype();
  const Channels ch(x->shape());
  auto y = ctx.empty(x->shape(), dt);
  auto stats = ctx.empty(Shape{2, ch.c}, dt);
  std::shared_ptr<const CpuTensor> w, b;
  if (op.weight) w = contiguous(ctx, op.weight);
  if (op.bias) b = contiguous(ctx, op.bias);
  const ElementwiseTable& table = elementwise_table();
  const BatchNormSums sums = table.batch_norm_sums[static_cast<std::size_t>(dt)];
  const BatchNormApply apply = table.batch_norm_apply[static_cast<std::size_t>(dt)];
  EMBER_ASSERT(sums != nullptr && apply != nullptr);
  const std::size_t elem = size_of(dt);
  const std::byte* xp = x->data();
  std::byte* yp = y->data();
  const double count = static_cast<double>(ch.values());
  parallel_for(0, ch.c, ch.grain(), [&](std::size_t c0, std::size_t c1) {
    for (std::size_t c = c0; c < c1; ++c) {
      const double shift = ch.values() == 0 ? 0.0 : at(x, ch.row(0, c), 0.0);
      double s[2] = {0, 0};
      for (std::size_t i = 0; i < ch.n; ++i) sums(xp + ch.row(i, c) * elem, ch.l, shift, s);
      const double dm = s[0] / count;
      double var = s[1] / count - dm * dm;
      var = var < 0.0 ? 0.0 : var;  // rounding; NaN stays NaN
      const double mean = shift + dm;
      const double scale = at(w, c, 1.0) / std::sqrt(var + op.eps);
      const double shift_out = at(b, c, 0.0);
      for (std::size_t i = 0; i < ch.n; ++i) {
        const std::size_t r = ch.row(i, c) * elem;
        apply(xp + r, nullptr, yp + r, ch.l, mean, 0.0, scale, shift_out);
      }
      put(stats, c, mean);
      put(stats, ch.c + c, var);
    }
  });
  return {y, stats};
}

// Per channel: sum(g) and sum(g (x - mean)), then dx = a g + b (x - mean) + c with
// a = weight rstd, b = -weight rstd^3 sum(g (x - mean)) / M, c = -a sum(g) / M
// (ir::BatchNormGrad's formula with xhat = (x - mean) rstd written out).
Outputs run(CpuContext& ctx, ir::BatchNormGrad& op) {
  auto x = contiguous(ctx, op.x);
  auto g = contiguous(ctx, op.g);
  auto stats = contiguous(ctx, op.stats);
  std::shared_ptr<const CpuTensor> w;
  if (op.weight) w = contiguous(ctx, op.weight);
  const DType dt = x->dtype();
  const Channels ch(x->shape());
  auto dx = ctx.empty(x->shape(), dt);
  auto dwb = ctx.empty(Shape{2, ch.c}, dt);
  const ElementwiseTable& table = elementwise_table();
  const BatchNormGradSums sums = table.batch_norm_grad_sums[static_cast<std::size_t>(dt)];
  const BatchNormApply apply = table.batch_norm_apply[static_cast<std::size_t>(dt)];
  EMBER_ASSERT(sums != nullptr && apply != nullptr);
  const std::size_t elem = size_of(dt);
  const std::byte* xp = x->data();
  const std::byte* gp = g->data();
  std::byte* dp = dx->data();
  const double count = static_cast<double>(ch.values());
  parallel_for(0, ch.c, ch.grain(), [&](std::size_t c0, std::size_t c1) {
    for (std::size_t c = c0; c < c1; ++c) {
      const double mean = at(stats, c, 0.0);
      const double rstd = 1.0 / std::sqrt(at(stats, ch.c + c, 0.0) + op.eps);
      double s[2] = {0, 0};
      for (std::size_t i = 0; i < ch.n; ++i) {
        const std::size_t r = ch.row(i, c) * elem;
        sums(xp + r, gp + r, ch.l, mean, s);
      }
      const double a = at(w, c, 1.0) * rstd;
      const double b = -a * rstd * rstd * s[1] / count;
      const double k = -a * s[0] / count;
      for (std::size_t i = 0; i < ch.n; ++i) {
        const std::size_t r = ch.row(i, c) * elem;
        apply(xp + r, gp + r, dp + r, ch.l, mean, a, b, k);
      }
      put(dwb, c, s[1] * rstd);
      put(dwb, ch.c + c, s[0]);
    }
  });
  return {dx, dwb};
}

namespace {
// x's rows for an RMS norm over its trailing `dims` dims: n elements each.
struct Rows {
  std::size_t n = 1, rows = 0;
  Rows(const Shape& s, std::size_t dims) {
    for (std::size_t d = s.rank() - dims; d < s.rank(); ++d) n *= s[d];
    rows = n == 0 ? 0 : s.num_elements() / n;
  }
  double rstd(double sum_sq, double eps) const {
    return 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
  }
};
}  // namespace

// Each row: the sum of x^2, then y = x rstd w, the row still in cache.
ir::Handle run(CpuContext& ctx, ir::RmsNorm& op) {
  auto x = contiguous(ctx, op.x);
  const DType dt = x->dtype();
  auto out = ctx.empty(x->shape(), dt);
  const Rows r(x->shape(), op.dims);
  if (r.rows == 0) return out;
  const ElementwiseTable& table = elementwise_table();
  const RmsNormSums sums = table.rms_norm_sums[static_cast<std::size_t>(dt)];
  const RmsNormApply apply = table.rms_norm_apply[static_cast<std::size_t>(dt)];
  EMBER_ASSERT(sums != nullptr && apply != nullptr);
  std::shared_ptr<const CpuTensor> w;
  if (op.weight) w = contiguous(ctx, op.weight);
  const std::byte* wp = w ? w->data() : nullptr;
  const std::size_t row_bytes = r.n * size_of(dt);
  const std::byte* xp = x->data();
  std::byte* yp = out->data();
  parallel_for(0, r.rows, std::max<std::size_t>(1, 16384 / r.n),
               [&](std::size_t r0, std::size_t r1) {
                 for (std::size_t i = r0; i < r1; ++i) {
                   double s[2] = {0, 0};
                   sums(xp + i * row_bytes, nullptr, nullptr, r.n, s);
                   apply(xp + i * row_bytes, wp, nullptr, yp + i * row_bytes, nullptr, r.n,
                         r.rstd(s[0], op.eps), 0.0);
                 }
               });
  return out;
}

// Note [RMS norm recomputes rstd]: the backward reads each row of x anyway (for
// sum(g w x)), so its sum of x^2 comes in the same pass and the forward saves nothing: y is
// RmsNorm's one output, and RmsNormGrad reads x and g once for the sums and once (in cache)
// to write dx = rstd g w - rstd^3 x sum(g w x) / n. dweight sums g x rstd over the rows:
// each of a fixed number of row blocks (set by the sizes alone, not the threads, so the
// bits do not depend on them) into its own f64 row, added in block order at the end.
Outputs run(CpuContext& ctx, ir::RmsNormGrad& op) {
  auto x = contiguous(ctx, op.x);
  auto g = contiguous(ctx, op.g);
  const DType dt = x->dtype();
  auto dx = ctx.empty(x->shape(), dt);
  const Rows r(x->shape(), op.dims);
  auto dw = ctx.empty(ir::out_shape(op, 1), dt);
  std::shared_ptr<const CpuTensor> w;
  if (op.weight) w = contiguous(ctx, op.weight);
  const ElementwiseTable& table = elementwise_table();
  const RmsNormSums sums = table.rms_norm_sums[static_cast<std::size_t>(dt)];
  const RmsNormApply apply = table.rms_norm_apply[static_cast<std::size_t>(dt)];
  EMBER_ASSERT(sums != nullptr && apply != nullptr);
  // At most 16 blocks, of at least 64k elements and 8 rows each: the f64 partial rows are
  // then at most a quarter of x's bytes (f32), and few where the rows are long.
  const std::size_t blocks =
      r.rows == 0 ? 0 : std::clamp<std::size_t>(std::min(r.rows * r.n / 65536, r.rows / 8), 1, 16);
  std::vector<double> partial(blocks * r.n, 0.0);
  const std::byte* wp = w ? w->data() : nullptr;
  const std::size_t row_bytes = r.n * size_of(dt);
  const std::byte* xp = x->data();
  const std::byte* gp = g->data();
  std::byte* dp = dx->data();
  const double inv_n = 1.0 / static_cast<double>(std::max<std::size_t>(r.n, 1));
  parallel_for(0, blocks, 1, [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) {
      double* acc = partial.data() + b * r.n;
      for (std::size_t i = b * r.rows / blocks; i < (b + 1) * r.rows / blocks; ++i) {
        const std::size_t o = i * row_bytes;
        double s[2] = {0, 0};
        sums(xp + o, wp, gp + o, r.n, s);
        const double rstd = r.rstd(s[0], op.eps);
        apply(xp + o, wp, gp + o, dp + o, acc, r.n, rstd, rstd * rstd * rstd * s[1] * inv_n);
      }
    }
  });
  for (std::size_t j = 0; j < r.n; ++j) {
    double t = 0;
    for (std::size_t b = 0; b < blocks; ++b) t += partial[b * r.n + j];
    put(dw, j, t);
  }
  return {dx, dw};
}

namespace {
// x [N, C, *] as N x groups units of K = C / groups channels of L contiguous elements.
struct Groups {
  std::size_t n, c, g, k, l;
  Groups(const Shape& s, std::size_t groups) : n(s[0]), c(s[1]), g(groups), k(s[1] / groups), l(1) {
    for (std::size_t d = 2; d < s.rank(); ++d) l *= s[d];
  }
  std::size_t units() const { return n * g; }
  std::size_t values() const { return k * l; }  // per unit
  // The first channel of unit u (sample u / g, group u % g) as a channel of x's [N * C].
  std::size_t first(std::size_t u) const { return (u / g) * c + (u % g) * k; }
  std::size_t grain() const {
    return std::max<std::size_t>(1, 16384 / std::max<std::size_t>(values(), 1));
  }
};
}  // namespace

// Per (sample, group): the sums of x - s and (x - s)^2 over its channels (s its first
// value, as batch norm), then each channel written as (x - mean) * (rstd w[c]) + b[c].
Outputs run(CpuContext& ctx, ir::GroupNorm& op) {
  auto x = contiguous(ctx, op.x);
  const DType dt = x->dtype();
  const Groups gr(x->shape(), op.groups);
  auto y = ctx.empty(x->shape(), dt);
  auto stats = ctx.empty(Shape{2, gr.units()}, dt);
  std::shared_ptr<const CpuTensor> w, b;
  if (op.weight) w = contiguous(ctx, op.weight);
  if (op.bias) b = contiguous(ctx, op.bias);
  const ElementwiseTable& table = elementwise_table();
  const BatchNormSums sums = table.batch_norm_sums[static_cast<std::size_t>(dt)];
  const BatchNormApply apply = table.batch_norm_apply[static_cast<std::size_t>(dt)];
  EMBER_ASSERT(sums != nullptr && apply != nullptr);
  const std::size_t row_bytes = gr.l * size_of(dt);
  const std::byte* xp = x->data();
  std::byte* yp = y->data();
  const double count = static_cast<double>(gr.values());
  parallel_for(0, gr.units(), gr.grain(), [&](std::size_t u0, std::size_t u1) {
    for (std::size_t u = u0; u < u1; ++u) {
      const std::size_t ch0 = gr.first(u);
      const double shift = gr.values() == 0 ? 0.0 : at(x, ch0 * gr.l, 0.0);
      double s[2] = {0, 0};
      for (std::size_t j = 0; j < gr.k; ++j) sums(xp + (ch0 + j) * row_bytes, gr.l, shift, s);
      const double dm = s[0] / count;
      double var = s[1] / count - dm * dm;
      var = var < 0.0 ? 0.0 : var;  // rounding; NaN stays NaN
      const double mean = shift + dm;
      const double rstd = 1.0 / std::sqrt(var + op.eps);
      for (std::size_t j = 0; j < gr.k; ++j) {
        const std::size_t ch = (u % gr.g) * gr.k + j;
        const std::size_t r = (ch0 + j) * row_bytes;
        apply(xp + r, nullptr, yp + r, gr.l, mean, 0.0, at(w, ch, 1.0) * rstd, at(b, ch, 0.0));
      }
      put(stats, u, mean);
      put(stats, gr.units() + u, var);
    }
  });
  return {y, stats};
}

// Per (sample, group), over its channels c: S1 = sum(w[c] g) and S2 = sum(w[c] g (x -
// mean)), then dx = a g + b (x - mean) + k per channel with a = w[c] rstd,
// b = -rstd^3 S2 / M, k = -rstd S1 / M (ir::GroupNormGrad's formula written out). Each
// (sample, channel)'s sum(g) and sum(g xhat) are kept and added over the samples in order
// at the end for dbias and dweight.
Outputs run(CpuContext& ctx, ir::GroupNormGrad& op) {
  auto x = contiguous(ctx, op.x);
  auto g = contiguous(ctx, op.g);
  auto stats = contiguous(ctx, op.stats);
  std::shared_ptr<const CpuTensor> w;
  if (op.weight) w = contiguous(ctx, op.weight);
  const DType dt = x->dtype();
  const Groups gr(x->shape(), op.groups);
  auto dx = ctx.empty(x->shape(), dt);
  auto dwb = ctx.empty(Shape{2, gr.c}, dt);
  const ElementwiseTable& table = elementwise_table();
  const BatchNormGradSums sums = table.batch_norm_grad_sums[static_cast<std::size_t>(dt)];
  const BatchNormApply apply = table.batch_norm_apply[static_cast<std::size_t>(dt)];
  EMBER_ASSERT(sums != nullptr && apply != nullptr);
  const std::size_t row_bytes = gr.l * size_of(dt);
  const std::byte* xp = x->data();
  const std::byte* gp = g->data();
  std::byte* dp = dx->data();
  const double count = static_cast<double>(gr.values());
  std::vector<double> per(2 * gr.n * gr.c, 0.0);  // sum(g), sum(g xhat) per (sample, channel)
  parallel_for(0, gr.units(), gr.grain(), [&](std::size_t u0, std::size_t u1) {
    for (std::size_t u = u0; u < u1; ++u) {
      const std::size_t ch0 = gr.first(u);
      const double mean = at(stats, u, 0.0);
      const double rstd = 1.0 / std::sqrt(at(stats, gr.units() + u, 0.0) + op.eps);
      double s1 = 0, s2 = 0;
      for (std::size_t j = 0; j < gr.k; ++j) {
        const std::size_t ch = (u % gr.g) * gr.k + j;
        const std::size_t r = (ch0 + j) * row_bytes;
        double s[2] = {0, 0};
        sums(xp + r, gp + r, gr.l, mean, s);
        const double wc = at(w, ch, 1.0);
        s1 += wc * s[0];
        s2 += wc * s[1];
        per[2 * (ch0 + j)] = s[0];
        per[2 * (ch0 + j) + 1] = s[1] * rstd;
      }
      const double b = -rstd * rstd * rstd * s2 / count;
      const double k = -rstd * s1 / count;
      for (std::size_t j = 0; j < gr.k; ++j) {
        const std::size_t ch = (u % gr.g) * gr.k + j;
        const std::size_t r = (ch0 + j) * row_bytes;
        apply(xp + r, gp + r, dp + r, gr.l, mean, at(w, ch, 1.0) * rstd, b, k);
      }
    }
  });
  for (std::size_t ch = 0; ch < gr.c; ++ch) {
    double sg = 0, sgx = 0;
    for (std::size_t i = 0; i < gr.n; ++i) {
      sg += per[2 * (i * gr.c + ch)];
      sgx += per[2 * (i * gr.c + ch) + 1];
    }
    put(dwb, ch, sgx);
    put(dwb, gr.c + ch, sg);
  }
  return {dx, dwb};
}

}  // namespace ember::cpu
