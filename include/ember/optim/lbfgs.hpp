// L-BFGS with a strong-Wolfe line search (Nocedal & Wright, Numerical Optimization, 2nd ed.:
// the two-loop recursion, Algorithm 7.4; the line search, Algorithms 3.5 and 3.6, with
// cubic interpolation, eq. 3.59), as torch.optim.LBFGS: step() re-evaluates the model
// through a closure. The iteration runs on the host in f64 over all trainable params
// flattened in module order (L-BFGS serves small, full-batch problems); each evaluation
// writes the params back to their devices.
//
// Note [L-BFGS as torch.optim.LBFGS]: every decision follows torch.optim.LBFGS, so the two
// trajectories agree step for step (tests/optim/test_lbfgs.cpp, against golden values of
// tests/optim/make_golden.py): the curvature pair (s, y) of the last iteration enters the
// history at the start of the next one, also across step() calls (the history, the last
// direction and step length, the previous gradient and H0 = s'y / y'y persist); a pair
// with s'y <= 1e-10 is dropped and H0 kept; the first iteration ever starts at
// t = min(1, 1 / |g|_1) lr, every later one at lr; the line search brackets with
// c1 = 1e-4, c2 = 0.9, at most 25 evaluations, cubic interpolation bounded to
// [t + 0.01 (t - t_prev), 10 t] while bracketing, and in the zoom moves a trial within 10%
// of the bracket's ends away from them when the last trial was also that close; a step
// stops after max_iter iterations, max_eval evaluations, max |g| <= tolerance_grad, or a
// step or a loss change below tolerance_change. Without the line search a step moves by
// lr along the direction and re-evaluates except after the last iteration.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "ember/nn/config.hpp"
#include "ember/optim/gradients_params.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim {

class Lbfgs;

struct LbfgsConfig {
  std::size_t max_iter = 20;       // iterations per step
  std::size_t max_eval = 0;        // closure calls per step; 0: max_iter * 5 / 4
  double tolerance_grad = 1e-7;    // stop when max |g| <= this
  double tolerance_change = 1e-9;  // stop when the step or the loss change is below this
  std::size_t history_size = 100;
  bool strong_wolfe = true;  // false: a fixed step of lr along the direction
  EMBER_CONFIG(LbfgsConfig, max_iter, max_eval, tolerance_grad, tolerance_change, history_size,
               strong_wolfe)
  Lbfgs init() const;
};

namespace detail {
// Loss and gradient at x (the gradient written into g, same size as x).
using Objective = std::function<double(const std::vector<double>& x, std::vector<double>& g)>;
// Flattens the trainable params of a module and writes them back.
struct FlatParams {
  struct Slot {
    nn::ParamId id;
    std::size_t offset, size;
  };
  std::vector<Slot> slots;
  std::vector<double> values;
  void gather(const nn::TensorEntry& e);
  void scatter(nn::TensorEntry& e, const std::vector<double>& x) const;
  void grads(const GradientsParams& gp, std::vector<double>& g) const;
};
}  // namespace detail

class Lbfgs {
 public:
  explicit Lbfgs(const LbfgsConfig& config);

  // Runs up to max_iter L-BFGS iterations from `module`; closure(m) returns the loss at m
  // and its gradients (GradientsParams::from_grads(loss.backward(), m)). Returns the
  // module at the last accepted point.
  template <nn::Module M>
  requires(!std::is_lvalue_reference_v<M>) M
      step(double lr, M&& module,
           const std::function<std::pair<double, GradientsParams>(const M&)>& closure) {
    detail::check_lr("optim::Lbfgs", lr);
    detail::FlatParams flat;
    nn::visit(module, [&](const nn::TensorEntry& e) { flat.gather(e); });
    check_state_fits(flat.values.size());  // before the module moves
    M m = std::move(module);
    auto objective = [&](const std::vector<double>& x, std::vector<double>& g) {
      m = nn::map(std::move(m), [&](nn::TensorEntry& e) { flat.scatter(e, x); });
      auto [loss, gp] = closure(m);
      flat.grads(gp, g);
      return loss;
    };
    std::vector<double> x = flat.values;
    minimize(lr, x, objective);
    return nn::map(std::move(m), [&](nn::TensorEntry& e) { flat.scatter(e, x); });
  }

  // The loss at the start of the last step, and closure calls and iterations so far.
  double last_loss() const { return last_loss_; }
  std::size_t evaluations() const { return evals_; }
  std::size_t iterations() const { return iters_; }

  // The state as a record: tensors "direction", "prev_grad", "history.<i>.s" and
  // "history.<i>.y" (f64, on the Cpu), meta {"optimizer": "optim::Lbfgs", "t", "h_diag",
  // "prev_loss", "iterations", "evaluations", "num_params"}. Loading it into a fresh Lbfgs
  // continues exactly; a state from a model with another number of params is refused at
  // the next step.
  OptimizerState state() const;
  void load_state(const OptimizerState& state);
  const char* name() const { return "optim::Lbfgs"; }

 private:
  void check_state_fits(std::size_t num_values) const;
  void minimize(double lr, std::vector<double>& x, const detail::Objective& f);

  LbfgsConfig config_;
  std::vector<std::vector<double>> s_, y_;  // the curvature pairs, oldest first
  std::vector<double> ro_;                  // 1 / y's for each pair
  std::vector<double> d_, g_prev_;          // the last direction, the gradient before it
  double t_ = 0.0, h_diag_ = 1.0, prev_loss_ = 0.0, last_loss_ = 0.0;
  std::size_t evals_ = 0, iters_ = 0;
};

}  // namespace ember::optim
