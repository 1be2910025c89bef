// The scalar expressions' interpreters and printers (ir/scalar_expr.hpp), and the
// element-wise functions' names, read from their table (ir/scalar_table.hpp).
#include "ember/ir/scalar_expr.hpp"

#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "ember/base/error.hpp"
#include "ember/ir/scalar_table.hpp"

namespace ember::ir {

const char* name(UnaryFn f) { return sx::def(f).name; }
const char* name(BinaryFn f) { return sx::def(f).name; }

}  // namespace ember::ir

namespace ember::ir::sx {

// The table is total: every function has a name and at least one kind it is defined for.
static_assert([] {
  for (const FnDef& d : kUnaryDefs) {
    if (d.name == nullptr || (d.flt.empty() && d.integer.empty() && d.boolean.empty()))
      return false;
  }
  for (const FnDef& d : kBinaryDefs) {
    if (d.name == nullptr || (d.flt.empty() && d.integer.empty() && d.boolean.empty()))
      return false;
  }
  return true;
}());

void expression_too_large() { EMBER_ASSERT(false && "scalar expression exceeds kMaxNodes"); }

const char* name(Math m) {
  static const char* const names[] = {"fabs", "sqrt", "exp",   "log",  "log1p", "expm1",
                                      "sin",  "cos",  "tan",   "sinh", "cosh",  "tanh",
                                      "asin", "acos", "atan",  "erf",  "erfc",  "floor",
                                      "ceil", "rint", "trunc", "pow",  "atan2"};
  static_assert(std::size(names) == static_cast<std::size_t>(Math::Count_));
  return names[static_cast<std::size_t>(m)];
}

namespace {

double call_f64(Math m, double x, double y) {
  switch (m) {
    case Math::Fabs:
      return std::fabs(x);
    case Math::Sqrt:
      return std::sqrt(x);
    case Math::Exp:
      return std::exp(x);
    case Math::Log:
      return std::log(x);
    case Math::Log1p:
      return std::log1p(x);
    case Math::Expm1:
      return std::expm1(x);
    case Math::Sin:
      return std::sin(x);
    case Math::Cos:
      return std::cos(x);
    case Math::Tan:
      return std::tan(x);
    case Math::Sinh:
      return std::sinh(x);
    case Math::Cosh:
      return std::cosh(x);
    case Math::Tanh:
      return std::tanh(x);
    case Math::Asin:
      return std::asin(x);
    case Math::Acos:
      return std::acos(x);
    case Math::Atan:
      return std::atan(x);
    case Math::Erf:
      return std::erf(x);
    case Math::Erfc:
      return std::erfc(x);
    case Math::Floor:
      return std::floor(x);
    case Math::Ceil:
      return std::ceil(x);
    case Math::Rint:
      return std::nearbyint(x);
    case Math::Trunc:
      return std::trunc(x);
    case Math::Pow:
      return std::pow(x, y);
    case Math::Atan2:
      return std::atan2(x, y);
    case Math::Count_:
      break;
  }
  EMBER_ASSERT(false);
}

// The comparisons and logical connectives, for float and integer evaluation alike (the
// result as 0 or 1); nullopt for any other node.
template <class T>
std::optional<bool> relation(Op op, T x, T y) {
  switch (op) {
    case Op::Eq:
      return x == y;
    case Op::Ne:
      return x != y;
    case Op::Lt:
      return x < y;
    case Op::Le:
      return x <= y;
    case Op::Gt:
      return x > y;
    case Op::Ge:
      return x >= y;
    case Op::And:
      return x != 0 && y != 0;
    case Op::Or:
      return x != 0 || y != 0;
    default:
      return std::nullopt;
  }
}

double eval_f(const Expr& e, int i, const double (&in)[4]) {
  const Node& n = e[i];
  const auto A = [&] { return eval_f(e, n.a, in); };
  const auto B = [&] { return eval_f(e, n.b, in); };
  const auto C = [&] { return eval_f(e, n.c, in); };
  const auto truth = [](bool v) { return v ? 1.0 : 0.0; };
  constexpr double inf = std::numeric_limits<double>::infinity();
  switch (n.op) {
    case Op::Const:
      return n.value;
    case Op::Lowest:
      return -inf;
    case Op::Highest:
      return inf;
    case Op::A:
      return in[0];
    case Op::B:
      return in[1];
    case Op::P0:
      return in[2];
    case Op::P1:
      return in[3];
    case Op::Neg:
      return -A();
    case Op::Not:
      return truth(A() == 0);
    case Op::ToC:
      return A();
    case Op::Add:
      return A() + B();
    case Op::Sub:
      return A() - B();
    case Op::Mul:
      return A() * B();
    case Op::Div:
      return A() / B();
    case Op::Mod:
      return std::fmod(A(), B());
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::And:
    case Op::Or:
      return truth(*relation(n.op, A(), B()));
    case Op::Select:
      return A() != 0 ? B() : C();
    case Op::Call:
      return call_f64(n.fn, A(), arity(n.fn) == 2 ? B() : 0.0);
    case Op::BitNot:
    case Op::BitAnd:
    case Op::BitOr:
    case Op::BitXor:
    case Op::Shl:
    case Op::Shr:
    case Op::Count_:
      break;
  }
  EMBER_ASSERT(false && "integer-only node in a float expression");
}

int bits_of(DType dt) { return static_cast<int>(size_of(dt)) * 8; }

// v reduced to dt's width, as its two's complement value (Bool: 0 or 1).
std::int64_t wrap(DType dt, std::uint64_t v) {
  switch (dt) {
    case DType::I32:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    case DType::I16:
      return static_cast<std::int16_t>(static_cast<std::uint16_t>(v));
    case DType::I8:
      return static_cast<std::int8_t>(static_cast<std::uint8_t>(v));
    case DType::U8:
      return static_cast<std::uint8_t>(v);
    case DType::Bool:
      return v != 0;
    default:
      return static_cast<std::int64_t>(v);
  }
}

std::int64_t lowest_of(DType dt) {
  switch (dt) {
    case DType::I64:
      return std::numeric_limits<std::int64_t>::min();
    case DType::I32:
      return std::numeric_limits<std::int32_t>::min();
    case DType::I16:
      return std::numeric_limits<std::int16_t>::min();
    case DType::I8:
      return std::numeric_limits<std::int8_t>::min();
    default:
      return 0;  // u8, bool
  }
}
std::int64_t highest_of(DType dt) {
  switch (dt) {
    case DType::I64:
      return std::numeric_limits<std::int64_t>::max();
    case DType::I32:
      return std::numeric_limits<std::int32_t>::max();
    case DType::I16:
      return std::numeric_limits<std::int16_t>::max();
    case DType::I8:
      return std::numeric_limits<std::int8_t>::max();
    case DType::U8:
      return 255;
    default:
      return 1;  // bool
  }
}

std::int64_t eval_i(const Expr& e, int i, DType dt, const std::int64_t (&in)[4]) {
  const Node& n = e[i];
  const auto A = [&] { return eval_i(e, n.a, dt, in); };
  const auto B = [&] { return eval_i(e, n.b, dt, in); };
  const auto C = [&] { return eval_i(e, n.c, dt, in); };
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  switch (n.op) {
    case Op::Const:
      return wrap(dt, u(static_cast<std::int64_t>(n.value)));
    case Op::Lowest:
      return lowest_of(dt);
    case Op::Highest:
      return highest_of(dt);
    case Op::A:
      return in[0];
    case Op::B:
      return in[1];
    case Op::P0:
      return in[2];
    case Op::P1:
      return in[3];
    case Op::Neg:
      return wrap(dt, 0 - u(A()));
    case Op::Not:
      return A() == 0;
    case Op::BitNot:
      return wrap(dt, ~u(A()));
    case Op::ToC:
      return A();
    case Op::Add:
      return wrap(dt, u(A()) + u(B()));
    case Op::Sub:
      return wrap(dt, u(A()) - u(B()));
    case Op::Mul:
      return wrap(dt, u(A()) * u(B()));
    case Op::Div: {
      const std::int64_t x = A(), y = B();
      if (y == 0) return 0;
      if (y == -1) return wrap(dt, 0 - u(x));
      return x / y;
    }
    case Op::Mod: {
      const std::int64_t x = A(), y = B();
      return (y == 0 || y == -1) ? 0 : x % y;
    }
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::And:
    case Op::Or:
      return *relation(n.op, A(), B());
    case Op::BitAnd:
      return wrap(dt, u(A()) & u(B()));
    case Op::BitOr:
      return wrap(dt, u(A()) | u(B()));
    case Op::BitXor:
      return wrap(dt, u(A()) ^ u(B()));
    case Op::Shl: {
      const std::int64_t x = A(), s = B();
      return (s < 0 || s >= bits_of(dt)) ? 0 : wrap(dt, u(x) << s);
    }
    case Op::Shr: {
      const std::int64_t x = A(), s = B();
      if (s < 0 || s >= bits_of(dt)) return x < 0 ? -1 : 0;
      return x >> s;
    }
    case Op::Select:
      return A() != 0 ? B() : C();
    case Op::Call:
    case Op::Count_:
      break;
  }
  EMBER_ASSERT(false && "math call in an integer expression");
}

}  // namespace

double eval_float(const Expr& e, double a, double b, double p0, double p1) {
  EMBER_ASSERT(!e.empty());
  const double in[4] = {a, b, p0, p1};
  return eval_f(e, e.root(), in);
}

std::int64_t eval_int(const Expr& e, DType dt, std::int64_t a, std::int64_t b, std::int64_t p0,
                      std::int64_t p1) {
  EMBER_ASSERT(!e.empty() && kind_of(dt) != Kind::Float);
  const std::int64_t in[4] = {a, b, p0, p1};
  return eval_i(e, e.root(), dt, in);
}

// ---- printing ----
namespace {

std::string number(double v) {
  if (v == 0 && std::signbit(v)) return "(C)(-0.0)";
  char buf[40];
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", v);
  }
  return v < 0 ? "(C)(" + std::string(buf) + ")" : "(C)" + std::string(buf);
}

// The C spelling of each node relation() evaluates.
const char* relation_symbol(Op op) {
  switch (op) {
    case Op::Eq:
      return "==";
    case Op::Ne:
      return "!=";
    case Op::Lt:
      return "<";
    case Op::Le:
      return "<=";
    case Op::Gt:
      return ">";
    case Op::Ge:
      return ">=";
    case Op::And:
      return "&&";
    case Op::Or:
      return "||";
    default:
      break;
  }
  EMBER_ASSERT(false && "not a relation");
}

// How a C-like dialect writes conversions, the hook through which one spelling of the
// shared nodes serves C, C++ and GLSL: `atom(T, x)` converts a child's text (C's `(T)x`,
// GLSL's constructor `T(x)`), `paren(T, e)` converts an expression (`(T)(e)`, `T(e)`), and
// `zero_u` is the wrapping type's zero.
struct CSyntax {
  std::string (*atom)(const char* type, const std::string& x);
  std::string (*paren)(const char* type, const std::string& e);
  const char* zero_u;
};
std::string c_cast(const char* t, const std::string& x) {
  std::string s = "(";
  return s.append(t).append(")").append(x);
}
std::string c_cast_paren(const char* t, const std::string& e) {
  std::string s = "(";
  return s.append(t).append(")(").append(e).append(")");
}
std::string constructor(const char* t, const std::string& x) {
  std::string s = t;
  return s.append("(").append(x).append(")");
}
const CSyntax kCCasts = {c_cast, c_cast_paren, "0u"};
const CSyntax kConstructors = {constructor, constructor, "U(0)"};

// One node of a C-like dialect, given its children's text: the spelling every dialect
// shares (operators, select, calls, the integer helpers), conversions written through
// `cs`; dialects spell constants and limits themselves (and whatever else they write
// differently) before falling back to this.
std::string spell_c(const Node& n, Kind k, const std::string (&ch)[3], const Names& names,
                    const CSyntax& cs = kCCasts) {
  const std::string &A = ch[0], &B = ch[1], &C = ch[2];
  const bool ints = k == Kind::Int;
  const auto infix = [](const std::string& x, const char* o, const std::string& y) {
    return "(" + x + " " + o + " " + y + ")";
  };
  const auto wrapping = [&](const char* o) {
    return ints ? cs.paren("C", cs.atom("U", A) + " " + o + " " + cs.atom("U", B)) : infix(A, o, B);
  };
  switch (n.op) {
    case Op::Const:
      if (k == Kind::Bool) return n.value != 0 ? "true" : "false";
      return number(n.value);
    case Op::A:
      return names.a;
    case Op::B:
      return names.b;
    case Op::P0:
      return cs.atom("C", names.p0);
    case Op::P1:
      return cs.atom("C", names.p1);
    case Op::Neg:
      return ints ? cs.paren("C", std::string(cs.zero_u) + " - " + cs.atom("U", A))
                  : "(-" + A + ")";
    case Op::Not:
      return "(!" + A + ")";
    case Op::BitNot:
      return cs.paren("C", "~" + A);
    case Op::ToC:
      return cs.paren("C", A);
    case Op::Add:
      return wrapping("+");
    case Op::Sub:
      return wrapping("-");
    case Op::Mul:
      return wrapping("*");
    case Op::Div:
      return ints ? "em_idiv(" + A + ", " + B + ")" : infix(A, "/", B);
    case Op::Mod:
      return ints ? "em_imod(" + A + ", " + B + ")" : "m_fmod(" + A + ", " + B + ")";
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::And:
    case Op::Or:
      return infix(A, relation_symbol(n.op), B);
    case Op::BitAnd:
      return cs.paren("C", A + " & " + B);
    case Op::BitOr:
      return cs.paren("C", A + " | " + B);
    case Op::BitXor:
      return cs.paren("C", A + " ^ " + B);
    case Op::Shl:
      return "em_shl(" + A + ", " + B + ")";
    case Op::Shr:
      return "em_shr(" + A + ", " + B + ")";
    case Op::Select:
      return "(" + A + " ? " + B + " : " + C + ")";
    case Op::Call:
      return std::string("m_") + name(n.fn) + "(" + A + (arity(n.fn) == 2 ? ", " + B : "") + ")";
    case Op::Lowest:
    case Op::Highest:
    case Op::Count_:
      break;
  }
  EMBER_ASSERT(false && "a dialect must spell this node");
}

// CUDA C against the Cuda prelude (cuda/codegen.cpp): m_<fn> overloads, EM_INF.
std::string spell_cuda(const Node& n, Kind k, DType dt, const std::string (&ch)[3],
                       const Names& names) {
  if (n.op == Op::Const && std::isinf(n.value)) return n.value > 0 ? "(C)EM_INF" : "(-(C)EM_INF)";
  if (n.op == Op::Lowest || n.op == Op::Highest) {
    const bool lo = n.op == Op::Lowest;
    switch (dt) {
      case DType::F64:
        return lo ? "(-__longlong_as_double(0x7ff0000000000000LL))"
                  : "__longlong_as_double(0x7ff0000000000000LL)";
      case DType::F32:
      case DType::F16:
      case DType::BF16:
        return lo ? "(-__int_as_float(0x7f800000))" : "__int_as_float(0x7f800000)";
      case DType::I64:
        return lo ? "(i64)(-9223372036854775807LL - 1)" : "(i64)9223372036854775807LL";
      case DType::I32:
        return lo ? "(i32)(-2147483647 - 1)" : "(i32)2147483647";
      case DType::I16:
        return lo ? "(i16)-32768" : "(i16)32767";
      case DType::I8:
        return lo ? "(i8)-128" : "(i8)127";
      case DType::U8:
        return lo ? "(u8)0" : "(u8)255";
      case DType::Bool:
        return lo ? "false" : "true";
    }
  }
  // Note [Integer selects on sm_90]: ptxas 13.0 for sm_90 joins two chained 32-bit integer
  // min / max into one three-input VIMNMX3 and drops a negation or absolute value folded into
  // the inner one's operand (min(min(a, -x), y) runs as min(a, x, y)). Every integer select
  // (min, max, relu, clamp, abs, where of the expressions) is passed through em_keep, an
  // identity byte permute the prelude defines, so no two of them are ever joined.
  if (n.op == Op::Select && k == Kind::Int) return "em_keep(" + spell_c(n, k, ch, names) + ")";
  return spell_c(n, k, ch, names);
}

// C++ against cpp_prelude(): <cmath> functions, std::numeric_limits.
std::string spell_cpp(const Node& n, Kind k, DType, const std::string (&ch)[3],
                      const Names& names) {
  if (n.op == Op::Const && std::isinf(n.value)) {
    return n.value > 0 ? "std::numeric_limits<C>::infinity()"
                       : "(-std::numeric_limits<C>::infinity())";
  }
  if (n.op == Op::Lowest) {
    return k == Kind::Float ? "(-std::numeric_limits<C>::infinity())"
                            : "std::numeric_limits<C>::lowest()";
  }
  if (n.op == Op::Highest) {
    return k == Kind::Float ? "std::numeric_limits<C>::infinity()"
                            : "std::numeric_limits<C>::max()";
  }
  if (n.op == Op::Call) {
    const std::string f = n.fn == Math::Rint ? "nearbyint" : name(n.fn);
    return "std::" + f + "(" + ch[0] + (arity(n.fn) == 2 ? ", " + ch[1] : "") + ")";
  }
  if (n.op == Op::Mod && k == Kind::Float) return "std::fmod(" + ch[0] + ", " + ch[1] + ")";
  return spell_c(n, k, ch, names);
}

// GLSL against the Vulkan prelude (vulkan/codegen.cpp): C and U are #defines of the
// compute and wrapping types, casts are constructors, m_<fn> and em_* are functions
// overloaded for C, EM_INF and the limits are the prelude's constants. What GLSL writes
// differently from C is here; the rest is spell_c's, with constructors for conversions.
std::string spell_glsl(const Node& n, Kind k, DType dt, const std::string (&ch)[3],
                       const Names& names) {
  const std::string &A = ch[0], &B = ch[1];
  const auto infix = [](const std::string& x, const char* o, const std::string& y) {
    return "(" + x + " " + o + " " + y + ")";
  };
  switch (n.op) {
    case Op::Const: {
      if (k == Kind::Bool) return n.value != 0 ? "true" : "false";
      if (std::isinf(n.value)) return n.value > 0 ? "EM_INF" : "(-EM_INF)";
      if (n.value == 0 && std::signbit(n.value)) return "C(-0.0)";
      char buf[40];
      if (n.value == std::trunc(n.value) && std::fabs(n.value) < 9007199254740992.0) {
        std::snprintf(buf, sizeof buf, "%.1f", n.value);
      } else {
        std::snprintf(buf, sizeof buf, "%.17e", n.value);
      }
      std::string lit = buf;
      if (k == Kind::Int) lit = std::to_string(static_cast<long long>(n.value));
      // f64 literals need their suffix, or they are rounded to float first.
      if (dt == DType::F64) lit += "lf";
      return "C(" + lit + ")";
    }
    case Op::Lowest:
      return "EM_LOWEST";
    case Op::Highest:
      return "EM_HIGHEST";
    case Op::ToC:
      return "(" + A + " ? C(1) : C(0))";
    case Op::Add:
      // x + 0 turns -0 into +0; drivers that fold it to x (Mesa's, whatever the shader's
      // float controls say) meet a zero they cannot see: EM_ZERO, the prelude's run-time 0.
      if (k == Kind::Float) {
        const auto zero = [](const std::string& t) { return t == "C(0.0)" || t == "C(0.0lf)"; };
        if (zero(B)) return infix(A, "+", std::string("EM_ZERO"));
        if (zero(A)) return infix(std::string("EM_ZERO"), "+", B);
      }
      break;
    // GLSL orders no bools: as ints (false < true).
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
      if (k == Kind::Bool) return infix("int(" + A + ")", relation_symbol(n.op), "int(" + B + ")");
      break;
    default:
      break;
  }
  return spell_c(n, k, ch, names, kConstructors);
}

std::string spell(Dialect d, const Node& n, Kind k, DType dt, const std::string (&ch)[3],
                  const Names& names) {
  switch (d) {
    case Dialect::Cuda:
      return spell_cuda(n, k, dt, ch, names);
    case Dialect::Cpp:
      return spell_cpp(n, k, dt, ch, names);
    case Dialect::Glsl:
      return spell_glsl(n, k, dt, ch, names);
  }
  EMBER_ASSERT(false);
}

bool is_leaf(Op op) { return op <= Op::P1; }

bool gives_bool_node(const Expr& e, int i) {
  const Node& n = e[i];
  if (n.op == Op::Select) return gives_bool_node(e, n.b);
  return yields_bool(n.op);
}

}  // namespace

Printed print(const Expr& e, Dialect d, DType dt, const Names& names, const std::string& indent,
              const std::string& temp_prefix) {
  EMBER_ASSERT(!e.empty());
  const Kind k = kind_of(dt);
  const auto children = [&](const Node& n, const std::vector<std::string>& text,
                            std::string(&ch)[3]) {
    ch[0] = n.a >= 0 ? text[static_cast<std::size_t>(n.a)] : "";
    ch[1] = n.b >= 0 ? text[static_cast<std::size_t>(n.b)] : "";
    ch[2] = n.c >= 0 ? text[static_cast<std::size_t>(n.c)] : "";
  };
  // Each node used more than once becomes one temporary, defined before its first use.
  std::vector<int> uses(static_cast<std::size_t>(e.size), 0);
  for (int i = 0; i < e.size; ++i) {
    for (const std::int8_t c : {e[i].a, e[i].b, e[i].c}) {
      if (c >= 0) ++uses[static_cast<std::size_t>(c)];
    }
  }
  Printed out;
  std::vector<std::string> text(static_cast<std::size_t>(e.size));
  int temps = 0;
  for (int i = 0; i < e.size; ++i) {
    std::string ch[3];
    children(e[i], text, ch);
    std::string t = spell(d, e[i], k, dt, ch, names);
    if (i != e.root() && !is_leaf(e[i].op) && uses[static_cast<std::size_t>(i)] > 1) {
      const std::string tn = temp_prefix + std::to_string(temps++);
      out.statements += indent + (d == Dialect::Glsl ? "" : "const ") +
                        (gives_bool_node(e, i) ? "bool " : "C ") + tn + " = " + t + ";\n";
      t = tn;
    }
    text[static_cast<std::size_t>(i)] = std::move(t);
  }
  out.value = text[static_cast<std::size_t>(e.root())];
  return out;
}

const std::string& cpp_prelude() {
  static const std::string p = R"(#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
// Integer semantics of the scalar expressions (ir/scalar_expr.hpp).
template <class T> T em_idiv(T a, T b) {
  if (b == T(0)) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return static_cast<T>(0u - static_cast<std::make_unsigned_t<T>>(a));
  }
  return static_cast<T>(a / b);
}
template <class T> T em_imod(T a, T b) {
  if (b == T(0)) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(0);
  }
  return static_cast<T>(a % b);
}
template <class T> T em_shl(T a, T b) {
  constexpr int bits = static_cast<int>(sizeof(T)) * 8;
  if (static_cast<long long>(b) < 0 || static_cast<long long>(b) >= bits) return T(0);
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) << b);
}
template <class T> T em_shr(T a, T b) {
  constexpr int bits = static_cast<int>(sizeof(T)) * 8;
  if (static_cast<long long>(b) < 0 || static_cast<long long>(b) >= bits) {
    return static_cast<long long>(a) < 0 ? static_cast<T>(-1) : T(0);
  }
  return static_cast<T>(a >> b);
}
)";
  return p;
}

}  // namespace ember::ir::sx
