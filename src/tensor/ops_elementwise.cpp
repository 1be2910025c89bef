// Element-wise functions: validation, dtype promotion and broadcasting, then one IR op.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/ir/scalar_table.hpp"
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

DynTensor binary_scalar(BinaryFn fn, DynTensor a, double s) {
  auto b = detail::scalar_like(a, s);
  return binary(fn, std::move(a), std::move(b));
}

DynTensor rbinary_scalar(BinaryFn fn, double s, DynTensor a) {
  auto b = detail::scalar_like(a, s);
  return binary(fn, std::move(b), std::move(a));
}

DynTensor cast(DynTensor x, DType to) {
  if (x.dtype() == to) return x;
  const Device dev = x.device();
  return run(dev, ir::Cast{std::move(x).handle(), to});
}

DynTensor clamp(DynTensor x, std::optional<double> min, std::optional<double> max) {
  EMBER_CHECK(!(min && max && *min > *max), "clamp: min " + std::to_string(*min) +
                                                " is greater than max " + std::to_string(*max));
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
    const double a = std::clamp(min.value_or(lo), lo, hi);
    const double b = std::clamp(max.value_or(hi), lo, hi);
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
  auto v = detail::scalar_like(x, value);
  return mask_where(std::move(mask), std::move(v), std::move(x));
}

DynTensor powi(DynTensor x, std::int64_t n) {
  detail::check_kind(x, {Kind::Float, Kind::Int}, "powi");
  if (x.kind() == Kind::Float) return unary(UnaryFn::PowScalar, std::move(x), double(n));
  const DType dt = x.dtype();
  return cast(unary(UnaryFn::PowScalar, cast(std::move(x), DType::F64), double(n)), dt);
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
