// Adan's update rule.
#include "ember/optim/adan.hpp"

#include <cmath>

#include "config_checks.hpp"
#include "tensor_math.hpp"

namespace ember::optim {

Adan AdanConfig::init() const { return Adan(*this); }

Adan::Adan(const AdanConfig& c) : config_(c) {
  const char* who = "optim::AdanConfig";
  detail::check_beta(who, "beta_1", c.beta_1);
  detail::check_beta(who, "beta_2", c.beta_2);
  detail::check_beta(who, "beta_3", c.beta_3);
  detail::check_non_negative(who, "epsilon", c.epsilon);
  detail::check_non_negative(who, "weight_decay", c.weight_decay);
}

DynTensor Adan::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const AdanConfig& c = config_;
  const auto zeros = [&] { return math::zeros_like(p); };
  const double t = double(++st.step);
  DynTensor& prev = st.slot("prev_grad", [&] { return g; });  // no difference at step 1
  DynTensor& m = st.slot("exp_avg", zeros);
  DynTensor& v = st.slot("exp_avg_diff", zeros);
  DynTensor& n = st.slot("exp_avg_sq", zeros);
  DynTensor diff = math::sub(g, std::move(prev));
  m = math::lerp_to(std::move(m), c.beta_1, g);
  v = math::lerp_to(std::move(v), c.beta_2, diff);
  n = math::lerp_to(std::move(n), c.beta_3, math::square(math::axpy(g, c.beta_2, std::move(diff))));
  prev = std::move(g);
  const double bc1 = 1.0 - std::pow(c.beta_1, t), bc2 = 1.0 - std::pow(c.beta_2, t);
  const double bc3_sqrt = std::sqrt(1.0 - std::pow(c.beta_3, t));
  DynTensor denom = math::add_scalar(math::divide(math::sqrt(n), bc3_sqrt), c.epsilon);
  DynTensor u =
      math::div(math::add(math::divide(m, bc1), math::scale(math::divide(v, bc2), c.beta_2)),
                std::move(denom));
  return math::divide(math::sub(std::move(p), math::scale(std::move(u), lr)),
                      1.0 + lr * c.weight_decay);
}

}  // namespace ember::optim
