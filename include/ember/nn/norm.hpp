// Normalisation layers, as torch.nn.BatchNorm1d/2d/3d (one BatchNorm for inputs of rank 2
// to 5), LayerNorm, GroupNorm and RMSNorm, with PyTorch's parameter and buffer names.
#pragma once

#include <cstddef>
#include <optional>

#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

// Note [Batch norm modes]
// Training mode is chosen by the input's device, as Burn: on an autodiff device the batch
// statistics normalise the input (biased variance) and the running statistics are updated
// in place — running = (1 - momentum) running + momentum batch, with the unbiased batch
// variance, and num_batches_tracked += 1, as PyTorch — through the buffers' interior state,
// so the const forward updates them. Elsewhere the running statistics normalise.
struct BatchNorm {
  std::optional<Param<Tensor<1>>> weight;      // [C], ones (affine)
  std::optional<Param<Tensor<1>>> bias;        // [C], zeros (affine)
  Buffer<Tensor<1>> running_mean;              // [C], zeros
  Buffer<Tensor<1>> running_var;               // [C], ones
  Buffer<Tensor<1, Int>> num_batches_tracked;  // one element, stored as a scalar
  double eps = 1e-5;
  double momentum = 0.1;
  EMBER_MODULE(BatchNorm, weight, bias, running_mean, running_var, num_batches_tracked, eps,
               momentum)

  // [N, C], [N, C, L], [N, C, H, W] or [N, C, D, H, W].
  DynTensor forward_dyn(const DynTensor& x) const;
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    static_assert(D >= 2 && D <= 5, "nn::BatchNorm takes inputs of rank 2 to 5");
    return Tensor<D>(forward_dyn(x.dyn()));
  }
  std::size_t num_features() const { return running_mean.shape()[0]; }
};

struct BatchNormConfig {
  std::size_t num_features;
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = true;
  EMBER_CONFIG(BatchNormConfig, num_features, eps, momentum, affine)
  BatchNorm init(const Device& device) const;
};

// Over the last dim: (x - mean) / sqrt(var + eps) * weight + bias, biased variance.
struct LayerNorm {
  std::optional<Param<Tensor<1>>> weight;  // [d], ones
  std::optional<Param<Tensor<1>>> bias;    // [d], zeros
  std::size_t d_model = 0;
  double eps = 1e-5;
  EMBER_MODULE(LayerNorm, weight, bias, d_model, eps)

  DynTensor forward_dyn(const DynTensor& x) const;
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return Tensor<D>(forward_dyn(x.dyn()));
  }
};

struct LayerNormConfig {
  std::size_t d_model;
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;
  EMBER_CONFIG(LayerNormConfig, d_model, eps, elementwise_affine, bias)
  LayerNorm init(const Device& device) const;
};

// x [N, C, *]: channels split into num_groups groups, each normalised over its channels and
// the spatial dims; then a per-channel weight and bias.
struct GroupNorm {
  std::optional<Param<Tensor<1>>> weight;  // [C], ones
  std::optional<Param<Tensor<1>>> bias;    // [C], zeros
  std::size_t num_groups = 1;
  std::size_t num_channels = 0;
  double eps = 1e-5;
  EMBER_MODULE(GroupNorm, weight, bias, num_groups, num_channels, eps)

  DynTensor forward_dyn(const DynTensor& x) const;
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    static_assert(D >= 2, "nn::GroupNorm takes [N, C, *] inputs");
    return Tensor<D>(forward_dyn(x.dyn()));
  }
};

struct GroupNormConfig {
  std::size_t num_groups;
  std::size_t num_channels;
  double eps = 1e-5;
  bool affine = true;
  EMBER_CONFIG(GroupNormConfig, num_groups, num_channels, eps, affine)
  GroupNorm init(const Device& device) const;
};

// x [N, C, *]: each sample's channel normalised over its spatial dims, as
// torch.nn.InstanceNorm1d/2d/3d without running statistics (track_running_stats=False);
// affine (off by default, as PyTorch) adds a per-channel weight and bias.
struct InstanceNorm {
  std::optional<Param<Tensor<1>>> weight;  // [C], ones (affine)
  std::optional<Param<Tensor<1>>> bias;    // [C], zeros (affine)
  std::size_t num_channels = 0;
  double eps = 1e-5;
  EMBER_MODULE(InstanceNorm, weight, bias, num_channels, eps)

  DynTensor forward_dyn(const DynTensor& x) const;
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    static_assert(D >= 3, "nn::InstanceNorm takes [N, C, *spatial] inputs");
    return Tensor<D>(forward_dyn(x.dyn()));
  }
};

struct InstanceNormConfig {
  std::size_t num_channels;
  double eps = 1e-5;
  bool affine = false;
  EMBER_CONFIG(InstanceNormConfig, num_channels, eps, affine)
  InstanceNorm init(const Device& device) const;
};

// Over the last dim: x / sqrt(mean(x^2) + eps) * weight, as torch.nn.RMSNorm; eps defaults,
// as PyTorch's, to the machine epsilon of the input's dtype.
struct RmsNorm {
  std::optional<Param<Tensor<1>>> weight;  // [d], ones
  std::size_t d_model = 0;
  std::optional<double> eps;
  EMBER_MODULE(RmsNorm, weight, d_model, eps)

  DynTensor forward_dyn(const DynTensor& x) const;
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return Tensor<D>(forward_dyn(x.dyn()));
  }
};

struct RmsNormConfig {
  std::size_t d_model;
  std::optional<double> eps = std::nullopt;
  bool elementwise_affine = true;
  EMBER_CONFIG(RmsNormConfig, d_model, eps, elementwise_affine)
  RmsNorm init(const Device& device) const;
};

// LocalResponseNorm, as torch.nn.LocalResponseNorm: x / (k + alpha / size * sum of x^2 over
// the `size` neighbouring channels, zero-padded)^beta, for [N, C, *] inputs.
struct LocalResponseNorm {
  std::size_t size = 1;
  double alpha = 1e-4, beta = 0.75, k = 1.0;
  EMBER_MODULE(LocalResponseNorm, size, alpha, beta, k)
  DynTensor forward_dyn(const DynTensor& x) const;
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    static_assert(D >= 3, "nn::LocalResponseNorm takes [N, C, *] inputs");
    return Tensor<D>(forward_dyn(x.dyn()));
  }
};

struct LocalResponseNormConfig {
  std::size_t size;
  double alpha = 1e-4, beta = 0.75, k = 1.0;
  EMBER_CONFIG(LocalResponseNormConfig, size, alpha, beta, k)
  LocalResponseNorm init() const;
};

}  // namespace ember::nn
