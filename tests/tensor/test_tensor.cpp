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
