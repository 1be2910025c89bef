// RMSProp's update rule, in torch.optim.RMSprop's order of operations.
#include "ember/optim/rmsprop.hpp"

#include "config_checks.hpp"
#include "tensor_math.hpp"

namespace ember::optim {

RmsProp RmsPropConfig::init() const { return RmsProp(*this); }

RmsProp::RmsProp(const RmsPropConfig& c) : config_(c) {
  const char* who = "optim::RmsPropConfig";
  detail::check_beta(who, "alpha", c.alpha);
  detail::check_non_negative(who, "epsilon", c.epsilon);
  detail::check_non_negative(who, "weight_decay", c.weight_decay);
  detail::check_non_negative(who, "momentum", c.momentum);
}

DynTensor RmsProp::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const RmsPropConfig& c = config_;
  const auto zeros = [&] { return math::zeros_like(p); };
  ++st.step;
  if (c.weight_decay != 0.0) g = math::axpy(std::move(g), c.weight_decay, p);
  DynTensor& v = st.slot("square_avg", zeros);
  v = math::add(math::scale(std::move(v), c.alpha), math::scale(math::square(g), 1.0 - c.alpha));
  DynTensor avg = v;
  if (c.centered) {
    DynTensor& mean = st.slot("grad_avg", zeros);
    mean = math::lerp_to(std::move(mean), c.alpha, g);
    avg = math::sqrt(math::sub(std::move(avg), math::square(mean)));
  } else {
    avg = math::sqrt(std::move(avg));
  }
  avg = math::add_scalar(std::move(avg), c.epsilon);
  if (c.momentum > 0.0) {
    DynTensor& buf = st.slot("momentum_buffer", zeros);
    buf =
        math::add(math::scale(std::move(buf), c.momentum), math::div(std::move(g), std::move(avg)));
    return math::sub(std::move(p), math::scale(buf, lr));
  }
  return math::sub(std::move(p), math::scale(math::div(std::move(g), std::move(avg)), lr));
}

}  // namespace ember::optim
