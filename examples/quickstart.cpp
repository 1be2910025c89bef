// The first block of DESIGN §2: tensors on the Cpu, element-wise ops, matmul, reductions.
#include <cstdio>

#include <ember/ember.hpp>

using namespace ember;

int main() {
  Device dev = Device::cpu();
  auto a = Tensor<2>::from_data(TensorData::from<float>({1, 2, 3, 4}, Shape{2, 2}), dev);
  auto b = Tensor<2>::from_data(TensorData::from<float>({0.5f, -1, 0.25f, 2}, Shape{2, 2}), dev);
  auto c = (a.matmul(b) + 1.0f).exp().sum_dim(1);  // shape {2, 1}
  TensorData d = c.to_data();
  std::printf("c = %s\n", d.to_string().c_str());
  auto i = Tensor<1, Int>::arange(0, 10, dev);
  Tensor<2, Bool> m = a.greater_elem(2.0f);
  auto r = a.reshape<1>(Shape{4});
  auto t = a.transpose();
  auto s = a.slice({{0, 1}, {0, 2}});
  std::printf("arange = %s\n", i.to_data().to_string().c_str());
  std::printf("a > 2 = %s\n", m.to_data().to_string().c_str());
  std::printf("reshape = %s\n", r.to_data().to_string().c_str());
  std::printf("transpose = %s\n", t.to_data().to_string().c_str());
  std::printf("slice = %s\n", s.to_data().to_string().c_str());
  auto x = Tensor<2>::random(Shape{2, 2}, Distribution::normal(0.0, 1.0), dev);
  std::printf("random normal = %s\n", x.to_data().to_string().c_str());
  return 0;
}
