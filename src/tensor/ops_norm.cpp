// Normalisation functions: validation, then one IR op (ir::LayerNorm).
#include <cmath>
#include <string>

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

}  // namespace ember::ops
