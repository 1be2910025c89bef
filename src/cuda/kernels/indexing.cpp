// Indexing launchers: gather, scatter, index_select, index_add. Index values are checked
// on the device where they are read; an out-of-range index raises the device error flag
// and becomes an ember::Error at the next sync point (to_data, sync), naming the op.
#include "cuda/kernels/kernels.hpp"

namespace ember::cuda {
namespace {
void fill_geo(Geo& g, const Shape& s) {
  EMBER_CHECK(s.rank() <= static_cast<std::size_t>(kMaxDims),
              "cuda: indexing handles at most " + std::to_string(kMaxDims) + " dims");
  g.rank = static_cast<std::int32_t>(s.rank());
  g.n = static_cast<std::int64_t>(s.num_elements());
  for (std::size_t i = 0; i < s.rank(); ++i) g.shape[i] = static_cast<std::int64_t>(s[i]);
}
void set_strides(Geo& g, int k, const Strides& st) {
  for (std::size_t i = 0; i < st.size(); ++i) g.st[k][i] = st[i];
}
struct Split {
  std::int64_t outer = 1, n = 1, inner = 1;
};
Split split_at(const Shape& s, std::size_t dim) {
  Split d;
  d.n = static_cast<std::int64_t>(s[dim]);
  for (std::size_t i = 0; i < dim; ++i) d.outer *= static_cast<std::int64_t>(s[i]);
  for (std::size_t i = dim + 1; i < s.rank(); ++i) d.inner *= static_cast<std::int64_t>(s[i]);
  return d;
}
}  // namespace

ir::Handle gather(CudaContext& ctx, ir::Gather& op) {
  auto x = ctx.contiguous(op.x);
  auto index = ctx.contiguous(op.index);
  auto out = ctx.empty(index->shape(), x->dtype());
  Geo g;
  fill_geo(g, index->shape());
  set_strides(g, 0, x->strides());
  if (g.n == 0) return out;
  int dim = static_cast<int>(op.dim);
  std::int64_t extent = static_cast<std::int64_t>(x->shape()[op.dim]);
  void* y = out->data();
  const void* xp = x->data();
  const void* ip = index->data();
  int* err = ctx.error_flag();
  ctx.launch(gen_gather(size_of(x->dtype())), g.n, {&g, &y, &xp, &ip, &dim, &extent, &err},
             "gather", true);
  return out;
}

ir::Handle scatter(CudaContext& ctx, ir::Scatter& op) {
  const auto& x = as_cuda(op.x);
  auto index = ctx.contiguous(op.index);
  auto src = ctx.contiguous(op.src);
  auto out = ctx.empty(x.shape(), x.dtype());
  ctx.copy(x, *out);
  Geo g;
  fill_geo(g, index->shape());
  set_strides(g, 0, out->strides());
  set_strides(g, 1, index->strides());
  // src is read at the index's flat positions, as on the Cpu.
  set_strides(g, 2, contiguous_strides(index->shape()));
  if (g.n == 0) return out;
  int dim = static_cast<int>(op.dim);
  std::int64_t extent = static_cast<std::int64_t>(x.shape()[op.dim]);
  void* y = out->data();
  const void* ip = index->data();
  const void* sp = src->data();
  int* err = ctx.error_flag();
  const std::int64_t lines = g.n / std::max<std::int64_t>(1, g.shape[op.dim]);
  ctx.launch(gen_scatter(x.dtype(), op.add), lines, {&g, &y, &ip, &sp, &dim, &extent, &err},
             op.add ? "scatter_add" : "scatter", true);
  return out;
}

ir::Handle index_select(CudaContext& ctx, ir::IndexSelect& op) {
  auto x = ctx.contiguous(op.x);
  auto index = ctx.contiguous(op.index);
  std::int64_t k = static_cast<std::int64_t>(index->shape()[0]);
  Shape out_shape = x->shape();
  out_shape[op.dim] = static_cast<std::size_t>(k);
  auto out = ctx.empty(out_shape, x->dtype());
  Split d = split_at(x->shape(), op.dim);
  void* y = out->data();
  const void* xp = x->data();
  const void* ip = index->data();
  int* err = ctx.error_flag();
  ctx.launch(gen_index_select(size_of(x->dtype())), d.outer * k * d.inner,
             {&y, &xp, &ip, &d.outer, &d.n, &k, &d.inner, &err}, "select", true);
  return out;
}

ir::Handle index_add(CudaContext& ctx, ir::IndexAdd& op) {
  const auto& x = as_cuda(op.x);
  auto index = ctx.contiguous(op.index);
  auto src = ctx.contiguous(op.src);
  auto out = ctx.empty(x.shape(), x.dtype());
  ctx.copy(x, *out);
  std::int64_t k = static_cast<std::int64_t>(index->shape()[0]);
  Split d = split_at(x.shape(), op.dim);
  void* y = out->data();
  const void* ip = index->data();
  const void* sp = src->data();
  int* err = ctx.error_flag();
  ctx.launch(gen_index_add(x.dtype()), d.outer * d.inner,
             {&y, &ip, &sp, &d.outer, &d.n, &k, &d.inner, &err}, "select_assign", true);
  return out;
}

}  // namespace ember::cuda
