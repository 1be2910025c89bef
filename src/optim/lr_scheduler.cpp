// The learning-rate schedulers: each one's closed form, checked against
// torch.optim.lr_scheduler by tests/optim/test_lr_scheduler.cpp.
#include "ember/optim/lr_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "config_checks.hpp"

namespace ember::optim {

double LrScheduler::step() {
  const double lr = lr_at(step_);
  ++step_;
  return lr;
}

SchedulerState LrScheduler::state() const {
  SchedulerState s;
  s.meta["scheduler"] = name();
  s.meta["step"] = step_;
  return s;
}

void LrScheduler::load_state(const SchedulerState& s) {
  const std::string who = std::string(name()) + "::load_state: ";
  EMBER_CHECK(s.meta.is_object() && s.meta.contains("scheduler") && s.meta["scheduler"].is_string(),
              who + "the state has no \"scheduler\" name in its meta");
  const std::string saved = s.meta["scheduler"].get<std::string>();
  EMBER_CHECK(saved == name(), who + "the state is from " + saved + ", not " + name());
  EMBER_CHECK(s.meta.contains("step") && s.meta["step"].is_number_unsigned(),
              who + "the state has no non-negative integer \"step\"");
  step_ = s.meta["step"].get<std::size_t>();
}

namespace {
void check_lr_value(const char* who, const char* field, double v) {
  detail::check_non_negative(who, field, v);
}
void check_count(const char* who, const char* field, std::size_t v) {
  EMBER_CHECK(v > 0, std::string(who) + "::init: " + field + " must be > 0, got 0");
}
double cosine(double from, double to, double pct) {
  return to + (from - to) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
}
}  // namespace

// ---- ConstantLr ----
ConstantLr ConstantLrConfig::init() const { return ConstantLr(*this); }
ConstantLr::ConstantLr(const ConstantLrConfig& c) : c_(c) {
  check_lr_value("optim::ConstantLrConfig", "lr", c.lr);
  check_lr_value("optim::ConstantLrConfig", "factor", c.factor);
}
const char* ConstantLr::name() const { return "optim::ConstantLr"; }
double ConstantLr::lr_at(std::size_t k) const {
  return k < c_.total_iters ? c_.lr * c_.factor : c_.lr;
}

// ---- LinearLr ----
LinearLr LinearLrConfig::init() const { return LinearLr(*this); }
LinearLr::LinearLr(const LinearLrConfig& c) : c_(c) {
  check_lr_value("optim::LinearLrConfig", "initial_lr", c.initial_lr);
  check_lr_value("optim::LinearLrConfig", "final_lr", c.final_lr);
  check_count("optim::LinearLrConfig", "num_iters", c.num_iters);
}
const char* LinearLr::name() const { return "optim::LinearLr"; }
double LinearLr::lr_at(std::size_t k) const {
  if (k >= c_.num_iters) return c_.final_lr;
  return c_.initial_lr + (c_.final_lr - c_.initial_lr) * double(k) / double(c_.num_iters);
}

// ---- StepLr ----
StepLr StepLrConfig::init() const { return StepLr(*this); }
StepLr::StepLr(const StepLrConfig& c) : c_(c) {
  check_lr_value("optim::StepLrConfig", "initial_lr", c.initial_lr);
  check_count("optim::StepLrConfig", "step_size", c.step_size);
  check_lr_value("optim::StepLrConfig", "gamma", c.gamma);
}
const char* StepLr::name() const { return "optim::StepLr"; }
double StepLr::lr_at(std::size_t k) const {
  return c_.initial_lr * std::pow(c_.gamma, double(k / c_.step_size));
}

// ---- MultiStepLr ----
MultiStepLr MultiStepLrConfig::init() const { return MultiStepLr(*this); }
MultiStepLr::MultiStepLr(const MultiStepLrConfig& c) : c_(c) {
  check_lr_value("optim::MultiStepLrConfig", "initial_lr", c.initial_lr);
  check_lr_value("optim::MultiStepLrConfig", "gamma", c.gamma);
  EMBER_CHECK(std::is_sorted(c.milestones.begin(), c.milestones.end()),
              "optim::MultiStepLrConfig::init: the milestones must be in increasing order");
}
const char* MultiStepLr::name() const { return "optim::MultiStepLr"; }
double MultiStepLr::lr_at(std::size_t k) const {
  const auto passed =
      std::upper_bound(c_.milestones.begin(), c_.milestones.end(), k) - c_.milestones.begin();
  return c_.initial_lr * std::pow(c_.gamma, double(passed));
}

// ---- ExponentialLr ----
ExponentialLr ExponentialLrConfig::init() const { return ExponentialLr(*this); }
ExponentialLr::ExponentialLr(const ExponentialLrConfig& c) : c_(c) {
  check_lr_value("optim::ExponentialLrConfig", "initial_lr", c.initial_lr);
  check_lr_value("optim::ExponentialLrConfig", "gamma", c.gamma);
}
const char* ExponentialLr::name() const { return "optim::ExponentialLr"; }
double ExponentialLr::lr_at(std::size_t k) const {
  return c_.initial_lr * std::pow(c_.gamma, double(k));
}

// ---- CosineAnnealingLr ----
CosineAnnealingLr CosineAnnealingLrConfig::init() const { return CosineAnnealingLr(*this); }
CosineAnnealingLr::CosineAnnealingLr(const CosineAnnealingLrConfig& c) : c_(c) {
  check_lr_value("optim::CosineAnnealingLrConfig", "initial_lr", c.initial_lr);
  check_lr_value("optim::CosineAnnealingLrConfig", "min_lr", c.min_lr);
  check_count("optim::CosineAnnealingLrConfig", "num_iters", c.num_iters);
}
const char* CosineAnnealingLr::name() const { return "optim::CosineAnnealingLr"; }
double CosineAnnealingLr::lr_at(std::size_t k) const {
  // Past num_iters the cosine continues (back up), as PyTorch's.
  return cosine(c_.initial_lr, c_.min_lr, double(k) / double(c_.num_iters));
}

// ---- CosineAnnealingWarmRestarts ----
CosineAnnealingWarmRestarts CosineAnnealingWarmRestartsConfig::init() const {
  return CosineAnnealingWarmRestarts(*this);
}
CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(const CosineAnnealingWarmRestartsConfig& c)
    : c_(c) {
  check_lr_value("optim::CosineAnnealingWarmRestartsConfig", "initial_lr", c.initial_lr);
  check_lr_value("optim::CosineAnnealingWarmRestartsConfig", "min_lr", c.min_lr);
  check_count("optim::CosineAnnealingWarmRestartsConfig", "t_0", c.t_0);
  check_count("optim::CosineAnnealingWarmRestartsConfig", "t_mult", c.t_mult);
}
const char* CosineAnnealingWarmRestarts::name() const {
  return "optim::CosineAnnealingWarmRestarts";
}
double CosineAnnealingWarmRestarts::lr_at(std::size_t k) const {
  std::size_t period = c_.t_0, cur = k;
  if (c_.t_mult == 1) {
    cur = k % period;
  } else {
    while (cur >= period) {
      cur -= period;
      period *= c_.t_mult;
    }
  }
  return cosine(c_.initial_lr, c_.min_lr, double(cur) / double(period));
}

// ---- OneCycleLr ----
OneCycleLr OneCycleLrConfig::init() const { return OneCycleLr(*this); }
OneCycleLr::OneCycleLr(const OneCycleLrConfig& c) : c_(c) {
  const char* who = "optim::OneCycleLrConfig";
  check_lr_value(who, "max_lr", c.max_lr);
  check_count(who, "total_steps", c.total_steps);
  EMBER_CHECK(
      c.pct_start > 0.0 && c.pct_start < 1.0,
      std::string(who) + "::init: pct_start must be in (0, 1), got " + detail::num(c.pct_start));
  detail::check_positive(who, "div_factor", c.div_factor);
  detail::check_positive(who, "final_div_factor", c.final_div_factor);
}
const char* OneCycleLr::name() const { return "optim::OneCycleLr"; }
double OneCycleLr::lr_at(std::size_t k) const {
  EMBER_CHECK(k <= c_.total_steps, "optim::OneCycleLr: step " + std::to_string(k) +
                                       " is past total_steps (" + std::to_string(c_.total_steps) +
                                       ")");
  const double initial = c_.max_lr / c_.div_factor;
  const double min_lr = initial / c_.final_div_factor;
  const double n = double(c_.total_steps);
  struct Phase {
    double end, from, to;
  };
  std::vector<Phase> phases;
  if (c_.three_phase) {
    phases = {{c_.pct_start * n - 1.0, initial, c_.max_lr},
              {2.0 * c_.pct_start * n - 2.0, c_.max_lr, initial},
              {n - 1.0, initial, min_lr}};
  } else {
    phases = {{c_.pct_start * n - 1.0, initial, c_.max_lr}, {n - 1.0, c_.max_lr, min_lr}};
  }
  double start = 0.0;
  const double t = double(k);
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const Phase& p = phases[i];
    if (t <= p.end || i + 1 == phases.size()) {
      const double pct = (t - start) / (p.end - start);
      return c_.anneal_strategy == AnnealStrategy::Cos ? cosine(p.from, p.to, pct)
                                                       : (p.to - p.from) * pct + p.from;
    }
    start = p.end;
  }
  return min_lr;  // unreachable: the last phase always answers
}

// ---- NoamLr ----
NoamLr NoamLrConfig::init() const { return NoamLr(*this); }
NoamLr::NoamLr(const NoamLrConfig& c) : c_(c) {
  check_lr_value("optim::NoamLrConfig", "init_lr", c.init_lr);
  check_count("optim::NoamLrConfig", "warmup_steps", c.warmup_steps);
  check_count("optim::NoamLrConfig", "model_size", c.model_size);
}
const char* NoamLr::name() const { return "optim::NoamLr"; }
double NoamLr::lr_at(std::size_t k) const {
  const double t = double(k + 1);
  return c_.init_lr * std::pow(double(c_.model_size), -0.5) *
         std::min(std::pow(t, -0.5), t * std::pow(double(c_.warmup_steps), -1.5));
}

// ---- SequentialLr ----
SequentialLr::SequentialLr(std::vector<std::shared_ptr<const LrScheduler>> schedulers,
                           std::vector<std::size_t> milestones)
    : schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  EMBER_CHECK(!schedulers_.empty() && milestones_.size() + 1 == schedulers_.size(),
              "optim::SequentialLr: " + std::to_string(schedulers_.size()) + " schedulers need " +
                  std::to_string(schedulers_.empty() ? 0 : schedulers_.size() - 1) +
                  " milestones, got " + std::to_string(milestones_.size()));
  EMBER_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
              "optim::SequentialLr: the milestones must be in increasing order");
}
double SequentialLr::lr_at(std::size_t k) const {
  const std::size_t i = std::size_t(std::upper_bound(milestones_.begin(), milestones_.end(), k) -
                                    milestones_.begin());
  return schedulers_[i]->lr_at(i == 0 ? k : k - milestones_[i - 1]);
}

}  // namespace ember::optim
