// Transformer stacks and their building blocks, with PyTorch's parameter names where PyTorch
// has the module (batch_first=True throughout) and Burn's definitions where it has none:
//
//   TransformerEncoder        torch.nn.TransformerEncoder: layers.<i>.*, norm.*
//   TransformerDecoderLayer   torch.nn.TransformerDecoderLayer: self_attn, multihead_attn,
//                             linear1, linear2, norm1, norm2, norm3
//   TransformerDecoder        torch.nn.TransformerDecoder: layers.<i>.*, norm.*
//   PositionWiseFeedForward   Burn's: linear_inner, linear_outer, GELU between
//   SwiGlu                    Burn's: silu(linear_inner(x)) * linear_outer(x)
//   PositionalEncoding        sinusoids added to [batch, seq, d] (no parameters)
//   RotaryEncoding            rotary position embedding of interleaved pairs (no parameters)
//
// causal_mask(seq, dev) is the boolean mask that hides future positions (true above the
// diagonal), as torch.nn.Transformer.generate_square_subsequent_mask but boolean.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ember/nn/attention.hpp"
#include "ember/nn/config.hpp"
#include "ember/nn/dropout.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/module.hpp"
#include "ember/nn/norm.hpp"
#include "ember/tensor/activation.hpp"

namespace ember::nn {

// [seq, seq] Bool: true where key j > query i — the positions a causal model may not see.
Tensor<2, Bool> causal_mask(std::size_t seq, const Device& device);

// A stack of encoder layers and an optional final norm (PyTorch adds one with norm_first).
struct TransformerEncoder {
  std::vector<TransformerEncoderLayer> layers;
  std::optional<LayerNorm> norm;
  EMBER_MODULE(TransformerEncoder, layers, norm)

  // x [batch, seq, d_model] -> the same shape.
  Tensor<3> forward(const Tensor<3>& x, const AttentionMasks& masks = {}) const;
  // Causal decoding step by step: the new positions attend to those seen before (one cache
  // per layer, resized on first use). Equals forward's rows under causal_mask.
  Tensor<3> forward_cached(const Tensor<3>& x, std::vector<KvCache>& caches) const;
};

struct TransformerEncoderConfig {
  TransformerEncoderLayerConfig layer;
  std::size_t num_layers;
  bool final_norm = false;  // a LayerNorm after the last layer (`norm`)
  EMBER_CONFIG(TransformerEncoderConfig, layer, num_layers, final_norm)
  TransformerEncoder init(const Device& device) const;
};

// Masks of a decoder step: the target's self-attention and the attention to the memory.
struct DecoderMasks {
  AttentionMasks target;  // attn_mask [seq_t, seq_t] (e.g. causal_mask), key padding [b, seq_t]
  AttentionMasks memory;  // attn_mask [seq_t, seq_m], key padding [batch, seq_m]
};

struct TransformerDecoderLayer {
  MultiHeadAttention self_attn;
  MultiHeadAttention multihead_attn;
  Linear linear1;  // [d_ff, d_model]
  Dropout dropout;
  Linear linear2;  // [d_model, d_ff]
  LayerNorm norm1, norm2, norm3;
  Dropout dropout1, dropout2, dropout3;
  bool norm_first = false;
  bool gelu = false;
  EMBER_MODULE(TransformerDecoderLayer, self_attn, multihead_attn, linear1, dropout, linear2, norm1,
               norm2, norm3, dropout1, dropout2, dropout3, norm_first, gelu)

  // target [batch, seq_t, d_model], memory [batch, seq_m, d_model] -> [batch, seq_t, d_model].
  Tensor<3> forward(const Tensor<3>& target, const Tensor<3>& memory,
                    const DecoderMasks& masks = {}) const;
};

struct TransformerDecoderLayerConfig {
  std::size_t d_model;
  std::size_t n_heads;
  std::size_t d_ff = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // or "gelu"
  double layer_norm_eps = 1e-5;
  bool norm_first = false;
  EMBER_CONFIG(TransformerDecoderLayerConfig, d_model, n_heads, d_ff, dropout, activation,
               layer_norm_eps, norm_first)
  TransformerDecoderLayer init(const Device& device) const;
};

struct TransformerDecoder {
  std::vector<TransformerDecoderLayer> layers;
  std::optional<LayerNorm> norm;
  EMBER_MODULE(TransformerDecoder, layers, norm)

  Tensor<3> forward(const Tensor<3>& target, const Tensor<3>& memory,
                    const DecoderMasks& masks = {}) const;
};

struct TransformerDecoderConfig {
  TransformerDecoderLayerConfig layer;
  std::size_t num_layers;
  bool final_norm = false;
  EMBER_CONFIG(TransformerDecoderConfig, layer, num_layers, final_norm)
  TransformerDecoder init(const Device& device) const;
};

// linear_outer(dropout(gelu(linear_inner(x)))), over the last dim.
struct PositionWiseFeedForward {
  Linear linear_inner;  // [d_ff, d_model]
  Linear linear_outer;  // [d_model, d_ff]
  Dropout dropout;
  EMBER_MODULE(PositionWiseFeedForward, linear_inner, linear_outer, dropout)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<D> {
      return linear_outer.forward(dropout.forward(activation::gelu(linear_inner.forward(x))));
    });
  }
};

struct PositionWiseFeedForwardConfig {
  std::size_t d_model;
  std::size_t d_ff;
  double dropout = 0.1;
  EMBER_CONFIG(PositionWiseFeedForwardConfig, d_model, d_ff, dropout)
  PositionWiseFeedForward init(const Device& device) const;
};

// silu(linear_inner(x)) * linear_outer(x), both [d_output, d_input].
struct SwiGlu {
  Linear linear_inner;
  Linear linear_outer;
  EMBER_MODULE(SwiGlu, linear_inner, linear_outer)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<D> {
      return activation::swiglu(linear_inner.forward(x), linear_outer.forward(x));
    });
  }
};

struct SwiGluConfig {
  std::size_t d_input;
  std::size_t d_output;
  bool bias = false;
  EMBER_CONFIG(SwiGluConfig, d_input, d_output, bias)
  SwiGlu init(const Device& device) const;
};

// x + PE[:seq] with PE(pos, 2i) = sin(pos / T^(2i / d)), PE(pos, 2i + 1) = cos(...), T the
// max timescale. The table is computed in f64 at init (no parameters, nothing recorded).
struct PositionalEncoding {
  Tensor<2> table;                  // [max_sequence_size, d_model]
  EMBER_MODULE(PositionalEncoding)  // the table is derived from the config: not visited

  // x [batch, seq, d_model] with seq <= max_sequence_size -> the same shape.
  Tensor<3> forward(const Tensor<3>& x) const;
};

struct PositionalEncodingConfig {
  std::size_t d_model;
  std::size_t max_sequence_size = 5000;
  double max_timescale = 10000.0;
  EMBER_CONFIG(PositionalEncodingConfig, d_model, max_sequence_size, max_timescale)
  PositionalEncoding init(const Device& device) const;
};

// Rotates each interleaved pair (x[2i], x[2i + 1]) of the last dim at position p by the angle
// p * theta^(-2i / d): out[2i] = x[2i] cos - x[2i + 1] sin, out[2i + 1] = x[2i] sin +
// x[2i + 1] cos. Positions start at `start` (a key/value cache's offset).
struct RotaryEncoding {
  Tensor<2> cos, sin;  // [max_sequence_length, d_model / 2]
  EMBER_MODULE(RotaryEncoding)

  // x [..., seq, d_model] (rank 2 to 5) -> the same shape.
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x, std::size_t start = 0) const {
    return detail::at_layer(*this, [&]() -> Tensor<D> { return Tensor<D>(apply(x.dyn(), start)); });
  }
  DynTensor apply(const DynTensor& x, std::size_t start) const;
};

struct RotaryEncodingConfig {
  std::size_t max_sequence_length;
  std::size_t d_model;
  double theta = 10000.0;
  EMBER_CONFIG(RotaryEncodingConfig, max_sequence_length, d_model, theta)
  RotaryEncoding init(const Device& device) const;
};

}  // namespace ember::nn
