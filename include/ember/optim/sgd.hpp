// Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight
// decay, as torch.optim.SGD (Burn's Sgd).
#pragma once

#include "ember/nn/config.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim {

class Sgd;

struct SgdConfig {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0
  double weight_decay = 0.0;
  EMBER_CONFIG(SgdConfig, momentum, dampening, nesterov, weight_decay)
  Sgd init() const;
};

// g += wd p; buf = momentum buf + (1 - dampening) g (buf = g at the first step);
// g = nesterov ? g + momentum buf : buf; p -= lr g.
class Sgd final : public Optimizer {
 public:
  explicit Sgd(const SgdConfig& config);
  const char* name() const override { return "optim::Sgd"; }
  DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) override;
  const SgdConfig& config() const { return config_; }

 private:
  SgdConfig config_;
};

}  // namespace ember::optim
