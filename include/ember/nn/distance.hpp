// Distances between two batches of vectors, as torch.nn.CosineSimilarity and
// torch.nn.PairwiseDistance (no parameters).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

namespace detail {
// sum(a * b, dim) / (max(norm(a, dim), eps) * max(norm(b, dim), eps)), the dim removed
// (a and b broadcast).
DynTensor cosine_similarity(const DynTensor& a, const DynTensor& b, std::int64_t dim, double eps);
// ||a - b + eps||_p over the last dim (removed unless keepdim); p > 0 or infinity.
DynTensor pairwise_distance(const DynTensor& a, const DynTensor& b, double p, double eps,
                            bool keepdim);
}  // namespace detail

struct CosineSimilarity {
  std::int64_t dim = 1;
  double eps = 1e-8;
  EMBER_MODULE(CosineSimilarity, dim, eps)
  // x1, x2 of rank D (broadcastable) -> rank D - 1.
  template <std::size_t D>
  Tensor<D - 1> forward(const Tensor<D>& x1, const Tensor<D>& x2) const {
    return detail::at_layer(*this, [&]() -> Tensor<D - 1> {
      return Tensor<D - 1>(detail::cosine_similarity(x1.dyn(), x2.dyn(), dim, eps));
    });
  }
};

struct CosineSimilarityConfig {
  std::int64_t dim = 1;
  double eps = 1e-8;
  EMBER_CONFIG(CosineSimilarityConfig, dim, eps)
  CosineSimilarity init() const { return {dim, eps}; }
};

struct PairwiseDistance {
  double p = 2.0;
  double eps = 1e-6;
  EMBER_MODULE(PairwiseDistance, p, eps)
  // x1, x2 [N, d] -> [N].
  Tensor<1> forward(const Tensor<2>& x1, const Tensor<2>& x2) const {
    return detail::at_layer(*this, [&]() -> Tensor<1> {
      return Tensor<1>(detail::pairwise_distance(x1.dyn(), x2.dyn(), p, eps, false));
    });
  }
};

struct PairwiseDistanceConfig {
  double p = 2.0;
  double eps = 1e-6;
  EMBER_CONFIG(PairwiseDistanceConfig, p, eps)
  PairwiseDistance init() const;
};

}  // namespace ember::nn
