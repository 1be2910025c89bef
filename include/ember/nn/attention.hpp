// MultiHeadAttention, as torch.nn.MultiheadAttention with batch_first=True: with equal
// q/k/v dims in_proj_weight [3 d, d] (q, k, v rows in that order); with other key or value
// dims (kdim, vdim) q_proj_weight [d, d], k_proj_weight [d, kdim], v_proj_weight [d, vdim]
// instead; in_proj_bias [3 d], out_proj.weight [d, d], out_proj.bias [d]. A key/value
// cache serves step-by-step decoding. And TransformerEncoderLayer, as
// torch.nn.TransformerEncoderLayer (batch_first=True).
#pragma once

#include <cstddef>
#include <optional>

#include "ember/nn/config.hpp"
#include "ember/nn/dropout.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/module.hpp"
#include "ember/nn/norm.hpp"

namespace ember::nn {

// Masks, as PyTorch's boolean masks: true marks a position that may NOT be attended.
// attn_mask [seq_q, seq_k] applies to every batch and head; key_padding_mask
// [batch, seq_k] hides keys per batch.
struct AttentionMasks {
  std::optional<Tensor<2, Bool>> attn_mask;
  std::optional<Tensor<2, Bool>> key_padding_mask;
};

struct AttentionOutput {
  Tensor<3> context;  // [batch, seq_q, d_model]
  Tensor<3> weights;  // [batch, seq_q, seq_k], averaged over the heads (PyTorch's default)
};

// The keys and values a self-attention has seen, per head: [batch, heads, seen, head_dim].
// Empty at the start of a sequence; each forward_cached call appends its positions.
struct KvCache {
  std::optional<Tensor<4>> k, v;
  std::size_t seen() const { return k ? k->shape()[2] : 0; }
};

struct MultiHeadAttention {
  std::optional<Param<Tensor<2>>> in_proj_weight;  // [3 d_model, d_model] (equal dims)
  std::optional<Param<Tensor<2>>> q_proj_weight;   // [d_model, d_model]   (kdim/vdim differ)
  std::optional<Param<Tensor<2>>> k_proj_weight;   // [d_model, kdim]
  std::optional<Param<Tensor<2>>> v_proj_weight;   // [d_model, vdim]
  std::optional<Param<Tensor<1>>> in_proj_bias;    // [3 d_model]
  Linear out_proj;                                 // [d_model, d_model]
  std::size_t n_heads = 1;
  double dropout = 0.0;  // on the attention weights, in training mode
  EMBER_MODULE(MultiHeadAttention, in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight,
               in_proj_bias, out_proj, n_heads, dropout)

  // q [batch, seq_q, d], k and v [batch, seq_k, d] -> [batch, seq_q, d].
  // Through module_ops::scaled_dot_product_attention (one fused op where the backend has
  // it), except in training mode with dropout, which needs the weights.
  Tensor<3> forward(const Tensor<3>& q, const Tensor<3>& k, const Tensor<3>& v,
                    const AttentionMasks& masks = {}) const;
  Tensor<3> forward(const Tensor<3>& q, const Tensor<3>& k, const Tensor<3>& v,
                    const Tensor<2, Bool>& attn_mask) const {
    return forward(q, k, v, AttentionMasks{attn_mask, std::nullopt});
  }
  AttentionOutput forward_with_weights(const Tensor<3>& q, const Tensor<3>& k, const Tensor<3>& v,
                                       const AttentionMasks& masks = {}) const;
  // Causal self-attention of the new positions x [batch, new, d_model] to every position
  // seen so far and to themselves; appends their keys and values to the cache. Equals the
  // matching rows of forward(all, all, all, causal_mask(all)).
  Tensor<3> forward_cached(const Tensor<3>& x, KvCache& cache) const;
  std::size_t d_model() const { return out_proj.d_output(); }
  std::size_t kdim() const { return k_proj_weight ? k_proj_weight->shape()[1] : d_model(); }
  std::size_t vdim() const { return v_proj_weight ? v_proj_weight->shape()[1] : d_model(); }

 private:
  // x [batch, len, *] projected by q, k or v (part 0, 1, 2) -> [batch, heads, len, head_dim].
  Tensor<4> project(const Tensor<3>& x, std::size_t part) const;
  // The checked shapes of a forward's q, k, v and its masks combined into one [.., lq, lk]
  // (true: may NOT be attended).
  std::optional<Tensor<4, Bool>> checked_mask(const Tensor<3>& q, const Tensor<3>& k,
                                              const Tensor<3>& v,
                                              const AttentionMasks& masks) const;
  // Attention of qh to kh, vh with boolean masks [.., lq, lk] as -inf scores, composed of
  // matmul and softmax; -> context and head-averaged weights.
  AttentionOutput attend(const Tensor<4>& qh, const Tensor<4>& kh, const Tensor<4>& vh,
                         std::optional<Tensor<4, Bool>> mask) const;
  // The context alone, through scaled_dot_product_attention (attend's where dropout acts).
  Tensor<3> context(const Tensor<4>& qh, const Tensor<4>& kh, const Tensor<4>& vh,
                    std::optional<Tensor<4, Bool>> mask) const;
};

struct MultiHeadAttentionConfig {
  std::size_t d_model;
  std::size_t n_heads;
  double dropout = 0.0;
  bool bias = true;
  std::optional<std::size_t> kdim = {}, vdim = {};  // key and value dims (default: d_model)
  EMBER_CONFIG(MultiHeadAttentionConfig, d_model, n_heads, dropout, bias, kdim, vdim)
  // PyTorch's init: in_proj_weight xavier_uniform, biases zero, out_proj.weight as Linear's.
  MultiHeadAttention init(const Device& device) const;
};

// Post-norm (PyTorch's default) or pre-norm (norm_first); ReLU or GELU in the feed-forward.
struct TransformerEncoderLayer {
  MultiHeadAttention self_attn;
  Linear linear1;  // [d_ff, d_model]
  Dropout dropout;
  Linear linear2;  // [d_model, d_ff]
  LayerNorm norm1, norm2;
  Dropout dropout1, dropout2;
  bool norm_first = false;
  bool gelu = false;
  EMBER_MODULE(TransformerEncoderLayer, self_attn, linear1, dropout, linear2, norm1, norm2,
               dropout1, dropout2, norm_first, gelu)

  // x [batch, seq, d_model] -> the same shape.
  Tensor<3> forward(const Tensor<3>& x, const AttentionMasks& masks = {}) const;
  // Causal decoding: the new positions x [batch, new, d_model] attend to the cached ones.
  Tensor<3> forward_cached(const Tensor<3>& x, KvCache& cache) const;
};

struct TransformerEncoderLayerConfig {
  std::size_t d_model;
  std::size_t n_heads;
  std::size_t d_ff = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // or "gelu"
  double layer_norm_eps = 1e-5;
  bool norm_first = false;
  EMBER_CONFIG(TransformerEncoderLayerConfig, d_model, n_heads, d_ff, dropout, activation,
               layer_norm_eps, norm_first)
  TransformerEncoderLayer init(const Device& device) const;
};

}  // namespace ember::nn
