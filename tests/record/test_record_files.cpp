// Committed files: every .ember fixture of every format version (loaded forever), and the
// PyTorch files of tests/record/make_fixtures.py — torch.save zip, legacy and deflated,
// views of shared storages, a checkpoint, a malicious pickle, hand-written safetensors —
// loaded into the mirroring struct, which must reproduce PyTorch's outputs. Last, ember's
// own safetensors are read back by PyTorch through the same script.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <ember/ember.hpp>

#include "record/fixture_values.hpp"
#include "record/test_support.hpp"

using namespace ember;
using namespace ember::record_test;

namespace {

const std::string kFixtures = EMBER_RECORD_FIXTURES_DIR;
const std::string kTorch = kFixtures + "/torch";

TEST(RecordFixtures, EveryEmberFixtureOfEveryVersionLoads) {
  const Device cpu = Device::cpu();
  std::size_t files = 0;
  for (const auto& version : std::filesystem::directory_iterator(kFixtures)) {
    const std::string v = version.path().filename().string();
    if (v.empty() || v[0] != 'v') continue;
    for (const auto& f : std::filesystem::directory_iterator(version.path())) {
      if (f.path().extension() != ".ember") continue;
      ++files;
      SCOPED_TRACE(f.path().string());
      const record::RecordInfo info = record::inspect(f.path().string());
      EXPECT_EQ(info.format, record::Format::Ember);
      EXPECT_EQ("v" + std::to_string(info.format_version), v);
      std::vector<record::NamedTensor> tensors = record::load_tensors(f.path().string(), cpu);
      ASSERT_EQ(tensors.size(), info.tensors.size());
      for (std::size_t t = 0; t < tensors.size(); ++t) {
        const TensorData d = tensors[t].tensor.to_data();
        EXPECT_EQ(d.dtype(), info.tensors[t].dtype) << tensors[t].key;
        for (std::size_t k = 0; k < d.num_elements(); ++k) {
          ASSERT_EQ(d.get_f64(k), record_fixtures::value(d.dtype(), t, k))
              << tensors[t].key << " element " << k;
        }
      }
    }
  }
  EXPECT_GE(files, 2u) << "no fixtures found under " << kFixtures;
}

TEST(RecordFixtures, V1ModelLoadsIntoItsStructWithIdsAndConfig) {
  const Device cpu = Device::cpu();
  const std::string path = kFixtures + "/v1/model.ember";
  const record::RecordInfo info = record::inspect(path);
  EXPECT_EQ(info.config, (nn::Json{{"d_input", 3}, {"d_output", 2}, {"note", "fixture"}}));
  EXPECT_EQ(info.metadata.at("written_by"), "make_ember_fixtures");
  EXPECT_EQ(info.find("stats.num_batches_tracked")->shape, Shape{});
  auto net = record::load(record_fixtures::fixture_net(cpu, false), path, cpu);
  EXPECT_EQ(net.fc.weight.id(), info.find("fc.weight")->param_id);
  EXPECT_EQ(net.scale.id(), info.find("scale")->param_id);
  auto expect = record_fixtures::fixture_net(cpu, true);
  expect_same_tensors(expect, net);
}

TEST(RecordFixtures, AFileFromANewerFormatVersionSaysSo) {
  // v1's model with its version field set to 7 and its preamble checksum recomputed.
  std::vector<std::byte> b = read_file(kFixtures + "/v1/model.ember");
  ASSERT_GE(b.size(), 256u);
  const std::uint32_t v = 7;
  std::memcpy(b.data() + 8, &v, 4);
  expect_error_contains([&] { (void)record::inspect(std::span<const std::byte>(b)); },
                        "format version 7, written by a newer ember");
}

Net load_net(const std::string& file, record::LoadOptions o = {}) {
  return record::load(make_net(Device::cpu(), 0.0), kTorch + "/" + file, Device::cpu(), o);
}

TEST(RecordTorch, StateDictsReproducePyTorchsOutput) {
  const Device cpu = Device::cpu();
  std::vector<record::NamedTensor> golden =
      record::load_tensors(kTorch + "/golden.safetensors", cpu);
  ASSERT_EQ(golden.size(), 2u);
  const Tensor<2> x(golden[0].tensor);
  const TensorData y = golden[1].tensor.to_data();
  for (const char* file : {"net.pt", "net_legacy.pt", "net_deflated.pt", "net.safetensors"}) {
    SCOPED_TRACE(file);
    Net net = load_net(file);
    net.forward(x).to_data().assert_approx_eq(y, 1e-5, 1e-6);
    EXPECT_EQ(net.stats.num_batches_tracked.val().to_data().to_vector<std::int64_t>(),
              std::vector<std::int64_t>{7});
    EXPECT_EQ(net.stats.running_mean.val().to_data().to_vector<float>(),
              (std::vector<float>{0.5f, -0.25f, 0.125f, 1.0f}));
  }
  EXPECT_EQ(record::inspect(kTorch + "/net.pt").format, record::Format::PyTorch);
  EXPECT_EQ(record::inspect(kTorch + "/net_legacy.pt").format, record::Format::PyTorchLegacy);
  EXPECT_EQ(record::inspect(kTorch + "/net.safetensors").metadata.at("source"), "make_fixtures.py");
  EXPECT_EQ(record::inspect(kTorch + "/net.pt").find("stats.num_batches_tracked")->shape, Shape{});
}

TEST(RecordTorch, CheckpointLoadsThroughTopLevelKey) {
  expect_error_contains([&] { (void)load_net("checkpoint.pt"); },
                        "'epoch' holds an int, not a tensor");
  Net a = load_net("checkpoint.pt", {.top_level_key = "model_state_dict"});
  expect_same_tensors(a, load_net("net.pt"));
  expect_error_contains([&] { (void)load_net("checkpoint.pt", {.top_level_key = "model"}); },
                        "has no key 'model' (its keys: 'epoch', 'model_state_dict', 'note')");
}

TEST(RecordTorch, ViewsOfSharedStoragesAreCopiedOut) {
  // base[i][j] = 6 i + j, shape [4, 6]; each entry is a view of it (make_fixtures.py).
  auto base = [](std::size_t i, std::size_t j) { return double(6 * i + j); };
  for (const char* file : {"views.pt", "views_legacy.pt"}) {
    SCOPED_TRACE(file);
    std::vector<record::NamedTensor> t = record::load_tensors(kTorch + "/" + file, Device::cpu());
    std::map<std::string, TensorData> by;
    for (auto& n : t) by.emplace(n.key, n.tensor.to_data());
    auto expect = [&](const std::string& key, Shape s, DType d, auto f) {
      ASSERT_TRUE(by.count(key)) << key;
      const TensorData& got = by.at(key);
      EXPECT_EQ(got.shape(), s) << key;
      EXPECT_EQ(got.dtype(), d) << key;
      const std::size_t cols = s.rank() == 2 ? s[1] : 1;
      for (std::size_t k = 0; k < got.num_elements(); ++k) {
        EXPECT_EQ(got.get_f64(k), f(k / cols, k % cols)) << key << " element " << k;
      }
    };
    expect("row", Shape{6}, DType::F32, [&](std::size_t k, std::size_t) { return base(1, k); });
    expect("col", Shape{4}, DType::F32, [&](std::size_t k, std::size_t) { return base(k, 2); });
    expect("t", Shape{6, 4}, DType::F32, [&](std::size_t i, std::size_t j) { return base(j, i); });
    expect("block", Shape{2, 3}, DType::F32,
           [&](std::size_t i, std::size_t j) { return base(1 + i, 2 + j); });
    expect("step", Shape{2, 2}, DType::F32,
           [&](std::size_t i, std::size_t j) { return base(2 * i, 3 * j); });
    expect("half", Shape{4}, DType::F16, [&](std::size_t k, std::size_t) { return base(k, 1); });
    expect("bf16", Shape{4, 6}, DType::BF16, base);
    expect("f64", Shape{2, 6}, DType::F64,
           [&](std::size_t i, std::size_t j) { return base(2 + i, j); });
    expect("i64", Shape{5}, DType::I64, [](std::size_t k, std::size_t) { return double(k); });
    expect("i32", Shape{3}, DType::I32, [](std::size_t k, std::size_t) { return double(k); });
    expect("u8", Shape{4}, DType::U8, [](std::size_t k, std::size_t) { return double(k); });
    expect("flags", Shape{3}, DType::Bool,
           [](std::size_t k, std::size_t) { return k == 1 ? 0.0 : 1.0; });
    expect("nested.inner", Shape{3}, DType::F32,
           [&](std::size_t k, std::size_t) { return base(3, 1 + k); });
  }
}

TEST(RecordTorch, APickleAskingForACodeGlobalIsRefusedByName) {
  expect_error_contains([&] { (void)record::inspect(kTorch + "/malicious.pt"); },
                        "the global 'os.system' is not allowed");
}

TEST(RecordTorch, PyTorchReadsEmbersSafetensorsAndReproducesEmbersOutput) {
  if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "PyTorch unavailable: /usr/bin/python3 cannot import torch (Debian "
                    "python3-torch), so PyTorch cannot check ember's safetensors";
  }
  const Device cpu = Device::cpu();
  TmpDir dir;
  Net net = make_net(cpu, 0.7);
  std::vector<double> xs(15);
  for (std::size_t k = 0; k < xs.size(); ++k) xs[k] = std::sin(double(k)) * 2.0;
  Tensor<2> x = Tensor<2>::from_data(TensorData::from<double>(xs, {5, 3}).convert(DType::F32), cpu);
  record::save(net, dir / "model.safetensors");
  record::save_tensors({{"x", x.dyn()}, {"y", net.forward(x).dyn()}}, dir / "io.safetensors");
  const std::string cmd = "/usr/bin/python3 " EMBER_RECORD_SCRIPT " verify " +
                          dir / "model.safetensors" + " " + dir / "io.safetensors";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
