// Normalisation functions: validation, then one IR op (ir::LayerNorm, ir::BatchNorm,
// ir::RmsNorm, ir::GroupNorm; the last three as composites where the backend lacks their
// op).
#include <cmath>
#include <limits>
#include <string>

#include "ember/tensor/gradients.hpp"
#include "tensor/op_support.hpp"

namespace ember::ops {

namespace {

// The checks every normalisation function makes, with its name in each message.
void check_eps(double eps, const char* op) {
  EMBER_CHECK(std::isfinite(eps) && eps >= 0.0,
              std::string(op) + ": eps must be finite and >= 0, got " + std::to_string(eps));
}
// An optional weight or bias: x's device and dtype, shape `want` (described by `words`).
void check_param(const DynTensor& x, const std::optional<DynTensor>& t, const Shape& want,
                 const char* op, const char* what, const std::string& words) {
  if (!t) return;
  detail::check_same_device(x, *t, op);
  EMBER_CHECK(
      t->dtype() == x.dtype() && t->shape() == want,
      detail::describe(std::string(op) + ": " + what + " must have x's dtype and shape " + words,
                       {&x, &*t}));
}
// normalized_shape is x's trailing dims, at least one; returns how messages name it.
std::string check_normalized_shape(const DynTensor& x, const Shape& normalized_shape,
                                   const char* op) {
  const std::size_t dims = normalized_shape.rank();
  const std::string expect = " (normalized_shape " + normalized_shape.to_string() + ")";
  EMBER_CHECK(
      dims >= 1,
      detail::describe(std::string(op) + ": normalized_shape must have at least one dim", {&x}));
  EMBER_CHECK(
      dims <= x.rank() && std::equal(normalized_shape.dims().begin(), normalized_shape.dims().end(),
                                     x.shape().dims().end() - static_cast<std::ptrdiff_t>(dims)),
      detail::describe(
          std::string(op) + ": the trailing dims of x must equal normalized_shape" + expect, {&x}));
  return "normalized_shape" + expect;
}
// x is [N, C, *] of a float dtype.
void check_channels_first(const DynTensor& x, const char* op) {
  detail::check_kind(x, {Kind::Float}, op);
  EMBER_CHECK(x.rank() >= 2,
              detail::describe(std::string(op) + ": expected x [N, C, *] of rank >= 2", {&x}));
}
// A per-channel weight or bias's shape, as messages name it.
std::string channels_words(std::size_t c) { return "[C] = [" + std::to_string(c) + "]"; }

}  // namespace

DynTensor layer_norm(DynTensor x, const Shape& normalized_shape, std::optional<DynTensor> weight,
                     std::optional<DynTensor> bias, double eps) {
  const char* op = "layer_norm";
  detail::check_kind(x, {Kind::Float}, op);
  const std::size_t dims = normalized_shape.rank();
  const std::string words = check_normalized_shape(x, normalized_shape, op);
  check_eps(eps, op);
  check_param(x, weight, normalized_shape, op, "weight", words);
  check_param(x, bias, normalized_shape, op, "bias", words);
  const Device dev = x.device();
  ir::Handle w = weight ? std::move(*weight).handle() : ir::Handle{};
  ir::Handle b = bias ? std::move(*bias).handle() : ir::Handle{};
  return detail::run(dev,
                     ir::LayerNorm{std::move(x).handle(), std::move(w), std::move(b), dims, eps});
}

DynTensor rms_norm(DynTensor x, const Shape& normalized_shape, std::optional<DynTensor> weight,
                   std::optional<double> eps) {
  const char* op = "rms_norm";
  detail::check_kind(x, {Kind::Float}, op);
  const std::size_t dims = normalized_shape.rank();
  const std::string words = check_normalized_shape(x, normalized_shape, op);
  check_param(x, weight, normalized_shape, op, "weight", words);
  const DType dt = x.dtype();
  // PyTorch's eps=None: torch.finfo(x.dtype).eps.
  const double e = eps                 ? *eps
                   : dt == DType::F64  ? std::numeric_limits<double>::epsilon()
                   : dt == DType::F16  ? 0.0009765625  // 2^-10
                   : dt == DType::BF16 ? 0.0078125     // 2^-7
                                       : double(std::numeric_limits<float>::epsilon());
  check_eps(e, op);
  const Device dev = x.device();
  ir::RmsNorm direct{x.handle(), weight ? weight->handle() : ir::Handle{}, dims, e};
  if (dev.backend().supports(ir::Op(direct))) {
    direct.x = std::move(x).handle();  // the op alone may own x's handle (in-place reuse)
    direct.weight = weight ? std::move(*weight).handle() : ir::Handle{};
    return detail::run(dev, std::move(direct));
  }
  // Elsewhere: mean(x^2) over the rows of [rows, n], through which autodiff differentiates;
  // 16-bit floats in f32 (as the op: their squares' sum would round at the row's scale).
  if (is_half(dt)) {
    if (weight) weight = cast(std::move(*weight), DType::F32);
    return cast(rms_norm(cast(std::move(x), DType::F32), normalized_shape, std::move(weight), e),
                dt);
  }
  using ir::BinaryFn;
  const Shape xs = x.shape();
  const std::size_t n = normalized_shape.num_elements();
  const std::size_t rows = n == 0 ? 0 : xs.num_elements() / n;
  DynTensor xr = reshape(std::move(x), Shape{rows, n});
  DynTensor ms = reduce(ir::ReduceFn::Mean, unary(ir::UnaryFn::Square, xr), 1);
  DynTensor y = binary(BinaryFn::Mul, std::move(xr),
                       unary(ir::UnaryFn::Rsqrt, binary_scalar(BinaryFn::Add, std::move(ms), e)));
  if (weight) y = binary(BinaryFn::Mul, std::move(y), reshape(std::move(*weight), Shape{1, n}));
  return reshape(std::move(y), xs);
}

BatchNormResult batch_norm_training(DynTensor x, std::optional<DynTensor> weight,
                                    std::optional<DynTensor> bias, double eps) {
  const char* op = "batch_norm_training";
  check_channels_first(x, op);
  const std::size_t n = x.shape()[0], c = x.shape()[1];
  const std::size_t l = n * c == 0 ? 0 : x.num_elements() / (n * c);
  EMBER_CHECK(c == 0 || n * l >= 1,
              detail::describe("batch_norm_training: needs at least one value per channel", {&x}));
  check_eps(eps, op);
  check_param(x, weight, Shape{c}, op, "weight", channels_words(c));
  check_param(x, bias, Shape{c}, op, "bias", channels_words(c));
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

// Note [Group norm's own op]: per sample, each group of C / groups channels is normalised
// over its channels and *, which is batch norm's statistics over x seen as [1, N * groups,
// (C / groups) * L] — one channel of that view per (sample, group) — but the affine is per
// channel of x, which the view does not have. ir::GroupNorm (and ir::GroupNormGrad) take
// the groups and the per-channel weight and bias, so each group is read once for its
// statistics and once to write y with the affine applied, and the backward is one pass for
// the sums and one for dx, with dweight and dbias from the same sums (a variant of
// BatchNorm with a group count would give BatchNorm's statistics a second shape and its
// weight a second meaning). Where the backend lacks the op but has ir::BatchNorm (the Cuda
// with EMBER_CUDA_GROUP_NORM=0), the view goes through BatchNorm and the affine follows it
// (instance norm, one channel a group, passes weight and bias repeated per sample into
// BatchNorm itself); elsewhere, layer norm over the groups, then the affine.
DynTensor group_norm(DynTensor x, std::size_t groups, std::optional<DynTensor> weight,
                     std::optional<DynTensor> bias, double eps) {
  const char* op = "group_norm";
  check_channels_first(x, op);
  const std::size_t n = x.shape()[0], c = x.shape()[1];
  EMBER_CHECK(groups > 0 && c % groups == 0,
              detail::describe("group_norm: groups " + std::to_string(groups) +
                                   " must be positive and divide the channels",
                               {&x}));
  check_eps(eps, op);
  check_param(x, weight, Shape{c}, op, "weight", channels_words(c));
  check_param(x, bias, Shape{c}, op, "bias", channels_words(c));
  const Device dev = x.device();
  const Shape xs = x.shape();
  ir::GroupNorm direct{x.handle(), weight ? weight->handle() : ir::Handle{},
                       bias ? bias->handle() : ir::Handle{}, groups, eps};
  if (dev.backend().supports(ir::Op(direct))) {
    direct.x = std::move(x).handle();  // the op alone may own x's handle (in-place reuse)
    return std::move(detail::run_all(dev, std::move(direct))[0]);
  }
  using ir::BinaryFn;
  const std::size_t per_group = n == 0 ? 0 : x.num_elements() / n / groups;
  const std::size_t l = per_group * groups / c;
  const auto per_channel = [&](DynTensor v) { return reshape(std::move(v), Shape{1, c, 1}); };
  std::optional<DynTensor> normalised;  // [1, N * groups, per_group] or [N, groups, per_group]
  if (x.num_elements() > 0) {
    DynTensor xr = reshape(x, Shape{1, n * groups, per_group});
    if (dev.backend().supports(ir::Op(ir::BatchNorm{xr.handle(), {}, {}, eps}))) {
      if (groups == c) {
        const auto per_sample = [&](std::optional<DynTensor>& v) {
          std::optional<DynTensor> out;
          if (v)
            out = reshape(expand(reshape(std::move(*v), Shape{1, c}), Shape{n, c}), Shape{n * c});
          return out;
        };
        DynTensor y =
            batch_norm_training(std::move(xr), per_sample(weight), per_sample(bias), eps).y;
        return reshape(std::move(y), xs);
      }
      normalised = batch_norm_training(std::move(xr), std::nullopt, std::nullopt, eps).y;
    }
  }
  if (!normalised) {
    normalised = layer_norm(reshape(x, Shape{n, groups, per_group}), Shape{per_group}, std::nullopt,
                            std::nullopt, eps);
  }
  DynTensor y = reshape(std::move(*normalised), Shape{n, c, l});
  if (weight) y = binary(BinaryFn::Mul, std::move(y), per_channel(std::move(*weight)));
  if (bias) y = binary(BinaryFn::Add, std::move(y), per_channel(std::move(*bias)));
  return reshape(std::move(y), xs);
}

}  // namespace ember::ops
