// Views (reshape, permute, expand, slice, flip) as new strides over the same buffer, and
// the copies that write into views (slice_assign, cat).
#include <vector>

#include "cpu/kernels/kernels.hpp"
#include "ember/backend/strided_tensor.hpp"

namespace ember::cpu {

// The views are backend/strided_tensor.hpp's, shared with every buffer-based backend.
ir::Handle run(CpuContext& ctx, ir::Reshape& op) {
  return backend::reshape<Buffer>(op, [&](const ir::Handle& x) { return contiguous(ctx, x); });
}
ir::Handle run(CpuContext&, ir::Permute& op) { return backend::permute<Buffer>(op); }
ir::Handle run(CpuContext&, ir::Expand& op) { return backend::expand<Buffer>(op); }
ir::Handle run(CpuContext&, ir::Slice& op) { return backend::slice<Buffer>(op); }
ir::Handle run(CpuContext&, ir::Flip& op) { return backend::flip<Buffer>(op); }

ir::Handle run(CpuContext& ctx, ir::SliceAssign& op) {
  auto out = writable_copy(ctx, op.x);
  ir::Slice s{out, op.ranges};
  auto target = run(ctx, s);
  copy_strided(as_cpu(op.value), as_cpu(target));
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Cat& op) {
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
      auto target = run(ctx, s);
      copy_strided(x, as_cpu(target));
    }
    start += n;
  }
  return out;
}

}  // namespace ember::cpu
