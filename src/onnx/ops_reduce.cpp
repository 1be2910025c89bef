// Reductions: Reduce*, ArgMax/ArgMin.
#include <cmath>

#include "ops.hpp"

namespace ember::onnx {

namespace {

using ir::BinaryFn;
using ir::ReduceFn;
using ir::UnaryFn;
using V = std::vector<DynTensor>;
using I64s = std::vector<std::int64_t>;

enum class Red { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// The axes of a reduction (attribute, or the second input from opset 13 for ReduceSum and
// from 18 for the others), normalised and sorted; empty = all unless noop.
std::vector<std::size_t> reduce_axes(const OpCall& c, bool axes_input, std::size_t rank,
                                     bool& noop) {
  I64s axes;
  if (axes_input) {
    if (c.has(1)) axes = host_ints(c.at(1));
  } else {
    axes = c.node.ints("axes");
  }
  noop = axes.empty() && c.node.i("noop_with_empty_axes", 0) != 0;
  std::vector<bool> mark(rank, axes.empty());
  for (auto a : axes) {
    const auto r = static_cast<std::int64_t>(rank);
    c.check(a >= -r && a < r,
            "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    mark[static_cast<std::size_t>(a < 0 ? a + r : a)] = true;
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < rank; ++i)
    if (mark[i]) out.push_back(i);
  return out;
}

template <Red R>
V reduce(OpCall& c) {
  DynTensor x = c.at(0);
  const bool axes_input = R == Red::Sum ? c.opset >= 13 : c.opset >= 18;
  bool noop = false;
  const auto axes = reduce_axes(c, axes_input, x.rank(), noop);
  if (noop) return {x};
  const bool keep = c.node.i("keepdims", 1) != 0;
  const DType dt = x.dtype();
  // Pre-maps.
  if (R == Red::L1) x = ops::unary(UnaryFn::Abs, std::move(x));
  if (R == Red::L2 || R == Red::SumSquare) x = ops::binary(BinaryFn::Mul, x, x);
  std::optional<DynTensor> shift;  // LogSumExp: the max, subtracted for stability
  if (R == Red::LogSumExp) {
    DynTensor m = x;
    for (auto a : axes) m = ops::reduce(ReduceFn::Max, std::move(m), static_cast<std::int64_t>(a));
    if (is_float(dt))
      m = ops::mask_where(ops::unary(UnaryFn::IsInf, m), ops::zeros(m.shape(), dt, c.device), m);
    shift = m;
    x = ops::unary(UnaryFn::Exp, ops::binary(BinaryFn::Sub, std::move(x), m));
  }
  ReduceFn fn = ReduceFn::Sum;
  if (R == Red::Mean) fn = ReduceFn::Mean;
  if (R == Red::Max) fn = ReduceFn::Max;
  if (R == Red::Min) fn = ReduceFn::Min;
  if (R == Red::Prod) fn = ReduceFn::Prod;
  bool empty = false;
  for (auto a : axes) empty = empty || x.shape()[a] == 0;
  if (empty && (R == Red::Max || R == Red::Min)) {
    std::vector<std::size_t> dims = x.shape().dims();
    for (auto a : axes) dims[a] = 1;
    const double v = R == Red::Max ? -INFINITY : INFINITY;
    x = ops::full(Shape(dims), v, dt, c.device);
  } else {
    for (auto a : axes) x = ops::reduce(fn, std::move(x), static_cast<std::int64_t>(a));
  }
  if (R == Red::L2) x = ops::unary(UnaryFn::Sqrt, std::move(x));
  if (R == Red::LogSum) x = ops::unary(UnaryFn::Log, std::move(x));
  if (R == Red::LogSumExp)
    x = ops::binary(BinaryFn::Add, ops::unary(UnaryFn::Log, std::move(x)), *shift);
  if (x.dtype() != dt) x = ops::cast(std::move(x), dt);
  if (!keep) {
    std::vector<std::size_t> dims;
    std::size_t k = 0;
    for (std::size_t i = 0; i < x.rank(); ++i) {
      if (k < axes.size() && axes[k] == i) {
        ++k;
        continue;
      }
      dims.push_back(x.shape()[i]);
    }
    x = ops::reshape(std::move(x), Shape(dims));
  }
  return {x};
}

template <bool Max>
V arg(OpCall& c) {
  DynTensor x = c.at(0);
  const auto r = static_cast<std::int64_t>(x.rank());
  std::int64_t a = c.node.i("axis", 0);
  c.check(a >= -r && a < r,
          "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
  if (a < 0) a += r;
  const bool last = c.node.i("select_last_index", 0) != 0;
  const std::size_t n = x.shape()[static_cast<std::size_t>(a)];
  if (last) x = ops::flip(std::move(x), {a});
  DynTensor i = ops::cast(ops::reduce(Max ? ReduceFn::ArgMax : ReduceFn::ArgMin, std::move(x), a),
                          DType::I64);
  if (last) i = ops::rbinary_scalar(BinaryFn::Sub, static_cast<double>(n) - 1, std::move(i));
  if (c.node.i("keepdims", 1) == 0) i = ops::squeeze(std::move(i), a);
  return {i};
}

}  // namespace

void register_reduce(OpMap& m) {
  const auto add = [&](const char* name, OpFn fn) { m[name] = {fn, true}; };
  add("ReduceSum", reduce<Red::Sum>);
  add("ReduceMean", reduce<Red::Mean>);
  add("ReduceMax", reduce<Red::Max>);
  add("ReduceMin", reduce<Red::Min>);
  add("ReduceProd", reduce<Red::Prod>);
  add("ReduceL1", reduce<Red::L1>);
  add("ReduceL2", reduce<Red::L2>);
  add("ReduceLogSum", reduce<Red::LogSum>);
  add("ReduceLogSumExp", reduce<Red::LogSumExp>);
  add("ReduceSumSquare", reduce<Red::SumSquare>);
  add("ArgMax", arg<true>);
  add("ArgMin", arg<false>);
}

}  // namespace ember::onnx
