// Reductions along one dim and inclusive scans. The input is made contiguous and viewed as
// [outer, n, inner]: with inner == 1 one block reduces each row (warp shuffles, then shared
// memory); otherwise one thread per output element walks the reduced dim, coalesced
// across inner.
#include "cuda/kernels/kernels.hpp"

namespace ember::cuda {
namespace {
struct Dims3 {
  std::int64_t outer = 1, n = 1, inner = 1;
};
Dims3 split_at(const Shape& s, std::size_t dim) {
  Dims3 d;
  d.n = static_cast<std::int64_t>(s[dim]);
  for (std::size_t i = 0; i < dim; ++i) d.outer *= static_cast<std::int64_t>(s[i]);
  for (std::size_t i = dim + 1; i < s.rank(); ++i) d.inner *= static_cast<std::int64_t>(s[i]);
  return d;
}
}  // namespace

// Note [Two-pass reductions]: one block per row leaves most of the GPU idle when there
// are few long rows (a full reduction is one row). For associative functions such rows
// are cut into k chunks (k a power of two dividing n) reduced as k * rows short rows, and
// the k partial results per row are reduced again. Mean divides in both passes:
// mean_k(sum_chunk / (n / k)) = sum / n.
ir::Handle reduce_two_pass(CudaContext& ctx, const ir::Reduce& op, const ir::Handle& x,
                           std::int64_t outer, std::int64_t n, std::int64_t k) {
  ir::Reshape split{x, Shape{static_cast<std::size_t>(outer * k), static_cast<std::size_t>(n / k)}};
  ir::Reduce first{op.fn, reshape(ctx, split), 1, op.out};
  ir::Reshape partial{reduce(ctx, first),
                      Shape{static_cast<std::size_t>(outer), static_cast<std::size_t>(k)}};
  ir::Reduce second{op.fn, reshape(ctx, partial), 1, op.out};
  Shape out_shape = op.x->shape();
  out_shape[op.dim] = 1;
  ir::Reshape back{reduce(ctx, second), out_shape};
  return reshape(ctx, back);
}

ir::Handle reduce(CudaContext& ctx, ir::Reduce& op) {
  auto x = ctx.contiguous(op.x);
  Shape out_shape = x->shape();
  out_shape[op.dim] = 1;
  auto out = ctx.empty(out_shape, op.out);
  Dims3 d = split_at(x->shape(), op.dim);
  if (d.outer * d.inner == 0) return out;
  const bool rows = d.inner == 1;
  // Integer means truncate, so they are not exact in two passes.
  const bool associative = op.fn != ir::ReduceFn::ArgMax && op.fn != ir::ReduceFn::ArgMin &&
                           !(op.fn == ir::ReduceFn::Mean && !is_float(x->dtype()));
  if (rows && associative && d.outer < 512 && d.n >= (1 << 16)) {
    std::int64_t k = 1024;
    while (k > 8 && d.n % k != 0) k /= 2;
    if (d.n % k == 0) return reduce_two_pass(ctx, op, std::const_pointer_cast<CudaTensor>(x), d.outer, d.n, k);
  }
  const KernelSource k = gen_reduce(op.fn, x->dtype(), rows);
  const void* xp = x->data();
  void* yp = out->data();
  if (rows) {
    constexpr unsigned kBlock = 256;
    ctx.launch(k, d.outer * kBlock, {&xp, &yp, &d.outer, &d.n, &d.inner}, ir::name(op.fn), false,
               kBlock, 1 << 20);
  } else {
    ctx.launch(k, d.outer * d.inner, {&xp, &yp, &d.outer, &d.n, &d.inner}, ir::name(op.fn));
  }
  return out;
}

ir::Handle scan(CudaContext& ctx, ir::Scan& op) {
  auto x = ctx.contiguous(op.x);
  auto out = ctx.empty(x->shape(), x->dtype());
  Dims3 d = split_at(x->shape(), op.dim);
  const KernelSource k = gen_scan(op.fn, x->dtype());
  const void* xp = x->data();
  void* yp = out->data();
  ctx.launch(k, d.outer * d.inner, {&xp, &yp, &d.outer, &d.n, &d.inner}, ir::name(op.fn), false,
             128);
  return out;
}

}  // namespace ember::cuda
