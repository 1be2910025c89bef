// Indexing launchers: gather, scatter, index_select, index_add, nonzero. Index values are
// checked on the device where they are read; an out-of-range index raises the device error
// flag and becomes an ember::Error at the next sync point (to_data, sync), naming the op.
#include <cstring>
#include <mutex>

#include "cuda/kernels/kernels.hpp"
#include "ember/backend/strided_view.hpp"

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
// Kernel arguments: the split as i64 (backend::split_at).
using Split = backend::DimSplit<std::int64_t>;
Split split_at(const Shape& s, std::size_t dim) { return backend::split_at<std::int64_t>(s, dim); }

// Exclusive prefix sum of the i64 array a[0, n) in place: each tile is scanned by one block,
// the tile totals are scanned the same way (recursively, so any n works), and each
// element gets its tile's offset added.
void exclusive_scan(CudaContext& ctx, void* a, std::int64_t n) {
  std::int64_t tiles = (n + kScanTile - 1) / kScanTile;
  auto sums = ctx.empty(Shape{static_cast<std::size_t>(tiles)}, DType::I64);
  void* sp = sums->data();
  ctx.launch(ScanTilesKernel(), tiles * kScanBlock, {&a, &n, &sp}, "nonzero", false,
             static_cast<unsigned>(kScanBlock));
  if (tiles == 1) return;
  exclusive_scan(ctx, sp, tiles);
  ctx.launch(AddTileOffsetsKernel(), n, {&a, &n, &sp}, "nonzero");
}
}  // namespace

ir::Handle run(CudaContext& ctx, ir::Gather& op) {
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
  const std::size_t elem = size_of(x->dtype());
  ctx.launch(GatherKernel(elem), g.n, {&g, &y, &xp, &ip, &dim, &extent, &err}, "gather", true);
  return out;
}

ir::Handle run(CudaContext& ctx, ir::Scatter& op) {
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
  const DType dt = x.dtype();
  const bool add = op.add;
  ctx.launch(ScatterKernel(dt, add), lines, {&g, &y, &ip, &sp, &dim, &extent, &err},
             add ? "scatter_add" : "scatter", true);
  return out;
}

ir::Handle run(CudaContext& ctx, ir::IndexSelect& op) {
  auto out = ctx.empty(ir::out_shape(op), ir::out_dtype(op));
  auto x = ctx.contiguous(op.x);
  auto index = ctx.contiguous(op.index);
  std::int64_t k = static_cast<std::int64_t>(index->shape()[0]);
  Split d = split_at(x->shape(), op.dim);
  void* y = out->data();
  const void* xp = x->data();
  const void* ip = index->data();
  int* err = ctx.error_flag();
  const std::size_t elem = size_of(x->dtype());
  ctx.launch(IndexSelectKernel(elem), d.outer * k * d.inner,
             {&y, &xp, &ip, &d.outer, &d.n, &k, &d.inner, &err}, "select", true);
  return out;
}

ir::Handle run(CudaContext& ctx, ir::IndexAdd& op) {
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
  const DType dt = x.dtype();
  // Note [Index add by rows]: the column kernel runs one thread per (outer, inner) column,
  // each adding its k entries one after another — k dependent read-modify-writes, so an
  // embedding's gradient ([vocab, d] from k tokens: d threads) takes k memory latencies.
  // Where the output has few elements (n * outer * inner up to 2^22), one thread per output
  // element scans the k indices for its row instead: n times the comparisons, in parallel,
  // and the same additions in the same order.
  const bool rows = d.n * d.outer * d.inner <= (std::int64_t(1) << 22);
  ctx.launch(IndexAddKernel(dt, rows), rows ? d.n * d.outer * d.inner : d.outer * d.inner,
             {&y, &ip, &sp, &d.outer, &d.n, &k, &d.inner, &err}, "select_assign", true);
  return out;
}

// Counts per tile, their exclusive scan (the output row of each tile's first non-zero), one
// read of the total — the output's shape depends on it — then each tile writes the
// coordinates of its non-zeros in row-major order.
ir::Handle run(CudaContext& ctx, ir::Nonzero& op) {
  auto x = ctx.contiguous(op.x);
  const Shape& s = x->shape();
  const DType dt = x->dtype();
  EMBER_CHECK(s.rank() <= static_cast<std::size_t>(kMaxDims),
              "nonzero: the Cuda backend handles at most " + std::to_string(kMaxDims) +
                  " dims, got shape " + s.to_string());
  std::int64_t n = static_cast<std::int64_t>(s.num_elements());
  if (n == 0) return ctx.empty(Shape{0, s.rank()}, DType::I64);
  const std::int64_t tiles = (n + kScanTile - 1) / kScanTile;
  auto offsets = ctx.empty(Shape{static_cast<std::size_t>(tiles + 1)}, DType::I64);
  void* offp = offsets->data();
  const void* xp = x->data();
  // The tile past the end counts 0, so after the scan offsets[tiles] is the total.
  std::int64_t counted = tiles + 1;
  ctx.launch(NonzeroCountKernel(dt), counted * kScanBlock, {&xp, &n, &offp, &counted}, "nonzero",
             false, kScanBlock);
  exclusive_scan(ctx, offp, counted);
  std::int64_t count = 0;
  {
    std::lock_guard lk(ctx.staging_mutex());
    void* pinned = ctx.staging(sizeof count);
    check(cudaMemcpyAsync(pinned, static_cast<std::int64_t*>(offp) + tiles, sizeof count,
                          cudaMemcpyDeviceToHost, ctx.stream()),
          "nonzero: reading the count");
    ctx.sync();
    std::memcpy(&count, pinned, sizeof count);
  }
  auto out = ctx.empty(Shape{static_cast<std::size_t>(count), s.rank()}, DType::I64);
  if (count == 0 || s.rank() == 0) return out;
  Geo g;
  fill_geo(g, s);
  void* yp = out->data();
  ctx.launch(NonzeroWriteKernel(dt), tiles * kScanBlock, {&g, &xp, &offp, &yp}, "nonzero", false,
             kScanBlock);
  return out;
}

}  // namespace ember::cuda
