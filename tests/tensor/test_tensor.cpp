#include <gtest/gtest.h>

#include <cmath>

#include <ember/ember.hpp>

using namespace ember;

TEST(Tensor, DesignContractBlock) {
  Device dev = Device::cpu();
  auto a = Tensor<2>::from_data(TensorData::from<float>({1, 2, 3, 4}, Shape{2, 2}), dev);
  auto b = Tensor<2>::from_data(TensorData::from<float>({0.5f, -1, 0.25f, 2}, Shape{2, 2}), dev);
  auto c = (a.matmul(b) + 1.0f).exp().sum_dim(1);
  EXPECT_EQ(c.shape(), (Shape{2, 1}));
  // a @ b = [[1, 3], [2.5, 5]]; +1; exp; row sums.
  const double e0 = std::exp(2.0) + std::exp(4.0), e1 = std::exp(3.5) + std::exp(6.0);
  c.to_data().assert_approx_eq(TensorData::from<double>({e0, e1}, Shape{2, 1}), 1e-6, 1e-6);
}

// module_ops::layer_norm through each typed overload, against the closed form: rows
// [a, b] normalise to [-1, 1] / sqrt(1 + 4 eps / (b - a)^2) whatever a and b are.
TEST(Tensor, LayerNormTypedOverloads) {
  Device dev = Device::cpu();
  auto x =
      Tensor<2>::from_data(TensorData::from<double>({1, 3, -5, 5, 1e6, 1e6 + 2}, Shape{3, 2}), dev);
  const double eps = 1e-5;
  std::vector<double> plain;
  for (double half : {1.0, 5.0, 1.0}) {
    const double r = 1.0 / std::sqrt(1.0 + eps / (half * half));
    plain.push_back(-r);
    plain.push_back(r);
  }
  auto w = Tensor<1>::from_data(TensorData::from<double>({2, -1}, Shape{2}), dev);
  auto b = Tensor<1>::from_data(TensorData::from<double>({0.5, 3}, Shape{2}), dev);
  std::vector<double> affine(plain), scaled(plain);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    scaled[i] = plain[i] * (i % 2 == 0 ? 2.0 : -1.0);
    affine[i] = scaled[i] + (i % 2 == 0 ? 0.5 : 3.0);
  }
  const auto expect = [](const Tensor<2>& y, const std::vector<double>& v) {
    y.to_data().assert_approx_eq(TensorData::from<double>(v, Shape{3, 2}), 1e-9, 1e-9);
  };
  expect(module_ops::layer_norm(x, Shape{2}, eps), plain);
  expect(module_ops::layer_norm(x, w, b, eps), affine);
  expect(module_ops::layer_norm(x, w, eps), scaled);
  expect(module_ops::layer_norm<2, 1>(x, Shape{2}, std::nullopt, b, eps),
         std::vector<double>{plain[0] + 0.5, plain[1] + 3, plain[2] + 0.5, plain[3] + 3,
                             plain[4] + 0.5, plain[5] + 3});
  // Both dims at once: the 6 values share one mean and variance.
  auto y = module_ops::layer_norm(x.slice({{0, 2}, {0, 2}}), Shape{2, 2}, eps);
  const std::vector<double> v = {1, 3, -5, 5};
  const double mean = 1.0, var = (0 + 4 + 36 + 16) / 4.0;
  std::vector<double> ref;
  for (double e : v) ref.push_back((e - mean) / std::sqrt(var + eps));
  y.to_data().assert_approx_eq(TensorData::from<double>(ref, Shape{2, 2}), 1e-9, 1e-9);
}

// softmax and log_softmax along each dim against f64 closed forms, with a row that holds
// -inf and one large enough to overflow a naive exp.
TEST(Tensor, SoftmaxMatchesClosedForm) {
  Device dev = Device::cpu();
  const std::vector<double> v = {1,  2, 3, -1e30, 0.5, 100, 90, -2, 7,    0,     1000, 1001,
                                 -3, 4, 4, 4,     2,   1,   0,  -1, 0.25, 0.125, 3,    3};
  const std::size_t rows = 4, cols = 6;
  auto x =
      Tensor<2>::from_data(TensorData::from<double>(v, Shape{rows, cols}), dev).cast(DType::F32);
  for (int dim = 0; dim < 2; ++dim) {
    const std::size_t outer = dim == 1 ? rows : cols, n = dim == 1 ? cols : rows;
    std::vector<double> sm(v.size()), lsm(v.size());
    for (std::size_t o = 0; o < outer; ++o) {
      const auto at = [&](std::size_t i) { return dim == 1 ? o * cols + i : i * cols + o; };
      double m = -INFINITY;
      for (std::size_t i = 0; i < n; ++i) m = std::max(m, v[at(i)]);
      double s = 0;
      for (std::size_t i = 0; i < n; ++i) s += std::exp(v[at(i)] - m);
      for (std::size_t i = 0; i < n; ++i) {
        sm[at(i)] = std::exp(v[at(i)] - m) / s;
        lsm[at(i)] = v[at(i)] - m - std::log(s);
      }
    }
    activation::softmax(x, dim).to_data().assert_approx_eq(
        TensorData::from<double>(sm, Shape{rows, cols}), 1e-5, 1e-7);
    activation::log_softmax(x, dim).to_data().assert_approx_eq(
        TensorData::from<double>(lsm, Shape{rows, cols}), 1e-5, 1e-4);
  }
}
