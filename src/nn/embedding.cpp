// Embedding's lookup and init.
#include "ember/nn/embedding.hpp"

namespace ember::nn {

namespace detail {
DynTensor embedding_forward(const DynTensor& weight, const DynTensor& ids,
                            std::optional<std::int64_t> padding_idx) {
  EMBER_CHECK(ids.kind() == Kind::Int,
              std::string("nn::Embedding: indices must be Int, got ") + name(ids.dtype()));
  const std::size_t n = weight.shape()[0], d = weight.shape()[1];
  DynTensor flat = ops::reshape(ids, Shape{ids.num_elements()});
  if (flat.num_elements() > 0) {
    // One flag read back per call; the range is computed only to report a failure.
    const DynTensor ok =
        ops::binary(ir::BinaryFn::And, ops::binary_scalar(ir::BinaryFn::Ge, flat, 0.0),
                    ops::binary_scalar(ir::BinaryFn::Lt, flat, double(n)));
    if (ops::all(ok).to_data().get_f64(0) == 0.0) {
      const auto lo = ops::reduce_all(ir::ReduceFn::Min, flat).to_data().get_f64(0);
      const auto hi = ops::reduce_all(ir::ReduceFn::Max, flat).to_data().get_f64(0);
      fail("nn::Embedding: indices of shape " + ids.shape().to_string() + " range over [" +
           std::to_string(std::int64_t(lo)) + ", " + std::to_string(std::int64_t(hi)) +
           "], outside [0, " + std::to_string(n) + ") for weight " + weight.shape().to_string());
    }
  }
  DynTensor rows = ops::select(weight, 0, flat);
  if (padding_idx) {
    DynTensor pad = ops::reshape(ops::binary_scalar(ir::BinaryFn::Eq, flat, double(*padding_idx)),
                                 Shape{flat.num_elements(), 1});
    rows = ops::mask_where(std::move(pad), ops::detach(rows), rows);
  }
  std::vector<std::size_t> out(ids.shape().begin(), ids.shape().end());
  out.push_back(d);
  return ops::reshape(std::move(rows), Shape(std::move(out)));
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
