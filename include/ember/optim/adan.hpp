// Adan (Xie et al. 2022, "Adan: Adaptive Nesterov Momentum Algorithm for Faster Optimizing
// Deep Models", Algorithm 1) with the bias corrections of the authors' release. Betas weigh
// the old value (m = β1 m + (1 - β1) g), so the paper's β_i is 1 - beta_i here. Not in
// PyTorch.
#pragma once

#include "ember/nn/config.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim {

class Adan;

struct AdanConfig {
  double beta_1 = 0.98;
  double beta_2 = 0.92;
  double beta_3 = 0.99;
  double epsilon = 1e-8;
  double weight_decay = 0.0;
  EMBER_CONFIG(AdanConfig, beta_1, beta_2, beta_3, epsilon, weight_decay)
  Adan init() const;
};

// d = g - g_prev (0 at the first step); m = β1 m + (1-β1) g; v = β2 v + (1-β2) d;
// n = β3 n + (1-β3) (g + β2 d)²; u = (m / bc1 + β2 v / bc2) / (sqrt(n / bc3) + eps);
// p = (p - lr u) / (1 + lr wd) (the paper's proximal weight decay).
class Adan final : public Optimizer {
 public:
  explicit Adan(const AdanConfig& config);
  const char* name() const override { return "optim::Adan"; }
  DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) override;
  const AdanConfig& config() const { return config_; }

 private:
  AdanConfig config_;
};

}  // namespace ember::optim
