// Element-wise ONNX operators: math, activations, comparisons, logic, Cast, Where, Clip.
#include <cmath>

#include "ops.hpp"

namespace ember::onnx {

namespace {

using ir::BinaryFn;
using ir::UnaryFn;
using V = std::vector<DynTensor>;

DynTensor scalar(double v, DType dt, const Device& dev) { return ops::full(Shape{}, v, dt, dev); }

template <UnaryFn F>
V unary(OpCall& c) {
  return {ops::unary(F, c.take(0))};
}

template <BinaryFn F>
V binary(OpCall& c) {
  DynTensor a = c.take(0);
  return {ops::binary(F, std::move(a), c.take(1))};
}

// Sum, Mean, Max, Min over any number of inputs, broadcasting.
template <BinaryFn F>
V variadic(OpCall& c) {
  c.check(c.size() >= 1, "expects at least one input");
  DynTensor acc = c.at(0);
  for (std::size_t i = 1; i < c.size(); ++i) acc = ops::binary(F, std::move(acc), c.at(i));
  return {acc};
}

V mean(OpCall& c) {
  DynTensor s = variadic<BinaryFn::Add>(c)[0];
  return {ops::binary_scalar(BinaryFn::Div, std::move(s), static_cast<double>(c.size()))};
}

V pow(OpCall& c) {
  DynTensor x = c.at(0), y = c.at(1);
  if (is_float(x.dtype())) {
    if (y.dtype() != x.dtype()) y = ops::cast(std::move(y), x.dtype());
    return {ops::binary(BinaryFn::Pow, std::move(x), std::move(y))};
  }
  const DType dt = x.dtype();
  DynTensor r = ops::binary(BinaryFn::Pow, ops::cast(std::move(x), DType::F64),
                            ops::cast(std::move(y), DType::F64));
  return {ops::cast(std::move(r), dt)};
}

V mod(OpCall& c) {
  DynTensor x = c.at(0), y = c.at(1);
  if (c.node.i("fmod", 0) == 0) {
    c.check(!is_float(x.dtype()), "fmod = 0 is defined for integers only; floats need fmod = 1");
    return {ops::binary(BinaryFn::Rem, std::move(x), std::move(y))};
  }
  // C fmod: x - trunc(x / y) * y, the sign of x.
  const DType dt = x.dtype();
  DynTensor xf = ops::cast(x, DType::F64), yf = ops::cast(y, DType::F64);
  DynTensor q = ops::unary(UnaryFn::Trunc, ops::binary(BinaryFn::Div, xf, yf));
  DynTensor r = ops::binary(BinaryFn::Sub, xf, ops::binary(BinaryFn::Mul, q, yf));
  return {ops::cast(std::move(r), dt)};
}

V div(OpCall& c) { return {ops::binary(BinaryFn::Div, c.at(0), c.at(1))}; }

V not_(OpCall& c) { return {ops::unary(UnaryFn::LogicalNot, c.at(0))}; }

V isinf(OpCall& c) {
  DynTensor x = c.at(0);
  const bool pos = c.node.i("detect_positive", 1) != 0, neg = c.node.i("detect_negative", 1) != 0;
  if (pos && neg) return {ops::unary(UnaryFn::IsInf, x)};
  if (!pos && !neg) return {ops::full(x.shape(), 0, DType::Bool, x.device())};
  DynTensor inf = ops::unary(UnaryFn::IsInf, x);
  DynTensor side =
      pos ? ops::binary_scalar(BinaryFn::Gt, x, 0) : ops::binary_scalar(BinaryFn::Lt, x, 0);
  return {ops::binary(BinaryFn::And, std::move(inf), std::move(side))};
}

V leaky_relu(OpCall& c) {
  return {ops::unary(UnaryFn::LeakyRelu, c.at(0), c.node.f("alpha", 0.01))};
}
V elu(OpCall& c) { return {ops::unary(UnaryFn::Elu, c.at(0), c.node.f("alpha", 1.0))}; }
V selu(OpCall& c) {
  const double alpha = c.node.f("alpha", 1.67326319217681884765625);
  const double gamma = c.node.f("gamma", 1.05070102214813232421875);
  return {ops::binary_scalar(BinaryFn::Mul, ops::unary(UnaryFn::Elu, c.at(0), alpha), gamma)};
}
V celu(OpCall& c) {
  const double alpha = c.node.f("alpha", 1.0);
  DynTensor x = ops::binary_scalar(BinaryFn::Div, c.at(0), alpha);
  return {ops::binary_scalar(BinaryFn::Mul, ops::unary(UnaryFn::Elu, std::move(x), 1.0), alpha)};
}
V thresholded_relu(OpCall& c) {
  DynTensor x = c.at(0);
  DynTensor keep = ops::binary_scalar(BinaryFn::Gt, x, c.node.f("alpha", 1.0));
  return {ops::mask_where(std::move(keep), x, ops::zeros(x.shape(), x.dtype(), x.device()))};
}
V hard_sigmoid(OpCall& c) {
  DynTensor y = ops::binary_scalar(BinaryFn::Mul, c.at(0), c.node.f("alpha", 0.2));
  y = ops::binary_scalar(BinaryFn::Add, std::move(y), c.node.f("beta", 0.5));
  return {ops::clamp(std::move(y), 0.0, 1.0)};
}
V hard_swish(OpCall& c) {
  DynTensor x = c.at(0);
  DynTensor h = ops::binary_scalar(BinaryFn::Add, ops::binary_scalar(BinaryFn::Div, x, 6.0), 0.5);
  return {ops::binary(BinaryFn::Mul, x, ops::clamp(std::move(h), 0.0, 1.0))};
}
V softsign(OpCall& c) {
  DynTensor x = c.at(0);
  DynTensor d = ops::binary_scalar(BinaryFn::Add, ops::unary(UnaryFn::Abs, x), 1.0);
  return {ops::binary(BinaryFn::Div, x, std::move(d))};
}
V prelu(OpCall& c) {
  DynTensor x = c.at(0), slope = c.at(1);
  DynTensor neg = ops::binary_scalar(BinaryFn::Lt, x, 0.0);
  DynTensor scaled = ops::binary(BinaryFn::Mul, x, std::move(slope));
  return {ops::mask_where(std::move(neg), std::move(scaled), x)};
}
V shrink(OpCall& c) {
  DynTensor x = c.at(0);
  const double bias = c.node.f("bias", 0.0), lambd = c.node.f("lambd", 0.5);
  const DType dt = x.dtype();
  DynTensor zero = ops::zeros(x.shape(), dt, x.device());
  DynTensor lo = ops::binary_scalar(BinaryFn::Lt, x, -lambd);
  DynTensor hi = ops::binary_scalar(BinaryFn::Gt, x, lambd);
  DynTensor plus = ops::binary_scalar(BinaryFn::Add, x, bias);
  DynTensor minus = ops::binary_scalar(BinaryFn::Sub, x, bias);
  return {ops::mask_where(std::move(lo), std::move(plus),
                          ops::mask_where(std::move(hi), std::move(minus), std::move(zero)))};
}
V gelu(OpCall& c) {
  const std::string approx = c.node.s("approximate", "none");
  c.check(approx == "none" || approx == "tanh",
          "approximate must be 'none' or 'tanh', got '" + approx + "'");
  return {ops::unary(approx == "tanh" ? UnaryFn::GeluTanh : UnaryFn::Gelu, c.at(0))};
}

V clip(OpCall& c) {
  DynTensor x = c.take(0);
  std::optional<double> lo, hi;
  if (c.opset < 11) {
    if (c.node.has("min")) lo = c.node.f("min", 0);
    if (c.node.has("max")) hi = c.node.f("max", 0);
  } else {
    if (c.has(1)) lo = host_scalar(c.at(1));
    if (c.has(2)) hi = host_scalar(c.at(2));
  }
  if (lo && hi && *lo > *hi) {  // ONNX: every element becomes max
    return {ops::full(x.shape(), *hi, x.dtype(), x.device())};
  }
  return {ops::clamp(std::move(x), lo, hi)};
}

V cast(OpCall& c);
V cast_like(OpCall& c) { return {ops::cast(c.at(0), c.at(1).dtype())}; }

V where(OpCall& c) { return {ops::mask_where(c.at(0), c.at(1), c.at(2))}; }

V identity(OpCall& c) { return {c.at(0)}; }

V dropout(OpCall& c) {
  // Inference: the identity (training_mode, where given, must be false), and a mask of ones.
  DynTensor x = c.at(0);
  if (c.has(2))
    c.check(host_scalar(c.at(2)) == 0,
            "training_mode = true is not supported at import (inference only)");
  V out{x};
  if (c.num_outputs > 1) out.push_back(ops::full(x.shape(), 1, DType::Bool, x.device()));
  return out;
}

V bit_shift(OpCall& c) {
  const std::string dir = c.node.s("direction", "");
  c.check(dir == "LEFT" || dir == "RIGHT", "direction must be LEFT or RIGHT, got '" + dir + "'");
  return {ops::binary(dir == "LEFT" ? BinaryFn::Shl : BinaryFn::Shr, c.at(0), c.at(1))};
}

V sum_logical(OpCall& c) { return variadic<BinaryFn::Add>(c); }

}  // namespace

// The dtype an ONNX TensorProto.DataType number names (proto.cpp owns the table for files;
// this is the operator attribute's view).
std::optional<DType> dtype_of_onnx_code(std::int64_t t) {
  switch (t) {
    case 1:
      return DType::F32;
    case 2:
      return DType::U8;
    case 3:
      return DType::I8;
    case 5:
      return DType::I16;
    case 6:
      return DType::I32;
    case 7:
      return DType::I64;
    case 9:
      return DType::Bool;
    case 10:
      return DType::F16;
    case 11:
      return DType::F64;
    case 16:
      return DType::BF16;
    case 4:  // uint16, widened as tensors of it are when read
      return DType::I32;
    case 12:  // uint32
    case 13:  // uint64
      return DType::I64;
    default:
      return std::nullopt;
  }
}

namespace {
V cast(OpCall& c) {
  const std::int64_t to = c.node.i("to", 0);
  auto dt = dtype_of_onnx_code(to);
  c.check(dt.has_value(), "cast to ONNX element type " + std::to_string(to) +
                              " is not supported (expected float, double, float16, bfloat16, "
                              "int64, int32, int16, int8, uint8 or bool)");
  return {ops::cast(c.at(0), *dt)};
}
}  // namespace

void register_elementwise(OpMap& m) {
  const auto add = [&](const char* name, OpFn fn) { m[name] = {fn, true}; };
#define EMBER_ONNX_ADD_UNARY(op, fn) add(#op, unary<UnaryFn::fn>);
#define EMBER_ONNX_ADD_BINARY(op, fn) add(#op, binary<BinaryFn::fn>);
  EMBER_ONNX_UNARY_OPS(EMBER_ONNX_ADD_UNARY)
  EMBER_ONNX_BINARY_OPS(EMBER_ONNX_ADD_BINARY)
#undef EMBER_ONNX_ADD_UNARY
#undef EMBER_ONNX_ADD_BINARY
  add("Not", not_);
  add("IsInf", isinf);
  add("LeakyRelu", leaky_relu);
  add("Elu", elu);
  add("Selu", selu);
  add("Celu", celu);
  add("ThresholdedRelu", thresholded_relu);
  add("HardSigmoid", hard_sigmoid);
  add("HardSwish", hard_swish);
  add("Softsign", softsign);
  add("PRelu", prelu);
  add("Shrink", shrink);
  add("Gelu", gelu);
  add("Clip", clip);
  add("Div", div);
  add("Pow", pow);
  add("Mod", mod);
  add("BitShift", bit_shift);
  add("Max", variadic<BinaryFn::Max>);
  add("Min", variadic<BinaryFn::Min>);
  add("Sum", sum_logical);
  add("Mean", mean);
  add("Cast", cast);
  add("CastLike", cast_like);
  add("Where", where);
  add("Identity", identity);
  add("Dropout", dropout);
  (void)scalar;
}

}  // namespace ember::onnx
