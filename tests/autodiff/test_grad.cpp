// Autodiff tests: every differentiable IR op against central finite differences in f64
// under both checkpointing strategies, broadcasting, reuse, random composite chains, the
// completeness of the derivative table, the API's failure modes, memory after backward,
// threads, and gradients of small models compared with PyTorch's (tests/data, written by
// tests/autodiff/torch_reference.py).
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
TensorData ints(const std::vector<std::int64_t>& v, Shape s) {
  return TensorData::from(v, std::move(s));
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

TEST(Grad, UnaryFunctions) {
  using autodiff::RuleKind;
  for (std::size_t i = 0; i < std::size_t(UnaryFn::Count_); ++i) {
    const UnaryFn fn = UnaryFn(i);
    if (autodiff::unary_rule(fn).kind != RuleKind::Differentiable) continue;
    double lo = -2, hi = 2, p0 = 0, p1 = 0;
    switch (fn) {
      case UnaryFn::Log:
      case UnaryFn::Sqrt:
      case UnaryFn::Rsqrt:
      case UnaryFn::Recip:
      case UnaryFn::Log1p:
        lo = 0.3;
        break;
      case UnaryFn::Asin:
      case UnaryFn::Acos:
      case UnaryFn::Atanh:
        lo = -0.8, hi = 0.8;
        break;
      case UnaryFn::Acosh:
        lo = 1.2, hi = 3;
        break;
      case UnaryFn::Tan:
        lo = -1, hi = 1;
        break;
      case UnaryFn::LeakyRelu:
        p0 = 0.1;
        break;
      case UnaryFn::Elu:
        p0 = 1.3;
        break;
      case UnaryFn::Clamp:
        p0 = -0.5, p1 = 0.7;
        break;
      case UnaryFn::PowScalar:
        lo = 0.3, p0 = 2.5;
        break;
      default:
        break;
    }
    Fn f = [=](const std::vector<DynTensor>& x) { return ops::unary(fn, x[0], p0, p1); };
    check_both(ir::name(fn), f, {{rnd(S({3, 4}), lo, hi, 1 + i)}});
  }
  // Clamp with one bound, integer powers of negative numbers.
  check_both("clamp_min", [](auto& x) { return ops::clamp(x[0], -0.3, std::nullopt); },
             {{rnd(S({5}), -2, 2, 7)}});
  check_both("powi", [](auto& x) { return ops::powi(x[0], 3); }, {{rnd(S({5}), -2, 2, 8)}});
}

TEST(Grad, BinaryFunctions) {
  // Every differentiable binary function, on operands in [-2, 2] unless its domain (or a
  // kink, for rem) asks for other ranges.
  struct C {
    BinaryFn fn;
    double alo, ahi, blo, bhi;
  };
  std::vector<C> cases;
  for (std::size_t i = 0; i < std::size_t(BinaryFn::Count_); ++i) {
    const BinaryFn fn = BinaryFn(i);
    if (autodiff::binary_rule(fn).kind != autodiff::RuleKind::Differentiable) continue;
    C c{fn, -2, 2, -2, 2};
    switch (fn) {
      case BinaryFn::Div:
        c.blo = 0.5;
        break;
      case BinaryFn::Pow:
        c.alo = 0.5;
        break;
      case BinaryFn::Rem:
        c = {fn, -3, 3, 0.7, 2};
        break;
      default:
        break;
    }
    cases.push_back(c);
  }
  std::uint64_t seed = 100;
  for (const auto& c : cases) {
    Fn f = [fn = c.fn](const std::vector<DynTensor>& x) { return ops::binary(fn, x[0], x[1]); };
    check_both(ir::name(c.fn), f,
               {{rnd(S({3, 4}), c.alo, c.ahi, seed++)}, {rnd(S({3, 4}), c.blo, c.bhi, seed++)}});
    // Broadcasting both ways, with a rank difference.
    check_both(std::string(ir::name(c.fn)) + " broadcast", f,
               {{rnd(S({2, 1, 4}), c.alo, c.ahi, seed++)}, {rnd(S({3, 1}), c.blo, c.bhi, seed++)}});
    // Only one side tracked.
    check_both(
        std::string(ir::name(c.fn)) + " lhs only", f,
        {{rnd(S({3, 4}), c.alo, c.ahi, seed++)}, {rnd(S({4}), c.blo, c.bhi, seed++), false}});
  }
}

TEST(Grad, WhereAndCast) {
  auto cond = TensorData::from<std::uint8_t>({1, 0, 0, 1, 1, 0}, S({2, 3})).convert(DType::Bool);
  Fn f = [cond](const std::vector<DynTensor>& x) {
    auto c = ops::from_data(cond, x[0].device());
    return ops::mask_where(c, x[0], x[1]);
  };
  check_both("where", f, {{rnd(S({2, 3}), -1, 1, 1)}, {rnd(S({1, 3}), -1, 1, 2)}});
  check_both(
      "mask_fill",
      [cond](auto& x) { return ops::mask_fill(x[0], ops::from_data(cond, x[0].device()), 3.0); },
      {{rnd(S({2, 3}), -1, 1, 3)}});
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

TEST(Grad, Reductions) {
  for (auto fn : {ir::ReduceFn::Sum, ir::ReduceFn::Mean, ir::ReduceFn::Prod, ir::ReduceFn::Max,
                  ir::ReduceFn::Min}) {
    for (std::int64_t d : {0, 1, -1}) {
      check_both(std::string(ir::name(fn)) + " dim " + std::to_string(d),
                 [=](auto& x) { return ops::reduce(fn, x[0], d); },
                 {{rnd(S({3, 4}), 0.5, 1.5, 10 + std::uint64_t(d + 1))}});
    }
    check_both(std::string(ir::name(fn)) + " all",
               [=](auto& x) { return ops::reduce_all(fn, x[0]); },
               {{rnd(S({2, 3}), 0.5, 1.5, 20)}});
  }
  check_both("max ties", [](auto& x) { return ops::reduce(ir::ReduceFn::Max, x[0], 1); },
             {{TensorData::from<double>({1, 3, 3, 2, 5, 5}, S({2, 3}))}});
  check_both("cumsum", [](auto& x) { return ops::scan(ir::ScanFn::Sum, x[0], 1); },
             {{rnd(S({3, 4}), -1, 1, 30)}});
  check_both("cumprod", [](auto& x) { return ops::scan(ir::ScanFn::Prod, x[0], 0); },
             {{rnd(S({3, 4}), 0.5, 1.5, 31)}});
  check_both("var", [](auto& x) { return ops::var(x[0], 1); }, {{rnd(S({3, 5}), -1, 1, 32)}});
}

TEST(Grad, Matmul) {
  check_both("2d", [](auto& x) { return ops::matmul(x[0], x[1]); },
             {{rnd(S({3, 4}), -1, 1, 1)}, {rnd(S({4, 5}), -1, 1, 2)}});
  check_both("batched, broadcast rhs", [](auto& x) { return ops::matmul(x[0], x[1]); },
             {{rnd(S({2, 3, 4}), -1, 1, 3)}, {rnd(S({4, 5}), -1, 1, 4)}});
  check_both("batched, broadcast both", [](auto& x) { return ops::matmul(x[0], x[1]); },
             {{rnd(S({2, 1, 3, 4}), -1, 1, 5)}, {rnd(S({3, 4, 2}), -1, 1, 6)}});
  check_both("transposed views",
             [](auto& x) { return ops::matmul(ops::transpose(x[0]), ops::transpose(x[1])); },
             {{rnd(S({4, 3}), -1, 1, 7)}, {rnd(S({5, 4}), -1, 1, 8)}});
}

TEST(Grad, Layout) {
  auto x34 = [](std::uint64_t s) { return Input{rnd(S({3, 4}), -1, 1, s)}; };
  check_both("reshape", [](auto& x) { return ops::reshape(x[0], S({2, 6})); }, {x34(1)});
  check_both("permute",
             [](auto& x) {
               return ops::permute(x[0], {2, 0, 1});
             },
             {{rnd(S({2, 3, 4}), -1, 1, 2)}});
  check_both("expand",
             [](auto& x) {
               return ops::expand(x[0], S({2, 3, 4}));
             },
             {{rnd(S({3, 1}), -1, 1, 3)}});
  check_both("slice step",
             [](auto& x) {
               return ops::slice(x[0], {ops::Range(1, 3), ops::Range(0, std::nullopt, 2)});
             },
             {x34(4)});
  check_both("flip", [](auto& x) { return ops::flip(x[0], {0, 1}); }, {x34(5)});
  check_both("slice_assign",
             [](auto& x) {
               return ops::slice_assign(x[0], {ops::Range(0, 2), ops::Range(1, 3)}, x[1]);
             },
             {x34(6), {rnd(S({2, 2}), -1, 1, 7)}});
  check_both("cat",
             [](auto& x) {
               return ops::cat({x[0], x[1], x[2]}, 1);
             },
             {x34(8), {rnd(S({3, 2}), -1, 1, 9)}, {rnd(S({3, 1}), -1, 1, 10), false}});
  check_both("pad reflect",
             [](auto& x) {
               return ops::pad(x[0], {{1, 2}}, ops::PadMode::Reflect);
             },
             {x34(11)});
  check_both("repeat", [](auto& x) { return ops::repeat(x[0], {2, 1}); }, {x34(12)});
}

TEST(Grad, Indexing) {
  auto x34 = [](std::uint64_t s) { return Input{rnd(S({3, 4}), -1, 1, s)}; };
  auto idx = ints({0, 2, 1, 3, 3, 0}, S({3, 2}));
  check_both("gather",
             [idx](auto& x) { return ops::gather(x[0], 1, ops::from_data(idx, x[0].device())); },
             {x34(1)});
  auto sidx = ints({0, 2, 1, 3, 2, 0}, S({3, 2}));
  for (bool add : {false, true}) {
    check_both(add ? "scatter_add" : "scatter",
               [sidx, add](auto& x) {
                 auto i = ops::from_data(sidx, x[0].device());
                 return add ? ops::scatter_add(x[0], 1, i, x[1]) : ops::scatter(x[0], 1, i, x[1]);
               },
               {x34(2), {rnd(S({3, 2}), -1, 1, 3)}});
  }
  auto sel = ints({2, 0, 2}, S({3}));
  check_both("select (index_select)",
             [sel](auto& x) { return ops::select(x[0], 1, ops::from_data(sel, x[0].device())); },
             {x34(4)});
  check_both("select_assign (index_add)",
             [sel](auto& x) {
               return ops::select_assign(x[0], 0, ops::from_data(sel, x[0].device()), x[1]);
             },
             {x34(5), {rnd(S({3, 4}), -1, 1, 6)}});
  check_both("sort", [](auto& x) { return ops::sort(x[0], 1); }, {x34(7)});
  check_both("sort descending", [](auto& x) { return ops::sort(x[0], 0, true); }, {x34(8)});
  check_both("topk", [](auto& x) { return ops::topk(x[0], 2, 1); }, {x34(9)});
  check_both("one_hot cross-entropy",
             [](auto& x) {
               auto labels = ops::from_data(ints({1, 0, 3}, S({3})), x[0].device());
               auto oh = ops::one_hot(labels, 4, DType::F64);
               return ops::binary(BinaryFn::Mul, ops::log_softmax(x[0], 1), oh);
             },
             {x34(10)});
}

// Sliding windows: unfold and fold (the IR ops), and the composites built on them.
// max_pool's inputs are distinct and spaced (no ties within eps).
TEST(Grad, SlidingWindows) {
  namespace mo = module_ops;
  using WO = mo::WindowOptions;
  check_both("unfold 2-d, stride, padding, dilation",
             [](auto& x) {
               return mo::unfold(x[0], {2, 3}, WO{{2, 1}, {1, 1}, {1, 2}});
             },
             {{rnd(S({2, 2, 5, 6}), -1, 1, 21)}});
  check_both("unfold 1-d, pad value -1",
             [](auto& x) {
               return mo::unfold(x[0], {3}, WO{{2}, {2}, {1}}, -1.0);
             },
             {{rnd(S({1, 3, 7}), -1, 1, 22)}});
  check_both("fold 2-d (overlapping)",
             [](auto& x) {
               return mo::fold(x[0], {4, 5}, {3, 2}, WO{{1, 2}, {1, 0}, {1, 1}});
             },
             {{rnd(S({2, 12, 8}), -1, 1, 23)}});
  check_both("conv2d, bias, groups, stride, padding",
             [](auto& x) {
               return mo::conv(x[0], x[1], x[2], WO{{2, 1}, {1, 2}, {1, 1}}, 2);
             },
             {{rnd(S({2, 4, 5, 6}), -1, 1, 24)},
              {rnd(S({6, 2, 3, 2}), -1, 1, 25)},
              {rnd(S({6}), -1, 1, 26)}});
  check_both("conv1d, dilation",
             [](auto& x) {
               return mo::conv(x[0], x[1], std::nullopt, WO{{1}, {1}, {2}});
             },
             {{rnd(S({2, 3, 9}), -1, 1, 27)}, {rnd(S({2, 3, 3}), -1, 1, 28)}});
  check_both("conv_transpose2d, output padding",
             [](auto& x) {
               return mo::conv_transpose(x[0], x[1], x[2], WO{{2, 2}, {1, 0}, {1, 1}}, {1, 0});
             },
             {{rnd(S({2, 3, 3, 4}), -1, 1, 29)},
              {rnd(S({3, 2, 3, 2}), -1, 1, 30)},
              {rnd(S({2}), -1, 1, 31)}});
  check_both("avg_pool2d, count_include_pad false",
             [](auto& x) {
               return mo::avg_pool(x[0], {3, 3}, WO{{2, 2}, {1, 1}, {}}, false);
             },
             {{rnd(S({2, 2, 5, 6}), -1, 1, 32)}});
  // Distinct values 0.01 apart, shuffled: no two window entries within 2 eps of each other.
  std::vector<double> v(2 * 3 * 6 * 7);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.01 * double(i) - 1.0;
  std::shuffle(v.begin(), v.end(), std::mt19937_64(33));
  check_both("max_pool2d, stride, padding, dilation",
             [](auto& x) {
               return mo::max_pool(x[0], {3, 2}, WO{{2, 2}, {1, 1}, {1, 2}});
             },
             {{TensorData::from(v, S({2, 3, 6, 7}))}});
}

// Layer norm: weight and bias present and absent, one and two normalised dims, and
// operands produced by element-wise ops (dropped and recomputed under Balanced).
TEST(Grad, LayerNorm) {
  const auto ln = [](DynTensor x, std::size_t dims, std::optional<DynTensor> w,
                     std::optional<DynTensor> b) {
    const Shape& xs = x.shape();
    const Shape ns(xs.dims().end() - static_cast<std::ptrdiff_t>(dims), xs.dims().end());
    return ops::layer_norm(std::move(x), ns, std::move(w), std::move(b), 1e-5);
  };
  check_both("layer_norm weight bias", [&](auto& x) { return ln(x[0], 1, x[1], x[2]); },
             {{rnd(S({3, 5}), -2, 2, 31)}, {rnd(S({5}), 0.5, 1.5, 32)}, {rnd(S({5}), -1, 1, 33)}});
  check_both("layer_norm 2 dims weight", [&](auto& x) { return ln(x[0], 2, x[1], std::nullopt); },
             {{rnd(S({2, 3, 4}), -2, 2, 34)}, {rnd(S({3, 4}), 0.5, 1.5, 35)}});
  check_both("layer_norm bias", [&](auto& x) { return ln(x[0], 1, std::nullopt, x[1]); },
             {{rnd(S({4, 6}), -2, 2, 36)}, {rnd(S({6}), -1, 1, 37)}});
  check_both("layer_norm plain", [&](auto& x) { return ln(x[0], 2, std::nullopt, std::nullopt); },
             {{rnd(S({2, 3}), -2, 2, 38)}});
  check_both("layer_norm of computed operands",
             [&](auto& x) {
               auto h = ops::unary(UnaryFn::Tanh, x[0]);
               auto w = ops::binary(BinaryFn::Mul, x[1], x[1]);
               return ln(std::move(h), 1, std::move(w), x[2]);
             },
             {{rnd(S({3, 7}), -2, 2, 39)}, {rnd(S({7}), 0.5, 1.5, 40)}, {rnd(S({7}), -1, 1, 41)}});
}

// The functions the tensor layer composes (ops_reduce, ops_layout, ops_indexing,
// ops_linalg, ops_sampling): their gradients come from the ops they are made of.
TEST(Grad, ComposedFunctions) {
  using RF = ir::ReduceFn;
  for (RF fn : {RF::Sum, RF::Mean, RF::Prod, RF::Max, RF::Min}) {
    check_both(std::string(ir::name(fn)) + "_dims",
               [fn](auto& x) {
                 return ops::reduce_dims(fn, x[0], {0, -1});
               },
               {{rnd(S({3, 2, 4}), -2, 2, 300 + std::size_t(fn))}});
  }
  check_both("sum_dims_squeeze",
             [](auto& x) { return ops::reduce_dims_squeeze(RF::Sum, x[0], {1}); },
             {{rnd(S({3, 2, 4}), -2, 2, 310)}});
  check_both("max_abs", [](auto& x) { return ops::max_abs(x[0]); }, {{rnd(S({3, 4}), -2, 2, 311)}});
  check_both("max_abs_dim", [](auto& x) { return ops::max_abs_dim(x[0], 1); },
             {{rnd(S({3, 4}), -2, 2, 312)}});
  check_both("cummax", [](auto& x) { return ops::scan(ir::ScanFn::Max, x[0], 1); },
             {{rnd(S({3, 6}), -2, 2, 313)}});
  check_both("cummin", [](auto& x) { return ops::scan(ir::ScanFn::Min, x[0], 0); },
             {{rnd(S({6, 3}), -2, 2, 314)}});
  check_both("cummax_with_indices",
             [](auto& x) { return ops::cummax_with_indices(x[0], -1).first; },
             {{rnd(S({2, 7}), -2, 2, 315)}});
  check_both("movedim", [](auto& x) { return ops::movedim(x[0], {0}, {2}); },
             {{rnd(S({2, 3, 4}), -2, 2, 316)}});
  check_both("roll",
             [](auto& x) {
               return ops::roll(x[0], {2, -1}, {1, 0});
             },
             {{rnd(S({3, 5}), -2, 2, 317)}});
  check_both("roll_flat", [](auto& x) { return ops::roll(x[0], {4}, {}); },
             {{rnd(S({3, 5}), -2, 2, 318)}});
  check_both("take",
             [](auto& x) {
               return ops::take(
                   x[0], ops::from_data(ints({0, -1, 5, 5, 2, -12}, S({2, 3})), x[0].device()));
             },
             {{rnd(S({3, 4}), -2, 2, 319)}});
  check_both("cross", [](auto& x) { return ops::cross(x[0], x[1], -1); },
             {{rnd(S({4, 3}), -2, 2, 320)}, {rnd(S({1, 3}), -2, 2, 321)}});
  check_both("diag of a vector", [](auto& x) { return ops::diag(x[0], -1); },
             {{rnd(S({4}), -2, 2, 322)}});
  check_both("diag of a matrix", [](auto& x) { return ops::diag(x[0], 1); },
             {{rnd(S({4, 5}), -2, 2, 323)}});
  check_both("diag_embed", [](auto& x) { return ops::diag_embed(x[0], 1); },
             {{rnd(S({2, 3}), -2, 2, 324)}});
  check_both("trace", [](auto& x) { return ops::trace(x[0]); }, {{rnd(S({3, 4}), -2, 2, 325)}});
  for (double ord : {2.0, 1.0, 3.0, 0.5, double(INFINITY), -double(INFINITY)}) {
    check_both("vector_norm " + std::to_string(ord),
               [ord](auto& x) { return ops::vector_norm(x[0], ord, {1}); },
               {{rnd(S({3, 4}), 0.2, 2, 326)}});
  }
  check_both("vector_norm of everything", [](auto& x) { return ops::vector_norm(x[0], 2.0); },
             {{rnd(S({3, 4}), -2, 2, 327)}});
  for (auto ord : {ops::MatrixNorm::Frobenius, ops::MatrixNorm::One, ops::MatrixNorm::NegOne,
                   ops::MatrixNorm::Inf, ops::MatrixNorm::NegInf}) {
    check_both("matrix_norm " + std::to_string(int(ord)),
               [ord](auto& x) { return ops::matrix_norm(x[0], ord); },
               {{rnd(S({2, 3, 4}), 0.2, 2, 328)}});
  }
  check_both("softmin", [](auto& x) { return ops::softmin(x[0], 1); },
             {{rnd(S({3, 4}), -2, 2, 329)}});
  check_both("quiet_softmax", [](auto& x) { return ops::quiet_softmax(x[0], 1); },
             {{rnd(S({3, 4}), -2, 2, 330)}});
  check_both("quiet_softmax large", [](auto& x) { return ops::quiet_softmax(x[0], 0); },
             {{rnd(S({3, 4}), 20, 30, 331)}});
  // grid_sample in the image and (bilinear) in the grid, positions inside and outside.
  for (int v = 0; v < 8; ++v) {
    const bool nearest = v & 1, border = v & 2, align = v & 4;
    check_both(
        "grid_sample " + std::to_string(v),
        [=](auto& x) {
          return ops::grid_sample(
              x[0], x[1], nearest ? ops::GridSampleMode::Nearest : ops::GridSampleMode::Bilinear,
              border ? ops::GridSamplePadding::Border : ops::GridSamplePadding::Zeros, align);
        },
        {{rnd(S({2, 2, 3, 4}), -2, 2, 332 + v)},
         {rnd(S({2, 3, 2, 2}), -1.2, 1.2, 342 + v), !nearest}});
  }
}

// Batch norm in training mode (ir::BatchNorm on the Cpu, its rule ir::BatchNormGrad):
// weight and bias present and absent, ranks 2 to 4, an operand computed by an element-wise
// op; and ir::BatchNormGrad's own rule (its gradients in x, weight and g), with the
// statistics BatchNorm gives for x.
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

TEST(Grad, CompositesReuseAndBroadcast) {
  check_both("softmax", [](auto& x) { return ops::softmax(x[0], 1); },
             {{rnd(S({3, 4}), -2, 2, 1)}});
  check_both("log_softmax", [](auto& x) { return ops::log_softmax(x[0], 0); },
             {{rnd(S({3, 4}), -2, 2, 2)}});
  // x used several times: gradients accumulate.
  check_both("reuse",
             [](auto& x) {
               auto a = ops::binary(BinaryFn::Mul, x[0], x[0]);
               auto b = ops::binary(BinaryFn::Mul, ops::unary(UnaryFn::Sin, x[0]), x[0]);
               return ops::binary(BinaryFn::Add, ops::binary(BinaryFn::Add, a, b), x[0]);
             },
             {{rnd(S({4}), -2, 2, 3)}});
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
