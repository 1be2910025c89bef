// Pooling layers, as torch.nn.MaxPool1d/2d, AvgPool1d/2d and AdaptiveAvgPool1d/2d, over
// [N, C, *spatial] inputs. Each holds its config (a plain field: nothing to train).
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
                           const std::vector<std::size_t>& dilation, const char* layer);
DynTensor avg_pool_forward(const DynTensor& x, const std::vector<std::size_t>& kernel,
                           const std::optional<std::vector<std::size_t>>& stride,
                           const std::vector<std::size_t>& padding, bool count_include_pad,
                           const char* layer);
DynTensor adaptive_avg_pool_forward(const DynTensor& x, const std::vector<std::size_t>& output,
                                    const char* layer);
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
struct MaxPoolConfig {
  std::array<std::size_t, N> kernel_size;
  std::optional<std::array<std::size_t, N>> stride = std::nullopt;  // default: the kernel
  std::array<std::size_t, N> padding = {};
  std::array<std::size_t, N> dilation = filled1();
  EMBER_CONFIG(MaxPoolConfig, kernel_size, stride, padding, dilation)
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
  EMBER_MODULE_NAMED(MaxPool, (N == 1 ? "MaxPool1d" : "MaxPool2d"), config)
  template <class K>
  Tensor<N + 2, K> forward(const Tensor<N + 2, K>& x) const {
    return Tensor<N + 2, K>(detail::max_pool_forward(
        x.dyn(), detail::to_vec(config.kernel_size), detail::opt_vec(config.stride),
        detail::to_vec(config.padding), detail::to_vec(config.dilation),
        (N == 1 ? "nn::MaxPool1d" : "nn::MaxPool2d")));
  }
};

template <std::size_t N>
struct AvgPoolConfig {
  std::array<std::size_t, N> kernel_size;
  std::optional<std::array<std::size_t, N>> stride = std::nullopt;  // default: the kernel
  std::array<std::size_t, N> padding = {};
  bool count_include_pad = true;
  EMBER_CONFIG(AvgPoolConfig, kernel_size, stride, padding, count_include_pad)
  AvgPool<N> init() const { return {*this}; }
};

template <std::size_t N>
struct AvgPool {
  AvgPoolConfig<N> config;
  EMBER_MODULE_NAMED(AvgPool, (N == 1 ? "AvgPool1d" : "AvgPool2d"), config)
  Tensor<N + 2> forward(const Tensor<N + 2>& x) const {
    return Tensor<N + 2>(detail::avg_pool_forward(
        x.dyn(), detail::to_vec(config.kernel_size), detail::opt_vec(config.stride),
        detail::to_vec(config.padding), config.count_include_pad,
        (N == 1 ? "nn::AvgPool1d" : "nn::AvgPool2d")));
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
  EMBER_MODULE_NAMED(AdaptiveAvgPool, (N == 1 ? "AdaptiveAvgPool1d" : "AdaptiveAvgPool2d"), config)
  Tensor<N + 2> forward(const Tensor<N + 2>& x) const {
    return Tensor<N + 2>(detail::adaptive_avg_pool_forward(
        x.dyn(), detail::to_vec(config.output_size),
        (N == 1 ? "nn::AdaptiveAvgPool1d" : "nn::AdaptiveAvgPool2d")));
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

}  // namespace ember::nn
