// Pooling layers, as torch.nn.MaxPool1d/2d/3d, AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d/3d and
// AdaptiveMaxPool1d/2d/3d, over [N, C, *spatial] inputs. Each holds its config (a plain
// field: nothing to train).
#pragma once

#include <array>
#include <cstddef>
#include <optional>

#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

namespace detail {
DynTensor max_pool_forward(const DynTensor& x, const std::vector<std::size_t>& kernel,
                           const std::optional<std::vector<std::size_t>>& stride,
                           const std::vector<std::size_t>& padding,
                           const std::vector<std::size_t>& dilation, bool ceil_mode,
                           const char* layer);
DynTensor avg_pool_forward(const DynTensor& x, const std::vector<std::size_t>& kernel,
                           const std::optional<std::vector<std::size_t>>& stride,
                           const std::vector<std::size_t>& padding, bool count_include_pad,
                           bool ceil_mode, std::optional<double> divisor_override,
                           const char* layer);
DynTensor adaptive_avg_pool_forward(const DynTensor& x, const std::vector<std::size_t>& output,
                                    const char* layer);
DynTensor adaptive_max_pool_forward(const DynTensor& x, const std::vector<std::size_t>& output,
                                    const char* layer);
// "<Base>1d", "<Base>2d" or "<Base>3d", and the same with "nn::" before it.
template <std::size_t N>
constexpr const char* pool_name(const char* n1, const char* n2, const char* n3) {
  static_assert(N >= 1 && N <= 3, "pools have 1 to 3 spatial dims");
  return N == 1 ? n1 : N == 2 ? n2 : n3;
}
template <std::size_t N>
std::optional<std::vector<std::size_t>> opt_vec(
    const std::optional<std::array<std::size_t, N>>& a) {
  if (!a) return std::nullopt;
  return std::vector<std::size_t>(a->begin(), a->end());
}
}  // namespace detail

template <std::size_t N>
struct MaxPool;
template <std::size_t N>
struct AvgPool;
template <std::size_t N>
struct AdaptiveAvgPool;
template <std::size_t N>
struct AdaptiveMaxPool;

template <std::size_t N>
struct MaxPoolConfig {
  std::array<std::size_t, N> kernel_size;
  std::optional<std::array<std::size_t, N>> stride = std::nullopt;  // default: the kernel
  std::array<std::size_t, N> padding = {};
  std::array<std::size_t, N> dilation = filled1();
  bool ceil_mode = false;  // round the number of windows up, as PyTorch's ceil_mode
  EMBER_CONFIG(MaxPoolConfig, kernel_size, stride, padding, dilation, ceil_mode)
  MaxPool<N> init() const { return {*this}; }
  static constexpr std::array<std::size_t, N> filled1() {
    std::array<std::size_t, N> a{};
    a.fill(1);
    return a;
  }
};

template <std::size_t N>
struct MaxPool {
  MaxPoolConfig<N> config;
  EMBER_MODULE_NAMED(MaxPool, detail::pool_name<N>("MaxPool1d", "MaxPool2d", "MaxPool3d"), config)
  template <class K>
  Tensor<N + 2, K> forward(const Tensor<N + 2, K>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<N + 2, K> {
      return Tensor<N + 2, K>(detail::max_pool_forward(
          x.dyn(), detail::to_vec(config.kernel_size), detail::opt_vec(config.stride),
          detail::to_vec(config.padding), detail::to_vec(config.dilation), config.ceil_mode,
          detail::pool_name<N>("nn::MaxPool1d", "nn::MaxPool2d", "nn::MaxPool3d")));
    });
  }
};

template <std::size_t N>
struct AvgPoolConfig {
  std::array<std::size_t, N> kernel_size;
  std::optional<std::array<std::size_t, N>> stride = std::nullopt;  // default: the kernel
  std::array<std::size_t, N> padding = {};
  bool count_include_pad = true;
  bool ceil_mode = false;
  std::optional<double> divisor_override = std::nullopt;  // divide every window by this
  EMBER_CONFIG(AvgPoolConfig, kernel_size, stride, padding, count_include_pad, ceil_mode,
               divisor_override)
  AvgPool<N> init() const { return {*this}; }
};

template <std::size_t N>
struct AvgPool {
  AvgPoolConfig<N> config;
  EMBER_MODULE_NAMED(AvgPool, detail::pool_name<N>("AvgPool1d", "AvgPool2d", "AvgPool3d"), config)
  Tensor<N + 2> forward(const Tensor<N + 2>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<N + 2> {
      return Tensor<N + 2>(detail::avg_pool_forward(
          x.dyn(), detail::to_vec(config.kernel_size), detail::opt_vec(config.stride),
          detail::to_vec(config.padding), config.count_include_pad, config.ceil_mode,
          config.divisor_override,
          detail::pool_name<N>("nn::AvgPool1d", "nn::AvgPool2d", "nn::AvgPool3d")));
    });
  }
};

// Output extent per spatial dim; window i covers [floor(i * in / out), ceil((i + 1) * in / out)).
template <std::size_t N>
struct AdaptiveAvgPoolConfig {
  std::array<std::size_t, N> output_size;
  EMBER_CONFIG(AdaptiveAvgPoolConfig, output_size)
  AdaptiveAvgPool<N> init() const { return {*this}; }
};

template <std::size_t N>
struct AdaptiveAvgPool {
  AdaptiveAvgPoolConfig<N> config;
  EMBER_MODULE_NAMED(AdaptiveAvgPool,
                     detail::pool_name<N>("AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
                                          "AdaptiveAvgPool3d"),
                     config)
  Tensor<N + 2> forward(const Tensor<N + 2>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<N + 2> {
      return Tensor<N + 2>(detail::adaptive_avg_pool_forward(
          x.dyn(), detail::to_vec(config.output_size),
          detail::pool_name<N>("nn::AdaptiveAvgPool1d", "nn::AdaptiveAvgPool2d",
                               "nn::AdaptiveAvgPool3d")));
    });
  }
};

// The maximum over the same windows as AdaptiveAvgPool's (Burn has no such layer). Ties
// within a window share the gradient (ember's max rule), where PyTorch gives it to one.
template <std::size_t N>
struct AdaptiveMaxPoolConfig {
  std::array<std::size_t, N> output_size;
  EMBER_CONFIG(AdaptiveMaxPoolConfig, output_size)
  AdaptiveMaxPool<N> init() const { return {*this}; }
};

template <std::size_t N>
struct AdaptiveMaxPool {
  AdaptiveMaxPoolConfig<N> config;
  EMBER_MODULE_NAMED(AdaptiveMaxPool,
                     detail::pool_name<N>("AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
                                          "AdaptiveMaxPool3d"),
                     config)
  template <class K>
  Tensor<N + 2, K> forward(const Tensor<N + 2, K>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<N + 2, K> {
      return Tensor<N + 2, K>(detail::adaptive_max_pool_forward(
          x.dyn(), detail::to_vec(config.output_size),
          detail::pool_name<N>("nn::AdaptiveMaxPool1d", "nn::AdaptiveMaxPool2d",
                               "nn::AdaptiveMaxPool3d")));
    });
  }
};

using MaxPool1d = MaxPool<1>;
using MaxPool2d = MaxPool<2>;
using MaxPool1dConfig = MaxPoolConfig<1>;
using MaxPool2dConfig = MaxPoolConfig<2>;
using AvgPool1d = AvgPool<1>;
using AvgPool2d = AvgPool<2>;
using AvgPool1dConfig = AvgPoolConfig<1>;
using AvgPool2dConfig = AvgPoolConfig<2>;
using AdaptiveAvgPool1d = AdaptiveAvgPool<1>;
using AdaptiveAvgPool2d = AdaptiveAvgPool<2>;
using AdaptiveAvgPool1dConfig = AdaptiveAvgPoolConfig<1>;
using AdaptiveAvgPool2dConfig = AdaptiveAvgPoolConfig<2>;
using MaxPool3d = MaxPool<3>;
using MaxPool3dConfig = MaxPoolConfig<3>;
using AvgPool3d = AvgPool<3>;
using AvgPool3dConfig = AvgPoolConfig<3>;
using AdaptiveAvgPool3d = AdaptiveAvgPool<3>;
using AdaptiveAvgPool3dConfig = AdaptiveAvgPoolConfig<3>;
using AdaptiveMaxPool1d = AdaptiveMaxPool<1>;
using AdaptiveMaxPool2d = AdaptiveMaxPool<2>;
using AdaptiveMaxPool3d = AdaptiveMaxPool<3>;
using AdaptiveMaxPool1dConfig = AdaptiveMaxPoolConfig<1>;
using AdaptiveMaxPool2dConfig = AdaptiveMaxPoolConfig<2>;
using AdaptiveMaxPool3dConfig = AdaptiveMaxPoolConfig<3>;

}  // namespace ember::nn
