// Parity with PyTorch: every layer, activation and loss loads the weights PyTorch used
// (tests/nn/golden/<case>.json, written by tests/nn/make_golden.py) by the state_dict keys —
// which must equal the module's visit paths, in order — and must reproduce PyTorch's
// outputs, input and parameter gradients and updated buffers, in f64 and in f32 (against
// the f64 reference), in training mode (autodiff device) or inference mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

#include <ember/ember.hpp>

#include "nn/expect_error.hpp"

using namespace ember;
using Json = nlohmann::ordered_json;

namespace {

class Golden {
 public:
  explicit Golden(const std::string& name) : name_(name) {
    const std::string path = std::string(EMBER_NN_GOLDEN_DIR) + "/" + name + ".json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("missing golden file " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    j_ = Json::parse(ss.str());
  }
  const std::string& name() const { return name_; }
  bool has(const std::string& key) const { return j_["tensors"].contains(key); }
  const Json& meta() const { return j_["meta"]; }
  // The stored tensor; a PyTorch scalar (shape []) comes back with shape [1].
  TensorData data(const std::string& key) const {
    const Json& t = j_["tensors"].at(key);
    std::vector<std::size_t> dims = t["shape"].get<std::vector<std::size_t>>();
    if (dims.empty()) dims.push_back(1);
    const std::string dt = t["dtype"];
    if (dt == "f64") return TensorData::from(t["data"].get<std::vector<double>>(), Shape(dims));
    if (dt == "i64")
      return TensorData::from(t["data"].get<std::vector<std::int64_t>>(), Shape(dims));
    std::vector<bool> b = t["data"].get<std::vector<bool>>();
    std::vector<std::uint8_t> u(b.begin(), b.end());
    return TensorData::from(u, Shape(dims)).convert(DType::Bool);
  }
  // The tensor on dev; float data in `dt`.
  DynTensor tensor(const std::string& key, const Device& dev, DType dt) const {
    TensorData d = data(key);
    if (is_float(d.dtype())) d = d.convert(dt);
    return ops::from_data(d, dev);
  }
  std::vector<std::string> state_keys() const {
    std::vector<std::string> keys;
    for (const auto& [k, v] : j_["tensors"].items())
      if (k.rfind("state.", 0) == 0) keys.push_back(k.substr(6));
    return keys;
  }

 private:
  std::string name_;
  Json j_;
};

struct Tol {
  double rtol, atol;
};
Tol tol_for(DType dt) { return dt == DType::F64 ? Tol{1e-9, 1e-10} : Tol{2e-4, 5e-5}; }

void expect_close(const DynTensor& actual, const Golden& g, const std::string& key, Tol t) {
  TensorData want = g.data(key);
  TensorData got = actual.to_data().convert(DType::F64);
  if (got.num_elements() == want.num_elements() && got.shape() != want.shape() &&
      want.num_elements() == 1)
    want = TensorData(want.bytes(), got.shape(), want.dtype());
  try {
    got.assert_approx_eq(want.convert(DType::F64), t.rtol, t.atol);
  } catch (const Error& e) {
    ADD_FAILURE() << g.name() << " " << key << ": " << e.what();
  }
}

std::vector<std::string> paths_of(const nn::Module auto& m) {
  std::vector<std::string> out;
  m.visit([&](const nn::TensorEntry& e) { out.emplace_back(e.path); });
  return out;
}

// Loads the golden state_dict into m by path, as a record loader would: keys must equal the
// paths, shapes must match (a scalar buffer takes the one-element value).
template <class M>
M load_state(M m, const Golden& g, const Device& dev, DType dt) {
  EXPECT_EQ(paths_of(m), g.state_keys()) << g.name() << ": visit paths vs state_dict keys";
  return std::move(m).map([&](nn::TensorEntry& e) {
    const std::string key = "state." + std::string(e.path);
    if (!g.has(key)) {
      ADD_FAILURE() << g.name() << ": no state_dict entry for " << e.path;
      return;
    }
    DynTensor t = g.tensor(key, dev, dt);
    if (e.scalar) {
      EXPECT_EQ(t.num_elements(), 1u) << e.path;
      t = ops::reshape(ops::cast(t, e.dtype()), e.shape());
    }
    EXPECT_EQ(t.shape(), e.shape()) << g.name() << ": shape of " << e.path;
    e.tensor = t;
  });
}

template <class M>
using Forward = std::function<std::vector<DynTensor>(const M&, const std::vector<DynTensor>&)>;

// Loads, runs and compares one golden case (see the file comment).
template <class M>
void run_case(const std::string& name, const M& fresh, DType dt, bool train, const Forward<M>& fwd,
              double tol_scale = 1.0) {
  SCOPED_TRACE(name + " in " + ember::name(dt));
  const Golden g(name);
  const Device dev = train ? Device::cpu().autodiff() : Device::cpu();
  const M m = load_state(fresh, g, dev, dt);
  Tol t = tol_for(dt);
  t.rtol *= tol_scale;
  t.atol *= tol_scale;
  std::vector<DynTensor> in;
  for (std::size_t i = 0; g.has("input." + std::to_string(i)); ++i) {
    DynTensor x = g.tensor("input." + std::to_string(i), dev, dt);
    if (train && g.has("grad.input." + std::to_string(i))) x = ops::require_grad(x);
    in.push_back(x);
  }
  const std::vector<DynTensor> out = fwd(m, in);
  std::optional<DynTensor> total;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::string k = std::to_string(i);
    ASSERT_TRUE(g.has("output." + k)) << "ember gives more outputs than PyTorch";
    expect_close(out[i], g, "output." + k, t);
    if (!train) continue;
    DynTensor gout = g.tensor("gout." + k, dev, dt);
    if (out[i].shape() != gout.shape()) gout = ops::reshape(gout, out[i].shape());
    DynTensor s = ops::reduce_all(ir::ReduceFn::Sum, ops::binary(ir::BinaryFn::Mul, out[i], gout));
    total = total ? ops::binary(ir::BinaryFn::Add, *total, s) : s;
  }
  EXPECT_FALSE(g.has("output." + std::to_string(out.size()))) << "ember gives fewer outputs";
  if (train && total) {
    Gradients grads = ops::backward(*total);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::string k = "grad.input." + std::to_string(i);
      if (!g.has(k)) continue;
      auto gx = ops::grad(in[i], grads);
      if (!gx) {
        ADD_FAILURE() << name << ": no gradient for input " << i;
        continue;
      }
      expect_close(*gx, g, k, t);
    }
    m.visit([&](const nn::TensorEntry& e) {
      const std::string k = "grad.state." + std::string(e.path);
      if (!e.is_param() || !g.has(k)) return;
      auto gp = ops::grad(e.tensor, grads);
      if (!gp) {
        ADD_FAILURE() << name << ": no gradient for " << e.path;
        return;
      }
      expect_close(*gp, g, k, t);
    });
  }
  m.visit([&](const nn::TensorEntry& e) {
    const std::string k = "after." + std::string(e.path);
    if (e.is_buffer() && g.has(k)) expect_close(e.tensor, g, k, t);
  });
}

template <class M>
void run_both(const std::string& name, const M& fresh, bool train, const Forward<M>& fwd,
              double tol_scale = 1.0) {
  for (DType dt : {DType::F64, DType::F32}) run_case(name, fresh, dt, train, fwd, tol_scale);
}

// A one-input, one-output layer of rank D.
template <std::size_t D, class M>
Forward<M> unary() {
  return [](const M& m, const std::vector<DynTensor>& in) {
    return std::vector<DynTensor>{m.forward(Tensor<D>(in[0])).dyn()};
  };
}

const Device cpu = Device::cpu();

}  // namespace

TEST(NnParity, Linear) {
  run_both("linear", nn::LinearConfig{5, 3}.init(cpu), true, unary<2, nn::Linear>());
  run_both("linear_rank3", nn::LinearConfig{5, 3}.with_bias(false).init(cpu), true,
           unary<3, nn::Linear>());
}

TEST(NnParity, Conv) {
  run_both("conv2d",
           nn::Conv2dConfig{4, 6, {3, 2}}
               .with_stride({2, 1})
               .with_padding(nn::Padding{1, 1})
               .with_dilation({1, 2})
               .with_groups(2)
               .init(cpu),
           true, unary<4, nn::Conv2d>());
  run_both(
      "conv2d_same",
      nn::Conv2dConfig{3, 4, {4, 3}}.with_padding(nn::Padding::same()).with_bias(false).init(cpu),
      true, unary<4, nn::Conv2d>());
  run_both("conv1d",
           nn::Conv1dConfig{3, 4, {3}}.with_stride({2}).with_padding(nn::Padding{1}).init(cpu),
           true, unary<3, nn::Conv1d>());
  run_both("conv_transpose2d",
           nn::ConvTranspose2dConfig{4, 6, {3, 3}}
               .with_stride({2, 2})
               .with_padding({1, 1})
               .with_output_padding({1, 1})
               .with_groups(2)
               .init(cpu),
           true, unary<4, nn::ConvTranspose2d>());
}

TEST(NnParity, Conv3dAndTransposed1d) {
  run_both("conv3d",
           nn::Conv3dConfig{2, 4, {2, 3, 2}}
               .with_stride({1, 2, 1})
               .with_padding(nn::Padding{1, 0, 1})
               .init(cpu),
           true, unary<5, nn::Conv3d>());
  run_both("conv_transpose1d",
           nn::ConvTranspose1dConfig{3, 2, {4}}
               .with_stride({3})
               .with_padding({1})
               .with_output_padding({2})
               .init(cpu),
           true, unary<3, nn::ConvTranspose1d>());
}

TEST(NnParity, ConvTranspose3d) {
  run_both("conv_transpose3d",
           nn::ConvTranspose3dConfig{4, 6, {3, 2, 3}}
               .with_stride({2, 1, 2})
               .with_padding({1, 0, 1})
               .with_output_padding({1, 0, 0})
               .with_dilation({1, 2, 1})
               .with_groups(2)
               .init(cpu),
           true, unary<5, nn::ConvTranspose3d>());
}

TEST(NnParity, Identity) {
  run_both("identity", nn::Identity{}, true, unary<3, nn::Identity>());
  const auto labels =
      Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({3, -1, 7}, Shape{3}), cpu);
  EXPECT_EQ(nn::Identity{}.forward(labels).to_data().to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{3, -1, 7}));
}

// Dropout draws its mask from ember's generator, which is not PyTorch's, and takes no mask
// from outside; so the check is seed-independent: where both masks keep an element, ember's
// output and input gradient equal PyTorch's (x / (1 - p), gout / (1 - p)); where ember's
// drops it, both are 0; each keeps about 1 - p of the elements.
TEST(NnParity, DropoutInTrainingWhereBothKeep) {
  const Golden g("dropout_train");
  const double p = g.meta()["p"].get<double>();
  for (DType dt : {DType::F64, DType::F32}) {
    SCOPED_TRACE(ember::name(dt));
    Device ad = Device::cpu().autodiff();
    ad.seed(11);
    const DynTensor x = ops::require_grad(g.tensor("input.0", ad, dt));
    const DynTensor y = nn::Dropout{p}.forward(Tensor<2>(x)).dyn();
    const DynTensor gout = g.tensor("gout.0", ad, dt);
    Gradients grads =
        ops::backward(ops::reduce_all(ir::ReduceFn::Sum, ops::binary(ir::BinaryFn::Mul, y, gout)));
    const auto ye = y.to_data().convert(DType::F64).to_vector<double>();
    const auto ge = ops::grad(x, grads)->to_data().convert(DType::F64).to_vector<double>();
    const auto yt = g.data("output.0").to_vector<double>();
    const auto gt = g.data("grad.input.0").to_vector<double>();
    const auto xs = g.data("input.0").to_vector<double>();
    const Tol t = tol_for(dt);
    std::size_t kept_ember = 0, kept_torch = 0, both = 0;
    for (std::size_t i = 0; i < ye.size(); ++i) {
      const bool ke = ye[i] != 0.0, kt = yt[i] != 0.0;
      kept_ember += ke;
      kept_torch += kt;
      if (!ke) {
        EXPECT_EQ(ge[i], 0.0) << i;
        continue;
      }
      EXPECT_NEAR(ye[i], xs[i] / (1 - p), t.atol + t.rtol * std::abs(xs[i] / (1 - p))) << i;
      if (!kt) continue;
      ++both;
      EXPECT_NEAR(ye[i], yt[i], t.atol + t.rtol * std::abs(yt[i])) << i;
      EXPECT_NEAR(ge[i], gt[i], t.atol + t.rtol * std::abs(gt[i])) << i;
    }
    // Binomial(2000, 0.7): std 20.5, 5 std = 0.051 of the fraction.
    const double n = double(ye.size());
    EXPECT_NEAR(kept_ember / n, 1 - p, 0.051);
    EXPECT_NEAR(kept_torch / n, 1 - p, 0.051);
    EXPECT_GT(both, ye.size() / 3);
  }
}

TEST(NnParity, DeformConv2d) {
  run_both<nn::DeformConv2d>(
      "deform_conv2d",
      nn::DeformConv2dConfig{4, 6, {3, 2}}
          .with_stride({2, 1})
          .with_padding({1, 1})
          .with_dilation({1, 2})
          .with_groups(2)
          .init(cpu),
      true, [](const nn::DeformConv2d& m, const std::vector<DynTensor>& in) {
        return std::vector<DynTensor>{
            m.forward(Tensor<4>(in[0]), Tensor<4>(in[1]), Tensor<4>(in[2])).dyn()};
      });
  run_both<nn::DeformConv2d>(
      "deform_conv2d_nomask",
      nn::DeformConv2dConfig{3, 4, {3, 3}}.with_padding({1, 1}).with_bias(false).init(cpu), true,
      [](const nn::DeformConv2d& m, const std::vector<DynTensor>& in) {
        return std::vector<DynTensor>{m.forward(Tensor<4>(in[0]), Tensor<4>(in[1])).dyn()};
      });
  const auto m = nn::DeformConv2dConfig{3, 4, {3, 3}}.init(cpu);
  const auto x = Tensor<4>::zeros({1, 3, 5, 5}, cpu);
  expect_error_has(
      [&] {
        (void)m.forward(x, Tensor<4>::zeros({1, 17, 3, 3}, cpu));
      },
      {"nn::DeformConv2d", "offset must be [1, 2 G 9, 3, 3]", "[1, 17, 3, 3]"});
  expect_error_has(
      [&] {
        (void)m.forward(Tensor<4>::zeros({1, 2, 5, 5}, cpu), x);
      },
      {"nn::DeformConv2d", "has 2 channels, expected 3", "weight [4, 3, 3, 3]"});
  expect_error_has(
      [&] {
        (void)m.forward(x, Tensor<4>::zeros({1, 18, 3, 3}, cpu),
                        Tensor<4>::zeros({1, 18, 3, 3}, cpu));
      },
      {"nn::DeformConv2d", "mask must be [1, 9, 3, 3]"});
  expect_error(
      [&] {
        (void)nn::DeformConv2dConfig{3, 4, {7, 7}}.init(cpu).forward(x, x);
      },
      "nn::DeformConv2d: the kernel");
  expect_error_has(
      [&] {
        (void)m.forward(Tensor<4>::zeros({1, 6, 5, 5}, cpu), x);
      },
      {"nn::DeformConv2d", "has 6 channels, expected 3"});
}

TEST(NnParity, Pool1d) {
  run_both(
      "max_pool1d",
      nn::MaxPool1dConfig{{3}}.with_stride(std::array<std::size_t, 1>{2}).with_padding({1}).init(),
      true, unary<3, nn::MaxPool1d>());
  run_both("avg_pool1d", nn::AvgPool1dConfig{{2}}.init(), true, unary<3, nn::AvgPool1d>());
  run_both("adaptive_avg_pool1d", nn::AdaptiveAvgPool1dConfig{{4}}.init(), true,
           unary<3, nn::AdaptiveAvgPool1d>());
}

TEST(NnParity, Pool) {
  run_both("max_pool2d",
           nn::MaxPool2dConfig{{3, 2}}
               .with_stride(std::array<std::size_t, 2>{2, 1})
               .with_padding({1, 1})
               .init(),
           true, unary<4, nn::MaxPool2d>());
  run_both("avg_pool2d",
           nn::AvgPool2dConfig{{3, 3}}
               .with_stride(std::array<std::size_t, 2>{2, 2})
               .with_padding({1, 1})
               .with_count_include_pad(false)
               .init(),
           true, unary<4, nn::AvgPool2d>());
  run_both("adaptive_avg_pool2d", nn::AdaptiveAvgPool2dConfig{{3, 4}}.init(), true,
           unary<4, nn::AdaptiveAvgPool2d>());
}

TEST(NnParity, BatchNormTrainingAndInference) {
  const auto bn = nn::BatchNormConfig{3}.init(cpu);
  run_both("batch_norm2d_train", bn, true, unary<4, nn::BatchNorm>());
  run_both("batch_norm2d_eval", bn, false, unary<4, nn::BatchNorm>());
  run_both("batch_norm1d_train_rank2", nn::BatchNormConfig{3}.with_momentum(0.3).init(cpu), true,
           unary<2, nn::BatchNorm>());
  run_both("batch_norm1d_train_rank3", bn, true, unary<3, nn::BatchNorm>());
}

TEST(NnParity, BatchNorm3dAndInstanceNorm) {
  run_both("batch_norm3d_train", nn::BatchNormConfig{2}.init(cpu), true, unary<5, nn::BatchNorm>());
  run_both("instance_norm2d", nn::InstanceNormConfig{3}.init(cpu), true,
           unary<4, nn::InstanceNorm>());
  run_both("instance_norm1d_affine", nn::InstanceNormConfig{3}.with_affine(true).init(cpu), true,
           unary<3, nn::InstanceNorm>());
}

TEST(NnParity, Norms) {
  run_both("layer_norm", nn::LayerNormConfig{6}.init(cpu), true, unary<3, nn::LayerNorm>());
  run_both("group_norm", nn::GroupNormConfig{2, 6}.init(cpu), true, unary<4, nn::GroupNorm>());
  run_both("rms_norm", nn::RmsNormConfig{6}.with_eps(1e-6).init(cpu), true,
           unary<3, nn::RmsNorm>());
}

TEST(NnParity, EmbeddingPaddingRowGetsNoGradient) {
  run_both<nn::Embedding>("embedding", nn::EmbeddingConfig{7, 4}.with_padding_idx(1).init(cpu),
                          true, [](const nn::Embedding& m, const std::vector<DynTensor>& in) {
                            return std::vector<DynTensor>{m.forward(Tensor<2, Int>(in[0])).dyn()};
                          });
}

TEST(NnParity, Activations) {
  run_both("act_relu", nn::Relu{}, true, unary<2, nn::Relu>());
  run_both("act_relu6", nn::Relu6{}, true, unary<2, nn::Relu6>());
  run_both("act_leaky_relu", nn::LeakyRelu{0.1}, true, unary<2, nn::LeakyRelu>());
  run_both("act_gelu", nn::Gelu{}, true, unary<2, nn::Gelu>());
  run_both("act_gelu_tanh", nn::Gelu{true}, true, unary<2, nn::Gelu>());
  run_both("act_tanh", nn::Tanh{}, true, unary<2, nn::Tanh>());
  run_both("act_sigmoid", nn::Sigmoid{}, true, unary<2, nn::Sigmoid>());
  run_both("act_silu", nn::Silu{}, true, unary<2, nn::Silu>());
  run_both("act_mish", nn::Mish{}, true, unary<2, nn::Mish>());
  run_both("act_elu", nn::Elu{0.7}, true, unary<2, nn::Elu>());
  // PyTorch's f64 CELU and Hardsigmoid gradients use float constants (1.0f / 6.0f, a float
  // 1 / alpha), 3e-8 off the exact value; ember's are exact, so these two allow 1e-7.
  run_both("act_celu", nn::Celu{1.3}, true, unary<2, nn::Celu>(), 100.0);
  run_both("act_selu", nn::Selu{}, true, unary<2, nn::Selu>());
  run_both("act_softplus", nn::Softplus{2.0, 3.0}, true, unary<2, nn::Softplus>());
  run_both("act_softsign", nn::Softsign{}, true, unary<2, nn::Softsign>());
  run_both("act_hardtanh", nn::Hardtanh{-2.0, 1.5}, true, unary<2, nn::Hardtanh>());
  run_both("act_hardsigmoid", nn::HardSigmoid{}, true, unary<2, nn::HardSigmoid>(), 100.0);
  run_both("act_hardswish", nn::HardSwish{}, true, unary<2, nn::HardSwish>());
  run_both("act_logsigmoid", nn::LogSigmoid{}, true, unary<2, nn::LogSigmoid>());
  run_both("act_tanhshrink", nn::Tanhshrink{}, true, unary<2, nn::Tanhshrink>());
  run_both("act_softshrink", nn::Softshrink{0.6}, true, unary<2, nn::Softshrink>());
  run_both("act_hardshrink", nn::Hardshrink{0.6}, true, unary<2, nn::Hardshrink>());
  run_both("act_threshold", nn::Threshold{0.3, -1.5}, true, unary<2, nn::Threshold>());
  run_both("act_glu", nn::Glu{}, true, unary<2, nn::Glu>());
  run_both("act_softmax", nn::Softmax{1}, true, unary<2, nn::Softmax>());
  run_both("act_log_softmax", nn::LogSoftmax{1}, true, unary<2, nn::LogSoftmax>());
  run_both("act_prelu", nn::PReluConfig{3}.init(cpu), true, unary<3, nn::PRelu>());
}

TEST(NnParity, ShrinkAndThresholdedRelu) {
  // PyTorch has neither: the goldens compute Burn's and ONNX's definitions with torch ops.
  run_both("act_shrink", nn::Shrink{0.6, 0.4}, true, unary<2, nn::Shrink>());
  run_both("act_shrink_default", nn::Shrink{}, true, unary<2, nn::Shrink>());
  run_both("act_thresholded_relu", nn::ThresholdedRelu{}, true, unary<2, nn::ThresholdedRelu>());
  run_both("act_thresholded_relu_alpha", nn::ThresholdedRelu{-0.7}, true,
           unary<2, nn::ThresholdedRelu>());
}

namespace {
struct NoParams {
  EMBER_MODULE(NoParams)
};
struct ActivationCase {
  const char* golden;
  std::function<Tensor<2>(const Tensor<2>&)> f;
  bool train = true;
  double tol_scale = 1.0;
};
}  // namespace

// Each activation:: function against the PyTorch values its module is checked against.
TEST(NnParity, ActivationFunctions) {
  using namespace activation;
  using T = Tensor<2>;
  const std::vector<ActivationCase> cases = {
      {"act_relu", [](const T& x) { return relu(x); }},
      {"act_relu6", [](const T& x) { return relu6(x); }},
      {"act_leaky_relu", [](const T& x) { return leaky_relu(x, 0.1); }},
      {"act_gelu", [](const T& x) { return gelu(x); }},
      {"act_gelu_tanh", [](const T& x) { return gelu_tanh(x); }},
      {"act_tanh", [](const T& x) { return activation::tanh(x); }},
      {"act_sigmoid", [](const T& x) { return sigmoid(x); }},
      {"act_silu", [](const T& x) { return silu(x); }},
      {"act_mish", [](const T& x) { return mish(x); }},
      {"act_elu", [](const T& x) { return elu(x, 0.7); }},
      // See Activations for the 100x on celu and hardsigmoid.
      {"act_celu", [](const T& x) { return celu(x, 1.3); }, true, 100.0},
      {"act_selu", [](const T& x) { return selu(x); }},
      {"act_softplus", [](const T& x) { return softplus(x, 2.0, 3.0); }},
      {"act_softsign", [](const T& x) { return softsign(x); }},
      {"act_hardtanh", [](const T& x) { return hardtanh(x, -2.0, 1.5); }},
      {"act_hardsigmoid", [](const T& x) { return hard_sigmoid(x, 1.0 / 6.0, 0.5); }, true, 100.0},
      {"act_hardswish", [](const T& x) { return hardswish(x); }},
      {"act_logsigmoid", [](const T& x) { return logsigmoid(x); }},
      {"act_tanhshrink", [](const T& x) { return tanhshrink(x); }},
      {"act_softshrink", [](const T& x) { return softshrink(x, 0.6); }},
      {"act_hardshrink", [](const T& x) { return hardshrink(x, 0.6); }},
      {"act_shrink", [](const T& x) { return shrink(x, 0.6, 0.4); }},
      {"act_shrink_default", [](const T& x) { return shrink(x); }},
      {"act_threshold", [](const T& x) { return threshold(x, 0.3, -1.5); }},
      {"act_thresholded_relu", [](const T& x) { return thresholded_relu(x); }},
      {"act_thresholded_relu_alpha", [](const T& x) { return thresholded_relu(x, -0.7); }},
      {"act_glu", [](const T& x) { return glu(x); }},
      {"act_swiglu_halves", [](const T& x) { return swiglu(x); }},
      {"act_softmax", [](const T& x) { return softmax(x, 1); }},
      {"act_log_softmax", [](const T& x) { return log_softmax(x, 1); }},
      {"rrelu_eval", [](const T& x) { return rrelu(x, 0.1, 0.3); }, false},
  };
  for (const ActivationCase& c : cases)
    run_both<NoParams>(
        c.golden, NoParams{}, c.train,
        [&](const NoParams&, const std::vector<DynTensor>& in) {
          return std::vector<DynTensor>{c.f(T(in[0])).dyn()};
        },
        c.tol_scale);
  // prelu with the module's weight as its argument: the weight's gradient too.
  run_both<nn::PRelu>(
      "act_prelu", nn::PReluConfig{3}.init(cpu), true,
      [](const nn::PRelu& m, const std::vector<DynTensor>& in) {
        return std::vector<DynTensor>{prelu(Tensor<3>(in[0]), m.weight.val()).dyn()};
      });
  // swiglu(gate, value) is checked through nn::SwiGlu (FeedForwardBlocks); here, that the two
  // forms agree.
  const auto x = Tensor<2>::from_data(Golden("act_swiglu_halves").data("input.0"), cpu);
  const auto h = x.chunk(2, 1);
  swiglu(h[0], h[1]).to_data().assert_approx_eq(swiglu(x, 1).to_data(), 0.0, 0.0);
}

TEST(NnParity, ActivationArgumentErrors) {
  using namespace activation;
  const auto x = Tensor<2>::zeros(Shape{2, 3}, cpu);
  const double nan = std::nan("");
  expect_error_has([&] { (void)nn::Shrink{nan, 0.5}.forward(x); }, {"nn::Shrink", "lambda"});
  expect_error_has([&] { (void)shrink(x, 0.5, nan); }, {"activation::shrink", "bias"});
  expect_error_has([&] { (void)nn::Softshrink{-0.1}.forward(x); }, {"nn::Softshrink", "lambd"});
  expect_error_has([&] { (void)softshrink(x, -0.1); }, {"activation::softshrink", "lambd"});
  expect_error_has(
      [&] {
        (void)nn::Hardtanh{1.0, -1.0}.forward(x);
      },
      {"nn::Hardtanh", "min_val", "max_val"});
  expect_error_has([&] { (void)hardtanh(x, 1.0, -1.0); }, {"activation::hardtanh", "min_val"});
  expect_error_has([&] { (void)nn::Celu{0.0}.forward(x); }, {"nn::Celu", "alpha"});
  expect_error_has([&] { (void)celu(x, 0.0); }, {"activation::celu", "alpha"});
  expect_error_has([&] { (void)nn::RRelu{0.3, 0.1}.forward(x); }, {"nn::RRelu", "lower <= upper"});
  expect_error_has([&] { (void)rrelu(x, 0.3, 0.1); }, {"activation::rrelu", "lower <= upper"});
  expect_error_has([&] { (void)glu(x, 1); }, {"activation::glu", "dim 1", "[2, 3]"});
  expect_error_has([&] { (void)swiglu(x, -1); }, {"activation::swiglu", "dim -1", "[2, 3]"});
  const auto w = Tensor<1>::full(Shape{4}, 0.25, cpu);
  expect_error_has([&] { (void)prelu(x, w); }, {"activation::prelu", "[2, 3]", "[N, 4, *]"});
  expect_error_has([&] { (void)nn::PRelu{nn::Param<Tensor<1>>(w)}.forward(x); },
                   {"nn::PRelu", "[2, 3]"});
}

TEST(NnParity, RReluFunctionDrawsSlopesWhenTraining) {
  // training = true on a plain device: slopes from U(lower, upper), one per element.
  const auto x = Tensor<2>::full(Shape{50, 40}, -2.0, cpu);
  const auto v = activation::rrelu(x, 0.1, 0.3, true).to_data().to_vector<float>();
  float lo = 1, hi = 0;
  for (float e : v) {
    lo = std::min(lo, e / -2.0f);
    hi = std::max(hi, e / -2.0f);
  }
  EXPECT_GE(lo, 0.1f);
  EXPECT_LE(hi, 0.3f);
  EXPECT_LT(lo, 0.11f);  // 2000 draws from U(0.1, 0.3): the extremes are within 0.01 of the ends
  EXPECT_GT(hi, 0.29f);
}

TEST(NnParity, Lstm) {
  const Forward<nn::Lstm> fwd = [](const nn::Lstm& m, const std::vector<DynTensor>& in) {
    std::optional<nn::LstmState> s;
    if (in.size() == 3) s = nn::LstmState{Tensor<3>(in[1]), Tensor<3>(in[2])};
    auto [out, state] = m.forward(Tensor<3>(in[0]), s);
    return std::vector<DynTensor>{out.dyn(), state.hidden.dyn(), state.cell.dyn()};
  };
  run_both("lstm", nn::LstmConfig{4, 5}.with_num_layers(2).with_bidirectional(true).init(cpu), true,
           fwd);
  run_both("lstm_zero_state", nn::LstmConfig{3, 4}.init(cpu), true, fwd);
}

TEST(NnParity, GruAndRnn) {
  const auto fwd = [](const auto& m, const std::vector<DynTensor>& in) {
    std::optional<Tensor<3>> h0;
    if (in.size() == 2) h0 = Tensor<3>(in[1]);
    auto [out, hidden] = m.forward(Tensor<3>(in[0]), h0);
    return std::vector<DynTensor>{out.dyn(), hidden.dyn()};
  };
  run_both<nn::Gru>(
      "gru", nn::GruConfig{4, 5}.with_num_layers(2).with_bidirectional(true).init(cpu), true, fwd);
  run_both<nn::Rnn>("rnn_relu", nn::RnnConfig{3, 4}.with_nonlinearity("relu").init(cpu), true, fwd);
  run_both<nn::Rnn>("rnn_tanh_bidirectional",
                    nn::RnnConfig{3, 4}.with_bidirectional(true).with_bias(false).init(cpu), true,
                    fwd);
}

TEST(NnParity, MultiHeadAttention) {
  run_both<nn::MultiHeadAttention>(
      "mha", nn::MultiHeadAttentionConfig{8, 2}.init(cpu), true,
      [](const nn::MultiHeadAttention& m, const std::vector<DynTensor>& in) {
        auto r = m.forward_with_weights(Tensor<3>(in[0]), Tensor<3>(in[1]), Tensor<3>(in[2]),
                                        {Tensor<2, Bool>(in[3]), Tensor<2, Bool>(in[4])});
        return std::vector<DynTensor>{r.context.dyn(), r.weights.dyn()};
      });
  run_both<nn::MultiHeadAttention>(
      "mha_self", nn::MultiHeadAttentionConfig{6, 3}.init(cpu), true,
      [](const nn::MultiHeadAttention& m, const std::vector<DynTensor>& in) {
        const Tensor<3> x(in[0]);
        return std::vector<DynTensor>{m.forward(x, x, x).dyn()};
      });
}

TEST(NnParity, TransformerEncoderLayer) {
  const auto cfg = nn::TransformerEncoderLayerConfig{8, 2}.with_d_ff(16).with_dropout(0.0);
  run_both("encoder_layer", cfg.init(cpu), true, unary<3, nn::TransformerEncoderLayer>());
  run_both("encoder_layer_norm_first", cfg.with_norm_first(true).init(cpu), true,
           unary<3, nn::TransformerEncoderLayer>());
}

TEST(NnParity, TransformerStacks) {
  const auto layer =
      nn::TransformerEncoderLayerConfig{8, 2}.with_d_ff(16).with_dropout(0.0).with_activation(
          "gelu");
  using Enc = nn::TransformerEncoder;
  const Forward<Enc> enc_fwd = [](const Enc& m, const std::vector<DynTensor>& in) {
    const Tensor<2, Bool> mask = nn::causal_mask(in[0].shape()[1], in[0].device());
    EXPECT_EQ(mask.to_data().convert(DType::U8).to_vector<std::uint8_t>(),
              in[1].to_data().convert(DType::U8).to_vector<std::uint8_t>());
    return std::vector<DynTensor>{m.forward(Tensor<3>(in[0]), {mask, std::nullopt}).dyn()};
  };
  run_both<Enc>("encoder", nn::TransformerEncoderConfig{layer, 2}.init(cpu), true, enc_fwd);
  run_both<Enc>(
      "encoder_norm_first",
      nn::TransformerEncoderConfig{layer.with_norm_first(true), 2}.with_final_norm(true).init(cpu),
      true, enc_fwd);

  const auto dlayer = nn::TransformerDecoderLayerConfig{8, 2}.with_d_ff(16).with_dropout(0.0);
  const auto dec_fwd = [](const auto& m, const std::vector<DynTensor>& in) {
    const nn::DecoderMasks masks{{Tensor<2, Bool>(in[2]), std::nullopt}, {}};
    return std::vector<DynTensor>{m.forward(Tensor<3>(in[0]), Tensor<3>(in[1]), masks).dyn()};
  };
  using DecLayer = nn::TransformerDecoderLayer;
  run_both<DecLayer>("decoder_layer", dlayer.init(cpu), true, dec_fwd);
  run_both<DecLayer>("decoder_layer_norm_first", dlayer.with_norm_first(true).init(cpu), true,
                     dec_fwd);
  run_both<nn::TransformerDecoder>(
      "decoder", nn::TransformerDecoderConfig{dlayer, 2}.with_final_norm(true).init(cpu), true,
      dec_fwd);
}

TEST(NnParity, MultiHeadAttentionWithKeyAndValueDims) {
  using Mha = nn::MultiHeadAttention;
  const Mha m = nn::MultiHeadAttentionConfig{6, 2}.with_kdim(5).with_vdim(3).init(cpu);
  EXPECT_FALSE(m.in_proj_weight.has_value());
  run_both<Mha>("mha_kv_dims", m, true, [](const Mha& m, const std::vector<DynTensor>& in) {
    auto r = m.forward_with_weights(Tensor<3>(in[0]), Tensor<3>(in[1]), Tensor<3>(in[2]));
    return std::vector<DynTensor>{r.context.dyn(), r.weights.dyn()};
  });
}

TEST(NnParity, LocalResponseNormAndRRelu) {
  run_both("local_response_norm",
           nn::LocalResponseNormConfig{3}.with_alpha(0.01).with_beta(0.6).with_k(1.5).init(), true,
           unary<4, nn::LocalResponseNorm>());
  run_both("local_response_norm_even_1d", nn::LocalResponseNormConfig{4}.init(), true,
           unary<3, nn::LocalResponseNorm>());
  run_both("rrelu_eval", nn::RRelu{0.1, 0.3}, false, unary<2, nn::RRelu>());
}

TEST(NnParity, FeedForwardBlocks) {
  run_both("swiglu", nn::SwiGluConfig{6, 4}.with_bias(true).init(cpu), true,
           unary<3, nn::SwiGlu>());
  run_both("position_wise_feed_forward",
           nn::PositionWiseFeedForwardConfig{6, 10}.with_dropout(0.0).init(cpu), true,
           unary<3, nn::PositionWiseFeedForward>());
}

TEST(NnParity, PixelShuffleAndDistances) {
  run_both("pixel_shuffle", nn::PixelShuffle{2}, true, unary<4, nn::PixelShuffle>());
  run_both("pixel_unshuffle", nn::PixelUnshuffle{2}, true, unary<4, nn::PixelUnshuffle>());
  run_both("unfold",
           nn::UnfoldConfig{{2, 3}}
               .with_dilation({1, 2})
               .with_padding({1, 0})
               .with_stride({2, 1})
               .init(),
           true, unary<4, nn::Unfold>());
  run_both("fold", nn::FoldConfig{{4, 5}, {2, 2}}.with_stride({1, 2}).with_padding({1, 1}).init(),
           true, unary<3, nn::Fold>());
  run_both<nn::CosineSimilarity>(
      "cosine_similarity", nn::CosineSimilarityConfig{}.init(), true,
      [](const nn::CosineSimilarity& m, const std::vector<DynTensor>& in) {
        return std::vector<DynTensor>{m.forward(Tensor<3>(in[0]), Tensor<3>(in[1])).dyn()};
      });
  const Forward<nn::PairwiseDistance> pd = [](const nn::PairwiseDistance& m,
                                              const std::vector<DynTensor>& in) {
    return std::vector<DynTensor>{m.forward(Tensor<2>(in[0]), Tensor<2>(in[1])).dyn()};
  };
  run_both("pairwise_distance", nn::PairwiseDistanceConfig{}.init(), true, pd);
  run_both("pairwise_distance_p3", nn::PairwiseDistanceConfig{}.with_p(3.0).init(), true, pd);
}

namespace {
using LossFn = std::function<Tensor<1>(const std::vector<DynTensor>&)>;
// Reduction::None returns the per-element losses flattened; they are compared in
// PyTorch's shape.
void run_loss(const std::string& name, const LossFn& f) {
  const Shape shape = Golden(name).data("output.0").shape();
  run_both<NoParams>(name, NoParams{}, true,
                     [&](const NoParams&, const std::vector<DynTensor>& in) {
                       return std::vector<DynTensor>{ops::reshape(f(in).dyn(), shape)};
                     });
}
Tensor<1> weight_of(const Golden& g, const DynTensor& like) {
  return Tensor<1>(
      ops::cast(ops::from_data(TensorData::from(g.meta()["weight"].get<std::vector<double>>()),
                               like.device()),
                like.dtype()));
}
}  // namespace

TEST(NnParity, Losses) {
  using namespace nn::loss;
  const auto t2 = [](const DynTensor& x) { return Tensor<2>(x); };
  const auto lab = [](const DynTensor& x) { return Tensor<1, Int>(x); };
  run_loss("loss_cross_entropy", [&](auto& in) { return cross_entropy(t2(in[0]), lab(in[1])); });
  const Golden ws("loss_cross_entropy_weight_smoothing");
  run_loss("loss_cross_entropy_weight_smoothing", [&](auto& in) {
    return cross_entropy(t2(in[0]), lab(in[1]), {weight_of(ws, in[0]), 0.2});
  });
  run_loss("loss_cross_entropy_sum", [&](auto& in) {
    return cross_entropy(t2(in[0]), lab(in[1]), {std::nullopt, 0.1, -100, Reduction::Sum});
  });
  run_loss("loss_cross_entropy_none", [&](auto& in) {
    return cross_entropy(t2(in[0]), lab(in[1]), {weight_of(ws, in[0]), 0.0, -100, Reduction::None});
  });
  run_loss("loss_cross_entropy_probs", [&](auto& in) {
    return cross_entropy(t2(in[0]), t2(in[1]), {weight_of(ws, in[0]), 0.1});
  });
  run_loss("loss_nll",
           [&](auto& in) { return nll(t2(in[0]), lab(in[1]), {weight_of(ws, in[0])}); });
  run_loss("loss_bce", [&](auto& in) {
    return binary_cross_entropy(t2(in[0]), t2(in[1]), Reduction::Mean, std::optional(t2(in[2])));
  });
  run_loss("loss_bce_with_logits", [&](auto& in) {
    return binary_cross_entropy_with_logits(t2(in[0]), t2(in[1]), Reduction::Mean,
                                            std::optional(t2(in[2])),
                                            std::optional(Tensor<1>(in[3])));
  });
  run_loss("loss_mse", [&](auto& in) { return mse(t2(in[0]), t2(in[1])); });
  run_loss("loss_mse_sum", [&](auto& in) { return mse(t2(in[0]), t2(in[1]), Reduction::Sum); });
  run_loss("loss_l1_none", [&](auto& in) { return l1(t2(in[0]), t2(in[1]), Reduction::None); });
  run_loss("loss_huber", [&](auto& in) { return huber(t2(in[0]), t2(in[1]), 0.7); });
  run_loss("loss_smooth_l1", [&](auto& in) { return smooth_l1(t2(in[0]), t2(in[1]), 0.6); });
  run_loss("loss_kl_div_batchmean",
           [&](auto& in) { return kl_div(t2(in[0]), t2(in[1]), Reduction::BatchMean); });
  run_loss("loss_kl_div_log_target",
           [&](auto& in) { return kl_div(t2(in[0]), t2(in[1]), Reduction::Mean, true); });
}

TEST(NnParity, MarginAndLikelihoodLosses) {
  using namespace nn::loss;
  const auto t1 = [](const DynTensor& x) { return Tensor<1>(x); };
  const auto t2 = [](const DynTensor& x) { return Tensor<2>(x); };
  run_loss("loss_cosine_embedding",
           [&](auto& in) { return cosine_embedding(t2(in[0]), t2(in[1]), t1(in[2]), 0.2); });
  run_loss("loss_gaussian_nll",
           [&](auto& in) { return gaussian_nll(t2(in[0]), t2(in[1]), t2(in[2]), true); });
  run_loss("loss_gaussian_nll_broadcast_sum", [&](auto& in) {
    return gaussian_nll(t2(in[0]), t2(in[1]), t2(in[2]), false, 1e-6, Reduction::Sum);
  });
  run_loss("loss_poisson_nll_full",
           [&](auto& in) { return poisson_nll(t2(in[0]), t2(in[1]), true, true); });
  run_loss("loss_poisson_nll_rates", [&](auto& in) {
    return poisson_nll(t2(in[0]), t2(in[1]), false, false, 1e-8, Reduction::Sum);
  });
  run_loss("loss_margin_ranking",
           [&](auto& in) { return margin_ranking(t1(in[0]), t1(in[1]), t1(in[2]), 0.3); });
  run_loss("loss_triplet_margin",
           [&](auto& in) { return triplet_margin(t2(in[0]), t2(in[1]), t2(in[2]), 1.5); });
  run_loss("loss_triplet_margin_swap_p1", [&](auto& in) {
    return triplet_margin(t2(in[0]), t2(in[1]), t2(in[2]), 1.0, 1.0, 1e-6, true, Reduction::None);
  });
  run_loss("loss_hinge_embedding",
           [&](auto& in) { return hinge_embedding(t2(in[0]), t2(in[1]), 0.8); });
  const auto lab = [](const DynTensor& x) { return Tensor<1, Int>(x); };
  run_loss("loss_multi_margin",
           [&](auto& in) { return multi_margin(t2(in[0]), lab(in[1]), 1, 0.7); });
  const Golden mw("loss_multi_margin_p2_weight");
  run_loss("loss_multi_margin_p2_weight", [&](auto& in) {
    return multi_margin(t2(in[0]), lab(in[1]), 2, 1.0, weight_of(mw, in[0]), Reduction::Sum);
  });
  run_loss("loss_soft_margin", [&](auto& in) { return soft_margin(t2(in[0]), t2(in[1])); });
}

// ---- A PyTorch state_dict maps onto the mirroring struct by name ----

namespace {
struct ParityBlock {
  nn::Linear fc;
  nn::LayerNorm norm;
  EMBER_MODULE(ParityBlock, fc, norm)
};
struct ParityNet {
  nn::Conv2d conv1;
  nn::BatchNorm bn1;
  std::vector<ParityBlock> blocks;
  nn::Sequential head;
  nn::Lstm rnn;
  nn::MultiHeadAttention attn;
  nn::Embedding embed;
  EMBER_MODULE(ParityNet, conv1, bn1, blocks, head, rnn, attn, embed)
};
}  // namespace

TEST(NnParity, StateDictKeysEqualVisitPaths) {
  const auto block = [] {
    return ParityBlock{nn::LinearConfig{4, 4}.init(cpu), nn::LayerNormConfig{4}.init(cpu)};
  };
  ParityNet net{nn::Conv2dConfig{1, 4, {3, 3}}.with_padding(nn::Padding{1, 1}).init(cpu),
                nn::BatchNormConfig{4}.init(cpu),
                {block(), block()},
                nn::Sequential(nn::LinearConfig{4, 8}.init(cpu), nn::Relu{},
                               nn::LinearConfig{8, 2}.init(cpu)),
                nn::LstmConfig{4, 3}.init(cpu),
                nn::MultiHeadAttentionConfig{4, 2}.init(cpu),
                nn::EmbeddingConfig{10, 4}.init(cpu)};
  const Golden g("state_dict_net");
  EXPECT_EQ(paths_of(net), g.meta()["keys"].get<std::vector<std::string>>());
  const ParityNet loaded = load_state(net, g, cpu, DType::F32);
  loaded.visit([&](const nn::TensorEntry& e) {
    expect_close(e.tensor, g, "state." + std::string(e.path), tol_for(DType::F32));
  });
  EXPECT_EQ(loaded.num_params(), net.num_params());
}

TEST(NnParity, PoolsInCeilModeAndThreeD) {
  using A1 = std::array<std::size_t, 1>;
  using A2 = std::array<std::size_t, 2>;
  using A3 = std::array<std::size_t, 3>;
  run_both(
      "max_pool1d_ceil",
      nn::MaxPool1dConfig{{3}}.with_stride(A1{2}).with_padding({1}).with_ceil_mode(true).init(),
      true, unary<3, nn::MaxPool1d>());
  run_both("max_pool2d_ceil",
           nn::MaxPool2dConfig{{3, 3}}
               .with_stride(A2{2, 2})
               .with_padding({1, 1})
               .with_dilation({1, 2})
               .with_ceil_mode(true)
               .init(),
           true, unary<4, nn::MaxPool2d>());
  run_both("max_pool3d",
           nn::MaxPool3dConfig{{2, 3, 2}}.with_stride(A3{2, 2, 1}).with_padding({1, 1, 0}).init(),
           true, unary<5, nn::MaxPool3d>());
  run_both(
      "avg_pool1d_ceil",
      nn::AvgPool1dConfig{{3}}.with_stride(A1{2}).with_padding({1}).with_ceil_mode(true).init(),
      true, unary<3, nn::AvgPool1d>());
  run_both("avg_pool2d_ceil_exclude_pad",
           nn::AvgPool2dConfig{{3, 3}}
               .with_stride(A2{2, 2})
               .with_padding({1, 1})
               .with_ceil_mode(true)
               .with_count_include_pad(false)
               .init(),
           true, unary<4, nn::AvgPool2d>());
  run_both("avg_pool2d_divisor", nn::AvgPool2dConfig{{2, 2}}.with_divisor_override(3.0).init(),
           true, unary<4, nn::AvgPool2d>());
  run_both("avg_pool3d_ceil",
           nn::AvgPool3dConfig{{2, 2, 2}}.with_stride(A3{2, 2, 2}).with_ceil_mode(true).init(),
           true, unary<5, nn::AvgPool3d>());
  run_both("adaptive_avg_pool3d", nn::AdaptiveAvgPool3dConfig{{2, 3, 2}}.init(), true,
           unary<5, nn::AdaptiveAvgPool3d>());
}

TEST(NnParity, AdaptiveMaxPool) {
  run_both("adaptive_max_pool1d", nn::AdaptiveMaxPool1dConfig{{4}}.init(), true,
           unary<3, nn::AdaptiveMaxPool1d>());
  run_both("adaptive_max_pool2d", nn::AdaptiveMaxPool2dConfig{{3, 5}}.init(), true,
           unary<4, nn::AdaptiveMaxPool2d>());
}

namespace {
// The Interpolate of a golden case's meta (F.interpolate's keyword arguments).
nn::Interpolate interpolate_of(const std::string& name) {
  const Golden g(name);
  const Json& m = g.meta();
  nn::InterpolateConfig c;
  c.mode = m.at("mode").get<std::string>();
  c.align_corners = m.value("align_corners", false);
  if (m.contains("size")) {
    if (m["size"].is_array())
      c.size = m["size"].get<std::vector<std::size_t>>();
    else
      c.size = {m["size"].get<std::size_t>()};
  }
  if (m.contains("scale_factor")) c.scale_factor = {m["scale_factor"].get<double>()};
  return c.init();
}
}  // namespace

TEST(NnParity, Interpolate) {
  for (const char* name : {"interp_nearest1d", "interp_linear1d", "interp_linear1d_corners"})
    run_both(name, interpolate_of(name), true, unary<3, nn::Interpolate>());
  for (const char* name :
       {"interp_nearest2d_scale", "interp_nearest_exact2d", "interp_bilinear",
        "interp_bilinear_corners", "interp_bilinear_scale", "interp_bilinear_down",
        "interp_bicubic", "interp_bicubic_corners", "interp_bicubic_down"})
    run_both(name, interpolate_of(name), true, unary<4, nn::Interpolate>());
  for (const char* name : {"interp_nearest3d_down", "interp_trilinear"})
    run_both(name, interpolate_of(name), true, unary<5, nn::Interpolate>());
}

TEST(NnParity, InterpolateAndPoolErrors) {
  const auto x4 = Tensor<4>::zeros(Shape{1, 1, 4, 4}, cpu);
  const auto x3 = Tensor<3>::zeros(Shape{1, 1, 4}, cpu);
  expect_error([&] { (void)nn::InterpolateConfig{}.init(); }, "exactly one of size");
  expect_error([&] { (void)nn::InterpolateConfig{{4}}.with_mode("cubic").init(); }, "unknown mode");
  expect_error([&] { (void)nn::InterpolateConfig{{4}}.with_mode("bilinear").init().forward(x3); },
               "needs 2 spatial dim");
  expect_error([&] { (void)nn::InterpolateConfig{{4}}.with_mode("bicubic").init().forward(x3); },
               "bicubic");
  expect_error(
      [&] { (void)nn::InterpolateConfig{{4}}.with_align_corners(true).init().forward(x4); },
      "align_corners");
  expect_error(
      [&] {
        (void)nn::InterpolateConfig{{}, {0.0}}.init().forward(x4);
      },
      "finite and positive");
  expect_error([&] { (void)nn::InterpolateConfig{{0, 3}}.init().forward(x4); }, "positive");
  expect_error(
      [&] {
        (void)nn::AvgPool2dConfig{{2, 2}}.with_divisor_override(0.0).init().forward(x4);
      },
      "divisor_override");
  expect_error([&] { (void)nn::AdaptiveMaxPool2dConfig{{0, 2}}.init().forward(x4); }, "non-empty");
}

TEST(NnParity, CtcLoss) {
  using namespace nn::loss;
  for (const char* name : {"loss_ctc_mean", "loss_ctc_sum_blank", "loss_ctc_none_zero_infinity"}) {
    const Golden g(name);
    const Json& m = g.meta();
    CtcOptions o;
    o.blank = m.value("blank", std::size_t{0});
    const std::string r = m.value("reduction", std::string("mean"));
    o.reduction = r == "sum" ? Reduction::Sum : r == "none" ? Reduction::None : Reduction::Mean;
    o.zero_infinity = m.value("zero_infinity", false);
    const auto il = m.at("input_lengths").get<std::vector<std::size_t>>();
    const auto tl = m.at("target_lengths").get<std::vector<std::size_t>>();
    run_loss(name, [&](auto& in) {
      return ctc(Tensor<3>(ops::log_softmax(in[0], 2)), Tensor<2, Int>(in[1]), il, tl, o);
    });
  }
}

TEST(NnParity, CtcLossErrors) {
  using namespace nn::loss;
  const auto lp = Tensor<3>::zeros(Shape{4, 2, 3}, cpu);
  const auto targets =
      Tensor<2, Int>::from_data(TensorData::from<std::int64_t>({1, 2, 2, 0}, Shape{2, 2}), cpu);
  expect_error([&] { (void)ctc(lp, targets, {4, 5}, {2, 1}); }, "input_lengths[1] = 5");
  expect_error([&] { (void)ctc(lp, targets, {4, 4}, {2, 3}); }, "target_lengths[1] = 3");
  // Row 1's first label is 2, the blank here.
  expect_error([&] { (void)ctc(lp, targets, {4, 4}, {2, 1}, {2}); }, "other than the blank");
  expect_error([&] { (void)ctc(lp, targets, {4}, {2, 1}); }, "input and target lengths");
  expect_error([&] { (void)ctc(lp, targets, {4, 4}, {2, 1}, {3}); }, "blank 3");
  // Impossible without zero_infinity: infinity, as PyTorch.
  const auto inf =
      ctc(lp, targets, {1, 4}, {2, 1}, {0, Reduction::None}).to_data().to_vector<float>();
  EXPECT_TRUE(std::isinf(inf[0]) && inf[0] > 0);
  EXPECT_TRUE(std::isfinite(inf[1]));
}

// The config modules against the same PyTorch values as the functions.
TEST(NnParity, LossModules) {
  const auto t2 = [](const DynTensor& x) { return Tensor<2>(x); };
  const auto lab = [](const DynTensor& x) { return Tensor<1, Int>(x); };
  const auto weights = [](const char* name) {
    return Golden(name).meta()["weight"].get<std::vector<double>>();
  };
  const auto ce = nn::CrossEntropyLossConfig{}
                      .with_weight(weights("loss_cross_entropy_weight_smoothing"))
                      .with_label_smoothing(0.2)
                      .init();
  run_loss("loss_cross_entropy_weight_smoothing",
           [&](auto& in) { return ce.forward(t2(in[0]), lab(in[1])); });
  const auto ce_sum =
      nn::CrossEntropyLossConfig{}.with_label_smoothing(0.1).with_reduction("sum").init();
  run_loss("loss_cross_entropy_sum",
           [&](auto& in) { return ce_sum.forward(t2(in[0]), lab(in[1])); });
  const auto nll =
      nn::NllLossConfig{}.with_weight(weights("loss_cross_entropy_weight_smoothing")).init();
  run_loss("loss_nll", [&](auto& in) { return nll.forward(t2(in[0]), lab(in[1])); });
  const auto mse = nn::MseLossConfig{}.with_reduction("sum").init();
  run_loss("loss_mse_sum", [&](auto& in) { return mse.forward(t2(in[0]), t2(in[1])); });
  const auto l1 = nn::L1LossConfig{}.with_reduction("none").init();
  run_loss("loss_l1_none", [&](auto& in) { return l1.forward(t2(in[0]), t2(in[1])); });
  const auto huber = nn::HuberLossConfig{}.with_delta(0.7).init();
  run_loss("loss_huber", [&](auto& in) { return huber.forward(t2(in[0]), t2(in[1])); });
  const auto sl1 = nn::SmoothL1LossConfig{}.with_beta(0.6).init();
  run_loss("loss_smooth_l1", [&](auto& in) { return sl1.forward(t2(in[0]), t2(in[1])); });
  const auto kl = nn::KlDivLossConfig{}.with_reduction("batchmean").init();
  run_loss("loss_kl_div_batchmean", [&](auto& in) { return kl.forward(t2(in[0]), t2(in[1])); });
  const auto ctc = nn::CtcLossConfig{}.with_reduction("none").with_zero_infinity(true).init();
  run_loss("loss_ctc_none_zero_infinity", [&](auto& in) {
    return ctc.forward(Tensor<3>(ops::log_softmax(in[0], 2)), Tensor<2, Int>(in[1]), {8, 1, 4},
                       {4, 0, 3});
  });

  // A config is JSON, and a bad one says what is wrong.
  const auto back = nn::CrossEntropyLossConfig::from_json(ce.config.to_json());
  EXPECT_EQ(back.weight, ce.config.weight);
  EXPECT_EQ(back.label_smoothing, 0.2);
  expect_error([] { (void)nn::MseLossConfig{}.with_reduction("average").init(); },
               "unknown reduction \"average\"");
  expect_error([] { (void)nn::MseLossConfig{}.with_reduction("batchmean").init(); },
               "unknown reduction");
  expect_error([] { (void)nn::CrossEntropyLossConfig{}.with_label_smoothing(1.5).init(); },
               "label_smoothing");
  expect_error(
      [] {
        (void)nn::CrossEntropyLossConfig{}.with_weight({1.0, -2.0}).init();
      },
      "weight[1]");
  expect_error([] { (void)nn::BinaryCrossEntropyLossConfig{}.with_pos_weight({2.0}).init(); },
               "logits = true");
  expect_error([] { (void)nn::HuberLossConfig{}.with_delta(0.0).init(); }, "delta");
}

// The margin and likelihood config modules: each against the PyTorch values its function is
// checked against (MarginAndLikelihoodLosses), and equal to the function on those inputs.
TEST(NnParity, MarginAndLikelihoodLossModules) {
  using namespace nn::loss;
  const auto t1 = [](const DynTensor& x) { return Tensor<1>(x); };
  const auto t2 = [](const DynTensor& x) { return Tensor<2>(x); };
  const auto lab = [](const DynTensor& x) { return Tensor<1, Int>(x); };
  // Runs the module on the golden case and checks that the function gives the same values.
  const auto check = [](const char* name, const LossFn& module, const LossFn& function) {
    run_loss(name, module);
    const Golden g(name);
    std::vector<DynTensor> in;
    for (std::size_t i = 0; g.has("input." + std::to_string(i)); ++i)
      in.push_back(g.tensor("input." + std::to_string(i), cpu, DType::F64));
    module(in).to_data().assert_approx_eq(function(in).to_data(), 0.0, 0.0);
  };

  const auto cosine = nn::CosineEmbeddingLossConfig{}.with_margin(0.2).init();
  check(
      "loss_cosine_embedding",
      [&](auto& in) { return cosine.forward(t2(in[0]), t2(in[1]), t1(in[2])); },
      [&](auto& in) { return cosine_embedding(t2(in[0]), t2(in[1]), t1(in[2]), 0.2); });
  const auto gauss = nn::GaussianNllLossConfig{}.with_full(true).init();
  check(
      "loss_gaussian_nll", [&](auto& in) { return gauss.forward(t2(in[0]), t2(in[1]), t2(in[2])); },
      [&](auto& in) { return gaussian_nll(t2(in[0]), t2(in[1]), t2(in[2]), true); });
  const auto gauss_sum = nn::GaussianNllLossConfig{}.with_reduction("sum").init();
  check(
      "loss_gaussian_nll_broadcast_sum",
      [&](auto& in) { return gauss_sum.forward(t2(in[0]), t2(in[1]), t2(in[2])); },
      [&](auto& in) {
        return gaussian_nll(t2(in[0]), t2(in[1]), t2(in[2]), false, 1e-6, Reduction::Sum);
      });
  const auto poisson = nn::PoissonNllLossConfig{}.with_full(true).init();
  check(
      "loss_poisson_nll_full", [&](auto& in) { return poisson.forward(t2(in[0]), t2(in[1])); },
      [&](auto& in) { return poisson_nll(t2(in[0]), t2(in[1]), true, true); });
  const auto rates = nn::PoissonNllLossConfig{}.with_log_input(false).with_reduction("sum").init();
  check(
      "loss_poisson_nll_rates", [&](auto& in) { return rates.forward(t2(in[0]), t2(in[1])); },
      [&](auto& in) {
        return poisson_nll(t2(in[0]), t2(in[1]), false, false, 1e-8, Reduction::Sum);
      });
  const auto ranking = nn::MarginRankingLossConfig{}.with_margin(0.3).init();
  check(
      "loss_margin_ranking",
      [&](auto& in) { return ranking.forward(t1(in[0]), t1(in[1]), t1(in[2])); },
      [&](auto& in) { return margin_ranking(t1(in[0]), t1(in[1]), t1(in[2]), 0.3); });
  const auto triplet = nn::TripletMarginLossConfig{}.with_margin(1.5).init();
  check(
      "loss_triplet_margin",
      [&](auto& in) { return triplet.forward(t2(in[0]), t2(in[1]), t2(in[2])); },
      [&](auto& in) { return triplet_margin(t2(in[0]), t2(in[1]), t2(in[2]), 1.5); });
  const auto swap =
      nn::TripletMarginLossConfig{}.with_p(1.0).with_swap(true).with_reduction("none").init();
  check(
      "loss_triplet_margin_swap_p1",
      [&](auto& in) { return swap.forward(t2(in[0]), t2(in[1]), t2(in[2])); },
      [&](auto& in) {
        return triplet_margin(t2(in[0]), t2(in[1]), t2(in[2]), 1.0, 1.0, 1e-6, true,
                              Reduction::None);
      });
  const auto hinge = nn::HingeEmbeddingLossConfig{}.with_margin(0.8).init();
  check(
      "loss_hinge_embedding", [&](auto& in) { return hinge.forward(t2(in[0]), t2(in[1])); },
      [&](auto& in) { return hinge_embedding(t2(in[0]), t2(in[1]), 0.8); });
  const auto multi = nn::MultiMarginLossConfig{}.with_margin(0.7).init();
  check(
      "loss_multi_margin", [&](auto& in) { return multi.forward(t2(in[0]), lab(in[1])); },
      [&](auto& in) { return multi_margin(t2(in[0]), lab(in[1]), 1, 0.7); });
  const Golden mw("loss_multi_margin_p2_weight");
  const auto multi_w = nn::MultiMarginLossConfig{}
                           .with_p(2)
                           .with_weight(mw.meta()["weight"].get<std::vector<double>>())
                           .with_reduction("sum")
                           .init();
  check(
      "loss_multi_margin_p2_weight",
      [&](auto& in) { return multi_w.forward(t2(in[0]), lab(in[1])); },
      [&](auto& in) {
        return multi_margin(t2(in[0]), lab(in[1]), 2, 1.0, weight_of(mw, in[0]), Reduction::Sum);
      });
  const auto soft = nn::SoftMarginLossConfig{}.init();
  check(
      "loss_soft_margin", [&](auto& in) { return soft.forward(t2(in[0]), t2(in[1])); },
      [&](auto& in) { return soft_margin(t2(in[0]), t2(in[1])); });

  // Bad configs name the loss and the field.
  expect_error_has([] { (void)nn::MultiMarginLossConfig{}.with_p(3).init(); },
                   {"nn::MultiMarginLoss", "p must be 1 or 2"});
  expect_error_has(
      [] {
        (void)nn::MultiMarginLossConfig{}.with_weight({1.0, -1.0}).init();
      },
      {"nn::MultiMarginLoss", "weight[1]"});
  expect_error_has([] { (void)nn::GaussianNllLossConfig{}.with_eps(0.0).init(); },
                   {"nn::GaussianNllLoss", "eps"});
  expect_error_has([] { (void)nn::PoissonNllLossConfig{}.with_eps(-1.0).init(); },
                   {"nn::PoissonNllLoss", "eps"});
  expect_error_has([] { (void)nn::TripletMarginLossConfig{}.with_p(0.0).init(); },
                   {"nn::TripletMarginLoss", "p must be positive"});
  expect_error_has([] { (void)nn::MarginRankingLossConfig{}.with_margin(std::nan("")).init(); },
                   {"nn::MarginRankingLoss", "margin"});
  expect_error_has([] { (void)nn::CosineEmbeddingLossConfig{}.with_reduction("avg").init(); },
                   {"nn::CosineEmbeddingLoss", "unknown reduction"});
  expect_error_has([] { (void)nn::HingeEmbeddingLossConfig{}.with_reduction("batchmean").init(); },
                   {"nn::HingeEmbeddingLoss", "unknown reduction"});
  expect_error_has([] { (void)nn::SoftMarginLossConfig{}.with_reduction("").init(); },
                   {"nn::SoftMarginLoss", "unknown reduction"});
  const auto back = nn::TripletMarginLossConfig::from_json(swap.config.to_json());
  EXPECT_EQ(back.p, 1.0);
  EXPECT_TRUE(back.swap);
  EXPECT_EQ(back.reduction, "none");
}
