// Element-wise launchers: operands are passed as strided views of the output's shape
// (broadcast dims with stride 0), collapsed to as few dims as possible; when every operand
// walks the output linearly the contiguous kernel variant runs.
#include <cmath>
#include <string>

#include "cuda/kernels/kernels.hpp"

namespace ember::cuda {
namespace {

// Launches an element-wise kernel over out_shape with inputs xs (null: unused).
void run_elementwise(CudaContext& ctx, const Shape& out_shape,
                     const std::vector<const CudaTensor*>& xs, const CudaTensor& out, double p0,
                     double p1, const char* op, bool checked,
                     KernelSource (*gen)(const void*, bool), const void* gen_arg) {
  Space sp;
  for (std::size_t d : out_shape) sp.shape.push_back(static_cast<std::int64_t>(d));
  for (const CudaTensor* x : xs) sp.strides.push_back(broadcast_strides(*x, out_shape));
  sp.collapse();
  Geo g = sp.geo(op);
  if (g.n == 0) return;
  const KernelSource k = gen(gen_arg, sp.contiguous());
  void* y = out.data();
  const void* p[3] = {nullptr, nullptr, nullptr};
  for (std::size_t i = 0; i < xs.size(); ++i) p[i] = xs[i]->data();
  int* err = ctx.error_flag();
  ctx.launch(k, g.n, {&g, &y, &p[0], &p[1], &p[2], &p0, &p1, &err}, op, checked);
}

// The output of an element-wise op: operand x's own node when reusable (Note [In-place
// reuse] in context.hpp), else a fresh tensor.
TensorPtr output_for(CudaContext& ctx, const ir::Handle& x, const Shape& shape, DType dtype) {
  if (reusable(x, shape, dtype)) return std::static_pointer_cast<CudaTensor>(x);
  return ctx.empty(shape, dtype);
}

}  // namespace

ir::Handle unary(CudaContext& ctx, ir::Unary& op) {
  const auto& x = as_cuda(op.x);
  double p0 = op.p0, p1 = op.p1;
  auto out = output_for(ctx, op.x, x.shape(), op.out);
  struct A {
    ir::UnaryFn fn;
    DType dt;
  } a{op.fn, x.dtype()};
  run_elementwise(
      ctx, x.shape(), {&x}, *out, p0, p1, ir::name(op.fn), false,
      [](const void* v, bool c) {
        const auto* a = static_cast<const A*>(v);
        return gen_unary(a->fn, a->dt, c);
      },
      &a);
  return out;
}

ir::Handle binary(CudaContext& ctx, ir::Binary& op) {
  const auto& a = as_cuda(op.lhs);
  const auto& b = as_cuda(op.rhs);
  auto out = reusable(op.lhs, op.out_shape, op.out) ? output_for(ctx, op.lhs, op.out_shape, op.out)
                                                    : output_for(ctx, op.rhs, op.out_shape, op.out);
  struct A {
    ir::BinaryFn fn;
    DType dt;
  } arg{op.fn, a.dtype()};
  const bool checked =
      is_int(a.dtype()) && (op.fn == ir::BinaryFn::Div || op.fn == ir::BinaryFn::Rem);
  run_elementwise(
      ctx, op.out_shape, {&a, &b}, *out, 0, 0, ir::name(op.fn), checked,
      [](const void* v, bool c) {
        const auto* a = static_cast<const A*>(v);
        return gen_binary(a->fn, a->dt, c);
      },
      &arg);
  return out;
}

ir::Handle where(CudaContext& ctx, ir::Where& op) {
  const auto& c = as_cuda(op.cond);
  const auto& a = as_cuda(op.a);
  const auto& b = as_cuda(op.b);
  auto out = ctx.empty(op.out_shape, a.dtype());
  DType dt = a.dtype();
  run_elementwise(
      ctx, op.out_shape, {&c, &a, &b}, *out, 0, 0, "where", false,
      [](const void* v, bool cont) { return gen_where(*static_cast<const DType*>(v), cont); }, &dt);
  return out;
}

ir::Handle cast(CudaContext& ctx, ir::Cast& op) {
  const auto& x = as_cuda(op.x);
  auto out = ctx.empty(x.shape(), op.to);
  struct A {
    DType from, to;
  } a{x.dtype(), op.to};
  run_elementwise(
      ctx, x.shape(), {&x}, *out, 0, 0, "cast", false,
      [](const void* v, bool c) {
        const auto* a = static_cast<const A*>(v);
        return gen_cast(a->from, a->to, c);
      },
      &a);
  return out;
}

}  // namespace ember::cuda
