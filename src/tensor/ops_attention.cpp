// Scaled dot-product attention: validation, then one IR op (ir::Attention) where the
// device's backend supports it, and a composite of Matmul, masking and Softmax elsewhere.
//
// Note [Rows with every key masked]: a query row whose every key is left out (by a Bool
// mask, or a float mask of -inf) has no softmax. The function gives that row 0 and
// zero gradients, as torch.nn.functional.scaled_dot_product_attention does (its safe
// softmax; older PyTorch gave NaN); ir::Attention's lse is -inf there. The composite makes
// the same zeros: such a row's scores are replaced by 0 before the softmax (so neither its
// softmax nor its gradient sees -inf - -inf) and its probabilities by 0 after.
#include <cmath>
#include <limits>
#include <string>

#include "ember/tensor/gradients.hpp"
#include "tensor/op_support.hpp"

namespace ember::ops {

namespace {

// [batch..., rows, cols] of a batch shape and two trailing extents.
Shape with_matrix(const Shape& batch, std::size_t rows, std::size_t cols) {
  std::vector<std::size_t> dims = batch.dims();
  dims.push_back(rows);
  dims.push_back(cols);
  return Shape(std::move(dims));
}

Shape batch_of(const Shape& s) {
  return Shape(std::vector<std::size_t>(s.dims().begin(), s.dims().end() - 2));
}

DynTensor composite(DynTensor q, DynTensor k, DynTensor v, std::optional<DynTensor> mask,
                    bool causal, double scale) {
  using ir::BinaryFn;
  const double inf = std::numeric_limits<double>::infinity();
  const std::size_t lq = q.shape()[q.rank() - 2], lk = k.shape()[k.rank() - 2];
  DynTensor s = binary_scalar(BinaryFn::Mul, matmul(std::move(q), transpose(std::move(k))), scale);
  if (mask && mask->dtype() == DType::Bool) {
    s = mask_fill(std::move(s), unary(ir::UnaryFn::LogicalNot, std::move(*mask)), -inf);
  } else if (mask) {
    s = binary(BinaryFn::Add, std::move(s), std::move(*mask));
  }
  if (causal) s = mask_fill(std::move(s), triu_mask(Shape{lq, lk}, 0, s.device()), -inf);
  if (lk == 0) return matmul(std::move(s), std::move(v));  // zeros, as PyTorch
  // Note [Rows with every key masked].
  const DynTensor empty_row =
      binary_scalar(BinaryFn::Eq, reduce(ir::ReduceFn::Max, s, -1), -inf);  // [..., Lq, 1]
  s = mask_fill(std::move(s), empty_row, 0.0);
  DynTensor p = mask_fill(softmax(std::move(s), -1), empty_row, 0.0);
  return matmul(std::move(p), std::move(v));
}

}  // namespace

DynTensor scaled_dot_product_attention(DynTensor q, DynTensor k, DynTensor v,
                                       std::optional<DynTensor> attn_mask, bool is_causal,
                                       std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  const std::string fn = op;
  detail::check_kind(q, {Kind::Float}, op);
  detail::check_kind(k, {Kind::Float}, op);
  detail::check_kind(v, {Kind::Float}, op);
  detail::check_same_device(q, k, op);
  detail::check_same_device(q, v, op);
  EMBER_CHECK(q.rank() >= 2 && k.rank() >= 2 && v.rank() >= 2,
              detail::describe(fn + ": expected q [..., Lq, E], k [..., Lk, E] and v [..., Lk, "
                                    "Ev] of rank >= 2",
                               {&q, &k, &v}));
  EMBER_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(),
              detail::describe(fn + ": q, k and v must have one dtype", {&q, &k, &v}));
  const std::size_t lq = q.shape()[q.rank() - 2], e = q.shape()[q.rank() - 1];
  const std::size_t lk = k.shape()[k.rank() - 2], ev = v.shape()[v.rank() - 1];
  EMBER_CHECK(k.shape()[k.rank() - 1] == e && v.shape()[v.rank() - 2] == lk,
              detail::describe(fn + ": expected q [..., Lq, E], k [..., Lk, E] and v [..., Lk, "
                                    "Ev] (E and Lk must agree)",
                               {&q, &k, &v}));
  const Shape batch = broadcast_shapes(
      broadcast_shapes(batch_of(q.shape()), batch_of(k.shape()), op), batch_of(v.shape()), op);
  EMBER_CHECK(!(attn_mask && is_causal),
              fn + ": attn_mask and is_causal cannot both be given (as PyTorch)");
  EMBER_CHECK(scale || e > 0, detail::describe(fn + ": E = 0 needs an explicit scale", {&q}));
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(e));
  EMBER_CHECK(std::isfinite(sc), fn + ": scale must be finite, got " + std::to_string(sc));
  const Shape scores = with_matrix(batch, lq, lk);
  if (attn_mask) {
    detail::check_same_device(q, *attn_mask, op);
    DynTensor& m = *attn_mask;
    EMBER_CHECK(m.dtype() == DType::Bool || m.dtype() == q.dtype(),
                detail::describe(fn + ": attn_mask must be Bool (true: the key takes part) or of "
                                      "q's dtype (added to the scores)",
                                 {&q, &m}));
    bool broadcasts = m.rank() <= scores.rank();
    for (std::size_t d = 0; broadcasts && d < m.rank(); ++d) {
      const std::size_t me = m.shape()[m.rank() - 1 - d];
      broadcasts = me == 1 || me == scores[scores.rank() - 1 - d];
    }
    EMBER_CHECK(broadcasts,
                detail::describe(
                    fn + ": attn_mask must broadcast to the scores' shape " + scores.to_string(),
                    {&q, &k, &m}));
    m = detail::left_pad_rank(std::move(m), scores.rank());
    // A float mask is not differentiated (ir::AttentionGrad gives no gradient for it).
    if (m.dtype() != DType::Bool) m = detach(std::move(m));
  }
  const auto to_batch = [&](DynTensor x, std::size_t rows, std::size_t cols) {
    const Shape want = with_matrix(batch, rows, cols);
    if (x.shape() == want) return x;
    return expand(detail::left_pad_rank(std::move(x), want.rank()), want);
  };
  q = to_batch(std::move(q), lq, e);
  k = to_batch(std::move(k), lk, e);
  v = to_batch(std::move(v), lk, ev);
  const Device dev = q.device();
  ir::Attention direct{q.handle(), k.handle(),
                       v.handle(), attn_mask ? attn_mask->handle() : ir::Handle{},
                       is_causal,  sc};
  if (dev.backend().supports(ir::Op(direct))) {
    // The op alone may own the operands' handles (in-place reuse).
    direct.q = std::move(q).handle();
    direct.k = std::move(k).handle();
    direct.v = std::move(v).handle();
    if (attn_mask) direct.mask = std::move(*attn_mask).handle();
    return std::move(detail::run_all(dev, std::move(direct))[0]);
  }
  return composite(std::move(q), std::move(k), std::move(v), std::move(attn_mask), is_causal, sc);
}

}  // namespace ember::ops
