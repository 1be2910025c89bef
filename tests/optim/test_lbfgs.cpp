// L-BFGS with the strong-Wolfe line search: it finds the minimiser of a convex quadratic
// (known in closed form) and of the Rosenbrock function (at (1, 1)) through a closure, and
// it follows torch.optim.LBFGS step for step (golden values of tests/optim/make_golden.py,
// f64, 1e-10), with and without the line search; its state saved mid-way resumes exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "optim/mlp.hpp"

using namespace ember;
using namespace ember::optim_test;

namespace {

struct Point2 {
  nn::Param<Tensor<2>> x;
  EMBER_MODULE(Point2, x)
};
struct Point1 {
  nn::Param<Tensor<1>> x;
  EMBER_MODULE(Point1, x)
};

TEST(Lbfgs, MinimisesAQuadratic) {
  // f(x) = ½ x A x^T - b x^T with A SPD and b = x* A: the minimiser is x*.
  const Device ad = Device::cpu().autodiff();
  constexpr std::size_t n = 5;
  std::vector<double> a(n * n), xs = {1.0, -2.0, 0.5, 3.0, -1.0}, b(n, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) a[i * n + j] = i == j ? double(i + 1) : 0.1;
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < n; ++i) b[j] += xs[i] * a[i * n + j];
  const Tensor<2> A(tensor_of(a, Shape{n, n}, DType::F64, ad));
  const Tensor<2> B(tensor_of(b, Shape{1, n}, DType::F64, ad));
  Point2 p{nn::Param<Tensor<2>>(Tensor<2>(ops::zeros(Shape{1, n}, DType::F64, ad)))};
  auto opt = optim::LbfgsConfig{}
                 .with_max_iter(50)
                 .with_tolerance_grad(1e-12)
                 .with_tolerance_change(1e-16)
                 .init();
  std::function<std::pair<double, optim::GradientsParams>(const Point2&)> closure =
      [&](const Point2& m) {
        const auto& x = m.x.val();
        auto f = x.matmul(A).mul(x).sum().mul_scalar(0.5).sub(x.mul(B).sum());
        const double v = f.into_scalar<double>();
        return std::make_pair(v, optim::GradientsParams::from_grads(f.backward(), m));
      };
  p = opt.step(1.0, std::move(p), closure);
  const auto got = ops::cast(p.x.val().dyn(), DType::F64).to_data().to_vector<double>();
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], xs[i], 1e-8) << i;
  EXPECT_LE(opt.evaluations(), 50u * 5 / 4);
  EXPECT_TRUE(p.x.val().is_require_grad());
}

TEST(Lbfgs, MinimisesRosenbrock) {
  const Device ad = Device::cpu().autodiff();
  Point1 p{nn::Param<Tensor<1>>(Tensor<1>(tensor_of({-1.2, 1.0}, Shape{2}, DType::F64, ad)))};
  auto opt = optim::LbfgsConfig{}
                 .with_max_iter(200)
                 .with_tolerance_grad(1e-10)
                 .with_tolerance_change(1e-16)
                 .with_history_size(10)
                 .init();
  std::function<std::pair<double, optim::GradientsParams>(const Point1&)> closure =
      [&](const Point1& m) {
        const auto& x = m.x.val();
        auto x0 = x.narrow(0, 0, 1), x1 = x.narrow(0, 1, 1);
        auto f = x0.neg()
                     .add_scalar(1.0)
                     .square()
                     .add(x1.sub(x0.square()).square().mul_scalar(100.0))
                     .sum();
        const double v = f.into_scalar<double>();
        return std::make_pair(v, optim::GradientsParams::from_grads(f.backward(), m));
      };
  p = opt.step(1.0, std::move(p), closure);
  const auto got = ops::cast(p.x.val().dyn(), DType::F64).to_data().to_vector<double>();
  EXPECT_NEAR(got[0], 1.0, 1e-6);
  EXPECT_NEAR(got[1], 1.0, 1e-6);
  EXPECT_NEAR(opt.last_loss(), 24.2, 1e-12);  // the loss at the start: f(-1.2, 1)
  // Without the line search, fixed steps of lr still descend on the quadratic bowl.
  Point1 q{nn::Param<Tensor<1>>(Tensor<1>(tensor_of({0.5, 0.5}, Shape{2}, DType::F64, ad)))};
  auto fixed = optim::LbfgsConfig{}.with_strong_wolfe(false).with_max_iter(5).init();
  q = fixed.step(1e-3, std::move(q), closure);
  const auto qv = ops::cast(q.x.val().dyn(), DType::F64).to_data().to_vector<double>();
  const double fq = std::pow(1 - qv[0], 2) + 100 * std::pow(qv[1] - qv[0] * qv[0], 2);
  EXPECT_LT(fq, 0.25 + 100 * 0.0625);
}

using Closure = std::function<std::pair<double, optim::GradientsParams>(const Mlp&)>;

Closure mse_closure(const Tensor<2>& x, const Tensor<2>& t) {
  return [x, t](const Mlp& m) {
    auto loss = m.forward(x).sub(t).square().mean();
    const double v = loss.into_scalar<double>();
    return std::make_pair(v, optim::GradientsParams::from_grads(loss.backward(), m));
  };
}

optim::LbfgsConfig config_of(const nn::Json& c) {
  return optim::LbfgsConfig{}
      .with_max_iter(c["max_iter"].get<std::size_t>())
      .with_history_size(c["history_size"].get<std::size_t>())
      .with_strong_wolfe(c.contains("line_search_fn"));
}

// Every step() call of `name` against torch.optim.LBFGS's; with resume_after > 0 the
// optimizer's state is saved after that many calls and loaded into a fresh one.
void match_torch(const std::string& name, std::size_t resume_after) {
  std::ifstream gf(std::string(EMBER_OPTIM_GOLDEN_DIR) + "/optimizers.json");
  std::ifstream lf(std::string(EMBER_OPTIM_GOLDEN_DIR) + "/lbfgs.json");
  ASSERT_TRUE(gf.good() && lf.good()) << "run tests/optim/make_golden.py";
  const nn::Json g = nn::Json::parse(gf), golden = nn::Json::parse(lf);
  const nn::Json& c = golden["cases"][name];
  const Device ad = Device::cpu().autodiff();
  Weights init;
  for (const auto& [p, v] : g["init"].items()) init[p] = v.get<std::vector<double>>();
  Mlp net = make_mlp(init, DType::F64, ad);
  const Tensor<2> x(tensor_of(g["x"].get<std::vector<double>>(), Shape{8, 4}, DType::F64, ad));
  const Tensor<2> t(tensor_of(g["t"].get<std::vector<double>>(), Shape{8, 3}, DType::F64, ad));
  const Closure closure = mse_closure(x, t);
  auto opt = config_of(c["config"]).init();
  const double lr = c["config"]["lr"].get<double>();
  const auto& steps = c["steps"];
  for (std::size_t k = 0; k < steps.size(); ++k) {
    if (resume_after > 0 && k == resume_after) {
      const optim::OptimizerState saved = opt.state();
      opt = config_of(c["config"]).init();
      opt.load_state(saved);
      net = make_mlp(weights_of(net), DType::F64, ad);
    }
    net = opt.step(lr, std::move(net), closure);
    const nn::Json& want = steps[k];
    SCOPED_TRACE(name + " call " + std::to_string(k + 1));
    EXPECT_EQ(opt.evaluations(), want["evaluations"].get<std::size_t>());
    EXPECT_EQ(opt.iterations(), want["iterations"].get<std::size_t>());
    EXPECT_NEAR(opt.last_loss(), want["loss"].get<double>(), 1e-10 * want["loss"].get<double>());
    const Weights got = weights_of(net);
    for (const auto& [path, v] : want["params"].items()) {
      const auto w = v.get<std::vector<double>>();
      double scale = 0.0;
      for (double e : w) scale = std::max(scale, std::abs(e));
      for (std::size_t i = 0; i < w.size(); ++i)
        ASSERT_NEAR(got.at(path)[i], w[i], 1e-10 * scale) << path << "[" << i << "]";
    }
  }
}

TEST(Lbfgs, MatchesTorchStepForStepWithStrongWolfe) { match_torch("lbfgs_strong_wolfe", 0); }
TEST(Lbfgs, MatchesTorchStepForStepWithAFixedStep) { match_torch("lbfgs_fixed_step", 0); }
TEST(Lbfgs, StateSavedMidwayResumesExactly) {
  match_torch("lbfgs_strong_wolfe", 3);
  match_torch("lbfgs_fixed_step", 2);
}

TEST(Lbfgs, StateFromAnotherModelOrOptimizerIsRefused) {
  const Device ad = Device::cpu().autodiff();
  Point1 p{nn::Param<Tensor<1>>(Tensor<1>(tensor_of({1.0, 2.0}, Shape{2}, DType::F64, ad)))};
  std::function<std::pair<double, optim::GradientsParams>(const Point1&)> closure =
      [](const Point1& m) {
        auto f = m.x.val().square().sum();
        const double v = f.into_scalar<double>();
        return std::make_pair(v, optim::GradientsParams::from_grads(f.backward(), m));
      };
  auto opt = optim::LbfgsConfig{}.with_max_iter(1).init();
  p = opt.step(1.0, std::move(p), closure);
  const optim::OptimizerState saved = opt.state();
  Point1 q{nn::Param<Tensor<1>>(Tensor<1>(tensor_of({1.0, 2.0, 3.0}, Shape{3}, DType::F64, ad)))};
  auto other = optim::LbfgsConfig{}.init();
  other.load_state(saved);
  try {
    q = other.step(1.0, std::move(q), closure);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("state is for 2 parameter values, the model has 3"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(q.x.shape(), Shape{3});
  auto adam = optim::AdamConfig{}.init();
  try {
    other.load_state(adam.state());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the state is from optim::Adam, not optim::Lbfgs"),
              std::string::npos)
        << e.what();
  }
}

TEST(Lbfgs, BadInput) {
  EXPECT_THROW((optim::LbfgsConfig{}.with_history_size(0).init()), Error);
  EXPECT_THROW((optim::LbfgsConfig{}.with_max_iter(0).init()), Error);
  const Device ad = Device::cpu().autodiff();
  Point1 p{nn::Param<Tensor<1>>(Tensor<1>(tensor_of({1.0, 2.0}, Shape{2}, DType::F64, ad)))};
  auto opt = optim::LbfgsConfig{}.init();
  std::function<std::pair<double, optim::GradientsParams>(const Point1&)> closure =
      [](const Point1&) { return std::make_pair(0.0, optim::GradientsParams{}); };
  EXPECT_THROW(p = opt.step(-1.0, std::move(p), closure), Error);
  EXPECT_EQ(p.x.shape(), Shape{2});
}

}  // namespace
