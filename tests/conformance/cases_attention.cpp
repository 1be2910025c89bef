// scaled_dot_product_attention against an f64 softmax(scale q k^T + mask) v: no mask, causal
// (Lq == Lk, Lq < Lk, Lq > Lk), a Bool mask with a row of no keys (0, as PyTorch), a float
// mask broadcast over the heads (with -inf entries), E != Ev, extents 1, odd extents that
// cross the Cpu kernel's 64-row tiles, broadcast batch dims, rank 2, an explicit scale,
// empty extents.
#include <cmath>
#include <limits>
#include <optional>

#include "conformance/harness.hpp"

namespace conformance {
namespace {

namespace ops = ember::ops;

enum Mode { kNoMask = 0, kCausal = 1, kBoolMask = 2, kFloatMask = 3 };

// The float mask of the kFloatMask trials, a fixed function of its coordinates (made
// inside run, so that grad mode does not differentiate it: the function records a float
// mask as detached): [batch, 1, Lq, Lk], -inf on a few entries but never a whole row.
double float_mask_at(std::size_t b, std::size_t i, std::size_t j) {
  if ((i + 2 * j + b) % 7 == 3 && j != i % 3) return -std::numeric_limits<double>::infinity();
  return 0.75 * std::sin(0.9 * static_cast<double>(i) + 1.7 * static_cast<double>(j) +
                         static_cast<double>(b));
}
HostTensor float_mask(std::size_t batch, std::size_t lq, std::size_t lk, DType dt) {
  HostTensor m(Shape{batch, 1, lq, lk}, dt);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < lq; ++i)
      for (std::size_t j = 0; j < lk; ++j)
        m.v[(b * lq + i) * lk + j] = quantize(dt, float_mask_at(b, i, j));
  return m;
}

Shape batch_of(const Shape& s) { return Shape(s.dims().begin(), s.dims().end() - 2); }

// The reference's softmax rows in f64: P[j] for query i of batch index b (of the broadcast
// batch shape), 0 where the key is left out and along a row without keys.
struct Softmax {
  const HostTensor &q, &k;
  const HostTensor* bool_mask;
  Mode mode;
  double scale;
  std::size_t lq, lk, e;
  Shape batch;
  HostTensor float_mask_values;

  Softmax(const HostTensor& q_, const HostTensor& k_, const HostTensor* mask, const Params& p)
      : q(q_),
        k(k_),
        bool_mask(mask),
        mode(static_cast<Mode>(p[0])),
        lq(q_.shape[q_.rank() - 2]),
        lk(k_.shape[k_.rank() - 2]),
        e(q_.shape[q_.rank() - 1]),
        batch(broadcast(batch_of(q_.shape), batch_of(k_.shape))) {
    scale = p[1] != 0 ? p[1] : 1.0 / std::sqrt(static_cast<double>(e));
    if (mode == kFloatMask) float_mask_values = float_mask(q.shape[0], lq, lk, q.dtype);
  }

  void row(std::size_t b, std::size_t i, std::vector<double>& pr) const {
    const double inf = std::numeric_limits<double>::infinity();
    const auto idx = unravel(b, batch);
    const std::size_t oq = broadcast_index(idx, batch_of(q.shape)) * lq * e;
    const std::size_t ok = broadcast_index(idx, batch_of(k.shape)) * lk * e;
    pr.assign(lk, 0.0);
    double mx = -inf;
    for (std::size_t j = 0; j < lk; ++j) {
      double d = 0;
      for (std::size_t c = 0; c < e; ++c) d += q.v[oq + i * e + c] * k.v[ok + j * e + c];
      d *= scale;
      if (mode == kCausal && j > i) d = -inf;
      if (mode == kFloatMask) d += float_mask_values.v[(idx[0] * lq + i) * lk + j];
      if (mode == kBoolMask) {
        std::vector<std::size_t> at = idx;
        at.push_back(i);
        at.push_back(j);
        if (bool_mask->v[broadcast_index(at, bool_mask->shape)] == 0) d = -inf;
      }
      pr[j] = d;
      mx = std::max(mx, d);
    }
    if (mx == -inf) {  // no key: 0
      pr.assign(lk, 0.0);
      return;
    }
    double sum = 0;
    for (double& x : pr) sum += x = std::exp(x - mx);
    for (double& x : pr) x /= sum;
  }
};

}  // namespace

void add_attention_cases(std::vector<Case>& cs) {
  Case c;
  c.fn = "scaled_dot_product_attention";
  c.family = "normalization";
  c.dtypes = kAllFloats;
  c.trials = [](DType dt, Scale scale) {
    Rng rng(131);
    struct T {
      Shape q, k, v;
      Mode mode;
      double scale;  // 0: the default 1 / sqrt(E)
      Shape mask;    // kBoolMask: the mask's shape
    };
    std::vector<T> spec;
    if (scale == Scale::Perf) {
      spec = {{Shape{2, 4, 256, 64}, Shape{2, 4, 256, 64}, Shape{2, 4, 256, 64}, kNoMask, 0, {}}};
    } else {
      spec = {
          {Shape{2, 3, 5, 4}, Shape{2, 3, 7, 4}, Shape{2, 3, 7, 6}, kNoMask, 0, {}},
          {Shape{2, 2, 9, 8}, Shape{2, 2, 9, 8}, Shape{2, 2, 9, 8}, kCausal, 0, {}},
          {Shape{1, 2, 5, 3}, Shape{1, 2, 11, 3}, Shape{1, 2, 11, 2}, kCausal, 0, {}},
          {Shape{1, 1, 13, 4}, Shape{1, 1, 6, 4}, Shape{1, 1, 6, 4}, kCausal, 0, {}},
          {Shape{2, 2, 6, 5}, Shape{2, 2, 9, 5}, Shape{2, 2, 9, 3}, kBoolMask, 0, Shape{6, 9}},
          {Shape{2, 2, 4, 3}, Shape{2, 2, 5, 3}, Shape{2, 2, 5, 3}, kBoolMask, 0.5,
           Shape{2, 1, 1, 5}},
          {Shape{2, 3, 7, 4}, Shape{2, 3, 10, 4}, Shape{2, 3, 10, 5}, kFloatMask, 0, {}},
          {Shape{1, 1, 1, 1}, Shape{1, 1, 1, 1}, Shape{1, 1, 1, 1}, kNoMask, 0, {}},
          {Shape{1, 1, 1, 1}, Shape{1, 1, 1, 1}, Shape{1, 1, 1, 1}, kCausal, 0, {}},
          {Shape{1, 2, 70, 9}, Shape{1, 2, 131, 9}, Shape{1, 2, 131, 5}, kNoMask, 0, {}},
          {Shape{1, 1, 100, 8}, Shape{1, 1, 100, 8}, Shape{1, 1, 100, 8}, kCausal, 0, {}},
          {Shape{1, 65, 3}, Shape{1, 130, 3}, Shape{1, 130, 2}, kBoolMask, 0, Shape{65, 130}},
          {Shape{2, 3, 5, 4}, Shape{3, 6, 4}, Shape{1, 3, 6, 2}, kNoMask, 0, {}},
          {Shape{5, 3}, Shape{4, 3}, Shape{4, 2}, kNoMask, 0.3, {}},
          // Empty extents: no keys (0, as PyTorch), no queries, Ev = 0, E = 0 (a scale given).
          {Shape{1, 2, 3, 4}, Shape{1, 2, 0, 4}, Shape{1, 2, 0, 5}, kNoMask, 0, {}},
          {Shape{2, 0, 4}, Shape{2, 3, 4}, Shape{2, 3, 2}, kCausal, 0, {}},
          {Shape{2, 3, 4}, Shape{2, 5, 4}, Shape{2, 5, 0}, kNoMask, 0, {}},
          {Shape{2, 3, 0}, Shape{2, 5, 0}, Shape{2, 5, 2}, kNoMask, 0.5, {}},
      };
    }
    std::vector<Trial> ts;
    for (const T& t : spec) {
      Trial tr{"q " + t.q.to_string() + " k " + t.k.to_string() + " v " + t.v.to_string() +
                   (t.mode == kCausal      ? " causal"
                    : t.mode == kBoolMask  ? " bool mask " + t.mask.to_string()
                    : t.mode == kFloatMask ? " float mask"
                                           : "") +
                   (t.scale != 0 ? " scale " + std::to_string(t.scale) : ""),
               {random_host(t.q, dt, rng, Domain::Small), random_host(t.k, dt, rng, Domain::Small),
                random_host(t.v, dt, rng, Domain::Small)},
               {},
               {static_cast<double>(t.mode), t.scale}};
      if (t.mode == kBoolMask) {
        HostTensor m(t.mask, DType::Bool);
        for (double& x : m.v) x = rng() % 10 < 7 ? 1 : 0;
        // One row without keys (every entry false) where the mask has rows of keys.
        const std::size_t lk = t.mask[t.mask.rank() - 1];
        if (t.mask[t.mask.rank() - 2] > 1)
          for (std::size_t j = 0; j < lk; ++j) m.v[lk + j] = 0;
        tr.inputs.push_back(std::move(m));
      }
      if (t.q.rank() == 4 && t.q[2] > 64) tr.layouts = {Layout::Permuted, Layout::Contiguous};
      ts.push_back(std::move(tr));
    }
    return ts;
  };
  c.run = [](Tensors&& x, const Params& p) {
    const auto mode = static_cast<Mode>(p[0]);
    std::optional<DynTensor> mask;
    if (mode == kBoolMask) mask = x[3];
    if (mode == kFloatMask) {
      const Shape& qs = x[0].shape();
      const std::size_t r = qs.rank();
      const HostTensor m = float_mask(qs[0], qs[r - 2], x[1].shape()[r - 2], x[0].dtype());
      mask = ops::from_data(ember::TensorData::from<double>(m.v, m.shape).convert(x[0].dtype()),
                            x[0].device());
    }
    std::optional<double> scale;
    if (p[1] != 0) scale = p[1];
    return Tensors{ops::scaled_dot_product_attention(std::move(x[0]), std::move(x[1]),
                                                     std::move(x[2]), std::move(mask),
                                                     mode == kCausal, scale)};
  };
  c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
    const HostTensor &q = in[0], &v = in[2];
    const Softmax sm(q, in[1], in.size() > 3 ? &in[3] : nullptr, p);
    const std::size_t lq = sm.lq, lk = sm.lk, ev = v.shape[v.rank() - 1];
    const Shape batch = broadcast(sm.batch, batch_of(v.shape));
    std::vector<std::size_t> dims = batch.dims();
    dims.push_back(lq);
    dims.push_back(ev);
    HostTensor y(Shape(dims), q.dtype);
    std::vector<double> pr;
    for (std::size_t b = 0; b < batch.num_elements(); ++b) {
      const std::size_t ov = broadcast_index(unravel(b, batch), batch_of(v.shape)) * lk * ev;
      for (std::size_t i = 0; i < lq; ++i) {
        sm.row(b, i, pr);
        double* out = y.v.data() + (b * lq + i) * ev;
        for (std::size_t j = 0; j < lk; ++j)
          for (std::size_t c = 0; c < ev; ++c) out[c] += pr[j] * v.v[ov + j * ev + c];
      }
    }
    return std::vector<HostTensor>{y};
  };
  // Dot products of at most 9 terms of magnitude <= 4 and averages of values <= 2; the
  // 16-bit inputs are exact in the reference, the output is rounded once.
  c.tol = [](DType dt) {
    switch (dt) {
      case DType::F64:
        return Tolerance{1e-10, 1e-10};
      case DType::F32:
        return Tolerance{1e-4, 1e-4};
      case DType::F16:
        return Tolerance{1e-2, 1e-2};
      default:
        return Tolerance{4e-2, 4e-2};
    }
  };
  cs.push_back(std::move(c));

  // ---- scaled_dot_product_attention's gradients through the Autodiff decorator
  // (ir::AttentionGrad where the backend has it): dq, dk, dv of sum(out * g) (g the fourth
  // input), against the f64 closed form dv = P^T g, dS = P (g v^T - rowsum(P g v^T)),
  // dq = scale dS k, dk = scale dS^T q ----
  Case g;
  g.fn = "scaled_dot_product_attention_grad";
  g.also = {"scaled_dot_product_attention"};
  g.no_grad =
      "runs its own backward pass inside; AttentionGrad's rule is checked by Grad.Attention";
  g.family = "normalization";
  g.dtypes = kAllFloats;
  g.trials = [](DType dt, Scale) {
    Rng rng(137);
    struct T {
      Shape q, k, v;
      Mode mode;
      Shape mask;
    };
    const T spec[] = {
        {Shape{2, 2, 5, 4}, Shape{2, 2, 7, 4}, Shape{2, 2, 7, 3}, kNoMask, {}},
        {Shape{1, 2, 9, 4}, Shape{1, 2, 6, 4}, Shape{1, 2, 6, 4}, kCausal, {}},
        {Shape{2, 1, 4, 3}, Shape{2, 1, 9, 3}, Shape{2, 1, 9, 2}, kCausal, {}},
        {Shape{2, 2, 6, 3}, Shape{2, 2, 5, 3}, Shape{2, 2, 5, 3}, kBoolMask, Shape{2, 1, 6, 5}},
        {Shape{1, 1, 70, 5}, Shape{1, 1, 131, 5}, Shape{1, 1, 131, 6}, kNoMask, {}},
        {Shape{1, 1, 129, 4}, Shape{1, 1, 129, 4}, Shape{1, 1, 129, 4}, kCausal, {}},
    };
    std::vector<Trial> ts;
    for (const T& t : spec) {
      std::vector<std::size_t> gd = t.q.dims();
      gd.back() = t.v[t.v.rank() - 1];
      Trial tr{"q " + t.q.to_string() + " k " + t.k.to_string() + " v " + t.v.to_string() +
                   (t.mode == kCausal     ? " causal"
                    : t.mode == kBoolMask ? " bool mask"
                                          : ""),
               {random_host(t.q, dt, rng, Domain::Small), random_host(t.k, dt, rng, Domain::Small),
                random_host(t.v, dt, rng, Domain::Small),
                random_host(Shape(gd), dt, rng, Domain::Small)},
               {},
               {static_cast<double>(t.mode), 0}};
      if (t.mode == kBoolMask) {
        HostTensor m(t.mask, DType::Bool);
        for (double& x : m.v) x = rng() % 10 < 7 ? 1 : 0;
        for (std::size_t j = 0; j < t.mask[3]; ++j) m.v[t.mask[3] + j] = 0;  // a row of no keys
        tr.inputs.push_back(std::move(m));
      }
      ts.push_back(std::move(tr));
    }
    return ts;
  };
  g.run = [](Tensors&& x, const Params& p) {
    const ember::Device ad = x[0].device().autodiff();
    auto q = ops::require_grad(ops::from_inner(x[0], ad));
    auto k = ops::require_grad(ops::from_inner(x[1], ad));
    auto v = ops::require_grad(ops::from_inner(x[2], ad));
    std::optional<DynTensor> mask;
    if (x.size() > 4) mask = ops::from_inner(x[4], ad);
    auto y = ops::scaled_dot_product_attention(q, k, v, mask, static_cast<Mode>(p[0]) == kCausal);
    auto loss = ops::reduce_all(ember::ir::ReduceFn::Sum, ops::binary(ember::ir::BinaryFn::Mul, y,
                                                                      ops::from_inner(x[3], ad)));
    auto grads = ops::backward(loss);
    return Tensors{ops::grad(q, grads).value(), ops::grad(k, grads).value(),
                   ops::grad(v, grads).value()};
  };
  g.ref = [](const std::vector<HostTensor>& in, const Params& p) {
    const HostTensor &q = in[0], &k = in[1], &v = in[2], &gy = in[3];
    const Softmax sm(q, k, in.size() > 4 ? &in[4] : nullptr, p);
    const std::size_t lq = sm.lq, lk = sm.lk, e = sm.e, ev = v.shape[v.rank() - 1];
    HostTensor dq(q.shape, q.dtype), dk(k.shape, q.dtype), dv(v.shape, q.dtype);
    std::vector<double> pr, dp(lk);
    for (std::size_t b = 0; b < sm.batch.num_elements(); ++b) {
      for (std::size_t i = 0; i < lq; ++i) {
        sm.row(b, i, pr);
        const double* gi = gy.v.data() + (b * lq + i) * ev;
        double d = 0;
        for (std::size_t j = 0; j < lk; ++j) {
          dp[j] = 0;
          for (std::size_t c = 0; c < ev; ++c) dp[j] += gi[c] * v.v[(b * lk + j) * ev + c];
          d += pr[j] * dp[j];
        }
        for (std::size_t j = 0; j < lk; ++j) {
          const double ds = pr[j] * (dp[j] - d) * sm.scale;
          for (std::size_t c = 0; c < ev; ++c) dv.v[(b * lk + j) * ev + c] += pr[j] * gi[c];
          for (std::size_t c = 0; c < e; ++c) {
            dq.v[(b * lq + i) * e + c] += ds * k.v[(b * lk + j) * e + c];
            dk.v[(b * lk + j) * e + c] += ds * q.v[(b * lq + i) * e + c];
          }
        }
      }
    }
    return std::vector<HostTensor>{dq, dk, dv};
  };
  g.tol = [](DType dt) {
    switch (dt) {
      case DType::F64:
        return Tolerance{1e-9, 1e-10};
      case DType::F32:
        return Tolerance{1e-4, 1e-4};
      case DType::F16:
        return Tolerance{2e-2, 2e-2};
      default:
        return Tolerance{8e-2, 8e-2};
    }
  };
  cs.push_back(std::move(g));
}

}  // namespace conformance
