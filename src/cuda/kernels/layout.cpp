// Views (reshape, permute, expand, slice, flip) as new strides over the same device buffer,
// as on the Cpu, and the strided copies that write into views (slice_assign, cat).
#include <vector>

#include "cuda/kernels/kernels.hpp"

namespace ember::cuda {
namespace {

TensorPtr view(const CudaTensor& x, Shape shape, Strides strides, std::int64_t offset) {
  return std::make_shared<CudaTensor>(x.buffer(), std::move(shape), x.dtype(), std::move(strides),
                                      offset);
}

// Strides viewing x with `shape` without a copy, when each run of new dims maps onto a run
// of old dims that is contiguous within itself.
bool reshape_strides(const CudaTensor& x, const Shape& shape, Strides& out) {
  std::vector<std::size_t> od;
  Strides os;
  for (std::size_t i = 0; i < x.shape().rank(); ++i) {
    if (x.shape()[i] != 1) {
      od.push_back(x.shape()[i]);
      os.push_back(x.strides()[i]);
    }
  }
  out.assign(shape.rank(), 1);
  std::size_t oi = 0, ni = 0;
  while (ni < shape.rank()) {
    if (shape[ni] == 1) {
      ++ni;
      continue;
    }
    if (oi >= od.size()) return false;
    std::size_t op = od[oi], np = shape[ni];
    std::size_t oj = oi + 1, nj = ni + 1;
    while (op != np) {
      if (op < np) {
        if (oj >= od.size()) return false;
        op *= od[oj++];
      } else {
        while (nj < shape.rank() && shape[nj] == 1) ++nj;
        if (nj >= shape.rank()) return false;
        np *= shape[nj++];
      }
    }
    for (std::size_t k = oi; k + 1 < oj; ++k) {
      if (os[k] != os[k + 1] * static_cast<std::int64_t>(od[k + 1])) return false;
    }
    std::int64_t st = os[oj - 1];
    for (std::size_t k = nj; k-- > ni;) {
      out[k] = st;
      st *= static_cast<std::int64_t>(shape[k]);
    }
    oi = oj;
    ni = nj;
  }
  return oi == od.size();
}

}  // namespace

ir::Handle reshape(CudaContext& ctx, ir::Reshape& op) {
  const auto& x = as_cuda(op.x);
  Strides st;
  if (x.shape().num_elements() > 0 && reshape_strides(x, op.shape, st)) {
    return view(x, op.shape, std::move(st), x.offset());
  }
  auto c = ctx.contiguous(op.x);
  return view(*c, op.shape, contiguous_strides(op.shape), c->offset());
}

ir::Handle permute(CudaContext&, ir::Permute& op) {
  const auto& x = as_cuda(op.x);
  std::vector<std::size_t> dims(op.axes.size());
  Strides st(op.axes.size());
  for (std::size_t i = 0; i < op.axes.size(); ++i) {
    dims[i] = x.shape()[op.axes[i]];
    st[i] = x.strides()[op.axes[i]];
  }
  return view(x, Shape(std::move(dims)), std::move(st), x.offset());
}

ir::Handle expand(CudaContext&, ir::Expand& op) {
  const auto& x = as_cuda(op.x);
  Strides st = x.strides();
  for (std::size_t i = 0; i < st.size(); ++i) {
    if (x.shape()[i] != op.shape[i]) st[i] = 0;
  }
  return view(x, op.shape, std::move(st), x.offset());
}

ir::Handle slice(CudaContext&, ir::Slice& op) {
  const auto& x = as_cuda(op.x);
  std::vector<std::size_t> dims(x.shape().rank());
  Strides st(dims.size());
  std::int64_t off = x.offset();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto& r = op.ranges[i];
    dims[i] = (r.end - r.start + r.step - 1) / r.step;
    if (dims[i] > 0) off += static_cast<std::int64_t>(r.start) * x.strides()[i];
    st[i] = x.strides()[i] * static_cast<std::int64_t>(r.step);
  }
  return view(x, Shape(std::move(dims)), std::move(st), off);
}

ir::Handle flip(CudaContext&, ir::Flip& op) {
  const auto& x = as_cuda(op.x);
  Strides st = x.strides();
  std::int64_t off = x.offset();
  for (std::size_t a : op.axes) {
    if (x.shape()[a] > 0) off += static_cast<std::int64_t>(x.shape()[a] - 1) * st[a];
    st[a] = -st[a];
  }
  return view(x, x.shape(), std::move(st), off);
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
