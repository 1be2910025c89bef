// Multi-head attention: one input projection per q/k/v slice of in_proj_weight, attention
// per head (module_ops::scaled_dot_product_attention; the composite of matmul, -inf masks
// and softmax where the weights are wanted or dropout acts on them), the output projection.
#include "ember/nn/attention.hpp"

#include <cmath>
#include <limits>

#include "ember/nn/init.hpp"
#include "ember/tensor/activation.hpp"
#include "ember/tensor/module_ops.hpp"

namespace ember::nn {

Tensor<4> MultiHeadAttention::project(const Tensor<3>& x, std::size_t part) const {
  const std::size_t d = d_model(), heads = n_heads, hd = d / heads;
  const std::size_t batch = x.shape()[0], len = x.shape()[1];
  Tensor<2> w = in_proj_weight ? in_proj_weight->val().narrow(0, std::int64_t(part * d), d)
                : part == 0    ? q_proj_weight->val()
                : part == 1    ? k_proj_weight->val()
                               : v_proj_weight->val();
  std::optional<DynTensor> b;
  if (in_proj_bias) b = in_proj_bias->val().narrow(0, std::int64_t(part * d), d).dyn();
  Tensor<3> y(detail::linear(x.dyn(), w.dyn(), b, "nn::MultiHeadAttention"));
  return y.reshape<4>(Shape{batch, len, heads, hd}).swap_dims(1, 2);  // [batch, heads, len, hd]
}

AttentionOutput MultiHeadAttention::attend(const Tensor<4>& qh, const Tensor<4>& kh,
                                           const Tensor<4>& vh,
                                           std::optional<Tensor<4, Bool>> mask) const {
  const std::size_t d = d_model(), hd = d / n_heads;
  const std::size_t batch = qh.shape()[0], lq = qh.shape()[2], lk = kh.shape()[2];
  Tensor<4> scores = qh.matmul(kh.swap_dims(2, 3)).mul_scalar(1.0 / std::sqrt(double(hd)));
  if (mask) scores = scores.mask_fill(*mask, -std::numeric_limits<double>::infinity());
  Tensor<4> attn = activation::softmax(scores, 3);
  const Tensor<4> dropped(detail::dropout_forward(attn.dyn(), dropout));
  Tensor<3> ctx = dropped.matmul(vh).swap_dims(1, 2).reshape<3>(Shape{batch, lq, d});
  return {out_proj.forward(ctx), attn.mean_dim(1).reshape<3>(Shape{batch, lq, lk})};
}

Tensor<3> MultiHeadAttention::context(const Tensor<4>& qh, const Tensor<4>& kh, const Tensor<4>& vh,
                                      std::optional<Tensor<4, Bool>> mask) const {
  if (dropout > 0 && qh.device().is_autodiff()) return attend(qh, kh, vh, std::move(mask)).context;
  const std::size_t batch = qh.shape()[0], lq = qh.shape()[2];
  std::optional<module_ops::AttentionMask> take_part;  // the function's mask: true takes part
  if (mask) take_part = Tensor<4, Bool>(ops::unary(ir::UnaryFn::LogicalNot, mask->dyn()));
  const Tensor<4> ctx = module_ops::scaled_dot_product_attention(qh, kh, vh, take_part);
  return out_proj.forward(ctx.swap_dims(1, 2).reshape<3>(Shape{batch, lq, d_model()}));
}

Tensor<3> MultiHeadAttention::forward(const Tensor<3>& q, const Tensor<3>& k, const Tensor<3>& v,
                                      const AttentionMasks& masks) const {
  return detail::at_layer(*this, [&]() -> Tensor<3> {
    auto mask = checked_mask(q, k, v, masks);
    return context(project(q, 0), project(k, 1), project(v, 2), std::move(mask));
  });
}

AttentionOutput MultiHeadAttention::forward_with_weights(const Tensor<3>& q, const Tensor<3>& k,
                                                         const Tensor<3>& v,
                                                         const AttentionMasks& masks) const {
  return detail::at_layer(*this, [&]() -> AttentionOutput {
    auto mask = checked_mask(q, k, v, masks);
    return attend(project(q, 0), project(k, 1), project(v, 2), std::move(mask));
  });
}

std::optional<Tensor<4, Bool>> MultiHeadAttention::checked_mask(const Tensor<3>& q,
                                                                const Tensor<3>& k,
                                                                const Tensor<3>& v,
                                                                const AttentionMasks& masks) const {
  const std::size_t d = d_model();
  const std::size_t batch = q.shape()[0], lq = q.shape()[1], lk = k.shape()[1];
  EMBER_CHECK(q.shape()[2] == d && k.shape()[2] == kdim() && v.shape()[2] == vdim() &&
                  k.shape()[0] == batch && v.shape()[0] == batch && v.shape()[1] == lk,
              "nn::MultiHeadAttention: expected q [batch, seq_q, " + std::to_string(d) +
                  "], k [batch, seq_k, " + std::to_string(kdim()) + "] and v [batch, seq_k, " +
                  std::to_string(vdim()) + "], got q " + q.shape().to_string() + ", k " +
                  k.shape().to_string() + ", v " + v.shape().to_string());
  std::optional<Tensor<4, Bool>> mask;
  if (masks.attn_mask) {
    EMBER_CHECK(masks.attn_mask->shape() == (Shape{lq, lk}),
                "nn::MultiHeadAttention: attn_mask must be [" + std::to_string(lq) + ", " +
                    std::to_string(lk) + "], got " + masks.attn_mask->shape().to_string());
    mask = masks.attn_mask->reshape<4>(Shape{1, 1, lq, lk});
  }
  if (masks.key_padding_mask) {
    EMBER_CHECK(masks.key_padding_mask->shape() == (Shape{batch, lk}),
                "nn::MultiHeadAttention: key_padding_mask must be [" + std::to_string(batch) +
                    ", " + std::to_string(lk) + "], got " +
                    masks.key_padding_mask->shape().to_string());
    const Tensor<4, Bool> kpm = masks.key_padding_mask->reshape<4>(Shape{batch, 1, 1, lk});
    mask = mask ? Tensor<4, Bool>(ops::binary(ir::BinaryFn::Or, mask->dyn(), kpm.dyn())) : kpm;
  }
  return mask;
}

Tensor<3> MultiHeadAttention::forward_cached(const Tensor<3>& x, KvCache& cache) const {
  return detail::at_layer(*this, [&]() -> Tensor<3> {
    const std::size_t d = d_model();
    EMBER_CHECK(kdim() == d && vdim() == d && x.shape()[2] == d,
                "nn::MultiHeadAttention::forward_cached: self-attention of x [batch, new, " +
                    std::to_string(d) + "], got " + x.shape().to_string());
    const std::size_t past = cache.seen(), fresh = x.shape()[1];
    if (cache.k)
      EMBER_CHECK(cache.k->shape()[0] == x.shape()[0],
                  "nn::MultiHeadAttention::forward_cached: the cache holds batch " +
                      std::to_string(cache.k->shape()[0]) + ", x has " +
                      std::to_string(x.shape()[0]));
    const Tensor<4> kn = project(x, 1), vn = project(x, 2);
    cache.k = cache.k ? Tensor<4>(ops::cat({cache.k->dyn(), kn.dyn()}, 2)) : kn;
    cache.v = cache.v ? Tensor<4>(ops::cat({cache.v->dyn(), vn.dyn()}, 2)) : vn;
    std::optional<Tensor<4, Bool>> mask;
    if (fresh > 1)  // new position i sees keys j <= past + i
      mask = Tensor<4, Bool>(
          ops::reshape(ops::triu_mask(Shape{fresh, past + fresh}, std::int64_t(past), x.device()),
                       Shape{1, 1, fresh, past + fresh}));
    return context(project(x, 0), *cache.k, *cache.v, mask);
  });
}

MultiHeadAttention MultiHeadAttentionConfig::init(const Device& device) const {
  EMBER_CHECK(d_model > 0 && n_heads > 0 && d_model % n_heads == 0,
              "nn::MultiHeadAttentionConfig: n_heads " + std::to_string(n_heads) +
                  " must divide d_model " + std::to_string(d_model));
  EMBER_CHECK(dropout >= 0 && dropout <= 1,
              "nn::MultiHeadAttentionConfig: dropout must be in [0, 1]");
  const std::size_t kd = kdim.value_or(d_model), vd = vdim.value_or(d_model);
  EMBER_CHECK(kd > 0 && vd > 0, "nn::MultiHeadAttentionConfig: kdim and vdim must be positive");
  const auto xavier = [&](std::size_t rows, std::size_t cols) {
    return Param<Tensor<2>>(Initializer::xavier_uniform().init<2>(Shape{rows, cols}, device));
  };
  std::optional<Param<Tensor<2>>> in_proj, q_proj, k_proj, v_proj;
  if (kd == d_model && vd == d_model) {
    in_proj = xavier(3 * d_model, d_model);
  } else {  // PyTorch's order of draws: q, k, v
    q_proj = xavier(d_model, d_model);
    k_proj = xavier(d_model, kd);
    v_proj = xavier(d_model, vd);
  }
  MultiHeadAttention m{std::move(in_proj),
                       std::move(q_proj),
                       std::move(k_proj),
                       std::move(v_proj),
                       std::nullopt,
                       LinearConfig{d_model, d_model}.with_bias(bias).init(device),
                       n_heads,
                       dropout};
  if (bias) {
    m.in_proj_bias.emplace(Tensor<1>::zeros(Shape{3 * d_model}, device));
    m.out_proj.bias.emplace(Tensor<1>::zeros(Shape{d_model}, device));
  }
  return m;
}

namespace {
// One encoder layer around a self-attention `attn` (masked or cached): post-norm, or
// pre-norm with norm_first.
template <class SelfAttention>
Tensor<3> encoder_layer(const TransformerEncoderLayer& l, const Tensor<3>& x,
                        const SelfAttention& attn) {
  const auto act = [&](const Tensor<3>& t) {
    return l.gelu ? activation::gelu(t) : activation::relu(t);
  };
  const auto sa = [&](const Tensor<3>& t) { return l.dropout1.forward(attn(t)); };
  const auto ff = [&](const Tensor<3>& t) {
    return l.dropout2.forward(l.linear2.forward(l.dropout.forward(act(l.linear1.forward(t)))));
  };
  if (l.norm_first) {
    Tensor<3> y = x + sa(l.norm1.forward(x));
    return y + ff(l.norm2.forward(y));
  }
  Tensor<3> y = l.norm1.forward(x + sa(x));
  return l.norm2.forward(y + ff(y));
}
}  // namespace

Tensor<3> TransformerEncoderLayer::forward(const Tensor<3>& x, const AttentionMasks& masks) const {
  return detail::at_layer(*this, [&]() -> Tensor<3> {
    return encoder_layer(*this, x,
                         [&](const Tensor<3>& t) { return self_attn.forward(t, t, t, masks); });
  });
}

Tensor<3> TransformerEncoderLayer::forward_cached(const Tensor<3>& x, KvCache& cache) const {
  return detail::at_layer(*this, [&]() -> Tensor<3> {
    return encoder_layer(*this, x,
                         [&](const Tensor<3>& t) { return self_attn.forward_cached(t, cache); });
  });
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
