// Multi-head attention as a composite: one input projection per q/k/v slice of
// in_proj_weight, scaled dot products per head, masks as -inf, softmax, the output
// projection.
#include "ember/nn/attention.hpp"

#include <cmath>
#include <limits>

#include "ember/nn/init.hpp"
#include "ember/tensor/activation.hpp"

namespace ember::nn {

AttentionOutput MultiHeadAttention::forward_with_weights(const Tensor<3>& q, const Tensor<3>& k,
                                                         const Tensor<3>& v,
                                                         const AttentionMasks& masks) const {
  const std::size_t d = d_model(), heads = n_heads, hd = d / heads;
  const std::size_t batch = q.shape()[0], lq = q.shape()[1], lk = k.shape()[1];
  EMBER_CHECK(q.shape()[2] == d && k.shape()[2] == d && v.shape()[2] == d &&
                  k.shape()[0] == batch && v.shape()[0] == batch && v.shape()[1] == lk,
              "nn::MultiHeadAttention: expected q [batch, seq_q, " + std::to_string(d) +
                  "] and k, v [batch, seq_k, " + std::to_string(d) + "], got q " +
                  q.shape().to_string() + ", k " + k.shape().to_string() + ", v " +
                  v.shape().to_string());
  const auto project = [&](const Tensor<3>& x, std::size_t part, std::size_t len) {
    const auto w = in_proj_weight.val().narrow(0, std::int64_t(part * d), d);
    std::optional<DynTensor> b;
    if (in_proj_bias) b = in_proj_bias->val().narrow(0, std::int64_t(part * d), d).dyn();
    Tensor<3> y(detail::linear(x.dyn(), w.dyn(), b, "nn::MultiHeadAttention"));
    return y.reshape<4>(Shape{batch, len, heads, hd}).swap_dims(1, 2);  // [batch, heads, len, hd]
  };
  const Tensor<4> qh = project(q, 0, lq), kh = project(k, 1, lk), vh = project(v, 2, lk);
  Tensor<4> scores = qh.matmul(kh.swap_dims(2, 3)).mul_scalar(1.0 / std::sqrt(double(hd)));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (masks.attn_mask) {
    EMBER_CHECK(masks.attn_mask->shape() == (Shape{lq, lk}),
                "nn::MultiHeadAttention: attn_mask must be [" + std::to_string(lq) + ", " +
                    std::to_string(lk) + "], got " + masks.attn_mask->shape().to_string());
    scores = scores.mask_fill(masks.attn_mask->reshape<4>(Shape{1, 1, lq, lk}), neg_inf);
  }
  if (masks.key_padding_mask) {
    EMBER_CHECK(masks.key_padding_mask->shape() == (Shape{batch, lk}),
                "nn::MultiHeadAttention: key_padding_mask must be [" + std::to_string(batch) +
                    ", " + std::to_string(lk) + "], got " +
                    masks.key_padding_mask->shape().to_string());
    scores = scores.mask_fill(masks.key_padding_mask->reshape<4>(Shape{batch, 1, 1, lk}), neg_inf);
  }
  Tensor<4> attn = activation::softmax(scores, 3);
  const Tensor<4> dropped(detail::dropout_forward(attn.dyn(), dropout));
  Tensor<3> ctx = dropped.matmul(vh).swap_dims(1, 2).reshape<3>(Shape{batch, lq, d});
  return {out_proj.forward(ctx), attn.mean_dim(1).reshape<3>(Shape{batch, lq, lk})};
}

MultiHeadAttention MultiHeadAttentionConfig::init(const Device& device) const {
  EMBER_CHECK(d_model > 0 && n_heads > 0 && d_model % n_heads == 0,
              "nn::MultiHeadAttentionConfig: n_heads " + std::to_string(n_heads) +
                  " must divide d_model " + std::to_string(d_model));
  EMBER_CHECK(dropout >= 0 && dropout <= 1,
              "nn::MultiHeadAttentionConfig: dropout must be in [0, 1]");
  MultiHeadAttention m{
      Param<Tensor<2>>(Initializer::xavier_uniform().init<2>(Shape{3 * d_model, d_model}, device)),
      std::nullopt, LinearConfig{d_model, d_model}.with_bias(bias).init(device), n_heads, dropout};
  if (bias) {
    m.in_proj_bias.emplace(Tensor<1>::zeros(Shape{3 * d_model}, device));
    m.out_proj.bias.emplace(Tensor<1>::zeros(Shape{d_model}, device));
  }
  return m;
}

Tensor<3> TransformerEncoderLayer::forward(const Tensor<3>& x, const AttentionMasks& masks) const {
  const auto act = [&](const Tensor<3>& t) {
    return gelu ? activation::gelu(t) : activation::relu(t);
  };
  const auto sa = [&](const Tensor<3>& t) {
    return dropout1.forward(self_attn.forward(t, t, t, masks));
  };
  const auto ff = [&](const Tensor<3>& t) {
    return dropout2.forward(linear2.forward(dropout.forward(act(linear1.forward(t)))));
  };
  if (norm_first) {
    Tensor<3> y = x + sa(norm1.forward(x));
    return y + ff(norm2.forward(y));
  }
  Tensor<3> y = norm1.forward(x + sa(x));
  return norm2.forward(y + ff(y));
}

TransformerEncoderLayer TransformerEncoderLayerConfig::init(const Device& device) const {
  EMBER_CHECK(activation == "relu" || activation == "gelu",
              "nn::TransformerEncoderLayerConfig: activation must be \"relu\" or \"gelu\", got \"" +
                  activation + "\"");
  const auto norm = LayerNormConfig{d_model}.with_eps(layer_norm_eps);
  return TransformerEncoderLayer{
      MultiHeadAttentionConfig{d_model, n_heads}.with_dropout(dropout).init(device),
      LinearConfig{d_model, d_ff}.init(device),
      DropoutConfig{dropout}.init(),
      LinearConfig{d_ff, d_model}.init(device),
      norm.init(device),
      norm.init(device),
      DropoutConfig{dropout}.init(),
      DropoutConfig{dropout}.init(),
      norm_first,
      activation == "gelu"};
}

}  // namespace ember::nn
