// Adam's and AdamW's update rules, in torch.optim.Adam's order of operations.
#include "ember/optim/adam.hpp"

#include <cmath>

#include "config_checks.hpp"
#include "tensor_math.hpp"

namespace ember::optim {

namespace {
template <class C>
void check_adam_config(const char* who, const C& c) {
  detail::check_beta(who, "beta_1", c.beta_1);
  detail::check_beta(who, "beta_2", c.beta_2);
  detail::check_non_negative(who, "epsilon", c.epsilon);
  detail::check_non_negative(who, "weight_decay", c.weight_decay);
}
}  // namespace

namespace detail {
DynTensor adam_step(DynTensor p, DynTensor g, ParamState& st, double lr, double beta_1,
                    double beta_2, double epsilon, bool amsgrad) {
  const auto zeros = [&] { return math::zeros_like(p); };
  DynTensor& m = st.slot("exp_avg", zeros);
  DynTensor& v = st.slot("exp_avg_sq", zeros);
  const double t = double(++st.step);
  m = math::lerp_to(std::move(m), beta_1, g);
  v = math::add(math::scale(std::move(v), beta_2),
                math::scale(math::square(std::move(g)), 1.0 - beta_2));
  const double bias_correction_1 = 1.0 - std::pow(beta_1, t);
  const double bias_correction_2_sqrt = std::sqrt(1.0 - std::pow(beta_2, t));
  DynTensor second = v;
  if (amsgrad) {
    DynTensor& vmax = st.slot("max_exp_avg_sq", zeros);
    vmax = math::maximum(std::move(vmax), v);
    second = vmax;
  }
  DynTensor denom = math::add_scalar(
      math::divide(math::sqrt(std::move(second)), bias_correction_2_sqrt), epsilon);
  return math::sub(std::move(p),
                   math::scale(math::div(m, std::move(denom)), lr / bias_correction_1));
}
}  // namespace detail

Adam AdamConfig::init() const { return Adam(*this); }
AdamW AdamWConfig::init() const { return AdamW(*this); }

Adam::Adam(const AdamConfig& c) : config_(c) { check_adam_config("optim::AdamConfig", c); }
AdamW::AdamW(const AdamWConfig& c) : config_(c) { check_adam_config("optim::AdamWConfig", c); }

DynTensor Adam::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const AdamConfig& c = config_;
  if (c.weight_decay != 0.0) g = math::axpy(std::move(g), c.weight_decay, p);
  return detail::adam_step(std::move(p), std::move(g), st, lr, c.beta_1, c.beta_2, c.epsilon,
                           c.amsgrad);
}

DynTensor AdamW::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const AdamWConfig& c = config_;
  if (c.weight_decay != 0.0) p = math::scale(std::move(p), 1.0 - lr * c.weight_decay);
  return detail::adam_step(std::move(p), std::move(g), st, lr, c.beta_1, c.beta_2, c.epsilon,
                           c.amsgrad);
}

}  // namespace ember::optim
