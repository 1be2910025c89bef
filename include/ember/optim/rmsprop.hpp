// RMSProp (centered, with momentum), as torch.optim.RMSprop (Burn's RmsProp).
#pragma once

#include "ember/nn/config.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim {

class RmsProp;

struct RmsPropConfig {
  double alpha = 0.99;  // the smoothing constant
  double epsilon = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
  EMBER_CONFIG(RmsPropConfig, alpha, epsilon, weight_decay, momentum, centered)
  RmsProp init() const;
};

// g += wd p; v = α v + (1 - α) g²; centered: ḡ = α ḡ + (1 - α) g, d = sqrt(v - ḡ²) + eps,
// else d = sqrt(v) + eps; momentum: buf = μ buf + g / d, p -= lr buf; else p -= lr g / d.
class RmsProp final : public Optimizer {
 public:
  explicit RmsProp(const RmsPropConfig& config);
  const char* name() const override { return "optim::RmsProp"; }
  DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) override;
  const RmsPropConfig& config() const { return config_; }

 private:
  RmsPropConfig config_;
};

}  // namespace ember::optim
