// Pooling layers: input checks, adaptive average pooling as one pooling matrix per dim and
// adaptive max pooling as one gathered window per output entry and dim.
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

// Note [Adaptive max pooling]
// Max over a box is the max over each dim in turn, so each dim is pooled alone: its
// windows (the adaptive average's) are at most `width` long; every window is read as
// `width` indices, a short one repeating its last entry (which leaves the max unchanged),
// by one index_select, and a max over the window axis. A repeated entry shares the
// window's gradient with its copies (ember's max rule: g / count), and the select's
// adjoint adds the shares back up, so it receives g once.
DynTensor adaptive_max_pool_forward(const DynTensor& x, const std::vector<std::size_t>& output,
                                    const char* layer) {
  const std::size_t n = output.size();
  check_rank(x, n, layer);
  DynTensor y = x;
  for (std::size_t d = 0; d < n; ++d) {
    const std::size_t in = x.shape()[2 + d], out = output[d];
    EMBER_CHECK(out > 0 && in > 0, std::string(layer) + ": output size " +
                                       Shape(output).to_string() + " and input " +
                                       x.shape().to_string() + " must be non-empty");
    std::size_t width = 0;
    for (std::size_t i = 0; i < out; ++i) {
      width = std::max(width, ((i + 1) * in + out - 1) / out - i * in / out);
    }
    std::vector<std::int64_t> idx;
    idx.reserve(out * width);
    for (std::size_t i = 0; i < out; ++i) {
      const std::size_t start = i * in / out, end = ((i + 1) * in + out - 1) / out;
      for (std::size_t j = 0; j < width; ++j)
        idx.push_back(std::int64_t(std::min(start + j, end - 1)));
    }
    const auto axis = std::int64_t(2 + d);
    DynTensor taps = ops::select(
        std::move(y), axis,
        ops::from_data(TensorData::from<std::int64_t>(idx, Shape{out * width}), x.device()));
    std::vector<std::size_t> dims(taps.shape().begin(), taps.shape().end());
    dims[2 + d] = out;
    dims.insert(dims.begin() + std::ptrdiff_t(3 + d), width);
    auto windows = ops::reshape(std::move(taps), Shape(dims));
    dims.erase(dims.begin() + std::ptrdiff_t(3 + d));
    y = ops::reshape(ops::reduce(ir::ReduceFn::Max, std::move(windows), std::int64_t(3 + d)),
                     Shape(dims));
  }
  return y;
}

}  // namespace ember::nn::detail
