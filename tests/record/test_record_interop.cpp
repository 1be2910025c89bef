// Interop with PyTorch beyond the small MLP: a small CNN (conv, batch norm with running
// statistics, max pool, linear) and a torch.nn.TransformerEncoderLayer, saved by
// tests/record/make_fixtures.py with torch.save (zip and legacy) and as safetensors, load
// into ember's mirroring structs and reproduce PyTorch's outputs; the safetensors ember
// writes for both load back into PyTorch, which reproduces ember's outputs (run where
// Debian's python3-torch is importable, skipped saying why elsewhere).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <ember/ember.hpp>

#include "record/test_support.hpp"

using namespace ember;
using namespace ember::record_test;

namespace {

const std::string kTorch = std::string(EMBER_RECORD_FIXTURES_DIR) + "/torch";

// torch: conv1 Conv2d(1, 4, 3, padding=1), bn1 BatchNorm2d(4), relu, max_pool2d(2),
// conv2 Conv2d(4, 6, 3, stride=2), flatten, fc Linear(24, 5).
struct Cnn {
  nn::Conv2d conv1;
  nn::BatchNorm bn1;
  nn::Conv2d conv2;
  nn::Linear fc;
  EMBER_MODULE(Cnn, conv1, bn1, conv2, fc)
  Tensor<2> forward(const Tensor<4>& x) const {
    auto h = activation::relu(bn1.forward(conv1.forward(x)));
    h = module_ops::max_pool2d(
        h, {.kernel = {2, 2}, .stride = {{2, 2}}, .padding = {0, 0}, .dilation = {1, 1}});
    return fc.forward(conv2.forward(h).flatten<2>(1, 3));
  }
};

Cnn make_cnn(const Device& d) {
  return {nn::Conv2dConfig{1, 4, {3, 3}}.with_padding(nn::Padding{1, 1}).init(d),
          nn::BatchNormConfig{4}.init(d),
          nn::Conv2dConfig{4, 6, {3, 3}}.with_stride({2, 2}).init(d),
          nn::LinearConfig{24, 5}.init(d)};
}

nn::TransformerEncoderLayer make_encoder(const Device& d) {
  return nn::TransformerEncoderLayerConfig{8, 2}.with_d_ff(16).with_dropout(0.0).init(d);
}

// The golden input and output of a fixture (<kind>_io.safetensors).
std::pair<DynTensor, TensorData> golden(const std::string& kind) {
  auto io = record::load_tensors(kTorch + "/" + kind + "_io.safetensors", Device::cpu());
  EXPECT_EQ(io.size(), 2u);
  return {io[0].tensor, io[1].tensor.to_data()};
}

TEST(RecordInterop, ACnnStateDictReproducesPyTorchsOutput) {
  const Device cpu = Device::cpu();
  const auto [x, y] = golden("cnn");
  for (const char* file : {"cnn.pt", "cnn_legacy.pt", "cnn.safetensors"}) {
    SCOPED_TRACE(file);
    Cnn net = record::load(make_cnn(cpu), kTorch + "/" + file, cpu);
    net.forward(Tensor<4>(x)).to_data().assert_approx_eq(y, 1e-5, 1e-5);
    EXPECT_EQ(net.bn1.num_batches_tracked.val().to_data().to_vector<std::int64_t>(),
              std::vector<std::int64_t>{12});
  }
}

TEST(RecordInterop, ATransformerEncoderLayerReproducesPyTorchsOutput) {
  const Device cpu = Device::cpu();
  const auto [x, y] = golden("encoder");
  for (const char* file : {"encoder.pt", "encoder_legacy.pt", "encoder.safetensors"}) {
    SCOPED_TRACE(file);
    auto layer = record::load(make_encoder(cpu), kTorch + "/" + file, cpu);
    layer.forward(Tensor<3>(x)).to_data().assert_approx_eq(y, 1e-5, 1e-5);
  }
}

TEST(RecordInterop, PyTorchReadsEmbersSafetensorsOfACnnAndAnEncoderLayer) {
  if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "PyTorch unavailable: /usr/bin/python3 cannot import torch (Debian "
                    "python3-torch), so PyTorch cannot check ember's safetensors";
  }
  const Device cpu = Device::cpu();
  TmpDir dir;
  // Freshly initialised models (ember's own weights), their outputs on the fixtures' inputs.
  Cnn cnn = make_cnn(cpu);
  const auto cx = golden("cnn").first;
  record::save(cnn, dir / "cnn.safetensors");
  record::save_tensors({{"x", cx}, {"y", cnn.forward(Tensor<4>(cx)).dyn()}},
                       dir / "cnn_io.safetensors");
  auto enc = make_encoder(cpu);
  const auto ex = golden("encoder").first;
  record::save(enc, dir / "encoder.safetensors");
  record::save_tensors({{"x", ex}, {"y", enc.forward(Tensor<3>(ex)).dyn()}},
                       dir / "encoder_io.safetensors");
  for (const std::string kind : {"cnn", "encoder"}) {
    const std::string cmd = "/usr/bin/python3 " EMBER_RECORD_SCRIPT " verify " + kind + " " +
                            dir / (kind + ".safetensors") + " " + dir / (kind + "_io.safetensors");
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

}  // namespace
