// Sort along a dim on the device: stable, NaN largest (last ascending, first descending),
// values and I64 indices — the Cpu's sort, element for element.
//
// Note [Device sort]: each row (the n elements along the dim, stride `inner` apart, so no
// permutation copy is needed) is sorted as (key, original position) pairs under an order
// that breaks key ties by position (codegen.cpp, sort_order). That order is total, so a
// bitonic network — not stable by itself — gives exactly the stable result. Rows are
// padded to a power of two np2 with positions >= n, which sort last. Rows with np2 <=
// kSortSharedMax sort in shared memory, one block per row; longer rows sort an [rows,
// np2] array of positions in global memory, one launch per (k, j) stage of the network,
// reading keys from x through the positions. Values are copied from x at the sorted
// positions, so they keep their exact bits (-0, NaN payloads, 16-bit floats).
#include <algorithm>

#include "cuda/kernels/kernels.hpp"

namespace ember::cuda {

std::vector<ir::Handle> run(CudaContext& ctx, ir::Sort& op) {
  auto x = ctx.contiguous(op.x);
  const Shape& s = x->shape();
  const DType dt = x->dtype();
  auto values = ctx.empty(s, dt);
  auto indices = ctx.empty(s, DType::I64);
  std::int64_t n = static_cast<std::int64_t>(s[op.dim]), outer = 1, inner = 1;
  for (std::size_t i = 0; i < op.dim; ++i) outer *= static_cast<std::int64_t>(s[i]);
  for (std::size_t i = op.dim + 1; i < s.rank(); ++i) inner *= static_cast<std::int64_t>(s[i]);
  std::int64_t rows = outer * inner;
  if (rows == 0 || n == 0) return {values, indices};
  std::int64_t np2 = 1;
  while (np2 < n) np2 <<= 1;
  int desc = op.descending ? 1 : 0;
  const void* xp = x->data();
  void* vp = values->data();
  void* ip = indices->data();
  if (np2 <= kSortSharedMax) {
    const auto block = static_cast<unsigned>(std::clamp<std::int64_t>(np2 / 2, 32, 512));
    ctx.launch(SortRowsKernel(dt), rows * block, {&xp, &vp, &ip, &rows, &n, &inner, &np2, &desc},
               "sort", false, block);
    return {values, indices};
  }
  auto ord = ctx.empty(Shape{static_cast<std::size_t>(rows * np2)}, DType::I64);
  void* op_ = ord->data();
  ctx.launch(SortInitKernel(), rows * np2, {&op_, &rows, &np2}, "sort");
  const SortStageKernel stage(dt);
  for (std::int64_t k = 2; k <= np2; k <<= 1) {
    for (std::int64_t j = k >> 1; j > 0; j >>= 1) {
      ctx.launch(stage, rows * (np2 / 2), {&xp, &op_, &rows, &n, &inner, &np2, &k, &j, &desc},
                 "sort");
    }
  }
  const std::size_t elem = size_of(dt);
  ctx.launch(SortWriteKernel(elem), rows * n, {&xp, &op_, &vp, &ip, &rows, &n, &inner, &np2},
             "sort");
  return {values, indices};
}

}  // namespace ember::cuda
