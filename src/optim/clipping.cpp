// Gradient clipping by value and by global norm, as torch.nn.utils.
#include "ember/optim/clipping.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tensor_math.hpp"

namespace ember::optim {

void clip_grad_value(GradientsParams& grads, double clip_value) {
  EMBER_CHECK(std::isfinite(clip_value) && clip_value >= 0.0,
              "optim::clip_grad_value: the clip value must be finite and >= 0, got " +
                  std::to_string(clip_value));
  grads.transform(
      [&](nn::ParamId, DynTensor g) { return ops::clamp(std::move(g), -clip_value, clip_value); });
}

double clip_grad_norm(GradientsParams& grads, double max_norm, double norm_type) {
  EMBER_CHECK(
      std::isfinite(max_norm) && max_norm >= 0.0,
      "optim::clip_grad_norm: max_norm must be finite and >= 0, got " + std::to_string(max_norm));
  EMBER_CHECK(norm_type > 0.0 && !std::isnan(norm_type),
              "optim::clip_grad_norm: norm_type must be > 0 (or infinity), got " +
                  std::to_string(norm_type));
  if (grads.empty()) return 0.0;
  // Accumulated in f64 on each gradient's device, in order, and read once per device: a
  // read per gradient would wait for the device once per parameter.
  const bool inf = std::isinf(norm_type);
  std::vector<std::pair<Device, DynTensor>> partial;  // per device
  grads.for_each([&](nn::ParamId, const DynTensor& g) {
    DynTensor x = ops::cast(g, DType::F64);
    DynTensor part =
        inf ? ops::reduce_all(ir::ReduceFn::Max, ops::unary(ir::UnaryFn::Abs, std::move(x)))
        : norm_type == 2.0
            ? ops::reduce_all(ir::ReduceFn::Sum, math::square(std::move(x)))
            : ops::reduce_all(ir::ReduceFn::Sum,
                              ops::unary(ir::UnaryFn::PowScalar,
                                         ops::unary(ir::UnaryFn::Abs, std::move(x)), norm_type));
    const auto at = std::find_if(partial.begin(), partial.end(),
                                 [&](const auto& p) { return p.first == g.device(); });
    if (at == partial.end())
      partial.emplace_back(g.device(), std::move(part));
    else
      at->second = inf ? math::maximum(std::move(at->second), std::move(part))
                       : math::add(std::move(at->second), std::move(part));
  });
  double total = 0.0;
  for (std::size_t i = 0; i < partial.size(); ++i) {
    const double v = partial[i].second.to_data().to_vector<double>()[0];
    total = i == 0 ? v : inf ? (std::isnan(v) || v > total ? v : total) : total + v;
  }
  const double norm = std::isinf(norm_type) ? total
                      : norm_type == 2.0    ? std::sqrt(total)
                                            : std::pow(total, 1.0 / norm_type);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0)
    grads.transform([&](nn::ParamId, DynTensor g) { return math::scale(std::move(g), coef); });
  return norm;
}

GradientClipping GradientClipping::value(double clip_value) {
  EMBER_CHECK(std::isfinite(clip_value) && clip_value >= 0.0,
              "optim::GradientClipping::value: the clip value must be finite and >= 0, got " +
                  std::to_string(clip_value));
  return {Kind::Value, clip_value};
}

GradientClipping GradientClipping::norm(double max_norm) {
  EMBER_CHECK(std::isfinite(max_norm) && max_norm >= 0.0,
              "optim::GradientClipping::norm: max_norm must be finite and >= 0, got " +
                  std::to_string(max_norm));
  return {Kind::Norm, max_norm};
}

DynTensor GradientClipping::apply(DynTensor g) const {
  switch (kind) {
    case Kind::None:
      return g;
    case Kind::Value:
      return ops::clamp(std::move(g), -limit, limit);
    case Kind::Norm: {
      const double norm = std::sqrt(math::sum_value(math::square(g)));
      const double coef = limit / (norm + 1e-6);
      return coef < 1.0 ? math::scale(std::move(g), coef) : g;
    }
  }
  return g;
}

}  // namespace ember::optim
