#include "ember/backend/strided_view.hpp"

namespace ember::backend {

namespace {
// The next row-major stride. Sizes are checked to fit 2^62 (base/checked.hpp), so a
// product can pass that only in an empty tensor ([0, 2^61, 4]), whose strides address
// nothing: there it saturates instead of overflowing.
std::int64_t next_stride(std::int64_t acc, std::size_t extent) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 62;
  const auto e = static_cast<std::int64_t>(extent);
  if (e != 0 && acc > kLimit / e) return kLimit;
  return acc * e;
}
}  // namespace

void contiguous_strides(const Shape& shape, std::vector<std::int64_t>& out) {
  out.resize(shape.rank());
  std::int64_t acc = 1;
  for (std::size_t i = shape.rank(); i-- > 0;) {
    out[i] = acc;
    acc = next_stride(acc, shape[i]);
  }
}

std::vector<std::int64_t> contiguous_strides(const Shape& shape) {
  std::vector<std::int64_t> s;
  contiguous_strides(shape, s);
  return s;
}

bool is_contiguous(const Shape& shape, const std::vector<std::int64_t>& strides) {
  std::int64_t acc = 1;
  for (std::size_t i = shape.rank(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != acc) return false;
    acc = next_stride(acc, shape[i]);
  }
  return true;
}

std::optional<StridedView> reshape_view(const StridedView& x, const Shape& shape) {
  if (x.shape.num_elements() == 0) return std::nullopt;
  // The old dims without the extent-1 ones, which carry no layout.
  std::vector<std::size_t> od;
  std::vector<std::int64_t> os;
  for (std::size_t i = 0; i < x.shape.rank(); ++i) {
    if (x.shape[i] != 1) {
      od.push_back(x.shape[i]);
      os.push_back(x.strides[i]);
    }
  }
  std::vector<std::int64_t> out(shape.rank(), 1);
  std::size_t oi = 0, ni = 0;
  while (ni < shape.rank()) {
    if (shape[ni] == 1) {
      ++ni;
      continue;
    }
    if (oi >= od.size()) return std::nullopt;
    // Old dims [oi, oj) and new dims [ni, nj) with equal products.
    std::size_t op = od[oi], np = shape[ni];
    std::size_t oj = oi + 1, nj = ni + 1;
    while (op != np) {
      if (op < np) {
        if (oj >= od.size()) return std::nullopt;
        op *= od[oj++];
      } else {
        while (nj < shape.rank() && shape[nj] == 1) ++nj;
        if (nj >= shape.rank()) return std::nullopt;
        np *= shape[nj++];
      }
    }
    for (std::size_t k = oi; k + 1 < oj; ++k) {
      if (os[k] != os[k + 1] * static_cast<std::int64_t>(od[k + 1])) return std::nullopt;
    }
    std::int64_t st = os[oj - 1];
    for (std::size_t k = nj; k-- > ni;) {
      out[k] = st;
      st *= static_cast<std::int64_t>(shape[k]);
    }
    oi = oj;
    ni = nj;
  }
  if (oi != od.size()) return std::nullopt;
  return StridedView{shape, std::move(out), x.offset};
}

StridedView permute_view(const StridedView& x, const std::vector<std::size_t>& axes) {
  std::vector<std::size_t> dims(axes.size());
  std::vector<std::int64_t> st(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) {
    dims[i] = x.shape[axes[i]];
    st[i] = x.strides[axes[i]];
  }
  return {Shape(std::move(dims)), std::move(st), x.offset};
}

StridedView expand_view(const StridedView& x, const Shape& shape) {
  return {shape, broadcast_strides(x.shape, x.strides, shape), x.offset};
}

StridedView slice_view(const StridedView& x, const std::vector<ir::SliceRange>& ranges) {
  std::vector<std::size_t> dims(x.shape.rank());
  std::vector<std::int64_t> st(dims.size());
  std::int64_t off = x.offset;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto& r = ranges[i];
    dims[i] = (r.end - r.start + r.step - 1) / r.step;
    if (dims[i] > 0) off += static_cast<std::int64_t>(r.start) * x.strides[i];
    st[i] = x.strides[i] * static_cast<std::int64_t>(r.step);
  }
  return {Shape(std::move(dims)), std::move(st), off};
}

StridedView flip_view(const StridedView& x, const std::vector<std::size_t>& axes) {
  StridedView v = x;
  for (std::size_t a : axes) {
    if (x.shape[a] > 0) v.offset += static_cast<std::int64_t>(x.shape[a] - 1) * v.strides[a];
    v.strides[a] = -v.strides[a];
  }
  return v;
}

void broadcast_strides(const Shape& x_shape, const std::vector<std::int64_t>& x_strides,
                       const Shape& out_shape, std::vector<std::int64_t>& out) {
  out.assign(x_strides.begin(), x_strides.end());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (x_shape[i] != out_shape[i]) out[i] = 0;
  }
}

std::vector<std::int64_t> broadcast_strides(const Shape& x_shape,
                                            const std::vector<std::int64_t>& x_strides,
                                            const Shape& out_shape) {
  std::vector<std::int64_t> s;
  broadcast_strides(x_shape, x_strides, out_shape, s);
  return s;
}

Walk walk_of(const Shape& x_shape, const std::vector<std::int64_t>& x_strides,
             const Shape& out_shape) {
  if (x_shape == out_shape && is_contiguous(x_shape, x_strides)) return Walk::Linear;
  for (std::size_t d : x_shape) {
    if (d != 1) return Walk::Strided;
  }
  return Walk::Scalar;
}

}  // namespace ember::backend
