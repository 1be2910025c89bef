// Optimizer: the base of every optimizer. step(lr, std::move(module), std::move(grads))
// returns the module with each param that has a gradient updated by the optimizer's rule
// (update_param, one tensor at a time); params without a gradient keep their value, and
// frozen params are skipped. State is kept per nn::ParamId and exported as an
// OptimizerState. docs/optim.md is the reference; the contract is DESIGN §2.2.
//
// Note [In-place step]
// A step must not hold a second copy of the model. A param's buffer is updated in place
// when the step is its only owner, and the module itself holds a reference while a map
// callback runs, so a step is three walks: visit (pair each param with its gradient and
// check them), map "take" (move each param's tensor out of the module, leaving a one-
// element placeholder), then the updates on tensors the step alone owns (each handed
// through an rvalue chain, std::move(p) - lr * g, so the backend reuses its buffer), and
// map "put" (the new tensors back; nn::Param marks them require_grad again). A buffer
// someone else also holds (a copy of the model kept by the caller) is never written: the
// update then allocates, and the other holder keeps the old values.
//
// Note [Optimizer state]
// Each param's state is a step count and named slot tensors ("exp_avg", "momentum_buffer"),
// on the param's inner device, keyed by ParamId. state() exports them as
// OptimizerState{tensors: {"<path>.<slot>", tensor}..., meta: {"optimizer": name,
// "params": {"<path>": {"step": n}}}} in the module's order. load_state() replaces the
// optimizer's state and binds it to params by path — at once when given the module,
// otherwise at the next step — checking every path, shape and dtype: a state saved from
// another model or another optimizer is an ember::Error naming what differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/nn/module.hpp"
#include "ember/optim/gradients_params.hpp"
#include "ember/optim/state.hpp"

namespace ember::optim {

// One param's optimizer state (Note [Optimizer state]).
struct ParamState {
  nn::ParamId id = 0;     // the param's id
  std::string path;       // where the param was last seen
  std::int64_t step = 0;  // updates applied (the update rule counts them)
  std::map<std::string, DynTensor, std::less<>> slots;

  bool has(std::string_view name) const { return slots.find(name) != slots.end(); }
  // The slot `name`; made by `init` the first time. References stay valid while the state
  // lives, so a rule may hold several at once and reassign them (slot = f(std::move(slot))).
  DynTensor& slot(std::string_view name, const std::function<DynTensor()>& init);
  // The slot `name`; it must exist.
  DynTensor& at(std::string_view name);
};

class Optimizer;

namespace detail {
// The non-template part of Optimizer::step (Note [In-place step]).
class StepSession {
 public:
  StepSession(Optimizer& opt, double lr);
  void plan(const nn::TensorEntry& e, GradientsParams& grads);
  void take(nn::TensorEntry& e);
  void run();
  void put(nn::TensorEntry& e);

 private:
  struct Item {
    nn::ParamId id;
    std::string path;
    DynTensor grad;
    std::optional<DynTensor> param;  // taken from the module, then the updated value
  };
  Optimizer& opt_;
  double lr_;
  std::vector<Item> items_;
  std::unordered_map<nn::ParamId, std::size_t> index_;
};
// Throws unless lr is finite and >= 0, naming `who`.
void check_lr(const char* who, double lr);
}  // namespace detail

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // The module with every trainable param that has a gradient in `grads` updated with
  // learning rate `lr` (finite, >= 0). Takes the module by value (std::move it in).
  template <nn::Module M>
  requires(!std::is_lvalue_reference_v<M>) M step(double lr, M&& module, GradientsParams&& grads) {
    detail::StepSession session(*this, lr);
    nn::visit(module, [&](const nn::TensorEntry& e) { session.plan(e, grads); });
    check_loaded_state_bound();
    end_plan();
    M taken = nn::map(std::move(module), [&](nn::TensorEntry& e) { session.take(e); });
    session.run();
    return nn::map(std::move(taken), [&](nn::TensorEntry& e) { session.put(e); });
  }

  // The state as a record (Note [Optimizer state]).
  virtual OptimizerState state() const;
  // Replaces the state; it is bound to params by path at the next step.
  virtual void load_state(const OptimizerState& state);
  // Replaces the state and binds it to `module`'s params now, checking paths and shapes.
  template <nn::Module M>
  void load_state(const OptimizerState& state, const M& module) {
    load_state(state);
    nn::visit(module, [&](const nn::TensorEntry& e) { bind_loaded_state(e); });
    check_loaded_state_bound();
  }

  // "optim::Adam", ... (errors and state records carry it).
  virtual const char* name() const = 0;
  // The update rule for one tensor: the new value of `param` (on its inner device, outside
  // any graph) given its gradient and state. `param` and `grad` are handed over: a rule
  // passes them through rvalue chains so their buffers are reused.
  virtual DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) = 0;

  // The state of param `id`, or null when it has none yet.
  const ParamState* param_state(nn::ParamId id) const;
  std::size_t num_param_states() const { return states_.size(); }

  // Checks a loaded state's slots against the param's shape and dtype; the default wants
  // every slot shaped as the param. Throws an ember::Error naming path and slot.
  virtual void check_slots(const ParamState& s, const Shape& shape, DType dtype) const;

 protected:
  // Hooks of a step's first walk: every trainable param, then the end of the walk (before
  // anything moves, so a throw leaves the module as it was). ParamGroups routes here.
  virtual void plan_param(const nn::TensorEntry& /*e*/) {}
  virtual void end_plan() {}

 private:
  friend class detail::StepSession;
  ParamState& state_for(nn::ParamId id, const std::string& path);
  void bind_loaded_state(const nn::TensorEntry& e);
  void check_loaded_state_bound();

  std::unordered_map<nn::ParamId, ParamState> states_;
  std::vector<nn::ParamId> order_;                         // first-seen order, for state()
  std::map<std::string, ParamState, std::less<>> loaded_;  // by path, not yet bound
};

}  // namespace ember::optim
