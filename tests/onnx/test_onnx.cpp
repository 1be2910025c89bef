// The ONNX importer: loading, folding, elimination, shape checks, autodiff through an
// imported model, external data, real models exported from PyTorch, and bad input (every
// failure an ember::Error naming the node, the opset and what was expected).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "ember/ember.hpp"
#include "ember/onnx/onnx.hpp"

namespace fs = std::filesystem;
using namespace ember;
namespace eo = ember::onnx;
namespace pb = ::onnx;

namespace {

pb::ModelProto make_model(std::int64_t opset = 14) {
  pb::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("ember-test");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// A float input or output with dims (>= 0 fixed, -1 symbolic "N", -2 anonymous).
void add_value(pb::ValueInfoProto* v, const std::string& name, std::vector<std::int64_t> dims,
               int elem = pb::TensorProto::FLOAT) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  auto* s = t->mutable_shape();
  for (auto d : dims) {
    auto* dim = s->add_dim();
    if (d >= 0)
      dim->set_dim_value(d);
    else if (d == -1)
      dim->set_dim_param("N");
  }
}

void add_init(pb::GraphProto* g, const std::string& name, std::vector<std::int64_t> dims,
              const std::vector<float>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(pb::TensorProto::FLOAT);
  for (auto d : dims) t->add_dims(d);
  for (auto v : values) t->add_float_data(v);
}

pb::NodeProto* add_node(pb::GraphProto* g, const std::string& op, std::vector<std::string> in,
                        std::vector<std::string> out, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_node" : name);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

std::string bytes_of(const pb::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

eo::Model load_model(const pb::ModelProto& m, const Device& dev = Device::cpu(),
                     const std::string& dir = "") {
  const std::string b = bytes_of(m);
  return eo::load_bytes(b.data(), b.size(), dev, {}, dir);
}

// y = relu(x W^T + b) with W [3, 4], b [3]; x [N, 4].
pb::ModelProto gemm_relu() {
  auto m = make_model();
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", {-1, 4});
  add_value(g->add_output(), "y", {-1, 3});
  std::vector<float> w(12), b{0.5f, -0.25f, 0.125f};
  for (int i = 0; i < 12; ++i) w[static_cast<std::size_t>(i)] = 0.1f * float(i) - 0.5f;
  add_init(g, "W", {3, 4}, w);
  add_init(g, "b", {3}, b);
  auto* n = add_node(g, "Gemm", {"x", "W", "b"}, {"h"}, "fc");
  auto* a = n->add_attribute();
  a->set_name("transB");
  a->set_type(pb::AttributeProto::INT);
  a->set_i(1);
  add_node(g, "Relu", {"h"}, {"y"}, "act");
  return m;
}

std::vector<double> gemm_relu_ref(const std::vector<float>& x, std::size_t n) {
  std::vector<double> y(n * 3);
  const double b[3] = {0.5, -0.25, 0.125};
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t o = 0; o < 3; ++o) {
      double s = b[o];
      for (std::size_t k = 0; k < 4; ++k)
        s += double(x[r * 4 + k]) * (0.1 * double(o * 4 + k) - 0.5);
      y[r * 3 + o] = std::max(s, 0.0);
    }
  return y;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Onnx, RunsAGraphAgainstF64) {
  eo::Model m = load_model(gemm_relu());
  ASSERT_EQ(m.inputs().size(), 1u);  // initializers excluded
  EXPECT_EQ(m.inputs()[0].name, "x");
  EXPECT_EQ((*m.inputs()[0].shape)[0].symbol, "N");
  EXPECT_EQ(m.opset(), 14);
  std::vector<float> x{1, -2, 3, 0.5f, -1, 0, 2, 4};
  auto out = m.run({ops::from_data(TensorData::from<float>(x, Shape{2, 4}), Device::cpu())});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  const auto got = out[0].to_data().to_vector<double>();
  const auto want = gemm_relu_ref(x, 2);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  EXPECT_EQ(m.initializers().size(), 2u);
}

TEST(Onnx, FoldsConstantsAndDropsDeadNodes) {
  // x [N, 2, 3] -> Reshape(x, Concat(Shape(x)[0], [-1])): the shape chain of a static
  // weight folds; an unused branch is eliminated.
  auto m = make_model();
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", {-1, 2, 3});
  add_value(g->add_output(), "y", {-1, 6});
  add_init(g, "w", {2, 3}, {1, 2, 3, 4, 5, 6});
  add_node(g, "Shape", {"w"}, {"ws"}, "shape_w");           // folds: [2, 3]
  add_node(g, "ReduceProd", {"ws"}, {"p"}, "prod");         // folds: [6]
  auto* c = add_node(g, "Constant", {}, {"zero"}, "zero");  // folds
  auto* a = c->add_attribute();
  a->set_name("value_ints");
  a->set_type(pb::AttributeProto::INTS);
  a->add_ints(0);
  add_node(g, "Concat", {"zero", "p"}, {"target"}, "cat")->add_attribute()->CopyFrom([] {
    pb::AttributeProto at;
    at.set_name("axis");
    at.set_type(pb::AttributeProto::INT);
    at.set_i(0);
    return at;
  }());
  add_node(g, "Reshape", {"x", "target"}, {"y"}, "reshape");
  add_node(g, "Neg", {"x"}, {"unused"}, "dead");
  eo::Model model = load_model(m);
  EXPECT_EQ(model.stats().nodes, 6u);
  EXPECT_EQ(model.stats().folded, 4u);
  EXPECT_EQ(model.stats().eliminated, 1u);
  EXPECT_EQ(model.stats().kept, 1u);
  auto out =
      model.run({ops::reshape(ops::arange(0, 12, 1, DType::F32, Device::cpu()), Shape{2, 2, 3})});
  EXPECT_EQ(out[0].shape(), (Shape{2, 6}));
  EXPECT_EQ(out[0].to_data().to_vector<float>()[7], 7.0f);
}

TEST(Onnx, ChecksInputsAgainstTheDeclaredShapes) {
  eo::Model m = load_model(gemm_relu());
  const Device cpu = Device::cpu();
  EXPECT_NE(error_of([&] { m.run({}); }).find("got 0 inputs; the graph has 1"), std::string::npos);
  const std::string rank = error_of([&] { m.run({ops::zeros(Shape{4}, DType::F32, cpu)}); });
  EXPECT_NE(rank.find("input 0 'x' has shape [4]; expected rank 2, [N, 4]"), std::string::npos)
      << rank;
  const std::string dim = error_of([&] { m.run({ops::zeros(Shape{2, 5}, DType::F32, cpu)}); });
  EXPECT_NE(dim.find("expected [N, 4]"), std::string::npos) << dim;
  const std::string dt = error_of([&] { m.run({ops::zeros(Shape{2, 4}, DType::F64, cpu)}); });
  EXPECT_NE(dt.find("has dtype f64; expected f32"), std::string::npos) << dt;
}

TEST(Onnx, SymbolicDimsMustAgreeAcrossInputs) {
  auto m = make_model();
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "a", {-1, 2});
  add_value(g->add_input(), "b", {-1, 2});
  add_value(g->add_output(), "y", {-1, 2});
  add_node(g, "Add", {"a", "b"}, {"y"});
  eo::Model model = load_model(m);
  const Device cpu = Device::cpu();
  auto ok =
      model.run({ops::ones(Shape{3, 2}, DType::F32, cpu), ops::ones(Shape{3, 2}, DType::F32, cpu)});
  EXPECT_EQ(ok[0].to_data().to_vector<float>(), std::vector<float>(6, 2.0f));
  const std::string e = error_of([&] {
    model.run({ops::ones(Shape{3, 2}, DType::F32, cpu), ops::ones(Shape{4, 2}, DType::F32, cpu)});
  });
  EXPECT_NE(e.find("with N = 3 as an earlier input binds it"), std::string::npos) << e;
}

TEST(Onnx, DifferentiatesOnAnAutodiffDevice) {
  const Device ad = Device::cpu().autodiff();
  eo::Model m = load_model(gemm_relu(), ad);
  std::vector<float> x{1, -2, 3, 0.5f, -1, 0, 2, 4};
  auto out = m.run({ops::from_data(TensorData::from<float>(x, Shape{2, 4}), ad)});
  Gradients grads = Tensor<2>(out[0]).sum().backward();
  // d sum(relu(x W^T + b)) / d b[o] = number of rows where the pre-activation is positive.
  const auto y = gemm_relu_ref(x, 2);
  for (const auto& [name, t] : m.initializers()) {
    ASSERT_TRUE(ops::is_require_grad(t)) << name;
    if (name != "b") continue;
    auto gb = Tensor<1>(t).grad(grads);
    ASSERT_TRUE(gb.has_value());
    const auto v = gb->to_data().to_vector<double>();
    for (std::size_t o = 0; o < 3; ++o) {
      const double want = (y[o] > 0 ? 1.0 : 0.0) + (y[3 + o] > 0 ? 1.0 : 0.0);
      EXPECT_DOUBLE_EQ(v[o], want) << o;
    }
  }
}

TEST(Onnx, ReadsExternalData) {
  const fs::path dir = fs::temp_directory_path() / ("ember_onnx_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto m = make_model();
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", {3});
  add_value(g->add_output(), "y", {3});
  auto* t = g->add_initializer();
  t->set_name("w");
  t->set_data_type(pb::TensorProto::FLOAT);
  t->add_dims(3);
  t->set_data_location(pb::TensorProto::EXTERNAL);
  auto* loc = t->add_external_data();
  loc->set_key("location");
  loc->set_value("weights.bin");
  auto* off = t->add_external_data();
  off->set_key("offset");
  off->set_value("4");
  add_node(g, "Mul", {"x", "w"}, {"y"});
  const float data[4] = {99, 2, 3, 4};  // offset 4 skips the first
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(data), sizeof data);
  }
  eo::Model model = load_model(m, Device::cpu(), dir.string());
  auto out = model.run({ops::ones(Shape{3}, DType::F32, Device::cpu())});
  EXPECT_EQ(out[0].to_data().to_vector<float>(), (std::vector<float>{2, 3, 4}));
  fs::remove(dir / "weights.bin");
  const std::string e = error_of([&] { load_model(m, Device::cpu(), dir.string()); });
  EXPECT_NE(e.find("weights.bin"), std::string::npos) << e;
  loc->set_value("../escape.bin");
  const std::string esc = error_of([&] { load_model(m, Device::cpu(), dir.string()); });
  EXPECT_NE(esc.find("escape.bin"), std::string::npos) << esc;
  fs::remove_all(dir);
}

TEST(Onnx, RejectsMalformedAndTruncatedFiles) {
  const std::string good = bytes_of(gemm_relu());
  const std::string junk = "this is not a protobuf \xff\xff\xff\xff";
  EXPECT_NE(error_of([&] {
              eo::load_bytes(junk.data(), junk.size(), Device::cpu());
            }).find("malformed or truncated"),
            std::string::npos);
  EXPECT_NE(error_of([&] { eo::load_bytes(good.data(), 0, Device::cpu()); }).find("onnx::load"),
            std::string::npos);
  for (std::size_t cut : {good.size() / 3, good.size() / 2, good.size() - 3}) {
    const std::string e = error_of([&] { eo::load_bytes(good.data(), cut, Device::cpu()); });
    EXPECT_EQ(e.rfind("onnx::load", 0), 0u) << cut << ": " << e;
  }
  EXPECT_NE(
      error_of([] { eo::load("/nonexistent/model.onnx", Device::cpu()); }).find("cannot open"),
      std::string::npos);
}

TEST(Onnx, NamesTheNodeAndOpsetOfAnUnsupportedOperator) {
  auto m = make_model(13);
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", {2, 2});
  add_value(g->add_output(), "y", {});
  add_node(g, "Det", {"x"}, {"y"}, "my_node");  // a standard operator ember does not implement
  const std::string e = error_of([&] { load_model(m); });  // at load time, not at run
  EXPECT_NE(e.find("node 'my_node' (Det) (opset 13): operator is not supported"), std::string::npos)
      << e;
}

TEST(Onnx, RejectsOpsetsOutsideTheSupportedRange) {
  for (std::int64_t v : {0, 99}) {
    auto m = gemm_relu();
    m.mutable_opset_import(0)->set_version(v);
    const std::string e = error_of([&] { load_model(m); });
    EXPECT_NE(e.find("opset " + std::to_string(v) + " (ai.onnx) is not supported; expected 7 to " +
                     std::to_string(eo::max_opset())),
              std::string::npos)
        << e;
  }
  EXPECT_GE(eo::max_opset(), 17);
  // Opset 5: Gemm changed at 7 (broadcasting), so the model is refused naming the node;
  // Relu is unchanged since 6, so a Relu-only model of opset 6 loads.
  auto m = gemm_relu();
  m.mutable_opset_import(0)->set_version(5);
  const std::string e = error_of([&] { load_model(m); });
  EXPECT_NE(e.find("node 'fc' (Gemm) (opset 5): the operator changed at opset 7"),
            std::string::npos)
      << e;
  auto r = make_model(6);
  auto* g = r.mutable_graph();
  add_value(g->add_input(), "x", {2});
  add_value(g->add_output(), "y", {2});
  add_node(g, "Relu", {"x"}, {"y"});
  auto out = load_model(r).run({ops::from_data(TensorData::from<float>({-1, 2}), Device::cpu())});
  EXPECT_EQ(out[0].to_data().to_vector<float>(), (std::vector<float>{0, 2}));
}

TEST(Onnx, TheCheckerRejectsAnInvalidGraph) {
  auto m = gemm_relu();
  m.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");  // an undefined value
  const std::string e = error_of([&] { load_model(m); });
  EXPECT_NE(e.find("checker rejects the model"), std::string::npos) << e;
  EXPECT_NE(e.find("nowhere"), std::string::npos) << e;
}

TEST(Onnx, AnOperatorErrorNamesItsNode) {
  auto m = make_model();
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", {-2});
  add_value(g->add_input(), "i", {1}, pb::TensorProto::INT64);
  add_value(g->add_output(), "y", {-2});
  add_node(g, "Gather", {"x", "i"}, {"y"}, "pick");
  eo::Model model = load_model(m);
  const std::string e = error_of([&] {
    model.run({ops::ones(Shape{3}, DType::F32, Device::cpu()),
               ops::from_data(TensorData::from<std::int64_t>({7}), Device::cpu())});
  });
  EXPECT_NE(e.find("node 'pick' (Gather) (opset 14): index 7 is out of range for an extent of 3"),
            std::string::npos)
      << e;
}

// Random corruptions of a valid model: each load either succeeds or throws ember::Error.
TEST(Onnx, SurvivesCorruptedBytes) {
  const std::string good = bytes_of(gemm_relu());
  std::mt19937 rng(7);
  int errors = 0;
  for (int it = 0; it < 300; ++it) {
    std::string b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<char>(rng() & 0xff);
    if (rng() % 3 == 0) b.resize(rng() % b.size());
    try {
      eo::Model m = eo::load_bytes(b.data(), b.size(), Device::cpu());
      if (m.inputs().size() == 1 && m.inputs()[0].shape && m.inputs()[0].shape->size() == 2) {
        try {
          m.run({ops::ones(Shape{2, 4}, m.inputs()[0].dtype, Device::cpu())});
        } catch (const Error&) {
        }
      }
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

// The models the fuzzer found (make fuzz-onnx) that crashed the loader or a run, kept in
// tests/onnx/fuzz_findings (and in the fuzzer's corpus): each is now an error naming the
// operator its file name starts with ("ConvInteger-....onnx"), from load or, where the
// model loads, from running it as the fuzzer does (ones of its input shapes, 2 for a
// symbolic dim).
TEST(Onnx, FuzzFindingsAreErrors) {
  int n = 0;
  for (const auto& f : fs::directory_iterator(EMBER_ONNX_FUZZ_FINDINGS_DIR)) {
    const std::string stem = f.path().stem().string();
    const std::string op = stem.substr(0, stem.find('-'));
    const std::string msg = error_of([&] {
      eo::Model m = eo::load(f.path().string(), Device::cpu());
      std::vector<DynTensor> inputs;
      for (const auto& v : m.inputs()) {
        ASSERT_TRUE(v.shape.has_value()) << stem;
        std::vector<std::size_t> dims;
        for (const auto& d : *v.shape) dims.push_back(d.value.value_or(2));
        inputs.push_back(ops::ones(Shape(dims), v.dtype, Device::cpu()));
      }
      (void)m.run(inputs);
    });
    EXPECT_NE(msg.find("(" + op + ")"), std::string::npos) << stem << ": " << msg;
    ++n;
  }
  EXPECT_GE(n, 3);
}

// A convolution whose input's rank is known only from shape inference (a Reshape to rank
// 2 before a Conv of a rank-4 weight): an error naming the node, not a read past the
// input's dims (Note [Convolution ranks in ONNX shape inference]).
TEST(Onnx, ConvOfAnInferredRankBelowTheWeightsIsAnError) {
  auto m = make_model(13);
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", {1, 9});
  add_value(g->add_output(), "y", {-2, -2, -2, -2});
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(pb::TensorProto::INT64);
  shape->add_dims(2);
  shape->add_int64_data(3);
  shape->add_int64_data(3);
  add_init(g, "w", {1, 3, 2, 2}, std::vector<float>(12, 1.0f));
  add_node(g, "Reshape", {"x", "shape"}, {"r"});
  add_node(g, "Conv", {"r", "w"}, {"y"}, "conv");
  const std::string msg = error_of([&] { load_model(m); });
  EXPECT_NE(msg.find("node 'conv' (Conv) (opset 13)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the input has rank 2 and the weight rank 4"), std::string::npos) << msg;
}

namespace {

void add_ints_attr(pb::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

// PyTorch's opset-14 export of LayerNorm over the last axis of x [N, 4] (nine nodes); with
// `d_out`, the centred value is also a graph output.
pb::ModelProto decomposed_layer_norm(bool d_out) {
  auto m = make_model();
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", {-1, 4});
  add_value(g->add_output(), "y", {-1, 4});
  if (d_out) add_value(g->add_output(), "d", {-1, 4});
  add_init(g, "two", {}, {2.0f});
  add_init(g, "eps", {}, {1e-5f});
  add_init(g, "gamma", {4}, {1.5f, -0.5f, 2.0f, 0.25f});
  add_init(g, "beta", {4}, {0.1f, 0.2f, -0.3f, 0.0f});
  add_ints_attr(add_node(g, "ReduceMean", {"x"}, {"m"}, "mean"), "axes", {-1});
  add_node(g, "Sub", {"x", "m"}, {"d"});
  add_node(g, "Pow", {"d", "two"}, {"p"});
  add_ints_attr(add_node(g, "ReduceMean", {"p"}, {"v"}, "var"), "axes", {-1});
  add_node(g, "Add", {"v", "eps"}, {"e"}, "add_eps");
  add_node(g, "Sqrt", {"e"}, {"s"});
  add_node(g, "Div", {"d", "s"}, {"n"});
  add_node(g, "Mul", {"n", "gamma"}, {"w"});
  add_node(g, "Add", {"beta", "w"}, {"y"}, "add_beta");
  return m;
}

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = scale * (float(i % 7) - 2.5f) + 0.03f * float(i);
  return x;
}

}  // namespace

// Note [Decomposed operators]: the nine nodes run as one LayerNormalization, the same
// function as the f64 closed form, unless a value inside the pattern is read elsewhere.
TEST(Onnx, RunsADecomposedLayerNormAsOneNode) {
  const std::vector<float> x = ramp(12, 0.7f);
  const double gamma[4] = {1.5, -0.5, 2.0, 0.25}, beta[4] = {0.1, 0.2, -0.3, 0.0};
  std::vector<double> want(12);
  for (std::size_t r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (std::size_t k = 0; k < 4; ++k) mean += double(x[r * 4 + k]) / 4;
    for (std::size_t k = 0; k < 4; ++k) var += std::pow(double(x[r * 4 + k]) - mean, 2) / 4;
    for (std::size_t k = 0; k < 4; ++k)
      want[r * 4 + k] =
          (double(x[r * 4 + k]) - mean) / std::sqrt(var + double(1e-5f)) * gamma[k] + beta[k];
  }
  const TensorData want_t = TensorData::from<double>(want, Shape{3, 4}).convert(DType::F32);
  for (bool d_out : {false, true}) {
    eo::Model m = load_model(decomposed_layer_norm(d_out));
    EXPECT_EQ(m.stats().fused, d_out ? 0u : 1u) << "d read as a graph output: " << d_out;
    EXPECT_EQ(m.stats().kept, d_out ? 9u : 1u);
    auto out = m.run({ops::from_data(TensorData::from<float>(x, Shape{3, 4}), Device::cpu())});
    out[0].to_data().assert_approx_eq(want_t, 1e-5, 1e-6);
  }
}

// y = 0.5 x (1 + erf(x / sqrt 2)) as PyTorch exports it below opset 20: one Gelu node.
TEST(Onnx, RunsADecomposedGeluAsOneNode) {
  auto m = make_model();
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", {-1, 4});
  add_value(g->add_output(), "y", {-1, 4});
  add_init(g, "sqrt2", {}, {1.41421354f});
  add_init(g, "one", {}, {1.0f});
  add_init(g, "half", {}, {0.5f});
  add_node(g, "Div", {"x", "sqrt2"}, {"a"});
  add_node(g, "Erf", {"a"}, {"b"});
  add_node(g, "Add", {"one", "b"}, {"c"});
  add_node(g, "Mul", {"x", "c"}, {"d"}, "mul_x");
  add_node(g, "Mul", {"d", "half"}, {"y"}, "mul_half");
  eo::Model model = load_model(m);
  EXPECT_EQ(model.stats().fused, 1u);
  EXPECT_EQ(model.stats().kept, 1u);
  const std::vector<float> x = ramp(8, 1.1f);
  std::vector<double> want;
  for (float v : x) want.push_back(0.5 * double(v) * (1 + std::erf(double(v) / std::sqrt(2.0))));
  auto out = model.run({ops::from_data(TensorData::from<float>(x, Shape{2, 4}), Device::cpu())});
  out[0].to_data().assert_approx_eq(TensorData::from<double>(want, Shape{2, 4}).convert(DType::F32),
                                    1e-5, 1e-6);
}

// The Transformer encoder (batch and sequence symbolic) computes its reshape targets from
// Shape nodes; run() memoizes them by the shapes reaching those nodes (Note [Shape-keyed
// memo]). A model run on changing shapes, also from two threads at once, gives the bits of
// a model loaded afresh for each shape; the fused LayerNorm and GELU match the exported
// decomposition up to rounding.
TEST(Onnx, MemoizedShapeComputationsFollowTheInputShapes) {
  const fs::path path = fs::path(EMBER_ONNX_MODELS_DIR) / "transformer_encoder.onnx";
  const Device dev = Device::cpu();
  const std::vector<Shape> shapes{Shape{2, 7, 32}, Shape{3, 5, 32}, Shape{2, 7, 32},
                                  Shape{1, 4, 32}, Shape{3, 5, 32}};
  std::vector<DynTensor> xs;
  std::vector<TensorData> want;
  eo::LoadOptions unfused;
  unfused.fuse_decomposed = false;
  const eo::Model plain = eo::load(path.string(), dev, unfused);
  EXPECT_EQ(plain.stats().fused, 0u);
  for (const Shape& s : shapes) {
    xs.push_back(ops::from_data(TensorData::from<float>(ramp(s.num_elements(), 0.3f), s), dev));
    want.push_back(eo::load(path.string(), dev).run({xs.back()})[0].to_data());
    plain.run({xs.back()})[0].to_data().assert_approx_eq(want.back(), 1e-4, 1e-5);
  }
  const eo::Model m = eo::load(path.string(), dev);
  EXPECT_EQ(m.stats().fused, 6u);  // 4 LayerNorms, 2 GELUs
  EXPECT_EQ(m.stats().kept + 4 * 8 + 2 * 4, plain.stats().kept);
  for (std::size_t i = 0; i < shapes.size(); ++i)
    EXPECT_TRUE(m.run({xs[i]})[0].to_data() == want[i]) << "shape " << shapes[i].to_string();
  std::vector<std::string> wrong(2);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t r = 0; r < 20; ++r) {
        const std::size_t i = (r + t) % shapes.size();
        if (!(m.run({xs[i]})[0].to_data() == want[i])) wrong[t] += shapes[i].to_string() + " ";
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong[0] + wrong[1], "");
}

// Models exported from PyTorch by tests/onnx/export_models.py, against PyTorch's outputs.
class OnnxRealModel : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxRealModel, MatchesPyTorch) {
  const fs::path dir = fs::path(EMBER_ONNX_MODELS_DIR);
  std::ifstream jf(dir / (GetParam() + ".json"));
  ASSERT_TRUE(jf.good()) << "run tests/onnx/export_models.py";
  nlohmann::json meta = nlohmann::json::parse(jf);
  const auto shape = [](const nlohmann::json& j) {
    std::vector<std::size_t> d;
    for (auto& e : j) d.push_back(e.get<std::size_t>());
    return Shape(d);
  };
  for (const Device& dev : {Device::cpu(), Device::cpu().fusion(), Device::cpu().autodiff()}) {
    eo::Model m = eo::load((dir / (GetParam() + ".onnx")).string(), dev);
    std::vector<float> x = meta["input"].get<std::vector<float>>();
    auto out = m.run({ops::from_data(TensorData::from<float>(x, shape(meta["input_shape"])), dev)});
    ASSERT_EQ(out.size(), 1u);
    TensorData want = TensorData::from<float>(meta["output"].get<std::vector<float>>(),
                                              shape(meta["output_shape"]));
    out[0].to_data().assert_approx_eq(want, 1e-4, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, OnnxRealModel,
                         ::testing::Values("small_cnn", "transformer_encoder"));
