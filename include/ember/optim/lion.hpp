// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"): the sign of an
// interpolation of momentum and gradient, with decoupled weight decay. Not in PyTorch.
#pragma once

#include "ember/nn/config.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim {

class Lion;

struct LionConfig {
  double beta_1 = 0.9;
  double beta_2 = 0.99;
  double weight_decay = 0.0;
  EMBER_CONFIG(LionConfig, beta_1, beta_2, weight_decay)
  Lion init() const;
};

// c = β1 m + (1 - β1) g; p = p (1 - lr wd) - lr sign(c); m = β2 m + (1 - β2) g.
class Lion final : public Optimizer {
 public:
  explicit Lion(const LionConfig& config);
  const char* name() const override { return "optim::Lion"; }
  DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) override;
  const LionConfig& config() const { return config_; }

 private:
  LionConfig config_;
};

}  // namespace ember::optim
