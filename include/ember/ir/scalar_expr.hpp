// Scalar expressions: the small expression form in which every element-wise function
// (UnaryFn, BinaryFn) and every reduction's identity and combine step is defined once
// (ir/scalar_table.hpp), for every backend and every fused kernel.
//
// An Expr is a DAG of at most kMaxNodes nodes, children before their parents and the root
// last (a subexpression used twice is one node), built at compile time by the builder:
// constants, the operands a and b (x is a), the op's parameters p0 and p1, arithmetic,
// comparisons, logic, select and calls to a small set of primitive math functions. Its
// meaning is fixed here, for every dtype kind, so that each printer and evaluator gives
// the same values:
//   - values are of the compute type C of the operand dtype (f64: double; f32, f16, bf16:
//     float; ints: their own type; Bool: bool); comparisons, not, and, or give bool;
//   - integer neg, add, sub and mul wrap as two's complement; integer div truncates
//     (0 for a zero divisor, which the kernels report; MIN / -1 wraps); mod is the
//     truncated remainder (fmod for floats; ints: 0 for divisors 0 and -1);
//   - shl / shr of a negative or too large shift give 0 (shr of a negative value: -1);
//   - lowest / highest are -inf / +inf for floats, the type's min / max otherwise;
//   - calls follow IEEE / C semantics of the function for NaN, infinities and signed zeros.
// Printers turn an Expr into source (CUDA C, GLSL, C++: print() below; a new dialect is one
// spelling function in scalar_expr.cpp); eval_float / eval_int are the f64 and exact
// integer interpreters the tests compare every backend with; the Cpu backend instantiates
// its vectorized kernels from the same expressions at compile time
// (cpu/kernels/scalar_eval.hpp).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include "ember/base/dtype.hpp"

namespace ember::ir::sx {

enum class Op : std::uint8_t {
  // leaves
  Const,
  Lowest,
  Highest,
  A,  // the first operand (x of a unary function)
  B,
  P0,
  P1,
  // one child
  Neg,
  Not,
  BitNot,
  ToC,  // bool -> the compute type
  // two children
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  And,
  Or,
  BitAnd,
  BitOr,
  BitXor,
  Shl,
  Shr,
  // three children
  Select,  // a ? b : c
  // a primitive math function of one or two children
  Call,
  Count_
};

// The primitive math functions an Expr may call, each as its C function of that name
// (rint: round half to even).
enum class Math : std::uint8_t {
  Fabs,
  Sqrt,
  Exp,
  Log,
  Log1p,
  Expm1,
  Sin,
  Cos,
  Tan,
  Sinh,
  Cosh,
  Tanh,
  Asin,
  Acos,
  Atan,
  Erf,
  Erfc,
  Floor,
  Ceil,
  Rint,
  Trunc,
  Pow,
  Atan2,
  Count_
};
constexpr int arity(Math m) { return m == Math::Pow || m == Math::Atan2 ? 2 : 1; }
const char* name(Math m);  // its C name ("exp", "atan2", ...)

// Whether node op yields bool (comparisons and logic) rather than the compute type.
constexpr bool yields_bool(Op op) {
  return op == Op::Not || op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le ||
         op == Op::Gt || op == Op::Ge || op == Op::And || op == Op::Or;
}

struct Node {
  Op op = Op::Const;
  Math fn = Math::Fabs;                // Call
  std::int8_t a = -1, b = -1, c = -1;  // children, by node index
  double value = 0;                    // Const
};

inline constexpr int kMaxNodes = 32;

// Called when a definition outgrows kMaxNodes: not constexpr, so such a table does not
// compile.
void expression_too_large();

struct Expr {
  std::array<Node, kMaxNodes> nodes{};
  int size = 0;

  constexpr Expr() = default;  // empty: "not defined"
  constexpr Expr(double v) { push({Op::Const, Math::Fabs, -1, -1, -1, v}); }  // NOLINT: 2 * x
  constexpr bool empty() const { return size == 0; }
  constexpr int root() const { return size - 1; }
  constexpr const Node& operator[](int i) const { return nodes[static_cast<std::size_t>(i)]; }

  constexpr void push(Node n) {
    if (size >= kMaxNodes) expression_too_large();
    nodes[static_cast<std::size_t>(size++)] = n;
  }
  // Appends e's nodes, sharing every node this expression already has (the same operator
  // over the same children), so a subexpression used twice is one node: an Expr is a DAG.
  // Returns the index of e's root here.
  constexpr std::int8_t append(const Expr& e) {
    std::array<std::int8_t, kMaxNodes> at{};
    for (int i = 0; i < e.size; ++i) {
      Node n = e[i];
      if (n.a >= 0) n.a = at[static_cast<std::size_t>(n.a)];
      if (n.b >= 0) n.b = at[static_cast<std::size_t>(n.b)];
      if (n.c >= 0) n.c = at[static_cast<std::size_t>(n.c)];
      at[static_cast<std::size_t>(i)] = find_or_push(n);
    }
    return at[static_cast<std::size_t>(e.root())];
  }
  constexpr std::int8_t find_or_push(const Node& n) {
    for (int j = 0; j < size; ++j) {
      const Node& m = nodes[static_cast<std::size_t>(j)];
      if (m.op == n.op && m.fn == n.fn && m.a == n.a && m.b == n.b && m.c == n.c &&
          std::bit_cast<std::uint64_t>(m.value) == std::bit_cast<std::uint64_t>(n.value))
        return static_cast<std::int8_t>(j);
    }
    push(n);
    return static_cast<std::int8_t>(size - 1);
  }
};

// A node of operator op (fn: for Call) over the given children (empty: none).
constexpr Expr make_leaf(Op op) {
  Expr e;
  e.push({op, Math::Fabs, -1, -1, -1, 0});
  return e;
}
constexpr Expr make_node(Op op, Math fn, const Expr& a, const Expr& b = Expr(),
                         const Expr& c = Expr()) {
  Expr e;
  const std::int8_t ia = e.append(a);
  const std::int8_t ib = b.empty() ? std::int8_t(-1) : e.append(b);
  const std::int8_t ic = c.empty() ? std::int8_t(-1) : e.append(c);
  e.push({op, fn, ia, ib, ic, 0});
  return e;
}

// ---- the builder ----
namespace build {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr Expr a() { return make_leaf(Op::A); }
constexpr Expr b() { return make_leaf(Op::B); }
constexpr Expr p0() { return make_leaf(Op::P0); }
constexpr Expr p1() { return make_leaf(Op::P1); }
constexpr Expr lowest() { return make_leaf(Op::Lowest); }
constexpr Expr highest() { return make_leaf(Op::Highest); }

constexpr Expr op1(Op op, const Expr& x) { return make_node(op, Math::Fabs, x); }
constexpr Expr op2(Op op, const Expr& x, const Expr& y) { return make_node(op, Math::Fabs, x, y); }

constexpr Expr operator-(const Expr& x) { return op1(Op::Neg, x); }
constexpr Expr operator!(const Expr& x) { return op1(Op::Not, x); }
constexpr Expr operator~(const Expr& x) { return op1(Op::BitNot, x); }
constexpr Expr to_c(const Expr& x) { return op1(Op::ToC, x); }
constexpr Expr operator+(const Expr& x, const Expr& y) { return op2(Op::Add, x, y); }
constexpr Expr operator-(const Expr& x, const Expr& y) { return op2(Op::Sub, x, y); }
constexpr Expr operator*(const Expr& x, const Expr& y) { return op2(Op::Mul, x, y); }
constexpr Expr operator/(const Expr& x, const Expr& y) { return op2(Op::Div, x, y); }
constexpr Expr mod(const Expr& x, const Expr& y) { return op2(Op::Mod, x, y); }
constexpr Expr eq(const Expr& x, const Expr& y) { return op2(Op::Eq, x, y); }
constexpr Expr ne(const Expr& x, const Expr& y) { return op2(Op::Ne, x, y); }
constexpr Expr operator<(const Expr& x, const Expr& y) { return op2(Op::Lt, x, y); }
constexpr Expr operator<=(const Expr& x, const Expr& y) { return op2(Op::Le, x, y); }
constexpr Expr operator>(const Expr& x, const Expr& y) { return op2(Op::Gt, x, y); }
constexpr Expr operator>=(const Expr& x, const Expr& y) { return op2(Op::Ge, x, y); }
constexpr Expr operator&&(const Expr& x, const Expr& y) { return op2(Op::And, x, y); }
constexpr Expr operator||(const Expr& x, const Expr& y) { return op2(Op::Or, x, y); }
constexpr Expr operator&(const Expr& x, const Expr& y) { return op2(Op::BitAnd, x, y); }
constexpr Expr operator|(const Expr& x, const Expr& y) { return op2(Op::BitOr, x, y); }
constexpr Expr operator^(const Expr& x, const Expr& y) { return op2(Op::BitXor, x, y); }
constexpr Expr shl(const Expr& x, const Expr& y) { return op2(Op::Shl, x, y); }
constexpr Expr shr(const Expr& x, const Expr& y) { return op2(Op::Shr, x, y); }
constexpr Expr select(const Expr& c, const Expr& t, const Expr& f) {
  return make_node(Op::Select, Math::Fabs, c, t, f);
}
constexpr Expr call(Math m, const Expr& x) { return make_node(Op::Call, m, x); }
constexpr Expr call(Math m, const Expr& x, const Expr& y) { return make_node(Op::Call, m, x, y); }

constexpr Expr is_nan(const Expr& x) { return ne(x, x); }
// NaN-propagating max and min (a NaN operand wins), written once for every use.
constexpr Expr max_nan(const Expr& x, const Expr& y) { return select(is_nan(x) || x > y, x, y); }
constexpr Expr min_nan(const Expr& x, const Expr& y) { return select(is_nan(x) || x < y, x, y); }

}  // namespace build

// ---- reading an Expr ----

// The f64 interpreter: e's value for float operands, in double arithmetic. Comparisons
// give 0 or 1.
double eval_float(const Expr& e, double a, double b = 0, double p0 = 0, double p1 = 0);
// The exact interpreter for an integer or Bool dtype dt: operands are values of dt, and
// wrapping arithmetic wraps at dt's width.
std::int64_t eval_int(const Expr& e, DType dt, std::int64_t a, std::int64_t b = 0,
                      std::int64_t p0 = 0, std::int64_t p1 = 0);

// Source dialects. Every dialect prints against two type names in scope: C, the compute
// type of dtype dt, and U, the unsigned type integer arithmetic wraps in, and the
// dialect's own prelude (m_<fn> math overloads, em_idiv / em_imod / em_shl / em_shr).
// GLSL (Vulkan compute) spells casts as constructors (C(x)), defines its temporaries
// without `const` (GLSL's const needs a constant initializer) and reads its prelude of
// m_<fn> functions for C from the generator that prints it (vulkan/codegen.cpp).
enum class Dialect : std::uint8_t { Cuda, Cpp, Glsl };

struct Names {
  std::string a = "a", b = "b", p0 = "p0", p1 = "p1";
};
// An expression printed as `statements` (one `const C t = ...;` line for each node used more
// than once, each line starting with `indent`) followed by `value`.
struct Printed {
  std::string statements;
  std::string value;
};
Printed print(const Expr& e, Dialect d, DType dt, const Names& names = {},
              const std::string& indent = "    ", const std::string& temp_prefix = "t");

// The C++ dialect's prelude: the helpers print(..., Dialect::Cpp, ...) calls.
const std::string& cpp_prelude();

}  // namespace ember::ir::sx
