// Reductions, scans and sorting.
#include <algorithm>

#include "tensor/op_support.hpp"

namespace ember::ops {

using detail::run;
using ir::ReduceFn;

std::size_t normalize_dim(std::int64_t dim, std::size_t rank, const char* op) {
  const auto r = static_cast<std::int64_t>(rank);
  EMBER_CHECK(dim >= -r && dim < r, std::string(op) + ": dim " + std::to_string(dim) +
                                        " is out of range for a tensor of rank " +
                                        std::to_string(rank));
  return static_cast<std::size_t>(dim < 0 ? dim + r : dim);
}

DynTensor reduce(ReduceFn fn, DynTensor x, std::int64_t dim) {
  const char* op = ir::name(fn);
  const std::size_t d = normalize_dim(dim, x.rank(), op);
  const DType out = ir::reduce_dtype(fn, x.dtype());
  switch (fn) {
    case ReduceFn::ArgMax:
    case ReduceFn::ArgMin:
      detail::check_kind(x, {Kind::Float, Kind::Int}, op);
      break;
    case ReduceFn::Any:
    case ReduceFn::All:
      break;
    case ReduceFn::Max:
    case ReduceFn::Min:
      detail::check_kind(x, {Kind::Float, Kind::Int}, op);
      break;
    case ReduceFn::Mean:
      // As PyTorch: the mean of ints is not an int; cast to a float dtype first.
      detail::check_kind(x, {Kind::Float}, op);
      break;
    default:
      detail::check_kind(x, {Kind::Float, Kind::Int}, op);
  }
  if (fn == ReduceFn::Max || fn == ReduceFn::Min || fn == ReduceFn::ArgMax ||
      fn == ReduceFn::ArgMin) {
    EMBER_CHECK(x.shape()[d] > 0, std::string(op) + ": cannot reduce dim " + std::to_string(d) +
                                      " of extent 0 (shape " + x.shape().to_string() + ")");
  }
  const Device dev = x.device();
  return run(dev, ir::Reduce{fn, std::move(x).handle(), d, out});
}

DynTensor reduce_all(ReduceFn fn, DynTensor x) {
  const std::size_t n = x.num_elements();
  return reduce(fn, reshape(std::move(x), Shape{n}), 0);
}

DynTensor any(DynTensor x) { return reduce_all(ReduceFn::Any, std::move(x)); }
DynTensor all(DynTensor x) { return reduce_all(ReduceFn::All, std::move(x)); }

std::pair<DynTensor, DynTensor> var_mean(DynTensor x, std::int64_t dim, std::size_t correction) {
  detail::check_kind(x, {Kind::Float}, "var");
  const std::size_t d = normalize_dim(dim, x.rank(), "var");
  const double n = static_cast<double>(x.shape()[d]);
  auto mean = reduce(ReduceFn::Mean, x, dim);
  auto diff = binary(ir::BinaryFn::Sub, std::move(x), mean);
  auto sq = unary(ir::UnaryFn::Square, std::move(diff));
  // The divisor clamps at 0 (as PyTorch): a correction >= n gives inf (or NaN for 0 / 0).
  auto v = binary_scalar(ir::BinaryFn::Div, reduce(ReduceFn::Sum, std::move(sq), dim),
                         std::max(0.0, n - static_cast<double>(correction)));
  return {std::move(v), std::move(mean)};
}

DynTensor var(DynTensor x, std::int64_t dim, std::size_t correction) {
  return var_mean(std::move(x), dim, correction).first;
}

std::pair<DynTensor, DynTensor> max_dim_with_indices(DynTensor x, std::int64_t dim) {
  auto idx = reduce(ReduceFn::ArgMax, x, dim);
  return {reduce(ReduceFn::Max, std::move(x), dim), std::move(idx)};
}
std::pair<DynTensor, DynTensor> min_dim_with_indices(DynTensor x, std::int64_t dim) {
  auto idx = reduce(ReduceFn::ArgMin, x, dim);
  return {reduce(ReduceFn::Min, std::move(x), dim), std::move(idx)};
}

DynTensor scan(ir::ScanFn fn, DynTensor x, std::int64_t dim) {
  const char* op = ir::name(fn);
  detail::check_kind(x, {Kind::Float, Kind::Int}, op);
  const std::size_t d = normalize_dim(dim, x.rank(), op);
  const Device dev = x.device();
  return run(dev, ir::Scan{fn, std::move(x).handle(), d});
}

std::pair<DynTensor, DynTensor> sort_with_indices(DynTensor x, std::int64_t dim, bool descending) {
  detail::check_kind(x, {Kind::Float, Kind::Int, Kind::Bool}, "sort");
  const std::size_t d = normalize_dim(dim, x.rank(), "sort");
  const Device dev = x.device();
  auto outs = detail::run_all(dev, ir::Sort{std::move(x).handle(), d, descending});
  EMBER_ASSERT(outs.size() == 2);
  return {std::move(outs[0]), std::move(outs[1])};
}
DynTensor sort(DynTensor x, std::int64_t dim, bool descending) {
  return sort_with_indices(std::move(x), dim, descending).first;
}
DynTensor argsort(DynTensor x, std::int64_t dim, bool descending) {
  return sort_with_indices(std::move(x), dim, descending).second;
}
std::pair<DynTensor, DynTensor> topk_with_indices(DynTensor x, std::size_t k, std::int64_t dim) {
  const std::size_t d = normalize_dim(dim, x.rank(), "topk");
  EMBER_CHECK(k <= x.shape()[d], "topk: k = " + std::to_string(k) + " exceeds the extent " +
                                     std::to_string(x.shape()[d]) + " of dim " + std::to_string(d) +
                                     " (shape " + x.shape().to_string() + ")");
  auto [v, i] = sort_with_indices(std::move(x), dim, true);
  const auto di = static_cast<std::int64_t>(d);
  return {narrow(std::move(v), di, 0, k), narrow(std::move(i), di, 0, k)};
}
DynTensor topk(DynTensor x, std::size_t k, std::int64_t dim) {
  return topk_with_indices(std::move(x), k, dim).first;
}

}  // namespace ember::ops
