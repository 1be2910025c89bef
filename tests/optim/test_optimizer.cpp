// The step API (which params move, in-place updates, memory), state records and resuming,
// gradient clipping and accumulation, and bad input. Expected values are closed forms or
// runs of the same optimizer; tests/optim/test_parity.cpp covers the update rules.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>

#include "optim/mlp.hpp"

using namespace ember;
using namespace ember::optim_test;

namespace {

const Weights kInit = [] {
  Weights w;
  auto fill = [](std::size_t n, double a) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(a * double(i + 1));
    return v;
  };
  w["fc1.weight"] = fill(24, 0.7);
  w["fc1.bias"] = fill(6, 1.3);
  w["fc2.weight"] = fill(18, 0.4);
  w["fc2.bias"] = fill(3, 2.1);
  return w;
}();

Tensor<2> batch(std::size_t cols, double a, DType dt, const Device& d) {
  std::vector<double> v(8 * cols);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::cos(a * double(i));
  return Tensor<2>(tensor_of(v, Shape{8, cols}, dt, d));
}

std::vector<double> values(const DynTensor& t) {
  return ops::cast(t, DType::F64).to_data().to_vector<double>();
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
#define EXPECT_ERROR_HAS(stmt, text) \
  EXPECT_NE(error_of([&] { stmt; }).find(text), std::string::npos) << error_of([&] { stmt; })

// ---- the step ----

struct One {
  nn::Param<Tensor<1>> w;
  EMBER_MODULE(One, w)
};

TEST(Step, SgdClosedForm) {
  // p = [1, 2], g = [0.5, -1], lr 0.1. Plain: p - lr g. Momentum 0.9 (buf = g, then
  // 0.9 g + g): after two steps p - 0.1 g - 0.19 g.
  const Device ad = Device::cpu().autodiff();
  auto make = [&] {
    return One{nn::Param<Tensor<1>>(Tensor<1>(tensor_of({1, 2}, Shape{2}, DType::F64, ad)))};
  };
  auto grads = [&](const One& m) {
    optim::GradientsParams gp;
    gp.insert(m.w.id(), tensor_of({0.5, -1}, Shape{2}, DType::F64, Device::cpu()));
    return gp;
  };
  One a = make();
  auto sgd = optim::SgdConfig{}.init();
  a = sgd.step(0.1, std::move(a), grads(a));
  EXPECT_EQ(values(a.w.val().dyn()), (std::vector<double>{1 - 0.05, 2 + 0.1}));
  EXPECT_TRUE(a.w.val().is_require_grad());

  One b = make();
  auto mom = optim::SgdConfig{}.with_momentum(0.9).init();
  b = mom.step(0.1, std::move(b), grads(b));
  b = mom.step(0.1, std::move(b), grads(b));
  const auto v = values(b.w.val().dyn());
  EXPECT_NEAR(v[0], 1 - 0.29 * 0.5, 1e-15);
  EXPECT_NEAR(v[1], 2 + 0.29, 1e-15);
}

TEST(Step, ParamsWithoutGradientOrFrozenKeepTheirValues) {
  const Device ad = Device::cpu().autodiff();
  Mlp net = make_mlp(kInit, DType::F64, ad);
  net.fc2 = net.fc2.freeze();
  const auto x = batch(4, 0.3, DType::F64, ad), t = batch(3, 0.9, DType::F64, ad);
  auto gp = mse_grads(net, x, t);
  EXPECT_EQ(gp.size(), 2u);  // frozen params have no gradient
  EXPECT_FALSE(gp.contains(net.fc2.weight.id()));
  // A gradient given for a frozen param is ignored; fc1.bias gets none.
  gp.insert(net.fc2.weight.id(), ops::ones(Shape{3, 6}, DType::F64, Device::cpu()));
  gp.remove(net.fc1.bias->id());
  const Weights before = weights_of(net);
  auto opt = optim::AdamConfig{}.init();
  net = opt.step(0.01, std::move(net), std::move(gp));
  const Weights after = weights_of(net);
  EXPECT_NE(after.at("fc1.weight"), before.at("fc1.weight"));
  EXPECT_EQ(after.at("fc1.bias"), before.at("fc1.bias"));
  EXPECT_EQ(after.at("fc2.weight"), before.at("fc2.weight"));
  EXPECT_EQ(after.at("fc2.bias"), before.at("fc2.bias"));
  EXPECT_TRUE(net.fc1.weight.val().is_require_grad());
  EXPECT_FALSE(net.fc2.weight.is_trainable());
  EXPECT_FALSE(net.fc2.weight.val().is_require_grad());
  EXPECT_EQ(opt.num_param_states(), 1u);
}

struct Tied {
  nn::Param<Tensor<1>> a;
  nn::Param<Tensor<1>> b;  // the same param as a (same id): tied weights
  EMBER_MODULE(Tied, a, b)
};

TEST(Step, ATiedParamMovesOnceAndStaysTied) {
  const Device ad = Device::cpu().autodiff();
  nn::Param<Tensor<1>> p(Tensor<1>(tensor_of({1, 2}, Shape{2}, DType::F64, ad)));
  Tied m{p, p};
  optim::GradientsParams gp;
  gp.insert(p.id(), tensor_of({1, 1}, Shape{2}, DType::F64, Device::cpu()));
  auto opt = optim::SgdConfig{}.init();
  m = opt.step(0.25, std::move(m), std::move(gp));
  EXPECT_EQ(values(m.a.val().dyn()), (std::vector<double>{0.75, 1.75}));
  EXPECT_EQ(values(m.b.val().dyn()), (std::vector<double>{0.75, 1.75}));
  EXPECT_EQ(m.a.id(), m.b.id());
  EXPECT_EQ(opt.num_param_states(), 1u);
}

TEST(Step, FromModuleTakesASubset) {
  const Device ad = Device::cpu().autodiff();
  Mlp net = make_mlp(kInit, DType::F32, ad);
  auto loss =
      net.forward(batch(4, 0.3, DType::F32, ad)).sub(batch(3, 0.9, DType::F32, ad)).square().mean();
  Gradients grads = loss.backward();
  auto first = optim::GradientsParams::from_module(grads, net.fc1);
  EXPECT_EQ(first.size(), 2u);
  EXPECT_TRUE(first.contains(net.fc1.weight.id()));
  auto rest = optim::GradientsParams::from_grads(std::move(grads), net);
  EXPECT_EQ(rest.size(), 2u);
  EXPECT_TRUE(rest.contains(net.fc2.weight.id()));
  EXPECT_FALSE(rest.contains(net.fc1.weight.id()));
  // Each gradient lives on the param's inner device.
  EXPECT_TRUE(first.get(net.fc1.weight)->device() == Device::cpu());
}

TEST(Step, WorksOnAPlainDevice) {
  const Device cpu = Device::cpu();
  Mlp net = make_mlp(kInit, DType::F64, cpu);
  optim::GradientsParams gp;
  gp.insert(net.fc1.weight, Tensor<2>::ones(Shape{6, 4}, cpu).cast(DType::F64));
  auto opt = optim::SgdConfig{}.init();
  net = opt.step(0.5, std::move(net), std::move(gp));
  const auto w = values(net.fc1.weight.val().dyn());
  for (std::size_t i = 0; i < w.size(); ++i)
    EXPECT_DOUBLE_EQ(w[i], kInit.at("fc1.weight")[i] - 0.5);
}

// Note [In-place step]: a step updates solely owned param buffers in place, so its peak
// memory holds no second copy of the model; a copy kept by the caller is never written.
struct Big {
  std::vector<nn::Param<Tensor<2>>> ws;
  EMBER_MODULE(Big, ws)
};

TEST(Step, UpdatesInPlaceWithoutASecondCopyOfTheModel) {
  const Device cpu = Device::cpu(), ad = cpu.autodiff();
  constexpr std::size_t n = 8, rows = 1024, cols = 1024;
  const std::size_t param_bytes = rows * cols * sizeof(float), model_bytes = n * param_bytes;
  Big net;
  for (std::size_t i = 0; i < n; ++i)
    net.ws.emplace_back(Tensor<2>::full(Shape{rows, cols}, 1.0, ad));
  auto grads = [&] {
    optim::GradientsParams gp;
    for (const auto& w : net.ws)
      gp.insert(w.id(), ops::full(Shape{rows, cols}, 0.5, DType::F32, cpu));
    return gp;
  };
  auto opt = optim::AdamConfig{}.init();
  net = opt.step(1e-3, std::move(net), grads());  // makes the state

  // The caller keeps the gradients (for logging, say), so their buffers cannot serve as
  // the new params: every byte a step allocates shows in the peak.
  auto gp = grads();
  std::vector<DynTensor> kept_grads;
  gp.for_each([&](nn::ParamId, const DynTensor& g) { kept_grads.push_back(g); });
  const MemoryStats before = memory_stats(cpu);
  net = opt.step(1e-3, std::move(net), std::move(gp));
  const MemoryStats after = memory_stats(cpu);
  // Temporaries of about one param at a time, never a model's worth.
  EXPECT_LE(after.peak, before.in_use + 2 * param_bytes)
      << "peak " << after.peak << ", in use before " << before.in_use << ", model " << model_bytes;
  // The params were written where they were.
  EXPECT_LE(after.in_use, before.in_use + 64 * 1024);
  kept_grads.clear();

  // With a copy held by the caller, each param gets a new buffer and the copy keeps its
  // values.
  Big copy = net;
  const auto kept = values(copy.ws[0].val().dyn());
  auto gp2 = grads();
  const MemoryStats before2 = memory_stats(cpu);
  net = opt.step(1e-3, std::move(net), std::move(gp2));
  const MemoryStats after2 = memory_stats(cpu);
  EXPECT_GE(after2.in_use + 64 * 1024, before2.in_use);
  EXPECT_EQ(values(copy.ws[0].val().dyn()), kept);
  EXPECT_NE(values(net.ws[0].val().dyn()), kept);
}

// ---- state ----

struct Named {
  std::string name;
  std::function<std::unique_ptr<optim::Optimizer>()> make;
};
template <class C>
Named named(std::string name, C config) {
  return {std::move(name), [config] {
            using O = decltype(config.init());
            return std::unique_ptr<optim::Optimizer>(std::make_unique<O>(config.init()));
          }};
}

TEST(State, TenStepsSavedAndLoadedContinueAsTwentyUninterrupted) {
  const Device ad = Device::cpu().autodiff();
  const auto x = batch(4, 0.3, DType::F64, ad), t = batch(3, 0.9, DType::F64, ad);
  const std::vector<Named> optimizers = {
      named("sgd", optim::SgdConfig{}.with_momentum(0.9).with_nesterov(true)),
      named("adam", optim::AdamConfig{}.with_amsgrad(true).with_weight_decay(0.01)),
      named("adamw", optim::AdamWConfig{}),
      named("adagrad", optim::AdaGradConfig{}.with_lr_decay(0.1)),
      named("rmsprop", optim::RmsPropConfig{}.with_centered(true).with_momentum(0.5)),
      named("lion", optim::LionConfig{}),
      named("adan", optim::AdanConfig{}.with_weight_decay(0.01)),
      named("adafactor", optim::AdafactorConfig{}),
      named("muon", optim::MuonConfig{}.with_nesterov(false)),
  };
  for (const auto& o : optimizers) {
    SCOPED_TRACE(o.name);
    Mlp a = make_mlp(kInit, DType::F64, ad);
    auto oa = o.make();
    for (int i = 0; i < 20; ++i) a = oa->step(0.01, std::move(a), mse_grads(a, x, t));

    Mlp b = make_mlp(kInit, DType::F64, ad);
    auto ob = o.make();
    for (int i = 0; i < 10; ++i) b = ob->step(0.01, std::move(b), mse_grads(b, x, t));
    const optim::OptimizerState saved = ob->state();
    EXPECT_EQ(saved.meta["optimizer"], ob->name());
    EXPECT_EQ(saved.meta["params"]["fc1.weight"]["step"], 10);
    // A fresh model (new ids) with b's weights and a fresh optimizer with b's state.
    Mlp c = make_mlp(weights_of(b), DType::F64, ad);
    auto oc = o.make();
    oc->load_state(saved);
    for (int i = 0; i < 10; ++i) c = oc->step(0.01, std::move(c), mse_grads(c, x, t));
    EXPECT_EQ(weights_of(c), weights_of(a));
  }
}

TEST(State, KeysArePathAndSlot) {
  const Device ad = Device::cpu().autodiff();
  Mlp net = make_mlp(kInit, DType::F32, ad);
  auto opt = optim::AdamConfig{}.with_amsgrad(true).init();
  net = opt.step(0.01, std::move(net),
                 mse_grads(net, batch(4, 0.3, DType::F32, ad), batch(3, 0.9, DType::F32, ad)));
  const auto s = opt.state();
  EXPECT_EQ(s.tensors.size(), 12u);  // 4 params x exp_avg, exp_avg_sq, max_exp_avg_sq
  ASSERT_NE(s.find("fc2.bias.exp_avg_sq"), nullptr);
  EXPECT_EQ(s.find("fc2.bias.exp_avg_sq")->shape(), Shape{3});
  EXPECT_EQ(s.find("fc1.weight.max_exp_avg_sq")->shape(), (Shape{6, 4}));
  // The eager form binds to the module at once.
  auto fresh = optim::AdamConfig{}.with_amsgrad(true).init();
  fresh.load_state(s, net);
  EXPECT_EQ(fresh.num_param_states(), 4u);
  EXPECT_EQ(fresh.param_state(net.fc1.weight.id())->step, 1);
}

// Note: the same calls as modules (ember/optim/state_record.hpp), in both writable formats.
TEST(State, SavesAndLoadsThroughRecordFilesAndResumesExactly) {
  const Device ad = Device::cpu().autodiff();
  const auto x = batch(4, 0.3, DType::F64, ad), t = batch(3, 0.9, DType::F64, ad);
  const auto dir =
      std::filesystem::temp_directory_path() / ("ember_optim_state_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const std::string file : {"adam.ember", "adam.safetensors"}) {
    SCOPED_TRACE(file);
    const auto config = optim::AdamConfig{}.with_amsgrad(true).with_weight_decay(0.01);
    Mlp a = make_mlp(kInit, DType::F64, ad);
    auto oa = config.init();
    auto sa = optim::CosineAnnealingLrConfig{0.02, 20}.init();
    for (int i = 0; i < 20; ++i) a = oa.step(sa.step(), std::move(a), mse_grads(a, x, t));

    Mlp b = make_mlp(kInit, DType::F64, ad);
    auto ob = config.init();
    auto sb = optim::CosineAnnealingLrConfig{0.02, 20}.init();
    for (int i = 0; i < 10; ++i) b = ob.step(sb.step(), std::move(b), mse_grads(b, x, t));
    const std::string path = (dir / file).string(), sched_path = (dir / ("sched." + file)).string();
    record::save(ob.state(), path);
    record::save(sb.state(), sched_path);
    const auto info = record::inspect(path);
    EXPECT_EQ(info.tensors.size(), 12u);  // 4 params x 3 slots
    EXPECT_EQ(info.config["optimizer"], "optim::Adam");

    Mlp c = make_mlp(weights_of(b), DType::F64, ad);
    auto oc = config.init();
    oc.load_state(record::load(optim::OptimizerState{}, path, Device::cpu()));
    auto sc = optim::CosineAnnealingLrConfig{0.02, 20}.init();
    sc.load_state(record::load(optim::SchedulerState{}, sched_path, Device::cpu()));
    EXPECT_EQ(sc.steps(), 10u);
    for (int i = 0; i < 10; ++i) c = oc.step(sc.step(), std::move(c), mse_grads(c, x, t));
    EXPECT_EQ(weights_of(c), weights_of(a));

    // A model file is not a state, and a state carries its own config.
    record::save(a, (dir / ("model." + file)).string());
    EXPECT_ERROR_HAS(
        record::load(optim::OptimizerState{}, (dir / ("model." + file)).string(), Device::cpu()),
        "holds no optimizer or scheduler state");
    EXPECT_ERROR_HAS(record::save(ob.state(), path, {.config = nn::Json{{"a", 1}}}),
                     "options.config must be empty");
  }
  // In memory, as modules (embedded files).
  auto o = optim::SgdConfig{}.with_momentum(0.9).init();
  Mlp m = make_mlp(kInit, DType::F32, ad);
  m = o.step(0.1, std::move(m),
             mse_grads(m, batch(4, 0.3, DType::F32, ad), batch(3, 0.9, DType::F32, ad)));
  const auto bytes = record::save_bytes(o.state(), record::Format::Ember);
  const auto back =
      record::load(optim::OptimizerState{}, std::span<const std::byte>(bytes), Device::cpu());
  EXPECT_EQ(back.meta, o.state().meta);
  ASSERT_NE(back.find("fc1.weight.momentum_buffer"), nullptr);
  EXPECT_EQ(values(*back.find("fc1.weight.momentum_buffer")),
            values(*o.state().find("fc1.weight.momentum_buffer")));
  std::filesystem::remove_all(dir);
}

struct Wider {
  nn::Linear fc1, fc2;
  EMBER_MODULE(Wider, fc1, fc2)
};
struct OnlyFc1 {
  nn::Linear fc1;
  EMBER_MODULE(OnlyFc1, fc1)
};

TEST(State, FromAnotherModelOrOptimizerIsRefused) {
  const Device ad = Device::cpu().autodiff();
  Mlp net = make_mlp(kInit, DType::F32, ad);
  auto opt = optim::AdamConfig{}.init();
  net = opt.step(0.01, std::move(net),
                 mse_grads(net, batch(4, 0.3, DType::F32, ad), batch(3, 0.9, DType::F32, ad)));
  const auto s = opt.state();

  Wider wider{nn::LinearConfig{5, 6}.init(ad), nn::LinearConfig{6, 3}.init(ad)};
  auto o1 = optim::AdamConfig{}.init();
  EXPECT_ERROR_HAS(o1.load_state(s, wider), "'fc1.weight.exp_avg' has shape [6, 4]");
  OnlyFc1 part{nn::LinearConfig{4, 6}.init(ad)};
  auto o2 = optim::AdamConfig{}.init();
  EXPECT_ERROR_HAS(o2.load_state(s, part), "'fc2.bias', 'fc2.weight'");
  // Lazily bound states are checked at the next step, before anything moves.
  auto o3 = optim::AdamConfig{}.init();
  o3.load_state(s);
  optim::GradientsParams none;
  EXPECT_ERROR_HAS(part = o3.step(0.01, std::move(part), std::move(none)), "another model");
  EXPECT_EQ(part.fc1.weight.shape(), (Shape{6, 4}));

  auto sgd = optim::SgdConfig{}.init();
  EXPECT_ERROR_HAS(sgd.load_state(s), "the state is from optim::Adam, not optim::Sgd");
}

// ---- bad input ----

TEST(BadInput, LearningRate) {
  const Device ad = Device::cpu().autodiff();
  Mlp net = make_mlp(kInit, DType::F32, ad);
  auto opt = optim::SgdConfig{}.init();
  for (double lr : {-0.1, std::nan(""), double(INFINITY)}) {
    optim::GradientsParams gp;
    EXPECT_ERROR_HAS(net = opt.step(lr, std::move(net), std::move(gp)),
                     "optim::Sgd::step: the learning rate must be finite and >= 0");
  }
  EXPECT_EQ(net.fc1.weight.shape(), (Shape{6, 4}));  // the model is still there
}

TEST(BadInput, Configs) {
  EXPECT_ERROR_HAS(optim::AdamConfig{}.with_beta_1(1.0).init(), "beta_1 must be in [0, 1), got 1");
  EXPECT_ERROR_HAS(optim::AdamWConfig{}.with_beta_2(-0.1).init(),
                   "optim::AdamWConfig::init: beta_2");
  EXPECT_ERROR_HAS(optim::AdamConfig{}.with_epsilon(std::nan("")).init(), "epsilon");
  EXPECT_ERROR_HAS(optim::SgdConfig{}.with_weight_decay(-1).init(), "weight_decay");
  EXPECT_ERROR_HAS(optim::SgdConfig{}.with_nesterov(true).init(), "Nesterov");
  EXPECT_ERROR_HAS(optim::RmsPropConfig{}.with_alpha(1.5).init(), "alpha");
  EXPECT_ERROR_HAS(optim::LionConfig{}.with_beta_2(1.0).init(), "beta_2");
  EXPECT_ERROR_HAS(optim::AdanConfig{}.with_beta_3(1.2).init(), "beta_3");
  EXPECT_ERROR_HAS(optim::AdafactorConfig{}.with_decay_rate(0.5).init(), "decay_rate");
  EXPECT_ERROR_HAS(optim::MuonConfig{}.with_ns_steps(0).init(), "ns_steps");
  EXPECT_ERROR_HAS(optim::newton_schulz(ops::zeros(Shape{3}, DType::F32, Device::cpu()), 5),
                   "expected a matrix, got shape [3]");
}

TEST(BadInput, GradientShapeDiffersFromItsParam) {
  const Device ad = Device::cpu().autodiff();
  Mlp net = make_mlp(kInit, DType::F32, ad);
  const auto before = weights_of(net);
  optim::GradientsParams gp;
  gp.insert(net.fc1.weight.id(), ops::zeros(Shape{4, 6}, DType::F32, Device::cpu()));
  auto opt = optim::AdamConfig{}.init();
  EXPECT_ERROR_HAS(
      net = opt.step(0.1, std::move(net), std::move(gp)),
      "optim::Adam::step: the gradient of 'fc1.weight' has shape [4, 6], the parameter [6, 4]");
  EXPECT_EQ(weights_of(net), before);
}

TEST(Muon, NewtonSchulzActsOnEachSingularValue) {
  // For A = [diag(d); 0] (tall: the transposed path), the iteration keeps the singular
  // vectors and maps each singular value s = d_i / |A|_F through s <- a s + b s^3 + c s^5,
  // five times: X = [diag(f(s_i)); 0], each f(s_i) near 1.
  const Device cpu = Device::cpu();
  const std::vector<double> d = {3.0, 1.0, 0.5};
  std::vector<double> a(5 * 3, 0.0);
  for (std::size_t i = 0; i < 3; ++i) a[i * 3 + i] = d[i];
  const auto x = values(optim::newton_schulz(tensor_of(a, Shape{5, 3}, DType::F64, cpu), 5));
  const double norm = std::sqrt(9.0 + 1.0 + 0.25) + 1e-7;
  for (std::size_t r = 0; r < 5; ++r)
    for (std::size_t c = 0; c < 3; ++c) {
      double want = 0.0;
      if (r == c) {
        want = d[r] / norm;
        for (int k = 0; k < 5; ++k)
          want = 3.4445 * want - 4.7750 * std::pow(want, 3) + 2.0315 * std::pow(want, 5);
        EXPECT_GT(want, 0.6);
        EXPECT_LT(want, 1.25);
      }
      EXPECT_NEAR(x[r * 3 + c], want, 1e-12) << r << "," << c;
    }
}

// ---- clipping and accumulation ----

optim::GradientsParams two_grads(std::vector<double> a, std::vector<double> b) {
  optim::GradientsParams gp;
  gp.insert(1, tensor_of(a, Shape{a.size()}, DType::F64, Device::cpu()));
  gp.insert(2, tensor_of(b, Shape{b.size()}, DType::F64, Device::cpu()));
  return gp;
}

TEST(Clipping, ByValue) {
  auto gp = two_grads({3, -4, 0.25}, {0.5});
  optim::clip_grad_value(gp, 1.0);
  EXPECT_EQ(values(*gp.get(1)), (std::vector<double>{1, -1, 0.25}));
  EXPECT_EQ(values(*gp.get(2)), (std::vector<double>{0.5}));
  EXPECT_ERROR_HAS(optim::clip_grad_value(gp, -1), "clip value");
}

TEST(Clipping, ByGlobalNorm) {
  // |[3, 4, 12]| = 13 over both gradients; max_norm 6.5 halves them (torch's 1e-6 apart).
  auto gp = two_grads({3, 4}, {12});
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm(gp, 6.5), 13.0);
  const double c = 6.5 / (13.0 + 1e-6);
  EXPECT_EQ(values(*gp.get(1)), (std::vector<double>{3 * c, 4 * c}));
  EXPECT_EQ(values(*gp.get(2)), (std::vector<double>{12 * c}));
  // Below the limit nothing changes; the infinity norm is the largest magnitude.
  auto small = two_grads({3, -4}, {12});
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm(small, 100.0), 13.0);
  EXPECT_EQ(values(*small.get(2)), (std::vector<double>{12}));
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm(small, 100.0, optim::inf_norm), 12.0);
  auto l1 = two_grads({3, -4}, {12});
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm(l1, 100.0, 1.0), 19.0);
}

TEST(Accumulator, SumsMicroBatches) {
  optim::GradientsAccumulator acc;
  acc.accumulate(two_grads({1, 2}, {3}));
  acc.accumulate(two_grads({10, 20}, {30}));
  EXPECT_EQ(acc.count(), 2u);
  auto sum = acc.grads();
  EXPECT_EQ(values(*sum.get(1)), (std::vector<double>{11, 22}));
  EXPECT_EQ(values(*sum.get(2)), (std::vector<double>{33}));
  EXPECT_EQ(acc.count(), 0u);
  EXPECT_TRUE(acc.grads().empty());
  acc.accumulate(two_grads({1, 2}, {3}));
  EXPECT_ERROR_HAS(acc.accumulate(two_grads({1, 2, 3}, {3})), "shape [2], now [3]");
}

TEST(Accumulator, MicroBatchesGiveTheFullBatchGradient) {
  // Two halves of a batch, each loss halved, sum to the whole batch's mean-loss gradient.
  const Device ad = Device::cpu().autodiff();
  const Mlp net = make_mlp(kInit, DType::F64, ad);
  const auto x = batch(4, 0.3, DType::F64, ad), t = batch(3, 0.9, DType::F64, ad);
  auto whole = mse_grads(net, x, t);
  optim::GradientsAccumulator acc;
  for (std::int64_t half = 0; half < 2; ++half) {
    auto xs = x.narrow(0, 4 * half, 4), ts = t.narrow(0, 4 * half, 4);
    auto loss = net.forward(xs).sub(ts).square().mean().mul_scalar(0.5);
    acc.accumulate(net, optim::GradientsParams::from_grads(loss.backward(), net));
  }
  auto sum = acc.grads();
  for (nn::ParamId id : whole.ids()) {
    const auto a = values(*whole.get(id)), b = values(*sum.get(id));
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-14);
  }
}

}  // namespace
