// Element-wise cases: every UnaryFn and BinaryFn as its user-level function, the scalar
// forms, comparisons and boolean logic, clamp, powi, mask_where / mask_fill and dtype
// promotion. References are scalar f64 formulas; integer results wrap as two's complement
// (the documented semantics in src/cpu/kernels/scalar_ops.hpp).
#include <cmath>
#include <limits>

#include "conformance/harness.hpp"

namespace conformance {
namespace {

using ember::ir::BinaryFn;
using ember::ir::UnaryFn;
namespace ops = ember::ops;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// An integer result of dtype dt, wrapped into its range as two's complement arithmetic does.
double wrap(DType dt, double v) {
  if (is_float_dtype(dt) || dt == DType::Bool) return v;
  const int bits = static_cast<int>(ember::size_of(dt)) * 8;
  if (bits == 64) return v;  // generated values never leave the exact f64 range of i64
  const double m = std::ldexp(1.0, bits);
  double r = std::fmod(v, m);
  if (r < 0) r += m;
  if (dt != DType::U8 && r >= m / 2) r -= m;
  return r;
}

HostTensor map1(const HostTensor& x, DType out, const std::function<double(double)>& f) {
  HostTensor y(x.shape, out);
  for (std::size_t i = 0; i < x.numel(); ++i) y.v[i] = wrap(out, f(x.v[i]));
  return y;
}

HostTensor map2(const HostTensor& a, const HostTensor& b, DType out,
                const std::function<double(double, double)>& f) {
  HostTensor y(broadcast(a.shape, b.shape), out);
  for (std::size_t p = 0; p < y.numel(); ++p) {
    const auto idx = unravel(p, y.shape);
    y.v[p] = wrap(out, f(a.v[broadcast_index(idx, a.shape)], b.v[broadcast_index(idx, b.shape)]));
  }
  return y;
}

// A case's run through the function's Tensor method, so that the case does not compile
// without it. Operands of different ranks (which Tensor<D> methods do not take) go
// through ops::binary.
template <class M>
RunFn method1(M m) {
  return [m](Tensors&& x, const Params&) { return Tensors{with_typed(std::move(x[0]), m)}; };
}
template <class M>
RunFn method2(BinaryFn f, M m) {
  return [f, m](Tensors&& x, const Params&) {
    if (x[0].rank() != x[1].rank()) {
      return Tensors{ops::binary(f, std::move(x[0]), std::move(x[1]))};
    }
    DynTensor b = std::move(x[1]);
    return Tensors{
        with_typed(std::move(x[0]), [&](auto a) { return m(a, decltype(a)(std::move(b))); })};
  };
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }

void add_unary(std::vector<Case>& cs, const std::string& fn, UnaryFn f, std::vector<DType> dts,
               Domain d, bool specials, std::function<double(double)> ref, double tol = 1,
               double p0 = 0, double p1 = 0) {
  const bool pred = f == UnaryFn::IsNan || f == UnaryFn::IsInf || f == UnaryFn::IsFinite;
  Case c;
  c.fn = fn;
  c.family = "unary";
  c.dtypes = std::move(dts);
  const auto seed = std::hash<std::string>{}(fn);
  c.trials = [d, specials, seed](DType dt, Scale s) {
    return unary_trials(dt, s, d, specials, seed);
  };
  c.run = [f, p0, p1](Tensors&& x, const Params&) {
    return Tensors{ops::unary(f, std::move(x[0]), p0, p1)};
  };
  c.ref = [ref, pred](const std::vector<HostTensor>& in, const Params&) {
    return std::vector<HostTensor>{map1(in[0], pred ? DType::Bool : in[0].dtype, ref)};
  };
  c.tol_scale = tol;
  c.ir_call = IrCall{IrCall::Kind::Unary, static_cast<std::uint8_t>(f), p0, p1};
  cs.push_back(std::move(c));
}

// Pairs of shapes that broadcast, with the layouts each operand gets.
std::vector<Trial> binary_trials(DType dt, Scale scale, Domain da, Domain db, bool specials,
                                 std::uint64_t seed, DType dt_b) {
  Rng rng(seed);
  struct P {
    Shape a, b;
    Layout la, lb;
  };
  std::vector<P> ps;
  if (scale == Scale::Perf) {
    ps = {{Shape{1u << 22}, Shape{1u << 22}, Layout::Contiguous, Layout::Contiguous}};
  } else {
    using L = Layout;
    ps = {{Shape{7}, Shape{7}, L::Contiguous, L::Contiguous},
          {Shape{0}, Shape{0}, L::Contiguous, L::Contiguous},
          {Shape{3, 0, 2}, Shape{1, 2}, L::Contiguous, L::Contiguous},
          {Shape{1}, Shape{1}, L::Contiguous, L::Sliced},
          {Shape{3, 1, 5}, Shape{4, 1}, L::Contiguous, L::Contiguous},
          {Shape{2, 3, 4}, Shape{2, 3, 4}, L::Permuted, L::Sliced},
          {Shape{5, 6}, Shape{5, 6}, L::Flipped, L::Expanded},
          {Shape{1023}, Shape{1}, L::Contiguous, L::Contiguous},
          {Shape{1}, Shape{4097}, L::Contiguous, L::Flipped},
          {Shape{70001}, Shape{70001}, L::Contiguous, L::Contiguous},
          {Shape{3, 130, 257}, Shape{130, 1}, L::Contiguous, L::Contiguous},
          {Shape{257, 300}, Shape{257, 300}, L::Permuted, L::Contiguous}};
  }
  std::vector<Trial> out;
  for (const P& p : ps) {
    HostTensor a = random_host(p.a, dt, rng, da), b = random_host(p.b, dt_b, rng, db);
    if (specials) {
      add_specials(a, rng);
      add_specials(b, rng);
    }
    out.push_back({p.a.to_string() + " " + name(p.la) + " x " + p.b.to_string() + " " + name(p.lb),
                   {a, b},
                   {p.la, p.lb}});
  }
  return out;
}

bool is_cmp(BinaryFn f) {
  return f == BinaryFn::Eq || f == BinaryFn::Ne || f == BinaryFn::Gt || f == BinaryFn::Ge ||
         f == BinaryFn::Lt || f == BinaryFn::Le;
}

void add_binary(std::vector<Case>& cs, const std::string& fn, BinaryFn f, std::vector<DType> dts,
                Domain da, Domain db, bool specials, std::function<double(double, double)> ref,
                double tol = 1) {
  Case c;
  c.fn = fn;
  c.family = "binary";
  c.dtypes = std::move(dts);
  const auto seed = std::hash<std::string>{}(fn);
  c.trials = [=](DType dt, Scale s) { return binary_trials(dt, s, da, db, specials, seed, dt); };
  c.run = [f](Tensors&& x, const Params&) {
    return Tensors{ops::binary(f, std::move(x[0]), std::move(x[1]))};
  };
  c.ref = [ref, f](const std::vector<HostTensor>& in, const Params&) {
    return std::vector<HostTensor>{map2(in[0], in[1], is_cmp(f) ? DType::Bool : in[0].dtype, ref)};
  };
  c.tol_scale = tol;
  c.ir_call = IrCall{IrCall::Kind::Binary, static_cast<std::uint8_t>(f)};
  cs.push_back(std::move(c));
}

// Tensor-scalar forms (`add_scalar`, `equal_elem`, ...) and scalar-tensor forms (`rsub`).
void add_scalar(std::vector<Case>& cs, const std::string& fn, BinaryFn f, std::vector<DType> dts,
                Domain d, double s_float, double s_int, bool reversed,
                std::function<double(double, double)> ref, double tol = 1) {
  Case c;
  c.fn = fn;
  c.family = "binary";
  c.dtypes = std::move(dts);
  const auto seed = std::hash<std::string>{}(fn);
  c.trials = [=](DType dt, Scale s) { return unary_trials(dt, s, d, false, seed); };
  c.run = [=](Tensors&& x, const Params&) {
    const double s = is_float_dtype(x[0].dtype()) ? s_float : s_int;
    return Tensors{reversed ? ops::rbinary_scalar(f, s, std::move(x[0]))
                            : ops::binary_scalar(f, std::move(x[0]), s)};
  };
  c.ref = [=](const std::vector<HostTensor>& in, const Params&) {
    const double s = is_float_dtype(in[0].dtype) ? quantize(in[0].dtype, s_float) : s_int;
    const DType out = is_cmp(f) ? DType::Bool : in[0].dtype;
    return std::vector<HostTensor>{
        map1(in[0], out, [&](double x) { return reversed ? ref(s, x) : ref(x, s); })};
  };
  c.tol_scale = tol;
  cs.push_back(std::move(c));
}

double fmod_floor(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
double int_div(double a, double b) { return std::trunc(a / b); }
double max_nan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
}
double min_nan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
}
std::int64_t to_i(double v) { return static_cast<std::int64_t>(v); }
// torch.xlogy: NaN for a NaN y, else 0 where x is 0, else x log(y).
double xlogy(double x, double y) {
  if (std::isnan(y)) return y;
  return x == 0 ? 0.0 : x * std::log(y);
}

}  // namespace

void add_elementwise_cases(std::vector<Case>& cs) {
  const auto FI = concat(kAllFloats, kInts);
  const auto FSI = concat(kAllFloats, kSignedInts);
  using D = Domain;
  // ---- unary ----
  add_unary(cs, "neg", UnaryFn::Neg, FI, D::Any, true, [](double x) { return -x; });
  add_unary(cs, "abs", UnaryFn::Abs, FI, D::Any, true, [](double x) { return std::fabs(x); });
  add_unary(cs, "sign", UnaryFn::Sign, FI, D::Any, true, [](double x) {
    return x > 0 ? 1.0 : x < 0 ? -1.0 : x + 0.0;  // NaN stays NaN, -0 gives +0
  });
  {
    // sign(-0) is +0, as PyTorch: the value comparison cannot see a zero's sign.
    Case c;
    c.fn = "sign_of_zero";
    c.family = "unary";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale) {
      return std::vector<Trial>{
          {"[-0, 0, -2, 3, nan]", {HostTensor(Shape{5}, dt, {-0.0, 0.0, -2.0, 3.0, kNaN})}, {}}};
    };
    c.run = [](Tensors&& x, const Params&) {
      return Tensors{ops::unary(UnaryFn::Sign, std::move(x[0]))};
    };
    c.verify = [](const std::vector<HostTensor>&, const std::vector<HostTensor>& out,
                  const Params&) -> std::string {
      const auto& y = out[0].v;
      if (y.size() != 5 || y[0] != 0 || std::signbit(y[0]) || y[1] != 0 || std::signbit(y[1]) ||
          y[2] != -1 || y[3] != 1 || !std::isnan(y[4])) {
        return "expected [+0, +0, -1, 1, nan]";
      }
      return "";
    };
    cs.push_back(std::move(c));
  }
  add_unary(cs, "square", UnaryFn::Square, FI, D::Any, true, [](double x) { return x * x; });
  add_unary(cs, "recip", UnaryFn::Recip, kAllFloats, D::NonZero, true,
            [](double x) { return 1 / x; });
  add_unary(cs, "sqrt", UnaryFn::Sqrt, kAllFloats, D::Positive, true,
            [](double x) { return std::sqrt(x); });
  add_unary(cs, "rsqrt", UnaryFn::Rsqrt, kAllFloats, D::Positive, false,
            [](double x) { return 1 / std::sqrt(x); });
  add_unary(
      cs, "exp", UnaryFn::Exp, kAllFloats, D::Any, true, [](double x) { return std::exp(x); }, 2);
  add_unary(
      cs, "log", UnaryFn::Log, kAllFloats, D::Positive, true, [](double x) { return std::log(x); },
      2);
  add_unary(
      cs, "log1p", UnaryFn::Log1p, kAllFloats, D::Positive, false,
      [](double x) { return std::log1p(x); }, 2);
  add_unary(
      cs, "expm1", UnaryFn::Expm1, kAllFloats, D::Small, false,
      [](double x) { return std::expm1(x); }, 2);
  add_unary(
      cs, "sin", UnaryFn::Sin, kAllFloats, D::Any, false, [](double x) { return std::sin(x); }, 2);
  add_unary(
      cs, "cos", UnaryFn::Cos, kAllFloats, D::Any, false, [](double x) { return std::cos(x); }, 2);
  add_unary(
      cs, "tan", UnaryFn::Tan, kAllFloats, D::Unit, false, [](double x) { return std::tan(x); }, 2);
  add_unary(
      cs, "sinh", UnaryFn::Sinh, kAllFloats, D::Small, false, [](double x) { return std::sinh(x); },
      2);
  add_unary(
      cs, "cosh", UnaryFn::Cosh, kAllFloats, D::Small, false, [](double x) { return std::cosh(x); },
      2);
  add_unary(
      cs, "tanh", UnaryFn::Tanh, kAllFloats, D::Any, true, [](double x) { return std::tanh(x); },
      2);
  add_unary(
      cs, "asin", UnaryFn::Asin, kAllFloats, D::Unit, false, [](double x) { return std::asin(x); },
      2);
  add_unary(
      cs, "acos", UnaryFn::Acos, kAllFloats, D::Unit, false, [](double x) { return std::acos(x); },
      2);
  add_unary(
      cs, "atan", UnaryFn::Atan, kAllFloats, D::Any, false, [](double x) { return std::atan(x); },
      2);
  add_unary(
      cs, "asinh", UnaryFn::Asinh, kAllFloats, D::Any, true, [](double x) { return std::asinh(x); },
      2);
  cs.back().run = method1([](auto t) { return t.asinh(); });
  // Positive: about a quarter of the values lie below 1, where acosh is NaN.
  add_unary(
      cs, "acosh", UnaryFn::Acosh, kAllFloats, D::Positive, true,
      [](double x) { return std::acosh(x); }, 2);
  cs.back().run = method1([](auto t) { return t.acosh(); });
  add_unary(
      cs, "atanh", UnaryFn::Atanh, kAllFloats, D::Unit, true,
      [](double x) { return std::atanh(x); }, 2);
  cs.back().run = method1([](auto t) { return t.atanh(); });
  add_unary(cs, "deg2rad", UnaryFn::Deg2Rad, kAllFloats, D::Any, true,
            [](double x) { return x * (M_PI / 180.0); });
  cs.back().run = method1([](auto t) { return t.deg2rad(); });
  add_unary(cs, "rad2deg", UnaryFn::Rad2Deg, kAllFloats, D::Any, true,
            [](double x) { return x * (180.0 / M_PI); });
  cs.back().run = method1([](auto t) { return t.rad2deg(); });
  add_unary(
      cs, "erf", UnaryFn::Erf, kAllFloats, D::Small, false, [](double x) { return std::erf(x); },
      2);
  add_unary(
      cs, "erfc", UnaryFn::Erfc, kAllFloats, D::Small, true, [](double x) { return std::erfc(x); },
      2);
  cs.back().run = method1([](auto t) { return t.erfc(); });
  add_unary(cs, "floor", UnaryFn::Floor, kAllFloats, D::Any, true,
            [](double x) { return std::floor(x); });
  add_unary(cs, "ceil", UnaryFn::Ceil, kAllFloats, D::Any, true,
            [](double x) { return std::ceil(x); });
  add_unary(cs, "round", UnaryFn::Round, kAllFloats, D::Any, true,
            [](double x) { return std::nearbyint(x); });  // half to even
  add_unary(cs, "trunc", UnaryFn::Trunc, kAllFloats, D::Any, true,
            [](double x) { return std::trunc(x); });
  add_unary(cs, "is_nan", UnaryFn::IsNan, kAllFloats, D::Any, true,
            [](double x) { return std::isnan(x) ? 1.0 : 0.0; });
  add_unary(cs, "is_inf", UnaryFn::IsInf, kAllFloats, D::Any, true,
            [](double x) { return std::isinf(x) ? 1.0 : 0.0; });
  add_unary(cs, "is_finite", UnaryFn::IsFinite, kAllFloats, D::Any, true,
            [](double x) { return std::isfinite(x) ? 1.0 : 0.0; });
  add_unary(cs, "bool_not", UnaryFn::LogicalNot, {DType::Bool}, D::Any, false,
            [](double x) { return x != 0 ? 0.0 : 1.0; });
  add_unary(cs, "bitwise_not", UnaryFn::BitNot, kInts, D::Any, false,
            [](double x) { return static_cast<double>(~to_i(x)); });
  add_unary(
      cs, "powf_scalar", UnaryFn::PowScalar, kAllFloats, D::Positive, false,
      [](double x) { return std::pow(x, 1.5); }, 2, 1.5);

  // ---- activations (the element-wise ones; softmax lives with the compute cases) ----
  auto act = [&](const std::string& fn, UnaryFn f, double tol, std::function<double(double)> r,
                 double p0 = 0) {
    add_unary(cs, fn, f, kAllFloats, D::Any, f == UnaryFn::Relu, std::move(r), tol, p0);
    cs.back().family = "activation";
  };
  act("relu", UnaryFn::Relu, 1, [](double x) { return x < 0 ? 0.0 : x; });
  act("sigmoid", UnaryFn::Sigmoid, 2, sigmoid);
  act("gelu", UnaryFn::Gelu, 4,
      [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
  act("gelu_tanh", UnaryFn::GeluTanh, 4, [](double x) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
  });
  act("silu", UnaryFn::Silu, 2, [](double x) { return x * sigmoid(x); });
  act("softplus", UnaryFn::Softplus, 2, softplus);
  act("mish", UnaryFn::Mish, 4, [](double x) { return x * std::tanh(softplus(x)); });
  act(
      "leaky_relu", UnaryFn::LeakyRelu, 1, [](double x) { return x < 0 ? 0.125 * x : x; }, 0.125);
  act(
      "elu", UnaryFn::Elu, 2, [](double x) { return x < 0 ? 0.5 * std::expm1(x) : x; }, 0.5);
  {
    // hard_sigmoid exists only on the typed facade (ember/tensor/activation.hpp).
    Case c;
    c.fn = "hard_sigmoid";
    c.family = "activation";
    c.dtypes = kFloats;
    c.trials = [](DType dt, Scale s) { return unary_trials(dt, s, D::Any, true, 77); };
    c.run = [](Tensors&& x, const Params&) {
      return Tensors{
          with_typed(std::move(x[0]), [](auto t) { return ember::activation::hard_sigmoid(t); })};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      return std::vector<HostTensor>{map1(in[0], in[0].dtype, [](double x) {
        return std::isnan(x) ? x : std::clamp(0.2 * x + 0.5, 0.0, 1.0);
      })};
    };
    c.tol_scale = 2;
    cs.push_back(std::move(c));
  }

  // The composite activations of the typed facade, each against its formula on the host.
  auto facade_act = [&](const std::string& fn, std::function<DynTensor(DynTensor)> run,
                        std::function<double(double)> r, double tol = 2) {
    Case c;
    c.fn = fn;
    c.family = "activation";
    c.dtypes = kFloats;
    const auto seed = std::hash<std::string>{}(fn);
    c.trials = [seed](DType dt, Scale s) { return unary_trials(dt, s, D::Any, false, seed); };
    c.run = [run](Tensors&& x, const Params&) { return Tensors{run(std::move(x[0]))}; };
    c.ref = [r](const std::vector<HostTensor>& in, const Params&) {
      return std::vector<HostTensor>{map1(in[0], in[0].dtype, r)};
    };
    c.tol_scale = tol;
    cs.push_back(std::move(c));
  };
  namespace act_fn = ember::activation;
  const auto typed = [](auto f) {
    return [f](DynTensor x) { return with_typed(std::move(x), f); };
  };
  facade_act(
      "celu", typed([](auto t) { return act_fn::celu(t, 1.25); }),
      [](double x) { return x > 0 ? x : 1.25 * std::expm1(x / 1.25); }, 4);
  facade_act(
      "selu", typed([](auto t) { return act_fn::selu(t); }),
      [](double x) {
        return 1.0507009873554804934193349852946 *
               (x > 0 ? x : 1.6732632423543772848170429916717 * std::expm1(x));
      },
      4);
  facade_act("relu6", typed([](auto t) { return act_fn::relu6(t); }),
             [](double x) { return std::clamp(x, 0.0, 6.0); });
  facade_act("hardtanh", typed([](auto t) { return act_fn::hardtanh(t, -2.0, 1.5); }),
             [](double x) { return std::clamp(x, -2.0, 1.5); });
  facade_act("hardswish", typed([](auto t) { return act_fn::hardswish(t); }),
             [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); });
  facade_act("logsigmoid", typed([](auto t) { return act_fn::logsigmoid(t); }),
             [](double x) { return -softplus(-x); });
  facade_act("softsign", typed([](auto t) { return act_fn::softsign(t); }),
             [](double x) { return x / (1 + std::fabs(x)); });
  facade_act(
      "tanhshrink", typed([](auto t) { return act_fn::tanhshrink(t); }),
      [](double x) { return x - std::tanh(x); }, 4);
  facade_act("shrink", typed([](auto t) { return act_fn::shrink(t, 0.5, 0.25); }), [](double x) {
    return x > 0.5 ? x - 0.25 : x < -0.5 ? x + 0.25 : 0.0;
  });
  facade_act("hardshrink", typed([](auto t) { return act_fn::hardshrink(t, 0.5); }),
             [](double x) { return std::fabs(x) > 0.5 ? x : 0.0; });
  facade_act("softshrink", typed([](auto t) { return act_fn::softshrink(t, 0.5); }), [](double x) {
    return x > 0.5 ? x - 0.5 : x < -0.5 ? x + 0.5 : 0.0;
  });
  facade_act("threshold", typed([](auto t) { return act_fn::threshold(t, 0.5, -1.5); }),
             [](double x) { return x > 0.5 ? x : -1.5; });
  facade_act("thresholded_relu", typed([](auto t) { return act_fn::thresholded_relu(t); }),
             [](double x) { return x > 1.0 ? x : 0.0; });
  // rrelu in evaluation: the slopes' mean (the training draw is checked by the nn tests).
  facade_act("rrelu", typed([](auto t) { return act_fn::rrelu(t, 0.125, 0.375); }),
             [](double x) { return x < 0 ? 0.25 * x : x; });
  // glu and swiglu halve the last dim: shapes with an even one.
  auto add_gated = [&](const std::string& fn, std::function<DynTensor(DynTensor)> run,
                       std::function<double(double, double)> r) {
    Case c;
    c.fn = fn;
    c.family = "activation";
    c.dtypes = kFloats;
    const auto seed = std::hash<std::string>{}(fn);
    c.trials = [seed](DType dt, Scale s) {
      Rng rng(seed);
      std::vector<Trial> out;
      const std::vector<Shape> shapes =
          s == Scale::Perf ? std::vector<Shape>{Shape{1024, 4096}}
                           : std::vector<Shape>{Shape{2},       Shape{3, 0, 4},  Shape{4, 6},
                                                Shape{2, 3, 8}, Shape{5, 1, 34}, Shape{17, 130}};
      for (const Shape& sh : shapes) {
        const HostTensor x = random_host(sh, dt, rng, D::Any);
        out.push_back({sh.to_string(), {x}, {Layout::Contiguous}});
        if (s == Scale::Test) out.push_back({sh.to_string() + " sliced", {x}, {Layout::Sliced}});
      }
      return out;
    };
    c.run = [run](Tensors&& x, const Params&) { return Tensors{run(std::move(x[0]))}; };
    c.ref = [r](const std::vector<HostTensor>& in, const Params&) {
      const HostTensor& x = in[0];
      std::vector<std::size_t> dims = x.shape.dims();
      const std::size_t half = dims.back() / 2;
      dims.back() = half;
      HostTensor y(Shape(dims), x.dtype);
      for (std::size_t i = 0; i < y.numel(); ++i) {
        const std::size_t row = i / half, col = i % half;
        y.v[i] = quantize(x.dtype, r(x.v[row * 2 * half + col], x.v[row * 2 * half + half + col]));
      }
      return std::vector<HostTensor>{y};
    };
    c.tol_scale = 2;
    cs.push_back(std::move(c));
  };
  add_gated("glu", typed([](auto t) { return act_fn::glu(t); }),
            [](double a, double b) { return a * sigmoid(b); });
  add_gated("swiglu", typed([](auto t) { return act_fn::swiglu(t); }),
            [](double a, double b) { return a * sigmoid(a) * b; });
  {
    // prelu: weight [C] over dim 1, or one shared value.
    Case c;
    c.fn = "prelu";
    c.family = "activation";
    c.dtypes = kFloats;
    c.trials = [](DType dt, Scale s) {
      Rng rng(31);
      std::vector<Trial> out;
      const std::vector<std::pair<Shape, std::size_t>> shapes =
          s == Scale::Perf ? std::vector<std::pair<Shape, std::size_t>>{{Shape{64, 64, 1024}, 64}}
                           : std::vector<std::pair<Shape, std::size_t>>{
                                 {Shape{2, 3, 4}, 3},
                                 {Shape{4, 5}, 5},
                                 {Shape{3, 2, 2, 3}, 1},
                                 {Shape{7}, 1},
                                 {Shape{2, 17, 65}, 17}};
      for (const auto& [sh, n] : shapes) {
        const HostTensor x = random_host(sh, dt, rng, D::Any);
        const HostTensor w = random_host(Shape{n}, dt, rng, D::Any);
        out.push_back({sh.to_string(), {x, w}, {Layout::Contiguous, Layout::Contiguous}});
        if (s == Scale::Test && sh.rank() > 1)
          out.push_back({sh.to_string() + " permuted", {x, w}, {Layout::Permuted}});
      }
      return out;
    };
    c.run = [](Tensors&& x, const Params&) {
      const ember::Tensor<1> w(std::move(x[1]));
      return Tensors{with_typed(std::move(x[0]), [&](auto t) { return act_fn::prelu(t, w); })};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      const HostTensor& x = in[0];
      const HostTensor& w = in[1];
      HostTensor y(x.shape, x.dtype);
      const std::size_t n = w.numel();
      std::size_t inner = 1;
      for (std::size_t d = 2; d < x.rank(); ++d) inner *= x.shape[d];
      for (std::size_t i = 0; i < y.numel(); ++i) {
        const double a = w.v[n == 1 ? 0 : (i / inner) % n];
        y.v[i] = quantize(x.dtype, x.v[i] > 0 ? x.v[i] : a * x.v[i]);
      }
      return std::vector<HostTensor>{y};
    };
    c.tol_scale = 2;
    cs.push_back(std::move(c));
  }

  // clamp(min, max), clamp_min, clamp_max: NaN stays NaN.
  auto add_clamp = [&](const std::string& fn, std::optional<double> lo, std::optional<double> hi) {
    Case c;
    c.fn = fn;
    c.family = "unary";
    c.dtypes = FI;
    c.trials = [](DType dt, Scale s) { return unary_trials(dt, s, D::Any, true, 5); };
    c.run = [lo, hi](Tensors&& x, const Params&) {
      return Tensors{ops::clamp(std::move(x[0]), lo, hi)};
    };
    c.ref = [lo, hi](const std::vector<HostTensor>& in, const Params&) {
      // Integer tensors clamp with bounds saturated to the dtype's range (u8 max -1 is 0).
      const DType dt = in[0].dtype;
      auto bound = [dt](double b) {
        if (is_float_dtype(dt)) return b;
        const int bits = static_cast<int>(ember::size_of(dt)) * 8;
        const double l = dt == DType::U8 ? 0 : -std::ldexp(1.0, bits - 1);
        const double h = dt == DType::U8 ? 255 : std::ldexp(1.0, bits - 1) - 1;
        return std::clamp(b, l, h);
      };
      return std::vector<HostTensor>{map1(in[0], dt, [&](double x) {
        if (std::isnan(x)) return x;
        if (lo && x < bound(*lo)) x = bound(*lo);
        if (hi && x > bound(*hi)) x = bound(*hi);
        return x;
      })};
    };
    cs.push_back(std::move(c));
  };
  add_clamp("clamp", -2.0, 3.0);
  add_clamp("clamp_min", 1.0, std::nullopt);
  add_clamp("clamp_max", std::nullopt, -1.0);

  {
    Case c;
    c.fn = "powi";
    c.also = {"powi_scalar"};  // the Tensor method
    c.family = "unary";
    c.dtypes = FSI;
    c.trials = [](DType dt, Scale s) {
      // Cubes of |x| <= 5 fit every int dtype: int powi computes in f64 and casts back, so
      // an overflow would saturate (cast semantics) where PyTorch wraps; not tested here.
      auto ts = unary_trials(dt, s, D::Small, false, 9);
      for (auto& t : ts) {
        for (double& v : t.inputs[0].v) v = is_float_dtype(dt) ? v : std::fmod(v, 6.0);
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params&) { return Tensors{ops::powi(std::move(x[0]), 3)}; };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      return std::vector<HostTensor>{map1(in[0], in[0].dtype, [](double x) { return x * x * x; })};
    };
    c.tol_scale = 2;
    cs.push_back(std::move(c));
  }

  // ---- binary ----
  add_binary(cs, "add", BinaryFn::Add, FI, D::Any, D::Any, true, std::plus<double>());
  add_binary(cs, "sub", BinaryFn::Sub, FI, D::Any, D::Any, true, std::minus<double>());
  add_binary(cs, "mul", BinaryFn::Mul, FI, D::Any, D::Any, true, std::multiplies<double>());
  add_binary(cs, "div", BinaryFn::Div, FI, D::Any, D::NonZero, true, [](double a, double b) {
    return a / b;  // int dtypes override below: truncation
  });
  cs.back().ref = [](const std::vector<HostTensor>& in, const Params&) {
    const bool fl = is_float_dtype(in[0].dtype);
    return std::vector<HostTensor>{map2(in[0], in[1], in[0].dtype, [fl](double a, double b) {
      return fl ? a / b : int_div(a, b);
    })};
  };
  add_binary(cs, "rem", BinaryFn::Rem, FI, D::Any, D::NonZero, false, fmod_floor, 4);
  add_binary(
      cs, "pow", BinaryFn::Pow, kAllFloats, D::Positive, D::Small, false,
      [](double a, double b) { return std::pow(a, b); }, 4);
  cs.back().run = method2(BinaryFn::Pow, [](auto a, auto b) { return a.powf(b); });
  cs.back().also = {"powf"};  // powf is pow; the run calls it
  add_binary(
      cs, "atan2", BinaryFn::Atan2, kAllFloats, D::Any, D::Any, false,
      [](double a, double b) { return std::atan2(a, b); }, 2);
  add_binary(
      cs, "hypot", BinaryFn::Hypot, kAllFloats, D::Any, D::Any, true,
      [](double a, double b) { return std::hypot(a, b); }, 2);
  cs.back().run = method2(BinaryFn::Hypot, [](auto a, auto b) { return a.hypot(b); });
  add_binary(
      cs, "logaddexp", BinaryFn::LogAddExp, kAllFloats, D::Any, D::Any, true,
      [](double a, double b) {
        if (std::isnan(a) || std::isnan(b)) return kNaN;
        const double m = std::max(a, b);
        if (std::isinf(m)) return m;  // +inf wins; both -inf give -inf
        return m + std::log(std::exp(a - m) + std::exp(b - m));
      },
      2);
  cs.back().run = method2(BinaryFn::LogAddExp, [](auto a, auto b) { return a.logaddexp(b); });
  add_binary(cs, "xlogy", BinaryFn::XLogY, kAllFloats, D::Any, D::Positive, true, xlogy, 2);
  cs.back().run = method2(BinaryFn::XLogY, [](auto a, auto b) { return a.xlogy(b); });
  cs.back().trials = [](DType dt, Scale s) {  // every fifth x is 0: 0 * log(y) is 0
    auto ts = binary_trials(dt, s, D::Any, D::Positive, true, 17, dt);
    for (auto& t : ts) {
      for (std::size_t i = 0; i < t.inputs[0].numel(); i += 5) t.inputs[0].v[i] = 0.0;
    }
    return ts;
  };
  add_binary(cs, "maximum", BinaryFn::Max, FI, D::Any, D::Any, true, max_nan);
  add_binary(cs, "minimum", BinaryFn::Min, FI, D::Any, D::Any, true, min_nan);
  add_binary(cs, "bitwise_and", BinaryFn::BitAnd, kInts, D::Any, D::Any, false,
             [](double a, double b) { return static_cast<double>(to_i(a) & to_i(b)); });
  add_binary(cs, "bitwise_or", BinaryFn::BitOr, kInts, D::Any, D::Any, false,
             [](double a, double b) { return static_cast<double>(to_i(a) | to_i(b)); });
  add_binary(cs, "bitwise_xor", BinaryFn::BitXor, kInts, D::Any, D::Any, false,
             [](double a, double b) { return static_cast<double>(to_i(a) ^ to_i(b)); });
  // Shift counts 0..7 (generated as |x| mod 8 by the Positive-int domain's range 1..9).
  add_binary(cs, "bitwise_left_shift", BinaryFn::Shl, kInts, D::Any, D::Positive, false,
             [](double a, double b) { return a * std::ldexp(1.0, static_cast<int>(b) % 8); });
  cs.back().run = [](Tensors&& x, const Params&) {
    auto s = ops::binary_scalar(BinaryFn::Rem, std::move(x[1]), 8);
    return Tensors{ops::binary(BinaryFn::Shl, std::move(x[0]), std::move(s))};
  };
  cs.back().ir_call.reset();  // not the plain call: the counts are taken mod 8
  add_binary(
      cs, "bitwise_right_shift", BinaryFn::Shr, kInts, D::Any, D::Positive, false,
      [](double a, double b) { return std::floor(a / std::ldexp(1.0, static_cast<int>(b) % 8)); });
  cs.back().run = [](Tensors&& x, const Params&) {
    auto s = ops::binary_scalar(BinaryFn::Rem, std::move(x[1]), 8);
    return Tensors{ops::binary(BinaryFn::Shr, std::move(x[0]), std::move(s))};
  };
  cs.back().ir_call.reset();  // not the plain call: the counts are taken mod 8
  const auto FIB = concat(FI, {DType::Bool});
  add_binary(cs, "equal", BinaryFn::Eq, FIB, D::Small, D::Small, true,
             [](double a, double b) { return a == b ? 1.0 : 0.0; });
  add_binary(cs, "not_equal", BinaryFn::Ne, FIB, D::Small, D::Small, true,
             [](double a, double b) { return a != b ? 1.0 : 0.0; });
  add_binary(cs, "greater", BinaryFn::Gt, FIB, D::Small, D::Small, true,
             [](double a, double b) { return a > b ? 1.0 : 0.0; });
  add_binary(cs, "greater_equal", BinaryFn::Ge, FIB, D::Small, D::Small, true,
             [](double a, double b) { return a >= b ? 1.0 : 0.0; });
  add_binary(cs, "lower", BinaryFn::Lt, FIB, D::Small, D::Small, true,
             [](double a, double b) { return a < b ? 1.0 : 0.0; });
  add_binary(cs, "lower_equal", BinaryFn::Le, FIB, D::Small, D::Small, true,
             [](double a, double b) { return a <= b ? 1.0 : 0.0; });
  for (auto& c : cs) {
    if (c.fn == "equal" || c.fn == "not_equal" || c.fn == "greater" || c.fn == "greater_equal" ||
        c.fn == "lower" || c.fn == "lower_equal") {
      c.family = "comparison";
      // Quantize the f32 inputs to halves so that equal values occur.
      auto inner = c.trials;
      c.trials = [inner](DType dt, Scale s) {
        auto ts = inner(dt, s);
        for (auto& t : ts) {
          for (auto& in : t.inputs) {
            if (is_float_dtype(dt)) {
              for (double& v : in.v) v = std::isfinite(v) ? std::round(v * 2) / 2 : v;
            }
          }
        }
        return ts;
      };
    }
  }
  add_binary(cs, "bool_and", BinaryFn::And, {DType::Bool}, D::Any, D::Any, false,
             [](double a, double b) { return (a != 0 && b != 0) ? 1.0 : 0.0; });
  add_binary(cs, "bool_or", BinaryFn::Or, {DType::Bool}, D::Any, D::Any, false,
             [](double a, double b) { return (a != 0 || b != 0) ? 1.0 : 0.0; });
  add_binary(cs, "bool_xor", BinaryFn::Xor, {DType::Bool}, D::Any, D::Any, false,
             [](double a, double b) { return ((a != 0) != (b != 0)) ? 1.0 : 0.0; });
  for (auto& c : cs) {
    if (c.fn.rfind("bool_", 0) == 0) c.family = "logic";
  }

  // Mixed dtypes promote: float beats int, wider wins, u8 with i8 gives i16.
  {
    Case c;
    c.fn = "add (promotion)";
    c.family = "binary";
    c.dtypes = {DType::I32, DType::U8, DType::F16};
    c.trials = [](DType dt, Scale s) {
      const DType other = dt == DType::I32 ? DType::F32 : dt == DType::U8 ? DType::I8 : DType::BF16;
      return binary_trials(dt, s, D::Any, D::Any, false, 3, other);
    };
    c.run = [](Tensors&& x, const Params&) {
      return Tensors{ops::binary(BinaryFn::Add, std::move(x[0]), std::move(x[1]))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      const DType out = in[0].dtype == DType::I32  ? DType::F32
                        : in[0].dtype == DType::U8 ? DType::I16
                                                   : DType::F32;
      return std::vector<HostTensor>{map2(in[0], in[1], out, std::plus<double>())};
    };
    c.tol = [](DType dt) { return dt == DType::U8 ? Tolerance{0, 0} : Tolerance{1e-6, 1e-6}; };
    cs.push_back(std::move(c));
  }

  // ---- scalar forms ----
  add_scalar(cs, "add_scalar", BinaryFn::Add, FI, D::Any, 2.5, 3, false, std::plus<double>());
  add_scalar(cs, "sub_scalar", BinaryFn::Sub, FSI, D::Any, 2.5, 3, false, std::minus<double>());
  add_scalar(cs, "mul_scalar", BinaryFn::Mul, FI, D::Any, -1.5, 3, false,
             std::multiplies<double>());
  add_scalar(cs, "div_scalar", BinaryFn::Div, FI, D::Any, 0.75, 3, false, std::divides<double>());
  cs.back().ref = [](const std::vector<HostTensor>& in, const Params&) {
    const bool fl = is_float_dtype(in[0].dtype);
    return std::vector<HostTensor>{
        map1(in[0], in[0].dtype, [fl](double a) { return fl ? a / 0.75 : int_div(a, 3); })};
  };
  add_scalar(cs, "rem_scalar", BinaryFn::Rem, FSI, D::Any, 1.25, 4, false, fmod_floor);
  add_scalar(
      cs, "pow_scalar", BinaryFn::Pow, kAllFloats, D::Positive, 2.5, 2, false,
      [](double a, double b) { return std::pow(a, b); }, 4);
  add_scalar(
      cs, "atan2_scalar", BinaryFn::Atan2, kAllFloats, D::Any, -0.5, 1, false,
      [](double a, double b) { return std::atan2(a, b); }, 2);
  add_scalar(
      cs, "hypot_scalar", BinaryFn::Hypot, kAllFloats, D::Any, -1.5, 0, false,
      [](double a, double b) { return std::hypot(a, b); }, 2);
  add_scalar(
      cs, "logaddexp_scalar", BinaryFn::LogAddExp, kAllFloats, D::Any, 0.75, 0, false,
      [](double a, double b) { return std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b))); },
      2);
  add_scalar(cs, "xlogy_scalar", BinaryFn::XLogY, kAllFloats, D::Any, 2.5, 0, false, xlogy, 2);
  add_scalar(cs, "maximum_scalar", BinaryFn::Max, FI, D::Any, 0.5, 2, false, max_nan);
  add_scalar(cs, "minimum_scalar", BinaryFn::Min, FI, D::Any, 0.5, 2, false, min_nan);
  add_scalar(cs, "bitwise_and_scalar", BinaryFn::BitAnd, kInts, D::Any, 0, 6, false,
             [](double a, double b) { return static_cast<double>(to_i(a) & to_i(b)); });
  add_scalar(cs, "bitwise_or_scalar", BinaryFn::BitOr, kInts, D::Any, 0, 6, false,
             [](double a, double b) { return static_cast<double>(to_i(a) | to_i(b)); });
  add_scalar(cs, "bitwise_xor_scalar", BinaryFn::BitXor, kInts, D::Any, 0, 6, false,
             [](double a, double b) { return static_cast<double>(to_i(a) ^ to_i(b)); });
  add_scalar(cs, "bitwise_left_shift_scalar", BinaryFn::Shl, kInts, D::Any, 0, 3, false,
             [](double a, double b) { return a * std::ldexp(1.0, static_cast<int>(b)); });
  add_scalar(
      cs, "bitwise_right_shift_scalar", BinaryFn::Shr, kInts, D::Any, 0, 2, false,
      [](double a, double b) { return std::floor(a / std::ldexp(1.0, static_cast<int>(b))); });
  add_scalar(cs, "rsub", BinaryFn::Sub, FSI, D::Any, 2.5, 3, true, std::minus<double>());
  add_scalar(cs, "rdiv", BinaryFn::Div, kAllFloats, D::NonZero, 2.5, 3, true,
             std::divides<double>());
  auto cmp_elem = [&](const std::string& fn, BinaryFn f, std::function<bool(double, double)> r) {
    add_scalar(cs, fn, f, FI, D::Any, 0.5, 1, false,
               [r](double a, double b) { return r(a, b) ? 1.0 : 0.0; });
    cs.back().family = "comparison";
  };
  cmp_elem("equal_elem", BinaryFn::Eq, std::equal_to<double>());
  cmp_elem("not_equal_elem", BinaryFn::Ne, std::not_equal_to<double>());
  cmp_elem("greater_elem", BinaryFn::Gt, std::greater<double>());
  cmp_elem("greater_equal_elem", BinaryFn::Ge, std::greater_equal<double>());
  cmp_elem("lower_elem", BinaryFn::Lt, std::less<double>());
  cmp_elem("lower_equal_elem", BinaryFn::Le, std::less_equal<double>());

  // ---- selection by mask ----
  {
    Case c;
    c.fn = "mask_where";
    c.family = "mask";
    c.dtypes = concat(FI, {DType::Bool});
    c.trials = [](DType dt, Scale s) {
      auto ts = binary_trials(dt, s, D::Any, D::Any, true, 11, dt);
      Rng rng(12);
      for (auto& t : ts) {
        // mask broadcast from the second operand's shape.
        t.inputs.insert(t.inputs.begin(), random_host(t.inputs[1].shape, DType::Bool, rng));
        t.layouts.insert(t.layouts.begin(), Layout::Contiguous);
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params&) {
      return Tensors{ops::mask_where(std::move(x[0]), std::move(x[2]), std::move(x[1]))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      // out = mask ? value : x, with x = in[1], value = in[2]; all three broadcast.
      const Shape s = broadcast(broadcast(in[0].shape, in[1].shape), in[2].shape);
      HostTensor y(s, in[1].dtype);
      for (std::size_t p = 0; p < y.numel(); ++p) {
        const auto idx = unravel(p, s);
        y.v[p] = in[0].v[broadcast_index(idx, in[0].shape)] != 0
                     ? in[2].v[broadcast_index(idx, in[2].shape)]
                     : in[1].v[broadcast_index(idx, in[1].shape)];
      }
      return std::vector<HostTensor>{y};
    };
    cs.push_back(std::move(c));
  }
  {
    Case c;
    c.fn = "mask_fill";
    c.family = "mask";
    c.dtypes = concat(FI, {DType::Bool});
    c.trials = [](DType dt, Scale s) {
      auto ts = unary_trials(dt, s, D::Any, true, 13);
      Rng rng(14);
      for (auto& t : ts) {
        t.inputs.push_back(random_host(t.inputs[0].shape, DType::Bool, rng));
        t.layouts.push_back(Layout::Sliced);
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params&) {
      return Tensors{ops::mask_fill(std::move(x[0]), std::move(x[1]), 1.0)};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      HostTensor y = in[0];
      for (std::size_t i = 0; i < y.numel(); ++i) {
        if (in[1].v[i] != 0) y.v[i] = 1.0;
      }
      return std::vector<HostTensor>{y};
    };
    cs.push_back(std::move(c));
  }
}

}  // namespace conformance
