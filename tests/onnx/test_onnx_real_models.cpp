// Real models through the loader: ResNet-18 and MobileNetV2 from Debian's torchvision and a
// 2-layer LSTM, exported at test time by tests/onnx/export_real_models.py (Debian's torch;
// seeded random weights, nothing downloaded) into the build folder, compared with PyTorch's
// outputs and, where the bench venv has onnxruntime (scripts/bench-venv.sh), with its.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "ember/ember.hpp"
#include "ember/onnx/onnx.hpp"

namespace fs = std::filesystem;
namespace eo = ember::onnx;
using namespace ember;

namespace {

// Runs a command; its exit status (-1 when it did not run or died of a signal).
int run_command(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  if (rc == -1 || !WIFEXITED(rc)) return -1;
  return WEXITSTATUS(rc);
}

// The export's outcome, once per process: "" when the models are there, else why not.
const std::string& exported() {
  static const std::string why = [] {
    const fs::path dir(EMBER_ONNX_REAL_MODELS_DIR);
    bool all = true;
    for (const char* m : {"resnet18", "mobilenet_v2", "lstm"})
      all = all && fs::exists(dir / (std::string(m) + ".json"));
    if (all) return std::string();
    if (!fs::exists("/usr/bin/python3")) return std::string("/usr/bin/python3 is missing");
    const int rc =
        run_command("/usr/bin/python3 " EMBER_ONNX_EXPORT_SCRIPT " --out " + dir.string() + " > " +
                    (dir.parent_path() / "export_real_models.log").string() + " 2>&1");
    if (rc == 77) return std::string("Debian's python3-torch or python3-torchvision is missing");
    if (rc != 0) return "tests/onnx/export_real_models.py failed (exit " + std::to_string(rc) + ")";
    return std::string();
  }();
  return why;
}

Shape shape_of(const nlohmann::json& j) {
  std::vector<std::size_t> d;
  for (auto& e : j) d.push_back(e.get<std::size_t>());
  return Shape(d);
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  EMBER_CHECK(f.good(), "cannot read " + p.string());
  return nlohmann::json::parse(f);
}

TensorData output_of(const nlohmann::json& j) {
  return TensorData::from<float>(j["output"].get<std::vector<float>>(),
                                 shape_of(j["output_shape"]));
}

// The bench venv's Python when it has onnxruntime.
std::string onnxruntime_python() {
  const char* env = std::getenv("EMBER_ONNXRUNTIME_PYTHON");
  const std::string py = env ? env : EMBER_SOURCE_DIR "/.venv/bin/python";
  if (!fs::exists(py)) return "";
  return run_command(py + " -c 'import onnxruntime' > /dev/null 2>&1") == 0 ? py : "";
}

// Compares `got`, ember's output for model `name` in `dir` on the input of its NAME.json,
// with onnxruntime's (written into the real models' build folder); false (with a note)
// when no Python with onnxruntime is found.
bool matches_onnxruntime(const fs::path& dir, const std::string& name, const TensorData& got,
                         double scale) {
  const std::string py = onnxruntime_python();
  if (py.empty()) {
    std::cout << "[  NOTE    ] onnxruntime not compared: no bench venv with onnxruntime "
                 "(scripts/bench-venv.sh, or EMBER_ONNXRUNTIME_PYTHON)\n";
    return false;
  }
  const fs::path out(EMBER_ONNX_REAL_MODELS_DIR);
  EXPECT_EQ(run_command(py + " " EMBER_SOURCE_DIR "/tests/onnx/onnxruntime_outputs.py " +
                        dir.string() + " " + name + " " + out.string()),
            0);
  got.assert_approx_eq(output_of(read_json(out / (name + ".onnxruntime.json"))), 1e-4,
                       1e-4 * scale);
  return true;
}

double max_abs(const TensorData& t) {
  double scale = 0;
  for (double v : t.to_vector<double>()) scale = std::max(scale, std::abs(v));
  return scale;
}

}  // namespace

class OnnxRealModels : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxRealModels, MatchPyTorchAndOnnxruntime) {
  if (!exported().empty()) GTEST_SKIP() << exported();
  const fs::path dir(EMBER_ONNX_REAL_MODELS_DIR);
  const std::string name = GetParam();
  const auto meta = read_json(dir / (name + ".json"));
  const Device dev = Device::cpu();
  eo::Model m = eo::load((dir / (name + ".onnx")).string(), dev);
  auto x = ops::from_data(TensorData::from<float>(meta["input"].get<std::vector<float>>(),
                                                  shape_of(meta["input_shape"])),
                          dev);
  auto out = m.run({x});
  ASSERT_EQ(out.size(), 1u);
  const TensorData got = out[0].to_data();
  const TensorData torch = output_of(meta);
  // rtol 1e-4 with an absolute floor of 1e-4 of the output's scale (logits near 0).
  const double scale = max_abs(torch);
  got.assert_approx_eq(torch, 1e-4, 1e-4 * scale);
  matches_onnxruntime(dir, name, got, scale);
  // The second run packs the convolution weights into the Cpu's cache and the third reads
  // them from it (Note [Packed weight cache] in src/cpu/kernels/packed_cache.hpp): the same bits.
  const TensorData second = m.run({x})[0].to_data(), third = m.run({x})[0].to_data();
  EXPECT_TRUE(second == got) << "the second run differs from the first";
  EXPECT_TRUE(third == got) << "the third run differs from the first";
}

// The committed Transformer encoder (tests/onnx/models, exported from Debian's PyTorch by
// tests/onnx/export_models.py; test_onnx.cpp compares it with PyTorch) against onnxruntime.
TEST(OnnxCommittedModels, TransformerEncoderMatchesOnnxruntime) {
  const fs::path dir(EMBER_ONNX_MODELS_DIR);
  const auto meta = read_json(dir / "transformer_encoder.json");
  const Device dev = Device::cpu();
  eo::Model m = eo::load((dir / "transformer_encoder.onnx").string(), dev);
  auto x = ops::from_data(TensorData::from<float>(meta["input"].get<std::vector<float>>(),
                                                  shape_of(meta["input_shape"])),
                          dev);
  const TensorData got = m.run({x})[0].to_data();
  const TensorData torch = output_of(meta);
  got.assert_approx_eq(torch, 1e-4, 1e-5);
  if (!matches_onnxruntime(dir, "transformer_encoder", got, max_abs(torch)))
    GTEST_SKIP() << "no Python with onnxruntime (scripts/bench-venv.sh, or "
                    "EMBER_ONNXRUNTIME_PYTHON)";
}

INSTANTIATE_TEST_SUITE_P(Models, OnnxRealModels,
                         ::testing::Values("resnet18", "mobilenet_v2", "lstm"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
