// Layer norm and RMS norm: x, weight and bias made contiguous, then a generated row kernel: rows
// held in registers (gen_layer_norm_regs) up to 4096 elements, else gen_layer_norm's three passes,
// or, for a few long rows, each row split over blocks on batch norm's sums (Note [Long rows]).
// Batch norm and its gradient: operands made contiguous, then the two kernels of Note
// [Channel splits] (codegen/batch_norm.cpp) with f64 partial sums between them. Group norm
// and its gradient: the same sums over x seen as runs of units or of (sample, channel)
// pairs, then group norm's writing pass (Note [Group splits]).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda/codegen.hpp"
#include "cuda/kernels/kernels.hpp"

namespace ember::cuda {

namespace {

// L = prod(*) of x [N, C, *].
std::int64_t spatial(const Shape& shape) {
  std::int64_t l = 1;
  for (std::size_t d = 2; d < shape.rank(); ++d) l *= static_cast<std::int64_t>(shape[d]);
  return l;
}

// x [N, C, *] as C channels of M = N * L values in S chunks (Note [Channel splits]).
struct ChannelSplit {
  std::int64_t c = 0, l = 1, m = 0, s = 1, chunk = 1;
  ChannelSplit(const Shape& shape, int sm_count) {
    const std::int64_t n = static_cast<std::int64_t>(shape[0]);
    c = static_cast<std::int64_t>(shape[1]);
    l = spatial(shape);
    m = n * l;
    // About eight blocks an SM in all (2048 threads, the most an SM holds), and at least
    // 2048 values a chunk.
    const std::int64_t want = 8 * static_cast<std::int64_t>(sm_count);
    s = std::max<std::int64_t>(
        1, (want + std::max<std::int64_t>(c, 1) - 1) / std::max<std::int64_t>(c, 1));
    s = std::min(s, std::max<std::int64_t>(1, m / 2048));
    chunk = std::max<std::int64_t>(1, (m + s - 1) / s);
    s = std::max<std::int64_t>(1, (m + chunk - 1) / chunk);
    if (m == 0) l = 1;  // nothing to walk; keeps the kernels' m / L defined
  }
  std::int64_t blocks() const { return c * s; }
};
constexpr unsigned kChannelBlock = 256;
// Threads a block for chunks of `chunk` values: kChannelBlock, or the chunk rounded up to a
// warp where it is shorter (group norm's runs and units of a few values: a block a run).
unsigned chunk_block(std::int64_t chunk) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((chunk + 31) / 32 * 32, 32, std::int64_t{kChannelBlock}));
}
// Values a thread loads at a time (codegen/batch_norm.cpp): 4, or EMBER_CUDA_BATCH_NORM_UNROLL=1.
int channel_unroll() {
  static const int u = [] {
    const char* v = std::getenv("EMBER_CUDA_BATCH_NORM_UNROLL");
    return v != nullptr && std::string(v) == "1" ? 1 : 4;
  }();
  return u;
}

// Note [Long rows]: layer norm's and RMS norm's row kernels give a row a block (Note [Rows in
// registers] up to rows_max_in_registers elements, then gen_layer_norm's and gen_rms_norm's
// row walks), which leaves most of the device idle when rows are few and long: 64 rows of
// 2^19 values are 64 blocks on 132 SMs, each walking 2 MB. Under kSplitRowsPerSm rows an SM
// (split_rows) a row is instead a unit of Note [Group splits] with one group: x is
// [1, rows, n] for gen_batch_norm_sums (S chunks a row, f64 partials), and rows of K = n
// channels of L = 1 for gen_group_norm_apply, whose per-channel weight and bias
// w[(c % G) K + k] are then indexed by the position k in the row. Every block of a row re-adds
// the row's S partials in one order, so the row's blocks agree bit for bit.
//   layer norm: kShifted sums, the mean and biased variance as group norm's (no statistics out);
//   RMS norm:   kSquares sums of x^2 (g null), rstd = 1 / sqrt(sum(x^2) / n + eps);
//   gradient:   kSquares sums of x^2 and g w x (w by position), dx = rstd w g -
//               x rstd^3 sum(g w x) / n, each row's rstd kept (f64) for dweight, which stays
//               gen_rms_norm's column sums (stages 2 and 3: a thread a column, n threads).
// A row split: x as [1, rows, n] (ChannelSplit's channels are the rows).
ChannelSplit row_split(std::int64_t rows, std::int64_t n, int sm_count) {
  return ChannelSplit(Shape{1, static_cast<std::size_t>(rows), static_cast<std::size_t>(n)},
                      sm_count);
}

// The sums and writing pass of Note [Long rows] over x's rows: kShifted sums and layer norm's
// affine (`rms` false), or kSquares sums (of g w x too where g is given) and RMS norm's y or dx.
void run_row_split(CudaContext& ctx, DType dt, bool rms, const void* xp, const void* gp,
                   const void* wp, const void* bp, double eps, void* yp, void* rsp,
                   std::int64_t rows, std::int64_t n, const char* op) {
  EMBER_ASSERT(rms || gp == nullptr);  // no layer norm gradient op: its backward is composed
  const ChannelSplit sp = row_split(rows, n, ctx.sm_count());
  auto part = ctx.empty(Shape{static_cast<std::size_t>(sp.blocks() * 2)}, DType::F64);
  void* pp = part->data();
  const void* cpp = pp;
  const void* none = nullptr;
  const void* swp = gp != nullptr ? wp : nullptr;  // the sums weigh g alone
  std::int64_t c = sp.c, l = sp.l, m = sp.m, s = sp.s, chunk = sp.chunk, per = 1;
  std::int64_t groups = 1, one = 1, sr = 0;
  const bool grad = gp != nullptr;
  const unsigned block = chunk_block(sp.chunk);
  const std::int64_t threads = sp.blocks() * block;
  ctx.launch(
      BatchNormSumsKernel(dt, rms ? NormSums::kSquares : NormSums::kShifted, channel_unroll()),
      threads, {&xp, &gp, &swp, &none, &pp, &c, &l, &m, &s, &chunk, &per}, op, false, block);
  ctx.launch(GroupNormApplyKernel(dt, grad, rms, channel_unroll()), threads,
             {&xp, &gp, &wp, &bp, &none, &cpp, &eps, &yp, &none, &rsp, &c, &groups, &m, &one, &m,
              &s, &chunk, &sr},
             op, false, block);
}

}  // namespace

ir::Handle run(CudaContext& ctx, ir::LayerNorm& op) {
  auto x = ctx.contiguous(op.x);
  const Shape& s = x->shape();
  auto out = ctx.empty(s, x->dtype());
  std::int64_t n = 1;
  for (std::size_t d = s.rank() - op.dims; d < s.rank(); ++d) n *= static_cast<std::int64_t>(s[d]);
  std::int64_t rows = n == 0 ? 0 : static_cast<std::int64_t>(s.num_elements()) / n;
  if (rows == 0) return out;
  std::shared_ptr<const CudaTensor> w, b;
  if (op.weight) w = ctx.contiguous(op.weight);
  if (op.bias) b = ctx.contiguous(op.bias);
  const void* xp = x->data();
  const void* wp = w ? w->data() : nullptr;
  const void* bp = b ? b->data() : nullptr;
  void* yp = out->data();
  double eps = op.eps;
  const DType dt = x->dtype();
  if (const auto [block, ept, vec] = rows_in_registers(n, dt, aligned16({xp, wp, bp, yp}));
      block > 0) {  // Note [Rows in registers]
    ctx.launch(LayerNormRegsKernel(dt, ept, vec), rows * block,
               {&xp, &wp, &bp, &eps, &yp, &rows, &n}, "layer_norm", false, block,
               CudaContext::kOneWave);
    return out;
  }
  if (split_rows(rows, n, dt, ctx.sm_count())) {  // Note [Long rows]
    run_row_split(ctx, dt, false, xp, nullptr, wp, bp, eps, yp, nullptr, rows, n, "layer_norm");
    return out;
  }
  constexpr unsigned kBlock = 256;
  ctx.launch(LayerNormKernel(dt), rows * kBlock, {&xp, &wp, &bp, &eps, &yp, &rows, &n},
             "layer_norm", false, kBlock, 1 << 20);
  return out;
}

std::vector<ir::Handle> run(CudaContext& ctx, ir::BatchNorm& op) {
  auto x = ctx.contiguous(op.x);
  const DType dt = x->dtype();
  const ChannelSplit sp(x->shape(), ctx.sm_count());
  auto y = ctx.empty(x->shape(), dt);
  auto stats = ctx.empty(Shape{2, static_cast<std::size_t>(sp.c)}, dt);
  if (sp.c == 0) return {y, stats};
  std::shared_ptr<const CudaTensor> w, b;
  if (op.weight) w = ctx.contiguous(op.weight);
  if (op.bias) b = ctx.contiguous(op.bias);
  auto part = ctx.empty(Shape{static_cast<std::size_t>(sp.blocks() * 2)}, DType::F64);
  const void* xp = x->data();
  const void* none = nullptr;
  const void* wp = w ? w->data() : nullptr;
  const void* bp = b ? b->data() : nullptr;
  void* pp = part->data();
  const void* cpp = pp;
  void* yp = y->data();
  void* sp2 = stats->data();
  double eps = op.eps;
  std::int64_t c = sp.c, l = sp.l, m = sp.m, s = sp.s, chunk = sp.chunk;
  const std::int64_t threads = sp.blocks() * kChannelBlock;
  std::int64_t per = 1;
  ctx.launch(BatchNormSumsKernel(dt, NormSums::kShifted, channel_unroll()), threads,
             {&xp, &none, &none, &none, &pp, &c, &l, &m, &s, &chunk, &per}, "batch_norm", false,
             kChannelBlock);
  ctx.launch(BatchNormApplyKernel(dt, false, channel_unroll()), threads,
             {&xp, &none, &wp, &bp, &none, &cpp, &eps, &yp, &sp2, &c, &l, &m, &s, &chunk},
             "batch_norm", false, kChannelBlock);
  return {y, stats};
}

std::vector<ir::Handle> run(CudaContext& ctx, ir::BatchNormGrad& op) {
  auto x = ctx.contiguous(op.x);
  auto g = ctx.contiguous(op.g);
  auto stats = ctx.contiguous(op.stats);
  const DType dt = x->dtype();
  const ChannelSplit sp(x->shape(), ctx.sm_count());
  auto dx = ctx.empty(x->shape(), dt);
  auto dwb = ctx.empty(Shape{2, static_cast<std::size_t>(sp.c)}, dt);
  if (sp.c == 0) return {dx, dwb};
  std::shared_ptr<const CudaTensor> w;
  if (op.weight) w = ctx.contiguous(op.weight);
  auto part = ctx.empty(Shape{static_cast<std::size_t>(sp.blocks() * 2)}, DType::F64);
  const void* xp = x->data();
  const void* gp = g->data();
  const void* stp = stats->data();
  const void* none = nullptr;
  const void* wp = w ? w->data() : nullptr;
  void* pp = part->data();
  const void* cpp = pp;
  void* dp = dx->data();
  void* op2 = dwb->data();
  double eps = op.eps;
  std::int64_t c = sp.c, l = sp.l, m = sp.m, s = sp.s, chunk = sp.chunk;
  const std::int64_t threads = sp.blocks() * kChannelBlock;
  std::int64_t per = 1;
  ctx.launch(BatchNormSumsKernel(dt, NormSums::kGrad, channel_unroll()), threads,
             {&xp, &gp, &none, &stp, &pp, &c, &l, &m, &s, &chunk, &per}, "batch_norm_grad", false,
             kChannelBlock);
  ctx.launch(BatchNormApplyKernel(dt, true, channel_unroll()), threads,
             {&xp, &gp, &wp, &none, &stp, &cpp, &eps, &dp, &op2, &c, &l, &m, &s, &chunk},
             "batch_norm_grad", false, kChannelBlock);
  return {dx, dwb};
}

// RMS norm: rows in registers (gen_rms_norm_regs) up to 4096 elements, as layer norm, else
// gen_rms_norm's block per row, or a few long rows split (Note [Long rows]).
ir::Handle run(CudaContext& ctx, ir::RmsNorm& op) {
  auto x = ctx.contiguous(op.x);
  const Shape& s = x->shape();
  auto out = ctx.empty(s, x->dtype());
  std::int64_t n = 1;
  for (std::size_t d = s.rank() - op.dims; d < s.rank(); ++d) n *= static_cast<std::int64_t>(s[d]);
  std::int64_t rows = n == 0 ? 0 : static_cast<std::int64_t>(s.num_elements()) / n;
  if (rows == 0) return out;
  std::shared_ptr<const CudaTensor> w;
  if (op.weight) w = ctx.contiguous(op.weight);
  const void* xp = x->data();
  const void* wp = w ? w->data() : nullptr;
  void* yp = out->data();
  double eps = op.eps;
  const DType dt = x->dtype();
  if (const auto [block, ept, vec] = rows_in_registers(n, dt, aligned16({xp, wp, yp}));
      block > 0) {  // Note [Rows in registers]
    ctx.launch(RmsNormRegsKernel(dt, ept, vec), rows * block, {&xp, &wp, &eps, &yp, &rows, &n},
               "rms_norm", false, block, CudaContext::kOneWave);
    return out;
  }
  if (split_rows(rows, n, dt, ctx.sm_count())) {  // Note [Long rows]
    run_row_split(ctx, dt, true, xp, nullptr, wp, nullptr, eps, yp, nullptr, rows, n, "rms_norm");
    return out;
  }
  constexpr unsigned kBlock = 256;
  ctx.launch(RmsNormKernel(dt, 0), rows * kBlock, {&xp, &wp, &eps, &yp, &rows, &n}, "rms_norm",
             false, kBlock, 1 << 20);
  return out;
}

// dx a block per row, or a few long rows split (Note [Long rows]), each row's rstd kept in
// f64; then dweight's column sums over chunks of about 64 rows and the chunks' partials added
// in order.
std::vector<ir::Handle> run(CudaContext& ctx, ir::RmsNormGrad& op) {
  auto x = ctx.contiguous(op.x);
  auto g = ctx.contiguous(op.g);
  const DType dt = x->dtype();
  const Shape& s = x->shape();
  auto dx = ctx.empty(s, dt);
  auto dw = ctx.empty(ir::out_shape(op, 1), dt);
  std::int64_t n = 1;
  for (std::size_t d = s.rank() - op.dims; d < s.rank(); ++d) n *= static_cast<std::int64_t>(s[d]);
  std::int64_t rows = n == 0 ? 0 : static_cast<std::int64_t>(s.num_elements()) / n;
  if (n == 0) return {dx, dw};
  std::shared_ptr<const CudaTensor> w;
  if (op.weight) w = ctx.contiguous(op.weight);
  std::int64_t chunk = 64;
  std::int64_t parts = std::max<std::int64_t>(1, (rows + chunk - 1) / chunk);
  auto rs = ctx.empty(Shape{static_cast<std::size_t>(std::max<std::int64_t>(rows, 1))}, DType::F64);
  auto part = ctx.empty(Shape{static_cast<std::size_t>(parts * n)}, DType::F64);
  const void* xp = x->data();
  const void* gp = g->data();
  const void* wp = w ? w->data() : nullptr;
  void* dp = dx->data();
  void* rp = rs->data();
  const void* crp = rp;
  void* pp = part->data();
  const void* cpp = pp;
  void* dwp = dw->data();
  double eps = op.eps;
  constexpr unsigned kBlock = 256;
  if (rows > 0) {
    if (split_rows(rows, n, dt, ctx.sm_count()))  // Note [Long rows]
      run_row_split(ctx, dt, true, xp, gp, wp, nullptr, eps, dp, rp, rows, n, "rms_norm_grad");
    else
      ctx.launch(RmsNormKernel(dt, 1), rows * kBlock, {&xp, &wp, &gp, &eps, &dp, &rp, &rows, &n},
                 "rms_norm_grad", false, kBlock, 1 << 20);
    ctx.launch(RmsNormKernel(dt, 2), parts * n, {&xp, &gp, &crp, &pp, &rows, &n, &chunk},
               "rms_norm_grad", false, kBlock);
  } else {
    parts = 0;  // no rows: dweight is zeros (the sum of no partials)
  }
  ctx.launch(RmsNormKernel(dt, 3), n, {&cpp, &dwp, &n, &parts}, "rms_norm_grad", false, kBlock);
  return {dx, dw};
}

namespace {
// x [N, C, *] in G groups (Note [Group splits]): units, the N G runs of M = K L values a
// (sample, group), for the statistics; runs, the N C runs of L values a (sample, channel),
// for the gradient's sums.
struct GroupSplits {
  std::int64_t n, c, g, k, l, m;
  ChannelSplit units, runs;
  GroupSplits(const Shape& s, std::size_t groups, int sm_count)
      : n(static_cast<std::int64_t>(s[0])),
        c(static_cast<std::int64_t>(s[1])),
        g(static_cast<std::int64_t>(groups)),
        k(c / g),
        l(spatial(s)),
        m(k * l),
        units(Shape{1, s[0] * groups, static_cast<std::size_t>(m)}, sm_count),
        runs(Shape{1, s[0] * s[1], static_cast<std::size_t>(l)}, sm_count) {}
  // L as the apply kernel takes it: any positive value where no unit has values.
  std::int64_t walk_l() const { return m == 0 ? 1 : l; }
};
}  // namespace

std::vector<ir::Handle> run(CudaContext& ctx, ir::GroupNorm& op) {
  auto x = ctx.contiguous(op.x);
  const DType dt = x->dtype();
  const GroupSplits gs(x->shape(), op.groups, ctx.sm_count());
  auto y = ctx.empty(x->shape(), dt);
  auto stats = ctx.empty(Shape{2, static_cast<std::size_t>(gs.units.c)}, dt);
  if (gs.units.c == 0) return {y, stats};
  std::shared_ptr<const CudaTensor> w, b;
  if (op.weight) w = ctx.contiguous(op.weight);
  if (op.bias) b = ctx.contiguous(op.bias);
  auto part = ctx.empty(Shape{static_cast<std::size_t>(gs.units.blocks() * 2)}, DType::F64);
  const void* xp = x->data();
  const void* none = nullptr;
  const void* wp = w ? w->data() : nullptr;
  const void* bp = b ? b->data() : nullptr;
  void* pp = part->data();
  const void* cpp = pp;
  void* yp = y->data();
  void* sp2 = stats->data();
  double eps = op.eps;
  std::int64_t units = gs.units.c, ul = gs.units.l, um = gs.units.m, us = gs.units.s,
               uchunk = gs.units.chunk, per = 1;
  std::int64_t groups = gs.g, k = gs.k, l = gs.walk_l(), m = gs.m, sr = 0;
  const unsigned block = chunk_block(gs.units.chunk);
  const std::int64_t threads = gs.units.blocks() * block;
  ctx.launch(BatchNormSumsKernel(dt, NormSums::kShifted, channel_unroll()), threads,
             {&xp, &none, &none, &none, &pp, &units, &ul, &um, &us, &uchunk, &per}, "group_norm",
             false, block);
  ctx.launch(GroupNormApplyKernel(dt, false, false, channel_unroll()), threads,
             {&xp, &none, &wp, &bp, &none, &cpp, &eps, &yp, &sp2, &none, &units, &groups, &k, &l,
              &m, &us, &uchunk, &sr},
             "group_norm", false, block);
  return {y, stats};
}

std::vector<ir::Handle> run(CudaContext& ctx, ir::GroupNormGrad& op) {
  auto x = ctx.contiguous(op.x);
  auto g = ctx.contiguous(op.g);
  auto stats = ctx.contiguous(op.stats);
  const DType dt = x->dtype();
  const GroupSplits gs(x->shape(), op.groups, ctx.sm_count());
  auto dx = ctx.empty(x->shape(), dt);
  auto dwb = ctx.empty(Shape{2, static_cast<std::size_t>(gs.c)}, dt);
  std::shared_ptr<const CudaTensor> w;
  if (op.weight) w = ctx.contiguous(op.weight);
  auto part = ctx.empty(
      Shape{static_cast<std::size_t>(std::max<std::int64_t>(1, gs.runs.blocks()) * 2)}, DType::F64);
  const void* xp = x->data();
  const void* gp = g->data();
  const void* stp = stats->data();
  const void* none = nullptr;
  const void* wp = w ? w->data() : nullptr;
  void* pp = part->data();
  const void* cpp = pp;
  void* dp = dx->data();
  void* op2 = dwb->data();
  double eps = op.eps;
  std::int64_t runs = gs.runs.c, rl = gs.runs.l, rm = gs.runs.m, rs = gs.runs.s,
               rchunk = gs.runs.chunk, per = gs.k;
  std::int64_t units = gs.units.c, us = gs.units.s, uchunk = gs.units.chunk;
  std::int64_t n = gs.n, c = gs.c, groups = gs.g, k = gs.k, l = gs.walk_l(), m = gs.m;
  const unsigned run_block = chunk_block(gs.runs.chunk), unit_block = chunk_block(gs.units.chunk);
  // Every launch below is skipped where it has no threads: no runs (N or C zero) leave no
  // sums and dwb zeros (the sums of no samples), as the Cpu.
  ctx.launch(BatchNormSumsKernel(dt, NormSums::kGrad, channel_unroll()),
             gs.runs.blocks() * run_block,
             {&xp, &gp, &none, &stp, &pp, &runs, &rl, &rm, &rs, &rchunk, &per}, "group_norm_grad",
             false, run_block);
  ctx.launch(GroupNormApplyKernel(dt, true, false, channel_unroll()),
             gs.units.blocks() * unit_block,
             {&xp, &gp, &wp, &none, &stp, &cpp, &eps, &dp, &none, &none, &units, &groups, &k, &l,
              &m, &us, &uchunk, &rs},
             "group_norm_grad", false, unit_block);
  ctx.launch(GroupNormAffineGradKernel(dt), c, {&stp, &cpp, &eps, &op2, &n, &c, &groups, &rs},
             "group_norm_grad", false, kChannelBlock);
  return {dx, dwb};
}

}  // namespace ember::cuda
