// Attention and the training steps. Each training step is a pure function of fixed
// parameters and a fixed batch: forward, backward, and the SGD update p - lr * grad of
// every parameter, written by hand. The updated parameters are computed (they are part of
// the timed work) but not written back, so every repetition does the same step from the
// same state and the result does not depend on how many repetitions ran; the PyTorch side
// (benches/torch_workloads.py) does the same with torch.autograd.grad.
//
// Parameters are built from the shared input hash, scaled by a power of two close to
// 1/sqrt(fan_in) (weight_scale), so both libraries start from bit-identical weights.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "case_builder.hpp"
#include "model_workloads.hpp"

namespace ember::bench {
namespace {

std::int64_t i64(std::size_t v) { return static_cast<std::int64_t>(v); }

template <class T>
T by_size(SizeKind s, T tiny, T full, T gpu) {
  return s == SizeKind::Tiny ? tiny : s == SizeKind::Full ? full : gpu;
}

// A [rows, cols] parameter on the autodiff device, a leaf that requires grad.
Tensor<2> param(std::size_t rows, std::size_t cols, std::uint32_t seed, std::size_t fan_in,
                const Device& ad) {
  return Tensor<2>::from_data(input_data(Shape{rows, cols}, seed, weight_scale(fan_in)), ad)
      .require_grad();
}

// The SGD update of every parameter, on the inner device (outside the graph).
std::vector<DynTensor> sgd_step(const std::vector<Tensor<2>>& params, const Gradients& grads,
                                double lr) {
  std::vector<DynTensor> updated;
  updated.reserve(params.size());
  for (const auto& p : params) {
    auto g = p.grad(grads);
    EMBER_CHECK(g.has_value(), "sgd_step: a parameter got no gradient");
    updated.push_back((p.inner() - std::move(*g).mul_scalar(lr)).dyn());
  }
  return updated;
}

constexpr double kLr = 0.1;

}  // namespace

// The attention workloads' [batch, heads, seq, head_dim].
Shape attention_shape(SizeKind s) {
  return Shape{by_size<std::size_t>(s, 2, 2, 4), by_size<std::size_t>(s, 3, 4, 16),
               by_size<std::size_t>(s, 17, 1024, 2048), by_size<std::size_t>(s, 8, 64, 128)};
}

// softmax(Q K^T / sqrt(d)) V over [batch, heads, seq, head_dim], composed of two batched
// matmuls and a softmax, as a user writes it without a fused attention op; with `fused`,
// module_ops::scaled_dot_product_attention (sdpa; F.scaled_dot_product_attention on the
// PyTorch side). `dt` F32, or BF16 (sdpa only: the inputs rounded to bf16, as PyTorch's
// flash kernel takes them; compared as one flattened list).
Case attention_case(SizeKind s, const Device& dev, bool fused, DType dt = DType::F32) {
  const Shape shape = attention_shape(s);
  const std::size_t b = shape[0], h = shape[1], n = shape[2], d = shape[3];
  const auto in = [&](std::uint32_t seed) {
    return Tensor<4>::from_data(input_data(shape, seed).convert(dt), dev);
  };
  auto q = in(1), k = in(2), v = in(3);
  const double scale = 1.0 / std::sqrt(double(d));
  const double flops = 4.0 * double(b * h) * double(n) * double(n) * double(d);
  Params p{{"shape", dims(shape)}};
  if (dt == DType::BF16) p["bf16"] = {1};
  const double bytes = 4.0 * double(shape.num_elements()) * double(size_of(dt));
  Case c;
  if (dt != DType::F32) {
    c = timed(p, shape, bytes, flops, dev, [q, k, v] {
      return Outputs{{module_ops::scaled_dot_product_attention(q, k, v).dyn()}, {}};
    });
  } else {
    c = timed(p, shape, bytes, flops, dev, [q, k, v, scale, fused] {
      if (fused) return module_ops::scaled_dot_product_attention(q, k, v);
      auto scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale);
      return activation::softmax(std::move(scores), 3).matmul(v);
    });
  }
  c.shape = label("b", b, " h", h, " seq", n, " d", d, dt == DType::F32 ? "" : " bf16");
  c.atol = dt == DType::F32 ? 1e-4 : 2e-2;
  if (dt != DType::F32) c.rtol = 2e-2;
  return c;
}
Case attention_case(SizeKind s, const Device& dev) { return attention_case(s, dev, false); }
Case sdpa_case(SizeKind s, const Device& dev) { return attention_case(s, dev, true); }
Case sdpa_bf16_case(SizeKind s, const Device& dev) {
  return attention_case(s, dev, true, DType::BF16);
}

// The same attention forward and backward: the gradients in q, k and v of sum(out * gy)
// (torch.autograd.grad on the PyTorch side), through the composite or (sdpa_grad) the
// fused function, in f32 or (sdpa only) bf16. Compared: the three gradients.
Case attention_grad_case(SizeKind s, const Device& dev, bool fused, DType dt = DType::F32) {
  const Shape shape = attention_shape(s);
  const std::size_t b = shape[0], h = shape[1], n = shape[2], d = shape[3];
  const Device ad = dev.autodiff();
  const auto in = [&](std::uint32_t seed) {
    return Tensor<4>::from_data(input_data(shape, seed).convert(dt), ad);
  };
  auto q = in(1).require_grad(), k = in(2).require_grad(), v = in(3).require_grad();
  auto gy = in(4);
  const double scale = 1.0 / std::sqrt(double(d));
  // The forward's two products and the backward's four (FlashAttention-2 counts 2.5x).
  const double flops = 3.5 * 4.0 * double(b * h) * double(n) * double(n) * double(d);
  Params p{{"shape", dims(shape)}};
  if (dt == DType::BF16) p["bf16"] = {1};
  Case c = timed(
      p, shape, 8.0 * double(shape.num_elements()) * double(size_of(dt)), flops, ad,
      [q, k, v, gy, scale, fused] {
        Tensor<4> y =
            fused ? module_ops::scaled_dot_product_attention(q, k, v)
                  : activation::softmax(q.matmul(k.swap_dims(2, 3)).mul_scalar(scale), 3).matmul(v);
        Gradients grads = (y * gy).sum().backward();
        Outputs out;
        for (const auto& t : {q, k, v}) out.compared.push_back(t.grad(grads).value().dyn());
        return out;
      });
  c.shape = label("b", b, " h", h, " seq", n, " d", d, dt == DType::F32 ? "" : " bf16");
  c.rtol = dt == DType::F32 ? 1e-3 : 3e-2;
  c.atol = dt == DType::F32 ? 1e-4 : 3e-2;
  return c;
}
Case attention_grad_case(SizeKind s, const Device& dev) {
  return attention_grad_case(s, dev, false);
}
Case sdpa_grad_case(SizeKind s, const Device& dev) { return attention_grad_case(s, dev, true); }
Case sdpa_grad_bf16_case(SizeKind s, const Device& dev) {
  return attention_grad_case(s, dev, true, DType::BF16);
}

// An LSTM-like recurrence: T steps of gates = x_t W + h U + b, split in four, sigmoid /
// tanh, the cell and hidden updates; loss = mean(h_T); backward to W, U and b. Small
// matrices and many ops: it measures what the graph costs per op, forward and backward.
Case autodiff_overhead_case(SizeKind s, const Device& dev) {
  const std::size_t batch = by_size<std::size_t>(s, 3, 8, 8),
                    in = by_size<std::size_t>(s, 5, 128, 128),
                    hid = by_size<std::size_t>(s, 7, 128, 128),
                    steps = by_size<std::size_t>(s, 4, 20, 20);
  const Device ad = dev.autodiff();
  auto xs_all = input<3>(Shape{steps, batch, in}, 1, ad);
  std::vector<Tensor<2>> xs;
  for (std::size_t t = 0; t < steps; ++t) {
    xs.push_back(xs_all.narrow(0, i64(t), 1).reshape<2>(Shape{batch, in}));
  }
  const std::vector<Tensor<2>> params{param(in, 4 * hid, 2, in, ad),
                                      param(hid, 4 * hid, 3, hid, ad),
                                      param(1, 4 * hid, 4, hid, ad)};
  const double gate_flops = 2.0 * double(batch) * double(in + hid) * double(4 * hid);
  Params p{
      {"batch", {i64(batch)}}, {"in", {i64(in)}}, {"hidden", {i64(hid)}}, {"steps", {i64(steps)}}};
  Case c = timed(p, Shape{batch, hid}, 0, 3.0 * double(steps) * gate_flops, ad,
                 [xs, params, batch, hid] {
                   const auto& [w, u, b] = std::tie(params[0], params[1], params[2]);
                   const auto H = i64(hid);
                   auto h = Tensor<2>::zeros(Shape{batch, hid}, w.device());
                   auto cell = Tensor<2>::zeros(Shape{batch, hid}, w.device());
                   for (const auto& x : xs) {
                     auto z = x.matmul(w) + h.matmul(u) + b;
                     auto i = activation::sigmoid(z.narrow(1, 0, hid));
                     auto f = activation::sigmoid(z.narrow(1, H, hid));
                     auto g = activation::tanh(z.narrow(1, 2 * H, hid));
                     auto o = activation::sigmoid(z.narrow(1, 3 * H, hid));
                     cell = f * cell + i * g;
                     h = o * cell.tanh();
                   }
                   auto loss = h.mean();
                   Gradients grads = loss.backward();
                   Outputs out;
                   out.compared.push_back(loss.inner().dyn());
                   for (const auto& prm : params)
                     out.compared.push_back(prm.grad(grads).value().dyn());
                   return out;
                 });
  c.shape = label("T", steps, " b", batch, " in", in, " h", hid);
  c.rtol = 1e-4;
  c.atol = 1e-6;
  return c;
}

// One SGD step of the Fashion-MNIST MLP (784-256-10, batch 64, relu), cross-entropy as
// -mean(log_softmax(logits)[label]) through gather. Compared: the loss and every updated
// parameter.
Case mlp_train_step_case(SizeKind s, const Device& dev) {
  const std::size_t batch = by_size<std::size_t>(s, 6, 64, 64),
                    in = by_size<std::size_t>(s, 13, 784, 784),
                    hid = by_size<std::size_t>(s, 11, 256, 256), classes = 10;
  const Device ad = dev.autodiff();
  auto x = input<2>(Shape{batch, in}, 1, ad);
  // Labels from the same hash: (value + 1) * 2^23 is the hash's integer, exactly.
  std::vector<std::int64_t> labels(batch);
  for (std::size_t i = 0; i < batch; ++i) {
    const double v = double(input_value(static_cast<std::uint32_t>(i), 2)) + 1.0;
    labels[i] = static_cast<std::int64_t>(v * 8388608.0) % i64(classes);
  }
  auto y = Tensor<2, Int>::from_data(TensorData::from(labels, Shape{batch, 1}), ad);
  const std::vector<Tensor<2>> params{param(in, hid, 3, in, ad), param(1, hid, 4, in, ad),
                                      param(hid, classes, 5, hid, ad),
                                      param(1, classes, 6, hid, ad)};
  const double fwd_flops = 2.0 * double(batch) * double(in * hid + hid * classes);
  double n_params = 0;
  for (const auto& prm : params) n_params += double(prm.num_elements());
  Params p{{"batch", {i64(batch)}},
           {"in", {i64(in)}},
           {"hidden", {i64(hid)}},
           {"classes", {i64(classes)}}};
  Case c = timed(p, Shape{batch, in}, (double(batch * in) + 3 * n_params) * kF32, 3.0 * fwd_flops,
                 ad, [x, y, params] {
                   auto hidden = activation::relu(x.matmul(params[0]) + params[1]);
                   auto logits = hidden.matmul(params[2]) + params[3];
                   auto loss = -activation::log_softmax(logits, 1).gather(1, y).mean();
                   Gradients grads = loss.backward();
                   Outputs out;
                   out.compared.push_back(loss.inner().dyn());
                   for (auto& u : sgd_step(params, grads, kLr)) out.compared.push_back(u);
                   return out;
                 });
  c.shape = label("b", batch, " ", in, "-", hid, "-", classes);
  c.rtol = 1e-4;
  c.atol = 1e-5;
  return c;
}

namespace {

// The Fashion-MNIST CNN of `make demo`, from nn layers: conv 3x3 pad 1 -> BatchNorm2d ->
// relu -> max pool 2, twice, then flatten -> dropout -> Linear -> relu -> Linear.
struct Cnn {
  nn::Conv<2> conv1;
  nn::BatchNorm bn1;
  nn::Conv<2> conv2;
  nn::BatchNorm bn2;
  nn::Linear fc1;
  nn::Linear fc2;
  double dropout = 0.5;
  EMBER_MODULE(Cnn, conv1, bn1, conv2, bn2, fc1, fc2, dropout)

  Tensor<2> forward(const Tensor<4>& x) const {
    const nn::MaxPool<2> pool = nn::MaxPoolConfig<2>{{2, 2}}.init();
    auto h = pool.forward(activation::relu(bn1.forward(conv1.forward(x))));
    h = pool.forward(activation::relu(bn2.forward(conv2.forward(h))));
    auto flat = h.reshape<2>(Shape{h.dims()[0], h.num_elements() / h.dims()[0]});
    flat = nn::Dropout{dropout}.forward(flat);
    return fc2.forward(activation::relu(fc1.forward(flat)));
  }
};

template <std::size_t D>
nn::Param<Tensor<D>> nn_param(const Shape& s, std::uint32_t seed, std::size_t fan_in,
                              const Device& ad) {
  return nn::Param<Tensor<D>>(Tensor<D>::from_data(input_data(s, seed, weight_scale(fan_in)), ad));
}

nn::Conv<2> cnn_conv(std::size_t in, std::size_t out, std::uint32_t seed, const Device& ad) {
  return nn::Conv<2>{nn_param<4>(Shape{out, in, 3, 3}, seed, in * 9, ad),
                     nn_param<1>(Shape{out}, seed + 1, in * 9, ad),
                     {1, 1},
                     nn::Padding{1, 1},
                     {1, 1},
                     1};
}

nn::Linear cnn_linear(std::size_t in, std::size_t out, std::uint32_t seed, const Device& ad) {
  return nn::Linear{nn_param<2>(Shape{out, in}, seed, in, ad),
                    nn_param<1>(Shape{out}, seed + 1, in, ad)};
}

struct CnnDims {
  std::size_t batch, image, c1, c2, hidden, classes, dropout_percent;
};

}  // namespace

// One AdamW training step of the Fashion-MNIST CNN (Cnn above) through the Autodiff
// decorator with nn layers: forward in training mode (batch statistics, dropout), cross
// entropy, backward, and optim::AdamW's step. Each repetition steps from the same initial
// model with a fresh optimizer, so every repetition does the same work; the PyTorch side
// does the same with torch.optim.AdamW on copies of its parameters. Compared: the loss and
// every parameter's gradient (dropout 0 at the tiny size, where outputs are checked; the
// full size drops as the demo does, so its outputs are random and cannot be compared).
Case cnn_train_step_case(SizeKind s, const Device& dev) {
  const CnnDims d = by_size<CnnDims>(s, {3, 8, 3, 4, 5, 10, 0}, {128, 28, 32, 64, 128, 10, 50},
                                     {128, 28, 32, 64, 128, 10, 50});
  const Device ad = dev.autodiff();
  const std::size_t q = d.image / 4, flat = d.c2 * q * q;
  auto x = input<4>(Shape{d.batch, 1, d.image, d.image}, 1, ad);
  std::vector<std::int64_t> labels(d.batch);
  for (std::size_t i = 0; i < d.batch; ++i) {
    const double v = double(input_value(static_cast<std::uint32_t>(i), 2)) + 1.0;
    labels[i] = static_cast<std::int64_t>(v * 8388608.0) % i64(d.classes);
  }
  auto y = Tensor<2, Int>::from_data(TensorData::from(labels, Shape{d.batch, 1}), ad);
  const Cnn model{cnn_conv(1, d.c1, 10, ad),          nn::BatchNormConfig{d.c1}.init(ad),
                  cnn_conv(d.c1, d.c2, 20, ad),       nn::BatchNormConfig{d.c2}.init(ad),
                  cnn_linear(flat, d.hidden, 30, ad), cnn_linear(d.hidden, d.classes, 40, ad),
                  double(d.dropout_percent) / 100.0};
  const double px = double(d.image * d.image), b = double(d.batch);
  const double fwd_flops = 2.0 * b *
                           (px * double(d.c1) * 9.0 + px / 4.0 * double(d.c2 * d.c1) * 9.0 +
                            double(flat * d.hidden + d.hidden * d.classes));
  Params p{{"batch", {i64(d.batch)}},
           {"image", {i64(d.image)}},
           {"c1", {i64(d.c1)}},
           {"c2", {i64(d.c2)}},
           {"hidden", {i64(d.hidden)}},
           {"classes", {i64(d.classes)}},
           {"dropout_percent", {i64(d.dropout_percent)}}};
  Case c = timed(p, Shape{d.batch, 1, d.image, d.image}, 0, 3.0 * fwd_flops, ad, [x, y, model] {
    auto loss = -activation::log_softmax(model.forward(x), 1).gather(1, y).mean();
    Gradients grads = loss.backward();
    Outputs out;
    out.compared.push_back(loss.inner().dyn());
    nn::visit(model, [&](const nn::TensorEntry& e) {
      if (e.is_param()) out.compared.push_back(ops::grad(e.tensor, grads).value());
    });
    auto opt = optim::AdamWConfig{}.init();
    Cnn next =
        opt.step(1e-3, Cnn(model), optim::GradientsParams::from_grads(std::move(grads), model));
    nn::visit(next, [&](const nn::TensorEntry& e) {
      if (e.is_param()) out.kept.push_back(ops::inner(e.tensor));
    });
    return out;
  });
  c.shape = label("b", d.batch, " ", d.image, "x", d.image, " c", d.c1, "-", d.c2, " fc", flat, "-",
                  d.hidden, "-", d.classes);
  c.rtol = 1e-3;  // batch norm over few values and two convolutions, summed differently
  c.atol = 1e-4;
  return c;
}

namespace {

// A ResNet-18 basic block: conv 3x3 (stride s) -> BatchNorm -> relu -> conv 3x3 ->
// BatchNorm, plus the shortcut (conv 1x1 stride s -> BatchNorm where the shape changes),
// then relu.
struct ResBlock {
  nn::Conv<2> conv1;
  nn::BatchNorm bn1;
  nn::Conv<2> conv2;
  nn::BatchNorm bn2;
  std::optional<nn::Conv<2>> down;
  std::optional<nn::BatchNorm> down_bn;
  EMBER_MODULE(ResBlock, conv1, bn1, conv2, bn2, down, down_bn)

  Tensor<4> forward(const Tensor<4>& x) const {
    auto y = activation::relu(bn1.forward(conv1.forward(x)));
    y = bn2.forward(conv2.forward(y));
    return activation::relu(y + (down ? down_bn->forward(down->forward(x)) : x));
  }
};

// ResNet-18 for 32x32 images (the CIFAR form: a 3x3 stem, no max pool): four stages of two
// blocks (one at the tiny size) of widths base, 2 base, 4 base, 8 base (strides 1, 2, 2, 2),
// global average pool, a linear classifier.
struct ResNet18 {
  nn::Conv<2> stem;
  nn::BatchNorm stem_bn;
  std::vector<ResBlock> blocks;
  nn::Linear fc;
  EMBER_MODULE(ResNet18, stem, stem_bn, blocks, fc)

  Tensor<2> forward(const Tensor<4>& x) const {
    auto h = activation::relu(stem_bn.forward(stem.forward(x)));
    for (const auto& b : blocks) h = b.forward(h);
    const auto d = h.dims();
    return fc.forward(
        h.reshape<3>(Shape{d[0], d[1], d[2] * d[3]}).mean_dim(2).reshape<2>(Shape{d[0], d[1]}));
  }
};

// A k x k convolution without bias, padding k / 2, weights from the input hash.
nn::Conv<2> res_conv(std::size_t in, std::size_t out, std::size_t k, std::size_t stride,
                     std::uint32_t seed, const Device& ad) {
  return nn::Conv<2>{nn_param<4>(Shape{out, in, k, k}, seed, in * k * k, ad),
                     std::nullopt,
                     {stride, stride},
                     nn::Padding{k / 2, k / 2},
                     {1, 1},
                     1};
}

struct ResDims {
  std::size_t batch, image, base, classes, per_stage;  // per_stage: blocks (2 in ResNet-18)
};

}  // namespace

// One AdamW training step of ResNet-18 (above) on 32x32 images through the Autodiff
// decorator, as cnn_train_step: batch-statistics BatchNorm, cross entropy, backward,
// optim::AdamW from the same initial model every repetition. Compared: the loss and every
// parameter's gradient.
Case resnet_train_step_case(SizeKind s, const Device& dev) {
  const ResDims d = by_size<ResDims>(s, {4, 16, 2, 5, 1}, {8, 32, 16, 10, 2}, {128, 32, 64, 10, 2});
  const Device ad = dev.autodiff();
  auto x = input<4>(Shape{d.batch, 3, d.image, d.image}, 1, ad);
  std::vector<std::int64_t> labels(d.batch);
  for (std::size_t i = 0; i < d.batch; ++i) {
    const double v = double(input_value(static_cast<std::uint32_t>(i), 2)) + 1.0;
    labels[i] = static_cast<std::int64_t>(v * 8388608.0) % i64(d.classes);
  }
  auto y = Tensor<2, Int>::from_data(TensorData::from(labels, Shape{d.batch, 1}), ad);
  double flops = 0;  // forward, per image
  const auto conv = [&](std::size_t in, std::size_t out, std::size_t k, std::size_t stride,
                        std::size_t image, std::uint32_t seed) {
    const double o = double(image / stride);
    flops += 2.0 * o * o * double(out * in * k * k);
    return res_conv(in, out, k, stride, seed, ad);
  };
  const auto bn = [&](std::size_t c) { return nn::BatchNormConfig{c}.init(ad); };
  nn::Conv<2> stem = conv(3, d.base, 3, 1, d.image, 10);
  std::vector<ResBlock> blocks;
  std::size_t in = d.base, image = d.image;
  for (std::size_t i = 0; i < 4 * d.per_stage; ++i) {
    const std::size_t stage = i / d.per_stage, width = d.base << stage;
    const std::size_t stride = (i % d.per_stage == 0 && stage > 0) ? 2 : 1;
    const auto seed = static_cast<std::uint32_t>(100 + 10 * i);
    ResBlock b{conv(in, width, 3, stride, image, seed),
               bn(width),
               conv(width, width, 3, 1, image / stride, seed + 1),
               bn(width),
               std::nullopt,
               std::nullopt};
    if (stride != 1 || in != width) {
      b.down = conv(in, width, 1, stride, image, seed + 2);
      b.down_bn = bn(width);
    }
    blocks.push_back(std::move(b));
    in = width;
    image /= stride;
  }
  const ResNet18 model{std::move(stem), bn(d.base), std::move(blocks),
                       nn::Linear{nn_param<2>(Shape{d.classes, in}, 900, in, ad),
                                  nn_param<1>(Shape{d.classes}, 901, in, ad)}};
  flops += 2.0 * double(in * d.classes);
  Params p{{"batch", {i64(d.batch)}},
           {"image", {i64(d.image)}},
           {"base", {i64(d.base)}},
           {"classes", {i64(d.classes)}},
           {"per_stage", {i64(d.per_stage)}}};
  Case c = timed(
      p, Shape{d.batch, 3, d.image, d.image}, 0, 3.0 * flops * double(d.batch), ad, [x, y, model] {
        auto loss = -activation::log_softmax(model.forward(x), 1).gather(1, y).mean();
        Gradients grads = loss.backward();
        Outputs out;
        out.compared.push_back(loss.inner().dyn());
        nn::visit(model, [&](const nn::TensorEntry& e) {
          if (e.is_param()) out.compared.push_back(ops::grad(e.tensor, grads).value());
        });
        auto opt = optim::AdamWConfig{}.init();
        ResNet18 next = opt.step(1e-3, ResNet18(model),
                                 optim::GradientsParams::from_grads(std::move(grads), model));
        nn::visit(next, [&](const nn::TensorEntry& e) {
          if (e.is_param()) out.kept.push_back(ops::inner(e.tensor));
        });
        return out;
      });
  c.shape = label("b", d.batch, " ", d.image, "x", d.image, " base ", d.base, " blocks ",
                  4 * d.per_stage);
  c.rtol = 1e-3;  // batch norm and convolutions over many terms, summed differently
  c.atol = 1e-4;
  return c;
}

namespace {

// Post-norm layer norm over the last dim: the fused op, as F.layer_norm on the PyTorch side.
Tensor<2> layer_norm(const Tensor<2>& x, const Tensor<2>& gamma, const Tensor<2>& beta) {
  const Shape d{x.dims()[1]};
  return module_ops::layer_norm(x, gamma.reshape<1>(d), beta.reshape<1>(d), 1e-5);
}

struct EncoderDims {
  std::size_t batch, seq, d_model, heads, d_ff, layers;
};

// The parameters of one encoder layer, in the order of the PyTorch side.
enum EncoderParam { Wq, Bq, Wk, Bk, Wv, Bv, Wo, Bo, G1, Be1, W1, B1, W2, B2, G2, Be2, kPerLayer };

}  // namespace

// A RoBERTa-like encoder training step: the embeddings are the input [batch * seq, d_model];
// each of L post-norm layers runs multi-head self-attention (no mask) and a GELU MLP, each
// followed by a residual add and layer norm; loss = mean over tokens of <x, target>;
// backward; SGD on every parameter. Compared: the loss and the gradient of the first
// layer's query weight.
Case transformer_encoder_step_case(SizeKind s, const Device& dev) {
  const EncoderDims e = by_size<EncoderDims>(s, {2, 5, 8, 2, 16, 2}, {2, 128, 256, 4, 1024, 2},
                                             {2, 256, 768, 12, 3072, 12});
  const std::size_t tokens = e.batch * e.seq, dh = e.d_model / e.heads;
  const Device ad = dev.autodiff();
  auto x0 = input<2>(Shape{tokens, e.d_model}, 1, ad);
  auto target = input<2>(Shape{tokens, e.d_model}, 2, ad);
  std::vector<Tensor<2>> params;
  for (std::size_t l = 0; l < e.layers; ++l) {
    const auto seed = [&](int j) { return static_cast<std::uint32_t>(1000 + kPerLayer * l + j); };
    const std::size_t dm = e.d_model, ff = e.d_ff;
    for (int j : {Wq, Bq, Wk, Bk, Wv, Bv, Wo, Bo}) {
      params.push_back(param(j % 2 ? 1 : dm, dm, seed(j), dm, ad));
    }
    params.push_back(Tensor<2>::ones(Shape{1, dm}, ad).require_grad());
    params.push_back(Tensor<2>::zeros(Shape{1, dm}, ad).require_grad());
    params.push_back(param(dm, ff, seed(W1), dm, ad));
    params.push_back(param(1, ff, seed(B1), dm, ad));
    params.push_back(param(ff, dm, seed(W2), ff, ad));
    params.push_back(param(1, dm, seed(B2), ff, ad));
    params.push_back(Tensor<2>::ones(Shape{1, dm}, ad).require_grad());
    params.push_back(Tensor<2>::zeros(Shape{1, dm}, ad).require_grad());
  }
  double n_params = 0;
  for (const auto& prm : params) n_params += double(prm.num_elements());
  const double t = double(tokens), dm = double(e.d_model);
  const double layer_flops = 2.0 * t * dm * (4.0 * dm + 2.0 * double(e.d_ff)) +
                             4.0 * double(e.batch) * double(e.seq) * double(e.seq) * dm;
  Params p{{"batch", {i64(e.batch)}}, {"seq", {i64(e.seq)}},   {"d_model", {i64(e.d_model)}},
           {"heads", {i64(e.heads)}}, {"d_ff", {i64(e.d_ff)}}, {"layers", {i64(e.layers)}}};
  Case c = timed(p, Shape{tokens, e.d_model}, 3 * n_params * kF32,
                 3.0 * double(e.layers) * layer_flops, ad, [x0, target, params, e, dh] {
                   const Shape split{e.batch, e.seq, e.heads, dh};
                   const Shape merged{e.batch * e.seq, e.d_model};
                   const double scale = 1.0 / std::sqrt(double(dh));
                   // [tokens, d_model] -> [batch, heads, seq, head_dim]
                   const auto heads = [&](const Tensor<2>& t2) {
                     return t2.reshape<4>(split).swap_dims(1, 2);
                   };
                   auto x = x0;
                   for (std::size_t l = 0; l < e.layers; ++l) {
                     const Tensor<2>* w = &params[l * kPerLayer];
                     auto q = heads(x.matmul(w[Wq]) + w[Bq]);
                     auto k = heads(x.matmul(w[Wk]) + w[Bk]);
                     auto v = heads(x.matmul(w[Wv]) + w[Bv]);
                     auto att =
                         activation::softmax(q.matmul(k.swap_dims(2, 3)).mul_scalar(scale), 3);
                     auto ctx = att.matmul(v).swap_dims(1, 2).reshape<2>(merged);
                     x = layer_norm(x + (ctx.matmul(w[Wo]) + w[Bo]), w[G1], w[Be1]);
                     auto ff = activation::gelu(x.matmul(w[W1]) + w[B1]).matmul(w[W2]) + w[B2];
                     x = layer_norm(x + ff, w[G2], w[Be2]);
                   }
                   auto loss = (x * target).sum_dim(1).mean();
                   Gradients grads = loss.backward();
                   Outputs out;
                   out.compared.push_back(loss.inner().dyn());
                   out.compared.push_back(params[Wq].grad(grads).value().dyn());
                   out.kept = sgd_step(params, grads, kLr);
                   return out;
                 });
  c.shape = label("L", e.layers, " d", e.d_model, " h", e.heads, " ff", e.d_ff, " b", e.batch, "x",
                  e.seq);
  c.rtol = 1e-3;  // two layers of f32 matmuls, softmax and layer norm, summed differently
  c.atol = 1e-5;
  return c;
}

}  // namespace ember::bench
