// Learning-rate schedulers, as torch.optim.lr_scheduler (and Burn's lr_scheduler): each
// gives the learning rate of step k in closed form; step() returns the current step's rate
// and advances, so `opt.step(sched.step(), ...)` follows PyTorch's
// `optimizer.step(); scheduler.step()` sequence. docs/optim.md lists each with its
// PyTorch equivalent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ember/nn/config.hpp"
#include "ember/optim/state.hpp"

namespace ember::optim {

class LrScheduler {
 public:
  virtual ~LrScheduler() = default;
  // The learning rate of the current step, then advances to the next step.
  double step();
  // The learning rate of the current step (not advancing).
  double lr() const { return lr_at(step_); }
  // Steps taken so far.
  std::size_t steps() const { return step_; }
  // The learning rate of step k (0 is the first).
  virtual double lr_at(std::size_t k) const = 0;
  virtual const char* name() const = 0;

  // meta: {"scheduler": name, "step": steps()}; no tensors.
  SchedulerState state() const;
  void load_state(const SchedulerState& state);

 private:
  std::size_t step_ = 0;
};

#define EMBER_LR_SCHEDULER_(Type)                     \
  class Type final : public LrScheduler {             \
   public:                                            \
    explicit Type(const Type##Config& config);        \
    double lr_at(std::size_t k) const override;       \
    const char* name() const override;                \
    const Type##Config& config() const { return c_; } \
                                                      \
   private:                                           \
    Type##Config c_;                                  \
  };

class ConstantLr;
class LinearLr;
class StepLr;
class MultiStepLr;
class ExponentialLr;
class CosineAnnealingLr;
class CosineAnnealingWarmRestarts;
class OneCycleLr;
class NoamLr;

// lr · factor for the first total_iters steps, then lr (torch ConstantLR; the defaults
// give a constant lr).
struct ConstantLrConfig {
  double lr;
  double factor = 1.0;
  std::size_t total_iters = 0;
  EMBER_CONFIG(ConstantLrConfig, lr, factor, total_iters)
  ConstantLr init() const;
};
// From initial_lr to final_lr linearly over num_iters steps, then final_lr (torch LinearLR
// with start_factor = initial / base, end_factor = final / base).
struct LinearLrConfig {
  double initial_lr;
  double final_lr;
  std::size_t num_iters;
  EMBER_CONFIG(LinearLrConfig, initial_lr, final_lr, num_iters)
  LinearLr init() const;
};
// initial_lr · gamma^(k / step_size) (torch StepLR).
struct StepLrConfig {
  double initial_lr;
  std::size_t step_size;
  double gamma = 0.1;
  EMBER_CONFIG(StepLrConfig, initial_lr, step_size, gamma)
  StepLr init() const;
};
// initial_lr · gamma^(milestones passed) (torch MultiStepLR).
struct MultiStepLrConfig {
  double initial_lr;
  std::vector<std::size_t> milestones;
  double gamma = 0.1;
  EMBER_CONFIG(MultiStepLrConfig, initial_lr, milestones, gamma)
  MultiStepLr init() const;
};
// initial_lr · gamma^k (torch ExponentialLR).
struct ExponentialLrConfig {
  double initial_lr;
  double gamma;
  EMBER_CONFIG(ExponentialLrConfig, initial_lr, gamma)
  ExponentialLr init() const;
};
// min_lr + (initial_lr - min_lr) (1 + cos(π k / num_iters)) / 2 (torch CosineAnnealingLR,
// T_max = num_iters, eta_min = min_lr).
struct CosineAnnealingLrConfig {
  double initial_lr;
  std::size_t num_iters;
  double min_lr = 0.0;
  EMBER_CONFIG(CosineAnnealingLrConfig, initial_lr, num_iters, min_lr)
  CosineAnnealingLr init() const;
};
// Cosine annealing restarted after t_0 steps, each period t_mult times the last (torch
// CosineAnnealingWarmRestarts).
struct CosineAnnealingWarmRestartsConfig {
  double initial_lr;
  std::size_t t_0;
  std::size_t t_mult = 1;
  double min_lr = 0.0;
  EMBER_CONFIG(CosineAnnealingWarmRestartsConfig, initial_lr, t_0, t_mult, min_lr)
  CosineAnnealingWarmRestarts init() const;
};
enum class AnnealStrategy : std::uint8_t { Cos, Linear };
// The one-cycle policy (torch OneCycleLR, learning rate only): from max_lr / div_factor up
// to max_lr over pct_start of total_steps, then down to max_lr / div_factor /
// final_div_factor (three_phase: back to the start first, then down).
struct OneCycleLrConfig {
  double max_lr;
  std::size_t total_steps;
  double pct_start = 0.3;
  AnnealStrategy anneal_strategy = AnnealStrategy::Cos;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
  EMBER_CONFIG(OneCycleLrConfig, max_lr, total_steps, pct_start, anneal_strategy, div_factor,
               final_div_factor, three_phase)
  OneCycleLr init() const;
};
// The Transformer's schedule (Burn's Noam): init_lr · model_size^-½ · min(t^-½, t ·
// warmup_steps^-1.5) with t = k + 1.
struct NoamLrConfig {
  double init_lr;
  std::size_t warmup_steps = 4000;
  std::size_t model_size = 512;
  EMBER_CONFIG(NoamLrConfig, init_lr, warmup_steps, model_size)
  NoamLr init() const;
};

EMBER_LR_SCHEDULER_(ConstantLr)
EMBER_LR_SCHEDULER_(LinearLr)
EMBER_LR_SCHEDULER_(StepLr)
EMBER_LR_SCHEDULER_(MultiStepLr)
EMBER_LR_SCHEDULER_(ExponentialLr)
EMBER_LR_SCHEDULER_(CosineAnnealingLr)
EMBER_LR_SCHEDULER_(CosineAnnealingWarmRestarts)
EMBER_LR_SCHEDULER_(OneCycleLr)
EMBER_LR_SCHEDULER_(NoamLr)
#undef EMBER_LR_SCHEDULER_

// Schedulers one after another (torch SequentialLR): scheduler i runs from milestone i - 1
// (0 for the first) and starts at its own step 0 there. Linear warm-up then any other:
// SequentialLr::of({warmup}, LinearLrConfig{...}.init(), CosineAnnealingLrConfig{...}.init()).
class SequentialLr final : public LrScheduler {
 public:
  template <class... S>
  static SequentialLr of(std::vector<std::size_t> milestones, S... schedulers) {
    return SequentialLr({std::make_shared<const S>(std::move(schedulers))...},
                        std::move(milestones));
  }
  SequentialLr(std::vector<std::shared_ptr<const LrScheduler>> schedulers,
               std::vector<std::size_t> milestones);
  double lr_at(std::size_t k) const override;
  const char* name() const override { return "optim::SequentialLr"; }

 private:
  std::vector<std::shared_ptr<const LrScheduler>> schedulers_;
  std::vector<std::size_t> milestones_;
};

}  // namespace ember::optim
