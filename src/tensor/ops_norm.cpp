// Normalisation functions: validation, then one IR op (ir::LayerNorm, ir::BatchNorm; batch
// norm as a composite where the backend lacks its op).
#include <cmath>
#include <string>

#include "ember/tensor/gradients.hpp"
#include "tensor/op_support.hpp"

namespace ember::ops {

DynTensor layer_norm(DynTensor x, const Shape& normalized_shape, std::optional<DynTensor> weight,
                     std::optional<DynTensor> bias, double eps) {
  const char* op = "layer_norm";
  detail::check_kind(x, {Kind::Float}, op);
  const std::size_t dims = normalized_shape.rank();
  const std::string expect = " (normalized_shape " + normalized_shape.to_string() + ")";
  EMBER_CHECK(dims >= 1,
              detail::describe("layer_norm: normalized_shape must have at least one dim", {&x}));
  EMBER_CHECK(
      dims <= x.rank() && std::equal(normalized_shape.dims().begin(), normalized_shape.dims().end(),
                                     x.shape().dims().end() - static_cast<std::ptrdiff_t>(dims)),
      detail::describe("layer_norm: the trailing dims of x must equal normalized_shape" + expect,
                       {&x}));
  EMBER_CHECK(std::isfinite(eps) && eps >= 0.0,
              "layer_norm: eps must be finite and >= 0, got " + std::to_string(eps));
  const auto check_affine = [&](const std::optional<DynTensor>& t, const char* what) {
    if (!t) return;
    detail::check_same_device(x, *t, op);
    EMBER_CHECK(t->dtype() == x.dtype() && t->shape() == normalized_shape,
                detail::describe(std::string("layer_norm: ") + what +
                                     " must have x's dtype and shape normalized_shape" + expect,
                                 {&x, &*t}));
  };
  check_affine(weight, "weight");
  check_affine(bias, "bias");
  const Device dev = x.device();
  ir::Handle w = weight ? std::move(*weight).handle() : ir::Handle{};
  ir::Handle b = bias ? std::move(*bias).handle() : ir::Handle{};
  return detail::run(dev,
                     ir::LayerNorm{std::move(x).handle(), std::move(w), std::move(b), dims, eps});
}

BatchNormResult batch_norm_training(DynTensor x, std::optional<DynTensor> weight,
                                    std::optional<DynTensor> bias, double eps) {
  const char* op = "batch_norm_training";
  detail::check_kind(x, {Kind::Float}, op);
  EMBER_CHECK(x.rank() >= 2,
              detail::describe("batch_norm_training: expected x [N, C, *] of rank >= 2", {&x}));
  const std::size_t n = x.shape()[0], c = x.shape()[1];
  const std::size_t l = n * c == 0 ? 0 : x.num_elements() / (n * c);
  EMBER_CHECK(c == 0 || n * l >= 1,
              detail::describe("batch_norm_training: needs at least one value per channel", {&x}));
  EMBER_CHECK(std::isfinite(eps) && eps >= 0.0,
              "batch_norm_training: eps must be finite and >= 0, got " + std::to_string(eps));
  const auto check_affine = [&](const std::optional<DynTensor>& t, const char* what) {
    if (!t) return;
    detail::check_same_device(x, *t, op);
    EMBER_CHECK(
        t->dtype() == x.dtype() && t->shape() == Shape{c},
        detail::describe(std::string("batch_norm_training: ") + what +
                             " must have x's dtype and shape [C] = [" + std::to_string(c) + "]",
                         {&x, &*t}));
  };
  check_affine(weight, "weight");
  check_affine(bias, "bias");
  const Device dev = x.device();
  const Shape xs = x.shape();
  ir::BatchNorm direct{x.handle(), weight ? weight->handle() : ir::Handle{},
                       bias ? bias->handle() : ir::Handle{}, eps};
  if (dev.backend().supports(ir::Op(direct))) {
    direct.x = std::move(x).handle();  // the op alone may own x's handle (in-place reuse)
    auto outs = detail::run_all(dev, std::move(direct));
    DynTensor stats = detach(std::move(outs[1]));
    const auto row = [&](std::int64_t r) { return reshape(narrow(stats, 0, r, 1), Shape{c}); };
    return {std::move(outs[0]), row(0), row(1)};
  }
  // Elsewhere: the batch statistics as reductions over N and *, through which autodiff
  // differentiates y; 16-bit floats in f32 (their sums would round at the mean's scale).
  using ir::BinaryFn;
  const DType dt = x.dtype();
  if (is_half(dt)) {
    const auto widen = [](std::optional<DynTensor>& t) {
      if (t) t = cast(std::move(*t), DType::F32);
    };
    widen(weight);
    widen(bias);
    auto r = batch_norm_training(cast(std::move(x), DType::F32), std::move(weight), std::move(bias),
                                 eps);
    return {cast(std::move(r.y), dt), cast(std::move(r.mean), dt), cast(std::move(r.var), dt)};
  }
  const DynTensor xr = reshape(std::move(x), Shape{n, c, l});
  const auto channel_mean = [](const DynTensor& t) {
    return reduce(ir::ReduceFn::Mean, reduce(ir::ReduceFn::Mean, t, 2), 0);
  };
  // Each channel is first shifted by one of its own values (a constant to autodiff: y does
  // not depend on the shift), so that the mean is taken of values near zero and does not
  // lose the spread to the offset's rounding (a channel at 1000 with unit spread, in f32).
  DynTensor shifted = xr;
  std::optional<DynTensor> shift;
  if (n * l > 0) {
    shift = detach(narrow(narrow(xr, 0, 0, 1), 2, 0, 1));
    shifted = binary(BinaryFn::Sub, xr, *shift);
  }
  const DynTensor shifted_mean = channel_mean(shifted);
  const DynTensor centered = binary(BinaryFn::Sub, shifted, shifted_mean);
  const DynTensor mean = shift ? binary(BinaryFn::Add, shifted_mean, *shift) : shifted_mean;
  const DynTensor var = channel_mean(unary(ir::UnaryFn::Square, centered));
  DynTensor y = binary(BinaryFn::Mul, centered,
                       unary(ir::UnaryFn::Rsqrt, binary_scalar(BinaryFn::Add, var, eps)));
  const auto per_channel = [&](DynTensor v) { return reshape(std::move(v), Shape{1, c, 1}); };
  if (weight) y = binary(BinaryFn::Mul, std::move(y), per_channel(std::move(*weight)));
  if (bias) y = binary(BinaryFn::Add, std::move(y), per_channel(std::move(*bias)));
  return {reshape(std::move(y), xs), reshape(detach(mean), Shape{c}),
          reshape(detach(var), Shape{c})};
}

}  // namespace ember::ops
