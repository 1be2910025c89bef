// Pooling layers: input checks, and adaptive average pooling as two pooling matrices.
#include "ember/nn/pool.hpp"

#include "ember/tensor/module_ops.hpp"

namespace ember::nn::detail {

namespace {
void check_rank(const DynTensor& x, std::size_t n, const char* layer) {
  EMBER_CHECK(x.rank() == n + 2, std::string(layer) + ": expected a rank-" + std::to_string(n + 2) +
                                     " input [batch, channels, " + std::to_string(n) +
                                     " spatial dims], got shape " + x.shape().to_string());
}
void check_window(const DynTensor& x, const std::vector<std::size_t>& kernel,
                  const std::vector<std::size_t>& padding, const std::vector<std::size_t>& dilation,
                  const char* layer) {
  for (std::size_t i = 0; i < kernel.size(); ++i) {
    EMBER_CHECK(kernel[i] > 0, std::string(layer) + ": kernel sizes must be > 0");
    EMBER_CHECK(2 * padding[i] <= kernel[i],
                std::string(layer) + ": padding " + std::to_string(padding[i]) +
                    " must be at most half the kernel " + std::to_string(kernel[i]));
    const std::size_t span = dilation[i] * (kernel[i] - 1) + 1;
    EMBER_CHECK(span <= x.shape()[2 + i] + 2 * padding[i],
                std::string(layer) + ": the window (span " + std::to_string(span) +
                    ") is larger than the padded input " + x.shape().to_string());
  }
}
}  // namespace

DynTensor max_pool_forward(const DynTensor& x, const std::vector<std::size_t>& kernel,
                           const std::optional<std::vector<std::size_t>>& stride,
                           const std::vector<std::size_t>& padding,
                           const std::vector<std::size_t>& dilation, const char* layer) {
  check_rank(x, kernel.size(), layer);
  check_window(x, kernel, padding, dilation, layer);
  return module_ops::max_pool(x, kernel, {stride.value_or(kernel), padding, dilation});
}

DynTensor avg_pool_forward(const DynTensor& x, const std::vector<std::size_t>& kernel,
                           const std::optional<std::vector<std::size_t>>& stride,
                           const std::vector<std::size_t>& padding, bool count_include_pad,
                           const char* layer) {
  check_rank(x, kernel.size(), layer);
  check_window(x, kernel, padding, std::vector<std::size_t>(kernel.size(), 1), layer);
  return module_ops::avg_pool(x, kernel, {stride.value_or(kernel), padding, {}}, count_include_pad);
}

// Note [Adaptive average pooling]
// Output i of a dim averages input [floor(i in / out), ceil((i + 1) in / out)). A mean over a
// box is the product of per-dim means, so each dim is one matmul with an [out, in] matrix of
// 1 / window-length entries — exact windows for any in/out ratio, differentiable through
// matmul, and one op per dim whatever the sizes.
DynTensor adaptive_avg_pool_forward(const DynTensor& x, const std::vector<std::size_t>& output,
                                    const char* layer) {
  const std::size_t n = output.size();
  check_rank(x, n, layer);
  DynTensor y = x;
  for (std::size_t d = 0; d < n; ++d) {
    const std::size_t in = x.shape()[2 + d], out = output[d];
    EMBER_CHECK(out > 0 && in > 0, std::string(layer) + ": output size " +
                                       Shape(output).to_string() + " and input " +
                                       x.shape().to_string() + " must be non-empty");
    std::vector<double> p(out * in, 0.0);
    for (std::size_t i = 0; i < out; ++i) {
      const std::size_t start = i * in / out, end = ((i + 1) * in + out - 1) / out;
      for (std::size_t j = start; j < end; ++j) p[i * in + j] = 1.0 / double(end - start);
    }
    // Pool dim 2 + d: move it last, multiply by P^T [in, out], move it back.
    const std::int64_t axis = std::int64_t(2 + d), last = std::int64_t(x.rank() - 1);
    DynTensor pt = ops::cast(
        ops::from_data(TensorData::from<double>(p, Shape{out, in}), x.device()), x.dtype());
    y = ops::swap_dims(ops::matmul(ops::swap_dims(std::move(y), axis, last), ops::transpose(pt)),
                       axis, last);
  }
  return y;
}

}  // namespace ember::nn::detail
