// Scaled dot-product attention and its gradient: operands made contiguous with the batch
// dims flattened (q [B, Lq, E], k [B, Lk, E], v [B, Lk, Ev]), the mask read in place of its
// own shape through broadcast strides, then the flash-style kernels of
// codegen/attention.cpp: one launch forward; three backward (D = rowsum(g o y), dk and dv,
// dq: Note [Attention warps]).
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

#include "cuda/codegen.hpp"
#include "cuda/kernels/kernels.hpp"

namespace ember::cuda {

namespace {

// Work items of 8 rows each (Note [Attention warps]); every block loops over items with a
// grid stride, so the grid is capped only by what a launch takes.
constexpr unsigned kBlock = 256;
constexpr std::int64_t kRowsPerItem = 8;
constexpr std::int64_t kMaxGrid = std::numeric_limits<std::int32_t>::max();

// EMBER_CUDA_ATTENTION_MMA=0 keeps f16 / bf16 attention on the SIMT kernels.
bool tensor_cores() {
  static const bool on = [] {
    const char* v = std::getenv("EMBER_CUDA_ATTENTION_MMA");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

struct Problem {
  std::shared_ptr<const CudaTensor> q, k, v, mask;
  DType dt = DType::F32;
  int dm = 0;
  std::int64_t b = 1, lq = 0, lk = 0, e = 0, ev = 0;
  Geo mg;  // rank: the batch dims; shape: their extents; st[0]: the mask's strides along them
  std::int64_t mrs = 0, mcs = 0;
  int mask_kind = 0;  // 0 none, 1 Bool, 2 additive
  int causal = 0;
  double scale = 1.0;

  Problem(CudaContext& ctx, const ir::Handle& qh, const ir::Handle& kh, const ir::Handle& vh,
          const ir::Handle& maskh, bool is_causal, double sc)
      : q(ctx.contiguous(qh)),
        k(ctx.contiguous(kh)),
        v(ctx.contiguous(vh)),
        dt(qh->dtype()),
        causal(is_causal ? 1 : 0),
        scale(sc) {
    const Shape &qs = qh->shape(), &ks = kh->shape(), &vs = vh->shape();
    const std::size_t r = qs.rank();
    mg.rank = static_cast<std::int32_t>(r - 2);
    for (std::size_t d = 0; d + 2 < r; ++d) {
      b *= static_cast<std::int64_t>(qs[d]);
      mg.shape[d] = static_cast<std::int64_t>(qs[d]);
    }
    lq = static_cast<std::int64_t>(qs[r - 2]);
    e = static_cast<std::int64_t>(qs[r - 1]);
    lk = static_cast<std::int64_t>(ks[r - 2]);
    ev = static_cast<std::int64_t>(vs[r - 1]);
    dm = attention_head_dim_bound(dt, qs[r - 1], vs[r - 1]);
    EMBER_ASSERT(dm > 0);  // supports() refused the rest
    if (maskh) {
      mask = ctx.contiguous(maskh);
      mask_kind = maskh->dtype() == DType::Bool ? 1 : 2;
      // Contiguous strides of the mask's own shape, 0 along its broadcast (extent 1) dims.
      const Shape& ms = maskh->shape();
      std::int64_t acc = 1;
      std::vector<std::int64_t> st(r);
      for (std::size_t d = r; d-- > 0;) {
        st[d] = ms[d] == 1 ? 0 : acc;
        acc *= static_cast<std::int64_t>(ms[d]);
      }
      for (std::size_t d = 0; d + 2 < r; ++d) mg.st[0][d] = st[d];
      mrs = st[r - 2];
      mcs = st[r - 1];
    }
  }
};

// Note [Attention on tensor cores]: f16 and bf16 with head dims in multiples of 16, from
// sm_80: 16 rows a warp (attention_mma_warps: 8 warps a block for queries, 4 for the dk /
// dv pass's keys); else the SIMT kernels, 8 rows a block of 256.
bool on_tensor_cores(const CudaContext& ctx, const Problem& p) {
  return is_half(p.dt) && p.e % 16 == 0 && p.ev % 16 == 0 && ctx.arch() >= 80 && tensor_cores();
}

}  // namespace

bool attention_supported(const ir::Handle& q, const ir::Handle& v) {
  const Shape& qs = q->shape();
  if (qs.rank() < 2 || qs.rank() - 2 > static_cast<std::size_t>(kMaxDims)) return false;
  return attention_head_dim_bound(q->dtype(), qs[qs.rank() - 1],
                                  v->shape()[v->shape().rank() - 1]) > 0;
}

std::vector<ir::Handle> run(CudaContext& ctx, ir::Attention& op) {
  Problem p(ctx, op.q, op.k, op.v, op.mask, op.causal, op.scale);
  auto out = ctx.empty(ir::out_shape(op, 0), ir::out_dtype(op, 0));
  auto lse = ctx.empty(ir::out_shape(op, 1), ir::out_dtype(op, 1));
  const void* qp = p.q->data();
  const void* kp = p.k->data();
  const void* vp = p.v->data();
  const void* mp = p.mask ? p.mask->data() : nullptr;
  void* op_ = out->data();
  void* lp = lse->data();
  const bool mma = on_tensor_cores(ctx, p);
  const int warps = attention_mma_warps(kAttentionForwardMma);
  const std::int64_t rows_per_item = mma ? 16 * warps : kRowsPerItem;
  const unsigned block = mma ? 32u * static_cast<unsigned>(warps) : kBlock;
  const std::int64_t items = p.b * ((p.lq + rows_per_item - 1) / rows_per_item);
  ctx.launch(AttentionKernel(p.dt, mma ? kAttentionForwardMma : kAttentionForward, p.dm),
             items * block,
             {&qp, &kp, &vp, &mp, &p.mask_kind, &p.mg, &p.mrs, &p.mcs, &p.b, &p.lq, &p.lk, &p.e,
              &p.ev, &p.causal, &p.scale, &op_, &lp},
             "attention", false, block, kMaxGrid);
  return {out, lse};
}

std::vector<ir::Handle> run(CudaContext& ctx, ir::AttentionGrad& op) {
  Problem p(ctx, op.q, op.k, op.v, op.mask, op.causal, op.scale);
  auto y = ctx.contiguous(op.y);
  auto lse = ctx.contiguous(op.lse);
  auto g = ctx.contiguous(op.g);
  auto dq = ctx.empty(op.q->shape(), p.dt);
  auto dk = ctx.empty(op.k->shape(), p.dt);
  auto dv = ctx.empty(op.v->shape(), p.dt);
  // D = rowsum(g o y), in the lse's dtype (the kernels' compute type).
  std::int64_t rows = p.b * p.lq;
  auto d = ctx.empty(Shape{static_cast<std::size_t>(rows)}, op.lse->dtype());
  const void* qp = p.q->data();
  const void* kp = p.k->data();
  const void* vp = p.v->data();
  const void* mp = p.mask ? p.mask->data() : nullptr;
  const void* yp = y->data();
  const void* lp = lse->data();
  const void* gp = g->data();
  void* dp = d->data();
  const void* cdp = dp;
  void* dqp = dq->data();
  void* dkp = dk->data();
  void* dvp = dv->data();
  ctx.launch(AttentionKernel(p.dt, kAttentionRowDot, 32), rows * 32, {&gp, &yp, &dp, &rows, &p.ev},
             "attention_grad", false, kBlock);
  const bool mma = on_tensor_cores(ctx, p);
  // A pass's rows a block and threads a block (Note [Attention on tensor cores]).
  const auto shape = [&](int stage) {
    const int warps = attention_mma_warps(stage);
    return std::pair<std::int64_t, unsigned>{mma ? 16 * warps : kRowsPerItem,
                                             mma ? 32u * static_cast<unsigned>(warps) : kBlock};
  };
  const auto [key_rows, key_block] = shape(kAttentionGradKVMma);
  const std::int64_t key_items = p.b * ((p.lk + key_rows - 1) / key_rows);
  ctx.launch(AttentionKernel(p.dt, mma ? kAttentionGradKVMma : kAttentionGradKV, p.dm),
             key_items * key_block,
             {&qp,   &kp,  &vp,   &mp,       &p.mask_kind, &p.mg, &p.mrs, &p.mcs, &p.b, &p.lq,
              &p.lk, &p.e, &p.ev, &p.causal, &p.scale,     &gp,   &lp,    &cdp,   &dkp, &dvp},
             "attention_grad", false, key_block, kMaxGrid);
  const auto [query_rows, query_block] = shape(kAttentionGradQMma);
  const std::int64_t query_items = p.b * ((p.lq + query_rows - 1) / query_rows);
  ctx.launch(AttentionKernel(p.dt, mma ? kAttentionGradQMma : kAttentionGradQ, p.dm),
             query_items * query_block,
             {&qp, &kp, &vp, &mp, &p.mask_kind, &p.mg, &p.mrs, &p.mcs, &p.b, &p.lq, &p.lk, &p.e,
              &p.ev, &p.causal, &p.scale, &gp, &lp, &cdp, &dqp},
             "attention_grad", false, query_block, kMaxGrid);
  return {dq, dk, dv};
}

}  // namespace ember::cuda
