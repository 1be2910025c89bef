// Views (reshape, permute, expand, slice, flip) as new strides over the same buffer, and
// the copies that write into views (slice_assign, cat).
#include <vector>

#include "cpu/kernels/kernels.hpp"
#include "ember/backend/strided_view.hpp"

namespace ember::cpu {

namespace {
backend::StridedView layout_of(const CpuTensor& x) { return {x.shape(), x.strides(), x.offset()}; }
std::shared_ptr<CpuTensor> view(const CpuTensor& x, backend::StridedView v) {
  return std::make_shared<CpuTensor>(x.buffer(), std::move(v.shape), x.dtype(),
                                     std::move(v.strides), v.offset);
}
}  // namespace

ir::Handle reshape(CpuContext& ctx, ir::Reshape& op) {
  const auto& x = as_cpu(op.x);
  if (auto v = backend::reshape_view(layout_of(x), op.shape)) return view(x, std::move(*v));
  auto c = contiguous(ctx, op.x);
  return view(*c, {op.shape, contiguous_strides(op.shape), c->offset()});
}

ir::Handle permute(CpuContext&, ir::Permute& op) {
  const auto& x = as_cpu(op.x);
  return view(x, backend::permute_view(layout_of(x), op.axes));
}

ir::Handle expand(CpuContext&, ir::Expand& op) {
  const auto& x = as_cpu(op.x);
  return view(x, backend::expand_view(layout_of(x), op.shape));
}

ir::Handle slice(CpuContext&, ir::Slice& op) {
  const auto& x = as_cpu(op.x);
  return view(x, backend::slice_view(layout_of(x), op.ranges));
}

ir::Handle flip(CpuContext&, ir::Flip& op) {
  const auto& x = as_cpu(op.x);
  return view(x, backend::flip_view(layout_of(x), op.axes));
}

ir::Handle slice_assign(CpuContext& ctx, ir::SliceAssign& op) {
  auto out = writable_copy(ctx, op.x);
  ir::Slice s{out, op.ranges};
  auto target = slice(ctx, s);
  copy_strided(as_cpu(op.value), as_cpu(target));
  return out;
}

ir::Handle cat(CpuContext& ctx, ir::Cat& op) {
  const DType dt = op.xs[0]->dtype();
  auto out = ctx.empty(op.out_shape, dt);
  std::size_t start = 0;
  for (const auto& h : op.xs) {
    const auto& x = as_cpu(h);
    const std::size_t n = x.shape()[op.dim];
    if (n > 0) {
      std::vector<ir::SliceRange> ranges(op.out_shape.rank());
      for (std::size_t i = 0; i < ranges.size(); ++i) ranges[i] = {0, op.out_shape[i], 1};
      ranges[op.dim] = {start, start + n, 1};
      ir::Slice s{out, std::move(ranges)};
      auto target = slice(ctx, s);
      copy_strided(x, as_cpu(target));
    }
    start += n;
  }
  return out;
}

}  // namespace ember::cpu
