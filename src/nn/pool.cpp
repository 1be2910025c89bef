// Pooling layers: input checks, and the module_ops behind each.
#include <algorithm>
#include <cstdint>

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
                           const std::vector<std::size_t>& dilation, bool ceil_mode,
                           const char* layer) {
  check_rank(x, kernel.size(), layer);
  check_window(x, kernel, padding, dilation, layer);
  return module_ops::max_pool(x, kernel, {stride.value_or(kernel), padding, dilation}, ceil_mode);
}

DynTensor avg_pool_forward(const DynTensor& x, const std::vector<std::size_t>& kernel,
                           const std::optional<std::vector<std::size_t>>& stride,
                           const std::vector<std::size_t>& padding, bool count_include_pad,
                           bool ceil_mode, std::optional<double> divisor_override,
                           const char* layer) {
  check_rank(x, kernel.size(), layer);
  check_window(x, kernel, padding, std::vector<std::size_t>(kernel.size(), 1), layer);
  return module_ops::avg_pool(x, kernel, {stride.value_or(kernel), padding, {}}, count_include_pad,
                              ceil_mode, divisor_override);
}

// Adaptive pooling is module_ops' (Note [Adaptive average pooling] and Note [Adaptive max
// pooling] in src/tensor/ops_adaptive.cpp), with the layer's name in its errors.
DynTensor adaptive_avg_pool_forward(const DynTensor& x, const std::vector<std::size_t>& output,
                                    const char* layer) {
  return module_ops::detail::adaptive_avg_pool(x, output, layer);
}

DynTensor adaptive_max_pool_forward(const DynTensor& x, const std::vector<std::size_t>& output,
                                    const char* layer) {
  return module_ops::detail::adaptive_max_pool(x, output, layer);
}

}  // namespace ember::nn::detail
