// Shape, layout and indexing ONNX operators: Reshape, Transpose, Slice, Gather*, Scatter*,
// Concat, Split, Pad, Tile, Expand, Constant*, Range, Trilu, OneHot, NonZero, ...
#include <algorithm>
#include <cmath>
#include <numeric>

#include <type_traits>

#include "ops.hpp"

namespace ember::onnx {

std::optional<DType> dtype_of_onnx_code(std::int64_t t);

namespace {

using ir::BinaryFn;
using V = std::vector<DynTensor>;
using I64s = std::vector<std::int64_t>;

std::size_t axis_of(const OpCall& c, std::int64_t a, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  c.check(a >= -r && a < r,
          "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return static_cast<std::size_t>(a < 0 ? a + r : a);
}

DynTensor i64_tensor(const I64s& v, const Shape& s, const Device& dev) {
  return ops::from_data(TensorData::from<std::int64_t>(v, s), dev);
}

// Indices along an extent n with negatives counted from the end, as I64.
DynTensor wrap_indices(DynTensor idx, std::size_t n) {
  idx = ops::cast(std::move(idx), DType::I64);
  DynTensor neg = ops::binary_scalar(BinaryFn::Lt, idx, 0);
  DynTensor shifted = ops::binary_scalar(BinaryFn::Add, idx, static_cast<double>(n));
  return ops::mask_where(std::move(neg), std::move(shifted), std::move(idx));
}

void check_index_range(const OpCall& c, const DynTensor& idx, std::size_t n) {
  if (idx.num_elements() == 0) return;
  const auto v = host_ints(idx);
  for (auto i : v)
    c.check(
        i >= -static_cast<std::int64_t>(n) && i < static_cast<std::int64_t>(n),
        "index " + std::to_string(i) + " is out of range for an extent of " + std::to_string(n));
}

V shape(OpCall& c) {
  const DynTensor& x = c.at(0);
  const auto r = static_cast<std::int64_t>(x.rank());
  auto clampi = [&](std::int64_t v) {
    if (v < 0) v += r;
    return std::min(std::max<std::int64_t>(v, 0), r);
  };
  const std::int64_t s = clampi(c.node.i("start", 0)), e = clampi(c.node.i("end", r));
  I64s dims;
  for (auto k = s; k < e; ++k)
    dims.push_back(static_cast<std::int64_t>(x.shape()[static_cast<std::size_t>(k)]));
  return {i64_tensor(dims, Shape{dims.size()}, c.device)};
}

V size(OpCall& c) {
  return {i64_tensor({static_cast<std::int64_t>(c.at(0).num_elements())}, Shape{}, c.device)};
}

V reshape(OpCall& c) {
  DynTensor x = c.at(0);
  I64s target = c.opset < 5 ? c.node.ints("shape") : host_ints(c.at(1));
  const bool allowzero = c.node.i("allowzero", 0) != 0;
  for (std::size_t i = 0; i < target.size(); ++i)
    if (target[i] == 0 && !allowzero) {
      c.check(i < x.rank(), "shape entry " + std::to_string(i) + " is 0 (copy) but the input " +
                                x.shape().to_string() + " has no dim " + std::to_string(i));
      target[i] = static_cast<std::int64_t>(x.shape()[i]);
    }
  return {ops::reshape(std::move(x), target)};
}

V flatten(OpCall& c) {
  DynTensor x = c.at(0);
  const auto r = static_cast<std::int64_t>(x.rank());
  std::int64_t a = c.node.i("axis", 1);
  c.check(a >= -r && a <= r,
          "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
  if (a < 0) a += r;
  std::size_t outer = 1, inner = 1;
  for (std::int64_t i = 0; i < r; ++i)
    (i < a ? outer : inner) *= x.shape()[static_cast<std::size_t>(i)];
  return {ops::reshape(std::move(x), Shape{outer, inner})};
}

I64s axes_input_or_attr(const OpCall& c, std::size_t input) {
  if (c.opset >= 13) return c.has(input) ? host_ints(c.at(input)) : I64s{};
  return c.node.ints("axes");
}

V squeeze(OpCall& c) {
  DynTensor x = c.at(0);
  I64s axes = axes_input_or_attr(c, 1);
  std::vector<std::size_t> keep;
  std::vector<bool> drop(x.rank(), false);
  if (axes.empty()) {
    for (std::size_t i = 0; i < x.rank(); ++i) drop[i] = x.shape()[i] == 1;
  } else {
    for (auto a : axes) {
      const std::size_t d = axis_of(c, a, x.rank());
      c.check(x.shape()[d] == 1,
              "axis " + std::to_string(a) + " of shape " + x.shape().to_string() + " is not 1");
      drop[d] = true;
    }
  }
  std::vector<std::size_t> dims;
  for (std::size_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) dims.push_back(x.shape()[i]);
  return {ops::reshape(std::move(x), Shape(dims))};
}

V unsqueeze(OpCall& c) {
  DynTensor x = c.at(0);
  I64s axes = axes_input_or_attr(c, 1);
  const std::size_t r = x.rank() + axes.size();
  std::vector<bool> ins(r, false);
  for (auto a : axes) {
    const std::size_t d = axis_of(c, a, r);
    c.check(!ins[d], "axis " + std::to_string(a) + " is repeated");
    ins[d] = true;
  }
  std::vector<std::size_t> dims;
  std::size_t k = 0;
  for (std::size_t i = 0; i < r; ++i) dims.push_back(ins[i] ? 1 : x.shape()[k++]);
  return {ops::reshape(std::move(x), Shape(dims))};
}

V transpose(OpCall& c) {
  DynTensor x = c.at(0);
  I64s perm = c.node.ints("perm");
  if (perm.empty())
    for (std::size_t i = 0; i < x.rank(); ++i)
      perm.push_back(static_cast<std::int64_t>(x.rank() - 1 - i));
  return {ops::permute(std::move(x), perm)};
}

V concat(OpCall& c) {
  std::vector<DynTensor> xs;
  for (std::size_t i = 0; i < c.size(); ++i)
    if (c.has(i)) xs.push_back(c.at(i));
  c.check(!xs.empty(), "expects at least one input");
  const std::size_t d = axis_of(c, c.node.i("axis", 0), xs[0].rank());
  // Empty inputs along the axis are dropped (ONNX allows them).
  std::vector<DynTensor> nonempty;
  for (auto& x : xs)
    if (x.rank() != xs[0].rank() || x.shape()[d] != 0) nonempty.push_back(x);
  if (nonempty.empty()) return {xs[0]};
  if (nonempty.size() == 1) return {nonempty[0]};
  return {ops::cat(std::move(nonempty), static_cast<std::int64_t>(d))};
}

V split(OpCall& c) {
  DynTensor x = c.at(0);
  const std::size_t d = axis_of(c, c.node.i("axis", 0), x.rank());
  I64s sizes = c.opset >= 13 ? (c.has(1) ? host_ints(c.at(1)) : I64s{}) : c.node.ints("split");
  const std::size_t n = x.shape()[d];
  std::vector<std::size_t> sz;
  if (sizes.empty()) {
    const std::size_t parts = c.node.has("num_outputs")
                                  ? static_cast<std::size_t>(c.node.i("num_outputs", 1))
                                  : c.num_outputs;
    c.check(parts >= 1, "no outputs to split into");
    const std::size_t each = (n + parts - 1) / parts;
    c.check(c.node.has("num_outputs") || n % parts == 0,
            "dim " + std::to_string(d) + " of extent " + std::to_string(n) +
                " does not split into " + std::to_string(parts) + " equal parts");
    std::size_t left = n;
    for (std::size_t i = 0; i < parts; ++i) {
      sz.push_back(std::min(each, left));
      left -= sz.back();
    }
  } else {
    std::size_t total = 0;
    for (auto s : sizes) {
      c.check(s >= 0, "negative split size " + std::to_string(s));
      sz.push_back(static_cast<std::size_t>(s));
      total += sz.back();
    }
    c.check(total == n, "split sizes sum to " + std::to_string(total) + " but dim " +
                            std::to_string(d) + " has extent " + std::to_string(n));
  }
  V out;
  std::size_t start = 0;
  for (auto s : sz) {
    out.push_back(
        ops::narrow(x, static_cast<std::int64_t>(d), static_cast<std::int64_t>(start), s));
    start += s;
  }
  return out;
}

V slice(OpCall& c) {
  DynTensor x = c.at(0);
  I64s starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.node.ints("starts");
    ends = c.node.ints("ends");
    axes = c.node.ints("axes");
  } else {
    starts = host_ints(c.at(1));
    ends = host_ints(c.at(2));
    if (c.has(3)) axes = host_ints(c.at(3));
    if (c.has(4)) steps = host_ints(c.at(4));
  }
  c.check(starts.size() == ends.size(), "starts and ends differ in length");
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  c.check(axes.size() == starts.size() && steps.size() == starts.size(),
          "starts, ends, axes and steps must have one length");
  std::vector<ops::Range> ranges(x.rank(), ops::Range(0, std::nullopt));
  std::vector<std::int64_t> flips;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t d = axis_of(c, axes[i], x.rank());
    const auto n = static_cast<std::int64_t>(x.shape()[d]);
    const std::int64_t step = steps[i];
    c.check(step != 0, "step 0 on axis " + std::to_string(axes[i]));
    std::int64_t s = starts[i], e = ends[i];
    if (s < 0) s += n;
    if (e < 0) e += n;
    if (step > 0) {
      s = std::clamp<std::int64_t>(s, 0, n);
      e = std::clamp<std::int64_t>(e, 0, n);
      if (e < s) e = s;
      ranges[d] = ops::Range(s, e, step);
    } else {
      s = std::clamp<std::int64_t>(s, 0, n - 1);
      e = std::clamp<std::int64_t>(e, -1, n - 1);
      // On the flipped dim, i -> n - 1 - i.
      std::int64_t fs = n - 1 - s, fe = n - 1 - e;
      if (n == 0) fs = fe = 0;
      if (fe < fs) fe = fs;
      ranges[d] = ops::Range(fs, fe, -step);
      flips.push_back(static_cast<std::int64_t>(d));
    }
  }
  if (!flips.empty()) x = ops::flip(std::move(x), flips);
  return {ops::slice(std::move(x), ranges)};
}

V gather(OpCall& c) {
  DynTensor x = c.at(0), idx = c.at(1);
  const std::size_t d = axis_of(c, c.node.i("axis", 0), x.rank());
  check_index_range(c, idx, x.shape()[d]);
  std::vector<std::size_t> dims(x.shape().dims().begin(),
                                x.shape().dims().begin() + static_cast<std::ptrdiff_t>(d));
  for (auto e : idx.shape()) dims.push_back(e);
  for (std::size_t i = d + 1; i < x.rank(); ++i) dims.push_back(x.shape()[i]);
  const std::size_t n = x.shape()[d], ni = idx.num_elements();
  DynTensor flat = ops::reshape(wrap_indices(std::move(idx), n), Shape{ni});
  DynTensor out = ops::select(std::move(x), static_cast<std::int64_t>(d), std::move(flat));
  return {ops::reshape(std::move(out), Shape(dims))};
}

V gather_elements(OpCall& c) {
  DynTensor x = c.at(0), idx = c.at(1);
  const std::size_t d = axis_of(c, c.node.i("axis", 0), x.rank());
  check_index_range(c, idx, x.shape()[d]);
  const std::size_t n = x.shape()[d];
  return {ops::gather(std::move(x), static_cast<std::int64_t>(d), wrap_indices(std::move(idx), n))};
}

V scatter_elements(OpCall& c) {
  DynTensor x = c.at(0), idx = c.at(1), upd = c.at(2);
  const std::size_t d = axis_of(c, c.node.i("axis", 0), x.rank());
  check_index_range(c, idx, x.shape()[d]);
  const std::string red = c.node.s("reduction", "none");
  idx = wrap_indices(std::move(idx), x.shape()[d]);
  if (red == "none")
    return {
        ops::scatter(std::move(x), static_cast<std::int64_t>(d), std::move(idx), std::move(upd))};
  if (red == "add")
    return {ops::scatter_add(std::move(x), static_cast<std::int64_t>(d), std::move(idx),
                             std::move(upd))};
  c.error("reduction '" + red + "' is not supported; expected none, add or mul");
}

// The row of each index tuple (last dim of idx, length k) in data viewed as
// [prod(batch) * prod(dims[b : b + k]), rest...].
DynTensor nd_rows(const OpCall& c, const DynTensor& data, DynTensor idx, std::size_t b) {
  const std::size_t k = idx.shape()[idx.rank() - 1];
  c.check(b + k <= data.rank(), "index tuples of length " + std::to_string(k) + " with " +
                                    std::to_string(b) + " batch dims exceed the data's rank " +
                                    std::to_string(data.rank()));
  I64s dims, strides(k);
  std::size_t stride = 1;
  for (std::size_t j = k; j-- > 0;) {
    strides[j] = static_cast<std::int64_t>(stride);
    stride *= data.shape()[b + j];
  }
  for (std::size_t j = 0; j < k; ++j)
    dims.push_back(static_cast<std::int64_t>(data.shape()[b + j]));
  const auto v = host_ints(idx);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto n = dims[i % k];
    c.check(v[i] >= -n && v[i] < n, "index " + std::to_string(v[i]) +
                                        " is out of range for an extent of " + std::to_string(n));
  }
  idx = ops::cast(std::move(idx), DType::I64);
  DynTensor dimt = i64_tensor(dims, Shape{k}, c.device);
  DynTensor neg = ops::binary_scalar(BinaryFn::Lt, idx, 0);
  idx = ops::mask_where(std::move(neg), ops::binary(BinaryFn::Add, idx, dimt), idx);
  DynTensor lin =
      ops::binary(BinaryFn::Mul, std::move(idx), i64_tensor(strides, Shape{k}, c.device));
  lin = ops::reduce(ir::ReduceFn::Sum, std::move(lin), -1);
  lin = ops::squeeze(std::move(lin), -1);
  if (b > 0) {  // + batch index * stride
    std::size_t nb = 1;
    std::vector<std::size_t> bshape;
    for (std::size_t i = 0; i < b; ++i) {
      nb *= data.shape()[i];
      bshape.push_back(data.shape()[i]);
    }
    for (std::size_t i = b; i < lin.rank(); ++i) bshape.push_back(1);
    DynTensor base = ops::arange(0, static_cast<double>(nb), 1, DType::I64, c.device);
    base = ops::reshape(
        ops::binary_scalar(BinaryFn::Mul, std::move(base), static_cast<double>(stride)),
        Shape(bshape));
    lin = ops::binary(BinaryFn::Add, std::move(lin), std::move(base));
  }
  return lin;
}

V gather_nd(OpCall& c) {
  DynTensor x = c.at(0), idx = c.at(1);
  const auto b = static_cast<std::size_t>(c.node.i("batch_dims", 0));
  c.check(idx.rank() >= 1 && b < idx.rank() && b <= x.rank(),
          "batch_dims " + std::to_string(b) + " does not fit the ranks");
  const std::size_t k = idx.shape()[idx.rank() - 1];
  DynTensor lin = nd_rows(c, x, idx, b);
  std::size_t rows = 1;
  std::vector<std::size_t> rest;
  for (std::size_t i = 0; i < b + k; ++i) rows *= x.shape()[i];
  std::vector<std::size_t> flat{rows};
  for (std::size_t i = b + k; i < x.rank(); ++i) {
    flat.push_back(x.shape()[i]);
    rest.push_back(x.shape()[i]);
  }
  std::vector<std::size_t> out(idx.shape().dims().begin(), idx.shape().dims().end() - 1);
  out.insert(out.end(), rest.begin(), rest.end());
  DynTensor xf = ops::reshape(std::move(x), Shape(flat));
  const std::size_t nl = lin.num_elements();
  DynTensor sel = ops::select(std::move(xf), 0, ops::reshape(std::move(lin), Shape{nl}));
  return {ops::reshape(std::move(sel), Shape(out))};
}

V scatter_nd(OpCall& c) {
  DynTensor x = c.at(0), idx = c.at(1), upd = c.at(2);
  c.check(idx.rank() >= 1, "indices need rank >= 1");
  const std::size_t k = idx.shape()[idx.rank() - 1];
  DynTensor lin = nd_rows(c, x, idx, 0);
  std::size_t rows = 1, inner = 1;
  for (std::size_t i = 0; i < k; ++i) rows *= x.shape()[i];
  for (std::size_t i = k; i < x.rank(); ++i) inner *= x.shape()[i];
  const std::size_t m = lin.num_elements();
  const Shape xs = x.shape();
  DynTensor xf = ops::reshape(std::move(x), Shape{rows, inner});
  DynTensor uf = ops::reshape(std::move(upd), Shape{m, inner});
  const std::string red = c.node.s("reduction", "none");
  if (red == "mul") {
    // Products in update order, on the host (duplicate indices multiply in turn).
    const auto rows_at = host_ints(lin);
    const DType dt = xf.dtype();
    TensorData xd = xf.to_data(), ud = uf.to_data();
    const auto mul_rows = [&](auto zero) {
      using T = decltype(zero);
      auto xv = xd.to_vector<T>();
      const auto uv = ud.to_vector<T>();
      for (std::size_t j = 0; j < m; ++j) {
        const auto row = static_cast<std::size_t>(rows_at[j]);
        for (std::size_t e = 0; e < inner; ++e) {
          T& a = xv[row * inner + e];
          if constexpr (std::is_integral_v<T>)  // wraps as the integer dtype would
            a = static_cast<T>(static_cast<std::uint64_t>(a) *
                               static_cast<std::uint64_t>(uv[j * inner + e]));
          else
            a *= uv[j * inner + e];
        }
      }
      return TensorData::from<T>(xv, Shape{rows, inner}).convert(dt);
    };
    TensorData r = is_float(dt) ? mul_rows(double{}) : mul_rows(std::int64_t{});
    return {ops::reshape(ops::from_data(r, c.device), xs)};
  }
  DynTensor li = ops::expand(ops::reshape(std::move(lin), Shape{m, 1}), Shape{m, inner});
  DynTensor r = red == "add"
                    ? ops::scatter_add(std::move(xf), 0, std::move(li), std::move(uf))
                    : (c.check(red == "none", "reduction '" + red +
                                                  "' is not supported; expected none, add or mul"),
                       ops::scatter(std::move(xf), 0, std::move(li), std::move(uf)));
  return {ops::reshape(std::move(r), xs)};
}

V expand(OpCall& c) {
  DynTensor x = c.at(0);
  const I64s s = host_ints(c.at(1));
  // Bidirectional broadcast of x's shape with s.
  std::vector<std::size_t> dims;
  for (auto v : s) {
    c.check(v >= 0, "negative extent " + std::to_string(v) + " in the shape");
    dims.push_back(static_cast<std::size_t>(v));
  }
  Shape target = ops::broadcast_shapes(x.shape(), Shape(dims), "Expand");
  return {ops::expand(std::move(x), target)};
}

V tile(OpCall& c) {
  DynTensor x = c.at(0);
  const I64s r = host_ints(c.at(1));
  c.check(r.size() == x.rank(), "repeats has " + std::to_string(r.size()) + " entries for rank " +
                                    std::to_string(x.rank()));
  std::vector<std::size_t> t;
  for (auto v : r) {
    c.check(v >= 0, "negative repeat " + std::to_string(v));
    t.push_back(static_cast<std::size_t>(v));
  }
  return {ops::repeat(std::move(x), t)};
}

V pad(OpCall& c) {
  DynTensor x = c.at(0);
  I64s pads;
  double value = 0;
  if (c.opset < 11) {
    pads = c.node.ints("pads");
    value = c.node.f("value", 0.0);
  } else {
    pads = host_ints(c.at(1));
    if (c.has(2) && c.at(2).num_elements() > 0) value = host_scalar(c.at(2));
  }
  const std::size_t r = x.rank();
  I64s axes;
  if (c.has(3))
    axes = host_ints(c.at(3));
  else
    for (std::size_t i = 0; i < r; ++i) axes.push_back(static_cast<std::int64_t>(i));
  c.check(pads.size() == 2 * axes.size(), "pads has " + std::to_string(pads.size()) +
                                              " entries; expected " +
                                              std::to_string(2 * axes.size()));
  I64s before(r, 0), after(r, 0);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::size_t d = axis_of(c, axes[i], r);
    before[d] = pads[i];
    after[d] = pads[i + axes.size()];
  }
  const std::string mode = c.node.s("mode", "constant");
  ops::PadMode pm = ops::PadMode::Constant;
  if (mode == "reflect")
    pm = ops::PadMode::Reflect;
  else if (mode == "edge")
    pm = ops::PadMode::Edge;
  else
    c.check(mode == "constant",
            "mode '" + mode + "' is not supported; expected constant, reflect or edge");
  // Negative pads crop first.
  std::vector<ops::Range> crop(r, ops::Range(0, std::nullopt));
  bool cropping = false;
  for (std::size_t d = 0; d < r; ++d) {
    const auto n = static_cast<std::int64_t>(x.shape()[d]);
    std::int64_t s = before[d] < 0 ? -before[d] : 0, e = after[d] < 0 ? n + after[d] : n;
    c.check(s <= e, "negative pads crop dim " + std::to_string(d) + " below zero");
    if (s != 0 || e != n) cropping = true;
    crop[d] = ops::Range(s, e);
  }
  if (cropping) x = ops::slice(std::move(x), crop);
  std::vector<std::pair<std::size_t, std::size_t>> p;
  bool any = false;
  for (std::size_t d = 0; d < r; ++d) {
    p.emplace_back(static_cast<std::size_t>(std::max<std::int64_t>(before[d], 0)),
                   static_cast<std::size_t>(std::max<std::int64_t>(after[d], 0)));
    any = any || p.back().first || p.back().second;
  }
  if (!any) return {x};
  return {ops::pad(std::move(x), p, pm, value)};
}

V constant(OpCall& c) {
  const auto& a = c.node.attrs;
  if (auto it = a.find("value"); it != a.end() && it->second.t)
    return {ops::from_data(*it->second.t, c.device)};
  if (auto it = a.find("value_float"); it != a.end())
    return {ops::from_data(TensorData::from<float>({static_cast<float>(it->second.f)}, Shape{}),
                           c.device)};
  if (auto it = a.find("value_floats"); it != a.end()) {
    std::vector<float> v(it->second.floats.begin(), it->second.floats.end());
    return {ops::from_data(TensorData::from<float>(v), c.device)};
  }
  if (auto it = a.find("value_int"); it != a.end())
    return {i64_tensor({it->second.i}, Shape{}, c.device)};
  if (auto it = a.find("value_ints"); it != a.end())
    return {i64_tensor(it->second.ints, Shape{it->second.ints.size()}, c.device)};
  c.error(
      "has no value attribute ember reads (value, value_float(s), value_int(s); sparse and string "
      "values are not supported)");
}

V constant_of_shape(OpCall& c) {
  const I64s s = host_ints(c.at(0));
  std::vector<std::size_t> dims;
  for (auto v : s) {
    c.check(v >= 0, "negative extent " + std::to_string(v));
    dims.push_back(static_cast<std::size_t>(v));
  }
  double value = 0;
  DType dt = DType::F32;
  if (auto it = c.node.attrs.find("value"); it != c.node.attrs.end() && it->second.t) {
    dt = it->second.t->dtype();
    value = it->second.t->get_f64(0);
  }
  return {ops::full(Shape(dims), value, dt, c.device)};
}

V range(OpCall& c) {
  const DynTensor& st = c.at(0);
  const double start = host_scalar(st), limit = host_scalar(c.at(1)), delta = host_scalar(c.at(2));
  c.check(delta != 0, "delta is 0");
  const double n = std::max(std::ceil((limit - start) / delta), 0.0);
  DynTensor k = ops::arange(0, n, 1, DType::F64, c.device);
  DynTensor v = ops::binary_scalar(BinaryFn::Add,
                                   ops::binary_scalar(BinaryFn::Mul, std::move(k), delta), start);
  return {ops::cast(std::move(v), st.dtype())};
}

V eye_like(OpCall& c) {
  const DynTensor& x = c.at(0);
  c.check(x.rank() == 2, "input must have rank 2, got " + x.shape().to_string());
  DType dt = x.dtype();
  if (c.node.has("dtype")) {
    auto d = dtype_of_onnx_code(c.node.i("dtype", 1));
    c.check(d.has_value(), "unsupported dtype " + std::to_string(c.node.i("dtype", 1)));
    dt = *d;
  }
  const std::int64_t k = c.node.i("k", 0);
  // ones where j - i == k
  DynTensor i = ops::reshape(ops::arange(0, double(x.shape()[0]), 1, DType::I64, c.device),
                             Shape{x.shape()[0], 1});
  DynTensor j = ops::reshape(ops::arange(0, double(x.shape()[1]), 1, DType::I64, c.device),
                             Shape{1, x.shape()[1]});
  DynTensor diff = ops::binary(BinaryFn::Sub, std::move(j), std::move(i));
  return {ops::cast(ops::binary_scalar(BinaryFn::Eq, std::move(diff), double(k)), dt)};
}

V trilu(OpCall& c) {
  DynTensor x = c.at(0);
  const std::int64_t k = c.has(1) ? static_cast<std::int64_t>(host_scalar(c.at(1))) : 0;
  return {c.node.i("upper", 1) ? ops::triu(std::move(x), k) : ops::tril(std::move(x), k)};
}

V one_hot(OpCall& c) {
  DynTensor idx = c.at(0);
  const auto depth = static_cast<std::int64_t>(host_scalar(c.at(1)));
  const auto vals = host_f64(c.at(2));
  c.check(depth > 0 && vals.size() == 2, "depth must be > 0 and values [off, on]");
  const DType dt = c.at(2).dtype();
  // Negative indices count from the end; out-of-range ones give a row of off values.
  DynTensor i = ops::cast(std::move(idx), DType::I64);
  i = ops::mask_where(ops::binary_scalar(BinaryFn::Lt, i, 0),
                      ops::binary_scalar(BinaryFn::Add, i, double(depth)), i);
  const std::int64_t r = static_cast<std::int64_t>(i.rank());
  DynTensor classes = ops::arange(0, double(depth), 1, DType::I64, c.device);
  DynTensor hit = ops::binary(BinaryFn::Eq, ops::unsqueeze(std::move(i), r), std::move(classes));
  DynTensor out = ops::mask_where(hit, ops::full(Shape{}, vals[1], dt, c.device),
                                  ops::full(Shape{}, vals[0], dt, c.device));
  std::int64_t axis = c.node.i("axis", -1);
  const std::int64_t ro = r + 1;
  if (axis < 0) axis += ro;
  c.check(axis >= 0 && axis < ro, "axis out of range");
  if (axis != r) {
    I64s perm;
    for (std::int64_t d = 0; d < r; ++d) perm.push_back(d);
    perm.insert(perm.begin() + axis, r);
    out = ops::permute(std::move(out), perm);
  }
  return {out};
}

V nonzero(OpCall& c) {
  DynTensor x = c.at(0);
  if (x.rank() == 0) x = ops::reshape(std::move(x), Shape{1});
  // ember: [count, rank]; ONNX: [rank, count].
  DynTensor nz = ops::cast(ops::nonzero(std::move(x)), DType::I64);
  return {ops::permute(std::move(nz), {1, 0})};
}

V topk(OpCall& c) {
  DynTensor x = c.at(0);
  const auto k = c.opset < 10 ? c.node.i("k", 1) : static_cast<std::int64_t>(host_scalar(c.at(1)));
  const std::size_t d = axis_of(c, c.node.i("axis", -1), x.rank());
  c.check(k >= 0 && static_cast<std::size_t>(k) <= x.shape()[d],
          "k = " + std::to_string(k) + " exceeds the extent " + std::to_string(x.shape()[d]));
  const bool largest = c.node.i("largest", 1) != 0;
  auto [v, i] = ops::sort_with_indices(std::move(x), static_cast<std::int64_t>(d), largest);
  return {ops::narrow(std::move(v), static_cast<std::int64_t>(d), 0, static_cast<std::size_t>(k)),
          ops::cast(ops::narrow(std::move(i), static_cast<std::int64_t>(d), 0,
                                static_cast<std::size_t>(k)),
                    DType::I64)};
}

V cumsum(OpCall& c) {
  DynTensor x = c.at(0);
  const std::size_t d = axis_of(c, static_cast<std::int64_t>(host_scalar(c.at(1))), x.rank());
  const bool exclusive = c.node.i("exclusive", 0) != 0, reverse = c.node.i("reverse", 0) != 0;
  const auto di = static_cast<std::int64_t>(d);
  if (reverse) x = ops::flip(std::move(x), {di});
  DynTensor y = ops::scan(ir::ScanFn::Sum, x, di);
  if (exclusive) y = ops::binary(BinaryFn::Sub, std::move(y), x);
  if (reverse) y = ops::flip(std::move(y), {di});
  return {y};
}

V depth_to_space(OpCall& c) {
  DynTensor x = c.at(0);
  c.check(x.rank() == 4, "input must be [N, C, H, W], got " + x.shape().to_string());
  const auto b = static_cast<std::size_t>(c.node.i("blocksize", 1));
  const auto n = x.shape()[0], ch = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  c.check(b > 0 && ch % (b * b) == 0,
          "channels " + std::to_string(ch) + " do not divide by blocksize^2");
  const std::size_t co = ch / (b * b);
  DynTensor y =
      c.node.s("mode", "DCR") == "DCR"
          ? ops::permute(ops::reshape(std::move(x), Shape{n, b, b, co, h, w}), {0, 3, 4, 1, 5, 2})
          : ops::permute(ops::reshape(std::move(x), Shape{n, co, b, b, h, w}), {0, 1, 4, 2, 5, 3});
  return {ops::reshape(std::move(y), Shape{n, co, h * b, w * b})};
}

V space_to_depth(OpCall& c) {
  DynTensor x = c.at(0);
  c.check(x.rank() == 4, "input must be [N, C, H, W], got " + x.shape().to_string());
  const auto b = static_cast<std::size_t>(c.node.i("blocksize", 1));
  const auto n = x.shape()[0], ch = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  c.check(b > 0 && h % b == 0 && w % b == 0, "H and W must divide by blocksize");
  DynTensor y = ops::permute(ops::reshape(std::move(x), Shape{n, ch, h / b, b, w / b, b}),
                             {0, 3, 5, 1, 2, 4});
  return {ops::reshape(std::move(y), Shape{n, ch * b * b, h / b, w / b})};
}

V compress(OpCall& c) {
  DynTensor x = c.at(0);
  const auto cond = host_ints(c.at(1));
  I64s keep;
  if (!c.node.has("axis")) {
    const std::size_t nx = x.num_elements();
    x = ops::reshape(std::move(x), Shape{nx});
  }
  const std::size_t d = c.node.has("axis") ? axis_of(c, c.node.i("axis", 0), x.rank()) : 0;
  for (std::size_t i = 0; i < cond.size() && i < x.shape()[d]; ++i)
    if (cond[i]) keep.push_back(static_cast<std::int64_t>(i));
  return {ops::select(std::move(x), static_cast<std::int64_t>(d),
                      i64_tensor(keep, Shape{keep.size()}, c.device))};
}

V reverse_sequence(OpCall& c) {
  DynTensor x = c.at(0);
  const auto lens = host_ints(c.at(1));
  const std::size_t ba = axis_of(c, c.node.i("batch_axis", 1), x.rank());
  const std::size_t ta = axis_of(c, c.node.i("time_axis", 0), x.rank());
  const std::size_t nb = x.shape()[ba], nt = x.shape()[ta];
  c.check(lens.size() == nb, "sequence_lens has " + std::to_string(lens.size()) +
                                 " entries for batch " + std::to_string(nb));
  // index[t, b] along the time axis: reversed within the first lens[b] steps.
  I64s idx(nt * nb);
  for (std::size_t t = 0; t < nt; ++t)
    for (std::size_t b = 0; b < nb; ++b) {
      const auto l = static_cast<std::size_t>(
          std::clamp<std::int64_t>(lens[b], 0, static_cast<std::int64_t>(nt)));
      idx[t * nb + b] = static_cast<std::int64_t>(t < l ? l - 1 - t : t);
    }
  std::vector<std::size_t> ishape(x.rank(), 1);
  ishape[ta] = nt;
  ishape[ba] = nb;
  DynTensor it = i64_tensor(idx, Shape{nt, nb}, c.device);
  if (ta > ba) it = ops::permute(std::move(it), {1, 0});
  it = ops::expand(ops::reshape(std::move(it), Shape(ishape)), x.shape());
  return {ops::gather(std::move(x), static_cast<std::int64_t>(ta), std::move(it))};
}

}  // namespace

void register_shape(OpMap& m) {
  const auto add = [&](const char* name, OpFn fn) { m[name] = {fn, true}; };
  add("Shape", shape);
  add("Size", size);
  add("Reshape", reshape);
  add("Flatten", flatten);
  add("Squeeze", squeeze);
  add("Unsqueeze", unsqueeze);
  add("Transpose", transpose);
  add("Concat", concat);
  add("Split", split);
  add("Slice", slice);
  add("Gather", gather);
  add("GatherElements", gather_elements);
  add("GatherND", gather_nd);
  add("ScatterElements", scatter_elements);
  add("Scatter", scatter_elements);
  add("ScatterND", scatter_nd);
  add("Expand", expand);
  add("Tile", tile);
  add("Pad", pad);
  add("Constant", constant);
  add("ConstantOfShape", constant_of_shape);
  add("Range", range);
  add("EyeLike", eye_like);
  add("Trilu", trilu);
  add("OneHot", one_hot);
  add("NonZero", nonzero);
  add("TopK", topk);
  add("CumSum", cumsum);
  add("DepthToSpace", depth_to_space);
  add("SpaceToDepth", space_to_depth);
  add("Compress", compress);
  add("ReverseSequence", reverse_sequence);
}

}  // namespace ember::onnx
