// The ONNX code generator: ember-onnx's C++ for the real models of test_onnx (a small CNN
// and a two-layer Transformer encoder, exported from PyTorch by tests/onnx/export_models.py)
// and for a sample of the ONNX node tests, generated and compiled by the build
// (ember_onnx_generate in tests/CMakeLists.txt), run and compared with the run-time loader
// and with PyTorch's (or the node test's) outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "ember/ember.hpp"
#include "ember/onnx/codegen.hpp"
#include "ember/onnx/onnx.hpp"
#include "node_sample.hpp"
#include "small_cnn.hpp"
#include "transformer_encoder.hpp"

namespace fs = std::filesystem;
namespace eo = ember::onnx;
using namespace ember;

namespace {

Shape shape_of(const nlohmann::json& j) {
  std::vector<std::size_t> d;
  for (auto& e : j) d.push_back(e.get<std::size_t>());
  return Shape(d);
}

struct RealModel {
  DynTensor input;
  TensorData torch_output;
  eo::Model loader;
};

RealModel real_model(const std::string& name, const Device& dev) {
  const fs::path dir = fs::path(EMBER_ONNX_MODELS_DIR);
  std::ifstream jf(dir / (name + ".json"));
  EMBER_CHECK(jf.good(), "run tests/onnx/export_models.py");
  nlohmann::json meta = nlohmann::json::parse(jf);
  auto x = ops::from_data(TensorData::from<float>(meta["input"].get<std::vector<float>>(),
                                                  shape_of(meta["input_shape"])),
                          dev);
  TensorData want = TensorData::from<float>(meta["output"].get<std::vector<float>>(),
                                            shape_of(meta["output_shape"]));
  return {x, want, eo::load((dir / (name + ".onnx")).string(), dev)};
}

}  // namespace

// The graph's Conv and Gemm nodes are nn layers, with the names PyTorch gave the modules.
static_assert(std::is_same_v<decltype(generated::SmallCnn::conv1), nn::Conv2d>);
static_assert(std::is_same_v<decltype(generated::SmallCnn::conv2), nn::Conv2d>);
static_assert(std::is_same_v<decltype(generated::SmallCnn::fc), nn::Linear>);
static_assert(
    std::is_same_v<decltype(generated::TransformerEncoder::encoder_layers_0_linear1), nn::Linear>);
static_assert(std::is_same_v<decltype(generated::TransformerEncoder::head), nn::Linear>);

TEST(OnnxCodegen, SmallCnnMatchesTheLoaderAndPyTorch) {
  const Device dev = Device::cpu();
  RealModel r = real_model("small_cnn", dev);
  auto net = generated::SmallCnn::load(EMBER_SMALL_CNN_WEIGHTS, dev);
  // Two 3x3 convolutions (the second grouped and strided) and the head; PyTorch folded the
  // batch norms into the convolutions' weights at export.
  EXPECT_EQ(net.conv2.groups, 2u);
  EXPECT_EQ(net.conv2.stride[0], 2u);
  EXPECT_EQ(net.num_params(), 8u * 3 * 9 + 8 + 16u * 4 * 9 + 16 + 10u * 16 + 10);
  DynTensor y = net.forward(r.input);
  y.to_data().assert_approx_eq(r.torch_output, 1e-4, 1e-5);
  y.to_data().assert_approx_eq(r.loader.run({r.input})[0].to_data(), 1e-5, 1e-6);
  // run() is forward over a list, as Model::run.
  net.run({r.input})[0].to_data().assert_approx_eq(y.to_data(), 0, 0);
}

TEST(OnnxCodegen, TransformerEncoderMatchesTheLoaderAndPyTorch) {
  const Device dev = Device::cpu();
  RealModel r = real_model("transformer_encoder", dev);
  auto net = generated::TransformerEncoder::load(EMBER_TRANSFORMER_ENCODER_WEIGHTS, dev);
  DynTensor y = net.forward(r.input);
  y.to_data().assert_approx_eq(r.torch_output, 1e-4, 1e-5);
  y.to_data().assert_approx_eq(r.loader.run({r.input})[0].to_data(), 1e-5, 1e-6);
  // The batch and sequence dims are symbolic: another batch and length run too.
  std::vector<float> v(3 * 4 * 32);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.37 * double(i)));
  auto x = ops::from_data(TensorData::from<float>(v, Shape{3, 4, 32}), dev);
  net.forward(x).to_data().assert_approx_eq(r.loader.run({x})[0].to_data(), 1e-5, 1e-6);
}

TEST(OnnxCodegen, TheGeneratedModuleTrainsOnAnAutodiffDevice) {
  const Device ad = Device::cpu().autodiff();
  RealModel r = real_model("small_cnn", ad);
  auto net = generated::SmallCnn::load(EMBER_SMALL_CNN_WEIGHTS, ad);
  Tensor<2> y(net.forward(r.input));
  auto grads = y.sum().backward();
  // Every param gets a gradient, equal to the loader's for the same initializer.
  std::size_t with_grad = 0;
  net.visit([&](const nn::TensorEntry& e) {
    if (e.is_param() && ops::grad(e.tensor, grads)) ++with_grad;
  });
  EXPECT_EQ(with_grad, 6u);
  auto loader_out = r.loader.run({r.input});
  auto loader_grads = Tensor<2>(loader_out[0]).sum().backward();
  for (const auto& [name, t] : r.loader.initializers())
    if (name == "fc.weight")
      ops::grad(t, loader_grads)
          ->to_data()
          .assert_approx_eq(ops::grad(net.fc.weight.val().dyn(), grads)->to_data(), 1e-5, 1e-6);
}

TEST(OnnxCodegen, RefusesGraphsWithSubgraphs) {
  const fs::path model = fs::path(EMBER_ONNX_NODE_TESTS_DIR) / "test_if" / "model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "Debian's libonnx-testdata is not installed";
  try {
    eo::generate(model.string(), (fs::temp_directory_path() / "ember_onnx_codegen_if").string());
    FAIL() << "generate accepted an If node";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(If)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("subgraph"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eo::generate("/nonexistent/model.onnx", "/tmp"), Error);
}

TEST(OnnxCodegen, ApplyRunsOneOperator) {
  const Device dev = Device::cpu();
  auto x = ops::from_data(TensorData::from<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}), dev);
  auto y = eo::apply("Transpose", 14, dev, {x}, {{"perm", eo::AttrValue::of_ints({1, 0})}})[0];
  y.to_data().assert_approx_eq(TensorData::from<float>({1, 4, 2, 5, 3, 6}, Shape{3, 2}), 0, 0);
  try {
    eo::apply("Transpose", 14, dev, {x}, {{"perm", eo::AttrValue::of_ints({0, 0, 1})}});
    FAIL() << "a bad perm was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Transpose"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eo::apply("NoSuchOp", 14, dev, {x}), Error);
}

// A sample of the node tests, generated into one namespace each (node_sample.hpp lists them).
class OnnxCodegenNodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxCodegenNodeTest, MatchesTheExpectedOutputs) {
  const fs::path dir = fs::path(EMBER_ONNX_NODE_TESTS_DIR) / GetParam();
  if (!fs::exists(dir)) GTEST_SKIP() << "Debian's libonnx-testdata is not installed";
  const Device dev = Device::cpu();
  const fs::path data = dir / "test_data_set_0";
  std::vector<DynTensor> inputs;
  for (int i = 0; fs::exists(data / ("input_" + std::to_string(i) + ".pb")); ++i)
    inputs.push_back(ops::from_data(
        eo::read_tensor_file((data / ("input_" + std::to_string(i) + ".pb")).string()), dev));
  auto out = node_sample::run(GetParam(), inputs, dev);
  std::size_t expected = 0;
  while (fs::exists(data / ("output_" + std::to_string(expected) + ".pb"))) ++expected;
  ASSERT_EQ(out.size(), expected);
  ASSERT_GT(expected, 0u);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const fs::path want = data / ("output_" + std::to_string(i) + ".pb");
    ASSERT_TRUE(fs::exists(want));
    out[i].to_data().assert_approx_eq(eo::read_tensor_file(want.string()), 1e-3, 1e-5);
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OnnxCodegenNodeTest);
INSTANTIATE_TEST_SUITE_P(Sample, OnnxCodegenNodeTest, ::testing::ValuesIn(node_sample::names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
