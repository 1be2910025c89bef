// Parameter groups: selectors and the routing of each param to its group's rule.
#include "ember/optim/param_groups.hpp"

#include <algorithm>
#include <cmath>
#include <regex>
#include <string>

namespace ember::optim {

bool glob_match(std::string_view pattern, std::string_view path) {
  // Iterative matching with one backtrack point for the last '*'.
  std::size_t p = 0, s = 0, star = std::string_view::npos, mark = 0;
  while (s < path.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == path[s])) {
      ++p;
      ++s;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = s;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      s = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

Select Select::glob(std::string pattern) {
  std::string d = "glob \"" + pattern + "\"";
  return Select([pattern = std::move(pattern)](std::string_view path,
                                               const Shape&) { return glob_match(pattern, path); },
                std::move(d));
}

Select Select::regex(const std::string& pattern) {
  std::shared_ptr<const std::regex> re;
  try {
    re = std::make_shared<const std::regex>(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    fail("optim::Select::regex: \"" + pattern +
         "\" is not a valid regular expression: " + e.what());
  }
  return Select([re](std::string_view path,
                     const Shape&) { return std::regex_match(path.begin(), path.end(), *re); },
                "regex \"" + pattern + "\"");
}

Select Select::ids(std::vector<nn::ParamId> ids) {
  std::string d = "ids {";
  for (std::size_t i = 0; i < ids.size(); ++i) d += (i ? ", " : "") + std::to_string(ids[i]);
  d += "}";
  return Select(nullptr, std::move(d), std::move(ids));
}

Select Select::predicate(Predicate f, std::string description) {
  EMBER_CHECK(f != nullptr, "optim::Select::predicate: the predicate is empty");
  return Select(std::move(f), std::move(description));
}

bool Select::matches(std::string_view path, nn::ParamId id, const Shape& shape) const {
  if (!f_) return std::find(ids_.begin(), ids_.end(), id) != ids_.end();
  return f_(path, shape);
}

ParamGroups::ParamGroups(std::shared_ptr<Optimizer> rest) : rest_(std::move(rest)) {
  EMBER_CHECK(rest_ != nullptr, "optim::ParamGroups: the optimizer of the other params is null");
}

ParamGroups& ParamGroups::add(Select select, std::shared_ptr<Optimizer> rule, double lr_scale,
                              GradientClipping clipping) {
  EMBER_CHECK(rule != nullptr, "optim::ParamGroups::add: the group's optimizer is null");
  EMBER_CHECK(
      std::isfinite(lr_scale) && lr_scale >= 0.0,
      "optim::ParamGroups::add: lr_scale must be finite and >= 0, got " + std::to_string(lr_scale));
  groups_.push_back(Group{std::move(select), std::move(rule), lr_scale, clipping, nullptr, 0.0});
  return *this;
}

ParamGroups& ParamGroups::add(Select select, std::shared_ptr<Optimizer> rule,
                              std::shared_ptr<LrScheduler> schedule, GradientClipping clipping) {
  EMBER_CHECK(rule != nullptr, "optim::ParamGroups::add: the group's optimizer is null");
  EMBER_CHECK(schedule != nullptr, "optim::ParamGroups::add: the group's schedule is null");
  groups_.push_back(
      Group{std::move(select), std::move(rule), 1.0, clipping, std::move(schedule), 0.0});
  return *this;
}

double ParamGroups::last_lr(std::size_t g) const {
  EMBER_CHECK(g < last_lr_.size(), "optim::ParamGroups::last_lr: group " + std::to_string(g) +
                                       " has taken no step (" + std::to_string(groups_.size()) +
                                       " groups and the rest)");
  return last_lr_[g];
}

std::size_t ParamGroups::route(std::string_view path, nn::ParamId id, const Shape& shape) const {
  for (std::size_t i = 0; i < groups_.size(); ++i)
    if (groups_[i].select.matches(path, id, shape)) return i;
  return groups_.size();
}

std::optional<std::size_t> ParamGroups::group_of(nn::ParamId id) const {
  auto it = assigned_.find(id);
  if (it == assigned_.end()) return std::nullopt;
  return it->second;
}

void ParamGroups::plan_param(const nn::TensorEntry& e) {
  if (matched_.size() != groups_.size()) matched_.assign(groups_.size(), 0);
  const std::size_t g = route(e.path, e.id, e.shape());
  assigned_[e.id] = g;
  if (g < groups_.size()) ++matched_[g];
}

void ParamGroups::end_plan() {
  std::vector<std::size_t> matched = std::move(matched_);
  matched_.clear();
  matched.resize(groups_.size(), 0);
  for (std::size_t i = 0; i < groups_.size(); ++i)
    EMBER_CHECK(matched[i] > 0, "optim::ParamGroups: group " + std::to_string(i) + " (" +
                                    groups_[i].select.description() +
                                    ") selects no trainable parameter of the model");
  // The step goes ahead: each scheduled group takes its rate and its schedule advances.
  for (Group& g : groups_)
    if (g.schedule) g.lr = g.schedule->step();
}

DynTensor ParamGroups::update_param(DynTensor param, DynTensor grad, ParamState& state, double lr) {
  auto it = assigned_.find(state.id);
  const std::size_t g =
      it != assigned_.end() ? it->second : route(state.path, state.id, param.shape());
  last_lr_.resize(groups_.size() + 1, 0.0);
  if (g == groups_.size()) {
    last_lr_[g] = lr;
    return rest_->update_param(std::move(param), std::move(grad), state, lr);
  }
  const Group& group = groups_[g];
  const double group_lr = group.schedule ? group.lr : lr * group.lr_scale;
  last_lr_[g] = group_lr;
  return group.rule->update_param(std::move(param), group.clipping.apply(std::move(grad)), state,
                                  group_lr);
}

OptimizerState ParamGroups::state() const {
  OptimizerState s = Optimizer::state();
  nn::Json schedules = nn::Json::array();
  for (std::size_t i = 0; i < groups_.size(); ++i)
    if (groups_[i].schedule)
      schedules.push_back({{"group", i}, {"schedule", groups_[i].schedule->state().meta}});
  s.meta["group_schedules"] = std::move(schedules);
  return s;
}

void ParamGroups::load_state(const OptimizerState& s) {
  const std::string who = "optim::ParamGroups::load_state: ";
  std::size_t scheduled = 0;
  for (const Group& g : groups_) scheduled += g.schedule != nullptr;
  const nn::Json none = nn::Json::array();
  const nn::Json& saved =
      s.meta.is_object() && s.meta.contains("group_schedules") ? s.meta["group_schedules"] : none;
  EMBER_CHECK(saved.is_array() && saved.size() == scheduled,
              who + "the state has " + std::to_string(saved.is_array() ? saved.size() : 0) +
                  " group schedules, these groups have " + std::to_string(scheduled));
  for (const auto& e : saved) {
    EMBER_CHECK(e.is_object() && e.contains("group") && e["group"].is_number_unsigned() &&
                    e.contains("schedule"),
                who + "a group schedule entry without \"group\" and \"schedule\"");
    const auto g = e["group"].get<std::size_t>();
    EMBER_CHECK(
        g < groups_.size() && groups_[g].schedule,
        who + "the state has a schedule for group " + std::to_string(g) + ", which has none here");
  }
  Optimizer::load_state(s);  // checks the optimizer's part before any schedule moves
  for (const auto& e : saved) {
    SchedulerState st;
    st.meta = e["schedule"];
    groups_[e["group"].get<std::size_t>()].schedule->load_state(st);
  }
}

void ParamGroups::check_slots(const ParamState& s, const Shape& shape, DType dtype) const {
  const std::size_t g = route(s.path, s.id, shape);
  (g == groups_.size() ? *rest_ : *groups_[g].rule).check_slots(s, shape, dtype);
}

}  // namespace ember::optim
