// Parameter groups: selection by glob, regular expression, predicate and ids; each group
// updated exactly as its own optimizer would; the weight-decay split; bad input; state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "optim/mlp.hpp"

using namespace ember;
using namespace ember::optim_test;

namespace {

Weights init_weights() {
  Weights w;
  const std::vector<std::pair<std::string, std::size_t>> sizes = {
      {"fc1.weight", 24}, {"fc1.bias", 6}, {"fc2.weight", 18}, {"fc2.bias", 3}};
  double a = 0.3;
  for (const auto& [p, n] : sizes) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = std::cos(a * double(i + 1));
    w[p] = v;
    a += 0.4;
  }
  return w;
}

Tensor<2> batch(std::size_t cols, double a, const Device& d) {
  std::vector<double> v(8 * cols);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(a * double(i) + 0.1);
  return Tensor<2>(tensor_of(v, Shape{8, cols}, DType::F64, d));
}

TEST(Glob, MatchesWholePaths) {
  EXPECT_TRUE(optim::glob_match("*.bias", "fc1.bias"));
  EXPECT_TRUE(optim::glob_match("*.bias", "blocks.3.fc.bias"));
  EXPECT_TRUE(optim::glob_match("fc?.weight", "fc1.weight"));
  EXPECT_TRUE(optim::glob_match("fc1.*", "fc1.weight"));
  EXPECT_FALSE(optim::glob_match("fc1.*", "fc2.weight"));
  EXPECT_FALSE(optim::glob_match("*.bias", "fc1.bias_scale"));
  EXPECT_FALSE(optim::glob_match("fc1", "fc1.weight"));
  EXPECT_TRUE(optim::glob_match("*", "anything.at.all"));
  EXPECT_TRUE(optim::glob_match("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(optim::glob_match("a*b*c", "aXXbYY"));
}

TEST(ParamGroups, EachGroupMovesAsItsOwnOptimizer) {
  // fc1 (by glob) with SGD at half the lr, fc2.bias (by regex) with RMSProp, the rest
  // (fc2.weight) with Adam — against the three optimizers run on the parts alone.
  const Device ad = Device::cpu().autodiff();
  const auto x = batch(4, 0.3, ad), t = batch(3, 0.7, ad);
  Mlp a = make_mlp(init_weights(), DType::F64, ad);
  optim::ParamGroups groups(optim::AdamConfig{});
  groups.add(optim::Select::glob("fc1.*"), optim::SgdConfig{}.with_momentum(0.9), 0.5)
      .add(optim::Select::regex("fc[0-9]\\.bias"), optim::RmsPropConfig{});
  EXPECT_EQ(groups.num_groups(), 2u);

  Mlp b = make_mlp(init_weights(), DType::F64, ad);
  auto sgd = optim::SgdConfig{}.with_momentum(0.9).init();
  auto rms = optim::RmsPropConfig{}.init();
  auto adam = optim::AdamConfig{}.init();
  for (int s = 0; s < 5; ++s) {
    a = groups.step(0.02, std::move(a), mse_grads(a, x, t));

    auto loss = b.forward(x).sub(t).square().mean();
    Gradients g = loss.backward();
    auto g1 = optim::GradientsParams::from_module(g, b.fc1);
    auto g2 = optim::GradientsParams::from_grads(std::move(g), b.fc2);
    auto gw = optim::GradientsParams{};
    gw.insert(b.fc2.weight.id(), *g2.remove(b.fc2.weight.id()));
    b.fc1 = sgd.step(0.01, std::move(b.fc1), std::move(g1));
    b.fc2.bias = rms.step(0.02, std::move(*b.fc2.bias), std::move(g2));
    b.fc2.weight = adam.step(0.02, std::move(b.fc2.weight), std::move(gw));
  }
  EXPECT_EQ(weights_of(a), weights_of(b));
  EXPECT_EQ(groups.group_of(a.fc1.bias->id()), 0u);
  EXPECT_EQ(groups.group_of(a.fc2.bias->id()), 1u);
  EXPECT_EQ(groups.group_of(a.fc2.weight.id()), 2u);  // the rest
}

TEST(ParamGroups, NoWeightDecayOnBiasesAndNorms) {
  // Zero gradients: AdamW's step is then its decay alone, p (1 - lr wd) for the matrices;
  // the vectors keep their values.
  const Device ad = Device::cpu().autodiff();
  Mlp net = make_mlp(init_weights(), DType::F64, ad);
  auto opt = optim::no_decay_on_biases_and_norms(optim::AdamWConfig{}.with_weight_decay(0.1));
  optim::GradientsParams gp;
  net.visit([&](const nn::TensorEntry& e) {
    gp.insert(e.id, ops::zeros(e.shape(), e.dtype(), Device::cpu()));
  });
  const Weights before = weights_of(net);
  net = opt.step(0.5, std::move(net), std::move(gp));
  const Weights after = weights_of(net);
  for (const char* p : {"fc1.weight", "fc2.weight"})
    for (std::size_t i = 0; i < before.at(p).size(); ++i)
      EXPECT_DOUBLE_EQ(after.at(p)[i], before.at(p)[i] * (1 - 0.5 * 0.1)) << p;
  EXPECT_EQ(after.at("fc1.bias"), before.at("fc1.bias"));
  EXPECT_EQ(after.at("fc2.bias"), before.at("fc2.bias"));
}

TEST(ParamGroups, ByIdsAndPredicate) {
  const Device ad = Device::cpu().autodiff();
  Mlp net = make_mlp(init_weights(), DType::F64, ad);
  optim::ParamGroups groups(optim::SgdConfig{});
  groups.add(optim::Select::ids({net.fc2.weight.id()}), optim::SgdConfig{}, 0.0)
      .add(optim::Select::predicate([](std::string_view, const Shape& s) { return s[0] == 6; },
                                    "six rows"),
           optim::SgdConfig{}, 0.0);
  const Weights before = weights_of(net);
  net = groups.step(0.1, std::move(net), mse_grads(net, batch(4, 0.3, ad), batch(3, 0.7, ad)));
  const Weights after = weights_of(net);
  EXPECT_EQ(after.at("fc2.weight"), before.at("fc2.weight"));  // lr 0 by id
  EXPECT_EQ(after.at("fc1.weight"), before.at("fc1.weight"));  // lr 0 by predicate
  EXPECT_EQ(after.at("fc1.bias"), before.at("fc1.bias"));
  EXPECT_NE(after.at("fc2.bias"), before.at("fc2.bias"));  // the rest, at the full lr
}

TEST(ParamGroups, ClippingPerGroup) {
  // SGD at lr 1 moves each param by its (clipped) gradient: fc1.* clipped to 1e-3 per
  // element, fc2.weight to a 2-norm of 1e-3, fc2.bias unclipped.
  const Device ad = Device::cpu().autodiff();
  Mlp net = make_mlp(init_weights(), DType::F64, ad);
  const auto x = batch(4, 0.3, ad), t = batch(3, 0.7, ad);
  optim::ParamGroups groups(optim::SgdConfig{});
  groups
      .add(optim::Select::glob("fc1.*"), optim::SgdConfig{}, 1.0,
           optim::GradientClipping::value(1e-3))
      .add(optim::Select::glob("fc2.weight"), optim::SgdConfig{}, 1.0,
           optim::GradientClipping::norm(1e-3));
  auto gp = mse_grads(net, x, t);
  std::map<std::string, std::vector<double>> g;
  net.visit([&](const nn::TensorEntry& e) {
    g[std::string(e.path)] = ops::cast(*gp.get(e.id), DType::F64).to_data().to_vector<double>();
  });
  const Weights before = weights_of(net);
  net = groups.step(1.0, std::move(net), std::move(gp));
  const Weights after = weights_of(net);
  for (const char* p : {"fc1.weight", "fc1.bias"})
    for (std::size_t i = 0; i < g[p].size(); ++i)
      EXPECT_NEAR(after.at(p)[i], before.at(p)[i] - std::clamp(g[p][i], -1e-3, 1e-3), 1e-15) << p;
  double n2 = 0;
  for (double v : g["fc2.weight"]) n2 += v * v;
  const double coef = std::min(1.0, 1e-3 / (std::sqrt(n2) + 1e-6));
  ASSERT_LT(coef, 1.0);
  for (std::size_t i = 0; i < g["fc2.weight"].size(); ++i)
    EXPECT_NEAR(after.at("fc2.weight")[i], before.at("fc2.weight")[i] - coef * g["fc2.weight"][i],
                1e-15);
  for (std::size_t i = 0; i < g["fc2.bias"].size(); ++i)
    EXPECT_NEAR(after.at("fc2.bias")[i], before.at("fc2.bias")[i] - g["fc2.bias"][i], 1e-15);
}

TEST(ParamGroups, AGroupThatSelectsNothingIsAnError) {
  const Device ad = Device::cpu().autodiff();
  Mlp net = make_mlp(init_weights(), DType::F64, ad);
  optim::ParamGroups groups(optim::AdamConfig{});
  groups.add(optim::Select::glob("*.gamma"), optim::SgdConfig{});
  const Weights before = weights_of(net);
  try {
    net = groups.step(0.1, std::move(net), mse_grads(net, batch(4, 0.3, ad), batch(3, 0.7, ad)));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("group 0 (glob \"*.gamma\") selects no trainable parameter"),
        std::string::npos)
        << e.what();
  }
  EXPECT_EQ(weights_of(net), before);
  EXPECT_THROW(optim::Select::regex("fc[1"), Error);
  EXPECT_THROW(groups.add(optim::Select::glob("*"), optim::SgdConfig{}, -1.0), Error);
}

TEST(ParamGroups, StateResumesExactly) {
  const Device ad = Device::cpu().autodiff();
  const auto x = batch(4, 0.3, ad), t = batch(3, 0.7, ad);
  auto make = [] {
    optim::ParamGroups g(optim::AdamConfig{}.with_amsgrad(true));
    g.add(optim::Select::glob("*.bias"), optim::AdafactorConfig{});
    g.add(optim::Select::glob("fc1.*"), optim::MuonConfig{});
    return g;
  };
  Mlp a = make_mlp(init_weights(), DType::F64, ad);
  auto oa = make();
  for (int i = 0; i < 20; ++i) a = oa.step(0.01, std::move(a), mse_grads(a, x, t));
  Mlp b = make_mlp(init_weights(), DType::F64, ad);
  auto ob = make();
  for (int i = 0; i < 10; ++i) b = ob.step(0.01, std::move(b), mse_grads(b, x, t));
  auto oc = make();
  oc.load_state(ob.state(), b);
  for (int i = 0; i < 10; ++i) b = oc.step(0.01, std::move(b), mse_grads(b, x, t));
  EXPECT_EQ(weights_of(b), weights_of(a));
}

// Each group its own schedule: fc1.* warms up linearly for 5 steps and then follows a
// cosine, fc2.* decays exponentially — against torch.optim.Adam with two param groups
// under LambdaLR with one function per group (tests/optim/make_golden.py).
optim::ParamGroups scheduled_groups() {
  using namespace optim;
  const auto adam = AdamConfig{}.with_weight_decay(0.01);
  ParamGroups g(adam);
  g.add(Select::glob("fc1.*"), adam,
        SequentialLr::of({5}, LinearLrConfig{0.002, 0.01, 4}.init(),
                         CosineAnnealingLrConfig{0.01, 15}.init()));
  g.add(Select::glob("fc2.*"), adam, ExponentialLrConfig{0.05, 0.8}.init());
  return g;
}

void match_scheduled_groups(DType dt, double rtol) {
  std::ifstream gf(std::string(EMBER_OPTIM_GOLDEN_DIR) + "/optimizers.json");
  std::ifstream pf(std::string(EMBER_OPTIM_GOLDEN_DIR) + "/param_groups.json");
  ASSERT_TRUE(gf.good() && pf.good()) << "run tests/optim/make_golden.py";
  const nn::Json g = nn::Json::parse(gf), golden = nn::Json::parse(pf);
  const nn::Json& c = golden["cases"][dt == DType::F32 ? "f32" : "f64"];
  const Device ad = Device::cpu().autodiff();
  Weights init;
  for (const auto& [p, v] : g["init"].items()) init[p] = v.get<std::vector<double>>();
  Mlp net = make_mlp(init, dt, ad);
  const Tensor<2> x(tensor_of(g["x"].get<std::vector<double>>(), Shape{8, 4}, dt, ad));
  const Tensor<2> t(tensor_of(g["t"].get<std::vector<double>>(), Shape{8, 3}, dt, ad));
  auto opt = scheduled_groups();
  for (std::size_t k = 0; k < c["params"].size(); ++k) {
    net = opt.step(0.0, std::move(net), mse_grads(net, x, t));  // the step's lr is unused
    SCOPED_TRACE("step " + std::to_string(k + 1));
    const auto lrs = c["lrs"][k].get<std::vector<double>>();
    EXPECT_NEAR(opt.last_lr(0), lrs[0], 1e-15);
    EXPECT_NEAR(opt.last_lr(1), lrs[1], 1e-15);
    const Weights got = weights_of(net);
    for (const auto& [path, v] : c["params"][k].items()) {
      const auto w = v.get<std::vector<double>>();
      double scale = 0.0;
      for (double e : w) scale = std::max(scale, std::abs(e));
      for (std::size_t i = 0; i < w.size(); ++i)
        ASSERT_NEAR(got.at(path)[i], w[i], rtol * scale) << path << "[" << i << "]";
    }
  }
}

TEST(ParamGroups, EachGroupItsOwnScheduleMatchesTorchF32) {
  match_scheduled_groups(DType::F32, 1e-5);
}
TEST(ParamGroups, EachGroupItsOwnScheduleMatchesTorchF64) {
  match_scheduled_groups(DType::F64, 1e-10);
}

TEST(ParamGroups, GroupSchedulesResumeExactly) {
  const Device ad = Device::cpu().autodiff();
  const auto x = batch(4, 0.3, ad), t = batch(3, 0.7, ad);
  Mlp a = make_mlp(init_weights(), DType::F64, ad);
  auto oa = scheduled_groups();
  for (int i = 0; i < 16; ++i) a = oa.step(0.0, std::move(a), mse_grads(a, x, t));
  Mlp b = make_mlp(init_weights(), DType::F64, ad);
  auto ob = scheduled_groups();
  for (int i = 0; i < 8; ++i) b = ob.step(0.0, std::move(b), mse_grads(b, x, t));
  const auto saved = ob.state();
  EXPECT_EQ(saved.meta["group_schedules"].size(), 2u);
  auto oc = scheduled_groups();
  oc.load_state(saved, b);
  for (int i = 0; i < 8; ++i) b = oc.step(0.0, std::move(b), mse_grads(b, x, t));
  EXPECT_EQ(weights_of(b), weights_of(a));
  // A state without the schedules (plain groups) does not fit.
  optim::ParamGroups plain(optim::AdamConfig{});
  plain.add(optim::Select::glob("fc1.*"), optim::AdamConfig{});
  EXPECT_THROW(oc.load_state(plain.state()), Error);
}

}  // namespace
