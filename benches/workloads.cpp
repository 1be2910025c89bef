// The workload table (after Burn's benchmark suite) and the ember code each one times.
// A workload is a function from a size to a Case: it builds its inputs once, outside the
// timed region, and returns a closure that runs one repetition. Byte counts are those of an
// ideal implementation (each input read once, each output written once), so "% of roofline"
// says how far a composite of several passes is from a single fused pass.
#include "workloads.hpp"

#include "case_builder.hpp"
#include "model_workloads.hpp"
#include "optim_workloads.hpp"

#include <cmath>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

namespace ember::bench {

const char* name(SizeKind s) {
  switch (s) {
    case SizeKind::Tiny:
      return "tiny";
    case SizeKind::Full:
      return "full";
    default:
      return "gpu";
  }
}

TensorData input_data(const Shape& shape, std::uint32_t seed, float scale) {
  std::vector<float> v(shape.num_elements());
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = input_value(static_cast<std::uint32_t>(i), seed) * scale;
  return TensorData::from<float>(v, shape);
}

std::string compare(const TensorData& got, const TensorData& want, double rtol, double atol) {
  if (got.shape() != want.shape()) {
    return "shape " + got.shape().to_string() + " vs PyTorch " + want.shape().to_string();
  }
  double worst = 0;
  std::size_t at = 0;
  bool bad = false;
  for (std::size_t i = 0; i < got.num_elements(); ++i) {
    const double g = got.get_f64(i), w = want.get_f64(i);
    const double excess = std::abs(g - w) - (atol + rtol * std::abs(w));
    const bool nan_mismatch = std::isnan(g) != std::isnan(w);
    if (nan_mismatch || excess > worst) {
      worst = nan_mismatch ? INFINITY : excess;
      at = i;
      bad = true;
    }
  }
  if (!bad) return {};
  std::ostringstream os;
  os.precision(9);
  os << "element " << at << ": ember " << got.get_f64(at) << " vs PyTorch " << want.get_f64(at)
     << " (rtol " << rtol << ", atol " << atol << ")";
  return os.str();
}

TensorData to_td(const Outputs& o) {
  std::vector<float> flat;
  for (const auto& t : o.compared) {
    const TensorData d = t.to_data();
    for (std::size_t i = 0; i < d.num_elements(); ++i) flat.push_back(float(d.get_f64(i)));
  }
  const std::size_t n = flat.size();
  return TensorData::from<float>(flat, Shape{n});
}

namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;

// Element-wise shapes: the full size is Burn's [32, 512, 2048]-like 32 Mi elements for one
// op and 16 Mi for chains of several ops (which make several passes), so each lands in the
// 10–500 ms window on 2 cores; tiny sizes are odd so that vector tails and thread splits
// are exercised.
// On the GPU every element-wise operand is 256 MB and every row-reduced matrix 256 MB, so
// that launch costs vanish and the kernels run at memory bandwidth.
Shape ew_shape(SizeKind s) {
  return s == SizeKind::Tiny   ? Shape{3, 17, 33}
         : s == SizeKind::Full ? Shape{32, 1024, 1024}
                               : Shape{64, 1024, 1024};
}
Shape chain_shape(SizeKind s) {
  return s == SizeKind::Tiny   ? Shape{3, 17, 33}
         : s == SizeKind::Full ? Shape{16, 1024, 1024}
                               : Shape{64, 1024, 1024};
}
Shape rows_shape(SizeKind s) {
  return s == SizeKind::Tiny   ? Shape{37, 129}
         : s == SizeKind::Full ? Shape{8192, 4096}
                               : Shape{16384, 4096};
}
// Picks the size of one of the three kinds.
template <class T>
T by_size(SizeKind s, T tiny, T full, T gpu) {
  return s == SizeKind::Tiny ? tiny : s == SizeKind::Full ? full : gpu;
}

// One input of `shape`, one output of the same size: f(x).
Case unary_case(const Device& dev, Tensor<3> (*f)(const Tensor<3>&), const Shape& shape) {
  auto x = input<3>(shape, 1, dev);
  const double n = double(shape.num_elements());
  return timed({{"shape", dims(shape)}}, shape, 2 * n * kF32, 0, dev, [x, f] { return f(x); });
}

Case reduce_case(SizeKind s, const Device& dev, bool exp_first, int which) {
  // which: 0 = full sum, 1 = sum_dim(1), 2 = sum_dim(0), 3 = argmin_dim(1)
  const Shape shape = rows_shape(s);
  auto x = input<2>(shape, 1, dev);
  const double n = double(shape.num_elements());
  Params p{{"shape", dims(shape)}};
  const double out_bytes = which == 0   ? kF32
                           : which == 2 ? double(shape[1]) * kF32
                           : which == 3 ? double(shape[0]) * 8
                                        : double(shape[0]) * kF32;
  const double bytes = n * kF32 + out_bytes;
  Case c;
  switch (which) {
    case 0:
      c = timed(p, shape, bytes, 0, dev,
                [x, exp_first] { return (exp_first ? x.exp() : x).sum(); });
      c.rtol = 1e-3;  // a different summation order over many terms
      c.atol = 1e-3;
      break;
    case 1:
      c = timed(p, shape, bytes, 0, dev,
                [x, exp_first] { return (exp_first ? x.exp() : x).sum_dim(1); });
      break;
    case 2:
      c = timed(p, shape, bytes, 0, dev,
                [x, exp_first] { return (exp_first ? x.exp() : x).sum_dim(0); });
      break;
    default:
      c = timed(p, shape, bytes, 0, dev,
                [x, exp_first] { return (exp_first ? x.exp() : x).argmin_dim(1); });
      c.rtol = 0;
      c.atol = 0;
  }
  if (which == 1 || which == 2) c.atol = 1e-4;
  return c;
}

// dt: F32, or F16 / BF16 operands and product (the inputs rounded on the device; the
// PyTorch side's the same, its bf16 product oneDNN's on the CPU).
Case matmul_case(SizeKind s, const Device& dev, std::size_t b, std::size_t m, std::size_t k,
                 std::size_t n, DType dt = DType::F32) {
  Params p{{"b", {std::int64_t(b)}},
           {"m", {std::int64_t(m)}},
           {"k", {std::int64_t(k)}},
           {"n", {std::int64_t(n)}}};
  const bool half = dt != DType::F32;
  if (dt == DType::F16) p["half"] = {1};
  if (dt == DType::BF16) p["bf16"] = {1};
  const double flops = 2.0 * double(b) * double(m) * double(n) * double(k);
  const double bytes = double(b) * double(m * k + k * n + m * n) * (half ? 2.0 : kF32);
  Case c;
  if (half) {
    auto x = input<2>(Shape{m, k}, 1, dev).cast(dt);
    auto y = input<2>(Shape{k, n}, 2, dev).cast(dt);
    c = timed(p, Shape{m, k, n}, bytes, flops, dev, [x, y] { return x.matmul(y); });
    c.shape = label("b", b, " m", m, " k", k, " n", n, dt == DType::F16 ? " f16" : " bf16");
    c.rtol = dt == DType::F16 ? 1e-2 : 2e-2;
    c.atol = c.rtol * std::sqrt(double(k));
    return c;
  }
  if (b == 1) {
    auto x = input<2>(Shape{m, k}, 1, dev);
    auto y = input<2>(Shape{k, n}, 2, dev);
    c = timed(p, Shape{m, k, n}, bytes, flops, dev, [x, y] { return x.matmul(y); });
  } else {
    auto x = input<3>(Shape{b, m, k}, 1, dev);
    auto y = input<3>(Shape{b, k, n}, 2, dev);
    c = timed(p, Shape{b, m, k, n}, bytes, flops, dev, [x, y] { return x.matmul(y); });
  }
  c.shape = label("b", b, " m", m, " k", k, " n", n);
  c.rtol = 1e-4;
  c.atol = 1e-4 * std::sqrt(double(k));  // inputs in [-1, 1): sums of k terms of mixed sign
  return c;
}

// conv2d of x [N, C, H, W] with weight [O, C, kh, kw], no bias, square stride and padding.
Case conv2d_case(const Device& dev, const Shape& xs, const Shape& ws, std::size_t stride,
                 std::size_t padding, std::size_t groups = 1) {
  auto x = input<4>(xs, 1, dev);
  auto w = input<4>(ws, 2, dev);
  const std::size_t oh = (xs[2] + 2 * padding - ws[2]) / stride + 1,
                    ow = (xs[3] + 2 * padding - ws[3]) / stride + 1;
  const double k = double(ws[1] * ws[2] * ws[3]);
  const double flops = 2.0 * double(xs[0] * ws[0] * oh * ow) * k;
  const double bytes =
      double(xs.num_elements() + ws.num_elements() + xs[0] * ws[0] * oh * ow) * kF32;
  Params p{{"x", dims(xs)},
           {"w", dims(ws)},
           {"stride", {std::int64_t(stride)}},
           {"padding", {std::int64_t(padding)}},
           {"groups", {std::int64_t(groups)}}};
  const module_ops::Size2 st{stride, stride}, pd{padding, padding};
  Case c = timed(p, xs, bytes, flops, dev, [x, w, st, pd, groups] {
    return module_ops::conv2d(x, w, std::nullopt, {.stride = st, .padding = pd, .groups = groups});
  });
  c.shape = xs.to_string() + " * " + ws.to_string() + " s" + std::to_string(stride) + " p" +
            std::to_string(padding) + (groups > 1 ? " g" + std::to_string(groups) : "");
  c.rtol = 1e-4;
  c.atol = 1e-4 * std::sqrt(k);  // inputs in [-1, 1): sums of k terms of mixed sign
  return c;
}

// The backward passes of conv2d (pad 1, stride 1, no bias) on the Autodiff decorator:
// y = conv2d(x, w), loss = sum(y * gy), backward to w (and to x when grad_input). The
// forward is part of the timed work, as in a training step. Compared: dw (then dx).
Case conv2d_grad_case(const Device& dev, const Shape& xs, const Shape& ws, bool grad_input,
                      std::size_t groups = 1) {
  const Device ad = dev.autodiff();
  auto x = input<4>(xs, 1, ad);
  if (grad_input) x = x.require_grad();
  auto w = input<4>(ws, 2, ad).require_grad();
  const Shape ys{xs[0], ws[0], xs[2], xs[3]};
  auto gy = input<4>(ys, 3, ad);
  const double k = double(ws[1] * ws[2] * ws[3]);
  const double flops = 2.0 * double(ys.num_elements()) * k * (grad_input ? 3.0 : 2.0);
  Params p{{"x", dims(xs)},
           {"w", dims(ws)},
           {"grad_input", {grad_input ? 1 : 0}},
           {"groups", {std::int64_t(groups)}}};
  Case c = timed(p, xs, 0, flops, ad, [x, w, gy, grad_input, groups] {
    auto y = module_ops::conv2d(x, w, std::nullopt, {.padding = {1, 1}, .groups = groups});
    Gradients grads = (y * gy).sum().backward();
    Outputs out;
    out.compared.push_back(w.grad(grads).value().dyn());
    if (grad_input) out.compared.push_back(x.grad(grads).value().dyn());
    return out;
  });
  c.shape = xs.to_string() + " * " + ws.to_string() + " p1" +
            (groups > 1 ? " g" + std::to_string(groups) : "") + (grad_input ? " dx dw" : " dw");
  c.rtol = 1e-4;
  c.atol = 1e-4 * std::sqrt(double(ys.num_elements() / ws[0]));  // dw sums N*H*W terms
  return c;
}

// Batch norm (0: training statistics, 1: eval with running statistics), group norm (2: 32
// groups), layer norm over [C, H, W] (3) or RMS norm over [C, H, W] (4, weight only) of x
// [N, C, H, W], through the nn layers (the forward PyTorch's F.batch_norm / F.group_norm /
// F.layer_norm / F.rms_norm run); with `grad` on the Autodiff decorator, forward and
// backward of sum(y * gy), compared: dx, dweight, dbias (RMS norm: dx, dweight).
Case norm_case(SizeKind s, const Device& dev, int kind, bool grad) {
  const Shape xs = by_size(s, Shape{3, 64, 5, 7}, Shape{32, 64, 64, 64}, Shape{64, 128, 64, 64});
  const std::size_t c = xs[1];
  const Device d = grad ? dev.autodiff() : dev;
  auto x = input<4>(xs, 1, d);
  if (grad) x = x.require_grad();
  const Shape ps = kind >= 3 ? Shape{xs[1] * xs[2] * xs[3]} : Shape{c};
  auto w = nn::Param<Tensor<1>>(input<1>(ps, 2, d).add_scalar(1.0));
  auto b = nn::Param<Tensor<1>>(input<1>(ps, 3, d));
  auto gy = input<4>(xs, 4, d);
  std::function<Tensor<4>(const Tensor<4>&)> fwd;
  if (kind == 0 || kind == 1) {
    // Eval mode needs the inner device (training is the autodiff device's mode).
    nn::BatchNorm bn{w,
                     b,
                     nn::Buffer<Tensor<1>>(input<1>(Shape{c}, 5, dev).mul_scalar(0.1)),
                     nn::Buffer<Tensor<1>>(input<1>(Shape{c}, 6, dev).abs().add_scalar(0.5)),
                     nn::Buffer<Tensor<1, Int>>(Tensor<1, Int>::zeros(Shape{1}, dev), true),
                     1e-5,
                     0.1};
    if (kind == 0) {
      fwd = [w, b](const Tensor<4>& v) {
        return Tensor<4>(ops::batch_norm_training(v.dyn(), w.val().dyn(), b.val().dyn(), 1e-5).y);
      };
    } else {
      fwd = [bn](const Tensor<4>& v) { return bn.forward(v); };
    }
  } else if (kind == 2) {
    nn::GroupNorm gn{w, b, 32, c, 1e-5};
    fwd = [gn](const Tensor<4>& v) { return gn.forward(v); };
  } else if (kind == 4) {
    const Shape ns{xs[1], xs[2], xs[3]};
    fwd = [w, ns](const Tensor<4>& v) {
      return Tensor<4>(ops::rms_norm(v.dyn(), ns, ops::reshape(w.val().dyn(), ns), 1e-5));
    };
  } else {
    const Shape ns{xs[1], xs[2], xs[3]};
    fwd = [w, b, ns](const Tensor<4>& v) {
      return Tensor<4>(ops::layer_norm(v.dyn(), ns, ops::reshape(w.val().dyn(), ns),
                                       ops::reshape(b.val().dyn(), ns), 1e-5));
    };
  }
  const double n = double(xs.num_elements());
  Params p{{"x", dims(xs)}, {"kind", {kind}}, {"grad", {grad ? 1 : 0}}};
  Case cs = timed(p, xs, (grad ? 5 : 2) * n * kF32, 0, d, [x, w, b, gy, fwd, grad, kind] {
    Tensor<4> y = fwd(x);
    Outputs out;
    if (!grad) {
      out.compared.push_back(y.dyn());
      return out;
    }
    Gradients grads = (y * gy).sum().backward();
    out.compared.push_back(x.grad(grads).value().dyn());
    out.compared.push_back(w.val().grad(grads).value().dyn());
    if (kind != 4) out.compared.push_back(b.val().grad(grads).value().dyn());
    return out;
  });
  cs.rtol = 1e-3;
  cs.atol = grad ? 1e-3 * std::sqrt(n / double(c)) : 1e-4;  // dweight sums N H W terms
  return cs;
}

// A character-level LSTM language model's training step (forward and backward, no
// optimizer): Embedding(v, e) -> Lstm(e, h) -> Linear(h, v) over [b, t] tokens, cross
// entropy against the next tokens, as nn.Embedding / nn.LSTM(batch_first) / nn.Linear and
// F.cross_entropy. Weights are the shared inputs (0.125 x, one seed per parameter in
// state_dict order); tokens (7 i + 3) mod v, targets (7 i + 4) mod v. Compared: the loss and
// the gradients of weight_hh_l0 and the head's weight.
Case lstm_lm_case(SizeKind s, const Device& dev) {
  const std::size_t b = by_size<std::size_t>(s, 2, 32, 64), t = by_size<std::size_t>(s, 5, 64, 128),
                    e = by_size<std::size_t>(s, 8, 64, 256),
                    h = by_size<std::size_t>(s, 12, 256, 1024),
                    v = by_size<std::size_t>(s, 11, 96, 1000);
  const Device ad = dev.autodiff();
  std::uint32_t seed = 10;
  const auto det = [&](auto m) {
    return std::move(m).map([&](nn::TensorEntry& en) {
      en.tensor = ops::binary_scalar(ir::BinaryFn::Mul,
                                     ops::from_data(input_data(en.shape(), seed++), ad), 0.125);
    });
  };
  const nn::Embedding emb = det(nn::EmbeddingConfig{v, e}.init(ad));
  const nn::Lstm lstm = det(nn::LstmConfig{e, h}.init(ad));
  const nn::Linear head = det(nn::LinearConfig{h, v}.init(ad));
  std::vector<std::int64_t> ids(b * t), next(b * t);
  for (std::size_t i = 0; i < b * t; ++i) {
    ids[i] = std::int64_t((7 * i + 3) % v);
    next[i] = std::int64_t((7 * i + 4) % v);
  }
  auto x = Tensor<2, Int>::from_data(TensorData::from(ids, Shape{b, t}), ad);
  auto y = Tensor<1, Int>::from_data(TensorData::from(next, Shape{b * t}), ad);
  const double step =
      2.0 * double(b) * double(t) * (double(e + h) * 4.0 * double(h) + double(h * v));
  Params p{{"b", {std::int64_t(b)}},
           {"t", {std::int64_t(t)}},
           {"e", {std::int64_t(e)}},
           {"h", {std::int64_t(h)}},
           {"v", {std::int64_t(v)}}};
  Case c = timed(p, Shape{b, t}, 0, 3.0 * step, ad, [emb, lstm, head, x, y, b, t, h] {
    auto [out, state] = lstm.forward(emb.forward(x));
    auto logits = head.forward(out.reshape<2>(Shape{b * t, h}));
    auto loss = nn::loss::cross_entropy(logits, y);
    Gradients grads = loss.backward();
    std::vector<DynTensor> params;
    const auto collect = [&](const nn::TensorEntry& en) { params.push_back(en.tensor); };
    lstm.visit(collect);
    head.visit(collect);
    Outputs o;
    o.compared.push_back(loss.dyn());
    o.compared.push_back(ops::grad(params[1], grads).value());
    o.compared.push_back(ops::grad(params[4], grads).value());
    return o;
  });
  c.shape = label("b", b, " t", t, " ", e, "-", h, "-", v);
  c.rtol = 1e-3;
  c.atol = 1e-4;
  return c;
}

std::vector<Workload> build() {
  std::vector<Workload> w;
  const auto add = [&](std::string name, std::string group,
                       std::function<Case(SizeKind, const Device&)> make) {
    w.push_back({std::move(name), std::move(group), "", std::move(make)});
  };

  // ---- element-wise ----
  add("unary_gelu", "elementwise", [](SizeKind s, const Device& dev) {
    return unary_case(
        dev, [](const Tensor<3>& x) { return activation::gelu(x); }, ew_shape(s));
  });
  add("binary_add", "elementwise", [](SizeKind s, const Device& dev) {
    const Shape shape = ew_shape(s);
    auto a = input<3>(shape, 1, dev);
    auto b = input<3>(shape, 2, dev);
    return timed({{"shape", dims(shape)}}, shape, 3 * double(shape.num_elements()) * kF32, 0, dev,
                 [a, b] { return a + b; });
  });
  add("binary_scalar", "elementwise", [](SizeKind s, const Device& dev) {
    return unary_case(
        dev, [](const Tensor<3>& x) { return x.add_scalar(2.5); }, ew_shape(s));
  });
  add("elementwise_chain", "elementwise", [](SizeKind s, const Device& dev) {
    // (0.5 x + 1) -> as [B*M, N]: exp(y) * y -> as [B, M*N]: tanh -> back to [B, M, N].
    const Shape shape = chain_shape(s);
    auto x = input<3>(shape, 1, dev);
    const Shape rows{shape[0] * shape[1], shape[2]}, flat{shape[0], shape[1] * shape[2]};
    return timed({{"shape", dims(shape)}}, shape, 2 * double(shape.num_elements()) * kF32, 0, dev,
                 [x, shape, rows, flat] {
                   auto y = x.mul_scalar(0.5).add_scalar(1.0).reshape<2>(rows);
                   auto z = y.exp().mul(y).reshape<2>(flat);
                   return std::move(z).tanh().reshape<3>(shape);
                 });
  });
  add("cheap_chain", "elementwise", [](SizeKind s, const Device& dev) {
    // |(0.5 x + 1) x - 0.25|: five cheap ops, bound by memory unfused and fused alike.
    return unary_case(
        dev,
        [](const Tensor<3>& x) {
          return x.mul_scalar(0.5).add_scalar(1.0).mul(x).add_scalar(-0.25).abs();
        },
        chain_shape(s));
  });
  add("custom_gelu", "elementwise", [](SizeKind s, const Device& dev) {
    // x * 0.5 * (1 + erf(x / sqrt(2))), from primitives, as Burn's custom_gelu bench.
    return unary_case(
        dev,
        [](const Tensor<3>& x) {
          return x.mul_scalar(0.5).mul(x.mul_scalar(kSqrt1_2).erf().add_scalar(1.0));
        },
        chain_shape(s));
  });

  add("dropout", "elementwise", [](SizeKind s, const Device& dev) {
    // x * bernoulli(1 - p) / (1 - p), p = 0.1, as nn::Dropout composes it: fused, the mask is
    // drawn in the group's program and never written (Note [Random sources]). The draws are
    // ember's own, so the check compares where(y == 0, x / (1 - p), y) — x / (1 - p) on both
    // sides whatever the masks — with PyTorch's F.dropout.
    const Shape shape = ew_shape(s);
    auto x = input<3>(shape, 1, dev);
    constexpr double kKeep = 0.9;
    auto out = std::make_shared<std::optional<Tensor<3>>>();
    Case c;
    c.params = {{"shape", dims(shape)}};
    c.shape = shape.to_string();
    c.bytes = 2 * double(shape.num_elements()) * kF32;
    c.run = [x, out, dev] {
      out->reset();
      Tensor<3> keep(ops::random(x.shape(), Distribution::bernoulli(kKeep), x.dtype(), dev));
      out->emplace(x.mul(keep).mul_scalar(1.0 / kKeep));
      dev.sync();
    };
    c.output = [x, out] {
      const Tensor<3>& y = **out;
      return y.mask_where(y.equal_elem(0.0), x.mul_scalar(1.0 / kKeep)).to_data();
    };
    return c;
  });

  // ---- reductions ----
  add("sum", "reduce", [](SizeKind s, const Device& d) { return reduce_case(s, d, false, 0); });
  add("sum_dim", "reduce", [](SizeKind s, const Device& d) { return reduce_case(s, d, false, 1); });
  add("sum_dim0", "reduce",
      [](SizeKind s, const Device& d) { return reduce_case(s, d, false, 2); });
  add("argmin", "reduce", [](SizeKind s, const Device& d) { return reduce_case(s, d, false, 3); });
  add("exp_sum", "reduce", [](SizeKind s, const Device& d) { return reduce_case(s, d, true, 0); });
  add("exp_sum_dim", "reduce",
      [](SizeKind s, const Device& d) { return reduce_case(s, d, true, 1); });
  add("exp_argmin", "reduce",
      [](SizeKind s, const Device& d) { return reduce_case(s, d, true, 3); });
  add("softmax", "reduce", [](SizeKind s, const Device& dev) {
    const Shape shape = by_size(s, Shape{37, 129}, Shape{8192, 2048}, Shape{16384, 4096});
    auto x = input<2>(shape, 1, dev);
    return timed({{"shape", dims(shape)}}, shape, 2 * double(shape.num_elements()) * kF32, 0, dev,
                 [x] { return activation::softmax(x, -1); });
  });
  add("layer_norm", "reduce", [](SizeKind s, const Device& dev) {
    // The fused op, as PyTorch's F.layer_norm.
    const Shape shape = by_size(s, Shape{37, 129}, Shape{16384, 1024}, Shape{16384, 4096});
    auto x = input<2>(shape, 1, dev);
    auto gamma = input<1>(Shape{shape[1]}, 2, dev);
    auto beta = input<1>(Shape{shape[1]}, 3, dev);
    Case c = timed({{"shape", dims(shape)}}, shape, 2 * double(shape.num_elements()) * kF32, 0, dev,
                   [x, gamma, beta] { return module_ops::layer_norm(x, gamma, beta, 1e-5); });
    c.atol = 1e-4;
    return c;
  });
  // Attention's softmax(scores * scale + mask): scores [B*H, T, T], an additive mask
  // [1, T, T] (broadcast over the heads). Fused, the scale and the mask are the softmax's
  // prologue (Note [Fused rows]), so the traffic is one read of the scores and one write.
  add("scaled_masked_softmax", "reduce", [](SizeKind s, const Device& dev) {
    const Shape shape = by_size(s, Shape{2, 37, 37}, Shape{64, 256, 256}, Shape{128, 512, 512});
    auto x = input<3>(shape, 1, dev);
    auto mask = input<3>(Shape{1, shape[1], shape[2]}, 2, dev);
    return timed({{"shape", dims(shape)}}, shape, 2 * double(shape.num_elements()) * kF32, 0, dev,
                 [x, mask] { return activation::softmax(x * 0.125f + mask, -1); });
  });
  // A transformer block's layer_norm(x + residual, gamma, beta): fused, the residual's add
  // is the layer norm's prologue.
  add("layer_norm_residual", "reduce", [](SizeKind s, const Device& dev) {
    const Shape shape = by_size(s, Shape{37, 129}, Shape{16384, 1024}, Shape{16384, 4096});
    auto x = input<2>(shape, 1, dev);
    auto r = input<2>(shape, 4, dev);
    auto gamma = input<1>(Shape{shape[1]}, 2, dev);
    auto beta = input<1>(Shape{shape[1]}, 3, dev);
    Case c =
        timed({{"shape", dims(shape)}}, shape, 3 * double(shape.num_elements()) * kF32, 0, dev,
              [x, r, gamma, beta] { return module_ops::layer_norm(x + r, gamma, beta, 1e-5); });
    c.atol = 1e-4;
    return c;
  });

  // Softmax's backward pass as autodiff writes it, y * (g - sum(g * y)) along rows: fused,
  // g * y is the sum's prologue and the rest its epilogue (Note [Row epilogues]), so the
  // traffic is one read of g and y and one write.
  add("softmax_backward", "reduce", [](SizeKind s, const Device& dev) {
    const Shape shape = by_size(s, Shape{37, 129}, Shape{8192, 1024}, Shape{16384, 4096});
    auto y = input<2>(shape, 1, dev);
    auto g = input<2>(shape, 2, dev);
    return timed({{"shape", dims(shape)}}, shape, 3 * double(shape.num_elements()) * kF32, 0, dev,
                 [y, g] { return y * (g - (g * y).sum_dim(1)); });
  });

  // ---- normalisation layers (issue rows: >= 70% of the copy ceiling, <= 1.0x PyTorch) ----
  // x [N, C, H, W]; the forward counts one read and one write of x, forward + backward one
  // more read (the upstream gradient) and write (dx) — the traffic a fused kernel needs.
  add("batch_norm", "norm",
      [](SizeKind s, const Device& dev) { return norm_case(s, dev, 0, false); });
  add("batch_norm_eval", "norm",
      [](SizeKind s, const Device& dev) { return norm_case(s, dev, 1, false); });
  add("group_norm", "norm",
      [](SizeKind s, const Device& dev) { return norm_case(s, dev, 2, false); });
  add("layer_norm_grad", "norm",
      [](SizeKind s, const Device& dev) { return norm_case(s, dev, 3, true); });
  add("batch_norm_grad", "norm",
      [](SizeKind s, const Device& dev) { return norm_case(s, dev, 0, true); });
  add("group_norm_grad", "norm",
      [](SizeKind s, const Device& dev) { return norm_case(s, dev, 2, true); });
  add("layer_norm_chw", "norm",
      [](SizeKind s, const Device& dev) { return norm_case(s, dev, 3, false); });
  add("rms_norm", "norm",
      [](SizeKind s, const Device& dev) { return norm_case(s, dev, 4, false); });
  add("rms_norm_grad", "norm",
      [](SizeKind s, const Device& dev) { return norm_case(s, dev, 4, true); });

  add("lstm_lm_step", "autodiff",
      [](SizeKind s, const Device& dev) { return lstm_lm_case(s, dev); });

  // ---- matmul ----
  add("matmul_1024", "matmul", [](SizeKind s, const Device& d) {
    return s == SizeKind::Tiny ? matmul_case(s, d, 1, 65, 47, 33)
                               : matmul_case(s, d, 1, 1024, 1024, 1024);
  });
  add("matmul_2048", "matmul", [](SizeKind s, const Device& d) {
    return s == SizeKind::Tiny ? matmul_case(s, d, 1, 130, 67, 97)
                               : matmul_case(s, d, 1, 2048, 2048, 2048);
  });
  add("matmul_4096", "matmul", [](SizeKind s, const Device& d) {
    return s == SizeKind::Tiny  ? matmul_case(s, d, 1, 129, 65, 66)
           : s == SizeKind::Gpu ? matmul_case(s, d, 1, 4096, 4096, 4096)
                                : matmul_case(s, d, 1, 2048, 2048, 2048);
  });
  add("matmul_f16_4096", "matmul", [](SizeKind s, const Device& d) {
    return s == SizeKind::Tiny  ? matmul_case(s, d, 1, 129, 65, 66, DType::F16)
           : s == SizeKind::Gpu ? matmul_case(s, d, 1, 4096, 4096, 4096, DType::F16)
                                : matmul_case(s, d, 1, 1024, 1024, 1024, DType::F16);
  });
  add("matmul_bf16_2048", "matmul", [](SizeKind s, const Device& d) {
    return s == SizeKind::Tiny  ? matmul_case(s, d, 1, 129, 65, 66, DType::BF16)
           : s == SizeKind::Gpu ? matmul_case(s, d, 1, 4096, 4096, 4096, DType::BF16)
                                : matmul_case(s, d, 1, 2048, 2048, 2048, DType::BF16);
  });
  add("matmul_batched", "matmul", [](SizeKind s, const Device& d) {
    return s == SizeKind::Tiny   ? matmul_case(s, d, 3, 17, 19, 23)
           : s == SizeKind::Full ? matmul_case(s, d, 32, 384, 384, 384)
                                 : matmul_case(s, d, 64, 1024, 1024, 1024);
  });
  add("matvec", "matmul", [](SizeKind s, const Device& d) {
    return s == SizeKind::Tiny   ? matmul_case(s, d, 1, 129, 67, 1)
           : s == SizeKind::Full ? matmul_case(s, d, 1, 8192, 4096, 1)
                                 : matmul_case(s, d, 1, 16384, 16384, 1);
  });
  add("vecmat", "matmul", [](SizeKind s, const Device& d) {
    return s == SizeKind::Tiny   ? matmul_case(s, d, 1, 1, 67, 129)
           : s == SizeKind::Full ? matmul_case(s, d, 1, 1, 8192, 4096)
                                 : matmul_case(s, d, 1, 1, 16384, 16384);
  });
  add("matmul_bias_gelu", "matmul", [](SizeKind s, const Device& dev) {
    const std::size_t m = by_size<std::size_t>(s, 33, 1024, 4096),
                      k = by_size<std::size_t>(s, 47, 1024, 4096),
                      n = by_size<std::size_t>(s, 65, 4096, 16384);
    auto x = input<2>(Shape{m, k}, 1, dev);
    auto wt = input<2>(Shape{k, n}, 2, dev);
    auto b = input<2>(Shape{1, n}, 3, dev);
    Params p{{"m", {std::int64_t(m)}}, {"k", {std::int64_t(k)}}, {"n", {std::int64_t(n)}}};
    Case c = timed(p, Shape{m, k, n}, double(m * k + k * n + n + m * n) * kF32,
                   2.0 * double(m) * double(n) * double(k), dev,
                   [x, wt, b] { return activation::gelu(x.matmul(wt) + b); });
    c.shape = label("m", m, " k", k, " n", n);
    c.atol = 1e-4 * std::sqrt(double(k));
    return c;
  });

  // ---- module ops: convolution and pooling ----
  add("conv2d_resnet", "module", [](SizeKind s, const Device& dev) {
    // A ResNet stage-1 layer: 3x3, padding 1, 64 -> 64 channels at 56x56.
    const std::size_t n = by_size<std::size_t>(s, 0, 8, 64);
    return s == SizeKind::Tiny ? conv2d_case(dev, Shape{2, 8, 9, 11}, Shape{6, 8, 3, 3}, 1, 1)
                               : conv2d_case(dev, Shape{n, 64, 56, 56}, Shape{64, 64, 3, 3}, 1, 1);
  });
  add("conv2d_alexnet", "module", [](SizeKind s, const Device& dev) {
    // AlexNet's first layer: 11x11, stride 4, padding 2, 3 -> 64 channels at 224x224.
    const std::size_t n = by_size<std::size_t>(s, 0, 8, 128);
    return s == SizeKind::Tiny
               ? conv2d_case(dev, Shape{2, 3, 23, 25}, Shape{5, 3, 11, 11}, 4, 2)
               : conv2d_case(dev, Shape{n, 3, 224, 224}, Shape{64, 3, 11, 11}, 4, 2);
  });
  // A MobileNetV2 depthwise layer: 3x3, padding 1, 144 channels at 56x56, one group each.
  add("conv2d_depthwise", "module", [](SizeKind s, const Device& dev) {
    const std::size_t n = by_size<std::size_t>(s, 0, 8, 64);
    return s == SizeKind::Tiny
               ? conv2d_case(dev, Shape{2, 6, 9, 11}, Shape{6, 1, 3, 3}, 1, 1, 6)
               : conv2d_case(dev, Shape{n, 144, 56, 56}, Shape{144, 1, 3, 3}, 1, 1, 144);
  });
  // The layers of the Fashion-MNIST CNN (cnn_train_step), forward and backward.
  add("conv2d_cnn1", "module", [](SizeKind s, const Device& dev) {
    return s == SizeKind::Tiny ? conv2d_case(dev, Shape{3, 1, 8, 8}, Shape{3, 1, 3, 3}, 1, 1)
                               : conv2d_case(dev, Shape{128, 1, 28, 28}, Shape{32, 1, 3, 3}, 1, 1);
  });
  add("conv2d_cnn2", "module", [](SizeKind s, const Device& dev) {
    return s == SizeKind::Tiny
               ? conv2d_case(dev, Shape{3, 3, 4, 4}, Shape{4, 3, 3, 3}, 1, 1)
               : conv2d_case(dev, Shape{128, 32, 14, 14}, Shape{64, 32, 3, 3}, 1, 1);
  });
  add("conv2d_cnn1_grad", "autodiff", [](SizeKind s, const Device& dev) {
    return s == SizeKind::Tiny
               ? conv2d_grad_case(dev, Shape{3, 1, 8, 8}, Shape{3, 1, 3, 3}, false)
               : conv2d_grad_case(dev, Shape{128, 1, 28, 28}, Shape{32, 1, 3, 3}, false);
  });
  add("conv2d_cnn2_grad", "autodiff", [](SizeKind s, const Device& dev) {
    return s == SizeKind::Tiny
               ? conv2d_grad_case(dev, Shape{3, 3, 4, 4}, Shape{4, 3, 3, 3}, true)
               : conv2d_grad_case(dev, Shape{128, 32, 14, 14}, Shape{64, 32, 3, 3}, true);
  });
  // The ResNet stage-1 layer of conv2d_resnet, forward and backward (dx, dw).
  add("conv2d_resnet_grad", "autodiff", [](SizeKind s, const Device& dev) {
    const std::size_t n = by_size<std::size_t>(s, 0, 8, 64);
    return s == SizeKind::Tiny
               ? conv2d_grad_case(dev, Shape{2, 8, 9, 11}, Shape{6, 8, 3, 3}, true)
               : conv2d_grad_case(dev, Shape{n, 64, 56, 56}, Shape{64, 64, 3, 3}, true);
  });
  // The depthwise layer of conv2d_depthwise, forward and backward (dx, dw).
  add("conv2d_depthwise_grad", "autodiff", [](SizeKind s, const Device& dev) {
    const std::size_t n = by_size<std::size_t>(s, 0, 8, 64);
    return s == SizeKind::Tiny
               ? conv2d_grad_case(dev, Shape{2, 6, 9, 11}, Shape{6, 1, 3, 3}, true, 6)
               : conv2d_grad_case(dev, Shape{n, 144, 56, 56}, Shape{144, 1, 3, 3}, true, 144);
  });
  add("max_pool2d", "module", [](SizeKind s, const Device& dev) {
    // The ResNet stem's pooling: 3x3, stride 2, padding 1.
    const Shape shape =
        by_size(s, Shape{2, 3, 9, 10}, Shape{8, 64, 112, 112}, Shape{64, 64, 112, 112});
    auto x = input<4>(shape, 1, dev);
    const std::size_t oh = (shape[2] - 1) / 2 + 1, ow = (shape[3] - 1) / 2 + 1;
    Params p{{"shape", dims(shape)}, {"kernel", {3}}, {"stride", {2}}, {"padding", {1}}};
    Case c = timed(p, shape, double(shape.num_elements() + shape[0] * shape[1] * oh * ow) * kF32, 0,
                   dev, [x] {
                     return module_ops::max_pool2d(
                         x, {.kernel = {3, 3}, .stride = {{2, 2}}, .padding = {1, 1}});
                   });
    c.rtol = 0;
    c.atol = 0;
    return c;
  });

  // ---- data transfer ----
  add("from_data", "data", [](SizeKind s, const Device& dev) {
    const Shape shape{by_size<std::size_t>(s, 1000, std::size_t(16) << 20, std::size_t(64) << 20)};
    auto data = std::make_shared<TensorData>(input_data(shape, 1));
    return timed({{"shape", dims(shape)}}, shape, 2 * double(shape.num_elements()) * kF32, 0, dev,
                 [data, dev] { return Tensor<1>::from_data(*data, dev); });
  });
  add("to_data", "data", [](SizeKind s, const Device& dev) {
    const Shape shape{by_size<std::size_t>(s, 1000, std::size_t(16) << 20, std::size_t(64) << 20)};
    auto x = input<1>(shape, 1, dev);
    return timed({{"shape", dims(shape)}}, shape, 2 * double(shape.num_elements()) * kF32, 0, dev,
                 [x] { return x.to_data(); });
  });

  // ---- overhead ----
  add("launch_overhead", "overhead", [](SizeKind s, const Device& dev) {
    // Many tiny dependent ops: measures per-op dispatch cost, not arithmetic.
    const std::size_t ops = s == SizeKind::Tiny ? 10 : 2000;
    const Shape shape{16};
    auto x0 = input<1>(shape, 1, dev);
    Case c =
        timed({{"shape", dims(shape)}, {"ops", {std::int64_t(ops)}}}, shape, 0, 0, dev, [x0, ops] {
          auto x = x0;
          for (std::size_t i = 0; i < ops; ++i) x = std::move(x).add_scalar(1.0);
          return x;
        });
    c.shape = std::to_string(ops) + " x add_scalar [16]";
    return c;
  });

  // ---- attention and training steps (benches/model_workloads.cpp) ----
  add("attention", "module", attention_case);
  add("sdpa", "module", sdpa_case);
  add("attention_grad", "autodiff", attention_grad_case);
  add("sdpa_grad", "autodiff", sdpa_grad_case);
  add("sdpa_bf16", "module", sdpa_bf16_case);
  add("sdpa_grad_bf16", "autodiff", sdpa_grad_bf16_case);
  add("autodiff_overhead", "autodiff", autodiff_overhead_case);
  add("mlp_train_step", "autodiff", mlp_train_step_case);
  add("cnn_train_step", "autodiff", cnn_train_step_case);
  add("resnet_train_step", "autodiff", resnet_train_step_case);
  add("transformer_encoder_step", "autodiff", transformer_encoder_step_case);

  // ---- optimizer steps (benches/optim_workloads.cpp): PyTorch's foreach and fused Adam ----
  add("adam_step_foreach", "optim", adam_step_case);
  add("adam_step_fused", "optim", adam_step_case);
  add("adamw_step_foreach", "optim", adamw_step_case);
  add("adamw_step_fused", "optim", adamw_step_case);
  return w;
}

}  // namespace

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> all = build();
  return all;
}

}  // namespace ember::bench
