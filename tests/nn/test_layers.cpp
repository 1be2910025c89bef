// Layers beyond PyTorch parity: the DESIGN §2.2 contract block, PyTorch's default
// initialisation (closed-form bounds and sample statistics), dropout's modes, batch norm's
// interior state, layer configs as JSON, and bad input naming the layer and the shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>

#include <ember/ember.hpp>

#include "nn/expect_error.hpp"

using namespace ember;

namespace {

std::vector<double> values(const nn::Module auto& m, const std::string& path) {
  std::vector<double> out;
  m.visit([&](const nn::TensorEntry& e) {
    if (e.path == path) out = e.tensor.to_data().template to_vector<double>();
  });
  return out;
}

struct Stats {
  double min, max, mean, var;
};
Stats stats_of(const std::vector<double>& v) {
  Stats s{v[0], v[0], 0, 0};
  for (double x : v) {
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    s.mean += x;
  }
  s.mean /= double(v.size());
  for (double x : v) s.var += (x - s.mean) * (x - s.mean);
  s.var /= double(v.size());
  return s;
}
// Samples of U(-b, b): all inside, variance b^2 / 3 within 5%.
void expect_uniform(const std::vector<double>& v, double b, const std::string& what) {
  const Stats s = stats_of(v);
  EXPECT_GE(s.min, -b) << what;
  EXPECT_LE(s.max, b) << what;
  EXPECT_GT(s.max, 0.9 * b) << what;
  EXPECT_NEAR(s.var, b * b / 3, 0.05 * b * b / 3) << what;
  EXPECT_NEAR(s.mean, 0.0, 0.05 * b) << what;
}
void expect_normal(const std::vector<double>& v, double mean, double std, const std::string& what) {
  const Stats s = stats_of(v);
  EXPECT_NEAR(s.mean, mean, 0.05 * std) << what;
  EXPECT_NEAR(std::sqrt(s.var), std, 0.05 * std) << what;
}

}  // namespace

// ---- DESIGN §2.2, as written ----

namespace {
struct Net {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm bn1;
  nn::Linear fc1, fc2;
  nn::Dropout dropout;
  EMBER_MODULE(Net, conv1, conv2, bn1, fc1, fc2, dropout)
  Tensor<2> forward(Tensor<4> x) const {
    auto h = activation::relu(bn1.forward(conv1.forward(x)));
    h = activation::relu(conv2.forward(h));
    auto flat = h.flatten<2>(1, 3);
    return fc2.forward(dropout.forward(activation::relu(fc1.forward(flat))));
  }
};
struct NetConfig {
  std::size_t classes = 10;
  double dropout = 0.2;
  EMBER_CONFIG(NetConfig, classes, dropout)
  Net init(const Device& dev) const {
    return {nn::Conv2dConfig{1, 32, {3, 3}}.with_padding(nn::Padding::same()).init(dev),
            nn::Conv2dConfig{32, 64, {3, 3}}.init(dev),
            nn::BatchNormConfig{32}.init(dev),
            nn::LinearConfig{64 * 5 * 5, 128}.init(dev),
            nn::LinearConfig{128, classes}.with_bias(false).init(dev),
            nn::DropoutConfig{dropout}.init()};
  }
};
}  // namespace

TEST(NnDesign, ContractBlockTrainsOneStep) {
  Device ad = Device::cpu().autodiff();
  Net net = NetConfig{}.init(ad);
  EXPECT_EQ(net.num_params(), 32u * 9 + 32 + 64 * 32 * 9 + 64 + 32 * 2 + 1600u * 128 + 128 + 1280);
  auto images = Tensor<4>::random(Shape{4, 1, 7, 7}, Distribution::normal(0, 1), ad);
  auto labels = Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({1, 0, 9, 3}), ad);
  auto loss = nn::loss::cross_entropy(net.forward(images), labels);
  EXPECT_EQ(loss.shape(), (Shape{1}));
  Gradients grads = loss.backward();
  net.visit([&](const nn::TensorEntry& e) {
    if (e.is_param()) {
      EXPECT_TRUE(ops::grad(e.tensor, grads).has_value()) << e.path;
    }
  });
  // Training mode updated bn1's running statistics through the const forward.
  EXPECT_EQ(net.bn1.num_batches_tracked.val().into_scalar<std::int64_t>(), 1);
  EXPECT_NE(values(net, "bn1.running_mean"), std::vector<double>(32, 0.0));
  // Inference on the inner device leaves them alone.
  const Net v = net.valid();
  (void)v.forward(images.inner());
  EXPECT_EQ(v.bn1.num_batches_tracked.val().into_scalar<std::int64_t>(), 1);
  EXPECT_NE(net.summary().find("conv2 (Conv2d)"), std::string::npos);
}

// ---- initializers ----

TEST(NnInit, GainsAndFansAsPyTorch) {
  EXPECT_DOUBLE_EQ(nn::calculate_gain(nn::Nonlinearity::Relu), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::calculate_gain(nn::Nonlinearity::Tanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::calculate_gain(nn::Nonlinearity::LeakyRelu, std::sqrt(5.0)),
                   std::sqrt(1.0 / 3.0));
  EXPECT_DOUBLE_EQ(nn::calculate_gain(nn::Nonlinearity::Selu), 0.75);
  EXPECT_DOUBLE_EQ(nn::calculate_gain(nn::Nonlinearity::Sigmoid), 1.0);
  const nn::Fans f = nn::fans_of(Shape{32, 16, 3, 5});
  EXPECT_EQ(f.fan_in, 16u * 15);
  EXPECT_EQ(f.fan_out, 32u * 15);
  EXPECT_THROW((void)nn::fans_of(Shape{4}), Error);
}

TEST(NnInit, DistributionsMatchTheirDefinitions) {
  Device d = Device::cpu();
  d.seed(7);
  const Shape s{256, 512};  // fan_in 512, fan_out 256
  const auto draw = [&](const nn::Initializer& i) {
    return Tensor<2>(i.init(s, d)).to_data().to_vector<double>();
  };
  EXPECT_EQ(draw(nn::Initializer::constant(2.5)), std::vector<double>(s.num_elements(), 2.5));
  EXPECT_EQ(draw(nn::Initializer::zeros()), std::vector<double>(s.num_elements(), 0.0));
  EXPECT_EQ(draw(nn::Initializer::ones()), std::vector<double>(s.num_elements(), 1.0));
  {
    const Stats u = stats_of(draw(nn::Initializer::uniform(-0.5, 2.0)));
    EXPECT_GE(u.min, -0.5);
    EXPECT_LE(u.max, 2.0);
    EXPECT_NEAR(u.mean, 0.75, 0.01);
  }
  expect_normal(draw(nn::Initializer::normal(1.0, 0.3)), 1.0, 0.3, "normal");
  // kaiming_uniform(a = 0, fan_in, leaky_relu): bound sqrt(2) sqrt(3 / 512).
  expect_uniform(draw(nn::Initializer::kaiming_uniform()), std::sqrt(2.0) * std::sqrt(3.0 / 512),
                 "kaiming_uniform");
  expect_uniform(
      draw(nn::Initializer::kaiming_uniform(0.0, nn::FanMode::FanOut, nn::Nonlinearity::Relu)),
      std::sqrt(2.0) * std::sqrt(3.0 / 256), "kaiming_uniform fan_out");
  expect_normal(
      draw(nn::Initializer::kaiming_normal(0.0, nn::FanMode::FanIn, nn::Nonlinearity::Relu)), 0.0,
      std::sqrt(2.0 / 512), "kaiming_normal");
  expect_uniform(draw(nn::Initializer::xavier_uniform(2.0)), 2.0 * std::sqrt(6.0 / 768),
                 "xavier_uniform");
  expect_normal(draw(nn::Initializer::xavier_normal()), 0.0, std::sqrt(2.0 / 768), "xavier_normal");
  // Seeded: the same seed draws the same tensor.
  d.seed(11);
  const auto a = draw(nn::Initializer::kaiming_normal());
  d.seed(11);
  EXPECT_EQ(draw(nn::Initializer::kaiming_normal()), a);
  EXPECT_THROW((void)nn::Initializer::uniform(1, 0).init(s, d), Error);
  // Initializers are configs.
  const auto k = nn::Initializer::kaiming_normal(0.2, nn::FanMode::FanOut);
  EXPECT_EQ(nn::Initializer::from_json(k.to_json()).to_json(), k.to_json());
}

TEST(NnInit, LayerDefaultsAsPyTorch) {
  Device d = Device::cpu();
  d.seed(3);
  const auto lin = nn::LinearConfig{300, 200}.init(d);
  expect_uniform(values(lin, "weight"), 1.0 / std::sqrt(300.0), "Linear.weight");
  const Stats lb = stats_of(values(lin, "bias"));
  EXPECT_LE(std::max(-lb.min, lb.max), 1.0 / std::sqrt(300.0));
  const auto conv = nn::Conv2dConfig{16, 64, {3, 3}}.init(d);
  expect_uniform(values(conv, "weight"), 1.0 / 12.0, "Conv2d.weight");  // fan_in 16 * 9
  const auto convt = nn::ConvTranspose2dConfig{16, 64, {3, 3}}.with_groups(2).init(d);
  EXPECT_EQ(convt.weight.shape(), (Shape{16, 32, 3, 3}));
  expect_uniform(values(convt, "weight"), 1.0 / std::sqrt(32.0 * 9), "ConvTranspose2d.weight");
  const auto emb = nn::EmbeddingConfig{400, 64}.with_padding_idx(-1).init(d);
  EXPECT_EQ(emb.padding_idx, 399);
  auto ew = values(emb, "weight");
  EXPECT_EQ(std::vector<double>(ew.end() - 64, ew.end()), std::vector<double>(64, 0.0));
  ew.resize(ew.size() - 64);
  expect_normal(ew, 0.0, 1.0, "Embedding.weight");
  const auto lstm = nn::LstmConfig{40, 50}.init(d);
  expect_uniform(values(lstm, "weight_hh_l0"), 1.0 / std::sqrt(50.0), "Lstm.weight_hh_l0");
  const auto mha = nn::MultiHeadAttentionConfig{64, 8}.init(d);
  expect_uniform(values(mha, "in_proj_weight"), std::sqrt(6.0 / (64 + 192)), "in_proj_weight");
  EXPECT_EQ(values(mha, "in_proj_bias"), std::vector<double>(192, 0.0));
  EXPECT_EQ(values(mha, "out_proj.bias"), std::vector<double>(64, 0.0));
  const auto bn = nn::BatchNormConfig{5}.init(d);
  EXPECT_EQ(values(bn, "weight"), std::vector<double>(5, 1.0));
  EXPECT_EQ(values(bn, "bias"), std::vector<double>(5, 0.0));
  EXPECT_EQ(values(bn, "running_mean"), std::vector<double>(5, 0.0));
  EXPECT_EQ(values(bn, "running_var"), std::vector<double>(5, 1.0));
  EXPECT_EQ(values(bn, "num_batches_tracked"), std::vector<double>{0.0});
  EXPECT_EQ(values(nn::LayerNormConfig{3}.init(d), "weight"), std::vector<double>(3, 1.0));
  EXPECT_EQ(nn::BatchNormConfig{5}.with_affine(false).init(d).num_params(), 0u);
}

// ---- dropout and batch norm modes ----

TEST(NnDropout, TrainingOnAutodiffOnly) {
  Device ad = Device::cpu().autodiff();
  const auto ones = Tensor<2>::ones(Shape{400, 250}, ad);
  // Inference (plain device): identity, whatever prob.
  const auto plain = nn::DropoutConfig{0.9}.init().forward(ones.inner());
  EXPECT_EQ(plain.sum().into_scalar<double>(), 1e5);
  EXPECT_EQ(nn::DropoutConfig{0.0}.init().forward(ones).sum().into_scalar<double>(), 1e5);
  EXPECT_EQ(nn::DropoutConfig{1.0}.init().forward(ones).sum().into_scalar<double>(), 0.0);
  // p = 0.3: about 30% zeros, the rest 1 / 0.7; the gradient is the same mask.
  ad.seed(5);
  const auto x = ones.require_grad();
  const auto y = nn::DropoutConfig{0.3}.init().forward(x);
  const auto v = y.inner().to_data().to_vector<double>();
  std::size_t zeros = 0;
  for (double e : v) {
    if (e == 0.0)
      ++zeros;
    else
      EXPECT_NEAR(e, 1.0 / 0.7, 1e-6);
  }
  // Binomial(1e5, 0.3): std 145; 5 std = 0.0073.
  EXPECT_NEAR(double(zeros) / 1e5, 0.3, 0.0073);
  Gradients g = y.sum().backward();
  EXPECT_EQ(x.grad(g)->to_data().to_vector<double>(), v);
  EXPECT_THROW((void)nn::DropoutConfig{1.5}.init(), Error);
}

TEST(NnBatchNorm, ConstForwardUpdatesRunningStatsInTrainingOnly) {
  Device ad = Device::cpu().autodiff();
  const nn::BatchNorm bn = nn::BatchNormConfig{2}.with_momentum(0.5).init(ad);
  // Channel 0 values {1, 3}, channel 1 {0, 4}: means 2, 2; unbiased variances 2, 8.
  auto x = Tensor<2>::from_data(TensorData::from<float>({1, 0, 3, 4}, Shape{2, 2}), ad);
  auto y = bn.forward(x);
  // Training normalises with the biased batch variance: (x - 2) / sqrt(1 + eps), ...
  y.to_data().assert_approx_eq(TensorData::from<float>({-1, -1, 1, 1}, Shape{2, 2}), 1e-4, 1e-4);
  EXPECT_EQ(values(bn, "running_mean"), (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(values(bn, "running_var"), (std::vector<double>{1.5, 4.5}));
  (void)bn.forward(x);
  EXPECT_EQ(values(bn, "running_mean"), (std::vector<double>{1.5, 1.5}));
  EXPECT_EQ(bn.num_batches_tracked.val().into_scalar<std::int64_t>(), 2);
  // A copy does not share the running state.
  const nn::BatchNorm copy = bn;
  (void)bn.forward(x);
  EXPECT_EQ(copy.num_batches_tracked.val().into_scalar<std::int64_t>(), 2);
  EXPECT_EQ(bn.num_batches_tracked.val().into_scalar<std::int64_t>(), 3);
  // Inference: (x - running_mean) / sqrt(running_var + eps), no update.
  const auto inf = bn.valid();
  const auto yi = inf.forward(x.inner()).to_data().to_vector<double>();
  const auto rm = values(inf, "running_mean"), rv = values(inf, "running_var");
  EXPECT_NEAR(yi[0], (1 - rm[0]) / std::sqrt(rv[0] + 1e-5), 1e-5);
  EXPECT_EQ(inf.num_batches_tracked.val().into_scalar<std::int64_t>(), 3);
}

// ---- configs of layers as JSON ----

TEST(NnConfigLayers, ConvConfigWithPaddingRoundTrips) {
  const auto c = nn::Conv2dConfig{3, 8, {3, 3}}.with_padding(nn::Padding::same()).with_groups(1);
  const auto j = c.to_json();
  EXPECT_EQ(j["padding"], "same");
  EXPECT_EQ(j["kernel_size"], nn::Json::array({3, 3}));
  const auto back = nn::Conv2dConfig::from_json(j);
  EXPECT_EQ(back.padding, nn::Padding::same());
  const auto e = nn::Conv2dConfig::from_json(nn::Json::parse(
      R"({"channels_in": 1, "channels_out": 2, "kernel_size": [1, 1], "padding": [2, 1]})"));
  EXPECT_EQ(e.padding, (nn::Padding{2, 1}));
  expect_error_has(
      [&] { (void)(nn::Conv2dConfig::from_json(nn::Json::parse(R"({"padding": "full"})"))); },
      {"'padding'"});
  expect_error_has(
      [&] { (void)(nn::Conv2dConfig::from_json(nn::Json::parse(R"({"kernel_size": [3]})"))); },
      {"'kernel_size'"});
  const auto l = nn::LstmConfig{4, 8}.with_bidirectional(true);
  EXPECT_TRUE(nn::LstmConfig::from_json(l.to_json()).bidirectional);
}

TEST(NnSequential, ConvStackAndSummary) {
  Device d = Device::cpu();
  nn::Sequential features(nn::Conv2dConfig{1, 4, {3, 3}}.with_padding(nn::Padding{1}).init(d),
                          nn::BatchNormConfig{4}.init(d), nn::Relu{},
                          nn::MaxPool2dConfig{{2, 2}}.init(), nn::Flatten{},
                          nn::LinearConfig{4 * 3 * 3, 5}.init(d));
  auto y = features.forward<2>(Tensor<4>::ones(Shape{2, 1, 6, 6}, d));
  EXPECT_EQ(y.shape(), (Shape{2, 5}));
  std::vector<std::string> p;
  features.visit([&](const nn::TensorEntry& e) { p.emplace_back(e.path); });
  EXPECT_EQ(p, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                         "1.running_mean", "1.running_var", "1.num_batches_tracked",
                                         "5.weight", "5.bias"}));
  const std::string s = features.summary();
  for (const char* want : {"Sequential", "0 (Conv2d)", "1 (BatchNorm)", "2 (Relu)", "3 (MaxPool2d)",
                           "num_batches_tracked [1] (buffer)", "Total params: 233"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
}

TEST(NnLstm, StructuredBindingAndShapes) {
  Device d = Device::cpu();
  const auto lstm = nn::LstmConfig{3, 4}.with_num_layers(2).with_bidirectional(true).init(d);
  auto [out, state] = lstm.forward(Tensor<3>::ones(Shape{2, 5, 3}, d));
  EXPECT_EQ(out.shape(), (Shape{2, 5, 8}));
  EXPECT_EQ(state.hidden.shape(), (Shape{4, 2, 4}));
  EXPECT_EQ(state.cell.shape(), (Shape{4, 2, 4}));
  // The forward direction's final hidden state is its output at the last step.
  out.slice({{0, 2}, {4, 5}, {0, 4}})
      .reshape<2>(Shape{2, 4})
      .to_data()
      .assert_approx_eq(state.hidden.narrow(0, 2, 1).reshape<2>(Shape{2, 4}).to_data());
}

// ---- bad input ----

TEST(NnBadInput, LayersNameThemselvesAndTheShapes) {
  Device d = Device::cpu();
  const auto x4 = [&](std::size_t n, std::size_t c, std::size_t h, std::size_t w) {
    return Tensor<4>::zeros(Shape{n, c, h, w}, d);
  };
  expect_error_has(
      [&] {
        (void)(nn::LinearConfig{4, 2}.init(d).forward(Tensor<2>::zeros(Shape{3, 5}, d)));
      },
      {"nn::Linear", "[3, 5]", "d_input = 4"});
  const auto conv = nn::Conv2dConfig{3, 8, {3, 3}}.init(d);
  expect_error_has([&] { (void)(conv.forward(x4(1, 4, 8, 8))); },
                   {"nn::Conv2d", "[1, 4, 8, 8]", "4 channels", "expected 3"});
  expect_error_has([&] { (void)(conv.forward(x4(1, 3, 2, 8))); },
                   {"nn::Conv2d", "larger than the padded input"});
  expect_error_has(
      [&] {
        (void)(nn::Conv2dConfig{3, 8, {3, 3}}.with_groups(2).init(d));
      },
      {"Conv2d", "groups 2"});
  expect_error_has(
      [&] {
        (void)(nn::Conv2dConfig{3, 8, {3, 3}}
                   .with_stride({2, 2})
                   .with_padding(nn::Padding::same())
                   .init(d)
                   .forward(x4(1, 3, 8, 8)));
      },
      {"Padding::same() needs stride 1"});
  expect_error_has(
      [&] {
        (void)(nn::MaxPool2dConfig{{5, 5}}.init().forward(x4(1, 1, 3, 3)));
      },
      {"nn::MaxPool2d", "larger"});
  expect_error_has(
      [&] {
        (void)(nn::MultiHeadAttentionConfig{10, 3}.init(d));
      },
      {"n_heads 3", "d_model 10"});
  const auto mha = nn::MultiHeadAttentionConfig{8, 2}.init(d);
  const auto q = Tensor<3>::zeros(Shape{2, 3, 8}, d), bad = Tensor<3>::zeros(Shape{2, 3, 6}, d);
  expect_error_has([&] { (void)(mha.forward(q, bad, bad)); },
                   {"nn::MultiHeadAttention", "[2, 3, 6]"});
  expect_error_has(
      [&] {
        (void)(mha.forward(q, q, q, Tensor<2, Bool>::zeros(Shape{2, 2}, d)));
      },
      {"attn_mask"});
  const auto bn = nn::BatchNormConfig{3}.init(d);
  expect_error_has([&] { (void)(bn.forward(x4(2, 4, 2, 2))); }, {"nn::BatchNorm", "[2, 4, 2, 2]"});
  expect_error_has(
      [&] {
        (void)(nn::BatchNormConfig{3}
                   .init(d.autodiff())
                   .forward(Tensor<2>::zeros(Shape{1, 3}, d.autodiff())));
      },
      {"more than one value per channel"});
  expect_error_has(
      [&] {
        (void)(nn::LayerNormConfig{4}.init(d).forward(Tensor<2>::zeros(Shape{2, 3}, d)));
      },
      {"nn::LayerNorm"});
  expect_error_has(
      [&] {
        (void)(nn::GroupNormConfig{4, 6}.init(d));
      },
      {"num_groups 4", "num_channels 6"});
  const auto emb = nn::EmbeddingConfig{5, 2}.init(d);
  expect_error_has(
      [&] {
        (void)(emb.forward(
            Tensor<2, Int>::from_data(TensorData::from<std::int64_t>({1, 5}, Shape{1, 2}), d)));
      },
      {"nn::Embedding", "outside [0, 5)"});
  // The functional forms name themselves (module_ops, as torch.nn.functional).
  const DynTensor w = ops::zeros(Shape{5, 2}, DType::F32, d);
  const DynTensor ids = ops::from_data(TensorData::from<std::int64_t>({1, 3}, Shape{2}), d);
  expect_error_has([&] { (void)module_ops::embedding(w, ids, 5); },
                   {"embedding", "padding_idx 5", "outside [-5, 5)"});
  expect_error_has([&] { (void)module_ops::embedding(ops::zeros(Shape{5}, DType::F32, d), ids); },
                   {"embedding", "[num_embeddings, embedding_dim]"});
  expect_error_has([&] { (void)module_ops::embedding(w, w); }, {"embedding", "must be Int"});
  const DynTensor img = ops::zeros(Shape{1, 2, 4, 4}, DType::F32, d);
  expect_error_has([&] { (void)module_ops::adaptive_avg_pool(img, {2}); },
                   {"adaptive_avg_pool", "rank-3", "[1, 2, 4, 4]"});
  expect_error_has(
      [&] {
        (void)module_ops::adaptive_max_pool(img, {0, 2});
      },
      {"adaptive_max_pool", "non-empty"});
  expect_error_has(
      [&] {
        (void)module_ops::adaptive_avg_pool(ids, {1, 1, 1, 1});
      },
      {"adaptive_avg_pool", "1 to 3 output sizes"});
  expect_error_has(
      [&] {
        (void)module_ops::adaptive_avg_pool(ops::cast(img, DType::I32), {2, 2});
      },
      {"adaptive_avg_pool", "float input"});
  expect_error_has([&] { (void)module_ops::dropout(img, 1.5); }, {"dropout", "[0, 1]", "1.5"});
  expect_error_has([&] { (void)module_ops::dropout(ids, 0.5, false); }, {"dropout", "float input"});
  const auto lstm = nn::LstmConfig{3, 4}.init(d);
  expect_error_has(
      [&] {
        (void)(lstm.forward(Tensor<3>::zeros(Shape{2, 5, 4}, d)));
      },
      {"nn::Lstm", "[2, 5, 4]"});
  expect_error_has(
      [&] {
        (void)(lstm.forward(Tensor<3>::zeros(Shape{2, 5, 3}, d),
                            nn::LstmState{Tensor<3>::zeros(Shape{1, 3, 4}, d),
                                          Tensor<3>::zeros(Shape{1, 3, 4}, d)}));
      },
      {"initial hidden state", "[1, 2, 4]"});
  expect_error_has(
      [&] {
        (void)(nn::Glu{}.forward(Tensor<2>::zeros(Shape{2, 3}, d)));
      },
      {"nn::Glu"});
  expect_error_has(
      [&] {
        (void)(nn::TransformerEncoderLayerConfig{8, 2}.with_activation("swish").init(d));
      },
      {"swish"});
}

TEST(NnBadInput, LossesNameLabelsAndShapes) {
  Device d = Device::cpu();
  const auto logits = Tensor<2>::zeros(Shape{3, 4}, d);
  const auto labels = [&](std::vector<std::int64_t> v) {
    return Tensor<1, Int>::from_data(TensorData::from<std::int64_t>(v), d);
  };
  expect_error_has(
      [&] {
        (void)(nn::loss::cross_entropy(logits, labels({0, 4, 1})));
      },
      {"cross_entropy", "label 4", "index 1", "[0, 4)", "[3, 4]"});
  expect_error_has(
      [&] {
        (void)(nn::loss::cross_entropy(logits, labels({0, -1, 1})));
      },
      {"label -1"});
  expect_error_has(
      [&] {
        (void)(nn::loss::cross_entropy(logits, labels({0, 1})));
      },
      {"cross_entropy", "[2]"});
  expect_error_has([&] { (void)(nn::loss::nll(logits, labels({0, 1, 9}))); }, {"nll", "label 9"});
  // The ignore index is allowed and ignored: mean over the counted samples.
  const auto l = nn::loss::cross_entropy(logits, labels({0, -100, 1})).into_scalar<double>();
  EXPECT_NEAR(l, std::log(4.0), 1e-6);
  expect_error_has(
      [&] {
        (void)(nn::loss::cross_entropy(logits, labels({0, 1, 2}), {Tensor<1>::ones(Shape{3}, d)}));
      },
      {"class weights"});
  expect_error_has(
      [&] {
        (void)(nn::loss::mse(logits, Tensor<2>::zeros(Shape{4, 3}, d)));
      },
      {"nn::loss::mse", "[4, 3]"});
  expect_error_has([&] { (void)(nn::loss::binary_cross_entropy(logits.add_scalar(2.0), logits)); },
                   {"[0, 1]"});
  expect_error_has([&] { (void)(nn::loss::huber(logits, logits, -1.0)); }, {"delta"});
}

// ---- position encodings, noise and the causal mask, against their closed forms ----

TEST(NnPositionEncoding, SinusoidsAddedAsTheFormula) {
  const Device dev = Device::cpu();
  const auto pe = nn::PositionalEncodingConfig{6}.with_max_sequence_size(10).init(dev);
  auto x = Tensor<3>::random(Shape{2, 4, 6}, Distribution::normal(0, 1), dev);
  const auto in = x.to_data().to_vector<float>();
  const auto out = pe.forward(x).to_data().to_vector<float>();
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t p = 0; p < 4; ++p)
      for (std::size_t i = 0; i < 6; ++i) {
        const double angle = double(p) / std::pow(10000.0, double(i - i % 2) / 6.0);
        const double want = in[(b * 4 + p) * 6 + i] + (i % 2 ? std::cos(angle) : std::sin(angle));
        EXPECT_NEAR(out[(b * 4 + p) * 6 + i], want, 1e-6) << b << " " << p << " " << i;
      }
  EXPECT_THROW(pe.forward(Tensor<3>::zeros(Shape{1, 11, 6}, dev)), Error);
  EXPECT_THROW(pe.forward(Tensor<3>::zeros(Shape{1, 3, 4}, dev)), Error);
  EXPECT_THROW(nn::PositionalEncodingConfig{5}.init(dev), Error);
  EXPECT_EQ(pe.num_params(), 0u);
}

TEST(NnPositionEncoding, RotaryRotatesPairsAndKeepsNorms) {
  const Device ad = Device::cpu().autodiff();
  const auto rope = nn::RotaryEncodingConfig{16, 8}.init(ad);
  const std::size_t heads = 2, seq = 5, d = 8, start = 3;
  auto x = Tensor<3>::random(Shape{heads, seq, d}, Distribution::normal(0, 1), ad).require_grad();
  const auto in = x.to_data().to_vector<double>();
  auto y = rope.forward(x, start);
  const auto out = y.to_data().to_vector<double>();
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t p = 0; p < seq; ++p)
      for (std::size_t i = 0; i < d / 2; ++i) {
        const double a = double(p + start) * std::pow(10000.0, -2.0 * double(i) / double(d));
        const std::size_t k = (h * seq + p) * d + 2 * i;
        EXPECT_NEAR(out[k], in[k] * std::cos(a) - in[k + 1] * std::sin(a), 1e-5);
        EXPECT_NEAR(out[k + 1], in[k] * std::sin(a) + in[k + 1] * std::cos(a), 1e-5);
      }
  // A rotation is orthogonal: the gradient of sum(y * g) is R^T g, whose pair norms equal g's.
  auto g = Tensor<3>::random(Shape{heads, seq, d}, Distribution::normal(0, 1), ad.inner());
  Gradients grads = (y * Tensor<3>::from_inner(g)).sum().backward();
  const auto gx = x.grad(grads).value().to_data().to_vector<double>();
  const auto gv = g.to_data().to_vector<double>();
  for (std::size_t k = 0; k < gx.size(); k += 2)
    EXPECT_NEAR(std::hypot(gx[k], gx[k + 1]), std::hypot(gv[k], gv[k + 1]), 1e-5);
  EXPECT_THROW(rope.forward(x, 12), Error);  // positions 12..17 exceed 16
  EXPECT_THROW(rope.forward(Tensor<3>::zeros(Shape{1, 2, 6}, ad)), Error);
}

TEST(NnNoise, GaussianNoiseInTrainingOnly) {
  const Device cpu = Device::cpu();
  const auto noise = nn::GaussianNoiseConfig{0.5}.init();
  auto x = Tensor<2>::ones(Shape{200, 100}, cpu);
  EXPECT_EQ(noise.forward(x).to_data().to_vector<float>(), x.to_data().to_vector<float>());
  const Device ad = cpu.autodiff();
  const auto v = noise.forward(Tensor<2>::ones(Shape{200, 100}, ad)).to_data().to_vector<double>();
  const Stats s = stats_of(v);
  // 20,000 draws: the mean within 5 standard errors of 1, the variance within 5% of 0.25.
  EXPECT_NEAR(s.mean, 1.0, 5 * 0.5 / std::sqrt(20000.0));
  EXPECT_NEAR(s.var, 0.25, 0.0125);
  EXPECT_THROW(nn::GaussianNoiseConfig{-1.0}.init(), Error);
}

TEST(NnTransformer, CausalMaskHidesTheFuture) {
  const auto m = nn::causal_mask(4, Device::cpu()).to_data().convert(DType::U8);
  const auto v = m.to_vector<std::uint8_t>();
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(v[i * 4 + j], j > i ? 1 : 0) << i << " " << j;
}

TEST(NnTransformer, CausalEncoderOutputIgnoresLaterPositions) {
  // With a causal mask, changing position 3 of the input leaves positions 0..2 unchanged.
  const Device dev = Device::cpu();
  const auto enc =
      nn::TransformerEncoderConfig{
          nn::TransformerEncoderLayerConfig{8, 2}.with_d_ff(16).with_dropout(0.0), 2}
          .init(dev);
  auto x = Tensor<3>::random(Shape{1, 4, 8}, Distribution::normal(0, 1), dev);
  auto x2 = x.slice_assign({{0, 1}, {3, 4}, {0, 8}}, Tensor<3>::ones(Shape{1, 1, 8}, dev));
  const nn::AttentionMasks causal{nn::causal_mask(4, dev), std::nullopt};
  const auto a = enc.forward(x, causal).to_data().to_vector<float>();
  const auto b = enc.forward(x2, causal).to_data().to_vector<float>();
  for (std::size_t k = 0; k < 3 * 8; ++k) EXPECT_EQ(a[k], b[k]) << k;
  bool later_differs = false;
  for (std::size_t k = 3 * 8; k < 4 * 8; ++k) later_differs |= a[k] != b[k];
  EXPECT_TRUE(later_differs);
  std::vector<std::string> paths;
  enc.visit([&](const nn::TensorEntry& e) { paths.emplace_back(e.path); });
  EXPECT_EQ(paths.front(), "layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(paths.back(), "layers.1.norm2.bias");
}

TEST(NnBadInput, NewLayersNameThemselves) {
  const Device dev = Device::cpu();
  expect_error(
      [&] {
        (void)nn::PixelShuffle{2}.forward(Tensor<4>::zeros(Shape{1, 6, 2, 2}, dev));
      },
      "nn::PixelShuffle");
  expect_error(
      [&] {
        (void)nn::PixelUnshuffle{2}.forward(Tensor<4>::zeros(Shape{1, 1, 3, 4}, dev));
      },
      "nn::PixelUnshuffle");
  expect_error(
      [&] {
        (void)nn::TransformerEncoderConfig{{8, 3}, 1}.init(dev);
      },
      "n_heads 3 must divide d_model 8");
  expect_error([&] { (void)nn::TransformerDecoderConfig{{8, 2}, 0}.init(dev); }, "num_layers");
  expect_error(
      [&] {
        (void)nn::loss::multi_margin(
            Tensor<2>::zeros(Shape{2, 3}, dev),
            Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({0, 3}, Shape{2}), dev));
      },
      "label 3 at index 1");
  try {  // multi_margin has no ignore index, so its message names none
    (void)nn::loss::multi_margin(
        Tensor<2>::zeros(Shape{2, 3}, dev),
        Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({0, -1}, Shape{2}), dev));
    ADD_FAILURE() << "multi_margin took label -1";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("ignore_index"), std::string::npos) << e.what();
  }
  expect_error(
      [&] {
        (void)nn::loss::margin_ranking(Tensor<1>::zeros(Shape{3}, dev),
                                       Tensor<1>::zeros(Shape{3}, dev),
                                       Tensor<1>::zeros(Shape{2}, dev));
      },
      "nn::loss::margin_ranking");
}

TEST(NnInit, OrthogonalRowsOrColumnsAreOrthonormal) {
  const Device dev = Device::cpu();
  for (const Shape& shape : {Shape{3, 7}, Shape{8, 4}, Shape{5, 5}, Shape{4, 2, 3}}) {
    const double gain = 1.5;
    const auto w = nn::Initializer::orthogonal(gain).init(shape, dev, std::nullopt, DType::F64);
    const auto v = w.to_data().to_vector<double>();
    const std::size_t rows = shape[0], cols = shape.num_elements() / rows;
    // The smaller side's vectors are orthonormal (times the gain).
    const bool by_rows = rows <= cols;
    const std::size_t count = by_rows ? rows : cols, len = by_rows ? cols : rows;
    const auto at = [&](std::size_t vec, std::size_t k) {
      return by_rows ? v[vec * cols + k] : v[k * cols + vec];
    };
    for (std::size_t i = 0; i < count; ++i)
      for (std::size_t j = 0; j < count; ++j) {
        double dot = 0;
        for (std::size_t k = 0; k < len; ++k) dot += at(i, k) * at(j, k);
        EXPECT_NEAR(dot, i == j ? gain * gain : 0.0, 1e-12) << shape.to_string() << i << j;
      }
  }
  // Seeded by the device's generator: the same seed draws the same matrix.
  dev.seed(7);
  const auto a = nn::Initializer::orthogonal().init(Shape{4, 6}, dev).to_data().to_vector<float>();
  dev.seed(7);
  const auto b = nn::Initializer::orthogonal().init(Shape{4, 6}, dev).to_data().to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_THROW(nn::Initializer::orthogonal().init(Shape{4}, dev), Error);
  EXPECT_THROW(nn::Initializer::orthogonal().distribution(Shape{4, 4}), Error);
}

TEST(NnTransformer, KeyValueCacheMatchesTheFullCausalForward) {
  // Decoding in pieces of 1, 3 and 2 positions reproduces the full causal forward's rows.
  const Device dev = Device::cpu();
  for (bool norm_first : {false, true}) {
    const auto enc =
        nn::TransformerEncoderConfig{
            nn::TransformerEncoderLayerConfig{8, 2}.with_d_ff(16).with_dropout(0.0).with_norm_first(
                norm_first),
            2}
            .with_final_norm(norm_first)
            .init(dev);
    auto x = Tensor<3>::random(Shape{2, 6, 8}, Distribution::normal(0, 1), dev);
    const auto full =
        enc.forward(x, {nn::causal_mask(6, dev), std::nullopt}).to_data().to_vector<double>();
    std::vector<nn::KvCache> caches;
    std::vector<double> pieces;
    for (auto [start, len] : {std::pair{0, 1}, {1, 3}, {4, 2}}) {
      const auto y = enc.forward_cached(x.narrow(1, start, std::size_t(len)), caches);
      ASSERT_EQ(y.shape(), (Shape{2, std::size_t(len), 8}));
      const auto v = y.to_data().to_vector<double>();
      for (std::size_t b = 0; b < 2; ++b)
        for (int p = 0; p < len; ++p)
          for (std::size_t k = 0; k < 8; ++k)
            EXPECT_NEAR(v[(b * std::size_t(len) + std::size_t(p)) * 8 + k],
                        full[(b * 6 + std::size_t(start + p)) * 8 + k], 1e-5)
                << norm_first << " position " << start + p;
    }
    EXPECT_EQ(caches.size(), 2u);
    EXPECT_EQ(caches[0].seen(), 6u);
  }
}

TEST(NnActivation, RReluDrawsItsSlopesInTraining) {
  const Device ad = Device::cpu().autodiff();
  auto x = Tensor<2>::full(Shape{100, 100}, -2.0, ad).require_grad();
  const auto y = nn::RRelu{0.1, 0.3}.forward(x);
  const auto v = y.to_data().to_vector<double>();
  std::vector<double> slopes;
  for (double e : v) slopes.push_back(e / -2.0);
  const Stats s = stats_of(slopes);
  EXPECT_GE(s.min, 0.1);
  EXPECT_LE(s.max, 0.3);
  EXPECT_NEAR(s.mean, 0.2, 5 * 0.2 / std::sqrt(12.0) / 100.0);  // U(0.1, 0.3): std 0.0577
  // The gradient of sum(y) is each element's own slope.
  Gradients g = y.sum().backward();
  const auto gx = x.grad(g).value().to_data().to_vector<double>();
  for (std::size_t i = 0; i < gx.size(); i += 997) EXPECT_NEAR(gx[i], slopes[i], 1e-6);
  // Positive inputs pass through.
  const auto p = nn::RRelu{}.forward(Tensor<2>::ones(Shape{2, 2}, ad)).to_data().to_vector<float>();
  EXPECT_EQ(p, std::vector<float>(4, 1.0f));
}

namespace {
struct LoraBlock {
  nn::Linear q, v;
  EMBER_MODULE(LoraBlock, q, v)
};
struct LoraNet {
  std::vector<LoraBlock> blocks;
  nn::Linear head;
  EMBER_MODULE(LoraNet, blocks, head)
};
std::vector<double> host64(const DynTensor& t) {
  return t.to_data().convert(DType::F64).to_vector<double>();
}
// y[i][o] = sum_k x[i][k] w[o][k] (+ b[o]): x [n, in], w [out, in].
std::vector<double> affine64(const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& b, std::size_t n, std::size_t in,
                             std::size_t out) {
  std::vector<double> y(n * out, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (std::size_t k = 0; k < in; ++k) s += x[i * in + k] * w[o * in + k];
      y[i * out + o] = s;
    }
  return y;
}
}  // namespace

TEST(Lora, AdaptersOnSelectedLayersTrainAloneAndMerge) {
  const Device ad = Device::cpu().autodiff();
  const auto lin = [&](std::size_t i, std::size_t o) { return nn::LinearConfig{i, o}.init(ad); };
  LoraNet net{{LoraBlock{lin(4, 4), lin(4, 4)}, LoraBlock{lin(4, 4), lin(4, 4)}}, lin(4, 3)};
  const auto x = Tensor<2>::random(Shape{5, 4}, Distribution::uniform(-1, 1), ad);
  const auto run = [&](const LoraNet& m) {
    Tensor<2> h = x;
    for (const auto& b : m.blocks) h = b.v.forward(b.q.forward(h));
    return m.head.forward(h);
  };
  const auto before = host64(run(net).dyn());
  auto lora = nn::apply_lora(net, 2, 8.0, nn::path_regex("blocks\\.[0-9]+\\.q"));
  // New tensors by path, base parameters frozen, adapters trainable; outputs unchanged (b = 0).
  std::vector<std::string> trainable;
  lora.visit([&](const nn::TensorEntry& e) {
    if (e.trainable) trainable.emplace_back(e.path);
  });
  EXPECT_EQ(trainable, (std::vector<std::string>{"blocks.0.q.lora.a", "blocks.0.q.lora.b",
                                                 "blocks.1.q.lora.a", "blocks.1.q.lora.b"}));
  ASSERT_TRUE(lora.blocks[0].q.lora && !lora.blocks[0].v.lora && !lora.head.lora);
  EXPECT_EQ(lora.blocks[0].q.lora->rank(), 2u);
  EXPECT_DOUBLE_EQ(lora.blocks[0].q.lora->scaling, 4.0);
  EXPECT_EQ(host64(run(lora).dyn()), before);

  // With b drawn, one layer against its closed form y = x W^T + bias + s (x a^T) b^T in f64.
  lora = std::move(lora).map([&](nn::TensorEntry& e) {
    if (e.path.ends_with("lora.b"))
      e.tensor = ops::random(e.shape(), Distribution::uniform(-1, 1), e.dtype(), ad);
  });
  const nn::Linear& q = lora.blocks[0].q;
  const auto xs = host64(x.dyn()), w = host64(q.weight.val().dyn()),
             bias = host64(q.bias->val().dyn()), a = host64(q.lora->a.val().dyn()),
             b = host64(q.lora->b.val().dyn());
  const auto h = affine64(xs, a, {}, 5, 4, 2), d = affine64(h, b, {}, 5, 2, 4);
  auto want = affine64(xs, w, bias, 5, 4, 4);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] += 4.0 * d[i];
  const auto got = host64(q.forward(x).dyn());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;

  // Gradients reach the adapters only.
  Gradients grads = run(lora).sum().backward();
  EXPECT_TRUE(lora.blocks[1].q.lora->a.val().grad(grads).has_value());
  EXPECT_TRUE(lora.blocks[1].q.lora->b.val().grad(grads).has_value());
  EXPECT_FALSE(lora.blocks[1].q.weight.val().grad(grads).has_value());
  EXPECT_FALSE(lora.head.weight.val().grad(grads).has_value());

  // Merging folds each adapter into its weight: same outputs, no adapters left.
  const auto adapted = host64(run(lora).dyn());
  const auto merged = nn::merge_lora(lora);
  EXPECT_FALSE(merged.blocks[0].q.lora || merged.blocks[1].q.lora);
  const auto out = host64(run(merged).dyn());
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], adapted[i], 1e-5) << i;
  std::size_t paths = 0;
  merged.visit([&](const nn::TensorEntry&) { ++paths; });
  EXPECT_EQ(paths, 10u);  // 5 Linear layers, weight and bias each
}

TEST(Lora, BadArguments) {
  const Device ad = Device::cpu().autodiff();
  LoraNet net{{}, nn::LinearConfig{4, 3}.init(ad)};
  expect_error([&] { (void)nn::apply_lora(net, 2, 1.0, nn::path_regex("blocks.*")); },
               "selects no Linear");
  expect_error([&] { (void)nn::apply_lora(net, 0, 1.0); }, "rank must be > 0");
  expect_error([&] { (void)nn::apply_lora(net, 2, -1.0); }, "alpha must be positive");
  expect_error([&] { (void)nn::apply_lora(nn::apply_lora(net, 2, 1.0), 2, 1.0); },
               "already has an adapter");
  expect_error([&] { (void)nn::path_regex("(unclosed"); }, "not a regular expression");
}
