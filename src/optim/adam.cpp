// Adam's and AdamW's update rules, in torch.optim.Adam's order of operations.
#include "ember/optim/adam.hpp"

#include <bit>
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
//
// Note [Shared step scalars]: the program's scalars are one-element inputs. Made by
// prog.scalar they would be seven fill ops per param per step; on Cuda each is a kernel
// launch, seven times the fused kernel's own, which for a model of many tensors costs more
// than the update. They take the same few values for every param of a step, so the
// optimizer keeps them (StepScalars, by value, dtype, rank and device) and every program
// reads the same tensors: the same Fill ops' results, so the numbers are unchanged.
DynTensor StepScalars::get(double v, DType dtype, std::size_t rank, const Device& device) {
  const auto bits = std::bit_cast<std::uint64_t>(v);
  for (const Entry& e : entries_) {
    if (e.bits == bits && e.dtype == dtype && e.rank == rank && e.device == device) return e.tensor;
  }
  // The step size changes every step: past values are dropped before they pile up.
  if (entries_.size() >= 32) entries_.clear();
  DynTensor t = ops::full(Shape(std::vector<std::size_t>(rank, 1)), v, dtype, device);
  entries_.push_back({bits, dtype, rank, device, t});
  return t;
}

DynTensor adam_step(DynTensor p, DynTensor g, ParamState& st, double lr, double beta_1,
                    double beta_2, double epsilon, bool amsgrad, AdamDecay decay,
                    double weight_decay, StepScalars* scalars) {
  const auto zeros = [&] { return math::zeros_like(p); };
  st.slot("exp_avg", zeros);
  st.slot("exp_avg_sq", zeros);
  if (amsgrad) st.slot("max_exp_avg_sq", zeros);
  const double t = double(++st.step);
  const double bias_correction_1 = 1.0 - std::pow(beta_1, t);
  const double bias_correction_2_sqrt = std::sqrt(1.0 - std::pow(beta_2, t));

  ops::ElementwiseProgram prog;
  // (No copy of p is kept: the program may write the new param into p's buffer.)
  const DType dtype = p.dtype();
  const std::size_t rank = p.rank();
  const Device device = p.device();
  const auto constant = [&](double v) {
    return scalars != nullptr ? prog.input(scalars->get(v, dtype, rank, device)) : prog.scalar(v);
  };
  // The tensors are handed over, so their buffers can take the results.
  const auto vp = prog.input(std::move(p)), vg = prog.input(std::move(g));
  const auto vm = prog.input(std::move(st.at("exp_avg")));
  const auto vv = prog.input(std::move(st.at("exp_avg_sq")));
  ops::ElementwiseProgram::Value vvmax;
  if (amsgrad) vvmax = prog.input(std::move(st.at("max_exp_avg_sq")));
  const bool l2 = decay == AdamDecay::L2 && weight_decay != 0.0;
  const bool decoupled = decay == AdamDecay::Decoupled && weight_decay != 0.0;
  ops::ElementwiseProgram::Value wd;
  if (l2 || decoupled) wd = constant(decoupled ? 1.0 - lr * weight_decay : weight_decay);
  const auto b1 = constant(beta_1), one_b1 = constant(1.0 - beta_1);
  const auto b2 = constant(beta_2), one_b2 = constant(1.0 - beta_2);
  const auto bc2 = constant(bias_correction_2_sqrt), eps = constant(epsilon);
  const auto step_size = constant(lr / bias_correction_1);

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
                           c.amsgrad, detail::AdamDecay::L2, c.weight_decay, &scalars_);
}

DynTensor AdamW::update_param(DynTensor p, DynTensor g, ParamState& st, double lr) {
  const AdamWConfig& c = config_;
  return detail::adam_step(std::move(p), std::move(g), st, lr, c.beta_1, c.beta_2, c.epsilon,
                           c.amsgrad, detail::AdamDecay::Decoupled, c.weight_decay, &scalars_);
}

}  // namespace ember::optim
