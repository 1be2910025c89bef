// Adafactor (Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with Sublinear
// Memory Cost"): a factored second moment for tensors of rank >= 2 (row and column means
// over the last two dims, Algorithm 4), a full one for vectors (Algorithm 5), update
// clipping (Section 6) and the step scaled by the param's RMS (Section 8), with an
// external learning rate in place of the paper's ρ_t. No first moment. Not in PyTorch 1.13.
#pragma once

#include "ember/nn/config.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim {

class Adafactor;

struct AdafactorConfig {
  double epsilon_1 = 1e-30;     // added to g²
  double epsilon_2 = 1e-3;      // the least param RMS the step scales by
  double clip_threshold = 1.0;  // d: the update's RMS is clipped to it
  double decay_rate = -0.8;     // β2_t = 1 - t^decay_rate
  double weight_decay = 0.0;    // decoupled: p -= wd α p
  bool scale_parameter = true;  // α = lr · max(ε2, RMS(p)); false: α = lr
  EMBER_CONFIG(AdafactorConfig, epsilon_1, epsilon_2, clip_threshold, decay_rate, weight_decay,
               scale_parameter)
  Adafactor init() const;
};

class Adafactor final : public Optimizer {
 public:
  explicit Adafactor(const AdafactorConfig& config);
  const char* name() const override { return "optim::Adafactor"; }
  DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) override;
  const AdafactorConfig& config() const { return config_; }

 protected:
  // The factored slots are shaped [..., rows, 1] and [..., 1, cols].
  void check_slots(const ParamState& s, const Shape& shape, DType dtype) const override;

 private:
  AdafactorConfig config_;
};

}  // namespace ember::optim
