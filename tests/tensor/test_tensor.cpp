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
