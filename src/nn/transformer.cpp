// Transformer stacks, feed-forward blocks and position encodings as composites of layers and
// tensor ops (see transformer.hpp).
#include "ember/nn/transformer.hpp"

#include <cmath>
#include <vector>

namespace ember::nn {

namespace {

// The table on x's device and in x's dtype (a module moved with to_device keeps its derived
// tables where they were made; they are small and are moved on use).
DynTensor table_for(const Tensor<2>& table, const DynTensor& x) {
  DynTensor t = table.dyn();
  if (t.dtype() != x.dtype()) t = ops::cast(std::move(t), x.dtype());
  if (!(t.device() == x.device())) t = ops::to_device(std::move(t), x.device());
  return t;
}

Tensor<2> from_f64(const std::vector<double>& v, std::size_t rows, std::size_t cols,
                   const Device& device) {
  return Tensor<2>(ops::cast(ops::from_data(TensorData::from(v, Shape{rows, cols}), device),
                             device.default_float()));
}

std::optional<LayerNorm> final_norm_of(bool on, std::size_t d_model, double eps,
                                       const Device& device) {
  if (!on) return std::nullopt;
  return LayerNormConfig{d_model}.with_eps(eps).init(device);
}

}  // namespace

Tensor<2, Bool> causal_mask(std::size_t seq, const Device& device) {
  return Tensor<2, Bool>(ops::triu_mask(Shape{seq, seq}, 0, device));
}

// ---- encoder and decoder stacks ----

Tensor<3> TransformerEncoder::forward(const Tensor<3>& x, const AttentionMasks& masks) const {
  return detail::at_layer(*this, [&]() -> Tensor<3> {
    Tensor<3> y = x;
    for (const TransformerEncoderLayer& l : layers) y = l.forward(y, masks);
    return norm ? norm->forward(y) : y;
  });
}

Tensor<3> TransformerEncoder::forward_cached(const Tensor<3>& x,
                                             std::vector<KvCache>& caches) const {
  return detail::at_layer(*this, [&]() -> Tensor<3> {
    if (caches.empty()) caches.resize(layers.size());
    EMBER_CHECK(caches.size() == layers.size(),
                "nn::TransformerEncoder::forward_cached: " + std::to_string(caches.size()) +
                    " caches for " + std::to_string(layers.size()) + " layers");
    Tensor<3> y = x;
    for (std::size_t i = 0; i < layers.size(); ++i) y = layers[i].forward_cached(y, caches[i]);
    return norm ? norm->forward(y) : y;
  });
}

TransformerEncoder TransformerEncoderConfig::init(const Device& device) const {
  EMBER_CHECK(num_layers > 0, "nn::TransformerEncoderConfig: num_layers must be positive");
  TransformerEncoder m;
  for (std::size_t i = 0; i < num_layers; ++i) m.layers.push_back(layer.init(device));
  m.norm = final_norm_of(final_norm, layer.d_model, layer.layer_norm_eps, device);
  return m;
}

Tensor<3> TransformerDecoderLayer::forward(const Tensor<3>& target, const Tensor<3>& memory,
                                           const DecoderMasks& masks) const {
  return detail::at_layer(*this, [&]() -> Tensor<3> {
    const auto act = [&](const Tensor<3>& t) {
      return gelu ? activation::gelu(t) : activation::relu(t);
    };
    const auto sa = [&](const Tensor<3>& t) {
      return dropout1.forward(self_attn.forward(t, t, t, masks.target));
    };
    const auto ca = [&](const Tensor<3>& t) {
      return dropout2.forward(multihead_attn.forward(t, memory, memory, masks.memory));
    };
    const auto ff = [&](const Tensor<3>& t) {
      return dropout3.forward(linear2.forward(dropout.forward(act(linear1.forward(t)))));
    };
    if (norm_first) {
      Tensor<3> y = target + sa(norm1.forward(target));
      y = y + ca(norm2.forward(y));
      return y + ff(norm3.forward(y));
    }
    Tensor<3> y = norm1.forward(target + sa(target));
    y = norm2.forward(y + ca(y));
    return norm3.forward(y + ff(y));
  });
}

TransformerDecoderLayer TransformerDecoderLayerConfig::init(const Device& device) const {
  EMBER_CHECK(activation == "relu" || activation == "gelu",
              "nn::TransformerDecoderLayerConfig: activation must be \"relu\" or \"gelu\", got \"" +
                  activation + "\"");
  const auto norm = LayerNormConfig{d_model}.with_eps(layer_norm_eps);
  const auto attn = MultiHeadAttentionConfig{d_model, n_heads}.with_dropout(dropout);
  return TransformerDecoderLayer{attn.init(device),
                                 attn.init(device),
                                 LinearConfig{d_model, d_ff}.init(device),
                                 DropoutConfig{dropout}.init(),
                                 LinearConfig{d_ff, d_model}.init(device),
                                 norm.init(device),
                                 norm.init(device),
                                 norm.init(device),
                                 DropoutConfig{dropout}.init(),
                                 DropoutConfig{dropout}.init(),
                                 DropoutConfig{dropout}.init(),
                                 norm_first,
                                 activation == "gelu"};
}

Tensor<3> TransformerDecoder::forward(const Tensor<3>& target, const Tensor<3>& memory,
                                      const DecoderMasks& masks) const {
  return detail::at_layer(*this, [&]() -> Tensor<3> {
    Tensor<3> y = target;
    for (const TransformerDecoderLayer& l : layers) y = l.forward(y, memory, masks);
    return norm ? norm->forward(y) : y;
  });
}

TransformerDecoder TransformerDecoderConfig::init(const Device& device) const {
  EMBER_CHECK(num_layers > 0, "nn::TransformerDecoderConfig: num_layers must be positive");
  TransformerDecoder m;
  for (std::size_t i = 0; i < num_layers; ++i) m.layers.push_back(layer.init(device));
  m.norm = final_norm_of(final_norm, layer.d_model, layer.layer_norm_eps, device);
  return m;
}

// ---- feed-forward blocks ----

PositionWiseFeedForward PositionWiseFeedForwardConfig::init(const Device& device) const {
  return PositionWiseFeedForward{LinearConfig{d_model, d_ff}.init(device),
                                 LinearConfig{d_ff, d_model}.init(device),
                                 DropoutConfig{dropout}.init()};
}

SwiGlu SwiGluConfig::init(const Device& device) const {
  const auto linear = LinearConfig{d_input, d_output}.with_bias(bias);
  return SwiGlu{linear.init(device), linear.init(device)};
}

// ---- position encodings ----

Tensor<3> PositionalEncoding::forward(const Tensor<3>& x) const {
  return detail::at_layer(*this, [&]() -> Tensor<3> {
    const std::size_t seq = x.shape()[1], d = x.shape()[2];
    EMBER_CHECK(
        d == table.shape()[1] && seq <= table.shape()[0],
        "nn::PositionalEncoding: expected x [batch, seq <= " + std::to_string(table.shape()[0]) +
            ", " + std::to_string(table.shape()[1]) + "], got " + x.shape().to_string());
    DynTensor pe = ops::narrow(table_for(table, x.dyn()), 0, 0, seq);
    return x + Tensor<3>(ops::reshape(std::move(pe), Shape{1, seq, d}));
  });
}

PositionalEncoding PositionalEncodingConfig::init(const Device& device) const {
  EMBER_CHECK(d_model > 0 && d_model % 2 == 0 && max_sequence_size > 0 && max_timescale > 0,
              "nn::PositionalEncodingConfig: d_model must be even and positive, "
              "max_sequence_size and max_timescale positive; got d_model " +
                  std::to_string(d_model) + ", max_sequence_size " +
                  std::to_string(max_sequence_size));
  std::vector<double> v(max_sequence_size * d_model);
  for (std::size_t p = 0; p < max_sequence_size; ++p)
    for (std::size_t i = 0; i < d_model; i += 2) {
      const double angle = double(p) / std::pow(max_timescale, double(i) / double(d_model));
      v[p * d_model + i] = std::sin(angle);
      v[p * d_model + i + 1] = std::cos(angle);
    }
  return PositionalEncoding{from_f64(v, max_sequence_size, d_model, device)};
}

DynTensor RotaryEncoding::apply(const DynTensor& x, std::size_t start) const {
  const std::size_t rank = x.rank(), half = cos.shape()[1];
  EMBER_CHECK(rank >= 2 && rank <= 5 && x.kind() == Kind::Float && x.shape()[rank - 1] == 2 * half,
              "nn::RotaryEncoding: expected a float x [..., seq, " + std::to_string(2 * half) +
                  "] of rank 2 to 5, got " + x.shape().to_string());
  const std::size_t seq = x.shape()[rank - 2];
  EMBER_CHECK(start + seq <= cos.shape()[0],
              "nn::RotaryEncoding: positions " + std::to_string(start) + " to " +
                  std::to_string(start + seq) + " exceed max_sequence_length " +
                  std::to_string(cos.shape()[0]));
  // x as [..., seq, half, 2]; the tables as [seq, half, 1], broadcast over the leading dims.
  std::vector<std::size_t> pairs(x.shape().dims().begin(), x.shape().dims().end());
  pairs.back() = half;
  pairs.push_back(2);
  const DynTensor xp = ops::reshape(x, Shape(pairs));
  const auto table = [&](const Tensor<2>& t) {
    return ops::reshape(ops::narrow(table_for(t, x), 0, std::int64_t(start), seq),
                        Shape{seq, half, 1});
  };
  const DynTensor c = table(cos), s = table(sin);
  const DynTensor x0 = ops::narrow(xp, std::int64_t(rank), 0, 1);
  const DynTensor x1 = ops::narrow(xp, std::int64_t(rank), 1, 1);
  using ir::BinaryFn;
  const auto mul = [](const DynTensor& a, const DynTensor& b) {
    return ops::binary(BinaryFn::Mul, a, b);
  };
  DynTensor out0 = ops::binary(BinaryFn::Sub, mul(x0, c), mul(x1, s));
  DynTensor out1 = ops::binary(BinaryFn::Add, mul(x0, s), mul(x1, c));
  return ops::reshape(ops::cat({std::move(out0), std::move(out1)}, std::int64_t(rank)), x.shape());
}

RotaryEncoding RotaryEncodingConfig::init(const Device& device) const {
  EMBER_CHECK(d_model > 0 && d_model % 2 == 0 && max_sequence_length > 0 && theta > 0,
              "nn::RotaryEncodingConfig: d_model must be even and positive, "
              "max_sequence_length and theta positive; got d_model " +
                  std::to_string(d_model) + ", max_sequence_length " +
                  std::to_string(max_sequence_length));
  const std::size_t half = d_model / 2;
  std::vector<double> c(max_sequence_length * half), s(c.size());
  for (std::size_t p = 0; p < max_sequence_length; ++p)
    for (std::size_t i = 0; i < half; ++i) {
      const double angle = double(p) * std::pow(theta, -2.0 * double(i) / double(d_model));
      c[p * half + i] = std::cos(angle);
      s[p * half + i] = std::sin(angle);
    }
  return RotaryEncoding{from_f64(c, max_sequence_length, half, device),
                        from_f64(s, max_sequence_length, half, device)};
}

}  // namespace ember::nn
