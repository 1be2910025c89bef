// The derivative table: one entry per differentiable IR op (and per function of the
// Unary/Binary/Reduce/Scan families), each a formula in words and a rule that builds the
// operands' gradients from the output's gradient g with IR ops on the inner backend
// (ir_helpers.hpp). Inputs are x (or a, b); y is the forward output. Broadcast operands
// need no care here: BackwardCtx::give sums a gradient down to its operand's shape, and
// accumulates when an operand feeds several ops.
//
// The switches list every enumerator without a default, so adding an op or a function
// without deciding its entry is a compile error (-Wswitch -Werror), and
// tests/autodiff/test_grad.cpp checks at run time that no differentiable op lacks a rule.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "autodiff/graph.hpp"
#include "autodiff/ir_helpers.hpp"
#include "ember/backend/window.hpp"
#include "ember/base/error.hpp"
#include "ember/ir/infer.hpp"

namespace ember::autodiff {

using namespace h;  // NOLINT: the rules read as formulas
using ir::BinaryFn;
using ir::UnaryFn;
using Ctx = BackwardCtx;

namespace {

constexpr std::uint8_t kX = 1, kY = 2, kIndex = 2, kAll = 0xff;

RuleEntry diff(const char* formula, std::uint8_t needs, bool needs_output, void (*f)(Ctx&)) {
  return {RuleKind::Differentiable, formula, Rule{needs, needs_output, f}};
}
RuleEntry none(const char* why) { return {RuleKind::NotDifferentiable, why, {}}; }
RuleEntry todo(const char* why) { return {RuleKind::Unsupported, why, {}}; }

// The outputs of BatchNormGrad or GroupNormGrad, dx and [2, C] (dweight; dbias), given to
// the forward op's x, weight and bias as each is wanted.
void give_channel_norm_grads(Ctx& c, std::vector<Handle> d) {
  const std::size_t ch = c.in_shape(0)[1];
  const auto row = [&](std::size_t r) {
    return reshape(c.be, slice(c.be, d[1], {{r, r + 1, 1}, {0, ch, 1}}), Shape{ch});
  };
  if (c.wants(0)) c.give(0, std::move(d[0]));
  if (c.wants(1)) c.give(1, row(0));
  if (c.wants(2)) c.give(2, row(1));
}

// BatchNormGrad's gradients in x and weight (weight null: ones) for h, dx's gradient:
// over each channel's M values, A = sum(h xhat), B = sum(g xhat), K = sum(h g) - sum(h)
// sum(g) / M; dweight = rstd (K - A B / M), dx = -weight rstd^2 / M (xhat (K - 3 A B / M)
// + B (h - mean(h)) + A (g - mean(g))). x of shape xs [N, C, *]; null where not wanted.
std::pair<Handle, Handle> batch_norm_grad_grad(Backend& be, const Shape& xs, Handle x_in, Handle w,
                                               Handle stats, Handle g_in, Handle h_in, double eps,
                                               bool want_x, bool want_w) {
  const std::size_t n = xs[0], ch = xs[1];
  const std::size_t l = n * ch == 0 ? 0 : xs.num_elements() / (n * ch);
  const Shape ncl{n, ch, l}, per{1, ch, 1};
  const double m = static_cast<double>(n * l);
  const auto channel_sum = [&](Handle t) {
    return reduce(be, ir::ReduceFn::Sum, reduce(be, ir::ReduceFn::Sum, t, 2), 0);
  };
  const auto stat = [&](std::size_t r) {
    return reshape(be, slice(be, stats, {{r, r + 1, 1}, {0, ch, 1}}), per);
  };
  auto x = reshape(be, std::move(x_in), ncl);
  auto g = reshape(be, std::move(g_in), ncl);
  auto h = reshape(be, std::move(h_in), ncl);
  auto rstd = unary(be, UnaryFn::Rsqrt, add_scalar(be, stat(1), eps));
  auto xhat = mul(be, sub(be, x, stat(0)), rstd);
  auto sh = channel_sum(h), sg = channel_sum(g);
  auto a = channel_sum(mul(be, h, xhat)), b = channel_sum(mul(be, g, xhat));
  auto ab_m = mul_scalar(be, mul(be, a, b), 1.0 / m);
  auto k = sub(be, channel_sum(mul(be, h, g)), mul_scalar(be, mul(be, sh, sg), 1.0 / m));
  std::pair<Handle, Handle> out;
  if (want_w) out.second = reshape(be, mul(be, rstd, sub(be, k, ab_m)), Shape{ch});
  if (!want_x) return out;
  auto hc = sub(be, h, mul_scalar(be, sh, 1.0 / m));
  auto gc = sub(be, g, mul_scalar(be, sg, 1.0 / m));
  auto inner =
      add(be, add(be, mul(be, xhat, sub(be, k, mul_scalar(be, ab_m, 3.0))), mul(be, b, hc)),
          mul(be, a, gc));
  auto scale = mul_scalar(be, mul(be, rstd, rstd), -1.0 / m);
  if (w) scale = mul(be, scale, reshape(be, std::move(w), per));
  out.first = reshape(be, mul(be, scale, inner), xs);
  return out;
}

// The softmax of ir::AttentionGrad's forward recomputed from its operands (q, k, v, mask,
// y, lse, g): P = exp(S - lse) with S = scale q k^T plus a float mask, 0 where a Bool mask
// or the causal order leaves the key out and on rows without keys (lse -inf). In lse's
// dtype (f32 for 16-bit q), rounded to q's.
Handle attention_probs(Ctx& c, const ir::AttentionGrad& o) {
  auto& be = c.be;
  const DType dt = c.in_dtype(0), wide = c.in_dtype(5);
  const std::size_t r = c.in_shape(0).rank();
  const std::size_t lq = c.in_shape(0)[r - 2], lk = c.in_shape(1)[r - 2];
  Handle s = mul_scalar(be, matmul(be, c.input(0), transpose_last(be, c.input(1))), o.scale);
  Handle allowed;  // Bool, broadcast to S's shape; null when every key takes part
  if (c.in_shape(3).rank() > 0) {
    if (c.in_dtype(3) == DType::Bool) {
      allowed = c.input(3);
    } else {
      s = add(be, std::move(s), c.input(3));
    }
  }
  if (o.causal) {
    const auto index = [&](std::size_t n, std::size_t at) {
      std::vector<std::size_t> dims(r, 1);
      dims[at] = n;
      return reshape(be, run(be, ir::Arange{0.0, 1.0, n, DType::I64}), Shape(std::move(dims)));
    };
    Handle causal = binary(be, BinaryFn::Le, index(lk, r - 1), index(lq, r - 2));  // j <= i
    allowed = allowed ? binary(be, BinaryFn::And, std::move(allowed), std::move(causal))
                      : std::move(causal);
  }
  std::vector<std::size_t> row = c.in_shape(5).dims();
  row.push_back(1);
  Handle lse = reshape(be, c.input(5), Shape(std::move(row)));
  const double inf = std::numeric_limits<double>::infinity();
  lse = where(be, compare_scalar(be, BinaryFn::Eq, lse, -inf), scalar(be, 0.0, wide, r), lse);
  Handle p = unary(be, UnaryFn::Exp, sub(be, cast(be, std::move(s), wide), std::move(lse)));
  if (allowed) p = mask(be, std::move(allowed), std::move(p));
  return cast(be, std::move(p), dt);
}

// g * f(x) for unary rules.
void give_scaled(Ctx& c, Handle factor) { c.give(0, mul(c.be, c.grad(), std::move(factor))); }

RuleEntry make_unary(UnaryFn fn) {
  switch (fn) {
    case UnaryFn::Neg:
      return diff("-g", 0, false, [](Ctx& c) { c.give(0, neg(c.be, c.grad())); });
    case UnaryFn::Abs:
      return diff("g * sign(x)", kX, false,
                  [](Ctx& c) { give_scaled(c, unary(c.be, UnaryFn::Sign, c.input(0))); });
    case UnaryFn::Recip:
      return diff("-g * y^2", 0, true, [](Ctx& c) {
        auto y = c.output();
        c.give(0, neg(c.be, mul(c.be, c.grad(), mul(c.be, y, y))));
      });
    case UnaryFn::Square:
      return diff("2 g x", kX, false,
                  [](Ctx& c) { give_scaled(c, mul_scalar(c.be, c.input(0), 2.0)); });
    case UnaryFn::Sqrt:
      return diff("g / (2 y)", 0, true, [](Ctx& c) {
        c.give(0, div(c.be, mul_scalar(c.be, c.grad(), 0.5), c.output()));
      });
    case UnaryFn::Rsqrt:
      return diff("-g y^3 / 2", 0, true, [](Ctx& c) {
        auto y = c.output();
        give_scaled(c, mul_scalar(c.be, mul(c.be, y, mul(c.be, y, y)), -0.5));
      });
    case UnaryFn::Exp:
      return diff("g y", 0, true, [](Ctx& c) { give_scaled(c, c.output()); });
    case UnaryFn::Log:
      return diff("g / x", kX, false, [](Ctx& c) { c.give(0, div(c.be, c.grad(), c.input(0))); });
    case UnaryFn::Log1p:
      return diff("g / (1 + x)", kX, false, [](Ctx& c) {
        c.give(0, div(c.be, c.grad(), add_scalar(c.be, c.input(0), 1.0)));
      });
    case UnaryFn::Expm1:
      return diff("g (y + 1)", 0, true,
                  [](Ctx& c) { give_scaled(c, add_scalar(c.be, c.output(), 1.0)); });
    case UnaryFn::Sin:
      return diff("g cos(x)", kX, false,
                  [](Ctx& c) { give_scaled(c, unary(c.be, UnaryFn::Cos, c.input(0))); });
    case UnaryFn::Cos:
      return diff("-g sin(x)", kX, false,
                  [](Ctx& c) { give_scaled(c, neg(c.be, unary(c.be, UnaryFn::Sin, c.input(0)))); });
    case UnaryFn::Tan:
      return diff("g (1 + y^2)", 0, true, [](Ctx& c) {
        give_scaled(c, add_scalar(c.be, unary(c.be, UnaryFn::Square, c.output()), 1.0));
      });
    case UnaryFn::Sinh:
      return diff("g cosh(x)", kX, false,
                  [](Ctx& c) { give_scaled(c, unary(c.be, UnaryFn::Cosh, c.input(0))); });
    case UnaryFn::Cosh:
      return diff("g sinh(x)", kX, false,
                  [](Ctx& c) { give_scaled(c, unary(c.be, UnaryFn::Sinh, c.input(0))); });
    case UnaryFn::Tanh:
      return diff("g (1 - y^2)", 0, true, [](Ctx& c) {
        give_scaled(c, rsub_scalar(c.be, 1.0, unary(c.be, UnaryFn::Square, c.output())));
      });
    case UnaryFn::Asin:
      return diff("g / sqrt(1 - x^2)", kX, false, [](Ctx& c) {
        auto one_m = rsub_scalar(c.be, 1.0, unary(c.be, UnaryFn::Square, c.input(0)));
        give_scaled(c, unary(c.be, UnaryFn::Rsqrt, std::move(one_m)));
      });
    case UnaryFn::Acos:
      return diff("-g / sqrt(1 - x^2)", kX, false, [](Ctx& c) {
        auto one_m = rsub_scalar(c.be, 1.0, unary(c.be, UnaryFn::Square, c.input(0)));
        give_scaled(c, neg(c.be, unary(c.be, UnaryFn::Rsqrt, std::move(one_m))));
      });
    case UnaryFn::Atan:
      return diff("g / (1 + x^2)", kX, false, [](Ctx& c) {
        auto den = add_scalar(c.be, unary(c.be, UnaryFn::Square, c.input(0)), 1.0);
        c.give(0, div(c.be, c.grad(), std::move(den)));
      });
    case UnaryFn::Asinh:
      return diff("g / sqrt(x^2 + 1)", kX, false, [](Ctx& c) {
        auto s = add_scalar(c.be, unary(c.be, UnaryFn::Square, c.input(0)), 1.0);
        give_scaled(c, unary(c.be, UnaryFn::Rsqrt, std::move(s)));
      });
    case UnaryFn::Acosh:
      return diff("g / sqrt(x^2 - 1)", kX, false, [](Ctx& c) {
        auto s = add_scalar(c.be, unary(c.be, UnaryFn::Square, c.input(0)), -1.0);
        give_scaled(c, unary(c.be, UnaryFn::Rsqrt, std::move(s)));
      });
    case UnaryFn::Atanh:
      return diff("g / (1 - x^2)", kX, false, [](Ctx& c) {
        auto den = rsub_scalar(c.be, 1.0, unary(c.be, UnaryFn::Square, c.input(0)));
        c.give(0, div(c.be, c.grad(), std::move(den)));
      });
    case UnaryFn::Deg2Rad:
      return diff("g pi / 180", 0, false,
                  [](Ctx& c) { c.give(0, mul_scalar(c.be, c.grad(), std::numbers::pi / 180.0)); });
    case UnaryFn::Rad2Deg:
      return diff("g 180 / pi", 0, false,
                  [](Ctx& c) { c.give(0, mul_scalar(c.be, c.grad(), 180.0 / std::numbers::pi)); });
    case UnaryFn::Erf:
      return diff("g 2/sqrt(pi) exp(-x^2)", kX, false, [](Ctx& c) {
        auto e = unary(c.be, UnaryFn::Exp, neg(c.be, unary(c.be, UnaryFn::Square, c.input(0))));
        give_scaled(c, mul_scalar(c.be, std::move(e), 2.0 / std::sqrt(std::numbers::pi)));
      });
    case UnaryFn::Erfc:
      return diff("-g 2/sqrt(pi) exp(-x^2)", kX, false, [](Ctx& c) {
        auto e = unary(c.be, UnaryFn::Exp, neg(c.be, unary(c.be, UnaryFn::Square, c.input(0))));
        give_scaled(c, mul_scalar(c.be, std::move(e), -2.0 / std::sqrt(std::numbers::pi)));
      });
    case UnaryFn::Relu:
      // y > 0 exactly where x > 0 (y = x there, else +-0 or NaN), so the rule keeps the
      // output, which the next op (a pooling, a linear layer) keeps anyway, and lets the
      // input go: relu then writes over its input in place (Note [In-place reuse]) and
      // the batch norm or linear output before it is freed at once.
      return diff("y > 0 ? g : 0", 0, true, [](Ctx& c) {
        c.give(0, mask(c.be, compare_scalar(c.be, BinaryFn::Gt, c.output(), 0.0), c.grad()));
      });
    case UnaryFn::Sigmoid:
      return diff("g y (1 - y)", 0, true, [](Ctx& c) {
        auto y = c.output();
        give_scaled(c, mul(c.be, y, rsub_scalar(c.be, 1.0, y)));
      });
    case UnaryFn::Gelu:
      return diff("g (Phi(x) + x phi(x))", kX, false, [](Ctx& c) {
        auto x = c.input(0);
        auto cdf = mul_scalar(
            c.be,
            add_scalar(
                c.be, unary(c.be, UnaryFn::Erf, mul_scalar(c.be, x, std::numbers::sqrt2 / 2)), 1.0),
            0.5);
        auto pdf = mul_scalar(
            c.be,
            unary(c.be, UnaryFn::Exp, mul_scalar(c.be, unary(c.be, UnaryFn::Square, x), -0.5)),
            1.0 / std::sqrt(2.0 * std::numbers::pi));
        give_scaled(c, add(c.be, std::move(cdf), mul(c.be, x, std::move(pdf))));
      });
    case UnaryFn::GeluTanh:
      return diff(
          "g (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3a x^2)), t = tanh(k (x + a x^3))", kX, false,
          [](Ctx& c) {
            const double k = std::sqrt(2.0 / std::numbers::pi), a = 0.044715;
            auto x = c.input(0);
            auto x2 = unary(c.be, UnaryFn::Square, x);
            auto inner =
                mul_scalar(c.be, mul(c.be, x, add_scalar(c.be, mul_scalar(c.be, x2, a), 1.0)), k);
            auto t = unary(c.be, UnaryFn::Tanh, std::move(inner));
            auto left = mul_scalar(c.be, add_scalar(c.be, t, 1.0), 0.5);
            auto sech2 = rsub_scalar(c.be, 1.0, unary(c.be, UnaryFn::Square, t));
            auto du = mul_scalar(c.be, add_scalar(c.be, mul_scalar(c.be, x2, 3 * a), 1.0), 0.5 * k);
            auto right = mul(c.be, mul(c.be, x, std::move(sech2)), std::move(du));
            give_scaled(c, add(c.be, std::move(left), std::move(right)));
          });
    case UnaryFn::Silu:
      return diff("g s (1 + x (1 - s)), s = sigmoid(x)", kX, false, [](Ctx& c) {
        auto x = c.input(0);
        auto s = unary(c.be, UnaryFn::Sigmoid, x);
        auto inner = add_scalar(c.be, mul(c.be, x, rsub_scalar(c.be, 1.0, s)), 1.0);
        give_scaled(c, mul(c.be, s, std::move(inner)));
      });
    case UnaryFn::Softplus:
      return diff("g sigmoid(x)", kX, false,
                  [](Ctx& c) { give_scaled(c, unary(c.be, UnaryFn::Sigmoid, c.input(0))); });
    case UnaryFn::Mish:
      return diff("g (t + x sigmoid(x) (1 - t^2)), t = tanh(softplus(x))", kX, false, [](Ctx& c) {
        auto x = c.input(0);
        auto t = unary(c.be, UnaryFn::Tanh, unary(c.be, UnaryFn::Softplus, x));
        auto sech2 = rsub_scalar(c.be, 1.0, unary(c.be, UnaryFn::Square, t));
        auto r = mul(c.be, mul(c.be, x, unary(c.be, UnaryFn::Sigmoid, x)), std::move(sech2));
        give_scaled(c, add(c.be, std::move(t), std::move(r)));
      });
    case UnaryFn::LeakyRelu:
      return diff("x < 0 ? g slope : g", kX, false, [](Ctx& c) {
        const double slope = c.op<ir::Unary>().p0;
        auto neg_side = compare_scalar(c.be, BinaryFn::Lt, c.input(0), 0.0);
        c.give(0, where(c.be, std::move(neg_side), mul_scalar(c.be, c.grad(), slope), c.grad()));
      });
    case UnaryFn::Elu:
      return diff("x < 0 ? g alpha exp(x) : g", kX, false, [](Ctx& c) {
        const double alpha = c.op<ir::Unary>().p0;
        auto x = c.input(0);
        auto neg_side = compare_scalar(c.be, BinaryFn::Lt, x, 0.0);
        auto d = mul_scalar(c.be, unary(c.be, UnaryFn::Exp, x), alpha);
        c.give(0, where(c.be, std::move(neg_side), mul(c.be, c.grad(), std::move(d)), c.grad()));
      });
    case UnaryFn::Clamp:
      return diff("min <= x <= max ? g : 0 (a NaN bound is no bound)", kX, false, [](Ctx& c) {
        const auto& u = c.op<ir::Unary>();
        auto x = c.input(0);
        Handle keep;
        if (!std::isnan(u.p0)) keep = compare_scalar(c.be, BinaryFn::Ge, x, u.p0);
        if (!std::isnan(u.p1)) {
          auto hi = compare_scalar(c.be, BinaryFn::Le, x, u.p1);
          keep = keep ? binary(c.be, BinaryFn::And, std::move(keep), std::move(hi)) : std::move(hi);
        }
        c.give(0, keep ? mask(c.be, std::move(keep), c.grad()) : c.grad());
      });
    case UnaryFn::PowScalar:
      return diff("g p x^(p - 1)", kX, false, [](Ctx& c) {
        const double p = c.op<ir::Unary>().p0;
        if (p == 0.0) {
          c.give(0, mul_scalar(c.be, c.grad(), 0.0));
          return;
        }
        auto d = p == 1.0 ? scalar(c.be, 1.0, c.in_dtype(0), c.in_shape(0).rank())
                          : unary(c.be, UnaryFn::PowScalar, c.input(0), p - 1.0);
        give_scaled(c, mul_scalar(c.be, std::move(d), p));
      });
    case UnaryFn::Sign:
    case UnaryFn::Floor:
    case UnaryFn::Ceil:
    case UnaryFn::Round:
    case UnaryFn::Trunc:
      return none("zero almost everywhere");
    case UnaryFn::IsNan:
    case UnaryFn::IsInf:
    case UnaryFn::IsFinite:
    case UnaryFn::LogicalNot:
    case UnaryFn::BitNot:
      return none("non-float output");
    case UnaryFn::Count_:
      break;
  }
  return todo("unknown unary function");
}

RuleEntry make_binary(BinaryFn fn) {
  switch (fn) {
    case BinaryFn::Add:
      return diff("da = g, db = g", 0, false, [](Ctx& c) {
        c.give(0, c.grad());
        c.give(1, c.grad());
      });
    case BinaryFn::Sub:
      return diff("da = g, db = -g", 0, false, [](Ctx& c) {
        c.give(0, c.grad());
        if (c.wants(1)) c.give(1, neg(c.be, c.grad()));
      });
    case BinaryFn::Mul:
      return diff("da = g b, db = g a", kAll, false, [](Ctx& c) {
        if (c.wants(0)) c.give(0, mul(c.be, c.grad(), c.input(1)));
        if (c.wants(1)) c.give(1, mul(c.be, c.grad(), c.input(0)));
      });
    case BinaryFn::Div:
      return diff("da = g / b, db = -g a / b^2", kAll, false, [](Ctx& c) {
        auto b = c.input(1);
        auto q = div(c.be, c.grad(), b);
        if (c.wants(1)) c.give(1, neg(c.be, mul(c.be, q, div(c.be, c.input(0), b))));
        c.give(0, std::move(q));
      });
    case BinaryFn::Pow:
      return diff("da = g b a^(b - 1), db = g y log(a)", kAll, true, [](Ctx& c) {
        auto a = c.input(0), b = c.input(1);
        if (c.wants(0)) {
          auto p = binary(c.be, BinaryFn::Pow, a, add_scalar(c.be, b, -1.0));
          c.give(0, mul(c.be, c.grad(), mul(c.be, b, std::move(p))));
        }
        if (c.wants(1)) {
          auto d = mul(c.be, c.output(), unary(c.be, UnaryFn::Log, a));
          c.give(1, mul(c.be, c.grad(), std::move(d)));
        }
      });
    case BinaryFn::Atan2:
      return diff("da = g b / (a^2 + b^2), db = -g a / (a^2 + b^2)", kAll, false, [](Ctx& c) {
        auto a = c.input(0), b = c.input(1);
        auto den = add(c.be, unary(c.be, UnaryFn::Square, a), unary(c.be, UnaryFn::Square, b));
        auto q = div(c.be, c.grad(), std::move(den));
        if (c.wants(0)) c.give(0, mul(c.be, q, b));
        if (c.wants(1)) c.give(1, neg(c.be, mul(c.be, q, a)));
      });
    case BinaryFn::Hypot:
      return diff("da = g a / y, db = g b / y", kAll, true, [](Ctx& c) {
        auto q = div(c.be, c.grad(), c.output());
        if (c.wants(0)) c.give(0, mul(c.be, q, c.input(0)));
        if (c.wants(1)) c.give(1, mul(c.be, q, c.input(1)));
      });
    case BinaryFn::LogAddExp:
      return diff("da = g sigmoid(a - b), db = g sigmoid(b - a)", kAll, false, [](Ctx& c) {
        auto a = c.input(0), b = c.input(1);
        if (c.wants(0)) {
          c.give(0, mul(c.be, c.grad(), unary(c.be, UnaryFn::Sigmoid, sub(c.be, a, b))));
        }
        if (c.wants(1)) {
          c.give(1, mul(c.be, c.grad(), unary(c.be, UnaryFn::Sigmoid, sub(c.be, b, a))));
        }
      });
    // The derivative in a is log(b) everywhere, a = 0 included (xlogy is a log(b) there for
    // b > 0); where a and b are both 0 it is taken as 0 (as PyTorch), not log(0) = -inf.
    case BinaryFn::XLogY:
      return diff("da = g log(b) (0 where a = b = 0), db = g a / b", kAll, false, [](Ctx& c) {
        auto a = c.input(0), b = c.input(1);
        if (c.wants(0)) {
          auto keep = binary(c.be, BinaryFn::Or, compare_scalar(c.be, BinaryFn::Ne, a, 0.0),
                             compare_scalar(c.be, BinaryFn::Ne, b, 0.0));
          c.give(0, mul(c.be, c.grad(), mask(c.be, keep, unary(c.be, UnaryFn::Log, b))));
        }
        if (c.wants(1)) c.give(1, mul(c.be, c.grad(), div(c.be, a, b)));
      });
    case BinaryFn::Max:
    case BinaryFn::Min:
      return diff("to a where a >= b (max) / a <= b (min), else to b", kAll, false, [](Ctx& c) {
        const bool is_max = c.op<ir::Binary>().fn == BinaryFn::Max;
        auto pick_a = binary(c.be, is_max ? BinaryFn::Ge : BinaryFn::Le, c.input(0), c.input(1));
        if (c.wants(0)) c.give(0, mask(c.be, pick_a, c.grad()));
        if (c.wants(1)) {
          auto z = scalar(c.be, 0.0, c.grad()->dtype(), c.grad()->shape().rank());
          c.give(1, where(c.be, pick_a, std::move(z), c.grad()));
        }
      });
    case BinaryFn::Rem:
      return diff("da = g, db = -g floor(a / b)", kAll, false, [](Ctx& c) {
        c.give(0, c.grad());
        if (c.wants(1)) {
          auto q = unary(c.be, UnaryFn::Floor, div(c.be, c.input(0), c.input(1)));
          c.give(1, neg(c.be, mul(c.be, c.grad(), std::move(q))));
        }
      });
    case BinaryFn::Eq:
    case BinaryFn::Ne:
    case BinaryFn::Gt:
    case BinaryFn::Ge:
    case BinaryFn::Lt:
    case BinaryFn::Le:
      return none("comparison: Bool output");
    case BinaryFn::And:
    case BinaryFn::Or:
    case BinaryFn::Xor:
    case BinaryFn::BitAnd:
    case BinaryFn::BitOr:
    case BinaryFn::BitXor:
    case BinaryFn::Shl:
    case BinaryFn::Shr:
      return none("logic or integer op");
    case BinaryFn::Count_:
      break;
  }
  return todo("unknown binary function");
}

RuleEntry make_reduce(ir::ReduceFn fn) {
  using ir::ReduceFn;
  switch (fn) {
    case ReduceFn::Sum:
      return diff("expand(g)", 0, false,
                  [](Ctx& c) { c.give(0, expand(c.be, c.grad(), c.in_shape(0))); });
    case ReduceFn::Mean:
      return diff("expand(g / n)", 0, false, [](Ctx& c) {
        const double n = double(c.in_shape(0)[c.op<ir::Reduce>().dim]);
        c.give(0, expand(c.be, mul_scalar(c.be, c.grad(), 1.0 / n), c.in_shape(0)));
      });
    case ReduceFn::Prod:
      return diff("g y / x (x must be non-zero)", kX, true, [](Ctx& c) {
        c.give(0, div(c.be, mul(c.be, c.grad(), c.output()), c.input(0)));
      });
    case ReduceFn::Max:
    case ReduceFn::Min:
      return diff("g / count shared by the elements equal to y", kX, true, [](Ctx& c) {
        const std::size_t d = c.op<ir::Reduce>().dim;
        auto hit = binary(c.be, BinaryFn::Eq, c.input(0), c.output());
        auto count = reduce(c.be, ir::ReduceFn::Sum, cast(c.be, hit, c.in_dtype(0)), d);
        c.give(0, mask(c.be, std::move(hit), div(c.be, c.grad(), std::move(count))));
      });
    case ReduceFn::ArgMax:
    case ReduceFn::ArgMin:
      return none("integer output");
    case ReduceFn::Any:
    case ReduceFn::All:
      return none("Bool output");
    case ReduceFn::Count_:
      break;
  }
  return todo("unknown reduction");
}

RuleEntry make_scan(ir::ScanFn fn) {
  switch (fn) {
    case ir::ScanFn::Sum:
      return diff("reverse cumsum of g", 0, false,
                  [](Ctx& c) { c.give(0, reverse_cumsum(c.be, c.grad(), c.op<ir::Scan>().dim)); });
    case ir::ScanFn::Prod:
      return diff("reverse cumsum(g y) / x (x must be non-zero)", kX, true, [](Ctx& c) {
        auto s = reverse_cumsum(c.be, mul(c.be, c.grad(), c.output()), c.op<ir::Scan>().dim);
        c.give(0, div(c.be, std::move(s), c.input(0)));
      });
    case ir::ScanFn::Max:
    case ir::ScanFn::Min:
      return todo("cummax/cummin: no derivative rule yet");
    case ir::ScanFn::Count_:
      break;
  }
  return todo("unknown scan");
}

std::vector<ir::SliceRange> full_ranges(const Shape& s) {
  std::vector<ir::SliceRange> r(s.rank());
  for (std::size_t i = 0; i < s.rank(); ++i) r[i] = {0, s[i], 1};
  return r;
}

// Pooling (ir::Pool): g flows back through the window entries, gathered by Fold from a
// [N, C * K, L] column matrix, as the composite unfold + reduction over the window would.
Handle fold_window_grad(Ctx& c, Handle gcols, std::size_t k, std::size_t l) {
  const auto& o = c.op<ir::Pool>();
  const Shape& xs = c.in_shape(0);
  std::vector<std::size_t> spatial(xs.begin() + 2, xs.end());
  return run(c.be, ir::Fold{reshape(c.be, std::move(gcols), Shape{xs[0], xs[1] * k, l}),
                            std::move(spatial), o.window});
}
// (K, L): the window size and the number of window positions of a Pool.
std::pair<std::size_t, std::size_t> pool_extents(Ctx& c) {
  const ir::Window& w = c.op<ir::Pool>().window;
  std::size_t k = 1, l = 1;
  for (std::size_t v : w.kernel) k *= v;
  // L from the window geometry, not from g's size: an empty batch (N or C of 0) has L > 0.
  const Shape& xs = c.in_shape(0);
  for (std::size_t p : ir::window_positions(std::vector<std::size_t>(xs.begin() + 2, xs.end()), w))
    l *= p;
  return {k, l};
}

RuleEntry make_pool(ir::PoolFn fn) {
  using ir::PoolFn;
  switch (fn) {
    case PoolFn::Sum:
      return diff("fold of g spread over each window", 0, false, [](Ctx& c) {
        const auto [k, l] = pool_extents(c);
        const Shape& xs = c.in_shape(0);
        auto g = reshape(c.be, c.grad(), Shape{xs[0], xs[1], 1, l});
        c.give(0, fold_window_grad(c, expand(c.be, std::move(g), Shape{xs[0], xs[1], k, l}), k, l));
      });
    case PoolFn::Max:
      return diff(
          "fold of g / count shared by the window entries equal to y", kX, true, [](Ctx& c) {
            ir::MaxPoolGrad direct{c.input(0), c.output(), c.grad(), c.op<ir::Pool>().window};
            if (c.be.supports(ir::Op(direct))) {
              c.give(0, run(c.be, std::move(direct)));
              return;
            }
            const auto [k, l] = pool_extents(c);
            const Shape& xs = c.in_shape(0);
            const Shape row{xs[0], xs[1], 1, l}, cols{xs[0], xs[1], k, l};
            // As unfold + a max reduction would: ties share g equally.
            auto x = reshape(c.be,
                             run(c.be, ir::Unfold{c.input(0), c.op<ir::Pool>().window,
                                                  -std::numeric_limits<double>::infinity()}),
                             cols);
            auto hit = binary(c.be, BinaryFn::Eq, std::move(x), reshape(c.be, c.output(), row));
            auto count = reduce(c.be, ir::ReduceFn::Sum, cast(c.be, hit, c.in_dtype(0)), 2);
            auto g = div(c.be, reshape(c.be, c.grad(), row), std::move(count));
            c.give(0, fold_window_grad(c, mask(c.be, std::move(hit), std::move(g)), k, l));
          });
    case PoolFn::Count_:
      break;
  }
  return todo("unknown pooling function");
}

RuleEntry make_kind(ir::OpKind k) {
  using ir::OpKind;
  switch (k) {
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Reduce:
    case OpKind::Scan:
    case OpKind::Pool:
      return diff("per function: see its table", 0, false, nullptr);
    case OpKind::Where:
      return diff("da = cond ? g : 0, db = cond ? 0 : g", 1, false, [](Ctx& c) {
        auto cond = c.input(0);
        if (c.wants(1)) c.give(1, mask(c.be, cond, c.grad()));
        if (c.wants(2)) {
          auto z = scalar(c.be, 0.0, c.grad()->dtype(), c.grad()->shape().rank());
          c.give(2, where(c.be, cond, std::move(z), c.grad()));
        }
      });
    case OpKind::Cast:
      return diff("cast g back to x's dtype (float to float)", 0, false,
                  [](Ctx& c) { c.give(0, cast(c.be, c.grad(), c.in_dtype(0))); });
    case OpKind::Matmul:
      return diff("da = g b^T, db = a^T g (transposes are views; batch dims summed)", kAll, false,
                  [](Ctx& c) {
                    if (c.wants(0)) c.give_product(0, {c.grad()}, {c.input(1), true});
                    if (c.wants(1)) c.give_product(1, {c.input(0), true}, {c.grad()});
                  });
    case OpKind::Reshape:
      return diff("reshape g back", 0, false,
                  [](Ctx& c) { c.give(0, reshape(c.be, c.grad(), c.in_shape(0))); });
    case OpKind::Permute:
      return diff("permute g by the inverse axes", 0, false, [](Ctx& c) {
        const auto& axes = c.op<ir::Permute>().axes;
        std::vector<std::size_t> inv(axes.size());
        for (std::size_t i = 0; i < axes.size(); ++i) inv[axes[i]] = i;
        c.give(0, permute(c.be, c.grad(), std::move(inv)));
      });
    case OpKind::Expand:
      return diff("sum g over the expanded dims", 0, false, [](Ctx& c) { c.give(0, c.grad()); });
    case OpKind::Slice:
      return diff("zeros with g written into the slice", 0, false, [](Ctx& c) {
        c.give_slice(0, c.op<ir::Slice>().ranges, c.grad());  // Note [Slice gradients]
      });
    case OpKind::Flip:
      return diff("flip g", 0, false,
                  [](Ctx& c) { c.give(0, flip(c.be, c.grad(), c.op<ir::Flip>().axes)); });
    case OpKind::SliceAssign:
      return diff("dx = g with the slice zeroed, dvalue = g[slice]", 0, false, [](Ctx& c) {
        const auto& ranges = c.op<ir::SliceAssign>().ranges;
        if (c.wants(1)) c.give(1, slice(c.be, c.grad(), ranges));
        if (c.wants(0)) {
          auto z = zeros(c.be, c.in_shape(1), c.in_dtype(1));
          c.give(0, slice_assign(c.be, c.grad(), ranges, std::move(z)));
        }
      });
    case OpKind::Cat:
      return diff("each input gets its slice of g", 0, false, [](Ctx& c) {
        const std::size_t d = c.op<ir::Cat>().dim;
        std::size_t start = 0;
        for (std::size_t i = 0; i < c.num_inputs(); ++i) {
          const std::size_t len = c.in_shape(i)[d];
          if (c.wants(i)) {
            auto r = full_ranges(c.grad()->shape());
            r[d] = {start, start + len, 1};
            c.give(i, slice(c.be, c.grad(), std::move(r)));
          }
          start += len;
        }
      });
    case OpKind::Gather:
      return diff("scatter-add g into zeros at index", kIndex, false, [](Ctx& c) {
        const auto& o = c.op<ir::Gather>();
        auto z = zeros(c.be, c.in_shape(0), c.in_dtype(0));
        c.give(0, scatter(c.be, std::move(z), o.dim, c.input(1), c.grad(), true));
      });
    case OpKind::Scatter:
      return diff("dx = g (zeroed where overwritten), dsrc = gather(g, index)", kIndex, false,
                  [](Ctx& c) {
                    const auto& o = c.op<ir::Scatter>();
                    auto index = c.input(1);
                    if (c.wants(2)) c.give(2, gather(c.be, c.grad(), o.dim, index));
                    if (c.wants(0)) {
                      if (o.add) {
                        c.give(0, c.grad());
                      } else {
                        auto z = zeros(c.be, c.in_shape(2), c.in_dtype(2));
                        c.give(0, scatter(c.be, c.grad(), o.dim, index, std::move(z), false));
                      }
                    }
                  });
    case OpKind::IndexSelect:
      return diff("index-add g into zeros", kIndex, false, [](Ctx& c) {
        const auto& o = c.op<ir::IndexSelect>();
        auto z = zeros(c.be, c.in_shape(0), c.in_dtype(0));
        c.give(0, index_add(c.be, std::move(z), o.dim, c.input(1), c.grad()));
      });
    case OpKind::IndexAdd:
      return diff("dx = g, dsrc = index_select(g, index)", kIndex, false, [](Ctx& c) {
        const auto& o = c.op<ir::IndexAdd>();
        c.give(0, c.grad());
        if (c.wants(2)) c.give(2, index_select(c.be, c.grad(), o.dim, c.input(1)));
      });
    case OpKind::Sort:
      return diff("scatter g back through the sort indices", 0, true, [](Ctx& c) {
        const auto& o = c.op<ir::Sort>();
        auto z = zeros(c.be, c.in_shape(0), c.in_dtype(0));
        c.give(0, scatter(c.be, std::move(z), o.dim, c.output(1), c.grad(), false));
      });
    case OpKind::Softmax:
      return diff("softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g)", 0, true, [](Ctx& c) {
        const auto& o = c.op<ir::Softmax>();
        auto y = c.output();
        if (o.log) {
          auto s = reduce(c.be, ir::ReduceFn::Sum, c.grad(), o.dim);
          auto p = unary(c.be, UnaryFn::Exp, std::move(y));
          c.give(0, sub(c.be, c.grad(), mul(c.be, std::move(p), std::move(s))));
        } else {
          auto gy = mul(c.be, c.grad(), y);
          auto s = reduce(c.be, ir::ReduceFn::Sum, std::move(gy), o.dim);
          c.give(0, mul(c.be, std::move(y), sub(c.be, c.grad(), std::move(s))));
        }
      });
    case OpKind::LayerNorm:
      return diff(
          "xhat = (x - mean) rstd, gw = g weight: dx = rstd (gw - mean(gw) - xhat mean(gw xhat)), "
          "dweight = sum over rows of g xhat, dbias = sum over rows of g",
          kX | kY, false, [](Ctx& c) {
            const auto& o = c.op<ir::LayerNorm>();
            // Every normalised row as the last dim of [lead..., n]; weight as [1..., n].
            const Shape& xs = c.in_shape(0);
            const std::size_t lead = xs.rank() - o.dims;
            std::vector<std::size_t> rows_dims(xs.dims().begin(), xs.dims().begin() + lead);
            std::size_t n = 1;
            for (std::size_t d = lead; d < xs.rank(); ++d) n *= xs[d];
            rows_dims.push_back(n);
            const Shape rows_shape(rows_dims);
            std::vector<std::size_t> affine_dims(lead, 1);
            affine_dims.push_back(n);
            const Shape affine_shape(affine_dims);
            const std::size_t last = lead;
            // Note [Layer norm through batch norm]: each normalised row of x is one channel
            // of x viewed as [1, rows, n], whose batch statistics are the row's mean and
            // biased variance — the same xhat and the same closed form for dx, with weight
            // folded into g first (dx = rstd (gw - mean(gw) - xhat mean(gw xhat))). Where
            // the backend has the batch-norm kernels, BatchNorm gives xhat and the
            // statistics in one read of x and BatchNormGrad gives dx in one more, instead
            // of the dozen element-wise passes and reductions below.
            const bool has_weight = c.in_shape(1).rank() > 0;
            std::size_t rows = 1;
            for (std::size_t d = 0; d < lead; ++d) rows *= xs[d];
            const Shape channels{1, rows, n};
            ir::BatchNorm bn{reshape(c.be, c.input(0), channels), Handle{}, Handle{}, o.eps};
            if (rows * n > 0 && c.be.supports(ir::Op(bn))) {  // (BatchNormGrad: or its fallback)
              auto normed = c.be.execute(std::move(bn));      // xhat, and [2, rows] statistics
              auto g = reshape(c.be, c.grad(), channels);
              const auto affine_grad = [&](Handle v, std::size_t slot) {
                return reshape(
                    c.be,
                    reduce(c.be, ir::ReduceFn::Sum, reshape(c.be, std::move(v), Shape{rows, n}), 0),
                    c.in_shape(slot));
              };
              if (c.wants(1)) c.give(1, affine_grad(mul(c.be, g, normed[0]), 1));
              if (c.wants(2)) c.give(2, affine_grad(g, 2));
              if (!c.wants(0)) return;
              auto gw = has_weight
                            ? mul(c.be, std::move(g), reshape(c.be, c.input(1), Shape{1, 1, n}))
                            : std::move(g);
              ir::BatchNormGrad bn_grad{reshape(c.be, c.input(0), channels), Handle{},
                                        std::move(normed[1]), std::move(gw), o.eps};
              c.give(0, reshape(c.be, c.be.execute(std::move(bn_grad))[0], xs));
              return;
            }
            auto x = reshape(c.be, c.input(0), rows_shape);
            auto mean = reduce(c.be, ir::ReduceFn::Mean, x, last);
            auto xc = sub(c.be, std::move(x), std::move(mean));
            auto var = reduce(c.be, ir::ReduceFn::Mean, mul(c.be, xc, xc), last);
            auto rstd = unary(c.be, UnaryFn::Rsqrt, add_scalar(c.be, std::move(var), o.eps));
            auto xhat = mul(c.be, std::move(xc), rstd);
            auto g = reshape(c.be, c.grad(), rows_shape);
            const auto affine_grad = [&](Handle rows_value, std::size_t slot) {
              return reshape(c.be, sum_to(c.be, std::move(rows_value), affine_shape),
                             c.in_shape(slot));
            };
            // The saved op's handles may be dropped (Note [Saved tensors]); an absent
            // optional operand is told by its empty recorded shape.
            if (c.wants(1)) c.give(1, affine_grad(mul(c.be, g, xhat), 1));
            if (c.wants(2)) c.give(2, affine_grad(g, 2));
            if (!c.wants(0)) return;
            auto gw = has_weight ? mul(c.be, g, reshape(c.be, c.input(1), affine_shape)) : g;
            auto m1 = reduce(c.be, ir::ReduceFn::Mean, gw, last);
            auto m2 = reduce(c.be, ir::ReduceFn::Mean, mul(c.be, gw, xhat), last);
            auto inner = sub(c.be, sub(c.be, std::move(gw), std::move(m1)),
                             mul(c.be, std::move(xhat), std::move(m2)));
            c.give(0, reshape(c.be, mul(c.be, std::move(rstd), std::move(inner)), xs));
          });
    case OpKind::Unfold:
      return diff("fold g back onto x's spatial extents (padding entries are dropped)", 0, false,
                  [](Ctx& c) {
                    const auto& o = c.op<ir::Unfold>();
                    const Shape& xs = c.in_shape(0);
                    std::vector<std::size_t> spatial(xs.begin() + 2, xs.end());
                    c.give(0, run(c.be, ir::Fold{c.grad(), std::move(spatial), o.window}));
                  });
    case OpKind::Fold:
      return diff("unfold g with zero padding (fold is unfold's adjoint)", 0, false, [](Ctx& c) {
        c.give(0, run(c.be, ir::Unfold{c.grad(), c.op<ir::Fold>().window, 0.0}));
      });
    case OpKind::Conv:
      // Each pass is bilinear in its operands, and the three are each other's adjoints:
      // with y = F(x, w), dx = I(g, w) and dw = W(x, g), <F(x, w), g> = <x, I(g, w)> =
      // <w, W(x, g)>.
      return diff(
          "forward: dx = input_grad(g, w), dw = weight_grad(x, g); input_grad(a, w): "
          "da = forward(g, w), dw = weight_grad(g, a); weight_grad(x, a): "
          "dx = input_grad(a, g), da = forward(x, g)",
          kAll, false, [](Ctx& c) {
            const auto& o = c.op<ir::Conv>();
            const auto conv = [&](Handle x, Handle w, ir::ConvPass pass,
                                  std::vector<std::size_t> image = {}) {
              return run(c.be, ir::Conv{std::move(x), std::move(w), o.window, o.groups, pass,
                                        std::move(image)});
            };
            const auto spatial = [](const Shape& s) {
              return std::vector<std::size_t>(s.begin() + 2, s.end());
            };
            using P = ir::ConvPass;
            switch (o.pass) {
              case P::Forward:
                if (c.wants(0))
                  c.give(0, conv(c.grad(), c.input(1), P::InputGrad, spatial(c.in_shape(0))));
                if (c.wants(1)) c.give(1, conv(c.input(0), c.grad(), P::WeightGrad));
                break;
              case P::InputGrad:
                if (c.wants(0)) c.give(0, conv(c.grad(), c.input(1), P::Forward));
                if (c.wants(1)) c.give(1, conv(c.grad(), c.input(0), P::WeightGrad));
                break;
              case P::WeightGrad:
                if (c.wants(0))
                  c.give(0, conv(c.input(1), c.grad(), P::InputGrad, spatial(c.in_shape(0))));
                if (c.wants(1)) c.give(1, conv(c.input(0), c.grad(), P::Forward));
                break;
              case P::Count_:
                break;
            }
          });
    case OpKind::MaxPoolGrad:
      // Linear in g; piecewise constant in x and y, which get no gradient.
      return diff(
          "dg = sum over each window of gx / count at the entries equal to y", kAll, false,
          [](Ctx& c) {
            if (!c.wants(2)) return;
            const auto& o = c.op<ir::MaxPoolGrad>();
            const Shape& xs = c.in_shape(0);
            const Shape& gs = c.in_shape(2);
            std::size_t k = 1;
            for (std::size_t v : o.window.kernel) k *= v;
            const std::size_t l = gs.num_elements() / std::max<std::size_t>(xs[0] * xs[1], 1);
            const Shape row{xs[0], xs[1], 1, l}, cols{xs[0], xs[1], k, l};
            auto x = reshape(c.be,
                             run(c.be, ir::Unfold{c.input(0), o.window,
                                                  -std::numeric_limits<double>::infinity()}),
                             cols);
            auto hit = binary(c.be, BinaryFn::Eq, std::move(x), reshape(c.be, c.input(1), row));
            auto count = reduce(c.be, ir::ReduceFn::Sum, cast(c.be, hit, c.in_dtype(0)), 2);
            auto gx = reshape(c.be, run(c.be, ir::Unfold{c.grad(), o.window, 0.0}), cols);
            auto share = div(c.be, std::move(gx), std::move(count));
            auto dg =
                reduce(c.be, ir::ReduceFn::Sum, mask(c.be, std::move(hit), std::move(share)), 2);
            c.give(2, reshape(c.be, std::move(dg), gs));
          });
    case OpKind::BatchNorm:
      // The statistics output gets no gradient (it is recorded as detached); y's gradient
      // in x goes through the statistics, in closed form (ir::BatchNormGrad).
      return diff(
          "BatchNormGrad(x, weight, stats, g): dx = weight rstd (g - mean(g) - xhat "
          "mean(g xhat)), dweight = sum(g xhat), dbias = sum(g) (a backend without the "
          "op runs it on the registry's fallback)",
          kX | kY, true, [](Ctx& c) {
            const auto& o = c.op<ir::BatchNorm>();
            const bool has_weight = c.in_shape(1).rank() > 0;
            auto d = c.be.execute(ir::BatchNormGrad{c.input(0), has_weight ? c.input(1) : Handle{},
                                                    c.output(1), c.grad(), o.eps});
            give_channel_norm_grads(c, std::move(d));
          });
    case OpKind::BatchNormGrad:
      // With h dx's gradient, over each channel's M values: A = sum(h xhat),
      // B = sum(g xhat), K = sum(h g) - sum(h) sum(g) / M. dx is self-adjoint in g, and
      // the statistics are x's (they get no gradient).
      return diff(
          "dg = BatchNormGrad(x, weight, stats, h), dweight = rstd (K - A B / M), "
          "dx = -weight rstd^2 / M (xhat (K - 3 A B / M) + B (h - mean(h)) + A (g - mean(g)))",
          kAll, false, [](Ctx& c) {
            const auto& o = c.op<ir::BatchNormGrad>();
            const bool has_weight = c.in_shape(1).rank() > 0;
            if (c.wants(3)) {
              c.give(3,
                     c.be.execute(ir::BatchNormGrad{c.input(0), has_weight ? c.input(1) : Handle{},
                                                    c.input(2), c.grad(), o.eps})[0]);
            }
            const bool want_w = has_weight && c.wants(1);
            if (!c.wants(0) && !want_w) return;
            auto [dx, dw] = batch_norm_grad_grad(c.be, c.in_shape(0), c.input(0),
                                                 has_weight ? c.input(1) : Handle{}, c.input(2),
                                                 c.input(3), c.grad(), o.eps, c.wants(0), want_w);
            if (want_w) c.give(1, std::move(dw));
            if (c.wants(0)) c.give(0, std::move(dx));
          });
    case OpKind::GroupNorm:
      // As BatchNorm's: the statistics output is detached; y's gradient in closed form.
      return diff(
          "GroupNormGrad(x, weight, stats, g): dx = rstd (gw - mean(gw) - xhat mean(gw xhat)) "
          "per sample and group (gw = g weight), dweight = sum(g xhat), dbias = sum(g)",
          kX | kY, true, [](Ctx& c) {
            const auto& o = c.op<ir::GroupNorm>();
            const bool has_weight = c.in_shape(1).rank() > 0;
            auto d = c.be.execute(ir::GroupNormGrad{c.input(0), has_weight ? c.input(1) : Handle{},
                                                    c.output(1), c.grad(), o.groups, o.eps});
            give_channel_norm_grads(c, std::move(d));
          });
    case OpKind::GroupNormGrad:
      // Note [Group norm's second derivative]: per sample and group, dx is BatchNormGrad's
      // without weight over x seen as [1, N * groups, M] with g replaced by gw = g weight[c]
      // (M = C / groups * prod(*)). So with h dx's gradient and dgw = BatchNormGrad(x, stats,
      // h) (dx is self-adjoint in gw): dg = weight dgw, dweight = sum over N and * of g dgw,
      // and x's gradient is BatchNormGrad's rule for that view (batch_norm_grad_grad).
      return diff(
          "dgw = BatchNormGrad over [1, N groups, M] of h: dg = weight dgw, dweight = sum(g "
          "dgw), dx = BatchNormGrad's dx rule over that view with g weight for g",
          kAll, false, [](Ctx& c) {
            const auto& o = c.op<ir::GroupNormGrad>();
            auto& be = c.be;
            const Shape& xs = c.in_shape(0);
            const bool has_weight = c.in_shape(1).rank() > 0;
            const std::size_t n = xs[0], ch = xs[1];
            const std::size_t l = n * ch == 0 ? 0 : xs.num_elements() / (n * ch);
            const Shape ncl{n, ch, l}, view{1, n * o.groups, ch / o.groups * l};
            const auto as_view = [&](Handle t) { return reshape(be, std::move(t), view); };
            const auto weighted = [&](Handle t) {
              if (!has_weight) return t;
              return mul(be, reshape(be, std::move(t), ncl),
                         reshape(be, c.input(1), Shape{1, ch, 1}));
            };
            const bool want_w = has_weight && c.wants(1);
            if (c.wants(3) || want_w) {
              auto dgw =
                  reshape(be,
                          be.execute(ir::BatchNormGrad{as_view(c.input(0)), Handle{}, c.input(2),
                                                       as_view(c.grad()), o.eps})[0],
                          ncl);
              if (want_w) {
                auto p = mul(be, dgw, reshape(be, c.input(3), ncl));
                c.give(1, reshape(be,
                                  reduce(be, ir::ReduceFn::Sum,
                                         reduce(be, ir::ReduceFn::Sum, std::move(p), 2), 0),
                                  Shape{ch}));
              }
              if (c.wants(3)) c.give(3, reshape(be, weighted(std::move(dgw)), xs));
            }
            if (!c.wants(0)) return;
            auto gw = as_view(weighted(c.input(3)));
            auto dx = batch_norm_grad_grad(be, view, as_view(c.input(0)), Handle{}, c.input(2),
                                           std::move(gw), as_view(c.grad()), o.eps, true, false)
                          .first;
            c.give(0, reshape(be, std::move(dx), xs));
          });
    case OpKind::Svd:
      // d sigma_i = u_i^T dx v_i for distinct singular values; U and Vh are detached.
      return diff("dx = U diag(g) Vh (the singular vectors of each matrix)", 0, true, [](Ctx& c) {
        const Shape& u = c.output(1)->shape();
        std::vector<std::size_t> row = c.grad()->shape().dims();
        row.insert(row.end() - 1, 1);  // [..., 1, k]
        auto ug = mul(c.be, c.output(1), reshape(c.be, c.grad(), Shape(row)));
        EMBER_ASSERT(ug->shape() == u);
        c.give(0, matmul(c.be, std::move(ug), c.output(2)));
      });
    case OpKind::RmsNorm:
      return diff(
          "RmsNormGrad(x, weight, g): with xhat = x rstd, gw = g weight, dx = rstd (gw - xhat "
          "mean(gw xhat)), dweight = sum over rows of g xhat (a backend without the op runs it "
          "on the registry's fallback)",
          kX | kY, false, [](Ctx& c) {
            const auto& o = c.op<ir::RmsNorm>();
            const bool has_weight = c.in_shape(1).rank() > 0;
            auto d = c.be.execute(ir::RmsNormGrad{c.input(0), has_weight ? c.input(1) : Handle{},
                                                  c.grad(), o.dims, o.eps});
            if (c.wants(0)) c.give(0, std::move(d[0]));
            if (has_weight && c.wants(1)) c.give(1, std::move(d[1]));
          });
    case OpKind::RmsNormGrad:
      // Note [RMS norm's second derivative]: the node stands for dx (dweight is recorded as
      // detached). Per row of n, with a dx's gradient, r = rstd, gw = g weight, A = sum(a
      // gw), B = sum(a x), C = sum(gw x) and dx = r gw - r^3 x C / n: dx is linear in gw, and
      // its adjoint in gw is RmsNormGrad without weight applied to a, u = r a - r^3 x B / n,
      // so dg = weight u and dweight = sum over rows of g u; in x, through r (dr/dx =
      // -r^3 x / n) and the explicit x, dx = -(r^3 / n) (x (A - 3 r^2 B C / n) + B gw + C a).
      return diff(
          "u = RmsNormGrad(x, a): dg = weight u, dweight = sum over rows of g u, "
          "dx = -(rstd^3 / n) (x (A - 3 rstd^2 B C / n) + B gw + C a) with A = sum(a gw), "
          "B = sum(a x), C = sum(gw x)",
          kAll, false, [](Ctx& c) {
            const auto& o = c.op<ir::RmsNormGrad>();
            auto& be = c.be;
            const Shape& xs = c.in_shape(0);
            const bool has_weight = c.in_shape(1).rank() > 0;
            std::size_t n = 1;
            for (std::size_t d = xs.rank() - o.dims; d < xs.rank(); ++d) n *= xs[d];
            const std::size_t rows = n == 0 ? 0 : xs.num_elements() / n;
            const Shape rs{rows, n}, ws{1, n};
            const Handle a = reshape(be, c.grad(), rs);
            const Handle g = reshape(be, c.input(2), rs);
            if (c.wants(2) || (has_weight && c.wants(1))) {
              auto u = reshape(
                  be, be.execute(ir::RmsNormGrad{c.input(0), Handle{}, c.grad(), o.dims, o.eps})[0],
                  rs);
              if (has_weight && c.wants(1)) {
                c.give(1,
                       reshape(be, reduce(be, ir::ReduceFn::Sum, mul(be, g, u), 0), c.in_shape(1)));
              }
              if (c.wants(2)) {
                if (has_weight) u = mul(be, std::move(u), reshape(be, c.input(1), ws));
                c.give(2, reshape(be, std::move(u), xs));
              }
            }
            if (!c.wants(0)) return;
            const Handle x = reshape(be, c.input(0), rs);
            const Handle gw = has_weight ? mul(be, g, reshape(be, c.input(1), ws)) : g;
            const auto rowsum = [&](Handle t) { return reduce(be, ir::ReduceFn::Sum, t, 1); };
            const double inv_n = 1.0 / static_cast<double>(std::max<std::size_t>(n, 1));
            auto r = unary(be, UnaryFn::Rsqrt,
                           add_scalar(be, mul_scalar(be, rowsum(mul(be, x, x)), inv_n), o.eps));
            auto a_sum = rowsum(mul(be, a, gw)), b_sum = rowsum(mul(be, a, x)),
                 c_sum = rowsum(mul(be, gw, x));
            auto r2 = mul(be, r, r);
            auto coef_x =
                sub(be, a_sum, mul_scalar(be, mul(be, r2, mul(be, b_sum, c_sum)), 3.0 * inv_n));
            auto inner =
                add(be, add(be, mul(be, x, coef_x), mul(be, b_sum, gw)), mul(be, c_sum, a));
            auto scale = mul_scalar(be, mul(be, r2, r), -inv_n);
            c.give(0, reshape(be, mul(be, scale, inner), xs));
          });
    case OpKind::Attention:
      // lse (output 1) is recorded as detached; out's gradient by AttentionGrad (run on the
      // registry's fallback where the backend lacks it).
      return diff(
          "AttentionGrad(q, k, v, mask, y, lse, g): with P = exp(S - lse), D = rowsum(g y), "
          "dS = P (g v^T - D): dq = scale dS k, dk = scale dS^T q, dv = P^T g (the mask gets "
          "no gradient)",
          kAll, true, [](Ctx& c) {
            const auto& o = c.op<ir::Attention>();
            const bool has_mask = c.in_shape(3).rank() > 0;
            auto d = c.be.execute(ir::AttentionGrad{c.input(0), c.input(1), c.input(2),
                                                    has_mask ? c.input(3) : Handle{}, c.output(0),
                                                    c.output(1), c.grad(), o.causal, o.scale});
            for (std::size_t i = 0; i < 3; ++i)
              if (c.wants(i)) c.give(i, std::move(d[i]));
          });
    case OpKind::AttentionGrad:
      // Note [Attention's second derivative]: the node stands for dq (dk and dv are
      // recorded as detached, as every later output), so only dq's gradient a arrives. With
      // y and lse taken as the forward's for these q, k, v (their dependence on q, k and v is
      // differentiated here, so y and lse get none), W = scale a k^T, R = rowsum(P W),
      // Z = P (W - R), dP = g v^T, D = rowsum(P dP) and dS = P (dP - D): dg = Z v,
      // dv = Z^T g, G_P = (W - R) dP - D W, G_S = P (G_P - rowsum(P G_P)),
      // dq = scale G_S k, dk = scale (G_S^T q + dS^T a).
      return diff(
          "W = scale a k^T, R = rowsum(P W), Z = P (W - R), D = rowsum(P dP), dS = P (dP - D), "
          "G_P = (W - R) dP - D W, G_S = P (G_P - rowsum(P G_P)): dg = Z v, dv = Z^T g, "
          "dq = scale G_S k, dk = scale (G_S^T q + dS^T a) (a: dq's gradient; dk and dv are "
          "detached)",
          kAll, false, [](Ctx& c) {
            const auto& o = c.op<ir::AttentionGrad>();
            auto& be = c.be;
            const std::size_t r = c.in_shape(0).rank(), last = r - 1;
            const Handle q = c.input(0), k = c.input(1), v = c.input(2), g = c.input(6);
            const Handle a = c.grad();
            const Handle p = attention_probs(c, o);
            const auto rowsum = [&](Handle x) {
              return reduce(be, ir::ReduceFn::Sum, std::move(x), last);
            };
            auto dp = matmul(be, g, transpose_last(be, v));
            auto d = rowsum(mul(be, p, dp));
            auto w = mul_scalar(be, matmul(be, a, transpose_last(be, k)), o.scale);
            auto w_r = sub(be, w, rowsum(mul(be, p, w)));
            auto z = mul(be, p, w_r);
            if (c.wants(6)) c.give(6, matmul(be, z, v));
            if (c.wants(2)) c.give(2, matmul(be, transpose_last(be, z), g));
            if (!c.wants(0) && !c.wants(1)) return;
            auto ds = mul(be, p, sub(be, dp, d));
            auto gp = sub(be, mul(be, w_r, dp), mul(be, d, w));
            auto gs = mul(be, p, sub(be, gp, rowsum(mul(be, p, gp))));
            if (c.wants(0)) c.give(0, mul_scalar(be, matmul(be, gs, k), o.scale));
            if (c.wants(1)) {
              auto dk = add(be, matmul(be, transpose_last(be, gs), q),
                            matmul(be, transpose_last(be, ds), a));
              c.give(1, mul_scalar(be, std::move(dk), o.scale));
            }
          });
    case OpKind::Nonzero:
      return none("integer output");
    case OpKind::Fill:
    case OpKind::Arange:
    case OpKind::Random:
      return none("creation: no operands");
    case OpKind::Count_:
      break;
  }
  return todo("unknown op");
}

template <class E, class F>
std::vector<RuleEntry> build(F make) {
  std::vector<RuleEntry> v;
  for (std::size_t i = 0; i < static_cast<std::size_t>(E::Count_); ++i) {
    v.push_back(make(static_cast<E>(i)));
  }
  return v;
}

const std::vector<RuleEntry>& unary_table() {
  static const auto t = build<UnaryFn>(make_unary);
  return t;
}
const std::vector<RuleEntry>& binary_table() {
  static const auto t = build<BinaryFn>(make_binary);
  return t;
}
const std::vector<RuleEntry>& reduce_table() {
  static const auto t = build<ir::ReduceFn>(make_reduce);
  return t;
}
const std::vector<RuleEntry>& scan_table() {
  static const auto t = build<ir::ScanFn>(make_scan);
  return t;
}
const std::vector<RuleEntry>& pool_table() {
  static const auto t = build<ir::PoolFn>(make_pool);
  return t;
}
const std::vector<RuleEntry>& kind_table() {
  static const auto t = build<ir::OpKind>(make_kind);
  return t;
}

}  // namespace

const RuleEntry& unary_rule(UnaryFn fn) { return unary_table()[static_cast<std::size_t>(fn)]; }
const RuleEntry& binary_rule(BinaryFn fn) { return binary_table()[static_cast<std::size_t>(fn)]; }
const RuleEntry& reduce_rule(ir::ReduceFn fn) {
  return reduce_table()[static_cast<std::size_t>(fn)];
}
const RuleEntry& scan_rule(ir::ScanFn fn) { return scan_table()[static_cast<std::size_t>(fn)]; }
const RuleEntry& pool_rule(ir::PoolFn fn) { return pool_table()[static_cast<std::size_t>(fn)]; }
const RuleEntry& kind_rule(ir::OpKind k) { return kind_table()[static_cast<std::size_t>(k)]; }

const RuleEntry& fn_rule(UnaryFn fn) { return unary_rule(fn); }
const RuleEntry& fn_rule(BinaryFn fn) { return binary_rule(fn); }
const RuleEntry& fn_rule(ir::ReduceFn fn) { return reduce_rule(fn); }
const RuleEntry& fn_rule(ir::ScanFn fn) { return scan_rule(fn); }
const RuleEntry& fn_rule(ir::PoolFn fn) { return pool_rule(fn); }

const RuleEntry& rule_for(const ir::Op& op) {
  return std::visit(
      [&](const auto& o) -> const RuleEntry& {
        // An op with a function enum answers with that function's table (an enum without
        // an fn_rule overload does not compile); the others with their kind's entry.
        if constexpr (requires { o.fn; }) {
          return fn_rule(o.fn);
        } else {
          return kind_rule(ir::kind_of(op));
        }
      },
      op);
}

bool is_memory_bound(ir::OpKind kind) {
  const ir::OpClass c = ir::op_class(kind);
  return c == ir::OpClass::ElementWise || c == ir::OpClass::View;
}

}  // namespace ember::autodiff
