// Layout functions: views (reshape, permute, expand, slice, flip) and the composites built
// from them (squeeze, repeat, cat, split, pad, ...).
#include <algorithm>
#include <numeric>
#include <string>

#include "ember/base/checked.hpp"

#include "tensor/op_support.hpp"

namespace ember::ops {

using detail::run;

Range::Range(std::initializer_list<std::int64_t> se) {
  EMBER_CHECK(se.size() == 2,
              "Range: expected {start, end}, got " + std::to_string(se.size()) + " values");
  start = *se.begin();
  end = *(se.begin() + 1);
}

DynTensor reshape(DynTensor x, const Shape& shape) {
  EMBER_CHECK(shape.num_elements() == x.num_elements(),
              "reshape: cannot reshape " + x.shape().to_string() + " (" +
                  std::to_string(x.num_elements()) + " elements) to " + shape.to_string());
  if (shape == x.shape()) return x;
  const Device dev = x.device();
  return run(dev, ir::Reshape{std::move(x).handle(), shape});
}

DynTensor reshape(DynTensor x, const std::vector<std::int64_t>& shape) {
  std::vector<std::size_t> dims(shape.size());
  std::size_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      EMBER_CHECK(infer < 0, "reshape: only one dim may be -1");
      infer = static_cast<int>(i);
    } else {
      EMBER_CHECK(shape[i] >= 0, "reshape: negative extent " + std::to_string(shape[i]));
      dims[i] = static_cast<std::size_t>(shape[i]);
      known = checked_mul(known, dims[i], "reshape", "the product of the given extents");
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known != 0 && x.num_elements() % known == 0,
                "reshape: cannot infer the -1 dim reshaping " + x.shape().to_string());
    dims[static_cast<std::size_t>(infer)] = x.num_elements() / known;
  }
  return reshape(std::move(x), Shape(std::move(dims)));
}

DynTensor permute(DynTensor x, const std::vector<std::int64_t>& axes) {
  EMBER_CHECK(axes.size() == x.rank(), "permute: " + std::to_string(axes.size()) +
                                           " axes given for shape " + x.shape().to_string());
  std::vector<std::size_t> ax(axes.size());
  std::vector<bool> seen(axes.size(), false);
  bool identity = true;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    ax[i] = normalize_dim(axes[i], x.rank(), "permute");
    EMBER_CHECK(!seen[ax[i]], "permute: axis " + std::to_string(ax[i]) + " repeated");
    seen[ax[i]] = true;
    identity = identity && ax[i] == i;
  }
  if (identity) return x;
  const Device dev = x.device();
  return run(dev, ir::Permute{std::move(x).handle(), std::move(ax)});
}

DynTensor swap_dims(DynTensor x, std::int64_t d0, std::int64_t d1) {
  const std::size_t a = normalize_dim(d0, x.rank(), "swap_dims");
  const std::size_t b = normalize_dim(d1, x.rank(), "swap_dims");
  std::vector<std::int64_t> axes(x.rank());
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes[a], axes[b]);
  return permute(std::move(x), axes);
}

DynTensor transpose(DynTensor x) {
  EMBER_CHECK(x.rank() >= 2, "transpose: expected rank >= 2, got shape " + x.shape().to_string());
  return swap_dims(std::move(x), -2, -1);
}

DynTensor flip(DynTensor x, const std::vector<std::int64_t>& axes) {
  std::vector<std::size_t> ax;
  for (std::int64_t a : axes) {
    const std::size_t d = normalize_dim(a, x.rank(), "flip");
    EMBER_CHECK(std::find(ax.begin(), ax.end(), d) == ax.end(),
                "flip: axis " + std::to_string(d) + " repeated");
    ax.push_back(d);
  }
  if (ax.empty()) return x;
  const Device dev = x.device();
  return run(dev, ir::Flip{std::move(x).handle(), std::move(ax)});
}

DynTensor expand(DynTensor x, const Shape& shape) {
  EMBER_CHECK(shape.rank() >= x.rank(), "expand: cannot expand " + x.shape().to_string() +
                                            " to the lower rank shape " + shape.to_string());
  const std::size_t off = shape.rank() - x.rank();
  for (std::size_t i = 0; i < x.rank(); ++i) {
    EMBER_CHECK(x.shape()[i] == shape[i + off] || x.shape()[i] == 1,
                "expand: cannot expand " + x.shape().to_string() + " to " + shape.to_string());
  }
  detail::check_size(shape, x.dtype(), "expand");
  x = detail::left_pad_rank(std::move(x), shape.rank());
  if (x.shape() == shape) return x;
  const Device dev = x.device();
  return run(dev, ir::Expand{std::move(x).handle(), shape});
}

namespace {
DynTensor repeat_impl(DynTensor x, const std::vector<std::size_t>& times, const std::string& op) {
  std::vector<std::size_t> split, big, out;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    split.insert(split.end(), {1, x.shape()[i]});
    big.insert(big.end(), {times[i], x.shape()[i]});
    out.push_back(checked_mul(times[i], x.shape()[i], op, "the repeated extent"));
  }
  detail::check_size(Shape(out), x.dtype(), op, x.device());
  auto e = expand(reshape(std::move(x), Shape(split)), Shape(big));
  return reshape(std::move(e), Shape(out));
}
}  // namespace

DynTensor repeat(DynTensor x, const std::vector<std::size_t>& times) {
  EMBER_CHECK(times.size() == x.rank(), "repeat: " + std::to_string(times.size()) +
                                            " repeat counts given for shape " +
                                            x.shape().to_string());
  const std::string op = "repeat " + x.shape().to_string();
  return repeat_impl(std::move(x), times, op);
}

DynTensor repeat_dim(DynTensor x, std::int64_t dim, std::size_t times) {
  std::vector<std::size_t> t(x.rank(), 1);
  t[normalize_dim(dim, x.rank(), "repeat_dim")] = times;
  const std::string op = "repeat_dim " + x.shape().to_string();
  return repeat_impl(std::move(x), t, op);
}

DynTensor squeeze(DynTensor x, std::int64_t dim) {
  const std::size_t d = normalize_dim(dim, x.rank(), "squeeze");
  EMBER_CHECK(x.shape()[d] == 1, "squeeze: dim " + std::to_string(d) + " of shape " +
                                     x.shape().to_string() + " does not have extent 1");
  EMBER_CHECK(x.rank() > 1, "squeeze: cannot remove the only dim of a rank-1 tensor");
  auto dims = x.shape().dims();
  dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(d));
  return reshape(std::move(x), Shape(std::move(dims)));
}

DynTensor squeeze_all(DynTensor x) {
  std::vector<std::size_t> dims;
  for (std::size_t d : x.shape()) {
    if (d != 1) dims.push_back(d);
  }
  if (dims.empty()) dims.push_back(1);
  return reshape(std::move(x), Shape(std::move(dims)));
}

DynTensor unsqueeze(DynTensor x, std::int64_t dim) {
  const std::size_t d = normalize_dim(dim, x.rank() + 1, "unsqueeze");
  auto dims = x.shape().dims();
  dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(d), 1);
  return reshape(std::move(x), Shape(std::move(dims)));
}

DynTensor flatten(DynTensor x, std::int64_t start_dim, std::int64_t end_dim) {
  const std::size_t s = normalize_dim(start_dim, x.rank(), "flatten");
  const std::size_t e = normalize_dim(end_dim, x.rank(), "flatten");
  EMBER_CHECK(s <= e,
              "flatten: start dim " + std::to_string(s) + " after end dim " + std::to_string(e));
  std::vector<std::size_t> dims(x.shape().begin(), x.shape().begin() + static_cast<long>(s));
  std::size_t n = 1;
  for (std::size_t i = s; i <= e; ++i) n *= x.shape()[i];
  dims.push_back(n);
  for (std::size_t i = e + 1; i < x.rank(); ++i) dims.push_back(x.shape()[i]);
  return reshape(std::move(x), Shape(std::move(dims)));
}

namespace {
std::vector<ir::SliceRange> resolve_ranges(const Shape& shape, const std::vector<Range>& ranges,
                                           const char* op) {
  EMBER_CHECK(ranges.size() <= shape.rank(), std::string(op) + ": " +
                                                 std::to_string(ranges.size()) +
                                                 " ranges given for shape " + shape.to_string());
  std::vector<ir::SliceRange> out(shape.rank());
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    const auto n = static_cast<std::int64_t>(shape[i]);
    if (i >= ranges.size()) {
      out[i] = {0, shape[i], 1};
      continue;
    }
    const Range& r = ranges[i];
    std::int64_t s = r.start < 0 ? r.start + n : r.start;
    std::int64_t e = r.end ? (*r.end < 0 ? *r.end + n : *r.end) : n;
    EMBER_CHECK(r.step >= 1,
                std::string(op) + ": step must be >= 1, got " + std::to_string(r.step));
    EMBER_CHECK(s >= 0 && e <= n && s <= e,
                std::string(op) + ": range [" + std::to_string(r.start) + ", " +
                    (r.end ? std::to_string(*r.end) : std::string("end")) +
                    ") is out of bounds for dim " + std::to_string(i) + " of shape " +
                    shape.to_string());
    out[i] = {static_cast<std::size_t>(s), static_cast<std::size_t>(e),
              static_cast<std::size_t>(r.step)};
  }
  return out;
}
Shape sliced_shape(const std::vector<ir::SliceRange>& rs) {
  std::vector<std::size_t> dims;
  for (const auto& r : rs) dims.push_back((r.end - r.start + r.step - 1) / r.step);
  return Shape(std::move(dims));
}
}  // namespace

DynTensor slice(DynTensor x, const std::vector<Range>& ranges) {
  auto rs = resolve_ranges(x.shape(), ranges, "slice");
  if (sliced_shape(rs) == x.shape()) return x;
  const Device dev = x.device();
  return run(dev, ir::Slice{std::move(x).handle(), std::move(rs)});
}

DynTensor narrow(DynTensor x, std::int64_t dim, std::int64_t start, std::size_t length) {
  const std::size_t d = normalize_dim(dim, x.rank(), "narrow");
  const auto n = static_cast<std::int64_t>(x.shape()[d]);
  const std::int64_t s = start < 0 ? start + n : start;
  EMBER_CHECK(s >= 0 && s <= n && length <= static_cast<std::size_t>(n - s),
              "narrow: start " + std::to_string(start) + " with length " + std::to_string(length) +
                  " is out of bounds for dim " + std::to_string(d) + " of shape " +
                  x.shape().to_string());
  std::vector<Range> ranges(d + 1, Range(0, std::nullopt));
  ranges[d] = Range(s, s + static_cast<std::int64_t>(length));
  return slice(std::move(x), ranges);
}

DynTensor slice_assign(DynTensor x, const std::vector<Range>& ranges, DynTensor value) {
  detail::check_same_device(x, value, "slice_assign");
  auto rs = resolve_ranges(x.shape(), ranges, "slice_assign");
  const Shape target = sliced_shape(rs);
  EMBER_CHECK(value.rank() <= target.rank(),
              "slice_assign: value of shape " + value.shape().to_string() +
                  " does not fit the slice of shape " + target.to_string());
  Shape b = broadcast_shapes(value.shape(), target, "slice_assign");
  EMBER_CHECK(b == target, "slice_assign: value of shape " + value.shape().to_string() +
                               " does not fit the slice of shape " + target.to_string());
  if (value.dtype() != x.dtype()) value = cast(std::move(value), x.dtype());
  value = expand(std::move(value), target);
  if (target.num_elements() == 0) return x;
  const Device dev = x.device();
  return run(dev, ir::SliceAssign{std::move(x).handle(), std::move(rs), std::move(value).handle()});
}

DynTensor slice_fill(DynTensor x, const std::vector<Range>& ranges, double value) {
  auto v = detail::scalar_like(x, detail::fill_value(value, x.dtype(), "slice_fill"));
  return slice_assign(std::move(x), ranges, std::move(v));
}

DynTensor cat(std::vector<DynTensor> xs, std::int64_t dim) {
  EMBER_CHECK(!xs.empty(), "cat: no tensors given");
  const DynTensor& first = xs[0];
  const std::size_t d = normalize_dim(dim, first.rank(), "cat");
  const std::vector<std::size_t>& out = first.shape().dims();
  for (const auto& x : xs) {
    detail::check_same_device(first, x, "cat");
    bool ok = x.rank() == first.rank() && x.dtype() == first.dtype();
    for (std::size_t i = 0; ok && i < x.rank(); ++i) ok = i == d || x.shape()[i] == out[i];
    EMBER_CHECK(ok, "cat: " + detail::describe("tensors must match except along dim " +
                                                   std::to_string(d) + ", got",
                                               {&first, &x}));
  }
  if (xs.size() == 1) return std::move(xs[0]);
  const Device dev = first.device();
  std::vector<ir::Handle> hs;
  for (auto& x : xs) hs.push_back(std::move(x).handle());
  Shape shape = ir::cat_shape(hs, d);
  return run(dev, ir::Cat{std::move(hs), d, std::move(shape)});
}

DynTensor stack(std::vector<DynTensor> xs, std::int64_t dim) {
  EMBER_CHECK(!xs.empty(), "stack: no tensors given");
  const std::size_t d = normalize_dim(dim, xs[0].rank() + 1, "stack");
  // Check every shape before unsqueezing any: xs[0] is the reference shape.
  for (const auto& x : xs) {
    detail::check_same_device(xs[0], x, "stack");
    EMBER_CHECK(x.shape() == xs[0].shape() && x.dtype() == xs[0].dtype(),
                detail::describe("stack: tensors must share shape and dtype, got", {&xs[0], &x}));
  }
  for (auto& x : xs) x = unsqueeze(std::move(x), static_cast<std::int64_t>(d));
  return cat(std::move(xs), static_cast<std::int64_t>(d));
}

namespace {
std::vector<DynTensor> split_impl(DynTensor x, const std::vector<std::size_t>& sizes,
                                  std::int64_t dim, const char* op) {
  const std::size_t d = normalize_dim(dim, x.rank(), op);
  std::size_t total = 0;
  for (std::size_t s : sizes) total = checked_add(total, s, op, "the sum of the sizes");
  EMBER_CHECK(total == x.shape()[d], std::string(op) + ": sizes add up to " +
                                         std::to_string(total) + ", but dim " + std::to_string(d) +
                                         " of shape " + x.shape().to_string() + " has extent " +
                                         std::to_string(x.shape()[d]));
  std::vector<DynTensor> out;
  std::size_t start = 0;
  for (std::size_t s : sizes) {
    out.push_back(narrow(x, static_cast<std::int64_t>(d), static_cast<std::int64_t>(start), s));
    start += s;
  }
  return out;
}
}  // namespace

std::vector<DynTensor> split_sizes(DynTensor x, const std::vector<std::size_t>& sizes,
                                   std::int64_t dim) {
  return split_impl(std::move(x), sizes, dim, "split_sizes");
}

std::vector<DynTensor> split(DynTensor x, std::size_t split_size, std::int64_t dim) {
  const std::size_t d = normalize_dim(dim, x.rank(), "split");
  EMBER_CHECK(split_size > 0, "split: split_size must be > 0");
  const std::size_t n = x.shape()[d];
  std::vector<std::size_t> sizes;
  for (std::size_t s = 0; s < n; s += split_size) sizes.push_back(std::min(split_size, n - s));
  if (sizes.empty()) sizes.push_back(0);
  return split_impl(std::move(x), sizes, dim, "split");
}

std::vector<DynTensor> chunk(DynTensor x, std::size_t chunks, std::int64_t dim) {
  EMBER_CHECK(chunks > 0, "chunk: chunks must be > 0");
  const std::size_t d = normalize_dim(dim, x.rank(), "chunk");
  const std::size_t n = x.shape()[d];
  return split(std::move(x), std::max<std::size_t>(1, (n + chunks - 1) / chunks), dim);
}

DynTensor pad(DynTensor x, const std::vector<std::pair<std::size_t, std::size_t>>& pads,
              PadMode mode, double value) {
  EMBER_CHECK(pads.size() <= x.rank(), "pad: " + std::to_string(pads.size()) +
                                           " pads given for shape " + x.shape().to_string());
  const std::string op = "pad " + x.shape().to_string();
  const std::size_t first = x.rank() - pads.size();
  std::vector<std::size_t> dims = x.shape().dims();
  for (std::size_t i = 0; i < pads.size(); ++i) {
    const std::size_t d = first + i;
    dims[d] = checked_add(dims[d], checked_add(pads[i].first, pads[i].second, op, "the padding"),
                          op, "the padded extent");
  }
  detail::check_size(Shape(dims), x.dtype(), op, x.device());
  if (mode == PadMode::Constant) {
    std::vector<Range> ranges(x.rank(), Range(0, std::nullopt));
    for (std::size_t i = 0; i < pads.size(); ++i) {
      const std::size_t d = first + i;
      ranges[d] = Range(static_cast<std::int64_t>(pads[i].first),
                        static_cast<std::int64_t>(pads[i].first + x.shape()[d]));
    }
    auto out = detail::fill(Shape(std::move(dims)), detail::fill_value(value, x.dtype(), "pad"),
                            x.dtype(), x.device());
    return slice_assign(std::move(out), ranges, std::move(x));
  }
  for (std::size_t i = 0; i < pads.size(); ++i) {
    const std::size_t d = first + i;
    const std::size_t n = x.shape()[d];
    const auto [before, after] = pads[i];
    if (before == 0 && after == 0) continue;
    EMBER_CHECK(n > 0, op + ": cannot pad the empty dim " + std::to_string(d));
    if (mode == PadMode::Reflect) {
      EMBER_CHECK(std::max(before, after) < n,
                  op + ": reflect padding (" + std::to_string(before) + ", " +
                      std::to_string(after) + ") must be smaller than dim " + std::to_string(d) +
                      " of extent " + std::to_string(n));
    }
  }
  // An empty result needs no index (one padded dim's alone may be huge).
  if (Shape(dims).num_elements() == 0) return detail::fill(Shape(dims), 0.0, x.dtype(), x.device());
  // Reflect and edge gather each padded dim through an index computed on the device from
  // j in [-before, n + after): edge clamps j into [0, n - 1]; reflect folds it at 0 and at
  // n - 1, |(n - 1) - |j|| subtracted from n - 1.
  for (std::size_t i = 0; i < pads.size(); ++i) {
    const std::size_t d = first + i;
    const std::size_t n = x.shape()[d];
    const auto [before, after] = pads[i];
    if (before == 0 && after == 0) continue;
    const auto b = static_cast<std::int64_t>(before), last = static_cast<std::int64_t>(n) - 1;
    auto j = arange(-double(b), double(last + 1) + double(after), 1, DType::I64, x.device());
    DynTensor index =
        mode == PadMode::Reflect
            ? rbinary_scalar(ir::BinaryFn::Sub, double(last),
                             unary(ir::UnaryFn::Abs, rbinary_scalar(ir::BinaryFn::Sub, double(last),
                                                                    unary(ir::UnaryFn::Abs, j))))
            : clamp(j, 0.0, double(last));
    x = select(std::move(x), static_cast<std::int64_t>(d), std::move(index));
  }
  return x;
}

}  // namespace ember::ops

namespace ember::ops {

DynTensor movedim(DynTensor x, const std::vector<std::int64_t>& source,
                  const std::vector<std::int64_t>& destination) {
  EMBER_CHECK(source.size() == destination.size(),
              "movedim: " + std::to_string(source.size()) + " source dims but " +
                  std::to_string(destination.size()) + " destination dims");
  const std::size_t r = x.rank();
  constexpr std::size_t kFree = static_cast<std::size_t>(-1);
  std::vector<std::size_t> axes(r, kFree);  // axes[destination] = source
  std::vector<bool> moved(r, false);
  for (std::size_t i = 0; i < source.size(); ++i) {
    const std::size_t s = normalize_dim(source[i], r, "movedim");
    const std::size_t d = normalize_dim(destination[i], r, "movedim");
    EMBER_CHECK(!moved[s], "movedim: source dim " + std::to_string(s) + " is given twice");
    EMBER_CHECK(axes[d] == kFree,
                "movedim: destination dim " + std::to_string(d) + " is given twice");
    moved[s] = true;
    axes[d] = s;
  }
  std::size_t next = 0;  // the unmoved dims fill the free positions in order
  for (std::size_t& a : axes) {
    if (a != kFree) continue;
    while (moved[next]) ++next;
    a = next++;
  }
  return permute(std::move(x), std::vector<std::int64_t>(axes.begin(), axes.end()));
}

DynTensor roll(DynTensor x, const std::vector<std::int64_t>& shifts,
               const std::vector<std::int64_t>& dims) {
  if (dims.empty()) {
    EMBER_CHECK(shifts.size() == 1,
                "roll: without dims, give one shift (got " + std::to_string(shifts.size()) + ")");
    const Shape shape = x.shape();
    auto flat = reshape(std::move(x), Shape{shape.num_elements()});
    return reshape(roll(std::move(flat), shifts, {0}), shape);
  }
  EMBER_CHECK(shifts.size() == dims.size(), "roll: " + std::to_string(shifts.size()) +
                                                " shifts but " + std::to_string(dims.size()) +
                                                " dims");
  for (std::int64_t d : dims) normalize_dim(d, x.rank(), "roll");
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::size_t d = normalize_dim(dims[i], x.rank(), "roll");
    const auto n = static_cast<std::int64_t>(x.shape()[d]);
    if (n == 0) continue;
    const std::int64_t s = ((shifts[i] % n) + n) % n;  // the new position of element 0
    if (s == 0) continue;
    const auto di = static_cast<std::int64_t>(d);
    auto tail = narrow(x, di, n - s, static_cast<std::size_t>(s));
    auto head = narrow(std::move(x), di, 0, static_cast<std::size_t>(n - s));
    x = cat({std::move(tail), std::move(head)}, di);
  }
  return x;
}

}  // namespace ember::ops
