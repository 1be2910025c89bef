// Adafactor's update rule.
#include "ember/optim/adafactor.hpp"

#include <algorithm>
#include <cmath>

#include "config_checks.hpp"
#include "tensor_math.hpp"

namespace ember::optim {

namespace {
// The shapes of the factored statistics: row means keep dim -1 as 1, column means dim -2.
Shape row_shape(Shape s) {
  s[s.rank() - 1] = 1;
  return s;
}
Shape col_shape(Shape s) {
  s[s.rank() - 2] = 1;
  return s;
}
double rms(const DynTensor& x) {
  return std::sqrt(math::sum_value(math::square(x)) / double(x.num_elements()));
}
}  // namespace

Adafactor AdafactorConfig::init() const { return Adafactor(*this); }

Adafactor::Adafactor(const AdafactorConfig& c) : config_(c) {
  const char* who = "optim::AdafactorConfig";
  detail::check_non_negative(who, "epsilon_1", c.epsilon_1);
  detail::check_non_negative(who, "epsilon_2", c.epsilon_2);
  detail::check_positive(who, "clip_threshold", c.clip_threshold);
  EMBER_CHECK(std::isfinite(c.decay_rate) && c.decay_rate < 0.0,
              std::string(who) + "::init: decay_rate must be finite and < 0, got " +
                  detail::num(c.decay_rate));
  detail::check_non_negative(who, "weight_decay", c.weight_decay);
}

void Adafactor::check_slots(const ParamState& s, const Shape& shape, DType dtype) const {
  for (const auto& [slot, t] : s.slots) {
    const Shape want = slot == "exp_avg_sq_row"   ? row_shape(shape)
                       : slot == "exp_avg_sq_col" ? col_shape(shape)
                                                  : shape;
    EMBER_CHECK(t.shape() == want && t.dtype() == dtype,
                std::string(name()) + ": the loaded state '" + s.path + "." + slot +
                    "' has shape " + t.shape().to_string() + " and dtype " +
                    ember::name(t.dtype()) + ", expected " + want.to_string() + " and " +
                    ember::name(dtype) + " (a state from another model?)");
  }
}

DynTensor Adafactor::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const AdafactorConfig& c = config_;
  const double t = double(++st.step);
  const double beta2t = 1.0 - std::pow(t, c.decay_rate);
  const std::size_t rank = p.rank();
  DynTensor g2 = math::add_scalar(math::square(g), c.epsilon_1);
  DynTensor u = [&] {
    if (rank >= 2) {
      const auto zeros = [&](const Shape& s) { return ops::zeros(s, p.dtype(), p.device()); };
      DynTensor& r = st.slot("exp_avg_sq_row", [&] { return zeros(row_shape(p.shape())); });
      DynTensor& col = st.slot("exp_avg_sq_col", [&] { return zeros(col_shape(p.shape())); });
      const auto last = std::int64_t(rank) - 1;
      r = math::add(math::scale(std::move(r), beta2t),
                    math::scale(ops::reduce(ir::ReduceFn::Mean, g2, last), 1.0 - beta2t));
      col = math::add(
          math::scale(std::move(col), beta2t),
          math::scale(ops::reduce(ir::ReduceFn::Mean, std::move(g2), last - 1), 1.0 - beta2t));
      // V = R C / mean(R): g / sqrt(V) = g · rsqrt(R / mean(R)) · rsqrt(C).
      DynTensor r_factor = ops::unary(ir::UnaryFn::Rsqrt,
                                      math::div(r, ops::reduce(ir::ReduceFn::Mean, r, last - 1)));
      DynTensor c_factor = ops::unary(ir::UnaryFn::Rsqrt, col);
      return math::mul(math::mul(std::move(g), std::move(r_factor)), std::move(c_factor));
    }
    DynTensor& v = st.slot("exp_avg_sq", [&] { return math::zeros_like(p); });
    v = math::add(math::scale(std::move(v), beta2t), math::scale(std::move(g2), 1.0 - beta2t));
    return math::div(std::move(g), math::sqrt(v));
  }();
  u = math::divide(std::move(u), std::max(1.0, rms(u) / c.clip_threshold));
  const double alpha = c.scale_parameter ? lr * std::max(c.epsilon_2, rms(p)) : lr;
  if (c.weight_decay != 0.0) p = math::scale(std::move(p), 1.0 - c.weight_decay * alpha);
  return math::sub(std::move(p), math::scale(std::move(u), alpha));
}

}  // namespace ember::optim
