// Views (reshape, permute, expand, slice, flip) as new strides over the same device buffer,
// as on the Cpu, and the strided copies that write into views (slice_assign, cat).
#include <vector>

#include "cuda/kernels/kernels.hpp"
#include "ember/backend/strided_view.hpp"

namespace ember::cuda {
namespace {
backend::StridedView layout_of(const CudaTensor& x) { return {x.shape(), x.strides(), x.offset()}; }
TensorPtr view(const CudaTensor& x, backend::StridedView v) {
  return std::make_shared<CudaTensor>(x.buffer(), std::move(v.shape), x.dtype(),
                                      std::move(v.strides), v.offset);
}
}  // namespace

ir::Handle reshape(CudaContext& ctx, ir::Reshape& op) {
  const auto& x = as_cuda(op.x);
  if (auto v = backend::reshape_view(layout_of(x), op.shape)) return view(x, std::move(*v));
  auto c = ctx.contiguous(op.x);
  return view(*c, {op.shape, contiguous_strides(op.shape), c->offset()});
}

ir::Handle permute(CudaContext&, ir::Permute& op) {
  const auto& x = as_cuda(op.x);
  return view(x, backend::permute_view(layout_of(x), op.axes));
}

ir::Handle expand(CudaContext&, ir::Expand& op) {
  const auto& x = as_cuda(op.x);
  return view(x, backend::expand_view(layout_of(x), op.shape));
}

ir::Handle slice(CudaContext&, ir::Slice& op) {
  const auto& x = as_cuda(op.x);
  return view(x, backend::slice_view(layout_of(x), op.ranges));
}

ir::Handle flip(CudaContext&, ir::Flip& op) {
  const auto& x = as_cuda(op.x);
  return view(x, backend::flip_view(layout_of(x), op.axes));
}

ir::Handle slice_assign(CudaContext& ctx, ir::SliceAssign& op) {
  const auto& x = as_cuda(op.x);
  auto out = ctx.empty(x.shape(), x.dtype());
  ctx.copy(x, *out);
  ir::Slice s{out, op.ranges};
  auto target = slice(ctx, s);
  ctx.copy(as_cuda(op.value), as_cuda(target));
  return out;
}

ir::Handle cat(CudaContext& ctx, ir::Cat& op) {
  auto out = ctx.empty(op.out_shape, op.xs[0]->dtype());
  std::size_t start = 0;
  for (const auto& h : op.xs) {
    const auto& x = as_cuda(h);
    const std::size_t n = x.shape()[op.dim];
    if (n > 0) {
      std::vector<ir::SliceRange> ranges(op.out_shape.rank());
      for (std::size_t i = 0; i < ranges.size(); ++i) ranges[i] = {0, op.out_shape[i], 1};
      ranges[op.dim] = {start, start + n, 1};
      ir::Slice s{out, std::move(ranges)};
      auto target = slice(ctx, s);
      ctx.copy(x, as_cuda(target));
    }
    start += n;
  }
  return out;
}

}  // namespace ember::cuda
