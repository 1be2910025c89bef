// Reductions along one dim and inclusive scans. The input is made contiguous and viewed as
// [outer, n, inner]: with inner == 1 one block reduces each row (warp shuffles, then shared
// memory); otherwise one thread per output element walks the reduced dim, coalesced
// across inner.
#include <algorithm>
#include <utility>
#include <vector>

#include "cuda/kernels/kernels.hpp"
#include "ember/backend/strided_view.hpp"

namespace ember::cuda {
namespace {
// Kernel arguments: the split as i64 (backend::split_at).
using Dims3 = backend::DimSplit<std::int64_t>;
Dims3 split_at(const Shape& s, std::size_t dim) { return backend::split_at<std::int64_t>(s, dim); }
}  // namespace

// Note [Two-pass reductions]: one block per row leaves most of the GPU idle when there
// are few long rows (a full reduction is one row), and one thread per output column idles
// it when there are few columns (a reduction over the leading dim of a matrix). For
// associative functions the reduced dim is cut into k chunks (k a power of two dividing
// n): [outer, k, n / k, inner] is reduced over n / k, then the k partial results over k.
// Mean divides in both passes: mean_k(sum_chunk / (n / k)) = sum / n.
ir::Handle reduce_two_pass(CudaContext& ctx, const ir::Reduce& op, const ir::Handle& x,
                           const Dims3& d, std::int64_t k) {
  const auto z = [](std::int64_t v) { return static_cast<std::size_t>(v); };
  ir::Reshape split{x, Shape{z(d.outer), z(k), z(d.n / k), z(d.inner)}};
  ir::Reduce first{op.fn, run(ctx, split), 2, op.out};
  return reduce_partials(ctx, op.fn, run(ctx, first), d.outer, k, d.inner, ir::out_shape(op));
}

ir::Handle reduce_partials(CudaContext& ctx, ir::ReduceFn fn, ir::Handle first, std::int64_t outer,
                           std::int64_t k, std::int64_t inner, const Shape& out_shape) {
  const auto z = [](std::int64_t v) { return static_cast<std::size_t>(v); };
  const DType out = first->dtype();
  ir::Reshape partial{std::move(first), Shape{z(outer), z(k), z(inner)}};
  ir::Reduce second{fn, run(ctx, partial), 1, out};
  ir::Reshape back{run(ctx, second), out_shape};
  return run(ctx, back);
}

// The chunk count of Note [Two-pass reductions] for reducing d, or 1 (one pass).
std::int64_t two_pass_chunks(const Dims3& d) {
  std::int64_t k = 1;
  if (d.inner > 1) {
    // Few columns: about 2^18 threads in the first pass, each walking at least 16 elements.
    if (d.outer * d.inner >= (1 << 16) || d.n < 256) return 1;
    while (k * 2 <= d.n / 16 && d.outer * d.inner * k * 2 <= (1 << 18) && d.n % (k * 2) == 0)
      k *= 2;
    return k >= 4 ? k : 1;
  }
  // Few long rows: up to 1024 chunks.
  if (d.outer >= 512 || d.n < (1 << 16)) return 1;
  k = 1024;
  while (k > 8 && d.n % k != 0) k /= 2;
  return d.n % k == 0 ? k : 1;
}

namespace {
// The chunk count of the reduction of fn over dtype dt split as d: 1 for one pass.
std::int64_t reduce_chunks(ir::ReduceFn fn, DType dt, const Dims3& d) {
  // Integer means truncate, so they are not exact in two passes; 16-bit floats would round
  // the partial results to 16 bits.
  const bool associative = fn != ir::ReduceFn::ArgMax && fn != ir::ReduceFn::ArgMin &&
                           !(fn == ir::ReduceFn::Mean && !is_float(dt)) && dt != DType::F16 &&
                           dt != DType::BF16;
  return associative ? two_pass_chunks(d) : 1;
}
}  // namespace

std::int64_t reduce_chunk_count(ir::ReduceFn fn, DType dt, const Shape& shape, std::size_t dim) {
  return reduce_chunks(fn, dt, split_at(shape, dim));
}

ir::Handle run(CudaContext& ctx, ir::Reduce& op) {
  const Shape out_shape = ir::out_shape(op);
  auto x = ctx.contiguous(op.x);
  Dims3 d = split_at(x->shape(), op.dim);  // not const: launch takes its addresses
  if (d.outer * d.inner == 0) return ctx.empty(out_shape, op.out);
  const bool rows = d.inner == 1;
  const DType dt = x->dtype();
  if (const std::int64_t k = reduce_chunks(op.fn, dt, d); k > 1) {
    return reduce_two_pass(ctx, op, std::const_pointer_cast<CudaTensor>(x), d, k);
  }
  auto out = ctx.empty(out_shape, op.out);
  const auto fn = op.fn;
  const ReduceKernel spec(fn, dt, rows);
  const void* xp = x->data();
  void* yp = out->data();
  if (rows) {
    constexpr unsigned kBlock = 256;
    ctx.launch(spec, d.outer * kBlock, {&xp, &yp, &d.outer, &d.n, &d.inner}, ir::name(fn), false,
               kBlock, 1 << 20);
  } else {
    ctx.launch(spec, d.outer * d.inner, {&xp, &yp, &d.outer, &d.n, &d.inner}, ir::name(fn));
  }
  return out;
}

// Softmax along the last dim runs one block per row; another dim is first moved last.
ir::Handle run(CudaContext& ctx, ir::Softmax& op) {
  const std::size_t rank = op.x->shape().rank(), last = rank - 1;
  std::vector<std::size_t> axes(rank);
  for (std::size_t i = 0; i < rank; ++i) axes[i] = i;
  std::swap(axes[op.dim], axes[last]);
  ir::Handle xin = op.x;
  if (op.dim != last) {
    ir::Permute p{op.x, axes};
    xin = run(ctx, p);
  }
  auto x = ctx.contiguous(xin);
  auto out = ctx.empty(x->shape(), x->dtype());
  std::int64_t n = static_cast<std::int64_t>(x->shape()[last]);
  std::int64_t rows = n == 0 ? 0 : static_cast<std::int64_t>(x->shape().num_elements()) / n;
  if (rows > 0) {
    const DType dt = x->dtype();
    const bool log = op.log;
    const void* xp = x->data();
    void* yp = out->data();
    const char* name = log ? "log_softmax" : "softmax";
    if (const auto [block, ept, vec] = rows_in_registers(n, dt, aligned16({xp, yp})); block > 0) {
      ctx.launch(SoftmaxRegsKernel(dt, log, ept, vec), rows * block, {&xp, &yp, &rows, &n}, name,
                 false, block, CudaContext::kOneWave);
    } else {
      constexpr unsigned kBlock = 256;
      ctx.launch(SoftmaxKernel(dt, log), rows * kBlock, {&xp, &yp, &rows, &n}, name, false, kBlock,
                 1 << 20);
    }
  }
  if (op.dim == last) return out;
  ir::Permute back{out, axes};
  return std::const_pointer_cast<CudaTensor>(ctx.contiguous(run(ctx, back)));
}

ir::Handle run(CudaContext& ctx, ir::Scan& op) {
  auto x = ctx.contiguous(op.x);
  auto out = ctx.empty(x->shape(), x->dtype());
  Dims3 d = split_at(x->shape(), op.dim);
  const auto fn = op.fn;
  const DType dt = x->dtype();
  const void* xp = x->data();
  void* yp = out->data();
  ctx.launch(ScanKernel(fn, dt), d.outer * d.inner, {&xp, &yp, &d.outer, &d.n, &d.inner},
             ir::name(fn), false, 128);
  return out;
}

}  // namespace ember::cuda
