// AdaGrad, as torch.optim.Adagrad (Burn's AdaGrad).
#pragma once

#include "ember/nn/config.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim {

class AdaGrad;

struct AdaGradConfig {
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double epsilon = 1e-10;
  EMBER_CONFIG(AdaGradConfig, lr_decay, weight_decay, initial_accumulator_value, epsilon)
  AdaGrad init() const;
};

// g += wd p; sum += g²; p -= lr / (1 + (t - 1) lr_decay) · g / (sqrt(sum) + eps).
class AdaGrad final : public Optimizer {
 public:
  explicit AdaGrad(const AdaGradConfig& config);
  const char* name() const override { return "optim::AdaGrad"; }
  DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) override;
  const AdaGradConfig& config() const { return config_; }

 private:
  AdaGradConfig config_;
};

}  // namespace ember::optim
