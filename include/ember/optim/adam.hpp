// Adam and AdamW (with AMSGrad), as torch.optim.Adam and torch.optim.AdamW: Adam's weight
// decay is L2 (added to the gradient), AdamW's is decoupled (param *= 1 - lr wd).
#pragma once

#include <cstdint>
#include <vector>

#include "ember/nn/config.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim {

class Adam;
class AdamW;

struct AdamConfig {
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-8;  // PyTorch's default (Burn's is 1e-5)
  double weight_decay = 0.0;
  bool amsgrad = false;
  EMBER_CONFIG(AdamConfig, beta_1, beta_2, epsilon, weight_decay, amsgrad)
  Adam init() const;
};

struct AdamWConfig {
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0.01;  // PyTorch's default
  bool amsgrad = false;
  EMBER_CONFIG(AdamWConfig, beta_1, beta_2, epsilon, weight_decay, amsgrad)
  AdamW init() const;
};

namespace detail {
// The one-element tensors a step's fused programs read (betas, epsilon, the step size), made
// once per value, dtype, rank and device and shared by the programs of every param (Note
// [Shared step scalars] in src/optim/adam.cpp).
class StepScalars {
 public:
  // v as a tensor of `rank` extents 1 of dtype on device.
  DynTensor get(double v, DType dtype, std::size_t rank, const Device& device);

 private:
  struct Entry {
    std::uint64_t bits;
    DType dtype;
    std::size_t rank;
    Device device;
    DynTensor tensor;
  };
  std::vector<Entry> entries_;
};

// Adam's weight decay (L2: g += wd p) or AdamW's (decoupled: p *= 1 - lr wd).
enum class AdamDecay { L2, Decoupled };
// The Adam moment update and step shared by Adam, AdamW and Muon's non-matrix params, in
// one fused pass (Note [Fused Adam step] in src/optim/adam.cpp): the decay, then
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g²; (amsgrad: vmax = max(vmax, v));
// p -= lr / (1 - b1^t) · m / (sqrt(v) / sqrt(1 - b2^t) + eps). Slots exp_avg, exp_avg_sq,
// max_exp_avg_sq.
DynTensor adam_step(DynTensor param, DynTensor grad, ParamState& state, double lr, double beta_1,
                    double beta_2, double epsilon, bool amsgrad, AdamDecay decay,
                    double weight_decay, StepScalars* scalars = nullptr);
}  // namespace detail

class Adam final : public Optimizer {
 public:
  explicit Adam(const AdamConfig& config);
  const char* name() const override { return "optim::Adam"; }
  DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) override;
  const AdamConfig& config() const { return config_; }

 private:
  AdamConfig config_;
  detail::StepScalars scalars_;
};

class AdamW final : public Optimizer {
 public:
  explicit AdamW(const AdamWConfig& config);
  const char* name() const override { return "optim::AdamW"; }
  DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) override;
  const AdamWConfig& config() const { return config_; }

 private:
  AdamWConfig config_;
  detail::StepScalars scalars_;
};

}  // namespace ember::optim
