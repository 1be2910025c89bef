// ember_embedded_inference: the embedded build without the autodiff decorator
// (EMBER_EMBEDDED_AUTODIFF=OFF, docs/embedded.md). Inference runs — a linear layer and relu
// against an f64 reference computed here — and asking for the decorator reaches the fail
// handler with a message saying it is not part of the build. The exit code is the number
// of failed cases.
#include <cstddef>
#include <cstdio>
#include <vector>

#include "board.hpp"
#include "check.hpp"
#include "ember/base/error.hpp"
#include "ember/tensor/activation.hpp"
#include "ember/tensor/tensor.hpp"
#include "expect_fail.hpp"

using namespace ember;

static_assert(EMBER_EMBEDDED_AUTODIFF == 0, "built against ember_embedded_inference");

int main() {
  set_fail_handler(firmware::on_fail);
  const Device dev = Device::cpu();
  // relu(x w^T + b): x [2, 3], w [4, 3], b [4].
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f};
  const std::vector<float> w = {1, 0, -1, 0.5f, 2, 0, -1, 1, 1, 0.25f, -0.5f, 0.75f};
  const std::vector<float> b = {0.1f, -0.2f, 0.3f, 0};
  std::vector<double> want(8);
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t o = 0; o < 4; ++o) {
      double s = b[o];
      for (std::size_t k = 0; k < 3; ++k) s += double(x[i * 3 + k]) * w[o * 3 + k];
      want[i * 4 + o] = s > 0 ? s : 0;
    }
  }
  const auto tx = Tensor<2>::from_data(TensorData::from<float>(x, Shape{2, 3}), dev);
  const auto tw = Tensor<2>::from_data(TensorData::from<float>(w, Shape{4, 3}), dev);
  const auto tb = Tensor<1>::from_data(TensorData::from<float>(b, Shape{4}), dev);
  const auto y = activation::relu(tx.matmul(tw.transpose()) + tb.unsqueeze<2>());
  firmware::check_close("linear_relu", y.to_data().to_vector<float>(), want, 1e-6);
  firmware::expect_fail("autodiff_absent", [&] { (void)dev.autodiff(); },
                        {"autodiff", "not part of this build"});
  return firmware::summary();
}
