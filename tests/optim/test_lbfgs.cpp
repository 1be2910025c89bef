// L-BFGS with the strong-Wolfe line search: it finds the minimiser of a convex quadratic
// (known in closed form) and of the Rosenbrock function (at (1, 1)) through a closure.
#include <gtest/gtest.h>

#include <cmath>

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
