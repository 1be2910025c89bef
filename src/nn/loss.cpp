// Losses as composites of tensor ops, with PyTorch's formulas (see loss.hpp).
#include "ember/nn/loss.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/nn/distance.hpp"

namespace ember::nn::loss::detail {

namespace {
using ir::BinaryFn;
using ir::ReduceFn;
using ir::UnaryFn;

DynTensor add(DynTensor a, const DynTensor& b) {
  return ops::binary(BinaryFn::Add, std::move(a), b);
}
DynTensor sub(DynTensor a, const DynTensor& b) {
  return ops::binary(BinaryFn::Sub, std::move(a), b);
}
DynTensor mul(DynTensor a, const DynTensor& b) {
  return ops::binary(BinaryFn::Mul, std::move(a), b);
}
DynTensor div(DynTensor a, const DynTensor& b) {
  return ops::binary(BinaryFn::Div, std::move(a), b);
}
DynTensor scale(DynTensor a, double s) {
  return ops::binary_scalar(BinaryFn::Mul, std::move(a), s);
}
DynTensor sum_all(DynTensor a) { return ops::reduce_all(ReduceFn::Sum, std::move(a)); }

DynTensor reduce(DynTensor per, Reduction r, const char* loss) {
  switch (r) {
    case Reduction::Mean:
      return ops::reduce_all(ReduceFn::Mean, std::move(per));
    case Reduction::Sum:
      return sum_all(std::move(per));
    case Reduction::None:
      return ops::reshape(std::move(per), Shape{per.num_elements()});
    case Reduction::BatchMean: {
      EMBER_CHECK(per.rank() >= 1 && per.shape()[0] > 0,
                  std::string(loss) + ": BatchMean needs a non-empty first dim");
      const double n = double(per.shape()[0]);
      return scale(sum_all(std::move(per)), 1.0 / n);
    }
  }
  fail(std::string(loss) + ": unknown reduction");
}

void check_pair(const DynTensor& a, const DynTensor& b, const char* loss) {
  EMBER_CHECK(a.shape() == b.shape() && a.kind() == Kind::Float && b.dtype() == a.dtype(),
              std::string(loss) +
                  ": input and target must be float tensors of one shape and dtype, "
                  "got " +
                  a.shape().to_string() + " " + name(a.dtype()) + " and " + b.shape().to_string() +
                  " " + name(b.dtype()));
}

// The ignore index of losses that have none (multi_margin): no label equals it.
constexpr std::int64_t kNoIgnore = std::numeric_limits<std::int64_t>::min();
// Checks logits [N, C] and labels Int [N] with every label in [0, C) or equal to ignore.
void check_labels(const DynTensor& logits, const DynTensor& labels, std::int64_t ignore,
                  const std::optional<Tensor<1>>& weight, const char* loss) {
  EMBER_CHECK(logits.rank() == 2 && logits.kind() == Kind::Float,
              std::string(loss) + ": expected float logits [batch, classes], got shape " +
                  logits.shape().to_string());
  EMBER_CHECK(
      labels.rank() == 1 && labels.kind() == Kind::Int && labels.shape()[0] == logits.shape()[0],
      std::string(loss) + ": expected Int labels [" + std::to_string(logits.shape()[0]) +
          "] for logits " + logits.shape().to_string() + ", got " + labels.shape().to_string() +
          " " + name(labels.dtype()));
  const std::size_t c = logits.shape()[1];
  if (weight)
    EMBER_CHECK(weight->shape() == (Shape{c}) && weight->dtype() == logits.dtype(),
                std::string(loss) + ": class weights must be [" + std::to_string(c) +
                    "] of the "
                    "logits' dtype, got " +
                    weight->shape().to_string());
  if (labels.num_elements() == 0) return;
  const DynTensor in_range =
      ops::binary(BinaryFn::And, ops::binary_scalar(BinaryFn::Ge, labels, 0.0),
                  ops::binary_scalar(BinaryFn::Lt, labels, double(c)));
  const DynTensor ok =
      ops::binary(BinaryFn::Or, in_range, ops::binary_scalar(BinaryFn::Eq, labels, double(ignore)));
  if (ops::all(ok).to_data().get_f64(0) == 0.0) {
    const auto v = labels.to_data().to_vector<std::int64_t>();
    for (std::size_t i = 0; i < v.size(); ++i)
      EMBER_CHECK((v[i] >= 0 && v[i] < std::int64_t(c)) || v[i] == ignore,
                  std::string(loss) + ": label " + std::to_string(v[i]) + " at index " +
                      std::to_string(i) + " is outside [0, " + std::to_string(c) + ") for logits " +
                      logits.shape().to_string() +
                      (ignore == kNoIgnore ? std::string()
                                           : " (ignore_index " + std::to_string(ignore) + ")"));
  }
}

// The weighted negative log-likelihood parts shared by nll and cross_entropy: per-sample
// -w[y] logp[y] and the per-sample weights w[y] (0 for ignored samples).
std::pair<DynTensor, DynTensor> weighted_nll(const DynTensor& logp, const DynTensor& labels,
                                             std::int64_t ignore,
                                             const std::optional<Tensor<1>>& weight) {
  const std::size_t n = logp.shape()[0];
  const DynTensor ignored = ops::binary_scalar(BinaryFn::Eq, labels, double(ignore));
  const DynTensor safe = ops::mask_fill(labels, ignored, 0.0);
  DynTensor picked = ops::reshape(ops::gather(logp, 1, ops::reshape(safe, Shape{n, 1})), Shape{n});
  DynTensor w = weight ? ops::select(weight->dyn(), 0, safe)
                       : ops::ones(Shape{n}, logp.dtype(), logp.device());
  w = ops::mask_fill(std::move(w), ignored, 0.0);
  return {ops::unary(UnaryFn::Neg, mul(std::move(picked), w)), w};
}
}  // namespace

DynTensor nll(const DynTensor& log_probs, const DynTensor& labels, const NllOptions& o) {
  check_labels(log_probs, labels, o.ignore_index, o.weight, "nn::loss::nll");
  auto [per, w] = weighted_nll(log_probs, labels, o.ignore_index, o.weight);
  if (o.reduction == Reduction::Mean) return div(sum_all(std::move(per)), sum_all(std::move(w)));
  return reduce(std::move(per), o.reduction, "nn::loss::nll");
}

DynTensor cross_entropy(const DynTensor& logits, const DynTensor& labels,
                        const CrossEntropyOptions& o) {
  const char* name = "nn::loss::cross_entropy";
  check_labels(logits, labels, o.ignore_index, o.weight, name);
  EMBER_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1,
              std::string(name) + ": label_smoothing must be in [0, 1], got " +
                  std::to_string(o.label_smoothing));
  const DynTensor logp = ops::log_softmax(logits, 1);
  auto [per, w] = weighted_nll(logp, labels, o.ignore_index, o.weight);
  const double eps = o.label_smoothing;
  if (eps > 0) {
    // PyTorch's smoothing term: -sum_c w_c logp_c per sample (0 when ignored), with the
    // same reduction and denominator as the nll term.
    const std::size_t n = logits.shape()[0], c = logits.shape()[1];
    DynTensor wl = o.weight ? mul(logp, ops::reshape(o.weight->dyn(), Shape{1, c})) : logp;
    DynTensor smooth = ops::unary(
        UnaryFn::Neg, ops::reshape(ops::reduce(ReduceFn::Sum, std::move(wl), 1), Shape{n}));
    smooth = ops::mask_fill(std::move(smooth),
                            ops::binary_scalar(BinaryFn::Eq, labels, double(o.ignore_index)), 0.0);
    per = add(scale(std::move(per), 1.0 - eps), scale(std::move(smooth), eps / double(c)));
  }
  if (o.reduction == Reduction::Mean) return div(sum_all(std::move(per)), sum_all(std::move(w)));
  return reduce(std::move(per), o.reduction, name);
}

DynTensor cross_entropy_probs(const DynTensor& logits, const DynTensor& target,
                              const CrossEntropyOptions& o) {
  const char* name = "nn::loss::cross_entropy";
  check_pair(logits, target, name);
  EMBER_CHECK(logits.rank() == 2, std::string(name) + ": expected logits [batch, classes], got " +
                                      logits.shape().to_string());
  const std::size_t n = logits.shape()[0], c = logits.shape()[1];
  DynTensor p = target;
  if (o.label_smoothing > 0)
    p = ops::binary_scalar(BinaryFn::Add, scale(std::move(p), 1.0 - o.label_smoothing),
                           o.label_smoothing / double(c));
  DynTensor terms = mul(ops::log_softmax(logits, 1), p);
  if (o.weight) terms = mul(std::move(terms), ops::reshape(o.weight->dyn(), Shape{1, c}));
  DynTensor per = ops::unary(
      UnaryFn::Neg, ops::reshape(ops::reduce(ReduceFn::Sum, std::move(terms), 1), Shape{n}));
  return reduce(std::move(per), o.reduction, name);
}

DynTensor binary_cross_entropy(const DynTensor& probs, const DynTensor& target,
                               const std::optional<DynTensor>& weight, Reduction r) {
  const char* name = "nn::loss::binary_cross_entropy";
  check_pair(probs, target, name);
  if (probs.num_elements() > 0) {
    const DynTensor ok = ops::binary(BinaryFn::And, ops::binary_scalar(BinaryFn::Ge, probs, 0.0),
                                     ops::binary_scalar(BinaryFn::Le, probs, 1.0));
    EMBER_CHECK(ops::all(ok).to_data().get_f64(0) != 0.0,
                std::string(name) + ": every input must be in [0, 1] (input " +
                    probs.shape().to_string() + ")");
  }
  const DynTensor log_p = ops::clamp(ops::unary(UnaryFn::Log, probs), -100.0, std::nullopt);
  const DynTensor log_q =
      ops::clamp(ops::unary(UnaryFn::Log, ops::rbinary_scalar(BinaryFn::Sub, 1.0, probs)), -100.0,
                 std::nullopt);
  DynTensor per = ops::unary(
      UnaryFn::Neg,
      add(mul(target, log_p), mul(ops::rbinary_scalar(BinaryFn::Sub, 1.0, target), log_q)));
  if (weight) per = mul(std::move(per), *weight);
  return reduce(std::move(per), r, name);
}

DynTensor binary_cross_entropy_with_logits(const DynTensor& logits, const DynTensor& target,
                                           const std::optional<DynTensor>& weight,
                                           const std::optional<DynTensor>& pos_weight,
                                           Reduction r) {
  const char* name = "nn::loss::binary_cross_entropy_with_logits";
  check_pair(logits, target, name);
  // softplus(-x) = log1p(exp(-|x|)) + max(-x, 0), stable for any x.
  const DynTensor sp =
      add(ops::unary(
              UnaryFn::Log1p,
              ops::unary(UnaryFn::Exp, ops::unary(UnaryFn::Neg, ops::unary(UnaryFn::Abs, logits)))),
          ops::clamp(ops::unary(UnaryFn::Neg, logits), 0.0, std::nullopt));
  DynTensor coef = ops::ones(logits.shape(), logits.dtype(), logits.device());
  if (pos_weight) {
    EMBER_CHECK(logits.rank() >= 1 && pos_weight->rank() == 1 &&
                    pos_weight->shape()[0] == logits.shape()[logits.rank() - 1],
                std::string(name) + ": pos_weight must be [" +
                    std::to_string(logits.shape()[logits.rank() - 1]) + "], got " +
                    pos_weight->shape().to_string());
    // 1 + (pos_weight - 1) target
    coef = ops::binary_scalar(
        BinaryFn::Add, mul(ops::binary_scalar(BinaryFn::Sub, *pos_weight, 1.0), target), 1.0);
  }
  DynTensor per =
      add(mul(ops::rbinary_scalar(BinaryFn::Sub, 1.0, target), logits), mul(std::move(coef), sp));
  if (weight) per = mul(std::move(per), *weight);
  return reduce(std::move(per), r, name);
}

DynTensor mse(const DynTensor& a, const DynTensor& b, Reduction r) {
  check_pair(a, b, "nn::loss::mse");
  return reduce(ops::unary(UnaryFn::Square, sub(a, b)), r, "nn::loss::mse");
}

DynTensor l1(const DynTensor& a, const DynTensor& b, Reduction r) {
  check_pair(a, b, "nn::loss::l1");
  return reduce(ops::unary(UnaryFn::Abs, sub(a, b)), r, "nn::loss::l1");
}

DynTensor huber(const DynTensor& a, const DynTensor& b, double delta, Reduction r) {
  check_pair(a, b, "nn::loss::huber");
  EMBER_CHECK(delta > 0, "nn::loss::huber: delta must be > 0, got " + std::to_string(delta));
  const DynTensor d = sub(a, b), ad = ops::unary(UnaryFn::Abs, d);
  const DynTensor quad = scale(ops::unary(UnaryFn::Square, d), 0.5);
  const DynTensor lin = scale(ops::binary_scalar(BinaryFn::Sub, ad, 0.5 * delta), delta);
  return reduce(ops::mask_where(ops::binary_scalar(BinaryFn::Lt, ad, delta), quad, lin), r,
                "nn::loss::huber");
}

DynTensor smooth_l1(const DynTensor& a, const DynTensor& b, double beta, Reduction r) {
  check_pair(a, b, "nn::loss::smooth_l1");
  EMBER_CHECK(beta >= 0, "nn::loss::smooth_l1: beta must be >= 0, got " + std::to_string(beta));
  const DynTensor d = sub(a, b), ad = ops::unary(UnaryFn::Abs, d);
  if (beta == 0) return reduce(ad, r, "nn::loss::smooth_l1");
  const DynTensor quad = scale(ops::unary(UnaryFn::Square, d), 0.5 / beta);
  const DynTensor lin = ops::binary_scalar(BinaryFn::Sub, ad, 0.5 * beta);
  return reduce(ops::mask_where(ops::binary_scalar(BinaryFn::Lt, ad, beta), quad, lin), r,
                "nn::loss::smooth_l1");
}

DynTensor kl_div(const DynTensor& input, const DynTensor& target, bool log_target, Reduction r) {
  check_pair(input, target, "nn::loss::kl_div");
  if (log_target)
    return reduce(mul(ops::unary(UnaryFn::Exp, target), sub(target, input)), r, "nn::loss::kl_div");
  // xlogy: 0 where target = 0 (1 inside the log there, so its gradient stays finite).
  const DynTensor zero = ops::binary_scalar(BinaryFn::Le, target, 0.0);
  const DynTensor log_t = ops::unary(UnaryFn::Log, ops::mask_fill(target, zero, 1.0));
  return reduce(ops::mask_fill(mul(target, sub(log_t, input)), zero, 0.0), r, "nn::loss::kl_div");
}

// ---- margin and embedding losses, Gaussian and Poisson NLL (PyTorch's formulas) ----

namespace {
// y (1 or -1, any kind) in x's dtype, broadcast to x's shape.
DynTensor signs_like(const DynTensor& y, const DynTensor& x, const char* loss) {
  EMBER_CHECK(y.shape() == x.shape(), std::string(loss) + ": expected the target of shape " +
                                          x.shape().to_string() + ", got " + y.shape().to_string());
  return y.dtype() == x.dtype() ? y : ops::cast(y, x.dtype());
}
DynTensor relu(DynTensor x) { return ops::clamp(std::move(x), 0.0, std::nullopt); }
DynTensor where_eq(const DynTensor& y, double v, const DynTensor& a, const DynTensor& b) {
  return ops::mask_where(ops::binary_scalar(BinaryFn::Eq, y, v), a, b);
}
void check_float(const DynTensor& x, const char* loss) {
  EMBER_CHECK(x.kind() == Kind::Float,
              std::string(loss) + ": expected a float input, got " + name(x.dtype()));
}
}  // namespace

DynTensor cosine_embedding(const DynTensor& x1, const DynTensor& x2, const DynTensor& y,
                           double margin, Reduction r) {
  const char* loss = "nn::loss::cosine_embedding";
  check_pair(x1, x2, loss);
  EMBER_CHECK(x1.rank() == 1 || x1.rank() == 2,
              std::string(loss) + ": expected inputs [N, d] or [d], got " + x1.shape().to_string());
  const std::int64_t dim = std::int64_t(x1.rank()) - 1;
  const auto sum = [&](DynTensor t) {
    return ops::squeeze(ops::reduce(ReduceFn::Sum, std::move(t), dim), dim);
  };
  const DynTensor prod = sum(mul(x1, x2));
  const DynTensor m1 = ops::binary_scalar(BinaryFn::Add, sum(mul(x1, x1)), 1e-12);
  const DynTensor m2 = ops::binary_scalar(BinaryFn::Add, sum(mul(x2, x2)), 1e-12);
  const DynTensor cos = div(prod, ops::unary(UnaryFn::Sqrt, mul(m1, m2)));
  const DynTensor t = signs_like(y, cos, loss);
  const DynTensor zero = scale(cos, 0.0);
  const DynTensor pos = ops::rbinary_scalar(BinaryFn::Sub, 1.0, cos);
  const DynTensor neg = relu(ops::binary_scalar(BinaryFn::Sub, cos, margin));
  return reduce(add(where_eq(t, 1.0, pos, zero), where_eq(t, -1.0, neg, zero)), r, loss);
}

DynTensor gaussian_nll(const DynTensor& input, const DynTensor& target, const DynTensor& var,
                       bool full, double eps, Reduction r) {
  const char* loss = "nn::loss::gaussian_nll";
  check_pair(input, target, loss);
  EMBER_CHECK(var.dtype() == input.dtype() &&
                  ops::broadcast_shapes(var.shape(), input.shape(), loss) == input.shape(),
              std::string(loss) + ": var must broadcast to the input's shape " +
                  input.shape().to_string() + " in its dtype, got " + var.shape().to_string());
  EMBER_CHECK(eps > 0, std::string(loss) + ": eps must be positive");
  // max(var, eps) with the gradient of var itself (PyTorch clamps a copy under no_grad).
  const DynTensor clamped = ops::clamp(ops::detach(var), eps, std::nullopt);
  const DynTensor v = add(var, sub(clamped, ops::detach(var)));
  DynTensor per = scale(
      add(ops::unary(UnaryFn::Log, v), div(ops::unary(UnaryFn::Square, sub(input, target)), v)),
      0.5);
  if (full) per = ops::binary_scalar(BinaryFn::Add, std::move(per), 0.5 * std::log(2 * M_PI));
  return reduce(std::move(per), r, loss);
}

DynTensor poisson_nll(const DynTensor& input, const DynTensor& target, bool log_input, bool full,
                      double eps, Reduction r) {
  const char* loss = "nn::loss::poisson_nll";
  check_pair(input, target, loss);
  DynTensor per =
      log_input ? sub(ops::unary(UnaryFn::Exp, input), mul(target, input))
                : sub(input, mul(target, ops::unary(UnaryFn::Log, ops::binary_scalar(BinaryFn::Add,
                                                                                     input, eps))));
  if (full) {
    // Stirling's approximation of log(target!), counted where target > 1.
    const DynTensor stirling = add(sub(mul(target, ops::unary(UnaryFn::Log, target)), target),
                                   scale(ops::unary(UnaryFn::Log, scale(target, 2 * M_PI)), 0.5));
    per = add(std::move(per), ops::mask_where(ops::binary_scalar(BinaryFn::Gt, target, 1.0),
                                              stirling, scale(target, 0.0)));
  }
  return reduce(std::move(per), r, loss);
}

DynTensor margin_ranking(const DynTensor& x1, const DynTensor& x2, const DynTensor& y,
                         double margin, Reduction r) {
  const char* loss = "nn::loss::margin_ranking";
  check_pair(x1, x2, loss);
  const DynTensor t = signs_like(y, x1, loss);
  return reduce(relu(ops::binary_scalar(BinaryFn::Add, scale(mul(t, sub(x1, x2)), -1.0), margin)),
                r, loss);
}

DynTensor triplet_margin(const DynTensor& anchor, const DynTensor& positive,
                         const DynTensor& negative, double margin, double p, double eps, bool swap,
                         Reduction r) {
  const char* loss = "nn::loss::triplet_margin";
  check_pair(anchor, positive, loss);
  check_pair(anchor, negative, loss);
  EMBER_CHECK(anchor.rank() == 2,
              std::string(loss) + ": expected inputs [N, d], got " + anchor.shape().to_string());
  const auto dist = [&](const DynTensor& a, const DynTensor& b) {
    return nn::detail::pairwise_distance(a, b, p, eps, false);
  };
  DynTensor d_neg = dist(anchor, negative);
  if (swap) d_neg = ops::binary(BinaryFn::Min, std::move(d_neg), dist(positive, negative));
  return reduce(relu(ops::binary_scalar(BinaryFn::Add, sub(dist(anchor, positive), d_neg), margin)),
                r, loss);
}

DynTensor hinge_embedding(const DynTensor& x, const DynTensor& y, double margin, Reduction r) {
  const char* loss = "nn::loss::hinge_embedding";
  check_float(x, loss);
  const DynTensor t = signs_like(y, x, loss);
  const DynTensor zero = scale(x, 0.0);
  const DynTensor below = relu(ops::rbinary_scalar(BinaryFn::Sub, margin, x));
  const DynTensor m = ops::mask_where(ops::binary_scalar(BinaryFn::Ne, t, 1.0), below, zero);
  const DynTensor s = ops::mask_where(ops::binary_scalar(BinaryFn::Ne, t, -1.0), x, zero);
  return reduce(add(m, s), r, loss);
}

DynTensor multi_margin(const DynTensor& x, const DynTensor& labels, int p, double margin,
                       const std::optional<DynTensor>& weight, Reduction r) {
  const char* loss = "nn::loss::multi_margin";
  EMBER_CHECK(p == 1 || p == 2, std::string(loss) + ": p must be 1 or 2, got " + std::to_string(p));
  const std::optional<Tensor<1>> w =
      weight ? std::optional<Tensor<1>>(Tensor<1>(*weight)) : std::nullopt;
  check_labels(x, labels, kNoIgnore, w, loss);
  const std::size_t n = x.shape()[0], c = x.shape()[1];
  const DynTensor idx = ops::reshape(labels, Shape{n, 1});
  const DynTensor xy = ops::gather(x, 1, idx);  // [N, 1]
  DynTensor z = relu(ops::binary_scalar(BinaryFn::Add, sub(x, xy), margin));
  if (p == 2) z = ops::unary(UnaryFn::Square, std::move(z));
  if (weight) z = mul(std::move(z), ops::reshape(ops::select(*weight, 0, labels), Shape{n, 1}));
  const DynTensor others =
      ops::rbinary_scalar(BinaryFn::Sub, 1.0, ops::one_hot(labels, c, x.dtype()));
  DynTensor per = scale(ops::squeeze(ops::reduce(ReduceFn::Sum, mul(std::move(z), others), 1), 1),
                        1.0 / double(c));
  return reduce(std::move(per), r, loss);
}

DynTensor soft_margin(const DynTensor& x, const DynTensor& y, Reduction r) {
  const char* loss = "nn::loss::soft_margin";
  check_float(x, loss);
  const DynTensor t = signs_like(y, x, loss);
  return reduce(ops::unary(UnaryFn::Log1p, ops::unary(UnaryFn::Exp, scale(mul(t, x), -1.0))), r,
                loss);
}

// Note [CTC as a recursion of tensor ops]
// The forward variable alpha_t [N, 2S + 1] over the blank-extended labels l' (blank, l1,
// blank, l2, ..., blank) follows alpha_t(s) = lse(alpha_{t-1}(s), alpha_{t-1}(s - 1),
// alpha_{t-1}(s - 2) where l'_s is a label unlike l'_{s-2}) + log p_t(l'_s), one step of
// a few whole-batch ops per time step; rows past their input length keep their alpha, and
// the loss is -lse(alpha(2 L), alpha(2 L - 1)). Unreachable states hold a large finite
// negative value rather than -inf: lse and its gradient stay finite there (exp(-inf - -inf)
// would be NaN in the backward pass), and a reachable path's value is unchanged by it, since
// lse(x, -1e30) == x. Whether an alignment exists at all (T_n >= L_n + the repeats in the
// target) is known from the lengths and labels on the host, so an impossible one gets
// infinity (or 0) exactly. Autodiff of the recursion is the backward (beta) pass; 16-bit
// inputs are computed in f32.
DynTensor ctc(const DynTensor& log_probs_in, const DynTensor& targets,
              const std::vector<std::size_t>& input_lengths,
              const std::vector<std::size_t>& target_lengths, const CtcOptions& o) {
  const char* loss = "nn::loss::ctc";
  EMBER_CHECK(log_probs_in.rank() == 3 && log_probs_in.kind() == Kind::Float,
              std::string(loss) + ": expected float log_probs [T, batch, classes], got " +
                  log_probs_in.shape().to_string() + " " + name(log_probs_in.dtype()));
  const std::size_t T = log_probs_in.shape()[0], N = log_probs_in.shape()[1],
                    C = log_probs_in.shape()[2];
  EMBER_CHECK(targets.rank() == 2 && targets.kind() == Kind::Int && targets.shape()[0] == N,
              std::string(loss) + ": expected Int targets [" + std::to_string(N) +
                  ", max target length], got " + targets.shape().to_string() + " " +
                  name(targets.dtype()));
  EMBER_CHECK(input_lengths.size() == N && target_lengths.size() == N,
              std::string(loss) + ": expected " + std::to_string(N) +
                  " input and target lengths, got " + std::to_string(input_lengths.size()) +
                  " and " + std::to_string(target_lengths.size()));
  EMBER_CHECK(o.blank < C, std::string(loss) + ": blank " + std::to_string(o.blank) +
                               " is not a class of " + std::to_string(C));
  EMBER_CHECK(o.reduction != Reduction::BatchMean,
              std::string(loss) + ": BatchMean does not apply (Mean divides by target lengths)");
  const std::size_t S = targets.shape()[1];
  const TensorData labels_data = targets.to_data().convert(DType::I64);
  const auto labels = labels_data.to_vector<std::int64_t>();
  std::size_t max_target = 0;
  std::vector<bool> feasible(N);
  for (std::size_t n = 0; n < N; ++n) {
    const std::size_t tl = target_lengths[n], il = input_lengths[n];
    EMBER_CHECK(il >= 1 && il <= T, std::string(loss) + ": input_lengths[" + std::to_string(n) +
                                        "] = " + std::to_string(il) + " is outside [1, " +
                                        std::to_string(T) + "]");
    EMBER_CHECK(tl <= S, std::string(loss) + ": target_lengths[" + std::to_string(n) +
                             "] = " + std::to_string(tl) + " exceeds the targets' length " +
                             std::to_string(S));
    std::size_t repeats = 0;
    for (std::size_t i = 0; i < tl; ++i) {
      const std::int64_t l = labels[n * S + i];
      EMBER_CHECK(l >= 0 && std::size_t(l) < C && std::size_t(l) != o.blank,
                  std::string(loss) + ": target [" + std::to_string(n) + ", " + std::to_string(i) +
                      "] = " + std::to_string(l) + " is not a label in [0, " + std::to_string(C) +
                      ") other than the blank " + std::to_string(o.blank));
      if (i > 0 && labels[n * S + i - 1] == l) ++repeats;
    }
    feasible[n] = il >= tl + repeats;
    max_target = std::max(max_target, tl);
  }
  const Device dev = log_probs_in.device();
  const DType out_dt = log_probs_in.dtype();
  const DType dt = out_dt == DType::F64 ? DType::F64 : DType::F32;
  DynTensor lp = out_dt == dt ? log_probs_in : ops::cast(log_probs_in, dt);
  constexpr double kUnreachable = -1e30;

  // Extended labels, the additive masks of the skip transition, the start and the end.
  const std::size_t L = 2 * max_target + 1;
  std::vector<std::int64_t> ext(N * L, std::int64_t(o.blank)), ends(N * 2);
  std::vector<double> skip(N * L, kUnreachable), start(N * L, kUnreachable), end_add(N * 2, 0.0);
  for (std::size_t n = 0; n < N; ++n) {
    const std::size_t tl = target_lengths[n];
    for (std::size_t i = 0; i < tl; ++i) ext[n * L + 2 * i + 1] = labels[n * S + i];
    for (std::size_t s = 2; s < L; ++s) {
      if (s % 2 == 1 && ext[n * L + s] != ext[n * L + s - 2]) skip[n * L + s] = 0.0;
    }
    start[n * L] = 0.0;
    if (tl > 0) start[n * L + 1] = 0.0;
    ends[n * 2] = std::int64_t(2 * tl);
    ends[n * 2 + 1] = std::int64_t(tl > 0 ? 2 * tl - 1 : 0);
    if (tl == 0) end_add[n * 2 + 1] = kUnreachable;
  }
  const auto host = [&](const std::vector<double>& v, Shape s) {
    return ops::cast(ops::from_data(TensorData::from<double>(v, std::move(s)), dev), dt);
  };
  auto index = ops::from_data(TensorData::from<std::int64_t>(ext, Shape{1, N, L}), dev);
  DynTensor emit = ops::gather(lp, 2, ops::expand(std::move(index), Shape{T, N, L}));
  const DynTensor skip_add = host(skip, Shape{N, L});
  const auto step = [&](std::size_t t) {
    return ops::reshape(ops::narrow(emit, 0, std::int64_t(t), 1), Shape{N, L});
  };
  const auto shifted = [&](const DynTensor& a, std::size_t by) {
    if (L <= by) return ops::full(Shape{N, L}, kUnreachable, dt, dev);
    return ops::narrow(ops::pad(a, {{by, 0}}, ops::PadMode::Constant, kUnreachable), 1, 0, L);
  };
  DynTensor alpha = add(step(0), host(start, Shape{N, L}));
  for (std::size_t t = 1; t < T; ++t) {
    DynTensor next = ops::binary(BinaryFn::LogAddExp, alpha, shifted(alpha, 1));
    next = ops::binary(BinaryFn::LogAddExp, std::move(next), add(shifted(alpha, 2), skip_add));
    next = add(std::move(next), step(t));
    std::vector<std::uint8_t> active(N);
    bool all = true;
    for (std::size_t n = 0; n < N; ++n) {
      active[n] = t < input_lengths[n];
      all = all && active[n];
    }
    if (all) {
      alpha = std::move(next);
    } else {
      auto mask = ops::from_data(TensorData::from<std::uint8_t>(active, Shape{N, 1}), dev);
      alpha = ops::mask_where(ops::cast(std::move(mask), DType::Bool), std::move(next),
                              std::move(alpha));
    }
  }
  auto last = add(
      ops::gather(alpha, 1, ops::from_data(TensorData::from<std::int64_t>(ends, Shape{N, 2}), dev)),
      host(end_add, Shape{N, 2}));
  DynTensor ll =
      ops::binary(BinaryFn::LogAddExp, ops::narrow(last, 1, 0, 1), ops::narrow(last, 1, 1, 1));
  DynTensor per = ops::reshape(ops::unary(UnaryFn::Neg, std::move(ll)), Shape{N});
  if (!std::all_of(feasible.begin(), feasible.end(), [](bool f) { return f; })) {
    std::vector<std::uint8_t> bad(N);
    for (std::size_t n = 0; n < N; ++n) bad[n] = !feasible[n];
    auto mask =
        ops::cast(ops::from_data(TensorData::from<std::uint8_t>(bad, Shape{N}), dev), DType::Bool);
    per = ops::mask_fill(std::move(per), std::move(mask),
                         o.zero_infinity ? 0.0 : std::numeric_limits<double>::infinity());
  }
  if (o.reduction == Reduction::Mean) {
    std::vector<double> inv(N);
    for (std::size_t n = 0; n < N; ++n)
      inv[n] = 1.0 / double(std::max<std::size_t>(target_lengths[n], 1));
    per = mul(std::move(per), host(inv, Shape{N}));
  }
  DynTensor out = reduce(std::move(per), o.reduction, loss);
  return out_dt == dt ? out : ops::cast(std::move(out), out_dt);
}

}  // namespace ember::nn::loss::detail
