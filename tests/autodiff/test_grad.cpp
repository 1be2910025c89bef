// Autodiff tests beside the conformance harness's grad mode (test_conformance --mode grad,
// ConformanceGrad.*), which checks every op family's gradients against finite differences
// from the harness's cases: the completeness of the derivative table and the generated rule
// table, gradients the harness cannot express (each test says why: a cast, ties, operands
// computed inside the graph under both checkpointing strategies compared bit for bit, trials
// with NaNs, batch norm, untracked operands, reuse and composite chains), the API's failure
// modes, memory after backward, threads, and gradients of small models compared with
// PyTorch's (tests/data, written by tests/autodiff/torch_reference.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <ember/ember.hpp>

#include "autodiff/graph.hpp"
#include "ember/autodiff/autodiff.hpp"

using namespace ember;
using ir::BinaryFn;
using ir::UnaryFn;

namespace {

using Fn = std::function<DynTensor(const std::vector<DynTensor>&)>;

TensorData rnd(const Shape& s, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(s.num_elements());
  for (auto& x : v) x = u(g);
  return TensorData::from(v, s);
}

struct Input {
  TensorData data;
  bool grad = true;  // differentiate with respect to it (float inputs only)
};

// The device under test: the Cpu, or with EMBER_TEST_DEVICE=cuda the first GPU, or with
// EMBER_TEST_DEVICE=libtorch ATen's CPU kernels (the gradient checks then run over
// Device::cuda(0).autodiff() or Device::libtorch().autodiff(); finite differences stay on
// the Cpu in f64).
Device base_device() {
  const char* env = std::getenv("EMBER_TEST_DEVICE");
  if (env != nullptr && std::string(env) == "cuda") return Device::cuda(0);
  if (env != nullptr && std::string(env) == "libtorch") return Device::libtorch();
  return Device::cpu();
}
Device ad_device(Checkpointing ck) { return base_device().autodiff(ck); }

// loss = sum(f(inputs) * w), w fixed and random, so every output element matters.
DynTensor weighted_loss(const DynTensor& out, const Device& dev) {
  auto w = ops::from_data(rnd(out.shape(), 0.5, 1.5, 99).convert(out.dtype()), dev);
  return ops::reduce_all(ir::ReduceFn::Sum, ops::binary(BinaryFn::Mul, out, w));
}

double loss_value(const Fn& f, const std::vector<TensorData>& xs, const Device& dev) {
  std::vector<DynTensor> ts;
  for (const auto& x : xs) ts.push_back(ops::from_data(x, dev));
  auto l = weighted_loss(f(ts), dev);
  return l.to_data().get_f64(0);
}

// Gradients by autodiff on `ck`, compared with central differences on the plain Cpu device.
std::vector<TensorData> check_grad(const std::string& name, const Fn& f,
                                   const std::vector<Input>& inputs, Checkpointing ck,
                                   double eps = 1e-6, double rtol = 1e-5, double atol = 1e-6) {
  SCOPED_TRACE(name + (ck == Checkpointing::Balanced ? " [balanced]" : " [none]"));
  const Device ad = ad_device(ck);
  std::vector<DynTensor> ts;
  for (const auto& in : inputs) {
    auto t = ops::from_data(in.data, ad);
    if (in.grad) t = ops::require_grad(std::move(t));
    ts.push_back(std::move(t));
  }
  auto loss = weighted_loss(f(ts), ad);
  Gradients grads = ops::backward(loss);
  std::vector<TensorData> out;
  const Device cpu = Device::cpu();
  std::vector<TensorData> xs;
  for (const auto& in : inputs) xs.push_back(in.data);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].grad) continue;
    // An input the output does not depend on has no gradient: it must be zero.
    auto g = ops::grad(ts[i], grads);
    if (g) {
      EXPECT_EQ(g->device(), ad.inner());
    }
    TensorData gd = g ? g->to_data()
                      : TensorData::from(std::vector<double>(inputs[i].data.num_elements(), 0.0),
                                         inputs[i].data.shape())
                            .convert(inputs[i].data.dtype());
    EXPECT_EQ(gd.shape(), inputs[i].data.shape());
    auto gv = gd.to_vector<double>();
    auto base = xs[i].to_vector<double>();
    for (std::size_t k = 0; k < base.size(); ++k) {
      auto p = base, m = base;
      p[k] += eps;
      m[k] -= eps;
      auto xp = xs, xm = xs;
      xp[i] = TensorData::from(p, xs[i].shape()).convert(xs[i].dtype());
      xm[i] = TensorData::from(m, xs[i].shape()).convert(xs[i].dtype());
      const double num = (loss_value(f, xp, cpu) - loss_value(f, xm, cpu)) / (2 * eps);
      EXPECT_NEAR(gv[k], num, atol + rtol * std::abs(num) + 1e-7 * std::abs(gv[k]))
          << "input " << i << " element " << k;
    }
    out.push_back(std::move(gd));
  }
  return out;
}

void check_both(const std::string& name, const Fn& f, const std::vector<Input>& inputs,
                double eps = 1e-6, double rtol = 1e-5, double atol = 1e-6) {
  auto a = check_grad(name, f, inputs, Checkpointing::None, eps, rtol, atol);
  auto b = check_grad(name, f, inputs, Checkpointing::Balanced, eps, rtol, atol);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a[i] == b[i]) << name << ": checkpointing strategies differ for input " << i;
  }
}

Shape S(std::initializer_list<std::size_t> d) { return Shape(d); }

}  // namespace

// ---- the derivative table ----

TEST(DerivativeTable, EveryDifferentiableOpHasARule) {
  using autodiff::RuleKind;
  std::vector<std::string> unsupported;
  auto check = [&](const autodiff::RuleEntry& e, const std::string& what) {
    if (e.kind == RuleKind::Unsupported) unsupported.push_back(what);
    if (e.kind == RuleKind::Differentiable) {
      EXPECT_NE(std::string(e.formula), "") << what;
    }
  };
  // Every op of the IR: an op with a function enum (its member fn) needs an entry per
  // function; any other op an entry of its kind. Only ops without float operands or
  // outputs (creation, nonzero's I64 coordinates) may be not differentiable.
  const auto check_op = [&](auto type) {
    using T = typename decltype(type)::type;
    const auto& ke = autodiff::kind_rule(ir::kind_v<T>);
    if constexpr (requires(T & o) { o.fn; }) {
      using Fn = std::remove_cvref_t<decltype(std::declval<T&>().fn)>;
      EXPECT_EQ(ke.kind, RuleKind::Differentiable) << T::kName;
      for (std::size_t i = 0; i < std::size_t(Fn::Count_); ++i) {
        const auto& e = autodiff::fn_rule(Fn(i));
        check(e, ir::name(Fn(i)));
        if (e.kind == RuleKind::Differentiable) {
          EXPECT_NE(e.rule.backward, nullptr) << T::kName << " " << ir::name(Fn(i));
        }
      }
    } else {
      check(ke, T::kName);
      if (ke.kind == RuleKind::Differentiable) {
        EXPECT_NE(ke.rule.backward, nullptr) << T::kName;
      }
      const bool may_skip = T::kClass == ir::OpClass::Creation || std::is_same_v<T, ir::Nonzero>;
      if (!may_skip) {
        EXPECT_EQ(ke.kind, RuleKind::Differentiable) << T::kName;
      }
    }
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (check_op(std::type_identity<std::variant_alternative_t<I, ir::Op>>{}), ...);
  }
  (std::make_index_sequence<ir::kNumOps>{});
  // The known gaps, listed so that a new one fails here.
  EXPECT_EQ(unsupported, (std::vector<std::string>{"cummax", "cummin"}));
}

// ---- docs/autodiff.md's rule table, generated from the table's formulas ----

namespace {
std::string rule_cell(const autodiff::RuleEntry& e) {
  switch (e.kind) {
    case autodiff::RuleKind::Differentiable:
      return e.formula;
    case autodiff::RuleKind::NotDifferentiable:
      return std::string("not recorded: ") + e.formula;
    case autodiff::RuleKind::Unsupported:
      return std::string("**no rule**: ") + e.formula;
  }
  return "";
}
std::string rule_table() {
  std::ostringstream s;
  s << "| op | function | rule |\n| --- | --- | --- |\n";
  const auto row = [&](auto type) {
    using T = typename decltype(type)::type;
    if constexpr (requires(T & o) { o.fn; }) {
      using Fn = std::remove_cvref_t<decltype(std::declval<T&>().fn)>;
      for (std::size_t i = 0; i < std::size_t(Fn::Count_); ++i) {
        s << "| " << T::kName << " | " << ir::name(Fn(i)) << " | "
          << rule_cell(autodiff::fn_rule(Fn(i))) << " |\n";
      }
    } else {
      s << "| " << T::kName << " |  | " << rule_cell(autodiff::kind_rule(ir::kind_v<T>)) << " |\n";
    }
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (row(std::type_identity<std::variant_alternative_t<I, ir::Op>>{}), ...);
  }
  (std::make_index_sequence<ir::kNumOps>{});
  return s.str();
}
}  // namespace

// docs/autodiff.md carries the table above between its markers: `make autodiff-doc`
// rewrites it (EMBER_WRITE_DOCS=1), and this test fails while it is stale.
TEST(AutodiffDoc, RuleTableIsCurrent) {
  const std::string path = std::string(EMBER_SOURCE_DIR) + "/docs/autodiff.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string doc = buf.str();
  const std::string begin = "<!-- rule table: generated by test_grad (make autodiff-doc) -->\n";
  const std::string end = "<!-- end of rule table -->";
  const auto b = doc.find(begin), e = doc.find(end);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos && b < e)
      << path << " has no generated rule table between \"" << begin << "\" and \"" << end << "\"";
  const std::string want = rule_table();
  const std::string have = doc.substr(b + begin.size(), e - b - begin.size());
  if (have != want && std::getenv("EMBER_WRITE_DOCS")) {
    std::ofstream(path) << doc.substr(0, b + begin.size()) << want << doc.substr(e);
    return;
  }
  EXPECT_EQ(have, want) << path << " is stale: run `make autodiff-doc`";
}

// ---- per-op finite differences ----

// A cast inside the graph: the harness's cast case has no f64 output to differentiate.
TEST(Grad, Cast) {
  // f64 -> f32 -> f64: the f32 rounding limits the finite-difference precision.
  check_both(
      "cast",
      [](auto& x) {
        auto y = ops::cast(x[0], DType::F32);
        y = ops::binary_scalar(BinaryFn::Mul, y, 3.0);
        return ops::cast(y, DType::F64);
      },
      {{rnd(S({4}), -1, 1, 4)}}, 1e-3, 1e-3, 1e-3);
}

// Ties share the gradient (g / count): the harness's finite differences skip ties as kinks,
// where the central difference here is the mean of the one-sided ones, which is the share.
TEST(Grad, MaxTies) {
  check_both("max ties", [](auto& x) { return ops::reduce(ir::ReduceFn::Max, x[0], 1); },
             {{TensorData::from<double>({1, 3, 3, 2, 5, 5}, S({2, 3}))}});
}

// Layer norm of operands produced by element-wise ops, dropped and recomputed under
// Checkpointing::Balanced, the two strategies compared bit for bit (check_both); the
// harness's layer_norm case has plain inputs.
TEST(Grad, LayerNormOfComputedOperands) {
  check_both("layer_norm of computed operands",
             [](auto& x) {
               auto h = ops::unary(UnaryFn::Tanh, x[0]);
               auto w = ops::binary(BinaryFn::Mul, x[1], x[1]);
               return ops::layer_norm(std::move(h), S({7}), std::move(w), x[2], 1e-5);
             },
             {{rnd(S({3, 7}), -2, 2, 39)}, {rnd(S({7}), 0.5, 1.5, 40)}, {rnd(S({7}), -1, 1, 41)}});
}

// Composites whose harness cases the grad mode cannot differentiate: max_dims, min_dims
// and cummax_with_indices have NaNs and ties in every trial (their cases test NaN
// propagation), and quiet_softmax's large-logit trial (its stability) is past the first
// three trials, the ones the grad mode differentiates.
TEST(Grad, ComposedFunctions) {
  using RF = ir::ReduceFn;
  for (RF fn : {RF::Max, RF::Min}) {
    check_both(std::string(ir::name(fn)) + "_dims",
               [fn](auto& x) {
                 return ops::reduce_dims(fn, x[0], {0, -1});
               },
               {{rnd(S({3, 2, 4}), -2, 2, 300 + std::size_t(fn))}});
  }
  check_both("cummax_with_indices",
             [](auto& x) { return ops::cummax_with_indices(x[0], -1).first; },
             {{rnd(S({2, 7}), -2, 2, 315)}});
  check_both("quiet_softmax large", [](auto& x) { return ops::quiet_softmax(x[0], 0); },
             {{rnd(S({3, 4}), 20, 30, 331)}});
}

// Batch norm in training mode (ir::BatchNorm on the Cpu, its rule ir::BatchNormGrad):
// weight and bias present and absent, ranks 2 to 4, an operand computed by an element-wise
// op; and ir::BatchNormGrad's own rule (its gradients in x, weight and g), with the
// statistics BatchNorm gives for x.
TEST(Grad, RmsNorm) {
  const auto rms = [](DynTensor x, std::optional<DynTensor> w, std::size_t dims) {
    const Shape& xs = x.shape();
    const Shape ns(xs.dims().end() - static_cast<std::ptrdiff_t>(dims), xs.dims().end());
    return ops::rms_norm(std::move(x), ns, std::move(w), 1e-5);
  };
  check_both("rms_norm weight", [&](auto& x) { return rms(x[0], x[1], 1); },
             {{rnd(S({3, 5}), -2, 2, 151)}, {rnd(S({5}), 0.5, 1.5, 152)}});
  check_both("rms_norm two dims, plain", [&](auto& x) { return rms(x[0], std::nullopt, 2); },
             {{rnd(S({2, 3, 4}), -2, 2, 153)}});
  check_both("rms_norm of a computed operand, weight",
             [&](auto& x) { return rms(ops::unary(UnaryFn::Tanh, x[0]), x[1], 1); },
             {{rnd(S({4, 3}), -2, 2, 154)}, {rnd(S({3}), -1, 1, 155)}});
  // RmsNormGrad's own rule (Note [RMS norm's second derivative]): dx in x, weight and g.
  const auto rms_grad = [](DynTensor x, std::optional<DynTensor> w, DynTensor g) {
    const Device dev = x.device();
    auto outs = dev.backend().execute(
        ir::RmsNormGrad{x.handle(), w ? w->handle() : ir::Handle{}, g.handle(), 1, 1e-5});
    return DynTensor(outs[0], dev);
  };
  check_both(
      "rms_norm_grad weight", [&](auto& x) { return rms_grad(x[0], x[1], x[2]); },
      {{rnd(S({3, 4}), -2, 2, 156)}, {rnd(S({4}), 0.5, 1.5, 157)}, {rnd(S({3, 4}), -1, 1, 158)}});
  check_both("rms_norm_grad plain", [&](auto& x) { return rms_grad(x[0], std::nullopt, x[1]); },
             {{rnd(S({2, 5}), -2, 2, 159)}, {rnd(S({2, 5}), -1, 1, 160)}});
}

// ir::GroupNorm on the Cpu (its rule ir::GroupNormGrad) and GroupNormGrad's own rule
// (Note [Group norm's second derivative]): groups of several channels and instance norm.
TEST(Grad, GroupNorm) {
  // (w and b by reference and copied: moving an optional made from std::nullopt trips GCC
  // 12's -Wmaybe-uninitialized at -O1, the sanitizer builds' level.)
  const auto gn = [](DynTensor x, std::size_t groups, const std::optional<DynTensor>& w,
                     const std::optional<DynTensor>& b) {
    return ops::group_norm(std::move(x), groups, w, b, 1e-5);
  };
  check_both(
      "group_norm weight bias", [&](auto& x) { return gn(x[0], 2, x[1], x[2]); },
      {{rnd(S({3, 4, 5}), -2, 2, 161)}, {rnd(S({4}), 0.5, 1.5, 162)}, {rnd(S({4}), -1, 1, 163)}});
  check_both("group_norm instance, plain",
             [&](auto& x) { return gn(x[0], 3, std::nullopt, std::nullopt); },
             {{rnd(S({2, 3, 2, 2}), -2, 2, 164)}});
  check_both("group_norm of a computed operand, weight",
             [&](auto& x) { return gn(ops::unary(UnaryFn::Tanh, x[0]), 1, x[1], std::nullopt); },
             {{rnd(S({2, 3, 4}), -2, 2, 165)}, {rnd(S({3}), -1, 1, 166)}});
  const auto gn_grad = [](DynTensor x, std::size_t groups, std::optional<DynTensor> w,
                          DynTensor g) {
    const Device dev = x.device();
    auto stats = dev.backend().execute(ir::GroupNorm{x.handle(), {}, {}, groups, 1e-5})[1];
    auto outs = dev.backend().execute(ir::GroupNormGrad{x.handle(), w ? w->handle() : ir::Handle{},
                                                        stats, g.handle(), groups, 1e-5});
    return DynTensor(outs[0], dev);
  };
  check_both("group_norm_grad weight", [&](auto& x) { return gn_grad(x[0], 2, x[1], x[2]); },
             {{rnd(S({2, 4, 3}), -2, 2, 167)},
              {rnd(S({4}), 0.5, 1.5, 168)},
              {rnd(S({2, 4, 3}), -1, 1, 169)}});
  check_both("group_norm_grad instance, plain",
             [&](auto& x) { return gn_grad(x[0], 3, std::nullopt, x[1]); },
             {{rnd(S({2, 3, 4}), -2, 2, 170)}, {rnd(S({2, 3, 4}), -1, 1, 171)}});
}

TEST(Grad, BatchNorm) {
  const auto bn = [](DynTensor x, std::optional<DynTensor> w, std::optional<DynTensor> b) {
    return ops::batch_norm_training(std::move(x), std::move(w), std::move(b), 1e-5).y;
  };
  check_both(
      "batch_norm weight bias", [&](auto& x) { return bn(x[0], x[1], x[2]); },
      {{rnd(S({3, 4, 5}), -2, 2, 51)}, {rnd(S({4}), 0.5, 1.5, 52)}, {rnd(S({4}), -1, 1, 53)}});
  check_both("batch_norm 2-d image, weight", [&](auto& x) { return bn(x[0], x[1], std::nullopt); },
             {{rnd(S({2, 3, 3, 2}), -2, 2, 54)}, {rnd(S({3}), 0.5, 1.5, 55)}});
  check_both("batch_norm rank 2, plain",
             [&](auto& x) { return bn(x[0], std::nullopt, std::nullopt); },
             {{rnd(S({5, 3}), -2, 2, 56)}});
  check_both("batch_norm of a computed operand, bias",
             [&](auto& x) { return bn(ops::unary(UnaryFn::Tanh, x[0]), std::nullopt, x[1]); },
             {{rnd(S({2, 3, 4}), -2, 2, 57)}, {rnd(S({3}), -1, 1, 58)}});
  // The statistics are detached: a loss that adds them gives x the same gradient.
  {
    const Device ad = ad_device(Checkpointing::None);
    auto x = ops::require_grad(ops::from_data(rnd(S({3, 2, 4}), -2, 2, 59), ad));
    const auto grad_of = [&](bool with_stats) {
      auto r = ops::batch_norm_training(x, std::nullopt, std::nullopt, 1e-5);
      auto loss = weighted_loss(r.y, ad);
      if (with_stats) {
        loss = ops::binary(BinaryFn::Add, loss, ops::reduce_all(ir::ReduceFn::Sum, r.mean));
        loss = ops::binary(BinaryFn::Add, loss, ops::reduce_all(ir::ReduceFn::Sum, r.var));
      }
      return ops::grad(x, ops::backward(loss)).value().to_data();
    };
    EXPECT_TRUE(grad_of(false) == grad_of(true));
  }
  const auto bn_grad = [](DynTensor x, std::optional<DynTensor> w, DynTensor g) {
    const Device dev = x.device();
    auto stats = dev.backend().execute(ir::BatchNorm{x.handle(), {}, {}, 1e-5})[1];
    auto outs = dev.backend().execute(
        ir::BatchNormGrad{x.handle(), w ? w->handle() : ir::Handle{}, stats, g.handle(), 1e-5});
    return DynTensor(outs[0], dev);
  };
  check_both("batch_norm_grad weight", [&](auto& x) { return bn_grad(x[0], x[1], x[2]); },
             {{rnd(S({3, 2, 4}), -2, 2, 60)},
              {rnd(S({2}), 0.5, 1.5, 61)},
              {rnd(S({3, 2, 4}), -1, 1, 62)}});
  check_both("batch_norm_grad plain, rank 2",
             [&](auto& x) { return bn_grad(x[0], std::nullopt, x[1]); },
             {{rnd(S({6, 3}), -2, 2, 63)}, {rnd(S({6, 3}), -1, 1, 64)}});
}

// Attention (ir::Attention on the Cpu, its rule ir::AttentionGrad) through
// scaled_dot_product_attention, of computed operands; and ir::AttentionGrad's own rule (dq's
// gradients in q, k, v and g, Note [Attention's second derivative]), with the out and lse
// that Attention gives for q, k and v: no mask, causal with Lq > Lk, a Bool mask.
TEST(Grad, Attention) {
  check_both("scaled_dot_product_attention of computed operands",
             [](auto& x) {
               return ops::scaled_dot_product_attention(ops::unary(UnaryFn::Tanh, x[0]), x[1],
                                                        ops::binary(BinaryFn::Mul, x[2], x[2]),
                                                        std::nullopt, true);
             },
             {{rnd(S({2, 5, 3}), -1, 1, 70)},
              {rnd(S({2, 4, 3}), -1, 1, 71)},
              {rnd(S({2, 4, 2}), -1, 1, 72)}});
  const auto dq = [](const std::vector<DynTensor>& x, bool causal) {
    const Device dev = x[0].device();
    const ir::Handle mask = x.size() > 4 ? x[4].handle() : ir::Handle{};
    const ir::Handle q = x[0].handle(), k = x[1].handle(), v = x[2].handle();
    auto fwd = dev.backend().execute(ir::Attention{q, k, v, mask, causal, 0.6});
    auto outs = dev.backend().execute(
        ir::AttentionGrad{q, k, v, mask, fwd[0], fwd[1], x[3].handle(), causal, 0.6});
    return DynTensor(outs[0], dev);
  };
  check_both("attention_grad", [&](auto& x) { return dq(x, false); },
             {{rnd(S({2, 3, 4}), -1, 1, 73)},
              {rnd(S({2, 5, 4}), -1, 1, 74)},
              {rnd(S({2, 5, 3}), -1, 1, 75)},
              {rnd(S({2, 3, 3}), -1, 1, 76)}});
  check_both("attention_grad causal", [&](auto& x) { return dq(x, true); },
             {{rnd(S({1, 6, 3}), -1, 1, 77)},
              {rnd(S({1, 4, 3}), -1, 1, 78)},
              {rnd(S({1, 4, 2}), -1, 1, 79)},
              {rnd(S({1, 6, 2}), -1, 1, 80)}});
  const TensorData mask =
      TensorData::from<std::uint8_t>({1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1}, S({1, 3, 4}))
          .convert(DType::Bool);
  check_both("attention_grad bool mask", [&](auto& x) { return dq(x, false); },
             {{rnd(S({2, 3, 2}), -1, 1, 81)},
              {rnd(S({2, 4, 2}), -1, 1, 82)},
              {rnd(S({2, 4, 3}), -1, 1, 83)},
              {rnd(S({2, 3, 3}), -1, 1, 84)},
              {mask, false}});
}

// Reuse, broadcasting chains and operands not tracked: what the engine does around the
// rules, which the harness (every f64 input tracked, one op a case) does not reach.
TEST(Grad, CompositesReuseAndBroadcast) {
  // Only one side tracked.
  for (BinaryFn fn : {BinaryFn::Mul, BinaryFn::Div}) {
    check_both(std::string(ir::name(fn)) + " lhs only",
               [fn](auto& x) { return ops::binary(fn, x[0], x[1]); },
               {{rnd(S({3, 4}), -2, 2, 8)}, {rnd(S({4}), 0.5, 2, 9), false}});
  }
  // x used several times: gradients accumulate.
  check_both("reuse",
             [](auto& x) {
               auto a = ops::binary(BinaryFn::Mul, x[0], x[0]);
               auto b = ops::binary(BinaryFn::Mul, ops::unary(UnaryFn::Sin, x[0]), x[0]);
               return ops::binary(BinaryFn::Add, ops::binary(BinaryFn::Add, a, b), x[0]);
             },
             {{rnd(S({4}), -2, 2, 3)}});
  // Overlapping, strided and repeated slices of one operand (each added where it lands,
  // Note [Slice gradients]), besides a use of the whole operand.
  check_both(
      "overlapping slices",
      [](auto& x) {
        using ops::Range;
        auto a = ops::slice(x[0], {Range{0, 3}, Range{1, 5}});
        auto b = ops::slice(x[0], {Range{1, 4}, Range(0, 6, 2)});
        auto c = ops::narrow(x[0], 1, 2, 1);
        auto s = ops::binary(BinaryFn::Add, ops::reduce_all(ir::ReduceFn::Sum, a),
                             ops::reduce_all(ir::ReduceFn::Sum, ops::unary(UnaryFn::Sin, b)));
        s = ops::binary(BinaryFn::Add, s,
                        ops::reduce_all(ir::ReduceFn::Sum, ops::binary(BinaryFn::Mul, c, c)));
        s = ops::binary(BinaryFn::Add, s,
                        ops::reduce_all(ir::ReduceFn::Sum, ops::narrow(c, 0, 1, 2)));
        return ops::binary(BinaryFn::Add, s,
                           ops::reduce_all(ir::ReduceFn::Sum, ops::unary(UnaryFn::Tanh, x[0])));
      },
      {{rnd(S({4, 6}), -2, 2, 12)}});
  // Slices that tile the operand along one dim (an LSTM's chunks of its gates), used out
  // of order: their gradients become one concatenation (Note [Slices that tile]); with a
  // use of the whole operand as well (added after them); and slices with a gap between
  // them (written one by one, zeros in the gap).
  const auto chunks = [](auto& x, bool whole, bool gap) {
    using ops::Range;
    auto a = ops::slice(x[0], {Range{0, 4}, Range{0, 2}});
    auto b = ops::slice(x[0], {Range{0, 4}, Range{2, gap ? 3 : 5}});
    auto c = ops::slice(x[0], {Range{0, 4}, Range{5, 6}});
    auto s = ops::reduce_all(ir::ReduceFn::Sum, ops::unary(UnaryFn::Sin, c));
    s = ops::binary(BinaryFn::Add, s,
                    ops::reduce_all(ir::ReduceFn::Sum, ops::binary(BinaryFn::Mul, a, a)));
    s = ops::binary(BinaryFn::Add, s,
                    ops::reduce_all(ir::ReduceFn::Sum, ops::unary(UnaryFn::Tanh, b)));
    if (whole) {
      s = ops::binary(BinaryFn::Add, s,
                      ops::reduce_all(ir::ReduceFn::Sum, ops::unary(UnaryFn::Exp, x[0])));
    }
    return s;
  };
  check_both("slices that tile", [&](auto& x) { return chunks(x, false, false); },
             {{rnd(S({4, 6}), -2, 2, 13)}});
  check_both("slices that tile and a whole use", [&](auto& x) { return chunks(x, true, false); },
             {{rnd(S({4, 6}), -2, 2, 14)}});
  check_both("slices with a gap", [&](auto& x) { return chunks(x, false, true); },
             {{rnd(S({4, 6}), -2, 2, 15)}});
  // A weight read by many products (Note [Products that stack]): a recurrence over one
  // transposed view made once (the LSTM's W_hh^T), the weight also read directly on both
  // sides of other products (terms stored transposed and not, stacked together), and more
  // terms than four times the gradient's size in factors (several stacks, added in turn).
  const auto recurrence = [](auto& x, std::size_t steps) {
    const DynTensor wt = ops::transpose(x[1]);
    DynTensor h = x[0];
    std::optional<DynTensor> s;
    for (std::size_t t = 0; t < steps; ++t) {
      h = ops::unary(UnaryFn::Tanh, ops::binary(BinaryFn::Add, ops::matmul(h, wt), x[2]));
      const DynTensor side = ops::matmul(x[1], ops::transpose(h));  // W h^T
      const DynTensor back = ops::matmul(h, x[1]);                  // h W
      const DynTensor term = ops::binary(
          BinaryFn::Add, ops::reduce_all(ir::ReduceFn::Sum, ops::unary(UnaryFn::Sin, side)),
          ops::reduce_all(ir::ReduceFn::Sum, ops::binary(BinaryFn::Mul, back, back)));
      s = s ? ops::binary(BinaryFn::Add, *s, term) : term;
    }
    return ops::binary(BinaryFn::Add, *s, ops::reduce_all(ir::ReduceFn::Sum, h));
  };
  for (std::size_t steps : {std::size_t{2}, std::size_t{9}}) {
    check_both("products that stack, " + std::to_string(steps) + " steps",
               [&](auto& x) { return recurrence(x, steps); },
               {{rnd(S({2, 3}), -1, 1, 16)},
                {rnd(S({3, 3}), -0.8, 0.8, 17)},
                {rnd(S({2, 3}), -0.5, 0.5, 18)}});
  }
  // A bias broadcast over rows and a scale over columns.
  check_both("broadcast chain",
             [](auto& x) {
               auto y = ops::binary(BinaryFn::Add, ops::matmul(x[0], x[1]), x[2]);
               return ops::unary(UnaryFn::Tanh, ops::binary(BinaryFn::Mul, y, x[3]));
             },
             {{rnd(S({3, 4}), -1, 1, 4)},
              {rnd(S({4, 2}), -1, 1, 5)},
              {rnd(S({2}), -1, 1, 6)},
              {rnd(S({3, 1}), -1, 1, 7)}});
}

TEST(Grad, RandomCompositeChains) {
  const UnaryFn safe[] = {UnaryFn::Sin,  UnaryFn::Tanh, UnaryFn::Sigmoid, UnaryFn::Softplus,
                          UnaryFn::Silu, UnaryFn::Atan, UnaryFn::Square,  UnaryFn::Gelu};
  const BinaryFn bins[] = {BinaryFn::Add, BinaryFn::Sub, BinaryFn::Mul};
  for (std::uint64_t trial = 0; trial < 12; ++trial) {
    std::mt19937_64 g(trial);
    std::vector<int> plan(6);
    for (auto& p : plan) p = int(g() % 12);
    Fn f = [=](const std::vector<DynTensor>& x) {
      DynTensor y = x[0];
      for (int p : plan) {
        if (p < 8) {
          y = ops::unary(safe[p], y);
        } else if (p < 11) {
          y = ops::binary(bins[p - 8], y, x[1]);
        } else {
          y = ops::binary(BinaryFn::Add, ops::reduce(ir::ReduceFn::Mean, y, 1), y);
        }
      }
      return y;
    };
    check_both("chain " + std::to_string(trial), f,
               {{rnd(S({2, 3}), -1, 1, 40 + trial)}, {rnd(S({1, 3}), -1, 1, 60 + trial)}});
  }
}

// ---- API behaviour ----

TEST(AutodiffApi, DesignContractBlock) {
  Device ad = Device::cpu().autodiff();
  auto x = Tensor<2>::random(Shape{8, 4}, Distribution::uniform(-1, 1), ad).require_grad();
  auto loss = activation::relu(x.matmul(x.transpose())).mean();
  Gradients grads = loss.backward();
  Tensor<2> gx = x.grad(grads).value();
  EXPECT_EQ(gx.shape(), (Shape{8, 4}));
  EXPECT_EQ(gx.device(), ad.inner());
  EXPECT_TRUE(ad.is_autodiff());
  EXPECT_FALSE(ad.inner().is_autodiff());
  EXPECT_EQ(grads.size(), 1u);
  Gradients moved = std::move(grads);
  EXPECT_TRUE(x.grad_remove(moved).has_value());
  EXPECT_FALSE(x.grad(moved).has_value());
}

TEST(AutodiffApi, Errors) {
  Device ad = Device::cpu().autodiff();
  Device cpu = Device::cpu();
  auto x = Tensor<2>::ones(Shape{2, 2}, ad).require_grad();
  EXPECT_TRUE(x.is_require_grad());
  // Backward of a tensor with more than one element.
  EXPECT_THROW((x * 2.0).backward(), Error);
  // Backward of an untracked tensor.
  EXPECT_THROW(Tensor<1>::ones(Shape{1}, ad).backward(), Error);
  // Autodiff API on a plain device.
  EXPECT_THROW(Tensor<1>::ones(Shape{1}, cpu).require_grad(), Error);
  EXPECT_THROW(Tensor<1>::ones(Shape{1}, cpu).backward(), Error);
  EXPECT_THROW(Tensor<1>::ones(Shape{1}, cpu).inner(), Error);
  EXPECT_FALSE(Tensor<1>::ones(Shape{1}, cpu).is_require_grad());
  // Int tensors have no gradients.
  EXPECT_THROW((Tensor<1, Int>::arange(0, 3, ad).require_grad()), Error);
  // Mixing an autodiff tensor with a plain one.
  auto p = Tensor<2>::ones(Shape{2, 2}, cpu);
  EXPECT_THROW(x + p, Error);
  EXPECT_THROW(x.matmul(p), Error);
  EXPECT_THROW(Tensor<2>::cat({x, p}, 0), Error);
  // Mixing the two checkpointing devices.
  auto y = Tensor<2>::ones(Shape{2, 2}, cpu.autodiff(Checkpointing::Balanced));
  EXPECT_THROW(x + y, Error);
  // A graph can be walked once.
  auto loss = (x * x).sum();
  auto g1 = loss.backward();
  EXPECT_THROW(loss.backward(), Error);
  // A tensor outside the graph has no gradient; neither has a detached one.
  auto other = Tensor<2>::ones(Shape{2, 2}, ad).require_grad();
  EXPECT_FALSE(other.grad(g1).has_value());
  auto l2 = (x.detach() * x).sum();
  auto g2 = l2.backward();
  EXPECT_FALSE(x.detach().is_require_grad());
  x.grad(g2).value().to_data().assert_approx_eq(TensorData::from<float>({1, 1, 1, 1}, Shape{2, 2}));
  // cummax of a tracked tensor is differentiated through its indices (Grad.Composites).
  EXPECT_NO_THROW(x.cummax(1));
  EXPECT_NO_THROW(x.detach().cummax(1));
}

TEST(AutodiffApi, InnerAndFromInner) {
  Device ad = Device::cpu().autodiff();
  auto x = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3}), ad).require_grad();
  auto i = x.inner();
  EXPECT_EQ(i.device(), Device::cpu());
  auto back = Tensor<1>::from_inner(i);
  EXPECT_EQ(back.device(), ad);
  EXPECT_FALSE(back.is_require_grad());
  auto bal = Device::cpu().autodiff(Checkpointing::Balanced);
  EXPECT_EQ(Tensor<1>::from_inner(i, bal).device(), bal);
  back.to_data().assert_approx_eq(TensorData::from<float>({1, 2, 3}));
}

TEST(AutodiffApi, IntAndBoolPassThrough) {
  Device ad = Device::cpu().autodiff();
  auto i = Tensor<1, Int>::arange(0, 5, ad);
  auto m = (i * Tensor<1, Int>::full(Shape{1}, 2, ad)).greater_elem(3.0);
  EXPECT_EQ(m.to_data().to_vector<int>(), (std::vector<int>{0, 0, 1, 1, 1}));
}

// One training step leaves no graph memory behind.
TEST(AutodiffApi, MemoryReturnsAfterStep) {
  Device ad = Device::cpu().autodiff();
  Device cpu = ad.inner();
  auto w = Tensor<2>::random(Shape{32, 16}, Distribution::uniform(-1, 1), ad).require_grad();
  auto x = Tensor<2>::random(Shape{8, 32}, Distribution::uniform(-1, 1), ad);
  auto step = [&] {
    auto loss = activation::log_softmax(activation::relu(x.matmul(w)), 1).mean();
    auto grads = loss.backward();
    auto g = w.grad_remove(grads).value();
    w = Tensor<2>::from_inner(w.inner() - g * 0.1).require_grad();
  };
  step();
  const auto before = memory_stats(cpu).in_use;
  step();
  step();
  EXPECT_EQ(memory_stats(cpu).in_use, before);
}

// The Cpu, counting the matrix products and concatenations it runs.
class CountingCpu final : public backend::Backend {
 public:
  CountingCpu() : inner_(Device::cpu().backend_ptr()) {}
  std::string name() const override { return "cpu"; }
  ir::Handle from_data(const TensorData& d) override { return inner_->from_data(d); }
  TensorData to_data(const ir::Handle& x) override { return inner_->to_data(x); }
  std::vector<ir::Handle> execute(ir::Op op) override {
    if (std::holds_alternative<ir::Matmul>(op)) ++matmuls;
    if (std::holds_alternative<ir::Cat>(op)) ++cats;
    return inner_->execute(std::move(op));
  }
  bool supports(const ir::Op& op) const override { return inner_->supports(op); }
  void seed(std::uint64_t s) override { inner_->seed(s); }
  backend::MemoryStats memory_stats() const override { return inner_->memory_stats(); }
  void empty_cache() override { inner_->empty_cache(); }
  void sync() override {}
  int matmuls = 0, cats = 0;

 private:
  std::shared_ptr<backend::Backend> inner_;
};

// Note [Products that stack]: the recurrent weight's gradient terms (one product per step)
// run as one product of the stacked factors — T + 1 products in backward, not 2T — while a
// weight read by one product gives its term as a plain product; the gradients equal an f64
// reference of the unrolled sums.
TEST(AutodiffApi, RecurrentWeightGradientIsOneProduct) {
  const std::size_t steps = 12, b = 3, d = 4;
  auto counting = std::make_shared<CountingCpu>();
  Device ad(autodiff::make_autodiff_backend(counting, Checkpointing::None));
  const TensorData wd = rnd(S({d, d}), -0.5, 0.5, 70), hd = rnd(S({b, d}), -1, 1, 71),
                   vd = rnd(S({d, d}), -0.5, 0.5, 72);
  auto w = Tensor<2>::from_data(wd, ad).require_grad();
  auto v = Tensor<2>::from_data(vd, ad).require_grad();  // read by one product
  const Tensor<2> wt = w.transpose();                    // made once, as nn::Lstm's W_hh^T
  Tensor<2> h = Tensor<2>::from_data(hd, ad);
  std::vector<Tensor<2>> hs{h};
  for (std::size_t t = 0; t < steps; ++t) {
    h = h.matmul(wt);
    hs.push_back(h);
  }
  const auto loss = h.matmul(v).sum();
  counting->matmuls = counting->cats = 0;
  Gradients grads = loss.backward();
  // Backward: each step's h gradient (12), v's (1), and W's terms stacked: the 12 terms of
  // 4 x 4 factors (3 x 4 + 3 x 4 elements each) wait until 4 x 16 elements are held, so
  // they run as 3 products of 3 stacked terms each, then one of 3.
  EXPECT_EQ(counting->matmuls, int(steps) + 1 + 4);
  EXPECT_EQ(counting->cats, 2 * 4);
  // f64: dL/dh_T = 1 v^T; dL/dh_{t-1} = dL/dh_t W; dL/dW^T += h_{t-1}^T dL/dh_t.
  const auto wv = wd.to_vector<double>(), vv = vd.to_vector<double>();
  std::vector<std::vector<double>> hv;
  for (const auto& x : hs) hv.push_back(x.to_data().convert(DType::F64).to_vector<double>());
  std::vector<double> g(b * d), dwt(d * d, 0.0), dv(d * d, 0.0);
  for (std::size_t i = 0; i < b; ++i)
    for (std::size_t j = 0; j < d; ++j) {
      double s = 0;
      for (std::size_t k = 0; k < d; ++k) s += vv[j * d + k];
      g[i * d + j] = s;
    }
  for (std::size_t p = 0; p < d; ++p)
    for (std::size_t q = 0; q < d; ++q)
      for (std::size_t i = 0; i < b; ++i) dv[p * d + q] += hv[steps][i * d + p];
  for (std::size_t t = steps; t-- > 0;) {
    std::vector<double> prev(b * d, 0.0);
    for (std::size_t i = 0; i < b; ++i)
      for (std::size_t p = 0; p < d; ++p)
        for (std::size_t q = 0; q < d; ++q) {
          dwt[p * d + q] += hv[t][i * d + p] * g[i * d + q];
          prev[i * d + p] += g[i * d + q] * wv[q * d + p];  // W^T's row p, column q is W[q, p]
        }
    g = prev;
  }
  const auto gw = w.grad(grads).value().to_data().convert(DType::F64).to_vector<double>();
  const auto gv = v.grad(grads).value().to_data().convert(DType::F64).to_vector<double>();
  for (std::size_t p = 0; p < d; ++p)
    for (std::size_t q = 0; q < d; ++q) {
      EXPECT_NEAR(gw[q * d + p], dwt[p * d + q], 1e-4 * (1 + std::abs(dwt[p * d + q])));
      EXPECT_NEAR(gv[p * d + q], dv[p * d + q], 1e-5 * (1 + std::abs(dv[p * d + q])));
    }
}

// relu's rule keeps its output, not its input: a tracked intermediate handed over to
// relu is overwritten in place (no tensor-sized buffer is allocated), and the gradient is
// still g where x > 0, else 0 (x = 0 included).
TEST(AutodiffApi, ReluRunsInPlaceOnAHandedOverInput) {
  Device ad = Device::cpu().autodiff();
  Device cpu = ad.inner();
  const Shape s{512, 1024};  // 2 MiB
  const std::size_t bytes = s.num_elements() * sizeof(float);
  std::vector<float> xs(s.num_elements());
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = float(int(i % 7) - 3) * 0.5f;  // 0 too
  auto x = Tensor<2>::from_data(TensorData::from(xs, s), ad).require_grad();
  auto h = x.mul_scalar(2.0);  // tracked, owned by h alone
  const auto before = memory_stats(cpu);
  auto r = activation::relu(std::move(h));
  const auto after = memory_stats(cpu);
  EXPECT_LT(after.peak, before.in_use + bytes / 4) << "in use " << before.in_use;
  auto gx = x.grad(r.sum().backward()).value().to_data().to_vector<float>();
  for (std::size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(gx[i], xs[i] > 0 ? 2.0f : 0.0f) << i;
}

TEST(AutodiffApi, IndependentGraphsOnTwoThreads) {
  auto run = [](std::uint64_t seed, Checkpointing ck) {
    Device ad = Device::cpu().autodiff(ck);
    auto x = Tensor<2>::from_data(rnd(Shape{16, 16}, -1, 1, seed), ad).require_grad();
    TensorData last;
    for (int i = 0; i < 20; ++i) {
      auto loss = (activation::softmax(x.matmul(x), 1) * x).sum();
      last = x.grad(loss.backward()).value().to_data();
    }
    return last;
  };
  const auto ref0 = run(1, Checkpointing::None), ref1 = run(2, Checkpointing::Balanced);
  TensorData r0, r1;
  std::thread t0([&] { r0 = run(1, Checkpointing::None); });
  std::thread t1([&] { r1 = run(2, Checkpointing::Balanced); });
  t0.join();
  t1.join();
  EXPECT_TRUE(r0 == ref0);
  EXPECT_TRUE(r1 == ref1);
}

// ---- PyTorch comparison (tests/data/autodiff_torch_reference.txt) ----

namespace {
struct RefModel {
  std::map<std::string, TensorData> inputs, grads;
  double loss = 0;
};
std::map<std::string, RefModel> read_reference() {
  std::ifstream in(std::string(EMBER_TEST_DATA_DIR) + "/autodiff_torch_reference.txt");
  EXPECT_TRUE(in.good()) << "missing reference data";
  std::map<std::string, RefModel> out;
  std::string line, model;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string tag;
    ls >> tag;
    if (tag == "model") {
      ls >> model;
    } else if (tag == "input" || tag == "grad" || tag == "int") {
      std::string name;
      std::size_t rank;
      ls >> name >> rank;
      std::vector<std::size_t> dims(rank);
      for (auto& d : dims) ls >> d;
      Shape s(dims);
      if (tag == "int") {
        std::vector<std::int64_t> v(s.num_elements());
        for (auto& e : v) ls >> e;
        out[model].inputs[name] = TensorData::from(v, s);
      } else {
        std::vector<double> v(s.num_elements());
        for (auto& e : v) ls >> e;
        (tag == "grad" ? out[model].grads : out[model].inputs)[name] = TensorData::from(v, s);
      }
    } else if (tag == "loss") {
      ls >> out[model].loss;
    }
  }
  return out;
}

void compare(const RefModel& ref,
             const std::function<Tensor<1>(std::map<std::string, DynTensor>&)>& f,
             Checkpointing ck) {
  Device ad = Device::cpu().autodiff(ck);
  std::map<std::string, DynTensor> ts;
  for (const auto& [name, data] : ref.inputs) {
    auto t = ops::from_data(data, ad);
    if (ref.grads.count(name)) t = ops::require_grad(std::move(t));
    ts.emplace(name, std::move(t));
  }
  auto loss = f(ts);
  EXPECT_NEAR(loss.into_scalar<double>(), ref.loss, 1e-10 * (1 + std::abs(ref.loss)));
  auto grads = loss.backward();
  for (const auto& [name, g] : ref.grads) {
    SCOPED_TRACE(name);
    auto mine = ops::grad(ts.at(name), grads);
    ASSERT_TRUE(mine.has_value());
    mine->to_data().assert_approx_eq(g, 1e-9, 1e-11);
  }
}
}  // namespace

TEST(TorchReference, Models) {
  auto refs = read_reference();
  ASSERT_EQ(refs.size(), 4u);
  auto mlp = [](std::map<std::string, DynTensor>& t) {
    Tensor<2> x(t.at("x")), w1(t.at("w1")), w2(t.at("w2"));
    Tensor<1> b1(t.at("b1")), b2(t.at("b2"));
    Tensor<1, Int> labels(t.at("labels"));
    auto h = activation::relu(x.matmul(w1) + b1.unsqueeze<2>());
    auto logp = activation::log_softmax(h.matmul(w2) + b2.unsqueeze<2>(), 1);
    auto picked = logp.gather(1, labels.unsqueeze_dim<2>(1));
    auto oh = labels.one_hot<2, Float>(3).cast(DType::F64);
    auto nll_gather = -picked.mean();
    auto nll_onehot = -(logp * oh).sum_dim(1).mean();
    return nll_gather + nll_onehot * 0.1;
  };
  auto attention = [](std::map<std::string, DynTensor>& t) {
    Tensor<3> q(t.at("q")), k(t.at("k")), v(t.at("v"));
    auto s = q.matmul(k.swap_dims(1, 2)) / 2.0;  // sqrt(d) with d = 4
    auto o = activation::softmax(s, -1).matmul(v);
    return (o * o).sum() + o.tanh().mean();
  };
  auto layer_norm = [](std::map<std::string, DynTensor>& t) {
    Tensor<2> x(t.at("x"));
    Tensor<1> gamma(t.at("gamma")), beta(t.at("beta"));
    auto [var, mean] = x.var_mean(1, 0);
    auto y = (x - mean) / (var + 1e-5).sqrt() * gamma.unsqueeze<2>() + beta.unsqueeze<2>();
    return (y.sin() * y).sum();
  };
  auto cnn = [](std::map<std::string, DynTensor>& t) {
    namespace mo = module_ops;
    Tensor<4> x(t.at("x")), w1(t.at("w1")), w2(t.at("w2")), w3(t.at("w3"));
    Tensor<1> b1(t.at("b1")), b3(t.at("b3"));
    auto h = mo::conv2d(x, w1, b1, {.padding = {1, 1}});
    h = mo::max_pool2d(h.tanh(), {.kernel = {2, 2}, .stride = {{2, 2}}, .padding = {1, 1}});
    h = mo::conv2d(h, w2, std::nullopt, {.stride = {2, 2}, .padding = {1, 1}, .groups = 2});
    auto u = mo::conv_transpose2d(h, w3, b3,
                                  {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}});
    auto a = mo::avg_pool2d(u, {.kernel = {3, 3}, .stride = {{1, 1}}, .padding = {1, 1}});
    return (a * a).sum() + h.sin().mean();
  };
  for (auto ck : {Checkpointing::None, Checkpointing::Balanced}) {
    SCOPED_TRACE(ck == Checkpointing::None ? "none" : "balanced");
    {
      SCOPED_TRACE("cnn");
      compare(refs.at("cnn"), cnn, ck);
    }
    {
      SCOPED_TRACE("mlp");
      compare(refs.at("mlp"), mlp, ck);
    }
    {
      SCOPED_TRACE("attention");
      compare(refs.at("attention"), attention, ck);
    }
    {
      SCOPED_TRACE("layer_norm");
      compare(refs.at("layer_norm"), layer_norm, ck);
    }
  }
}
