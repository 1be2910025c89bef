// Indexing kernels: gather, scatter, index_select, index_add, nonzero. Indices are checked
// against the indexed extent here, where their values are first read; an out-of-range
// index is an ember::Error naming the op, the index and the extent.
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/kernels/dtype_dispatch.hpp"
#include "cpu/kernels/kernels.hpp"

namespace ember::cpu {
namespace {

// i as an index into dim `dim` of a tensor of shape `shape` (indices of shape `index`).
std::size_t checked(std::int64_t i, std::size_t dim, const Shape& shape, const Shape& index,
                    const char* op) {
  const std::size_t extent = shape[dim];
  EMBER_CHECK(i >= 0 && static_cast<std::size_t>(i) < extent,
              std::string(op) + ": index " + std::to_string(i) + " is out of range for dim " +
                  std::to_string(dim) + " (extent " + std::to_string(extent) + ") of the tensor " +
                  shape.to_string() + " (indices " + index.to_string() + ")");
  return static_cast<std::size_t>(i);
}

// Multi-index of flat position p in a contiguous shape.
void unravel(std::size_t p, const Shape& s, std::vector<std::size_t>& idx) {
  for (std::size_t d = s.rank(); d-- > 0;) {
    idx[d] = s[d] == 0 ? 0 : p % s[d];
    p = s[d] == 0 ? 0 : p / s[d];
  }
}

template <class T>
T add_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<T>) {
    using W = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<W>(static_cast<W>(a) + static_cast<W>(b)));
  } else {
    return a + b;
  }
}

}  // namespace

ir::Handle run(CpuContext& ctx, ir::Gather& op) {
  auto x = contiguous(ctx, op.x);
  auto index = contiguous(ctx, op.index);
  const Shape& is = index->shape();
  auto out = ctx.empty(is, x->dtype());
  const auto xs = contiguous_strides(x->shape());
  const std::int64_t* ip = index->data_as<const std::int64_t>();
  const std::size_t elem = size_of(x->dtype());
  std::vector<std::size_t> idx(is.rank());
  for (std::size_t p = 0; p < is.num_elements(); ++p) {
    unravel(p, is, idx);
    idx[op.dim] = checked(ip[p], op.dim, x->shape(), is, "gather");
    std::int64_t src = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) src += static_cast<std::int64_t>(idx[d]) * xs[d];
    std::memcpy(out->data() + p * elem, x->data() + src * static_cast<std::int64_t>(elem), elem);
  }
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Scatter& op) {
  auto index = contiguous(ctx, op.index);
  auto src = contiguous(ctx, op.src);
  auto out = writable_copy(ctx, op.x);
  const Shape& is = index->shape();
  const auto os = contiguous_strides(out->shape());
  const std::int64_t* ip = index->data_as<const std::int64_t>();
  std::vector<std::size_t> idx(is.rank());
  visit_numeric(out->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* sp = src->data_as<const T>();
    T* yp = out->data_as<T>();
    for (std::size_t p = 0; p < is.num_elements(); ++p) {
      unravel(p, is, idx);
      idx[op.dim] = checked(ip[p], op.dim, out->shape(), is, op.add ? "scatter_add" : "scatter");
      std::int64_t dst = 0;
      for (std::size_t d = 0; d < idx.size(); ++d) dst += static_cast<std::int64_t>(idx[d]) * os[d];
      yp[dst] = op.add ? add_values(yp[dst], sp[p]) : sp[p];
    }
  });
  return out;
}

ir::Handle run(CpuContext& ctx, ir::IndexSelect& op) {
  auto out = ctx.empty(ir::out_shape(op), ir::out_dtype(op));
  auto x = contiguous(ctx, op.x);
  auto index = contiguous(ctx, op.index);
  const std::size_t k = index->shape()[0];
  std::size_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < op.dim; ++i) outer *= x->shape()[i];
  for (std::size_t i = op.dim + 1; i < x->shape().rank(); ++i) inner *= x->shape()[i];
  const std::size_t n = x->shape()[op.dim];
  const std::size_t row = inner * size_of(x->dtype());
  const std::int64_t* ip = index->data_as<const std::int64_t>();
  std::vector<std::size_t> rows(k);
  for (std::size_t j = 0; j < k; ++j)
    rows[j] = checked(ip[j], op.dim, x->shape(), index->shape(), "select");
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t j = 0; j < k; ++j) {
      std::memcpy(out->data() + (o * k + j) * row, x->data() + (o * n + rows[j]) * row, row);
    }
  }
  return out;
}

ir::Handle run(CpuContext& ctx, ir::IndexAdd& op) {
  auto index = contiguous(ctx, op.index);
  auto src = contiguous(ctx, op.src);
  const auto& x = as_cpu(op.x);
  auto out = writable_copy(ctx, op.x);
  const std::size_t k = index->shape()[0];
  std::size_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < op.dim; ++i) outer *= x.shape()[i];
  for (std::size_t i = op.dim + 1; i < x.shape().rank(); ++i) inner *= x.shape()[i];
  const std::size_t n = x.shape()[op.dim];
  const std::int64_t* ip = index->data_as<const std::int64_t>();
  std::vector<std::size_t> rows(k);
  for (std::size_t j = 0; j < k; ++j)
    rows[j] = checked(ip[j], op.dim, x.shape(), index->shape(), "select_assign");
  visit_numeric(out->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* sp = src->data_as<const T>();
    T* yp = out->data_as<T>();
    for (std::size_t o = 0; o < outer; ++o) {
      for (std::size_t j = 0; j < k; ++j) {
        T* dst = yp + (o * n + rows[j]) * inner;
        const T* s = sp + (o * k + j) * inner;
        for (std::size_t i = 0; i < inner; ++i) dst[i] = add_values(dst[i], s[i]);
      }
    }
  });
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Nonzero& op) {
  auto x = contiguous(ctx, op.x);
  const Shape& s = x->shape();
  std::vector<bool> nz(s.num_elements());
  std::size_t count = 0;
  visit_numeric(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x->data_as<const T>();
    for (std::size_t p = 0; p < nz.size(); ++p) {
      nz[p] = xp[p] != T(0);
      count += nz[p];
    }
  });
  auto out = ctx.empty(Shape{count, s.rank()}, DType::I64);
  std::int64_t* yp = out->data_as<std::int64_t>();
  std::vector<std::size_t> idx(s.rank());
  std::size_t r = 0;
  for (std::size_t p = 0; p < nz.size(); ++p) {
    if (!nz[p]) continue;
    unravel(p, s, idx);
    for (std::size_t d = 0; d < s.rank(); ++d)
      yp[r * s.rank() + d] = static_cast<std::int64_t>(idx[d]);
    ++r;
  }
  return out;
}

}  // namespace ember::cpu
