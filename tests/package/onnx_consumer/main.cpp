// The generated module of tests/onnx/models/small_cnn.onnx, built against the installed
// package, run beside the installed run-time loader on the same input: the two must agree.
#include <cstdio>
#include <vector>

#include <ember/ember.hpp>
#include <ember/onnx/onnx.hpp>

#include "small_cnn.hpp"

int main() {
  using namespace ember;
  try {
    const Device dev = Device::cpu();
    std::vector<float> v(2 * 3 * 16 * 16);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(int(i * 37 % 101) - 50) / 25.0f;
    const DynTensor x = ops::from_data(TensorData::from<float>(v, Shape{2, 3, 16, 16}), dev);
    auto net = generated::SmallCnn::load(EMBER_WEIGHTS, dev);
    const TensorData y = net.forward(x).to_data();
    const TensorData want = onnx::load(EMBER_ONNX_MODEL, dev).run({x})[0].to_data();
    y.assert_approx_eq(want, 1e-5, 1e-6);
    std::printf("onnx consumer: %s, %zu parameters, output %s: ok\n", "SmallCnn", net.num_params(),
                y.shape().to_string().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnx consumer: %s\n", e.what());
    return 1;
  }
}
