// Layer norm: x, weight and bias made contiguous, then the ISA row kernel
// (elementwise_rows.inc) over each normalised row, rows spread over the threads.
// Batch norm and its gradient: channels spread over the threads, each channel's N rows of
// L = prod(*) elements read once for its sums and once to write, so the second pass finds
// them in cache. 16-bit floats arrive widened to f32 (CpuBackend::execute_widened).
#include <algorithm>
#include <cmath>
#include <memory>

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

}  // namespace ember::cpu
