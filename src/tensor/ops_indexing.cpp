// Indexing (select, gather, scatter, one_hot, nonzero) and matmul.
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
