// Views (reshape, permute, expand, slice, flip) as new strides over the same device buffer,
// as on the Cpu, and the strided copies that write into views (slice_assign, cat).
#include <vector>

#include "cuda/kernels/kernels.hpp"
#include "ember/backend/strided_tensor.hpp"

namespace ember::cuda {
// The views are backend/strided_tensor.hpp's, shared with every buffer-based backend.
ir::Handle run(CudaContext& ctx, ir::Reshape& op) {
  return backend::reshape<DeviceBuffer>(op, [&](const ir::Handle& x) { return ctx.contiguous(x); });
}
ir::Handle run(CudaContext&, ir::Permute& op) { return backend::permute<DeviceBuffer>(op); }
ir::Handle run(CudaContext&, ir::Expand& op) { return backend::expand<DeviceBuffer>(op); }
ir::Handle run(CudaContext&, ir::Slice& op) { return backend::slice<DeviceBuffer>(op); }
ir::Handle run(CudaContext&, ir::Flip& op) { return backend::flip<DeviceBuffer>(op); }

ir::Handle run(CudaContext& ctx, ir::SliceAssign& op) {
  const auto& x = as_cuda(op.x);
  auto out = ctx.empty(x.shape(), x.dtype());
  ctx.copy(x, *out);
  ir::Slice s{out, op.ranges};
  auto target = run(ctx, s);
  ctx.copy(as_cuda(op.value), as_cuda(target));
  return out;
}

ir::Handle run(CudaContext& ctx, ir::Cat& op) {
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
      auto target = run(ctx, s);
      ctx.copy(x, as_cuda(target));
    }
    start += n;
  }
  return out;
}

}  // namespace ember::cuda
