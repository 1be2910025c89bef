// Gradient clipping, as torch.nn.utils.clip_grad_value_ and clip_grad_norm_: over every
// gradient of a GradientsParams, updated in place where the gradient is solely owned.
#pragma once

#include <cstdint>
#include <limits>

#include "ember/optim/gradients_params.hpp"

namespace ember::optim {

// Clamps every gradient element to [-clip_value, clip_value] (clip_value >= 0).
void clip_grad_value(GradientsParams& grads, double clip_value);

// Scales all gradients together so that their global norm (the p-norm of the norms of
// every gradient; norm_type may be infinity) is at most max_norm: each is multiplied by
// min(1, max_norm / (norm + 1e-6)). Returns the global norm before clipping.
double clip_grad_norm(GradientsParams& grads, double max_norm, double norm_type = 2.0);

inline constexpr double inf_norm = std::numeric_limits<double>::infinity();

// Clipping of one gradient tensor on its own (Burn's GradientClipping): by value, or by
// that tensor's 2-norm. ParamGroups applies it per group.
struct GradientClipping {
  enum class Kind : std::uint8_t { None, Value, Norm };
  Kind kind = Kind::None;
  double limit = 0.0;
  static GradientClipping none() { return {}; }
  static GradientClipping value(double clip_value);
  static GradientClipping norm(double max_norm);
  DynTensor apply(DynTensor grad) const;
};

}  // namespace ember::optim
