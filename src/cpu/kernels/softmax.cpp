// Softmax and log-softmax along a dim. Rows along the last dim go straight to the ISA row
// kernel; another dim is first moved last (one copy in, one out).
#include <numeric>
#include <vector>

#include "cpu/kernels/elementwise_table.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/thread_pool.hpp"

namespace ember::cpu {

ir::Handle run(CpuContext& ctx, ir::Softmax& op) {
  const std::size_t rank = op.x->shape().rank();
  const std::size_t last = rank - 1;
  ir::Handle x = op.x;
  std::vector<std::size_t> axes(rank);
  std::iota(axes.begin(), axes.end(), 0);
  const bool moved = op.dim != last;
  if (moved) {
    std::swap(axes[op.dim], axes[last]);
    ir::Permute p{x, axes};
    x = run(ctx, p);
  }
  auto xc = contiguous(ctx, x);
  const Shape& s = xc->shape();
  auto out = ctx.empty(s, xc->dtype());
  const std::size_t n = s[last];
  const std::size_t rows = n == 0 ? 0 : s.num_elements() / n;
  const SoftmaxRows kernel = elementwise_table().softmax[static_cast<std::size_t>(xc->dtype())];
  EMBER_ASSERT(kernel != nullptr);
  const std::size_t elem = size_of(xc->dtype());
  const std::byte* xp = xc->data();
  std::byte* yp = out->data();
  parallel_for(0, rows, std::max<std::size_t>(1, 16384 / std::max<std::size_t>(n, 1)),
               [&](std::size_t r0, std::size_t r1) {
                 kernel(xp + r0 * n * elem, yp + r0 * n * elem, n, r1 - r0, op.log);
               });
  if (!moved) return out;
  ir::Permute back{out, axes};
  auto view = run(ctx, back);
  auto result = ctx.empty(view->shape(), view->dtype());
  copy_strided(as_cpu(view), *result);
  return result;
}

}  // namespace ember::cpu
