// Element-wise launchers: operands are passed as strided views of the output's shape
// (broadcast dims with stride 0), collapsed to as few dims as possible; when every operand
// walks the output linearly the contiguous kernel variant runs, moving vector_width()
// elements per thread and iteration (Note [Vector loads] in codegen/printer.cpp).
#include <algorithm>
#include <cmath>
#include <string>

#include "cuda/kernels/kernels.hpp"

namespace ember::cuda {
namespace {

// Launches the element-wise kernel spec(contiguous, scalar_mask) over out_shape with inputs xs.
template <class Spec>
void run_elementwise(CudaContext& ctx, const Shape& out_shape,
                     std::initializer_list<const CudaTensor*> xs, const CudaTensor& out, double p0,
                     double p1, const char* op, bool checked, Spec&& spec) {
  std::size_t widest = size_of(out.dtype());
  for (const CudaTensor* x : xs) widest = std::max(widest, size_of(x->dtype()));
  // Each operand walks the output linearly or is one broadcast element (backend::walk_of),
  // not all of them broadcast: the contiguous kernel with the broadcast ones as scalars,
  // with no iteration space built (what collapsing one would give: one dim, strides 1 / 0).
  unsigned scalar_mask = 0;
  bool simple = true;
  {
    unsigned k = 0;
    for (const CudaTensor* x : xs) {
      const backend::Walk w = backend::walk_of(x->shape(), x->strides(), out_shape);
      simple = simple && w != backend::Walk::Strided;
      if (w == backend::Walk::Scalar) scalar_mask |= 1u << k;
      ++k;
    }
    simple = simple && scalar_mask != (1u << xs.size()) - 1;
  }
  Geo g;
  bool contiguous = false;
  if (simple) {
    g.rank = 1;
    g.n = static_cast<std::int64_t>(out_shape.num_elements());
    g.shape[0] = g.n;
    for (std::size_t k = 0; k < xs.size(); ++k) g.st[k][0] = (scalar_mask >> k & 1u) ? 0 : 1;
    contiguous = true;
  } else {
    scalar_mask = 0;
    Space sp;
    for (std::size_t d : out_shape) sp.shape.push_back(static_cast<std::int64_t>(d));
    for (const CudaTensor* x : xs) sp.strides.push_back(broadcast_strides(*x, out_shape));
    sp.collapse();
    g = sp.geo(op);
    contiguous = sp.contiguous();
    // One collapsed dim where some operands are a single broadcast element (stride 0) and
    // the others walk the output: the contiguous kernel with those operands as scalars.
    if (!contiguous && sp.shape.size() == 1) {
      bool linear = true;
      for (std::size_t k = 0; k < sp.strides.size(); ++k) {
        if (sp.strides[k][0] == 0) {
          scalar_mask |= 1u << k;
        } else {
          linear = linear && sp.strides[k][0] == 1;
        }
      }
      contiguous = linear && scalar_mask != (1u << sp.strides.size()) - 1;
      if (!contiguous) scalar_mask = 0;
    }
  }
  if (g.n == 0) return;
  void* y = out.data();
  const void* p[3] = {nullptr, nullptr, nullptr};
  std::size_t i = 0;
  for (const CudaTensor* x : xs) p[i++] = x->data();
  int* err = ctx.error_flag();
  const std::int64_t threads =
      contiguous ? (g.n + vector_width(widest) - 1) / vector_width(widest) : g.n;
  ctx.launch(spec(contiguous, scalar_mask), threads, {&g, &y, &p[0], &p[1], &p[2], &p0, &p1, &err},
             op, checked);
}

// The output of an element-wise op: the first of `candidates` that is reusable (Note
// [In-place reuse] in ember/backend/strided_tensor.hpp), else a fresh tensor.
TensorPtr output_for(CudaContext& ctx, std::initializer_list<const ir::Handle*> candidates,
                     const Shape& shape, DType dtype) {
  for (const ir::Handle* x : candidates) {
    if (reusable(*x, shape, dtype)) return std::static_pointer_cast<CudaTensor>(*x);
  }
  return ctx.empty(shape, dtype);
}

}  // namespace

ir::Handle run(CudaContext& ctx, ir::Unary& op) {
  const auto& x = as_cuda(op.x);
  auto out = output_for(ctx, {&op.x}, x.shape(), op.out);
  const auto fn = op.fn;
  const DType dt = x.dtype();
  run_elementwise(ctx, x.shape(), {&x}, *out, op.p0, op.p1, ir::name(fn), false,
                  [&](bool c, unsigned) { return UnaryKernel(fn, dt, c); });
  return out;
}

ir::Handle run(CudaContext& ctx, ir::Binary& op) {
  const auto& a = as_cuda(op.lhs);
  const auto& b = as_cuda(op.rhs);
  auto out = output_for(ctx, {&op.lhs, &op.rhs}, op.out_shape, op.out);
  const auto fn = op.fn;
  const DType dt = a.dtype();
  const bool checked = is_int(dt) && (fn == ir::BinaryFn::Div || fn == ir::BinaryFn::Rem);
  run_elementwise(ctx, op.out_shape, {&a, &b}, *out, 0, 0, ir::name(fn), checked,
                  [&](bool c, unsigned m) { return BinaryKernel(fn, dt, c, m); });
  return out;
}

ir::Handle run(CudaContext& ctx, ir::Where& op) {
  const auto& c = as_cuda(op.cond);
  const auto& a = as_cuda(op.a);
  const auto& b = as_cuda(op.b);
  auto out = ctx.empty(op.out_shape, a.dtype());
  const DType dt = a.dtype();
  run_elementwise(ctx, op.out_shape, {&c, &a, &b}, *out, 0, 0, "where", false,
                  [&](bool c, unsigned m) { return WhereKernel(size_of(dt), c, m); });
  return out;
}

ir::Handle run(CudaContext& ctx, ir::Cast& op) {
  const auto& x = as_cuda(op.x);
  auto out = ctx.empty(x.shape(), op.to);
  const DType from = x.dtype(), to = op.to;
  run_elementwise(ctx, x.shape(), {&x}, *out, 0, 0, "cast", false,
                  [&](bool c, unsigned) { return CastKernel(from, to, c); });
  return out;
}

}  // namespace ember::cuda
