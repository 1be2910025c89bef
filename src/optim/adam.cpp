// Adam's and AdamW's update rules, in torch.optim.Adam's order of operations.
#include "ember/optim/adam.hpp"

#include <cmath>

#include "config_checks.hpp"
#include "ember/tensor/elementwise_program.hpp"
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
// Note [Fused Adam step]: the whole update is one ElementwiseProgram, so on the Cpu it is one
// pass over memory — p, g, m, v (and vmax) read once, the new p, m, v (and vmax) written once,
// each into the buffer of an input the step owns alone (Note [In-place step]) — where the
// same formula as a dozen tensor ops makes a dozen passes and two temporaries. The
// instructions are the ops of torch.optim.Adam's single-tensor code, in its order, and the
// program's results equal those ops' bit for bit. AdamW's decay and Adam's L2 term are the
// first instructions of the same program.
DynTensor adam_step(DynTensor p, DynTensor g, ParamState& st, double lr, double beta_1,
                    double beta_2, double epsilon, bool amsgrad, AdamDecay decay,
                    double weight_decay) {
  const auto zeros = [&] { return math::zeros_like(p); };
  st.slot("exp_avg", zeros);
  st.slot("exp_avg_sq", zeros);
  if (amsgrad) st.slot("max_exp_avg_sq", zeros);
  const double t = double(++st.step);
  const double bias_correction_1 = 1.0 - std::pow(beta_1, t);
  const double bias_correction_2_sqrt = std::sqrt(1.0 - std::pow(beta_2, t));

  ops::ElementwiseProgram prog;
  // The tensors are handed over, so their buffers can take the results.
  const auto vp = prog.input(std::move(p)), vg = prog.input(std::move(g));
  const auto vm = prog.input(std::move(st.at("exp_avg")));
  const auto vv = prog.input(std::move(st.at("exp_avg_sq")));
  ops::ElementwiseProgram::Value vvmax;
  if (amsgrad) vvmax = prog.input(std::move(st.at("max_exp_avg_sq")));
  const bool l2 = decay == AdamDecay::L2 && weight_decay != 0.0;
  const bool decoupled = decay == AdamDecay::Decoupled && weight_decay != 0.0;
  ops::ElementwiseProgram::Value wd;
  if (l2 || decoupled) wd = prog.scalar(decoupled ? 1.0 - lr * weight_decay : weight_decay);
  const auto b1 = prog.scalar(beta_1), one_b1 = prog.scalar(1.0 - beta_1);
  const auto b2 = prog.scalar(beta_2), one_b2 = prog.scalar(1.0 - beta_2);
  const auto bc2 = prog.scalar(bias_correction_2_sqrt), eps = prog.scalar(epsilon);
  const auto step_size = prog.scalar(lr / bias_correction_1);

  auto param = vp, grad = vg;
  if (decoupled) param = prog.mul(param, wd);          // p *= 1 - lr wd
  if (l2) grad = prog.add(grad, prog.mul(param, wd));  // g += wd p
  const auto m = prog.add(prog.mul(vm, b1), prog.mul(grad, one_b1));
  const auto v = prog.add(prog.mul(vv, b2), prog.mul(prog.square(grad), one_b2));
  auto second = v;
  if (amsgrad) second = prog.maximum(vvmax, v);
  const auto denom = prog.add(prog.div(prog.sqrt(second), bc2), eps);
  const auto updated = prog.sub(param, prog.mul(prog.div(m, denom), step_size));

  std::vector<ops::ElementwiseProgram::Value> outs{updated, m, v};
  if (amsgrad) outs.push_back(second);
  auto r = std::move(prog).run(outs);
  st.at("exp_avg") = std::move(r[1]);
  st.at("exp_avg_sq") = std::move(r[2]);
  if (amsgrad) st.at("max_exp_avg_sq") = std::move(r[3]);
  return std::move(r[0]);
}
}  // namespace detail

Adam AdamConfig::init() const { return Adam(*this); }
AdamW AdamWConfig::init() const { return AdamW(*this); }

Adam::Adam(const AdamConfig& c) : config_(c) { check_adam_config("optim::AdamConfig", c); }
AdamW::AdamW(const AdamWConfig& c) : config_(c) { check_adam_config("optim::AdamWConfig", c); }

DynTensor Adam::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const AdamConfig& c = config_;
  return detail::adam_step(std::move(p), std::move(g), st, lr, c.beta_1, c.beta_2, c.epsilon,
                           c.amsgrad, detail::AdamDecay::L2, c.weight_decay);
}

DynTensor AdamW::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const AdamWConfig& c = config_;
  return detail::adam_step(std::move(p), std::move(g), st, lr, c.beta_1, c.beta_2, c.epsilon,
                           c.amsgrad, detail::AdamDecay::Decoupled, c.weight_decay);
}

}  // namespace ember::optim
