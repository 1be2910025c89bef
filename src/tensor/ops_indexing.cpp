// Indexing (select, gather, scatter, one_hot, nonzero) and matmul.
#include <cmath>

#include "ember/tensor/gradients.hpp"
#include "tensor/op_support.hpp"

namespace ember::ops {

using detail::run;

namespace {
void check_index(const DynTensor& x, const DynTensor& idx, const char* op) {
  detail::check_same_device(x, idx, op);
  detail::check_kind(idx, {Kind::Int}, op);
}
DynTensor as_i64(DynTensor idx) { return cast(std::move(idx), DType::I64); }
}  // namespace

DynTensor select(DynTensor x, std::int64_t dim, DynTensor indices) {
  check_index(x, indices, "select");
  const std::size_t d = normalize_dim(dim, x.rank(), "select");
  EMBER_CHECK(indices.rank() == 1,
              "select: indices must have rank 1, got shape " + indices.shape().to_string());
  const Device dev = x.device();
  return run(dev, ir::IndexSelect{std::move(x).handle(), d, as_i64(std::move(indices)).handle()});
}

DynTensor select_assign(DynTensor x, std::int64_t dim, DynTensor indices, DynTensor values) {
  check_index(x, indices, "select_assign");
  detail::check_same_device(x, values, "select_assign");
  const std::size_t d = normalize_dim(dim, x.rank(), "select_assign");
  EMBER_CHECK(indices.rank() == 1,
              "select_assign: indices must have rank 1, got shape " + indices.shape().to_string());
  auto expect = x.shape();
  expect[d] = indices.shape()[0];
  EMBER_CHECK(values.shape() == expect && values.dtype() == x.dtype(),
              detail::describe("select_assign: values must have shape " + expect.to_string() +
                                   " and the tensor's dtype, got",
                               {&x, &values}));
  const Device dev = x.device();
  return run(dev, ir::IndexAdd{std::move(x).handle(), d, as_i64(std::move(indices)).handle(),
                               std::move(values).handle()});
}

DynTensor gather(DynTensor x, std::int64_t dim, DynTensor indices) {
  check_index(x, indices, "gather");
  const std::size_t d = normalize_dim(dim, x.rank(), "gather");
  bool ok = indices.rank() == x.rank();
  for (std::size_t i = 0; ok && i < x.rank(); ++i)
    ok = i == d || indices.shape()[i] <= x.shape()[i];
  EMBER_CHECK(ok, detail::describe(("gather: indices must have the tensor's rank and no larger "
                                    "extents outside dim " +
                                    std::to_string(d) + ", got")
                                       .c_str(),
                                   {&x, &indices}));
  const Device dev = x.device();
  return run(dev, ir::Gather{std::move(x).handle(), d, as_i64(std::move(indices)).handle()});
}

namespace {
DynTensor scatter_impl(DynTensor x, std::int64_t dim, DynTensor indices, DynTensor values, bool add,
                       const char* op) {
  check_index(x, indices, op);
  detail::check_same_device(x, values, op);
  const std::size_t d = normalize_dim(dim, x.rank(), op);
  bool ok = indices.shape() == values.shape() && indices.rank() == x.rank() &&
            values.dtype() == x.dtype();
  for (std::size_t i = 0; ok && i < x.rank(); ++i)
    ok = i == d || indices.shape()[i] <= x.shape()[i];
  EMBER_CHECK(ok, detail::describe((std::string(op) +
                                    ": indices and values must share a shape of the tensor's rank "
                                    "(no larger outside dim " +
                                    std::to_string(d) + ") and values the tensor's dtype; got")
                                       .c_str(),
                                   {&x, &indices, &values}));
  const Device dev = x.device();
  return run(dev, ir::Scatter{std::move(x).handle(), d, as_i64(std::move(indices)).handle(),
                              std::move(values).handle(), add});
}
}  // namespace

DynTensor scatter(DynTensor x, std::int64_t dim, DynTensor indices, DynTensor values) {
  return scatter_impl(std::move(x), dim, std::move(indices), std::move(values), false, "scatter");
}
DynTensor scatter_add(DynTensor x, std::int64_t dim, DynTensor indices, DynTensor values) {
  return scatter_impl(std::move(x), dim, std::move(indices), std::move(values), true,
                      "scatter_add");
}

DynTensor one_hot(DynTensor indices, std::size_t num_classes, DType dtype) {
  detail::check_kind(indices, {Kind::Int}, "one_hot");
  EMBER_CHECK(num_classes > 0, "one_hot: num_classes must be > 0");
  {
    auto dims = indices.shape().dims();
    dims.push_back(num_classes);
    detail::check_size(Shape(std::move(dims)), dtype, "one_hot", indices.device());
  }
  if (indices.num_elements() > 0) {
    auto lo = reduce_all(ir::ReduceFn::Min, indices).to_data().get_f64(0);
    auto hi = reduce_all(ir::ReduceFn::Max, indices).to_data().get_f64(0);
    EMBER_CHECK(lo >= 0 && hi < static_cast<double>(num_classes),
                "one_hot: indices must lie in [0, " + std::to_string(num_classes) +
                    "), got values in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  const Device dev = indices.device();
  if (indices.num_elements() == 0) {  // no rows: the class range is not needed
    auto dims = indices.shape().dims();
    dims.push_back(num_classes);
    return detail::fill(Shape(std::move(dims)), 0.0, dtype, dev);
  }
  const auto r = static_cast<std::int64_t>(indices.rank());
  // The classes in i64, never the index dtype (which may not hold num_classes - 1).
  auto classes = arange(0, double(num_classes), 1, DType::I64, dev);
  auto eq = binary(ir::BinaryFn::Eq, unsqueeze(cast(std::move(indices), DType::I64), r),
                   std::move(classes));
  return cast(std::move(eq), dtype);
}

namespace {
// The smallest and largest of a non-empty int tensor (a sync point), for index checks.
std::pair<double, double> index_range(const DynTensor& idx) {
  return {reduce_all(ir::ReduceFn::Min, idx).to_data().get_f64(0),
          reduce_all(ir::ReduceFn::Max, idx).to_data().get_f64(0)};
}
// Indices in [-n, n) made non-negative, as I64.
DynTensor wrap_negative(DynTensor idx, std::size_t n) {
  auto i = as_i64(std::move(idx));
  auto neg = binary_scalar(ir::BinaryFn::Lt, i, 0.0);
  auto shifted = binary_scalar(ir::BinaryFn::Add, i, static_cast<double>(n));
  return mask_where(std::move(neg), std::move(shifted), std::move(i));
}
}  // namespace

DynTensor one_hot_fill(DynTensor indices, std::size_t num_classes, double on_value,
                       double off_value, std::int64_t axis, DType dtype) {
  detail::check_kind(indices, {Kind::Int, Kind::Float}, "one_hot_fill");
  EMBER_CHECK(num_classes > 0, "one_hot_fill: num_classes must be > 0");
  const std::size_t a = normalize_dim(axis, indices.rank() + 1, "one_hot_fill");
  auto dims = indices.shape().dims();
  dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(a), num_classes);
  Shape out_shape(std::move(dims));
  detail::check_size(out_shape, dtype, "one_hot_fill", indices.device());
  const double on = detail::fill_value(on_value, dtype, "one_hot_fill");
  const double off = detail::fill_value(off_value, dtype, "one_hot_fill");
  const Device dev = indices.device();
  if (indices.num_elements() == 0) return detail::fill(std::move(out_shape), off, dtype, dev);
  auto idx = indices.kind() == Kind::Float
                 ? cast(unary(ir::UnaryFn::Trunc, detach(std::move(indices))), DType::I64)
                 : as_i64(std::move(indices));
  const auto [lo, hi] = index_range(idx);
  const double n = static_cast<double>(num_classes);
  EMBER_CHECK(lo >= -n && hi < n, "one_hot_fill: indices must lie in [-" +
                                      std::to_string(num_classes) + ", " +
                                      std::to_string(num_classes) + "), got values in [" +
                                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  idx = wrap_negative(std::move(idx), num_classes);
  // The classes along the new axis, compared with the indices unsqueezed there.
  std::vector<std::int64_t> class_shape(out_shape.rank(), 1);
  class_shape[a] = static_cast<std::int64_t>(num_classes);
  auto classes = reshape(arange(0, n, 1, DType::I64, dev), class_shape);
  auto hit = binary(ir::BinaryFn::Eq, unsqueeze(std::move(idx), static_cast<std::int64_t>(a)),
                    std::move(classes));
  const Shape one(std::vector<std::size_t>(out_shape.rank(), 1));
  return mask_where(std::move(hit), detail::fill(one, on, dtype, dev),
                    detail::fill(one, off, dtype, dev));
}

DynTensor take(DynTensor x, DynTensor indices) {
  check_index(x, indices, "take");
  const std::size_t n = x.num_elements();
  const Shape out_shape = indices.shape();
  if (indices.num_elements() == 0) {
    return detail::fill(out_shape, 0.0, x.dtype(), x.device());
  }
  const auto [lo, hi] = index_range(indices);
  const double nd = static_cast<double>(n);
  EMBER_CHECK(lo >= -nd && hi < nd, "take: indices must lie in [-" + std::to_string(n) + ", " +
                                        std::to_string(n) + ") for a tensor of shape " +
                                        x.shape().to_string() + ", got values in [" +
                                        std::to_string(lo) + ", " + std::to_string(hi) + "]");
  auto idx = wrap_negative(std::move(indices), n);
  auto flat = reshape(std::move(x), Shape{n});
  auto picked =
      select(std::move(flat), 0, reshape(std::move(idx), Shape{out_shape.num_elements()}));
  return reshape(std::move(picked), out_shape);
}

DynTensor searchsorted(DynTensor sorted, DynTensor values, bool right) {
  detail::check_same_device(sorted, values, "searchsorted");
  detail::check_kind(sorted, {Kind::Float, Kind::Int}, "searchsorted");
  EMBER_CHECK(
      sorted.dtype() == values.dtype() && sorted.rank() >= 1,
      detail::describe("searchsorted: sorted (rank >= 1) and values must share a dtype, got",
                       {&sorted, &values}));
  bool lead = sorted.rank() == 1;
  if (!lead && values.rank() == sorted.rank()) {
    lead = true;
    for (std::size_t i = 0; i + 1 < sorted.rank(); ++i)
      lead = lead && sorted.shape()[i] == values.shape()[i];
  }
  EMBER_CHECK(lead, detail::describe("searchsorted: sorted must have rank 1 or share values' "
                                     "rank and leading dims, got",
                                     {&sorted, &values}));
  const Shape out_shape = values.shape();
  const Device dev = values.device();
  const std::size_t n = sorted.shape()[sorted.rank() - 1];
  if (values.num_elements() == 0 || n == 0) return detail::fill(out_shape, 0.0, DType::I64, dev);
  // Entry e counts for value v where !(e >= v) (right: !(e > v)): e < v (e <= v) for
  // numbers, and every entry for a NaN value.
  const auto r = static_cast<std::int64_t>(values.rank());
  DynTensor v = unsqueeze(std::move(values), r);
  DynTensor s = sorted.rank() == 1 ? std::move(sorted) : unsqueeze(std::move(sorted), r - 1);
  auto past = binary(right ? ir::BinaryFn::Gt : ir::BinaryFn::Ge, std::move(s), std::move(v));
  auto before = cast(unary(ir::UnaryFn::LogicalNot, std::move(past)), DType::I64);
  return reshape(reduce(ir::ReduceFn::Sum, std::move(before), r), out_shape);
}

DynTensor bucketize(DynTensor x, DynTensor boundaries, bool right) {
  EMBER_CHECK(boundaries.rank() == 1, "bucketize: boundaries must have rank 1, got shape " +
                                          boundaries.shape().to_string());
  return searchsorted(std::move(boundaries), std::move(x), right);
}

DynTensor histc(DynTensor x, std::size_t bins, double min, double max) {
  detail::check_kind(x, {Kind::Float}, "histc");
  EMBER_CHECK(bins > 0, "histc: bins must be > 0");
  EMBER_CHECK(std::isfinite(min) && std::isfinite(max) && min <= max,
              "histc: the range [" + std::to_string(min) + ", " + std::to_string(max) +
                  "] must be finite with min <= max");
  const Device dev = x.device();
  const DType dt = x.dtype();
  detail::check_size(Shape{bins}, dt, "histc", dev);
  const std::size_t numel = x.num_elements();
  auto flat = reshape(detach(std::move(x)), Shape{numel});
  if (min == max && flat.num_elements() > 0) {
    // The data's range, NaNs and infinities left out.
    auto finite = unary(ir::UnaryFn::IsFinite, flat);
    if (reduce_all(ir::ReduceFn::Any, finite).to_data().get_f64(0) != 0) {
      min = reduce_all(ir::ReduceFn::Min,
                       mask_where(finite, flat, detail::scalar_like(flat, INFINITY)))
                .to_data()
                .get_f64(0);
      max = reduce_all(ir::ReduceFn::Max,
                       mask_where(finite, flat, detail::scalar_like(flat, -INFINITY)))
                .to_data()
                .get_f64(0);
    }
  }
  if (min == max) {
    min -= 1;
    max += 1;
  }
  auto counts = detail::fill(Shape{bins}, 0.0, dt, dev);
  if (flat.num_elements() == 0) return counts;
  // bin = floor((x - min) * bins / (max - min)), max itself in the last bin; the others
  // outside [min, max] (and NaNs) count nothing, their bin clamped to stay an index.
  auto inside = binary(ir::BinaryFn::And, binary_scalar(ir::BinaryFn::Ge, flat, min),
                       binary_scalar(ir::BinaryFn::Le, flat, max));
  auto pos = binary_scalar(ir::BinaryFn::Mul, binary_scalar(ir::BinaryFn::Sub, flat, min),
                           static_cast<double>(bins) / (max - min));
  pos = mask_where(inside, std::move(pos), detail::scalar_like(flat, 0.0));
  auto bin = clamp(cast(unary(ir::UnaryFn::Floor, std::move(pos)), DType::I64), 0.0,
                   static_cast<double>(bins - 1));
  return scatter_add(std::move(counts), 0, std::move(bin), cast(std::move(inside), dt));
}

DynTensor nonzero(DynTensor x) {
  const Device dev = x.device();
  return run(dev, ir::Nonzero{std::move(x).handle()});
}

DynTensor matmul(DynTensor a, DynTensor b) {
  detail::check_same_device(a, b, "matmul");
  detail::check_kind(a, {Kind::Float}, "matmul");
  EMBER_CHECK(a.rank() >= 2 && b.rank() >= 2,
              detail::describe("matmul: operands need rank >= 2, got", {&a, &b}));
  EMBER_CHECK(a.dtype() == b.dtype(), detail::describe("matmul: dtypes differ", {&a, &b}));
  const std::size_t ra = a.rank(), rb = b.rank();
  const std::size_t k = a.shape()[ra - 1];
  EMBER_CHECK(k == b.shape()[rb - 2], detail::describe("matmul: inner dims differ", {&a, &b}));
  Shape out = ir::matmul_shape(a.shape(), b.shape(), "matmul");
  a = detail::left_pad_rank(std::move(a), out.rank());
  b = detail::left_pad_rank(std::move(b), out.rank());
  const Device dev = a.device();
  return run(dev, ir::Matmul{std::move(a).handle(), std::move(b).handle(), std::move(out)});
}

}  // namespace ember::ops
