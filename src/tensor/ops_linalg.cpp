// Linear algebra: the SVD (ir::Svd, run on the registry's fallback where a backend has no
// kernel), and composites: cross, diag, diag_embed, trace and the vector and matrix norms,
// written with slices, element-wise ops, reductions and the SVD, so they run on every
// backend and their gradients follow from those ops'.
#include <cmath>
#include <string>
#include <vector>

#include "tensor/op_support.hpp"

namespace ember::ops {

using ir::BinaryFn;
using ir::ReduceFn;
using ir::UnaryFn;

DynTensor cross(DynTensor a, DynTensor b, std::int64_t dim) {
  detail::check_same_device(a, b, "cross");
  detail::check_kind(a, {Kind::Float, Kind::Int}, "cross");
  EMBER_CHECK(a.dtype() == b.dtype(), detail::describe("cross: dtypes differ", {&a, &b}));
  const Shape out = broadcast_shapes(a.shape(), b.shape(), "cross");
  const std::size_t d = normalize_dim(dim, out.rank(), "cross");
  // Both operands have extent 3 along dim (counted from the right), as torch.linalg.cross.
  const std::size_t from_end = out.rank() - d;
  const auto extent = [&](const DynTensor& t) {
    return t.rank() >= from_end ? t.shape()[t.rank() - from_end] : std::size_t{0};
  };
  EMBER_CHECK(extent(a) == 3 && extent(b) == 3,
              detail::describe("cross: both operands need extent 3 along dim " + std::to_string(d) +
                                   " of the broadcast shape, got",
                               {&a, &b}));
  a = expand(std::move(a), out);
  b = expand(std::move(b), out);
  const auto di = static_cast<std::int64_t>(d);
  const auto c = [&](const DynTensor& t, std::int64_t i) { return narrow(t, di, i, 1); };
  const auto term = [&](std::int64_t i, std::int64_t j) {
    return binary(BinaryFn::Sub, binary(BinaryFn::Mul, c(a, i), c(b, j)),
                  binary(BinaryFn::Mul, c(a, j), c(b, i)));
  };
  return cat({term(1, 2), term(2, 0), term(0, 1)}, di);
}

namespace {
// The flat positions of the offset-th diagonal of a [rows, cols] row-major matrix: start,
// count and step (cols + 1).
struct Diagonal {
  std::int64_t start = 0;
  std::size_t count = 0;
  std::int64_t step = 1;
  Range range() const {
    return Range(start, start + static_cast<std::int64_t>(count - 1) * step + 1, step);
  }
};
Diagonal diagonal_of(std::size_t rows, std::size_t cols, std::int64_t offset) {
  const auto r = static_cast<std::int64_t>(rows), c = static_cast<std::int64_t>(cols);
  Diagonal dg;
  dg.step = c + 1;
  const std::int64_t n = offset >= 0 ? std::min(r, c - offset) : std::min(r + offset, c);
  dg.count = n > 0 ? static_cast<std::size_t>(n) : 0;
  dg.start = offset >= 0 ? offset : -offset * c;
  return dg;
}
std::size_t embedded_extent(std::size_t n, std::int64_t offset, const char* op) {
  EMBER_CHECK(offset > -(std::int64_t{1} << 40) && offset < (std::int64_t{1} << 40),
              std::string(op) + ": offset " + std::to_string(offset) + " is out of range");
  return n + static_cast<std::size_t>(offset < 0 ? -offset : offset);
}
}  // namespace

DynTensor diag(DynTensor x, std::int64_t diagonal) {
  EMBER_CHECK(x.rank() == 1 || x.rank() == 2,
              "diag: expected a tensor of rank 1 or 2, got shape " + x.shape().to_string());
  if (x.rank() == 2) {
    const std::size_t rows = x.shape()[0], cols = x.shape()[1];
    const Diagonal dg = diagonal_of(rows, cols, diagonal);
    if (dg.count == 0) return detail::fill(Shape{0}, 0.0, x.dtype(), x.device());
    return slice(reshape(std::move(x), Shape{rows * cols}), {dg.range()});
  }
  return diag_embed(std::move(x), diagonal);
}

DynTensor diag_embed(DynTensor x, std::int64_t offset) {
  EMBER_CHECK(x.rank() >= 1,
              "diag_embed: expected a tensor of rank >= 1, got shape " + x.shape().to_string());
  const std::size_t n = x.shape()[x.rank() - 1];
  const std::size_t m = embedded_extent(n, offset, "diag_embed");
  std::vector<std::size_t> dims = x.shape().dims();
  dims.back() = m;
  dims.push_back(m);
  detail::check_size(Shape(dims), x.dtype(), "diag_embed", x.device());
  std::vector<std::size_t> flat = x.shape().dims();
  flat.back() = m * m;
  auto out = detail::fill(Shape(flat), 0.0, x.dtype(), x.device());
  if (n > 0) {
    std::vector<Range> ranges(x.rank() - 1, Range(0, std::nullopt));
    ranges.push_back(diagonal_of(m, m, offset).range());
    out = slice_assign(std::move(out), ranges, std::move(x));
  }
  return reshape(std::move(out), Shape(std::move(dims)));
}

DynTensor trace(DynTensor x) {
  EMBER_CHECK(x.rank() == 2,
              "trace: expected a tensor of rank 2, got shape " + x.shape().to_string());
  detail::check_kind(x, {Kind::Float, Kind::Int}, "trace");
  return reduce_all(ReduceFn::Sum, diag(std::move(x), 0));
}

namespace {
// The ord-norm over dims (normalised, non-empty), kept.
DynTensor norm_over(DynTensor x, double ord, const std::vector<std::int64_t>& dims) {
  detail::check_kind(x, {Kind::Float}, "vector_norm");
  EMBER_CHECK(!std::isnan(ord), "vector_norm: ord is NaN");
  std::vector<bool> seen(x.rank(), false);
  for (std::int64_t d : dims) {
    const std::size_t n = normalize_dim(d, x.rank(), "vector_norm");
    EMBER_CHECK(!seen[n], "vector_norm: dim " + std::to_string(n) + " is given twice");
    seen[n] = true;
  }
  if (std::isinf(ord)) {
    return reduce_dims(ord > 0 ? ReduceFn::Max : ReduceFn::Min, unary(UnaryFn::Abs, std::move(x)),
                       dims);
  }
  if (ord == 0) {
    const DType dt = x.dtype();
    return reduce_dims(ReduceFn::Sum, cast(binary_scalar(BinaryFn::Ne, std::move(x), 0.0), dt),
                       dims);
  }
  if (ord == 1) return reduce_dims(ReduceFn::Sum, unary(UnaryFn::Abs, std::move(x)), dims);
  if (ord == 2) {
    return unary(UnaryFn::Sqrt,
                 reduce_dims(ReduceFn::Sum, unary(UnaryFn::Square, std::move(x)), dims));
  }
  auto powered = unary(UnaryFn::PowScalar, unary(UnaryFn::Abs, std::move(x)), ord);
  return unary(UnaryFn::PowScalar, reduce_dims(ReduceFn::Sum, std::move(powered), dims), 1.0 / ord);
}
}  // namespace

DynTensor vector_norm(DynTensor x, double ord) {
  const std::size_t n = x.num_elements();
  return norm_over(reshape(std::move(x), Shape{n}), ord, {0});
}

DynTensor vector_norm(DynTensor x, double ord, const std::vector<std::int64_t>& dims) {
  EMBER_CHECK(!dims.empty(),
              "vector_norm: no dims given (vector_norm(x, ord) takes every element)");
  return norm_over(std::move(x), ord, dims);
}

SvdResult svd(DynTensor x) {
  detail::check_kind(x, {Kind::Float}, "svd");
  EMBER_CHECK(x.rank() >= 2,
              "svd: expected a tensor of rank >= 2, got shape " + x.shape().to_string());
  const Device dev = x.device();
  auto outs = detail::run_all(dev, ir::Svd{std::move(x).handle()});
  return {std::move(outs[1]), std::move(outs[0]), std::move(outs[2])};
}

DynTensor svdvals(DynTensor x) { return svd(std::move(x)).s; }

DynTensor matrix_norm(DynTensor x, MatrixNorm ord) {
  detail::check_kind(x, {Kind::Float}, "matrix_norm");
  EMBER_CHECK(x.rank() >= 2,
              "matrix_norm: expected a tensor of rank >= 2, got shape " + x.shape().to_string());
  switch (ord) {
    case MatrixNorm::Frobenius:
      return norm_over(std::move(x), 2.0, {-2, -1});
    case MatrixNorm::One:
    case MatrixNorm::NegOne: {
      auto cols = reduce(ReduceFn::Sum, unary(UnaryFn::Abs, std::move(x)), -2);
      return reduce(ord == MatrixNorm::One ? ReduceFn::Max : ReduceFn::Min, std::move(cols), -1);
    }
    case MatrixNorm::Inf:
    case MatrixNorm::NegInf: {
      auto rows = reduce(ReduceFn::Sum, unary(UnaryFn::Abs, std::move(x)), -1);
      return reduce(ord == MatrixNorm::Inf ? ReduceFn::Max : ReduceFn::Min, std::move(rows), -2);
    }
    case MatrixNorm::Two:
    case MatrixNorm::NegTwo:
    case MatrixNorm::Nuclear: {
      const std::size_t r = x.rank();
      EMBER_CHECK(x.shape()[r - 2] > 0 && x.shape()[r - 1] > 0,
                  "matrix_norm: the 2, -2 and nuclear norms need non-empty matrices, got shape " +
                      x.shape().to_string());
      const ReduceFn fn = ord == MatrixNorm::Two      ? ReduceFn::Max
                          : ord == MatrixNorm::NegTwo ? ReduceFn::Min
                                                      : ReduceFn::Sum;
      // [..., k] -> [..., 1] -> [..., 1, 1]: the norm keeps both matrix dims.
      auto v = reduce(fn, svdvals(std::move(x)), -1);
      return unsqueeze(std::move(v), -1);
    }
  }
  fail("matrix_norm: unknown norm");
}

}  // namespace ember::ops
