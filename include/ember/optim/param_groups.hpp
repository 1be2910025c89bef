// Parameter groups: different update rules, learning rates and weight decay for different
// params of one model, selected by path (a glob or a regular expression), by a predicate
// or by ids — torch.optim's param_groups. A ParamGroups is itself an Optimizer: its
// groups' optimizers serve as update rules and the state lives in the ParamGroups, so
// state() and load_state() cover every group. The usual "no weight decay on biases and
// norms" is one line: optim::no_decay_on_biases_and_norms(AdamWConfig{}.with_weight_decay(0.1)).
#pragma once

#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ember/optim/clipping.hpp"
#include "ember/optim/lr_scheduler.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim {

// Which params a group takes.
class Select {
 public:
  using Predicate = std::function<bool(std::string_view path, const Shape& shape)>;
  // The whole path matches: '*' any run of characters (dots included), '?' one character.
  static Select glob(std::string pattern);
  // The whole path matches the ECMAScript regular expression.
  static Select regex(const std::string& pattern);
  static Select ids(std::vector<nn::ParamId> ids);
  static Select predicate(Predicate f, std::string description = "a predicate");

  bool matches(std::string_view path, nn::ParamId id, const Shape& shape) const;
  const std::string& description() const { return description_; }

 private:
  Select(Predicate f, std::string description, std::vector<nn::ParamId> ids = {})
      : f_(std::move(f)), description_(std::move(description)), ids_(std::move(ids)) {}
  Predicate f_;
  std::string description_;
  std::vector<nn::ParamId> ids_;
};

// True when `path` matches the glob `pattern` as a whole.
bool glob_match(std::string_view pattern, std::string_view path);

class ParamGroups final : public Optimizer {
 public:
  // Params no group selects take `rest`.
  explicit ParamGroups(std::shared_ptr<Optimizer> rest);
  template <class C>
  requires requires(const C& c) { c.init(); }
  explicit ParamGroups(const C& rest_config) : ParamGroups(rule_of(rest_config)) {}

  // A group: the params `select` takes (the first group that selects a param gets it),
  // updated by `rule` with the step's learning rate times lr_scale, each gradient clipped
  // by `clipping` first.
  ParamGroups& add(Select select, std::shared_ptr<Optimizer> rule, double lr_scale = 1.0,
                   GradientClipping clipping = {});
  template <class C>
  requires requires(const C& c) { c.init(); }
  ParamGroups& add(Select select, const C& config, double lr_scale = 1.0,
                   GradientClipping clipping = {}) {
    return add(std::move(select), rule_of(config), lr_scale, clipping);
  }
  // A group with its own learning-rate schedule (torch's per-group lr with LambdaLR's
  // per-group functions): each step updates it with `schedule`'s current rate, whatever
  // the step's lr, and advances the schedule once. Its position is part of state().
  ParamGroups& add(Select select, std::shared_ptr<Optimizer> rule,
                   std::shared_ptr<LrScheduler> schedule, GradientClipping clipping = {});
  template <class C, class S>
  requires requires(const C& c) {
    c.init();
  } && std::derived_from<S, LrScheduler> ParamGroups& add(Select select, const C& config,
                                                          S schedule,
                                                          GradientClipping clipping = {}) {
    return add(std::move(select), rule_of(config), std::make_shared<S>(std::move(schedule)),
               clipping);
  }
  // The learning rate group g used in the last step (num_groups() for the rest).
  double last_lr(std::size_t g) const;

  // The base state plus each group schedule's position (meta "group_schedules").
  OptimizerState state() const override;
  void load_state(const OptimizerState& state) override;
  using Optimizer::load_state;  // (state, module): binds at once
  std::size_t num_groups() const { return groups_.size(); }
  // The group of param `id` in the last step (num_groups() for the rest), or nothing.
  std::optional<std::size_t> group_of(nn::ParamId id) const;

  const char* name() const override { return "optim::ParamGroups"; }
  DynTensor update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) override;
  void check_slots(const ParamState& s, const Shape& shape, DType dtype) const override;

 protected:
  void plan_param(const nn::TensorEntry& e) override;
  void end_plan() override;

 private:
  template <class C>
  static std::shared_ptr<Optimizer> rule_of(const C& config) {
    using O = decltype(config.init());
    return std::make_shared<O>(config.init());
  }
  struct Group {
    Select select;
    std::shared_ptr<Optimizer> rule;
    double lr_scale;
    GradientClipping clipping;
    std::shared_ptr<LrScheduler> schedule;  // null: the step's lr times lr_scale
    double lr = 0.0;                        // this step's, when scheduled
  };
  std::size_t route(std::string_view path, nn::ParamId id, const Shape& shape) const;

  std::vector<Group> groups_;
  std::shared_ptr<Optimizer> rest_;
  std::unordered_map<nn::ParamId, std::size_t> assigned_;
  std::vector<std::size_t> matched_;  // params per group in the current plan
  std::vector<double> last_lr_;       // per group and the rest, in the last step
};

// `config` for matrices and higher ranks, and the same with weight_decay 0 for biases,
// norm weights and other vectors (rank < 2) — the usual split for AdamW.
template <class C>
ParamGroups no_decay_on_biases_and_norms(const C& config) {
  ParamGroups g(config);
  g.add(Select::predicate([](std::string_view, const Shape& s) { return s.rank() < 2; },
                          "biases and norms (rank < 2)"),
        config.with_weight_decay(0.0));
  return g;
}

}  // namespace ember::optim
