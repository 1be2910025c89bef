// Embedding, as torch.nn.Embedding: weight [num_embeddings, embedding_dim] looked up by
// index. The row at padding_idx gets no gradient (its value is returned as it is).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "ember/nn/config.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

namespace detail {
DynTensor embedding_forward(const DynTensor& weight, const DynTensor& ids,
                            std::optional<std::int64_t> padding_idx);
}

struct Embedding {
  Param<Tensor<2>> weight;  // [num_embeddings, embedding_dim]
  std::optional<std::int64_t> padding_idx;
  EMBER_MODULE(Embedding, weight, padding_idx)

  // ids [...] (Int) -> [..., embedding_dim]; an index outside [0, num_embeddings) is an
  // ember::Error.
  template <std::size_t D>
  Tensor<D + 1> forward(const Tensor<D, Int>& ids) const {
    return detail::at_layer(*this, [&]() -> Tensor<D + 1> {
      return Tensor<D + 1>(detail::embedding_forward(weight.val().dyn(), ids.dyn(), padding_idx));
    });
  }
  std::size_t num_embeddings() const { return weight.shape()[0]; }
  std::size_t embedding_dim() const { return weight.shape()[1]; }
};

struct EmbeddingConfig {
  std::size_t num_embeddings;
  std::size_t embedding_dim;
  std::optional<std::int64_t> padding_idx = std::nullopt;   // negative counts from the end
  Initializer initializer = Initializer::normal(0.0, 1.0);  // PyTorch's N(0, 1)
  EMBER_CONFIG(EmbeddingConfig, num_embeddings, embedding_dim, padding_idx, initializer)
  // The padding row starts at zero, as PyTorch.
  Embedding init(const Device& device) const;
};

}  // namespace ember::nn
