// Each optimizer's 20-step trajectory on a small MLP and on a small conv model against
// golden values from tests/optim/make_golden.py: torch.optim for SGD, Adam, AdamW, AdaGrad
// and RMSProp; the script's NumPy implementations of the papers for the optimizers PyTorch
// 1.13 lacks. Both sides start from the same weights and compute gradients of the same
// loss; f32 must agree to 1e-5 and f64 to 1e-10, relative to each tensor's largest value.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <memory>

#include "optim/mlp.hpp"

using namespace ember;
using namespace ember::optim_test;

namespace {

const nn::Json& golden() {
  static const nn::Json j = [] {
    std::ifstream f(std::string(EMBER_OPTIM_GOLDEN_DIR) + "/optimizers.json");
    EXPECT_TRUE(f.good()) << "run tests/optim/make_golden.py";
    return nn::Json::parse(f);
  }();
  return j;
}

struct Case {
  std::string name;
  double lr;
  std::function<std::unique_ptr<optim::Optimizer>()> make;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

template <class C>
std::function<std::unique_ptr<optim::Optimizer>()> maker(C config) {
  return [config] {
    using O = decltype(config.init());
    return std::unique_ptr<optim::Optimizer>(std::make_unique<O>(config.init()));
  };
}

// conv: Conv2d(2, 2, 3, padding 1), tanh, flattened, fc: Linear(18, 2), as the script's.
struct ConvNet {
  nn::Conv2d conv;
  nn::Linear fc;
  EMBER_MODULE(ConvNet, conv, fc)
  Tensor<2> forward(const Tensor<4>& x) const {
    const std::size_t n = x.shape()[0];
    return fc.forward(conv.forward(x).tanh().reshape<2>(Shape{n, 18}));
  }
};

ConvNet make_conv(const Weights& w, DType dt, const Device& d) {
  auto param = [&]<std::size_t R>(const std::string& p, Shape s) {
    return nn::Param<Tensor<R>>(Tensor<R>(tensor_of(w.at(p), s, dt, d)));
  };
  return ConvNet{nn::Conv2d{param.operator()<4>("conv.weight", Shape{2, 2, 3, 3}),
                            param.operator()<1>("conv.bias", Shape{2}),
                            {1, 1},
                            nn::Padding{1},
                            {1, 1},
                            1},
                 nn::Linear{param.operator()<2>("fc.weight", Shape{2, 18}),
                            param.operator()<1>("fc.bias", Shape{2})}};
}

template <class M>
Weights weights_of_module(const M& m) {
  Weights w;
  m.visit([&](const nn::TensorEntry& e) {
    w[std::string(e.path)] = ops::cast(e.tensor, DType::F64).to_data().to_vector<double>();
  });
  return w;
}

Shape shape_of(const nn::Json& j) { return Shape(j.get<std::vector<std::size_t>>()); }

// 20 steps of c on the model of golden section g (the MLP's: the file's top level; the
// conv model's: "conv"), every param compared after every step.
template <class M, class Make, class Grads>
void run_trajectory(const Case& c, DType dt, double rtol, const nn::Json& g, const char* model,
                    Make make, Grads grads) {
  const std::string key = c.name + (dt == DType::F32 ? "_f32" : "_f64");
  ASSERT_TRUE(g["cases"].contains(key)) << model << " " << key;
  const Device ad = Device::cpu().autodiff();
  Weights init;
  for (const auto& [p, v] : g["init"].items()) init[p] = v.template get<std::vector<double>>();
  M net = make(init, dt, ad);
  const DynTensor x = tensor_of(g["x"].get<std::vector<double>>(), shape_of(g["x_shape"]), dt, ad);
  const DynTensor t = tensor_of(g["t"].get<std::vector<double>>(), shape_of(g["t_shape"]), dt, ad);
  auto opt = c.make();
  const auto& steps = g["cases"][key];
  ASSERT_EQ(steps.size(), 20u);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    net = opt->step(c.lr, std::move(net), grads(net, x, t));
    const Weights got = weights_of_module(net);
    for (const auto& [path, v] : steps[s].items()) {
      const auto want = v.template get<std::vector<double>>();
      const auto& have = got.at(path);
      ASSERT_EQ(have.size(), want.size()) << path;
      double scale = 0.0;
      for (double w : want) scale = std::max(scale, std::abs(w));
      for (std::size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(have[i], want[i], rtol * scale)
            << model << " " << key << " step " << s + 1 << " " << path << "[" << i << "]";
    }
  }
}

void run_mlp(const Case& c, DType dt, double rtol) {
  run_trajectory<Mlp>(c, dt, rtol, golden(), "mlp", make_mlp,
                      [](const Mlp& m, const DynTensor& x, const DynTensor& t) {
                        return mse_grads(m, Tensor<2>(x), Tensor<2>(t));
                      });
}

void run_conv(const Case& c, DType dt, double rtol) {
  run_trajectory<ConvNet>(c, dt, rtol, golden()["conv"], "conv", make_conv,
                          [](const ConvNet& m, const DynTensor& x, const DynTensor& t) {
                            auto loss = m.forward(Tensor<4>(x)).sub(Tensor<2>(t)).square().mean();
                            return optim::GradientsParams::from_grads(loss.backward(), m);
                          });
}

std::vector<Case> cases() {
  using namespace optim;
  return {
      {"sgd", 0.1, maker(SgdConfig{})},
      {"sgd_momentum", 0.1,
       maker(SgdConfig{}.with_momentum(0.9).with_dampening(0.1).with_weight_decay(0.01))},
      {"sgd_nesterov", 0.1,
       maker(SgdConfig{}.with_momentum(0.9).with_nesterov(true).with_weight_decay(0.01))},
      {"adam", 0.01, maker(AdamConfig{}.with_weight_decay(0.01))},
      {"adam_amsgrad", 0.01,
       maker(AdamConfig{}.with_beta_1(0.8).with_beta_2(0.9).with_weight_decay(0.01).with_amsgrad(
           true))},
      {"adamw", 0.01, maker(AdamWConfig{}.with_weight_decay(0.1))},
      {"adamw_amsgrad", 0.01, maker(AdamWConfig{}.with_weight_decay(0.1).with_amsgrad(true))},
      {"adagrad", 0.1,
       maker(AdaGradConfig{}
                 .with_lr_decay(0.01)
                 .with_weight_decay(0.01)
                 .with_initial_accumulator_value(0.1))},
      {"rmsprop", 0.01, maker(RmsPropConfig{}.with_alpha(0.9).with_weight_decay(0.01))},
      {"rmsprop_centered", 0.01,
       maker(
           RmsPropConfig{}.with_alpha(0.9).with_weight_decay(0.01).with_momentum(0.5).with_centered(
               true))},
      {"lion", 0.01, maker(LionConfig{}.with_weight_decay(0.1))},
      {"adan", 0.01, maker(AdanConfig{}.with_weight_decay(0.02))},
      {"adafactor", 0.05, maker(AdafactorConfig{}.with_weight_decay(0.01))},
      {"muon", 0.02, maker(MuonConfig{}.with_weight_decay(0.01))},
  };
}

class Parity : public ::testing::TestWithParam<Case> {};

TEST_P(Parity, F32) { run_mlp(GetParam(), DType::F32, 1e-5); }
TEST_P(Parity, F64) { run_mlp(GetParam(), DType::F64, 1e-10); }
TEST_P(Parity, ConvF32) { run_conv(GetParam(), DType::F32, 1e-5); }
TEST_P(Parity, ConvF64) { run_conv(GetParam(), DType::F64, 1e-10); }

INSTANTIATE_TEST_SUITE_P(Optimizers, Parity, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
