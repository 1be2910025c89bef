// Lion's update rule (the paper's Program 1).
#include "ember/optim/lion.hpp"

#include "config_checks.hpp"
#include "tensor_math.hpp"

namespace ember::optim {

Lion LionConfig::init() const { return Lion(*this); }

Lion::Lion(const LionConfig& c) : config_(c) {
  detail::check_beta("optim::LionConfig", "beta_1", c.beta_1);
  detail::check_beta("optim::LionConfig", "beta_2", c.beta_2);
  detail::check_non_negative("optim::LionConfig", "weight_decay", c.weight_decay);
}

DynTensor Lion::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const LionConfig& c = config_;
  ++st.step;
  DynTensor& m = st.slot("exp_avg", [&] { return math::zeros_like(p); });
  DynTensor direction = math::sign(math::lerp_to(m, c.beta_1, g));
  if (c.weight_decay != 0.0) p = math::scale(std::move(p), 1.0 - lr * c.weight_decay);
  p = math::sub(std::move(p), math::scale(std::move(direction), lr));
  m = math::lerp_to(std::move(m), c.beta_2, std::move(g));
  return p;
}

}  // namespace ember::optim
