// Muon (Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural networks"):
// SGD momentum whose update of each matrix is orthogonalised by a quintic Newton-Schulz
// iteration; params of other ranks (biases, norms) take AdamW with the same learning
// rate. Not in PyTorch 1.13.
#pragma once

#include <cstddef>

#include "ember/nn/config.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim {

class Muon;

struct MuonConfig {
  double momentum = 0.95;
  bool nesterov = true;
  std::size_t ns_steps = 5;
  double weight_decay = 0.0;  // decoupled, for matrices and the AdamW params alike
  double adam_beta_1 = 0.9;
  double adam_beta_2 = 0.999;
  double adam_epsilon = 1e-8;
  EMBER_CONFIG(MuonConfig, momentum, nesterov, ns_steps, weight_decay, adam_beta_1, adam_beta_2,
               adam_epsilon)
  Muon init() const;
};

// Matrices: buf = μ buf + g; u = nesterov ? g + μ buf : buf; O = NS5(u / (|u|_F + 1e-7))
// with coefficients (3.4445, -4.7750, 2.0315); p = p (1 - lr wd) - lr sqrt(max(1, rows /
// cols)) O. Other ranks: AdamW.
class Muon final : public Optimizer {
 public:
  explicit Muon(const MuonConfig& config);
  const char* name() const override { return "optim::Muon"; }
  DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) override;
  const MuonConfig& config() const { return config_; }

 private:
  MuonConfig config_;
};

// The orthogonalisation alone: about U V^T of x's SVD, by `steps` quintic Newton-Schulz
// iterations (x: a matrix).
DynTensor newton_schulz(DynTensor x, std::size_t steps);

}  // namespace ember::optim
