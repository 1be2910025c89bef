// Normalisation layers (Note [Batch norm modes] in norm.hpp).
#include "ember/nn/norm.hpp"

#include <limits>

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
// Note [Group norm as batch norm]: per sample, each group of C / groups channels is
// normalised over its channels and the spatial dims, which is batch norm's statistics over
// x seen as [1, N * groups, (C / groups) * L]: one channel of that view per (sample,
// group). Where the backend has ir::BatchNorm (and so ir::BatchNormGrad for the
// backward), group norm is that op — each group read once for its statistics and once to
// write, the backward in closed form — and the affine follows it per channel. With one
// channel a group (instance norm, groups == C) the affine is per channel of the view too,
// so weight and bias, repeated for every sample ([N * C], a small copy), go into the op
// and nothing follows it. Elsewhere: layer norm over the groups, then the affine.
bool batch_norm_runs(const DynTensor& xr, double eps) {
  return xr.device().backend().supports(ir::Op(ir::BatchNorm{xr.handle(), {}, {}, eps}));
}
// x [N, C, *] normalised per sample over groups of C / groups channels and the spatial dims.
DynTensor group_norm(const DynTensor& x, std::size_t num_groups, std::size_t num_channels,
                     const std::optional<Param<Tensor<1>>>& weight,
                     const std::optional<Param<Tensor<1>>>& bias, double eps) {
  const std::size_t n = x.shape()[0],
                    per_group = x.num_elements() / std::max<std::size_t>(n, 1) / num_groups;
  const std::size_t l = per_group * num_groups / num_channels;
  std::optional<DynTensor> normalised;  // [1, N * groups, per_group] or [N, groups, per_group]
  if (x.num_elements() > 0) {
    DynTensor xr = ops::reshape(x, Shape{1, n * num_groups, per_group});
    if (batch_norm_runs(xr, eps)) {
      if (num_groups == num_channels) {
        const auto per_sample = [&](const std::optional<Param<Tensor<1>>>& v) {
          std::optional<DynTensor> out;
          if (v) {
            out = ops::reshape(ops::expand(ops::reshape(v->val().dyn(), Shape{1, num_channels}),
                                           Shape{n, num_channels}),
                               Shape{n * num_channels});
          }
          return out;
        };
        DynTensor y =
            ops::batch_norm_training(std::move(xr), per_sample(weight), per_sample(bias), eps).y;
        return ops::reshape(std::move(y), x.shape());
      }
      normalised = ops::batch_norm_training(std::move(xr), std::nullopt, std::nullopt, eps).y;
    }
  }
  if (!normalised) {
    normalised = ops::layer_norm(ops::reshape(x, Shape{n, num_groups, per_group}), Shape{per_group},
                                 std::nullopt, std::nullopt, eps);
  }
  DynTensor y = ops::reshape(std::move(*normalised), Shape{n, num_channels, l});
  if (weight) y = mul(std::move(y), per_channel(weight->val().dyn()));
  if (bias) y = add(std::move(y), per_channel(bias->val().dyn()));
  return ops::reshape(std::move(y), x.shape());
}
}  // namespace

DynTensor GroupNorm::forward_dyn(const DynTensor& x) const {
  return detail::at_layer(*this, [&]() -> DynTensor {
    check_features(x, num_channels, "nn::GroupNorm", 2, 8);
    return group_norm(x, num_groups, num_channels, weight, bias, eps);
  });
}

DynTensor InstanceNorm::forward_dyn(const DynTensor& x) const {
  return detail::at_layer(*this, [&]() -> DynTensor {
    check_features(x, num_channels, "nn::InstanceNorm", 3, 8);
    return group_norm(x, num_channels, num_channels, weight, bias, eps);
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
    const double e =
        eps ? *eps
            : (x.dtype() == DType::F64    ? std::numeric_limits<double>::epsilon()
               : x.dtype() == DType::F16  ? 0.0009765625
               : x.dtype() == DType::BF16 ? 0.0078125
                                          : double(std::numeric_limits<float>::epsilon()));
    const std::int64_t last = std::int64_t(x.rank()) - 1;
    DynTensor ms = ops::reduce(ir::ReduceFn::Mean, ops::unary(ir::UnaryFn::Square, x), last);
    DynTensor y =
        mul(x, ops::unary(ir::UnaryFn::Rsqrt, ops::binary_scalar(BinaryFn::Add, std::move(ms), e)));
    if (weight) y = mul(std::move(y), weight->val().dyn());
    return y;
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
