// AdaGrad's update rule, in torch.optim.Adagrad's order of operations.
#include "ember/optim/adagrad.hpp"

#include "config_checks.hpp"
#include "tensor_math.hpp"

namespace ember::optim {

AdaGrad AdaGradConfig::init() const { return AdaGrad(*this); }

AdaGrad::AdaGrad(const AdaGradConfig& c) : config_(c) {
  const char* who = "optim::AdaGradConfig";
  detail::check_non_negative(who, "lr_decay", c.lr_decay);
  detail::check_non_negative(who, "weight_decay", c.weight_decay);
  detail::check_non_negative(who, "initial_accumulator_value", c.initial_accumulator_value);
  detail::check_non_negative(who, "epsilon", c.epsilon);
}

DynTensor AdaGrad::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const AdaGradConfig& c = config_;
  const double t = double(++st.step);
  if (c.weight_decay != 0.0) g = math::axpy(std::move(g), c.weight_decay, p);
  const double clr = lr / (1.0 + (t - 1.0) * c.lr_decay);
  DynTensor& sum = st.slot("sum", [&] {
    return ops::full(p.shape(), c.initial_accumulator_value, p.dtype(), p.device());
  });
  sum = math::add(std::move(sum), math::square(g));
  DynTensor std_ = math::add_scalar(math::sqrt(sum), c.epsilon);
  return math::sub(std::move(p), math::scale(math::div(std::move(g), std::move(std_)), clr));
}

}  // namespace ember::optim
