// SGD's update rule, in torch.optim.SGD's order of operations.
#include "ember/optim/sgd.hpp"

#include "config_checks.hpp"
#include "tensor_math.hpp"

namespace ember::optim {

Sgd SgdConfig::init() const { return Sgd(*this); }

Sgd::Sgd(const SgdConfig& c) : config_(c) {
  detail::check_non_negative("optim::SgdConfig", "momentum", c.momentum);
  detail::check_non_negative("optim::SgdConfig", "dampening", c.dampening);
  detail::check_non_negative("optim::SgdConfig", "weight_decay", c.weight_decay);
  EMBER_CHECK(!c.nesterov || (c.momentum > 0.0 && c.dampening == 0.0),
              "optim::SgdConfig::init: Nesterov momentum needs momentum > 0 and dampening 0, "
              "got momentum " +
                  detail::num(c.momentum) + " and dampening " + detail::num(c.dampening));
}

DynTensor Sgd::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const SgdConfig& c = config_;
  if (c.weight_decay != 0.0) g = math::axpy(std::move(g), c.weight_decay, p);
  if (c.momentum != 0.0) {
    if (!st.has("momentum_buffer")) {
      st.slot("momentum_buffer", [&] { return g; });  // the first step: buf = g
    } else {
      DynTensor& buf = st.at("momentum_buffer");
      buf = math::axpy(math::scale(std::move(buf), c.momentum), 1.0 - c.dampening, g);
    }
    const DynTensor& buf = st.at("momentum_buffer");
    g = c.nesterov ? math::axpy(std::move(g), c.momentum, buf) : buf;
  }
  ++st.step;
  return math::sub(std::move(p), math::scale(std::move(g), lr));
}

}  // namespace ember::optim
