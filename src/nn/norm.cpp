// Normalisation layers (Note [Batch norm modes] in norm.hpp).
#include "ember/nn/norm.hpp"

#include "ember/backend/backend.hpp"
#include "ember/tensor/module_ops.hpp"

namespace ember::nn {

namespace {
using ir::BinaryFn;

DynTensor mul(DynTensor a, const DynTensor& b) {
  return ops::binary(BinaryFn::Mul, std::move(a), b);
}
DynTensor add(DynTensor a, const DynTensor& b) {
  return ops::binary(BinaryFn::Add, std::move(a), b);
}

// A [C] tensor shaped [1, C, 1] to broadcast over [N, C, L].
DynTensor per_channel(const DynTensor& v) { return ops::reshape(v, Shape{1, v.shape()[0], 1}); }
std::optional<Param<Tensor<1>>> filled_param(bool make, std::size_t n, double v, const Device& d) {
  if (!make) return std::nullopt;
  return Param<Tensor<1>>(Tensor<1>::full(Shape{n}, v, d));
}
void check_features(const DynTensor& x, std::size_t c, const char* layer, std::size_t min_rank,
                    std::size_t max_rank) {
  EMBER_CHECK(x.rank() >= min_rank && x.rank() <= max_rank && x.shape()[1] == c,
              std::string(layer) + ": expected an input [N, " + std::to_string(c) +
                  ", *] of rank " + std::to_string(min_rank) + " to " + std::to_string(max_rank) +
                  ", got shape " + x.shape().to_string());
  EMBER_CHECK(x.kind() == Kind::Float,
              std::string(layer) + ": expected a float input, got " + name(x.dtype()));
}
// x [N, C, *] as [N, C, L].
DynTensor as_ncl(const DynTensor& x) {
  const std::size_t n = x.shape()[0], c = x.shape()[1];
  return ops::reshape(x, Shape{n, c, n * c == 0 ? 0 : x.num_elements() / (n * c)});
}
}  // namespace

// ---- BatchNorm ----

DynTensor BatchNorm::forward_dyn(const DynTensor& x) const {
  return detail::at_layer(*this, [&]() -> DynTensor {
    const std::size_t c = num_features();
    check_features(x, c, "nn::BatchNorm", 2, 5);
    const bool training = x.device().is_autodiff();
    if (training) {
      const std::size_t count = x.num_elements() / c;
      EMBER_CHECK(count > 1,
                  "nn::BatchNorm: training needs more than one value per channel, got "
                  "input " +
                      x.shape().to_string());
      std::optional<DynTensor> w, b;
      if (weight) w = weight->val().dyn();
      if (bias) b = bias->val().dyn();
      auto [y, mean, var] = ops::batch_norm_training(x, std::move(w), std::move(b), eps);
      // The running statistics, outside the graph (mean and var are detached), with the
      // unbiased variance.
      const DynTensor v =
          ops::binary_scalar(BinaryFn::Mul, std::move(var), double(count) / double(count - 1));
      const auto blend = [&](const Buffer<Tensor<1>>& buf, const DynTensor& batch) {
        DynTensor old = ops::cast(buf.val().dyn(), batch.dtype());
        DynTensor next = add(ops::binary_scalar(BinaryFn::Mul, std::move(old), 1.0 - momentum),
                             ops::binary_scalar(BinaryFn::Mul, batch, momentum));
        buf.set(Tensor<1>(ops::cast(std::move(next), buf.val().dtype())));
      };
      blend(running_mean, mean);
      blend(running_var, v);
      num_batches_tracked.set(num_batches_tracked.val().add_scalar(1.0));
      return y;
    }
    // Inference: the statistics and the affine fold into one scale and shift per channel
    // (computed on [C]), so x is read once by the multiply and once by the add, as
    // PyTorch's CPU kernel folds them.
    const DynTensor mean = ops::cast(running_mean.val().dyn(), x.dtype());
    const DynTensor var = ops::cast(running_var.val().dyn(), x.dtype());
    DynTensor scale = ops::unary(ir::UnaryFn::Rsqrt, ops::binary_scalar(BinaryFn::Add, var, eps));
    if (weight) scale = mul(std::move(scale), weight->val().dyn());
    DynTensor shift = ops::unary(ir::UnaryFn::Neg, mul(mean, scale));
    if (bias) shift = add(std::move(shift), bias->val().dyn());
    DynTensor y = add(mul(as_ncl(x), per_channel(scale)), per_channel(shift));
    return ops::reshape(std::move(y), x.shape());
  });
}

BatchNorm BatchNormConfig::init(const Device& device) const {
  EMBER_CHECK(num_features > 0, "nn::BatchNormConfig: num_features must be > 0");
  EMBER_CHECK(eps >= 0 && momentum >= 0 && momentum <= 1,
              "nn::BatchNormConfig: needs eps >= 0 and 0 <= momentum <= 1, got eps " +
                  std::to_string(eps) + ", momentum " + std::to_string(momentum));
  const Shape s{num_features};
  return BatchNorm{filled_param(affine, num_features, 1.0, device),
                   filled_param(affine, num_features, 0.0, device),
                   Buffer<Tensor<1>>(Tensor<1>::zeros(s, device)),
                   Buffer<Tensor<1>>(Tensor<1>::ones(s, device)),
                   Buffer<Tensor<1, Int>>(Tensor<1, Int>::zeros(Shape{1}, device), true),
                   eps,
                   momentum};
}

// ---- LayerNorm ----

DynTensor LayerNorm::forward_dyn(const DynTensor& x) const {
  return detail::at_layer(*this, [&]() -> DynTensor {
    EMBER_CHECK(x.rank() >= 1 && x.shape()[x.rank() - 1] == d_model,
                "nn::LayerNorm: input of shape " + x.shape().to_string() +
                    " must end in d_model = " + std::to_string(d_model));
    std::optional<DynTensor> w, b;
    if (weight) w = weight->val().dyn();
    if (bias) b = bias->val().dyn();
    return ops::layer_norm(x, Shape{d_model}, std::move(w), std::move(b), eps);
  });
}

LayerNorm LayerNormConfig::init(const Device& device) const {
  EMBER_CHECK(d_model > 0 && eps >= 0, "nn::LayerNormConfig: needs d_model > 0 and eps >= 0");
  return LayerNorm{filled_param(elementwise_affine, d_model, 1.0, device),
                   filled_param(elementwise_affine && bias, d_model, 0.0, device), d_model, eps};
}

// ---- GroupNorm and InstanceNorm ----

namespace {
// x [N, C, *] normalised per sample over groups of C / groups channels and the spatial dims
// (ops::group_norm: Note [Group norm's own op] in src/tensor/ops_norm.cpp).
DynTensor group_norm(const DynTensor& x, std::size_t num_groups,
                     const std::optional<Param<Tensor<1>>>& weight,
                     const std::optional<Param<Tensor<1>>>& bias, double eps) {
  std::optional<DynTensor> w, b;
  if (weight) w = weight->val().dyn();
  if (bias) b = bias->val().dyn();
  return ops::group_norm(x, num_groups, std::move(w), std::move(b), eps);
}
}  // namespace

DynTensor GroupNorm::forward_dyn(const DynTensor& x) const {
  return detail::at_layer(*this, [&]() -> DynTensor {
    check_features(x, num_channels, "nn::GroupNorm", 2, 8);
    return group_norm(x, num_groups, weight, bias, eps);
  });
}

DynTensor InstanceNorm::forward_dyn(const DynTensor& x) const {
  return detail::at_layer(*this, [&]() -> DynTensor {
    check_features(x, num_channels, "nn::InstanceNorm", 3, 8);
    return group_norm(x, num_channels, weight, bias, eps);
  });
}

InstanceNorm InstanceNormConfig::init(const Device& device) const {
  EMBER_CHECK(num_channels > 0 && eps >= 0,
              "nn::InstanceNormConfig: needs num_channels > 0, eps >= 0");
  return InstanceNorm{filled_param(affine, num_channels, 1.0, device),
                      filled_param(affine, num_channels, 0.0, device), num_channels, eps};
}

GroupNorm GroupNormConfig::init(const Device& device) const {
  EMBER_CHECK(num_groups > 0 && num_channels > 0 && num_channels % num_groups == 0,
              "nn::GroupNormConfig: num_groups " + std::to_string(num_groups) +
                  " must divide num_channels " + std::to_string(num_channels));
  return GroupNorm{filled_param(affine, num_channels, 1.0, device),
                   filled_param(affine, num_channels, 0.0, device), num_groups, num_channels, eps};
}

// ---- RmsNorm ----

DynTensor RmsNorm::forward_dyn(const DynTensor& x) const {
  return detail::at_layer(*this, [&]() -> DynTensor {
    EMBER_CHECK(x.rank() >= 1 && x.shape()[x.rank() - 1] == d_model && x.kind() == Kind::Float,
                "nn::RmsNorm: expected a float input ending in d_model = " +
                    std::to_string(d_model) + ", got shape " + x.shape().to_string());
    std::optional<DynTensor> w;
    if (weight) w = weight->val().dyn();
    return ops::rms_norm(x, Shape{d_model}, std::move(w), eps);
  });
}

RmsNorm RmsNormConfig::init(const Device& device) const {
  EMBER_CHECK(d_model > 0, "nn::RmsNormConfig: d_model must be > 0");
  return RmsNorm{filled_param(elementwise_affine, d_model, 1.0, device), d_model, eps};
}

DynTensor LocalResponseNorm::forward_dyn(const DynTensor& x) const {
  return detail::at_layer(*this, [&]() -> DynTensor {
    EMBER_CHECK(
        x.rank() >= 3 && x.kind() == Kind::Float,
        "nn::LocalResponseNorm: expected a float [N, C, *] input, got " + x.shape().to_string());
    EMBER_CHECK(size > 0, "nn::LocalResponseNorm: size must be positive");
    const std::size_t n = x.shape()[0], c = x.shape()[1], rest = x.num_elements() / (n * c);
    // The windowed mean of x^2 over channels: x^2 as [N, 1, C, rest], zero-padded on C, pooled.
    DynTensor sq = ops::reshape(ops::unary(ir::UnaryFn::Square, x), Shape{n, 1, c, rest});
    sq = ops::pad(std::move(sq), {{size / 2, (size - 1) / 2}, {0, 0}});
    DynTensor mean = module_ops::avg_pool(std::move(sq), {size, 1}, {{1, 1}, {0, 0}, {1, 1}});
    DynTensor div = ops::binary_scalar(
        ir::BinaryFn::Pow,
        ops::binary_scalar(ir::BinaryFn::Add,
                           ops::binary_scalar(ir::BinaryFn::Mul, std::move(mean), alpha), k),
        beta);
    return ops::binary(ir::BinaryFn::Div, x, ops::reshape(std::move(div), x.shape()));
  });
}

LocalResponseNorm LocalResponseNormConfig::init() const {
  EMBER_CHECK(size > 0, "nn::LocalResponseNormConfig: size must be positive");
  return LocalResponseNorm{size, alpha, beta, k};
}

}  // namespace ember::nn
