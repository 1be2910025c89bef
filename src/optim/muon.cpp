// Muon's update rule and the Newton-Schulz orthogonalisation.
#include "ember/optim/muon.hpp"

#include <algorithm>
#include <cmath>

#include "config_checks.hpp"
#include "ember/optim/adam.hpp"
#include "tensor_math.hpp"

namespace ember::optim {

DynTensor newton_schulz(DynTensor x, std::size_t steps) {
  EMBER_CHECK(x.rank() == 2,
              "optim::newton_schulz: expected a matrix, got shape " + x.shape().to_string());
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  DynTensor norm =
      ops::reshape(math::sqrt(ops::reduce_all(ir::ReduceFn::Sum, math::square(x))), Shape{1, 1});
  x = math::div(std::move(x), math::add_scalar(std::move(norm), 1e-7));
  const bool tall = x.shape()[0] > x.shape()[1];
  if (tall) x = ops::transpose(std::move(x));
  for (std::size_t i = 0; i < steps; ++i) {
    DynTensor gram = ops::matmul(x, ops::transpose(x));
    DynTensor poly = math::add(math::scale(gram, b), math::scale(ops::matmul(gram, gram), c));
    x = math::add(math::scale(x, a), ops::matmul(std::move(poly), x));
  }
  return tall ? ops::transpose(std::move(x)) : x;
}

Muon MuonConfig::init() const { return Muon(*this); }

Muon::Muon(const MuonConfig& c) : config_(c) {
  const char* who = "optim::MuonConfig";
  detail::check_beta(who, "momentum", c.momentum);
  detail::check_non_negative(who, "weight_decay", c.weight_decay);
  detail::check_beta(who, "adam_beta_1", c.adam_beta_1);
  detail::check_beta(who, "adam_beta_2", c.adam_beta_2);
  detail::check_non_negative(who, "adam_epsilon", c.adam_epsilon);
  EMBER_CHECK(c.ns_steps > 0, std::string(who) + "::init: ns_steps must be > 0, got 0");
}

DynTensor Muon::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const MuonConfig& c = config_;
  if (c.weight_decay != 0.0) p = math::scale(std::move(p), 1.0 - lr * c.weight_decay);
  if (p.rank() != 2)
    return detail::adam_step(std::move(p), std::move(g), st, lr, c.adam_beta_1, c.adam_beta_2,
                             c.adam_epsilon, false, detail::AdamDecay::Decoupled, 0.0);
  ++st.step;
  DynTensor& buf = st.slot("momentum_buffer", [&] { return math::zeros_like(p); });
  buf = math::add(math::scale(std::move(buf), c.momentum), g);
  DynTensor u = c.nesterov ? math::axpy(std::move(g), c.momentum, buf) : buf;
  DynTensor o = newton_schulz(std::move(u), c.ns_steps);
  const double rows = double(p.shape()[0]), cols = double(p.shape()[1]);
  const double scale = std::sqrt(std::max(1.0, rows / cols));
  return math::sub(std::move(p), math::scale(std::move(o), lr * scale));
}

}  // namespace ember::optim
