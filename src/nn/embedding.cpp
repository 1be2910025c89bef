// Embedding's lookup and init.
#include "ember/nn/embedding.hpp"

#include "ember/tensor/module_ops.hpp"

namespace ember::nn {

namespace detail {
DynTensor embedding_forward(const DynTensor& weight, const DynTensor& ids,
                            std::optional<std::int64_t> padding_idx) {
  return module_ops::detail::embedding(weight, ids, padding_idx, "nn::Embedding");
}
}  // namespace detail

Embedding EmbeddingConfig::init(const Device& device) const {
  EMBER_CHECK(num_embeddings > 0 && embedding_dim > 0,
              "nn::EmbeddingConfig: num_embeddings and embedding_dim must be > 0");
  std::optional<std::int64_t> pad = padding_idx;
  if (pad) {
    const auto n = std::int64_t(num_embeddings);
    EMBER_CHECK(*pad >= -n && *pad < n, "nn::EmbeddingConfig: padding_idx " + std::to_string(*pad) +
                                            " outside [-" + std::to_string(n) + ", " +
                                            std::to_string(n) + ")");
    if (*pad < 0) *pad += n;
  }
  DynTensor w = initializer.init(Shape{num_embeddings, embedding_dim}, device,
                                 Fans{embedding_dim, num_embeddings});
  if (pad) w = ops::slice_fill(std::move(w), {{*pad, *pad + 1}}, 0.0);
  return Embedding{Param<Tensor<2>>(Tensor<2>(std::move(w))), pad};
}

}  // namespace ember::nn
