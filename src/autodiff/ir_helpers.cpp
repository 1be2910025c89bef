// IR builders for derivative rules (see ir_helpers.hpp).
#include "autodiff/ir_helpers.hpp"

#include "ember/base/error.hpp"
#include "ember/ir/infer.hpp"
#include "ember/ir/scalar_table.hpp"

namespace ember::autodiff::h {

using ir::BinaryFn;

namespace {
Shape broadcast(const Shape& x, const Shape& y) {
  EMBER_ASSERT(x.rank() == y.rank());
  return ir::broadcast_shapes(x, y, "autodiff");
}
}  // namespace

Handle run(Backend& b, ir::Op op) {
  auto outs = b.execute(std::move(op));
  EMBER_ASSERT(!outs.empty());
  return std::move(outs[0]);
}

Handle unary(Backend& b, ir::UnaryFn fn, Handle x, double p0, double p1) {
  const DType dt = ir::sx::result_dtype(fn, x->dtype());
  return run(b, ir::Unary{fn, std::move(x), dt, p0, p1});
}

Handle binary(Backend& b, BinaryFn fn, Handle x, Handle y) {
  Shape s = broadcast(x->shape(), y->shape());
  const DType dt = ir::sx::result_dtype(fn, x->dtype());
  return run(b, ir::Binary{fn, std::move(x), std::move(y), std::move(s), dt});
}
Handle add(Backend& b, Handle x, Handle y) {
  return binary(b, BinaryFn::Add, std::move(x), std::move(y));
}
Handle sub(Backend& b, Handle x, Handle y) {
  return binary(b, BinaryFn::Sub, std::move(x), std::move(y));
}
Handle mul(Backend& b, Handle x, Handle y) {
  return binary(b, BinaryFn::Mul, std::move(x), std::move(y));
}
Handle div(Backend& b, Handle x, Handle y) {
  return binary(b, BinaryFn::Div, std::move(x), std::move(y));
}
Handle neg(Backend& b, Handle x) { return unary(b, ir::UnaryFn::Neg, std::move(x)); }

Handle scalar(Backend& b, double v, DType dtype, std::size_t rank) {
  return full(b, Shape(std::vector<std::size_t>(rank, 1)), v, dtype);
}
Handle full(Backend& b, const Shape& shape, double v, DType dtype) {
  return run(b, ir::Fill{shape, dtype, v, static_cast<std::int64_t>(v)});
}
Handle zeros(Backend& b, const Shape& shape, DType dtype) { return full(b, shape, 0.0, dtype); }

Handle add_scalar(Backend& b, Handle x, double s) {
  auto c = scalar(b, s, x->dtype(), x->shape().rank());
  return add(b, std::move(x), std::move(c));
}
Handle mul_scalar(Backend& b, Handle x, double s) {
  auto c = scalar(b, s, x->dtype(), x->shape().rank());
  return mul(b, std::move(x), std::move(c));
}
Handle rsub_scalar(Backend& b, double s, Handle x) {
  auto c = scalar(b, s, x->dtype(), x->shape().rank());
  return sub(b, std::move(c), std::move(x));
}
Handle compare_scalar(Backend& b, BinaryFn fn, Handle x, double s) {
  auto c = scalar(b, s, x->dtype(), x->shape().rank());
  return binary(b, fn, std::move(x), std::move(c));
}

Handle where(Backend& b, Handle cond, Handle x, Handle y) {
  Shape s = broadcast(broadcast(cond->shape(), x->shape()), y->shape());
  return run(b, ir::Where{std::move(cond), std::move(x), std::move(y), std::move(s)});
}
Handle mask(Backend& b, Handle cond, Handle x) {
  auto z = scalar(b, 0.0, x->dtype(), x->shape().rank());
  return where(b, std::move(cond), std::move(x), std::move(z));
}
Handle cast(Backend& b, Handle x, DType to) {
  if (x->dtype() == to) return x;
  return run(b, ir::Cast{std::move(x), to});
}

Handle reduce(Backend& b, ir::ReduceFn fn, Handle x, std::size_t dim) {
  const DType dt = x->dtype();
  return run(b, ir::Reduce{fn, std::move(x), dim, dt});
}
Handle sum_to(Backend& b, Handle x, const Shape& shape) {
  EMBER_ASSERT(x->shape().rank() == shape.rank());
  for (std::size_t d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1 && x->shape()[d] != 1) x = reduce(b, ir::ReduceFn::Sum, std::move(x), d);
  }
  return x;
}
Handle scan(Backend& b, ir::ScanFn fn, Handle x, std::size_t dim) {
  return run(b, ir::Scan{fn, std::move(x), dim});
}
Handle reverse_cumsum(Backend& b, Handle x, std::size_t dim) {
  auto f = flip(b, std::move(x), {dim});
  return flip(b, scan(b, ir::ScanFn::Sum, std::move(f), dim), {dim});
}

Handle reshape(Backend& b, Handle x, const Shape& shape) {
  if (x->shape() == shape) return x;
  return run(b, ir::Reshape{std::move(x), shape});
}
Handle permute(Backend& b, Handle x, std::vector<std::size_t> axes) {
  return run(b, ir::Permute{std::move(x), std::move(axes)});
}
Handle transpose_last(Backend& b, Handle x) {
  const std::size_t r = x->shape().rank();
  std::vector<std::size_t> axes(r);
  for (std::size_t i = 0; i < r; ++i) axes[i] = i;
  std::swap(axes[r - 1], axes[r - 2]);
  return permute(b, std::move(x), std::move(axes));
}
Handle expand(Backend& b, Handle x, const Shape& shape) {
  if (x->shape() == shape) return x;
  return run(b, ir::Expand{std::move(x), shape});
}
Handle flip(Backend& b, Handle x, std::vector<std::size_t> axes) {
  return run(b, ir::Flip{std::move(x), std::move(axes)});
}
Handle slice(Backend& b, Handle x, std::vector<ir::SliceRange> ranges) {
  return run(b, ir::Slice{std::move(x), std::move(ranges)});
}
Handle slice_assign(Backend& b, Handle x, std::vector<ir::SliceRange> ranges, Handle value) {
  return run(b, ir::SliceAssign{std::move(x), std::move(ranges), std::move(value)});
}
Handle matmul(Backend& b, Handle x, Handle y) {
  EMBER_ASSERT(x->shape().rank() == y->shape().rank());
  Shape out = ir::matmul_shape(x->shape(), y->shape(), "autodiff");
  return run(b, ir::Matmul{std::move(x), std::move(y), std::move(out)});
}
Handle gather(Backend& b, Handle x, std::size_t dim, Handle index) {
  return run(b, ir::Gather{std::move(x), dim, std::move(index)});
}
Handle scatter(Backend& b, Handle x, std::size_t dim, Handle index, Handle src, bool add) {
  return run(b, ir::Scatter{std::move(x), dim, std::move(index), std::move(src), add});
}
Handle index_select(Backend& b, Handle x, std::size_t dim, Handle index) {
  return run(b, ir::IndexSelect{std::move(x), dim, std::move(index)});
}
Handle index_add(Backend& b, Handle x, std::size_t dim, Handle index, Handle src) {
  return run(b, ir::IndexAdd{std::move(x), dim, std::move(index), std::move(src)});
}

}  // namespace ember::autodiff::h
