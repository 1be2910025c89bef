// Reductions, scans and sorting.
#include <algorithm>
#include <string>

#include "ember/tensor/gradients.hpp"

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

DynTensor logsumexp(DynTensor x, std::int64_t dim) {
  detail::check_kind(x, {Kind::Float}, "logsumexp");
  const std::size_t d = normalize_dim(dim, x.rank(), "logsumexp");
  using ir::UnaryFn;
  if (x.shape()[d] == 0) {  // log(0): -inf, as PyTorch
    return unary(UnaryFn::Log, reduce(ReduceFn::Sum, std::move(x), dim));
  }
  // The shift m is the line's maximum where it is finite and 0 elsewhere: a line of -inf
  // then sums exp(-inf) = 0 (log: -inf), one holding +inf sums inf, a NaN stays NaN. The
  // shift cancels in the value, so it is detached and the gradient is exactly softmax(x).
  auto m = detach(reduce(ReduceFn::Max, x, dim));
  auto off = unary(UnaryFn::LogicalNot, unary(UnaryFn::IsFinite, m));
  m = mask_fill(std::move(m), std::move(off), 0.0);
  auto e = unary(UnaryFn::Exp, binary(ir::BinaryFn::Sub, std::move(x), m));
  auto s = unary(UnaryFn::Log, reduce(ReduceFn::Sum, std::move(e), dim));
  return binary(ir::BinaryFn::Add, std::move(s), std::move(m));
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
  // A tracked running max or min is differentiated through the positions it was taken
  // from (cummax_with_indices); the Scan op itself has no derivative rule.
  if ((fn == ir::ScanFn::Max || fn == ir::ScanFn::Min) && detail::is_tracked(x)) {
    return fn == ir::ScanFn::Max ? cummax_with_indices(std::move(x), dim).first
                                 : cummin_with_indices(std::move(x), dim).first;
  }
  const Device dev = x.device();
  return run(dev, ir::Scan{fn, std::move(x).handle(), d});
}

namespace {
// The dims of a multi-dim reduction, normalised and sorted; throws naming op when one is
// out of range or repeated, or when none is given.
std::vector<std::size_t> reduced_dims(const std::vector<std::int64_t>& dims, std::size_t rank,
                                      const char* op) {
  EMBER_CHECK(!dims.empty(), std::string(op) +
                                 ": no dims given (the full reduction is the function without "
                                 "_dims)");
  std::vector<std::size_t> ds;
  for (std::int64_t d : dims) ds.push_back(normalize_dim(d, rank, op));
  std::sort(ds.begin(), ds.end());
  EMBER_CHECK(std::adjacent_find(ds.begin(), ds.end()) == ds.end(),
              std::string(op) + ": a dim is given twice");
  return ds;
}

// Cummax / cummin with indices. The running extreme m is the Scan op on x kept out of any
// graph; position i is where the extreme was last taken at or before i: the last j <= i with
// x[j] == m[j] (or x[j] NaN, which stays the extreme), found as a running max of those
// positions. The values are then gathered from x at the indices, so that they carry x's
// gradient.
std::pair<DynTensor, DynTensor> cum_extreme(bool is_max, DynTensor x, std::int64_t dim) {
  const char* op = is_max ? "cummax" : "cummin";
  detail::check_kind(x, {Kind::Float, Kind::Int}, op);
  const std::size_t d = normalize_dim(dim, x.rank(), op);
  const Device dev = x.device();
  const bool tracked = detail::is_tracked(x);
  DynTensor plain = detach(x);
  DynTensor m = run(dev, ir::Scan{is_max ? ir::ScanFn::Max : ir::ScanFn::Min, plain.handle(), d});
  DynTensor taken = binary(ir::BinaryFn::Eq, plain, m);
  if (x.kind() == Kind::Float) {
    taken = binary(ir::BinaryFn::Or, std::move(taken), unary(ir::UnaryFn::IsNan, plain));
  }
  // The positions along d, broadcast over the other dims.
  std::vector<std::int64_t> pos_shape(x.rank(), 1);
  pos_shape[d] = static_cast<std::int64_t>(x.shape()[d]);
  DynTensor pos = reshape(arange(0, double(x.shape()[d]), 1, DType::I64, dev), pos_shape);
  DynTensor cand =
      mask_where(std::move(taken), std::move(pos),
                 detail::fill(Shape(std::vector<std::size_t>(x.rank(), 1)), 0.0, DType::I64, dev));
  DynTensor idx = run(dev, ir::Scan{ir::ScanFn::Max, std::move(cand).handle(), d});
  if (!tracked) return {std::move(m), std::move(idx)};
  DynTensor values = gather(std::move(x), dim, idx);
  return {std::move(values), std::move(idx)};
}
}  // namespace

std::pair<DynTensor, DynTensor> cummax_with_indices(DynTensor x, std::int64_t dim) {
  return cum_extreme(true, std::move(x), dim);
}
std::pair<DynTensor, DynTensor> cummin_with_indices(DynTensor x, std::int64_t dim) {
  return cum_extreme(false, std::move(x), dim);
}

DynTensor reduce_dims(ReduceFn fn, DynTensor x, const std::vector<std::int64_t>& dims) {
  const std::string name = std::string(ir::name(fn)) + "_dims";
  const char* op = name.c_str();
  EMBER_CHECK(fn != ReduceFn::ArgMax && fn != ReduceFn::ArgMin,
              std::string(op) + ": an argument reduction takes one dim, not several");
  const std::vector<std::size_t> ds = reduced_dims(dims, x.rank(), op);
  if (fn == ReduceFn::Mean) {
    detail::check_kind(x, {Kind::Float}, op);
    double n = 1;
    for (std::size_t d : ds) n *= static_cast<double>(x.shape()[d]);
    for (std::size_t d : ds) x = reduce(ReduceFn::Sum, std::move(x), static_cast<std::int64_t>(d));
    return binary_scalar(ir::BinaryFn::Div, std::move(x), n);
  }
  // Each reduction checks its dim (Max and Min refuse extent 0) and leaves the others
  // as they were.
  for (std::size_t d : ds) x = reduce(fn, std::move(x), static_cast<std::int64_t>(d));
  return x;
}

DynTensor reduce_dims_squeeze(ReduceFn fn, DynTensor x, const std::vector<std::int64_t>& dims) {
  const std::string name = std::string(ir::name(fn)) + "_dims_squeeze";
  const std::vector<std::size_t> ds = reduced_dims(dims, x.rank(), name.c_str());
  x = reduce_dims(fn, std::move(x), dims);
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    if (!std::binary_search(ds.begin(), ds.end(), i)) kept.push_back(x.shape()[i]);
  }
  return reshape(std::move(x), Shape(std::move(kept)));
}

DynTensor max_abs(DynTensor x) {
  detail::check_kind(x, {Kind::Float, Kind::Int}, "max_abs");
  return reduce_all(ReduceFn::Max, unary(ir::UnaryFn::Abs, std::move(x)));
}
DynTensor max_abs_dim(DynTensor x, std::int64_t dim) {
  detail::check_kind(x, {Kind::Float, Kind::Int}, "max_abs_dim");
  normalize_dim(dim, x.rank(), "max_abs_dim");
  return reduce(ReduceFn::Max, unary(ir::UnaryFn::Abs, std::move(x)), dim);
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
