// The non-template parts of Optimizer: the step walks (Note [In-place step]) and the state
// record (Note [Optimizer state]).
#include "ember/optim/optimizer.hpp"

#include <cmath>
#include <sstream>

#include "config_checks.hpp"
#include "ember/tensor/ops.hpp"
#include "tensor_math.hpp"

namespace ember::optim {

DynTensor& ParamState::slot(std::string_view name, const std::function<DynTensor()>& init) {
  auto it = slots.find(name);
  if (it == slots.end()) it = slots.emplace(std::string(name), init()).first;
  return it->second;
}

DynTensor& ParamState::at(std::string_view name) {
  auto it = slots.find(name);
  EMBER_ASSERT(it != slots.end());
  return it->second;
}

const DynTensor* OptimizerState::find(std::string_view key) const {
  for (const auto& [k, t] : tensors)
    if (k == key) return &t;
  return nullptr;
}

namespace math {
double sum_value(DynTensor a) {
  DynTensor s = ops::reduce_all(ir::ReduceFn::Sum, ops::cast(std::move(a), DType::F64));
  return s.to_data().to_vector<double>()[0];
}
}  // namespace math

namespace detail {

void check_lr(const char* who, double lr) {
  EMBER_CHECK(
      std::isfinite(lr) && lr >= 0.0,
      std::string(who) + "::step: the learning rate must be finite and >= 0, got " + num(lr));
}

StepSession::StepSession(Optimizer& opt, double lr) : opt_(opt), lr_(lr) {
  check_lr(opt.name(), lr);
}

void StepSession::plan(const nn::TensorEntry& e, GradientsParams& grads) {
  if (!e.is_param()) return;
  opt_.bind_loaded_state(e);
  if (!e.trainable || index_.count(e.id)) return;  // frozen, or a tied param seen before
  opt_.plan_param(e);
  auto g = grads.remove(e.id);
  if (!g) return;
  const std::string who = std::string(opt_.name()) + "::step: ";
  EMBER_CHECK(g->shape() == e.shape(), who + "the gradient of '" + std::string(e.path) +
                                           "' has shape " + g->shape().to_string() +
                                           ", the parameter " + e.shape().to_string());
  EMBER_CHECK(g->dtype() == e.dtype(), who + "the gradient of '" + std::string(e.path) +
                                           "' has dtype " + name(g->dtype()) + ", the parameter " +
                                           name(e.dtype()));
  const Device& dev = e.tensor.device();
  const Device inner = dev.is_autodiff() ? dev.inner() : dev;
  DynTensor grad = g->device() == inner ? std::move(*g) : ops::to_device(std::move(*g), inner);
  index_.emplace(e.id, items_.size());
  items_.push_back(Item{e.id, std::string(e.path), std::move(grad), std::nullopt});
}

void StepSession::take(nn::TensorEntry& e) {
  if (!e.is_param()) return;
  auto it = index_.find(e.id);
  if (it == index_.end()) return;
  Item& item = items_[it->second];
  if (item.param) return;  // a tied param: its first occurrence was taken
  // The one-element placeholder keeps the module valid while the step owns the tensor.
  std::vector<std::size_t> ones(e.tensor.rank(), 1);
  DynTensor placeholder = ops::zeros(Shape(ones), e.dtype(), e.tensor.device());
  item.param = std::exchange(e.tensor, std::move(placeholder));
}

void StepSession::run() {
  for (Item& item : items_) {
    if (!item.param) continue;
    const Device dev = item.param->device();
    DynTensor param = std::move(*item.param);
    item.param.reset();
    if (dev.is_autodiff()) {
      // Drop the autodiff handle so the inner buffer has a single owner.
      DynTensor wrapped = std::move(param);
      param = ops::inner(wrapped);
      { DynTensor drop = std::move(wrapped); }
    }
    ParamState& st = opt_.state_for(item.id, item.path);
    DynTensor updated = opt_.update_param(std::move(param), std::move(item.grad), st, lr_);
    item.param = dev.is_autodiff() ? ops::from_inner(updated, dev) : std::move(updated);
  }
}

void StepSession::put(nn::TensorEntry& e) {
  if (!e.is_param()) return;
  auto it = index_.find(e.id);
  if (it == index_.end()) return;
  Item& item = items_[it->second];
  EMBER_ASSERT(item.param.has_value());
  e.tensor = *item.param;
}

}  // namespace detail

ParamState& Optimizer::state_for(nn::ParamId id, const std::string& path) {
  auto it = states_.find(id);
  if (it == states_.end()) {
    it = states_.emplace(id, ParamState{}).first;
    order_.push_back(id);
  }
  it->second.id = id;
  it->second.path = path;
  return it->second;
}

const ParamState* Optimizer::param_state(nn::ParamId id) const {
  auto it = states_.find(id);
  return it == states_.end() ? nullptr : &it->second;
}

OptimizerState Optimizer::state() const {
  OptimizerState s;
  s.meta["optimizer"] = name();
  nn::Json params = nn::Json::object();
  for (nn::ParamId id : order_) {
    const ParamState& p = states_.at(id);
    params[p.path] = {{"step", p.step}};
    for (const auto& [slot, t] : p.slots) s.tensors.emplace_back(p.path + "." + slot, t);
  }
  // A loaded state not bound yet is still this optimizer's state.
  for (const auto& [path, p] : loaded_) {
    params[path] = {{"step", p.step}};
    for (const auto& [slot, t] : p.slots) s.tensors.emplace_back(path + "." + slot, t);
  }
  s.meta["params"] = std::move(params);
  return s;
}

void Optimizer::load_state(const OptimizerState& s) {
  const std::string who = std::string(name()) + "::load_state: ";
  EMBER_CHECK(s.meta.is_object() && s.meta.contains("optimizer") && s.meta["optimizer"].is_string(),
              who + "the state has no \"optimizer\" name in its meta");
  const std::string saved = s.meta["optimizer"].get<std::string>();
  EMBER_CHECK(saved == name(), who + "the state is from " + saved + ", not " + name());
  EMBER_CHECK(s.meta.contains("params") && s.meta["params"].is_object(),
              who + "the state has no \"params\" object in its meta");
  std::map<std::string, ParamState, std::less<>> loaded;
  for (const auto& [path, p] : s.meta["params"].items()) {
    EMBER_CHECK(p.is_object() && p.contains("step") && p["step"].is_number_integer(),
                who + "param '" + path + "' has no integer \"step\"");
    ParamState st;
    st.path = path;
    st.step = p["step"].get<std::int64_t>();
    loaded.emplace(path, std::move(st));
  }
  for (const auto& [key, t] : s.tensors) {
    // The longest param path that prefixes the key ("a.b.exp_avg" -> "a.b", "exp_avg").
    ParamState* owner = nullptr;
    std::size_t best = 0;
    for (auto& [path, st] : loaded) {
      if (key.size() > path.size() + 1 && key.compare(0, path.size(), path) == 0 &&
          key[path.size()] == '.' && path.size() >= best) {
        owner = &st;
        best = path.size();
      }
    }
    EMBER_CHECK(owner != nullptr,
                who + "tensor '" + key + "' belongs to no param listed in the state's meta");
    owner->slots.emplace(key.substr(best + 1), t);
  }
  states_.clear();
  order_.clear();
  loaded_ = std::move(loaded);
}

void Optimizer::check_slots(const ParamState& s, const Shape& shape, DType dtype) const {
  for (const auto& [slot, t] : s.slots) {
    EMBER_CHECK(t.shape() == shape, std::string(name()) + ": the loaded state '" + s.path + "." +
                                        slot + "' has shape " + t.shape().to_string() +
                                        ", but the parameter has shape " + shape.to_string() +
                                        " (a state from another model?)");
    EMBER_CHECK(t.dtype() == dtype, std::string(name()) + ": the loaded state '" + s.path + "." +
                                        slot + "' has dtype " + ember::name(t.dtype()) +
                                        ", the parameter " + ember::name(dtype));
  }
}

void Optimizer::bind_loaded_state(const nn::TensorEntry& e) {
  if (!e.is_param() || loaded_.empty()) return;
  auto it = loaded_.find(e.path);
  if (it == loaded_.end()) return;
  ParamState st = std::move(it->second);
  loaded_.erase(it);
  st.id = e.id;
  check_slots(st, e.shape(), e.dtype());
  const Device& dev = e.tensor.device();
  const Device inner = dev.is_autodiff() ? dev.inner() : dev;
  for (auto& [slot, t] : st.slots)
    if (!(t.device() == inner)) t = ops::to_device(std::move(t), inner);
  if (!states_.count(e.id)) order_.push_back(e.id);
  st.id = e.id;
  states_[e.id] = std::move(st);
}

void Optimizer::check_loaded_state_bound() {
  if (loaded_.empty()) return;
  std::string paths;
  for (const auto& [path, st] : loaded_) paths += (paths.empty() ? "'" : ", '") + path + "'";
  fail(std::string(name()) + ": the loaded state has params the model does not have: " + paths +
       " (a state from another model?)");
}

}  // namespace ember::optim
