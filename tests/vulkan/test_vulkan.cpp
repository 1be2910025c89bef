// The Vulkan backend's own tests (the conformance harness runs every op case on vulkan:0 by
// itself). The generators' kernels are compiled with shaderc here on any machine; the
// rest needs a Vulkan device (Mesa's lavapipe in CI) and is skipped, saying why, without.
#include <gtest/gtest.h>
#include <shaderc/shaderc.h>

#include <cmath>
#include <cstdlib>
#include <ember/ember.hpp>
#include <random>
#include <set>
#include <string>

#include "vulkan/codegen.hpp"

namespace {

using namespace ember;

bool has_vulkan() {
  for (const std::string& n : Device::available()) {
    if (n.rfind("vulkan:", 0) == 0) return true;
  }
  return false;
}

std::string why_no_vulkan() {
  for (const auto& u : Device::unavailable()) {
    if (u.name == "vulkan") return u.why;
  }
  return "(no reason given)";
}

#define REQUIRE_VULKAN()                                                             \
  do {                                                                               \
    if (!has_vulkan()) GTEST_SKIP() << "no Vulkan device here: " << why_no_vulkan(); \
  } while (0)

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Every kernel the generators print, for every dtype, is valid GLSL that shaderc compiles
// to SPIR-V for Vulkan 1.1 (no device needed).
TEST(VulkanCodegen, EveryKernelCompiles) {
  const auto specs = vulkan::all_specs({DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64,
                                        DType::I32, DType::I16, DType::I8, DType::U8, DType::Bool});
  ASSERT_GT(specs.size(), 500u);
  shaderc_compiler_t compiler = shaderc_compiler_initialize();
  shaderc_compile_options_t opts = shaderc_compile_options_initialize();
  shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan,
                                         shaderc_env_version_vulkan_1_1);
  std::set<std::string> keys;
  for (const auto& s : specs) {
    EXPECT_TRUE(keys.insert(s.key()).second) << "two kernels share the key " << s.key();
    const std::string src = s.source();
    shaderc_compilation_result_t r = shaderc_compile_into_spv(
        compiler, src.data(), src.size(), shaderc_compute_shader, s.key().c_str(), "main", opts);
    EXPECT_EQ(shaderc_result_get_compilation_status(r), shaderc_compilation_status_success)
        << s.key() << ": " << shaderc_result_get_error_message(r);
    shaderc_result_release(r);
  }
  shaderc_compile_options_release(opts);
  shaderc_compiler_release(compiler);
}

// f64 has only GLSL's double functions: exp is not printed for it (the op falls back),
// sqrt and the arithmetic are.
TEST(VulkanCodegen, F64PrintsOnlyGlslDoubleFunctions) {
  EXPECT_FALSE(vulkan::printable(ir::UnaryFn::Exp, DType::F64));
  EXPECT_FALSE(vulkan::printable(ir::BinaryFn::Pow, DType::F64));
  EXPECT_TRUE(vulkan::printable(ir::UnaryFn::Sqrt, DType::F64));
  EXPECT_TRUE(vulkan::printable(ir::BinaryFn::Hypot, DType::F64));
  EXPECT_TRUE(vulkan::printable(ir::UnaryFn::Exp, DType::F32));
  EXPECT_FALSE(vulkan::printable(ir::UnaryFn::Exp, DType::I32));  // not defined for ints
}

// Run by ctest with VK_ICD_FILENAMES naming no driver: Vulkan is then unavailable, and the
// error says why in the loader's words.
TEST(VulkanNoDevice, SaysWhy) {
  if (std::getenv("EMBER_TEST_EXPECT_NO_VULKAN") == nullptr) {
    GTEST_SKIP() << "run by ctest (vulkan_no_device) with no Vulkan driver";
  }
  EXPECT_FALSE(has_vulkan());
  const std::string m = error_of([] { Device::vulkan(0); });
  EXPECT_NE(m.find("Device::vulkan(0): no VULKAN device"), std::string::npos) << m;
  EXPECT_NE(m.find("VK_ERROR_INCOMPATIBLE_DRIVER"), std::string::npos) << m;
  // The Cpu runs on.
  auto x = Tensor<1>::ones(Shape{3}, Device::cpu());
  EXPECT_EQ(x.sum().into_scalar<float>(), 3.0f);
}

// A chain of ops on the device agrees with the Cpu: element-wise with broadcasting and
// views, a long-row reduction, softmax, layer norm and a batched matmul of a transposed view.
TEST(VulkanOps, ChainMatchesCpu) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan(0), cpu = Device::cpu();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> av(3 * 67 * 45), bv(45);
  for (float& v : av) v = u(rng);
  for (float& v : bv) v = u(rng);
  const auto run = [&](const Device& d) {
    auto a = Tensor<3>::from_data(TensorData::from<float>(av, Shape{3, 67, 45}), d);
    auto b = Tensor<1>::from_data(TensorData::from<float>(bv, Shape{45}), d);
    auto x = (a * b.reshape<3>(Shape{1, 1, 45})).tanh() + a.flip({1});
    auto m = x.matmul(x.swap_dims(1, 2));  // [3, 67, 67]
    auto s = activation::softmax(m, 2);
    auto r = s.sum_dim(2).sum_dim(1);  // [3, 1, 1]
    auto ln = module_ops::layer_norm(x, Shape{45});
    return std::make_pair(m.to_data(), std::make_pair(r.to_data(), ln.to_data()));
  };
  const auto got = run(vk), want = run(cpu);
  const auto close = [](const TensorData& g, const TensorData& w, double tol) {
    const auto gv = g.to_vector<float>(), wv = w.to_vector<float>();
    ASSERT_EQ(gv.size(), wv.size());
    for (std::size_t i = 0; i < gv.size(); ++i) {
      ASSERT_NEAR(gv[i], wv[i], tol * (1 + std::fabs(wv[i]))) << "element " << i;
    }
  };
  close(got.first, want.first, 1e-4);
  close(got.second.first, want.second.first, 1e-4);
  close(got.second.second, want.second.second, 1e-4);
}

// An op the backend has no kernel for (gather) runs on the Cpu through the fallback and
// comes back to the device.
TEST(VulkanOps, UnsupportedOpsFallBack) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan(0);
  auto x = Tensor<1>::from_data(TensorData::from<float>({10, 20, 30, 40}, Shape{4}), vk);
  auto i = Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({3, 0, 2}, Shape{3}), vk);
  auto y = x.select(0, i);
  EXPECT_EQ(y.device().name(), "vulkan:0");
  EXPECT_EQ(y.to_data().to_vector<float>(), (std::vector<float>{40, 10, 30}));
}

// A tensor beyond the device's largest allocation is an ember::Error naming the op, and the
// device keeps working; memory is counted and the cache empties.
TEST(VulkanMemory, TooLargeIsAnErrorAndTheDeviceWorksOn) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan(0);
  const std::size_t cap = memory_stats(vk).capacity;
  ASSERT_GT(cap, 0u);
  const std::size_t n = cap / 4 + 1;
  const std::string m = error_of([&] { Tensor<1>::zeros(Shape{n}, vk); });
  EXPECT_NE(m.find("zeros"), std::string::npos) << m;
  auto x = Tensor<1>::ones(Shape{1000}, vk);
  EXPECT_EQ(x.sum().into_scalar<float>(), 1000.0f);
  {
    auto big = Tensor<1>::zeros(Shape{1 << 20}, vk);
    big.to_data();
    EXPECT_GE(memory_stats(vk).in_use, std::size_t{4} << 20);
  }
  vk.sync();
  empty_cache(vk);
  EXPECT_LT(memory_stats(vk).reserved, std::size_t{4} << 20);
}

}  // namespace

namespace {

// Training on vulkan:0 behind Autodiff follows the Cpu step for step: a two-layer MLP with
// cross-entropy and Adam, from the same weights (ops without Vulkan kernels, such as the
// loss's gather, run through the fallback).
struct Mlp {
  nn::Linear fc1, fc2;
  EMBER_MODULE(Mlp, fc1, fc2)
  Tensor<2> forward(Tensor<2> x) const { return fc2.forward(activation::relu(fc1.forward(x))); }
};

TEST(VulkanAutodiff, TrainingStepsMatchTheCpu) {
  REQUIRE_VULKAN();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> xv(16 * 8);
  for (float& v : xv) v = u(rng);
  std::vector<std::int64_t> yv(16);
  for (std::size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<std::int64_t>(i % 3);
  const Device cpu = Device::cpu();
  const Mlp init{nn::LinearConfig{8, 32}.init(cpu), nn::LinearConfig{32, 3}.init(cpu)};
  const auto train = [&](const Device& dev) {
    const Device ad = dev.autodiff();
    Mlp net = init;
    net = net.to_device(ad);
    auto opt = optim::AdamConfig{}.init();
    auto x = Tensor<2>::from_data(TensorData::from<float>(xv, Shape{16, 8}), ad);
    auto y = Tensor<1, Int>::from_data(TensorData::from<std::int64_t>(yv, Shape{16}), ad);
    std::vector<float> losses;
    for (int step = 0; step < 5; ++step) {
      auto loss = nn::loss::cross_entropy(net.forward(x), y);
      losses.push_back(loss.into_scalar<float>());
      auto gp = optim::GradientsParams::from_grads(loss.backward(), net);
      net = opt.step(1e-2, std::move(net), std::move(gp));
    }
    return losses;
  };
  const auto got = train(Device::vulkan(0)), want = train(cpu);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(want.back(), want.front());  // it learns
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << "step " << i;
}

}  // namespace
