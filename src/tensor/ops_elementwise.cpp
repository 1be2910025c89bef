// Element-wise functions: validation, dtype promotion and broadcasting, then one IR op.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/ir/scalar_table.hpp"
#include "ember/tensor/gradients.hpp"
#include "tensor/op_support.hpp"

namespace ember::ops {

using detail::run;
using ir::BinaryFn;
using ir::UnaryFn;

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  return ir::broadcast_shapes(a, b, op);
}

namespace {

// Rejects x unless fn is defined for its dtype kind (ir/scalar_table.hpp says which).
void check_defined(const DynTensor& x, const ir::sx::FnDef& fn, const char* op) {
  if (ir::sx::defined_for(fn, x.kind())) return;
  std::string want;
  for (Kind k : {Kind::Float, Kind::Int, Kind::Bool}) {
    if (ir::sx::defined_for(fn, k)) want += std::string(want.empty() ? "" : " or ") + name(k);
  }
  fail(std::string(op) + ": expected a " + want + " tensor, got dtype " + name(x.dtype()) +
       " with shape " + x.shape().to_string());
}

// The dtype two operands are computed in: float beats int beats bool; wider wins.
DType promote(DType a, DType b) {
  if (a == b) return a;
  const Kind ka = kind_of(a), kb = kind_of(b);
  if (ka != kb) {
    const auto rank = [](Kind k) { return k == Kind::Float ? 2 : k == Kind::Int ? 1 : 0; };
    return rank(ka) > rank(kb) ? a : b;
  }
  if (ka == Kind::Float) {
    if (a == DType::F64 || b == DType::F64) return DType::F64;
    return DType::F32;  // f32 with a 16-bit type, or f16 with bf16
  }
  if (a == DType::U8 || b == DType::U8) {  // u8 with a signed type widens to the next signed
    const DType other = a == DType::U8 ? b : a;
    return size_of(other) > 1 ? other : DType::I16;
  }
  return size_of(a) >= size_of(b) ? a : b;
}

}  // namespace

DynTensor unary(UnaryFn fn, DynTensor x, double p0, double p1) {
  check_defined(x, ir::sx::def(fn), ir::name(fn));
  const DType out = ir::sx::result_dtype(fn, x.dtype());
  const Device dev = x.device();
  return run(dev, ir::Unary{fn, std::move(x).handle(), out, p0, p1});
}

DynTensor binary(BinaryFn fn, DynTensor a, DynTensor b) {
  const char* op = ir::name(fn);
  detail::check_same_device(a, b, op);
  const DType dt = promote(a.dtype(), b.dtype());
  check_defined(a, ir::sx::def(fn), op);
  check_defined(b, ir::sx::def(fn), op);
  const DType out = ir::sx::result_dtype(fn, dt);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  if (a.dtype() != dt) a = cast(std::move(a), dt);
  if (b.dtype() != dt) b = cast(std::move(b), dt);
  a = detail::left_pad_rank(std::move(a), shape.rank());
  b = detail::left_pad_rank(std::move(b), shape.rank());
  const Device dev = a.device();
  return run(dev,
             ir::Binary{fn, std::move(a).handle(), std::move(b).handle(), std::move(shape), out});
}

namespace {

bool is_comparison(BinaryFn fn) {
  return fn == BinaryFn::Eq || fn == BinaryFn::Ne || fn == BinaryFn::Gt || fn == BinaryFn::Ge ||
         fn == BinaryFn::Lt || fn == BinaryFn::Le;
}

// a fn s for an int or bool tensor a, comparing values exactly (never s converted to a's
// dtype first): s is replaced by the integer bound that gives the same answer for every
// integer, and a bound outside a's range gives a constant result.
DynTensor compare_exact(BinaryFn fn, DynTensor a, double s) {
  const auto constant = [&](bool v) {
    return detail::fill(a.shape(), v ? 1.0 : 0.0, DType::Bool, a.device());
  };
  if (std::isnan(s)) return constant(fn == BinaryFn::Ne);
  // Not a structured binding: clang before 16 cannot capture one in the lambdas below.
  const auto range = detail::int_range(a.dtype());
  const double lo = range.first, hi_d = range.second;
  // The exclusive upper end: i64's range ends below 2^63, which int_range gives as its max.
  const bool i64 = a.dtype() == DType::I64;
  const auto above = [&](double t) { return i64 ? t >= hi_d : t > hi_d; };  // t > max
  const auto at_or_above = [&](double t) { return t >= hi_d; };             // t >= max
  double t = s;
  switch (fn) {
    case BinaryFn::Eq:
    case BinaryFn::Ne:
      if (std::trunc(s) != s || s < lo || above(s)) return constant(fn == BinaryFn::Ne);
      break;
    case BinaryFn::Gt:  // x > s  <=>  x > floor(s)
      t = std::floor(s);
      if (at_or_above(t)) return constant(false);
      if (t < lo) return constant(true);
      break;
    case BinaryFn::Le:  // x <= s  <=>  x <= floor(s)
      t = std::floor(s);
      if (at_or_above(t)) return constant(true);
      if (t < lo) return constant(false);
      break;
    case BinaryFn::Ge:  // x >= s  <=>  x >= ceil(s)
      t = std::ceil(s);
      if (above(t)) return constant(false);
      if (t <= lo) return constant(true);
      break;
    case BinaryFn::Lt:  // x < s  <=>  x < ceil(s)
      t = std::ceil(s);
      if (above(t)) return constant(true);
      if (t <= lo) return constant(false);
      break;
    default:
      break;
  }
  auto b = detail::scalar_like(a, t);
  return binary(fn, std::move(a), std::move(b));
}

BinaryFn mirrored(BinaryFn fn) {  // s fn a == a mirrored(fn) s
  switch (fn) {
    case BinaryFn::Gt:
      return BinaryFn::Lt;
    case BinaryFn::Ge:
      return BinaryFn::Le;
    case BinaryFn::Lt:
      return BinaryFn::Gt;
    case BinaryFn::Le:
      return BinaryFn::Ge;
    default:
      return fn;
  }
}

// Note [Scalar promotion]: a scalar takes part as PyTorch's Python scalar does. With a float
// tensor the op computes in the tensor's dtype. With an int tensor, an integral scalar keeps
// the tensor's dtype and must lie in its range (else an ember::Error, as PyTorch's full), a
// fractional or non-finite scalar makes the op compute in the default float dtype (f32).
// Comparisons of an int or bool tensor with a scalar compare the values exactly.
DynTensor scalar_op(BinaryFn fn, DynTensor a, double s, bool scalar_first) {
  if (a.kind() != Kind::Float && is_comparison(fn)) {
    return compare_exact(scalar_first ? mirrored(fn) : fn, std::move(a), s);
  }
  if (a.kind() == Kind::Int) {
    if (!std::isfinite(s) || std::trunc(s) != s) {
      a = cast(std::move(a), DType::F32);
    } else {
      s = detail::fill_value(s, a.dtype(), ir::name(fn));
    }
  }
  auto b = detail::scalar_like(a, s);
  return scalar_first ? binary(fn, std::move(b), std::move(a))
                      : binary(fn, std::move(a), std::move(b));
}

}  // namespace

DynTensor binary_scalar(BinaryFn fn, DynTensor a, double s) {
  return scalar_op(fn, std::move(a), s, false);
}

DynTensor rbinary_scalar(BinaryFn fn, double s, DynTensor a) {
  return scalar_op(fn, std::move(a), s, true);
}

DynTensor cast(DynTensor x, DType to) {
  if (x.dtype() == to) return x;
  const Device dev = x.device();
  return run(dev, ir::Cast{std::move(x).handle(), to});
}

DynTensor clamp(DynTensor x, std::optional<double> min, std::optional<double> max) {
  EMBER_CHECK(!(min && max && *min > *max),
              detail::describe("clamp: min " + std::to_string(*min) + " is greater than max " +
                                   std::to_string(*max) + ", got",
                               {&x}));
  if (is_int(x.dtype())) {
    // Integer bounds reach the kernels inside the dtype's range, never NaN: a missing
    // bound is the type's limit, and an out-of-range bound saturates (u8 clamp_max(-1) = 0).
    double lo = 0, hi = 255;
    switch (x.dtype()) {
      case DType::I64:
        lo = -9.2233720368547758e18;
        hi = 9.2233720368547748e18;
        break;
      case DType::I32:
        lo = -2147483648.0;
        hi = 2147483647.0;
        break;
      case DType::I16:
        lo = -32768.0;
        hi = 32767.0;
        break;
      case DType::I8:
        lo = -128.0;
        hi = 127.0;
        break;
      default:
        break;
    }
    EMBER_CHECK(!(min && std::isnan(*min)) && !(max && std::isnan(*max)),
                detail::describe("clamp: a NaN bound needs a float tensor, got", {&x}));
    // A fractional bound rounds inwards: the result holds the integers within [min, max].
    const double a = std::clamp(min ? std::ceil(*min) : lo, lo, hi);
    const double b = std::clamp(max ? std::floor(*max) : hi, lo, hi);
    return unary(UnaryFn::Clamp, std::move(x), a, b);
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return unary(UnaryFn::Clamp, std::move(x), min.value_or(nan), max.value_or(nan));
}

DynTensor mask_where(DynTensor mask, DynTensor value, DynTensor x) {
  detail::check_kind(mask, {Kind::Bool}, "mask_where");
  detail::check_same_device(mask, x, "mask_where");
  detail::check_same_device(value, x, "mask_where");
  EMBER_CHECK(value.dtype() == x.dtype(), "mask_where: value and tensor dtypes differ: " +
                                              detail::describe("mask_where", {&value, &x}));
  Shape shape = broadcast_shapes(broadcast_shapes(mask.shape(), value.shape(), "mask_where"),
                                 x.shape(), "mask_where");
  mask = detail::left_pad_rank(std::move(mask), shape.rank());
  value = detail::left_pad_rank(std::move(value), shape.rank());
  x = detail::left_pad_rank(std::move(x), shape.rank());
  const Device dev = x.device();
  return run(dev, ir::Where{std::move(mask).handle(), std::move(value).handle(),
                            std::move(x).handle(), std::move(shape)});
}

DynTensor mask_fill(DynTensor x, DynTensor mask, double value) {
  auto v = detail::scalar_like(x, detail::fill_value(value, x.dtype(), "mask_fill"));
  return mask_where(std::move(mask), std::move(v), std::move(x));
}

DynTensor powi(DynTensor x, std::int64_t n) {
  detail::check_kind(x, {Kind::Float, Kind::Int}, "powi");
  if (x.kind() == Kind::Float) return unary(UnaryFn::PowScalar, std::move(x), double(n));
  EMBER_CHECK(n >= 0, detail::describe("powi: integers to negative powers (" + std::to_string(n) +
                                           ") are not allowed, got",
                                       {&x}));
  // Exact in the int dtype (wrapping as its multiplication does), by repeated squaring:
  // at most 2 * 63 multiplications per call, none per element.
  DynTensor result = detail::fill(x.shape(), 1.0, x.dtype(), x.device());
  DynTensor base = std::move(x);
  for (auto e = static_cast<std::uint64_t>(n); e != 0; e >>= 1) {
    if (e & 1) result = binary(BinaryFn::Mul, std::move(result), base);
    if (e > 1) base = binary(BinaryFn::Mul, base, base);
  }
  return result;
}

DynTensor lerp(DynTensor start, DynTensor end, double weight) {
  detail::check_kind(start, {Kind::Float}, "lerp");
  detail::check_kind(end, {Kind::Float}, "lerp");
  EMBER_CHECK(start.dtype() == end.dtype(),
              detail::describe("lerp: start and end differ in dtype, got", {&start, &end}));
  DynTensor diff = binary(BinaryFn::Sub, end, start);
  if (std::fabs(weight) < 0.5) {
    return binary(BinaryFn::Add, std::move(start),
                  binary_scalar(BinaryFn::Mul, std::move(diff), weight));
  }
  return binary(BinaryFn::Sub, std::move(end),
                binary_scalar(BinaryFn::Mul, std::move(diff), 1.0 - weight));
}

DynTensor softmax(DynTensor x, std::int64_t dim) {
  detail::check_kind(x, {Kind::Float}, "softmax");
  const std::size_t d = normalize_dim(dim, x.rank(), "softmax");
  const Device dev = x.device();
  return run(dev, ir::Softmax{std::move(x).handle(), d, false});
}

DynTensor log_softmax(DynTensor x, std::int64_t dim) {
  detail::check_kind(x, {Kind::Float}, "log_softmax");
  const std::size_t d = normalize_dim(dim, x.rank(), "log_softmax");
  const Device dev = x.device();
  return run(dev, ir::Softmax{std::move(x).handle(), d, true});
}

}  // namespace ember::ops

namespace ember::ops {

DynTensor softmin(DynTensor x, std::int64_t dim) {
  detail::check_kind(x, {Kind::Float}, "softmin");
  normalize_dim(dim, x.rank(), "softmin");
  return softmax(unary(ir::UnaryFn::Neg, std::move(x)), dim);
}

DynTensor quiet_softmax(DynTensor x, std::int64_t dim) {
  detail::check_kind(x, {Kind::Float}, "quiet_softmax");
  normalize_dim(dim, x.rank(), "quiet_softmax");
  // exp(x - c) / (exp(-c) + sum exp(x - c)) with c = max(0, max x) (a constant of the
  // graph): no term exceeds 1. An empty dim has no max; its result is empty.
  if (x.num_elements() == 0) return x;
  auto c = binary_scalar(ir::BinaryFn::Max, reduce(ir::ReduceFn::Max, detach(x), dim), 0.0);
  auto e = unary(ir::UnaryFn::Exp, binary(ir::BinaryFn::Sub, std::move(x), c));
  auto denom = binary(ir::BinaryFn::Add, reduce(ir::ReduceFn::Sum, e, dim),
                      unary(ir::UnaryFn::Exp, unary(ir::UnaryFn::Neg, std::move(c))));
  return binary(ir::BinaryFn::Div, std::move(e), std::move(denom));
}

}  // namespace ember::ops
