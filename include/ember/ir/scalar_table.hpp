// The one definition of every element-wise function and of each reduction's identity and
// combine step, as scalar expressions (ir/scalar_expr.hpp).
//
// Each UnaryFn and BinaryFn has an FnDef: its user-level name, one expression per operand
// dtype kind it is defined for (float, integer, bool; an empty expression: not defined
// for that kind), whether its result is Bool (predicates and comparisons) and how it
// treats NaN. The switches below list every enumerator and have no default, so a new
// function without a definition does not compile. Everything else reads this table: the
// tensor layer's dtype checks, the Cuda generator (which prints the expressions), the Cpu
// kernels (instantiated from the expressions at compile time, but for the activations
// with a tuned vectorized form, which the table test compares with these expressions
// cell by cell), the conformance harness and the docs.
//
// The table is constexpr, so this header is heavier than most: include it where the
// definitions are used, not from other headers.
#pragma once

#include <array>
#include <cstddef>

#include "ember/ir/ops.hpp"
#include "ember/ir/scalar_expr.hpp"

namespace ember::ir::sx {

enum class Result : std::uint8_t { Operand, Bool };
// How a function of float operands treats NaN: Propagates: a NaN operand gives NaN;
// Ieee: as the C functions it is made of (pow(NaN, 0) = 1, hypot(inf, NaN) = inf); None:
// a Bool result.
enum class NanRule : std::uint8_t { Propagates, Ieee, None };

struct FnDef {
  const char* name = nullptr;  // the user-level function name
  Expr flt, integer, boolean;  // by operand kind; empty: not defined for that kind
  Result result = Result::Operand;
  NanRule nan = NanRule::Propagates;
};

namespace table_detail {

// Each definition names only the fields it sets; the rest keep their defaults.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

using namespace build;  // NOLINT: the definitions read as formulas
inline constexpr double kPi = 3.14159265358979323846;
inline constexpr double kLn2 = 0.69314718055994530942;
inline constexpr double kBig = 268435456.0;  // 2^28: beyond it x^2 - 1 and x^2 + 1 are x^2

// r carrying x's sign; x itself at +-0 and NaN (odd functions keep -0 and NaN).
constexpr Expr with_sign_of(const Expr& r, const Expr& x) {
  return select(x < 0.0, -r, select(x > 0.0, r, x));
}

constexpr Expr sigmoid(const Expr& x) {
  const Expr e = call(Math::Exp, -call(Math::Fabs, x));
  return select(x >= 0.0, 1.0, e) / (1.0 + e);
}
constexpr Expr softplus(const Expr& x) {
  return select(x > 0.0, x, 0.0) + call(Math::Log1p, call(Math::Exp, -call(Math::Fabs, x)));
}
// The remainder with the divisor's sign (Python's %), from the truncated one.
constexpr Expr floor_rem(const Expr& x, const Expr& y) {
  const Expr r = mod(x, y);
  return select(ne(r, 0.0) && ne(r < 0.0, y < 0.0), r + y, r);
}

constexpr FnDef unary(UnaryFn f) {
  const Expr x = a();
  const auto math = [&](const char* name, Math m) {
    return FnDef{.name = name, .flt = call(m, x)};
  };
  switch (f) {
    case UnaryFn::Neg:
      return {.name = "neg", .flt = -x, .integer = -x};
    case UnaryFn::Abs:
      return {.name = "abs", .flt = call(Math::Fabs, x), .integer = select(x < 0.0, -x, x)};
    case UnaryFn::Sign: {  // x + 0 keeps NaN and makes -0 +0, as PyTorch
      const Expr s = select(x > 0.0, 1.0, select(x < 0.0, -1.0, x + 0.0));
      return {.name = "sign", .flt = s, .integer = s};
    }
    case UnaryFn::Recip:
      return {.name = "recip", .flt = 1.0 / x};
    case UnaryFn::Square:
      return {.name = "square", .flt = x * x, .integer = x * x};
    case UnaryFn::Sqrt:
      return math("sqrt", Math::Sqrt);
    case UnaryFn::Rsqrt:
      return {.name = "rsqrt", .flt = 1.0 / call(Math::Sqrt, x)};
    case UnaryFn::Exp:
      return math("exp", Math::Exp);
    case UnaryFn::Log:
      return math("log", Math::Log);
    case UnaryFn::Log1p:
      return math("log1p", Math::Log1p);
    case UnaryFn::Expm1:
      return math("expm1", Math::Expm1);
    case UnaryFn::Sin:
      return math("sin", Math::Sin);
    case UnaryFn::Cos:
      return math("cos", Math::Cos);
    case UnaryFn::Tan:
      return math("tan", Math::Tan);
    case UnaryFn::Sinh:
      return math("sinh", Math::Sinh);
    case UnaryFn::Cosh:
      return math("cosh", Math::Cosh);
    case UnaryFn::Tanh:
      return math("tanh", Math::Tanh);
    case UnaryFn::Asin:
      return math("asin", Math::Asin);
    case UnaryFn::Acos:
      return math("acos", Math::Acos);
    case UnaryFn::Atan:
      return math("atan", Math::Atan);
    // The inverse hyperbolic functions through log1p, accurate near 0 (and acosh near 1),
    // log(|x|) + log(2) where squaring |x| would overflow.
    case UnaryFn::Asinh: {
      const Expr s = call(Math::Fabs, x);
      const Expr r = select(s > kBig, call(Math::Log, s) + kLn2,
                            call(Math::Log1p, s + s * s / (1.0 + call(Math::Sqrt, 1.0 + s * s))));
      return {.name = "asinh", .flt = with_sign_of(r, x)};
    }
    case UnaryFn::Acosh: {  // NaN below 1: sqrt(x - 1)'s
      const Expr t = x - 1.0;
      const Expr root = call(Math::Sqrt, t) * call(Math::Sqrt, x + 1.0);
      return {.name = "acosh",
              .flt = select(x > kBig, call(Math::Log, x) + kLn2, call(Math::Log1p, t + root))};
    }
    case UnaryFn::Atanh: {  // +-inf at +-1, NaN beyond
      const Expr s = call(Math::Fabs, x);
      const Expr r = 0.5 * call(Math::Log1p, 2.0 * s / (1.0 - s));
      return {.name = "atanh", .flt = with_sign_of(r, x)};
    }
    case UnaryFn::Erf:
      return math("erf", Math::Erf);
    case UnaryFn::Erfc:
      return math("erfc", Math::Erfc);
    case UnaryFn::Floor:
      return math("floor", Math::Floor);
    case UnaryFn::Ceil:
      return math("ceil", Math::Ceil);
    case UnaryFn::Round:  // half to even, as PyTorch
      return math("round", Math::Rint);
    case UnaryFn::Trunc:
      return math("trunc", Math::Trunc);
    case UnaryFn::Deg2Rad:
      return {.name = "deg2rad", .flt = x * (kPi / 180.0)};
    case UnaryFn::Rad2Deg:
      return {.name = "rad2deg", .flt = x * (180.0 / kPi)};
    case UnaryFn::Relu:
      return {.name = "relu", .flt = select(x < 0.0, 0.0, x)};
    case UnaryFn::Sigmoid:
      return {.name = "sigmoid", .flt = sigmoid(x)};
    // The activations' limits at -inf are -0 (not NaN from -inf * 0), as the Cpu's vmath.
    case UnaryFn::Gelu:
      return {
          .name = "gelu",
          .flt = select(x < -40.0, -0.0, 0.5 * x * call(Math::Erfc, -x * 0.70710678118654752440))};
    case UnaryFn::GeluTanh: {
      const Expr xc = select(x < -40.0, -40.0, x);
      const Expr m2w = Expr(-2.0) * 0.79788456080286535588 * xc * (1.0 + 0.044715 * xc * xc);
      return {.name = "gelu_tanh", .flt = xc / (1.0 + call(Math::Exp, m2w))};
    }
    case UnaryFn::Silu:
      return {.name = "silu", .flt = select(x < -200.0, -0.0, x * sigmoid(x))};
    case UnaryFn::Softplus:
      return {.name = "softplus", .flt = softplus(x)};
    case UnaryFn::Mish:
      return {.name = "mish", .flt = select(x < -200.0, -0.0, x * call(Math::Tanh, softplus(x)))};
    case UnaryFn::LeakyRelu:
      return {.name = "leaky_relu", .flt = select(x < 0.0, x * p0(), x)};
    case UnaryFn::Elu:
      return {.name = "elu", .flt = select(x < 0.0, p0() * call(Math::Expm1, x), x)};
    case UnaryFn::Clamp: {
      // For floats a NaN bound compares false, so it means no bound; NaN x stays NaN.
      // Integer bounds arrive inside the type's range (the tensor layer clamps them).
      const Expr lo = select(x < p0(), p0(), x);
      const Expr c = select(lo > p1(), p1(), lo);
      return {.name = "clamp", .flt = c, .integer = c};
    }
    case UnaryFn::PowScalar:
      return {.name = "powf_scalar",
              .flt = select(eq(p0(), 2.0), x * x, call(Math::Pow, x, p0())),
              .nan = NanRule::Ieee};
    case UnaryFn::IsNan:
      return {.name = "is_nan", .flt = is_nan(x), .result = Result::Bool, .nan = NanRule::None};
    case UnaryFn::IsInf:
      return {.name = "is_inf",
              .flt = eq(call(Math::Fabs, x), kInf),
              .result = Result::Bool,
              .nan = NanRule::None};
    case UnaryFn::IsFinite:
      return {.name = "is_finite",
              .flt = call(Math::Fabs, x) < kInf,
              .result = Result::Bool,
              .nan = NanRule::None};
    case UnaryFn::LogicalNot:
      return {.name = "bool_not", .boolean = !x, .nan = NanRule::None};
    case UnaryFn::BitNot:
      return {.name = "bitwise_not", .integer = ~x, .nan = NanRule::None};
    case UnaryFn::Count_:
      break;
  }
  return {};
}

constexpr FnDef binary(BinaryFn f) {
  const Expr x = a(), y = b();
  const auto cmp = [](const char* name, const Expr& e) {
    return FnDef{.name = name,
                 .flt = e,
                 .integer = e,
                 .boolean = e,
                 .result = Result::Bool,
                 .nan = NanRule::None};
  };
  const auto bits = [](const char* name, const Expr& e) {
    return FnDef{.name = name, .integer = e, .nan = NanRule::None};
  };
  const auto logic = [](const char* name, const Expr& e) {
    return FnDef{.name = name, .boolean = e, .nan = NanRule::None};
  };
  switch (f) {
    case BinaryFn::Add:
      return {.name = "add", .flt = x + y, .integer = x + y};
    case BinaryFn::Sub:
      return {.name = "sub", .flt = x - y, .integer = x - y};
    case BinaryFn::Mul:
      return {.name = "mul", .flt = x * y, .integer = x * y};
    case BinaryFn::Div:
      return {.name = "div", .flt = x / y, .integer = x / y};
    case BinaryFn::Rem:
      return {.name = "rem", .flt = floor_rem(x, y), .integer = floor_rem(x, y)};
    case BinaryFn::Pow:
      return {.name = "pow", .flt = call(Math::Pow, x, y), .nan = NanRule::Ieee};
    case BinaryFn::Atan2:
      return {.name = "atan2", .flt = call(Math::Atan2, x, y)};
    case BinaryFn::Hypot: {
      // big * sqrt(1 + (small / big)^2): no overflow or underflow of the squares. An infinite
      // operand gives inf even beside a NaN (IEEE); both zero give +0.
      const Expr ax = call(Math::Fabs, x), ay = call(Math::Fabs, y);
      const Expr big = select(ax > ay, ax, ay), small = select(ax > ay, ay, ax);
      const Expr r = small / big;
      const Expr v = big * call(Math::Sqrt, 1.0 + r * r);
      return {.name = "hypot",
              .flt = select(eq(ax, kInf) || eq(ay, kInf), kInf, select(eq(big, 0.0), small, v)),
              .nan = NanRule::Ieee};
    }
    case BinaryFn::LogAddExp: {
      // log(e^a + e^b) = max + log1p(e^-|a - b|); equal infinities are their own result
      // (a - b would be NaN).
      const Expr far = max_nan(x, y) + call(Math::Log1p, call(Math::Exp, -call(Math::Fabs, x - y)));
      return {.name = "logaddexp",
              .flt = select(eq(call(Math::Fabs, x), kInf) && eq(x, y), x, far)};
    }
    case BinaryFn::XLogY:  // as torch.xlogy: 0 * log(y) is 0 for any y but NaN
      return {.name = "xlogy",
              .flt = select(is_nan(y), y, select(eq(x, 0.0), 0.0, x * call(Math::Log, y)))};
    case BinaryFn::Max:  // integers have no NaN
      return {.name = "maximum", .flt = max_nan(x, y), .integer = select(x > y, x, y)};
    case BinaryFn::Min:
      return {.name = "minimum", .flt = min_nan(x, y), .integer = select(x < y, x, y)};
    case BinaryFn::Eq:
      return cmp("equal", eq(x, y));
    case BinaryFn::Ne:
      return cmp("not_equal", ne(x, y));
    case BinaryFn::Gt:
      return cmp("greater", x > y);
    case BinaryFn::Ge:
      return cmp("greater_equal", x >= y);
    case BinaryFn::Lt:
      return cmp("lower", x < y);
    case BinaryFn::Le:
      return cmp("lower_equal", x <= y);
    case BinaryFn::And:
      return logic("bool_and", x && y);
    case BinaryFn::Or:
      return logic("bool_or", x || y);
    case BinaryFn::Xor:
      return logic("bool_xor", ne(x, y));
    case BinaryFn::BitAnd:
      return bits("bitwise_and", x & y);
    case BinaryFn::BitOr:
      return bits("bitwise_or", x | y);
    case BinaryFn::BitXor:
      return bits("bitwise_xor", x ^ y);
    case BinaryFn::Shl:
      return bits("bitwise_left_shift", shl(x, y));
    case BinaryFn::Shr:
      return bits("bitwise_right_shift", shr(x, y));
    case BinaryFn::Count_:
      break;
  }
  return {};
}

#pragma GCC diagnostic pop

template <class Fn, std::size_t N, class Def>
constexpr std::array<FnDef, N> tabulate(Def def) {
  std::array<FnDef, N> t{};
  for (std::size_t i = 0; i < N; ++i) t[i] = def(static_cast<Fn>(i));
  return t;
}

}  // namespace table_detail

inline constexpr std::size_t kNumUnary = static_cast<std::size_t>(UnaryFn::Count_);
inline constexpr std::size_t kNumBinary = static_cast<std::size_t>(BinaryFn::Count_);
inline constexpr std::array<FnDef, kNumUnary> kUnaryDefs =
    table_detail::tabulate<UnaryFn, kNumUnary>(table_detail::unary);
inline constexpr std::array<FnDef, kNumBinary> kBinaryDefs =
    table_detail::tabulate<BinaryFn, kNumBinary>(table_detail::binary);

constexpr const FnDef& def(UnaryFn f) { return kUnaryDefs[static_cast<std::size_t>(f)]; }
constexpr const FnDef& def(BinaryFn f) { return kBinaryDefs[static_cast<std::size_t>(f)]; }

// f's expression for operands of kind k (empty where f is not defined for k).
constexpr const Expr& expr(const FnDef& d, Kind k) {
  return k == Kind::Float ? d.flt : k == Kind::Int ? d.integer : d.boolean;
}
constexpr bool defined_for(const FnDef& d, Kind k) { return !expr(d, k).empty(); }
constexpr bool defined_for(UnaryFn f, DType t) { return defined_for(def(f), kind_of(t)); }
constexpr bool defined_for(BinaryFn f, DType t) { return defined_for(def(f), kind_of(t)); }
// Predicates (is_nan, ...) and comparisons give Bool.
constexpr bool gives_bool(UnaryFn f) { return def(f).result == Result::Bool; }
constexpr bool gives_bool(BinaryFn f) { return def(f).result == Result::Bool; }
constexpr DType result_dtype(UnaryFn f, DType operand) {
  return gives_bool(f) ? DType::Bool : operand;
}
constexpr DType result_dtype(BinaryFn f, DType operand) {
  return gives_bool(f) ? DType::Bool : operand;
}

// A reduction as a fold: acc = identity, then acc = combine(acc, x) for each element (the
// element-wise function's expression with a = acc, b = x). ArgMax / ArgMin fold values as
// Max / Min; their index order is the backends' (ties: the lowest index; NaN wins).
struct ReduceDef {
  BinaryFn combine;
  Expr identity;
};
constexpr ReduceDef reduction(ReduceFn f) {
  switch (f) {
    case ReduceFn::Sum:
    case ReduceFn::Mean:
      return {BinaryFn::Add, 0.0};
    case ReduceFn::Prod:
      return {BinaryFn::Mul, 1.0};
    case ReduceFn::Max:
    case ReduceFn::ArgMax:  // floats start at -inf, not lowest(): max of [-inf] is -inf
      return {BinaryFn::Max, build::lowest()};
    case ReduceFn::Min:
    case ReduceFn::ArgMin:
      return {BinaryFn::Min, build::highest()};
    case ReduceFn::Any:
      return {BinaryFn::Or, 0.0};
    case ReduceFn::All:
      return {BinaryFn::And, 1.0};
    case ReduceFn::Count_:
      break;
  }
  return {BinaryFn::Add, {}};
}
// Scans combine as the reduction of the same name.
constexpr ReduceFn as_reduce(ScanFn f) {
  switch (f) {
    case ScanFn::Sum:
      return ReduceFn::Sum;
    case ScanFn::Prod:
      return ReduceFn::Prod;
    case ScanFn::Max:
      return ReduceFn::Max;
    case ScanFn::Min:
      return ReduceFn::Min;
    case ScanFn::Count_:
      break;
  }
  return ReduceFn::Sum;
}

}  // namespace ember::ir::sx
