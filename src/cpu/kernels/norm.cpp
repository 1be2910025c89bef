// Layer norm: x, weight and bias made contiguous, then the ISA row kernel
// (elementwise_rows.inc) over each normalised row, rows spread over the threads.
// 16-bit floats arrive widened to f32 (CpuBackend::execute_widened).
#include <algorithm>
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

}  // namespace ember::cpu
