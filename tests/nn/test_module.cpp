// The module system (visit, map, ids, devices, freezing, summaries), EMBER_CONFIG and
// nn::Sequential, specified by small hand-built models whose answers follow from their
// construction.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <type_traits>

#include <ember/ember.hpp>

#include "nn/expect_error.hpp"

using namespace ember;

namespace {

Tensor<2> mat(const std::vector<double>& v, std::size_t r, std::size_t c, const Device& d) {
  return Tensor<2>::from_data(TensorData::from<double>(v, Shape{r, c}), d);
}
Tensor<1> vec(const std::vector<double>& v, const Device& d) {
  return Tensor<1>::from_data(TensorData::from<double>(v), d);
}

struct Block {
  nn::Linear fc;
  std::size_t width = 0;  // a plain field: kept, never visited
  EMBER_MODULE(Block, fc, width)
};

struct Net {
  nn::Linear input;
  std::vector<Block> blocks;
  std::optional<nn::Linear> head;
  std::optional<nn::Linear> absent;
  std::array<nn::Param<Tensor<1>>, 2> scales;
  nn::Buffer<Tensor<1>> stats;
  std::string label;
  EMBER_MODULE(Net, input, blocks, head, absent, scales, stats, label)
};

static_assert(std::is_aggregate_v<Net>, "EMBER_MODULE keeps a struct an aggregate");
static_assert(std::is_aggregate_v<nn::Linear>);
static_assert(nn::Module<Net> && nn::Module<nn::Sequential> && !nn::Module<int>);

Net make_net(const Device& d) {
  auto lin = [&](std::size_t i, std::size_t o) { return nn::LinearConfig{i, o}.init(d); };
  return Net{lin(3, 4),
             {Block{lin(4, 4), 4}, Block{nn::LinearConfig{4, 4}.with_bias(false).init(d), 7}},
             lin(4, 2),
             std::nullopt,
             {nn::Param<Tensor<1>>(vec({1, 2}, d)), nn::Param<Tensor<1>>(vec({3, 4, 5}, d))},
             nn::Buffer<Tensor<1>>(vec({0, 0}, d)),
             "net"};
}

std::vector<std::string> paths(const nn::Module auto& m) {
  std::vector<std::string> out;
  m.visit([&](const nn::TensorEntry& e) { out.emplace_back(e.path); });
  return out;
}

}  // namespace

TEST(NnModule, VisitPathsFollowFieldOrderAndPyTorchNames) {
  Net net = make_net(Device::cpu());
  const std::vector<std::string> expect = {
      "input.weight", "input.bias", "blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.1.fc.weight",
      "head.weight",  "head.bias",  "scales.0",           "scales.1",         "stats"};
  EXPECT_EQ(paths(net), expect);
  std::size_t params = 0, buffers = 0;
  net.visit([&](const nn::TensorEntry& e) {
    (e.is_param() ? params : buffers)++;
    EXPECT_EQ(e.is_param(), e.id != 0) << e.path;
    EXPECT_EQ(e.dtype(), DType::F64 == e.dtype() ? DType::F64 : DType::F32) << e.path;
  });
  EXPECT_EQ(params, 9u);
  EXPECT_EQ(buffers, 1u);
  // 3*4+4 + 16+4 + 16 + 4*2+2 + 2 + 3 (buffers excluded).
  EXPECT_EQ(net.num_params(), 16u + 20u + 16u + 10u + 5u);
  EXPECT_EQ(net.blocks[1].width, 7u);
  EXPECT_EQ(net.label, "net");
}

TEST(NnModule, ParamIdsAreFreshAndSurviveMapAndDeviceMoves) {
  Net net = make_net(Device::cpu());
  std::vector<nn::ParamId> ids;
  net.visit([&](const nn::TensorEntry& e) {
    if (e.is_param()) ids.push_back(e.id);
  });
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::size_t j = i + 1; j < ids.size(); ++j) EXPECT_NE(ids[i], ids[j]);

  Net doubled = net.map([](nn::TensorEntry& e) {
    if (e.is_param()) e.tensor = ops::binary_scalar(ir::BinaryFn::Mul, e.tensor, 2.0);
  });
  std::vector<nn::ParamId> after;
  doubled.visit([&](const nn::TensorEntry& e) {
    if (e.is_param()) after.push_back(e.id);
  });
  EXPECT_EQ(after, ids);
  EXPECT_EQ(doubled.scales[1].val().to_data().to_vector<double>(), (std::vector<double>{6, 8, 10}));
  // The original is untouched (map on an lvalue copies).
  EXPECT_EQ(net.scales[1].val().to_data().to_vector<double>(), (std::vector<double>{3, 4, 5}));

  Device ad = Device::cpu().autodiff();
  Net moved = net.to_device(ad);
  std::vector<nn::ParamId> moved_ids;
  moved.visit([&](const nn::TensorEntry& e) {
    EXPECT_TRUE(e.tensor.device() == ad) << e.path;
    EXPECT_EQ(ops::is_require_grad(e.tensor), e.is_param()) << e.path;
    if (e.is_param()) moved_ids.push_back(e.id);
  });
  EXPECT_EQ(moved_ids, ids);
}

TEST(NnModule, OptimizerStyleUpdateById) {
  // An SGD step written against the visitor alone, as an optimizer would: gradients by
  // ParamId, then a map replacing each param by id.
  Device ad = Device::cpu().autodiff();
  nn::Linear l{nn::Param<Tensor<2>>(mat({1, 2, 3, 4}, 2, 2, ad)),
               nn::Param<Tensor<1>>(vec({0.5, -0.5}, ad))};
  auto x = mat({1, 1}, 1, 2, ad);
  Gradients grads = l.forward(x).sum().backward();
  std::map<nn::ParamId, DynTensor> by_id;
  l.visit([&](const nn::TensorEntry& e) {
    auto g = ops::grad_remove(e.tensor, grads);
    ASSERT_TRUE(g.has_value()) << e.path;
    by_id.emplace(e.id, *g);
  });
  ASSERT_EQ(by_id.size(), 2u);
  l = std::move(l).map([&](nn::TensorEntry& e) {
    DynTensor step = ops::binary(ir::BinaryFn::Sub, ops::inner(e.tensor),
                                 ops::binary_scalar(ir::BinaryFn::Mul, by_id.at(e.id), 0.1));
    e.tensor = ops::from_inner(step, ad);
  });
  // d(sum(x W^T + b))/dW = [[1, 1], [1, 1]], /db = [1, 1].
  EXPECT_EQ(l.weight.val().to_data().to_vector<double>(),
            (std::vector<double>{0.9, 1.9, 2.9, 3.9}));
  EXPECT_EQ(l.bias->val().to_data().to_vector<double>(), (std::vector<double>{0.4, -0.6}));
  EXPECT_TRUE(l.weight.val().is_require_grad());
}

TEST(NnModule, FreezeValidAndUnfreeze) {
  Device ad = Device::cpu().autodiff();
  Net net = make_net(ad);
  Net frozen = net.freeze();
  frozen.visit([](const nn::TensorEntry& e) {
    EXPECT_FALSE(e.trainable) << e.path;
    EXPECT_FALSE(ops::is_require_grad(e.tensor)) << e.path;
  });
  Net thawed = std::move(frozen).unfreeze();
  thawed.visit([](const nn::TensorEntry& e) {
    EXPECT_EQ(e.trainable, e.is_param()) << e.path;
    EXPECT_EQ(ops::is_require_grad(e.tensor), e.is_param()) << e.path;
  });
  Net v = net.valid();
  v.visit(
      [&](const nn::TensorEntry& e) { EXPECT_TRUE(e.tensor.device() == ad.inner()) << e.path; });
  // A frozen param gets no gradient.
  Net half = net;
  half.input = half.input.freeze();
  auto x = mat({1, 2, 3}, 1, 3, ad).cast(DType::F32);
  Gradients g = half.blocks[0].fc.forward(half.input.forward(x)).sum().backward();
  EXPECT_FALSE(half.input.weight.val().grad(g).has_value());
  EXPECT_TRUE(half.blocks[0].fc.weight.val().grad(g).has_value());
}

TEST(NnModule, MapRejectsWrongRankOrKindNamingThePath) {
  Net net = make_net(Device::cpu());
  try {
    (void)net.map([](nn::TensorEntry& e) {
      if (e.path == "blocks.0.fc.weight") e.tensor = ops::reshape(e.tensor, Shape{16});
    });
    FAIL() << "expected ember::Error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("blocks.0.fc.weight"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("[16]"), std::string::npos) << err.what();
  }
  EXPECT_THROW((void)net.map([](nn::TensorEntry& e) {
    if (e.path == "stats") e.tensor = ops::cast(e.tensor, DType::I64);
  }),
               Error);
}

TEST(NnModule, BufferIsInteriorStateNotSharedByCopies) {
  Device d = Device::cpu();
  const nn::Buffer<Tensor<1>> b(vec({1, 2}, d));
  nn::Buffer<Tensor<1>> copy = b;
  b.set(vec({5, 6}, d));  // const: interior state
  EXPECT_EQ(b.val().to_data().to_vector<double>(), (std::vector<double>{5, 6}));
  EXPECT_EQ(copy.val().to_data().to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_THROW(b.set(vec({1, 2, 3}, d)), Error);
  EXPECT_THROW(nn::Buffer<Tensor<1>>(vec({1, 2}, d), /*scalar=*/true), Error);
  // A buffer never joins a graph.
  Device ad = d.autodiff();
  nn::Buffer<Tensor<1>> tracked(vec({1, 2}, ad).require_grad().mul_scalar(2.0));
  EXPECT_FALSE(tracked.val().is_require_grad());
}

TEST(NnModule, SummaryListsLayersShapesAndTotals) {
  Net net = make_net(Device::cpu());
  const std::string s = net.summary();
  std::ostringstream os;
  os << net;
  EXPECT_EQ(os.str(), s);
  for (const char* want :
       {"Net", "input (Linear)", "weight [4, 3], bias [4]", "blocks.1 (Block)", "fc (Linear)",
        "head (Linear)", "scales.0 [2], scales.1 [3]", "stats [2] (buffer)", "Total params: 67",
        "Trainable params: 67", "Non-trainable params: 0"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  EXPECT_NE(net.freeze().summary().find("Non-trainable params: 67"), std::string::npos);
}

// ---- EMBER_CONFIG ----

namespace {
enum class Mode { A, B };
struct InnerConfig {
  double rate = 0.5;
  std::optional<std::size_t> limit;
  EMBER_CONFIG(InnerConfig, rate, limit)
};
struct NetConfig {
  std::size_t classes;
  int offset = -3;
  double dropout = 0.2;
  bool bias = true;
  std::string name = "net";
  std::vector<std::size_t> widths = {8, 4};
  std::array<std::size_t, 2> kernel = {3, 3};
  Mode mode = Mode::A;
  InnerConfig inner = {};
  nn::Initializer init = nn::Initializer::xavier_uniform();
  EMBER_CONFIG(NetConfig, classes, offset, dropout, bias, name, widths, kernel, mode, inner, init)
};
static_assert(std::is_aggregate_v<NetConfig>);

}  // namespace

TEST(NnConfig, SettersJsonRoundTripAndFiles) {
  const NetConfig c =
      NetConfig{10}.with_dropout(0.5).with_widths({1, 2, 3}).with_mode(Mode::B).with_inner(
          InnerConfig{}.with_limit(7));
  EXPECT_EQ(c.classes, 10u);
  EXPECT_EQ(c.dropout, 0.5);
  EXPECT_EQ(c.offset, -3);
  const nn::Json j = c.to_json();
  EXPECT_EQ(j["classes"], 10);
  EXPECT_EQ(j["widths"], nn::Json::array({1, 2, 3}));
  EXPECT_EQ(j["inner"]["limit"], 7);
  EXPECT_TRUE(nn::Json(NetConfig{1}.to_json())["inner"]["limit"].is_null());
  const NetConfig back = NetConfig::from_json(j);
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(back.mode, Mode::B);
  EXPECT_EQ(back.init.kind, nn::Initializer::Kind::XavierUniform);

  const std::string path = ::testing::TempDir() + "ember_nn_config.json";
  c.save(path);
  EXPECT_EQ(NetConfig::load(path).to_json(), j);
  std::remove(path.c_str());
  // Absent keys keep their defaults.
  const NetConfig partial = NetConfig::from_json(nn::Json::parse(R"({"classes": 3})"));
  EXPECT_EQ(partial.classes, 3u);
  EXPECT_EQ(partial.dropout, 0.2);
  EXPECT_EQ(partial.name, "net");
}

TEST(NnConfig, UnknownOrIllTypedKeysNameTheKey) {
  const auto msg = [](const char* text) {
    return error_of([&] { (void)NetConfig::from_json(nn::Json::parse(text)); });
  };
  EXPECT_NE(msg(R"({"classes": 3, "dropuot": 0.1})").find("'dropuot'"), std::string::npos);
  EXPECT_NE(msg(R"({"classes": "ten"})").find("'classes'"), std::string::npos);
  EXPECT_NE(msg(R"({"classes": -1})").find("'classes'"), std::string::npos);
  EXPECT_NE(msg(R"({"classes": 2.5})").find("'classes'"), std::string::npos);
  EXPECT_NE(msg(R"({"bias": 1})").find("'bias'"), std::string::npos);
  EXPECT_NE(msg(R"({"kernel": [1, 2, 3]})").find("'kernel'"), std::string::npos);
  EXPECT_NE(msg(R"({"widths": [1, "x"]})").find("'widths[1]'"), std::string::npos);
  EXPECT_NE(msg(R"({"inner": {"rate": 1, "extra": 2}})").find("'inner.extra'"), std::string::npos);
  EXPECT_NE(msg(R"({"offset": 3000000000})").find("'offset'"), std::string::npos);
  EXPECT_NE(msg(R"([1, 2])").find("NetConfig"), std::string::npos);
  const std::string bad = ::testing::TempDir() + "ember_nn_bad.json";
  std::ofstream(bad) << "{not json";
  EXPECT_NE(error_of([&] { (void)NetConfig::load(bad); }).find("not valid JSON"),
            std::string::npos);
  std::remove(bad.c_str());
  EXPECT_NE(error_of([&] { (void)NetConfig::load("/nonexistent/x.json"); }).find("cannot open"),
            std::string::npos);
}

// ---- Sequential and Linear ----

namespace {
// Modules are namespace-scope types: EMBER_MODULE declares member templates, which a
// local class cannot have.
struct Holder {
  nn::Sequential features;
  EMBER_MODULE(Holder, features)
};
}  // namespace

TEST(NnSequential, ForwardPathsAndCopies) {
  Device d = Device::cpu();
  nn::Linear a{nn::Param<Tensor<2>>(mat({1, 0, 0, -1}, 2, 2, d)),
               nn::Param<Tensor<1>>(vec({0, 1}, d))};
  nn::Linear b{nn::Param<Tensor<2>>(mat({2, 3}, 1, 2, d)), std::nullopt};
  struct Relu {
    Tensor<2> forward(const Tensor<2>& x) const { return activation::relu(x); }
  };
  nn::Sequential seq(a, Relu{}, b);
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(paths(seq), (std::vector<std::string>{"0.weight", "0.bias", "2.weight"}));
  // x = [3, 4]: a -> [3, -3], relu -> [3, 0], b -> 6.
  auto y = seq.forward(mat({3, 4}, 1, 2, d));
  EXPECT_EQ(y.to_data().to_vector<double>(), (std::vector<double>{6}));
  // A copy holds its own layers.
  nn::Sequential copy = seq;
  seq = std::move(seq).map(
      [](nn::TensorEntry& e) { e.tensor = ops::binary_scalar(ir::BinaryFn::Mul, e.tensor, 0.0); });
  EXPECT_EQ(copy.forward(mat({3, 4}, 1, 2, d)).to_data().to_vector<double>(),
            (std::vector<double>{6}));
  EXPECT_EQ(seq.forward(mat({3, 4}, 1, 2, d)).to_data().to_vector<double>(),
            (std::vector<double>{0}));
  // Rank changes through Flatten; a rank the layer lacks is an error naming the layer.
  nn::Sequential flat(nn::Flatten{}, b);
  auto x3 = Tensor<3>::from_data(TensorData::from<double>({1, 1, 2, 2}, Shape{2, 1, 2}), d);
  EXPECT_EQ(flat.forward<2>(x3).to_data().to_vector<double>(), (std::vector<double>{5, 10}));
  nn::Sequential bad(Relu{});
  EXPECT_NE(error_of([&] { (void)bad.forward(x3); }).find("layer 0"), std::string::npos);
  EXPECT_EQ(paths(Holder{seq}), (std::vector<std::string>{"features.0.weight", "features.0.bias",
                                                          "features.2.weight"}));
  EXPECT_NE(Holder{seq}.summary().find("features (Sequential)"), std::string::npos);
}

TEST(NnLinear, ForwardAnyRankAndBadInput) {
  Device d = Device::cpu();
  nn::Linear l{nn::Param<Tensor<2>>(mat({1, 2, 3, 4, 5, 6}, 2, 3, d)),
               nn::Param<Tensor<1>>(vec({10, 20}, d))};
  // [1, 0, -1] . rows = [-2, -2]; + bias.
  auto y2 = l.forward(mat({1, 0, -1, 0, 1, 0}, 2, 3, d));
  EXPECT_EQ(y2.to_data().to_vector<double>(), (std::vector<double>{8, 18, 12, 25}));
  auto x3 = Tensor<3>::from_data(TensorData::from<double>({1, 0, -1, 0, 1, 0}, Shape{2, 1, 3}), d);
  auto y3 = l.forward(x3);
  EXPECT_EQ(y3.shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(y3.to_data().to_vector<double>(), (std::vector<double>{8, 18, 12, 25}));
  EXPECT_NE(error_of([&] {
              (void)l.forward(mat({1, 2}, 1, 2, d));
            }).find("nn::Linear"),
            std::string::npos);
  EXPECT_EQ(l.d_input(), 3u);
  EXPECT_EQ(l.d_output(), 2u);
  EXPECT_THROW((void)(nn::LinearConfig{0, 3}.init(d)), Error);
}

namespace {
// A user's own modules whose forwards call their layers' forward directly.
struct PathBlock {
  nn::Linear fc;
  EMBER_MODULE(PathBlock, fc)
  Tensor<2> forward(const Tensor<2>& x) const { return fc.forward(x); }
};
struct PathNet {
  nn::Linear stem;
  std::vector<PathBlock> blocks;
  std::array<std::optional<PathBlock>, 1> extra;
  nn::Sequential head;
  EMBER_MODULE(PathNet, stem, blocks, extra, head)
  Tensor<2> forward(const Tensor<2>& x) const {
    Tensor<2> h = stem.forward(x);
    for (const auto& b : blocks) h = b.forward(h);
    if (extra[0]) h = extra[0]->forward(h);
    return head.forward(h);
  }
};
PathNet path_net(const Device& d, std::size_t block3_in, std::size_t extra_in,
                 std::size_t head2_in) {
  auto lin = [&](std::size_t i, std::size_t o) { return nn::LinearConfig{i, o}.init(d); };
  return PathNet{lin(8, 16),
                 {PathBlock{lin(16, 16)}, PathBlock{lin(16, 16)}, PathBlock{lin(16, 64)},
                  PathBlock{lin(block3_in, 16)}},
                 {PathBlock{lin(extra_in, 16)}},
                 nn::Sequential(lin(16, 4), nn::Relu{}, lin(head2_in, 2))};
}
}  // namespace

TEST(NnModule, ErrorsNameTheLayersPath) {
  const Device d = Device::cpu();
  const auto x = Tensor<2>::zeros({4, 8}, d);
  // blocks.3.fc expects 128 features and gets the 64 that blocks.2 gives.
  const PathNet bad_block = path_net(d, 128, 16, 4);
  const std::string linear_msg =
      "nn::Linear: input of shape [4, 64] must end in d_input = 128 (weight [16, 128])";
  EXPECT_EQ(error_of([&] { (void)nn::forward(bad_block, x); }), "blocks.3.fc: " + linear_msg);
  EXPECT_EQ(error_of([&] { (void)bad_block(x); }), "blocks.3.fc: " + linear_msg);
  // The error is an nn::LayerError with the path and the layer's own message apart.
  try {
    (void)bad_block(x);
    ADD_FAILURE() << "no error";
  } catch (const nn::LayerError& e) {
    EXPECT_EQ(e.path(), "blocks.3.fc");
    EXPECT_EQ(e.message(), linear_msg);
    EXPECT_EQ(e.origin(), &bad_block.blocks[3].fc);
  }
  // Called without nn::forward, the layer's message has no path; a nested call through
  // nn::forward names the path from there, the outer one the whole path.
  EXPECT_EQ(error_of([&] { (void)bad_block.forward(x); }), linear_msg);
  const auto h64 = Tensor<2>::zeros({4, 64}, d);
  EXPECT_EQ(error_of([&] { (void)bad_block.blocks[3](h64); }), "fc: " + linear_msg);
  // Inside a std::array of std::optional.
  const PathNet bad_extra = path_net(d, 64, 32, 4);
  EXPECT_EQ(error_of([&] {
              (void)bad_extra(x);
            }).rfind("extra.0.fc: nn::Linear: input of shape [4, 16] must end in d_input = 32", 0),
            0u);
  // Inside an nn::Sequential member, and a Sequential alone ("2", as PyTorch's index).
  const PathNet bad_head = path_net(d, 64, 16, 5);
  EXPECT_EQ(
      error_of([&] { (void)bad_head(x); }).rfind("head.2: nn::Linear: input of shape [4, 4]", 0),
      0u);
  EXPECT_EQ(error_of([&] {
              (void)bad_head.head.forward(Tensor<2>::zeros({4, 16}, d));
            }).rfind("2: nn::Linear: input of shape [4, 4]", 0),
            0u);
  // A layer called on a copy of itself is not in the tree: no path, the message intact.
  struct CopyCaller {
    const nn::Linear& fc;
    Tensor<2> forward(const Tensor<2>& v) const { return nn::Linear(fc).forward(v); }
  };
  EXPECT_EQ(error_of([&] {
              (void)nn::forward(CopyCaller{bad_block.blocks[3].fc}, h64.narrow(1, 0, 8));
            }).rfind("nn::Linear: input of shape [4, 8]", 0),
            0u);
  // A good input takes the same route and gives the forward's value.
  const PathNet good = path_net(d, 64, 16, 4);
  EXPECT_EQ(good(x).shape(), (Shape{4, 2}));
}
