// The Vulkan backend's own tests (the conformance harness runs every op case on vulkan:0 by
// itself). The generators' kernels are compiled with shaderc here on any machine; the
// rest needs a Vulkan device (Mesa's lavapipe in CI) and is skipped, saying why, without.
#include <gtest/gtest.h>
#include <shaderc/shaderc.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
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

// Whether a and b hold the same values bit for bit, any NaN equal to any NaN (NaN payloads
// are not specified across devices: NVIDIA's arithmetic gives the canonical NaN).
bool same_values(const TensorData& a, const TensorData& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const std::size_t n = a.shape().num_elements();
  std::vector<double> x(n), y(n);
  convert_elements(a.data(), a.dtype(), x.data(), DType::F64, n);
  convert_elements(b.data(), b.dtype(), y.data(), DType::F64, n);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0) return false;
  }
  return true;
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

// Fused groups (backend/fused_group.hpp) print one kernel each that shaderc compiles: mixed
// dtypes (16-bit floats rounded per instruction, f64, i32 with division, bool logic), casts
// to saturating targets, where, several outputs, an output written into an input's buffer.
// The key tells apart what the source tells apart.
namespace fused_codegen {
using backend::FusedGroup;
using backend::FusedInstr;
using K = FusedInstr::Kind;
FusedInstr un(ir::UnaryFn f, int a, DType out) {
  FusedInstr i;
  i.kind = K::Unary;
  i.unary = f;
  i.args = {a, -1, -1};
  i.out = out;
  return i;
}
FusedInstr bin(ir::BinaryFn f, int a, int b, DType out) {
  FusedInstr i;
  i.kind = K::Binary;
  i.binary = f;
  i.args = {a, b, -1};
  i.out = out;
  return i;
}
FusedInstr where(int c, int a, int b, DType out) {
  FusedInstr i;
  i.kind = K::Where;
  i.args = {c, a, b};
  i.out = out;
  return i;
}
FusedInstr cast(int a, DType to) {
  FusedInstr i;
  i.kind = K::Cast;
  i.args = {a, -1, -1};
  i.out = to;
  return i;
}
FusedGroup group(std::vector<DType> ins, std::vector<FusedInstr> code, std::vector<int> outs) {
  FusedGroup g;
  g.shape = Shape{4, 5};
  for (DType d : ins) g.inputs.push_back(std::make_shared<ir::TensorNode>(g.shape, d));
  g.code = std::move(code);
  g.outputs = std::move(outs);
  return g;
}
}  // namespace fused_codegen

TEST(VulkanCodegen, FusedKernelsCompile) {
  using namespace fused_codegen;
  using ir::BinaryFn;
  using ir::UnaryFn;
  const DType f16 = DType::F16, bf16 = DType::BF16, f32 = DType::F32, f64 = DType::F64,
              i32 = DType::I32, i64 = DType::I64, i8 = DType::I8, b = DType::Bool;
  // inputs 0.. ; instruction i is value inputs + i
  const std::vector<FusedGroup> groups = {
      group({f16, bf16, f32},
            {un(UnaryFn::Exp, 0, f16), cast(3, f32), bin(BinaryFn::Add, 4, 2, f32), cast(5, bf16),
             bin(BinaryFn::Mul, 6, 1, bf16), bin(BinaryFn::Gt, 7, 1, b), where(8, 7, 1, bf16),
             un(UnaryFn::Tanh, 2, f32)},
            {9, 5, 10}),
      group({i32, i32, f64},
            {bin(BinaryFn::Div, 0, 1, i32), bin(BinaryFn::Rem, 3, 1, i32),
             bin(BinaryFn::Shl, 4, 0, i32), cast(5, f64), bin(BinaryFn::Hypot, 6, 2, f64),
             un(UnaryFn::Sqrt, 7, f64), cast(8, i64), cast(8, i8), cast(2, i32),
             bin(BinaryFn::Max, 11, 0, i32)},
            {9, 10, 12}),
      group({b, b, f32},
            {bin(BinaryFn::And, 0, 1, b), un(UnaryFn::LogicalNot, 3, b), cast(4, f32),
             bin(BinaryFn::Mul, 5, 2, f32), un(UnaryFn::IsNan, 6, b)},
            {7, 4}),
  };
  shaderc_compiler_t compiler = shaderc_compiler_initialize();
  shaderc_compile_options_t opts = shaderc_compile_options_initialize();
  shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan,
                                         shaderc_env_version_vulkan_1_1);
  std::set<std::string> keys;
  for (const FusedGroup& g : groups) {
    for (bool in_place : {false, true}) {
      std::vector<std::int32_t> ip(g.outputs.size(), -1);
      // The last output into the input of its dtype, where there is one.
      if (in_place) {
        for (std::size_t k = 0; k < g.inputs.size(); ++k) {
          if (g.inputs[k]->dtype() == g.dtype_of(g.outputs.back()))
            ip.back() = static_cast<std::int32_t>(k);
        }
        if (ip.back() < 0) continue;
      }
      const vulkan::KernelSpec s = vulkan::fused_spec(g, ip);
      EXPECT_TRUE(keys.insert(s.key()).second) << "two kernels share the key " << s.key();
      EXPECT_EQ(s.buffers(), static_cast<int>(g.inputs.size() + g.outputs.size()) -
                                 (in_place ? 1 : 0) + (s.reports_errors() ? 1 : 0));
      const std::string src = s.source();
      shaderc_compilation_result_t r = shaderc_compile_into_spv(
          compiler, src.data(), src.size(), shaderc_compute_shader, s.key().c_str(), "main", opts);
      EXPECT_EQ(shaderc_result_get_compilation_status(r), shaderc_compilation_status_success)
          << s.key() << ": " << shaderc_result_get_error_message(r) << "\n"
          << src;
      shaderc_result_release(r);
    }
  }
  shaderc_compile_options_release(opts);
  shaderc_compiler_release(compiler);
  // Integer division reports its zero divisors under the unfused kernels' names.
  const auto s = vulkan::fused_spec(groups[1], {-1, -1, -1});
  EXPECT_TRUE(s.reports_errors());
  EXPECT_EQ(s.checked_ops(), (std::vector<std::string>{"binary.div.i32", "binary.rem.i32"}));
  EXPECT_FALSE(vulkan::fused_spec(groups[0], {-1, -1, -1}).reports_errors());
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

// The kernel shapes that the small cases of the harness do not reach: matmul's 128 x 128
// tile (batch 8 of 520 x 40 x 515: more than kMatmulLargeTiles tiles, ragged edges), and the
// linear element-wise walk over a contiguous run at an odd offset with a broadcast scalar
// and a last partial block (3001 elements).
TEST(VulkanOps, LargeTilesAndLinearWalksMatchCpu) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan(0), cpu = Device::cpu();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> av(8 * 520 * 40), bv(40 * 515), xv(3007);
  for (float& v : av) v = u(rng);
  for (float& v : bv) v = u(rng);
  for (float& v : xv) v = u(rng);
  const auto run = [&](const Device& d) {
    auto a = Tensor<3>::from_data(TensorData::from<float>(av, Shape{8, 520, 40}), d);
    auto b = Tensor<2>::from_data(TensorData::from<float>(bv, Shape{40, 515}), d);
    auto x = Tensor<1>::from_data(TensorData::from<float>(xv, Shape{3007}), d);
    auto s = x.narrow(0, 5, 3001);
    auto y = (s * 3.0f).exp() + s;
    return std::make_pair(a.matmul(b.reshape<3>(Shape{1, 40, 515})).to_data(), y.to_data());
  };
  const auto got = run(vk), want = run(cpu);
  const auto gm = got.first.to_vector<float>(), wm = want.first.to_vector<float>();
  ASSERT_EQ(gm.size(), wm.size());
  for (std::size_t i = 0; i < gm.size(); ++i)
    ASSERT_NEAR(gm[i], wm[i], 1e-4 * (1 + std::fabs(wm[i]))) << "matmul element " << i;
  const auto gy = got.second.to_vector<float>(), wy = want.second.to_vector<float>();
  ASSERT_EQ(gy.size(), wy.size());
  for (std::size_t i = 0; i < gy.size(); ++i)
    ASSERT_NEAR(gy[i], wy[i], 1e-5 * (1 + std::fabs(wy[i]))) << "element " << i;
}

// An op the backend has no kernel for (a sort of a line longer than kSortLine) runs on the
// Cpu through the fallback and comes back to the device.
TEST(VulkanOps, UnsupportedOpsFallBack) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan(0);
  const std::size_t n = vulkan::kSortLine + 3;
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7919) % n);
  auto x = DynTensor::from_data(TensorData::from<float>(v, Shape{n}), vk);
  auto y = ops::sort_with_indices(x, 0, false).first;
  EXPECT_EQ(y.device().name(), "vulkan:0");
  const auto got = y.to_data().to_vector<float>();
  ASSERT_EQ(got.size(), n);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<float>(i)) << i;
}

// nonzero on the device (counts of runs, offsets, coordinates) gives the Cpu's coordinates
// in row-major order: runs with and without non-zero elements, NaN and -0 (NaN counts, -0
// does not), a bool tensor, a strided view and an all-zero tensor; the max-pool gradient
// shares g among tied maxima (and over -inf windows with padding) as the Cpu does, bit for
// bit.
TEST(VulkanOps, NonzeroAndMaxPoolGradMatchCpu) {
  REQUIRE_VULKAN();
  namespace mo = module_ops;
  const auto run = [](const Device& d) {
    std::vector<float> v(3 * 700);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = (i % 13 == 0 || i > 1500) ? 1.5f : 0.0f;
    v[7] = NAN;
    v[8] = -0.0f;
    auto x = DynTensor::from_data(TensorData::from<float>(v, Shape{3, 700}), d);
    std::vector<TensorData> out;
    out.push_back(ops::nonzero(x).to_data());
    out.push_back(ops::nonzero(ops::cast(x, DType::Bool)).to_data());
    out.push_back(ops::nonzero(ops::transpose(x)).to_data());
    out.push_back(ops::nonzero(ops::full(Shape{5, 2}, 0, DType::F32, d)).to_data());
    // Ties: values in steps of 0.5 over a small range; a plane of -inf with padding.
    std::vector<float> p(2 * 2 * 7 * 9);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>((i * 7) % 5) * 0.5f;
    for (std::size_t i = 63; i < 126; ++i) p[i] = -INFINITY;
    const Device ad = d.autodiff();
    auto img =
        ops::require_grad(DynTensor::from_data(TensorData::from<float>(p, Shape{2, 2, 7, 9}), ad));
    auto y = mo::max_pool(img, {3, 3}, {{2, 2}, {1, 1}, {}});
    std::vector<float> gv(y.shape().num_elements());
    for (std::size_t i = 0; i < gv.size(); ++i) gv[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    auto g = DynTensor::from_data(TensorData::from<float>(gv, y.shape()), ad);
    auto grads =
        ops::backward(ops::reduce_all(ir::ReduceFn::Sum, ops::binary(ir::BinaryFn::Mul, y, g)));
    out.push_back(ops::grad(img, grads).value().to_data());
    return out;
  };
  const auto got = run(Device::vulkan(0)), want = run(Device::cpu());
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(same_values(got[i], want[i])) << "result " << i;
  }
}

// Indexing on the device: gather, select, scatter with repeated indices (the last write
// wins, as on the Cpu), scatter_add and select_assign with repeated indices (summed in
// index order; 16-bit floats in f32, rounded once) agree with the Cpu bit for bit; an
// index out of range is an error naming the op, found on the device.
TEST(VulkanOps, IndexingMatchesCpu) {
  REQUIRE_VULKAN();
  const auto run = [](const Device& d) {
    std::vector<float> xv(6 * 5);
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 0.1f * static_cast<float>(i * i % 17);
    auto x = DynTensor::from_data(TensorData::from<float>(xv, Shape{6, 5}), d);
    auto ix = [&](std::vector<std::int64_t> v, Shape s) {
      return DynTensor::from_data(TensorData::from<std::int64_t>(v, s), d);
    };
    auto gi = ix({4, 0, 2, 2, 1, 0, 3, 3}, Shape{2, 4});
    auto src = ops::binary_scalar(ir::BinaryFn::Add, ops::ones(Shape{2, 4}, DType::F32, d), 0.37);
    std::vector<TensorData> out;
    out.push_back(ops::gather(ops::transpose(x), 1, gi).to_data());
    out.push_back(ops::select(x, 0, ix({5, 1, 1, 3}, Shape{4})).to_data());
    out.push_back(ops::scatter(x, 0, ix({1, 1, 5, 0, 1, 2, 5, 0}, Shape{2, 4}), src).to_data());
    out.push_back(ops::scatter_add(x, 1, gi, src).to_data());
    out.push_back(ops::select_assign(x, 0, ix({2, 2, 0}, Shape{3}),
                                     ops::full(Shape{3, 5}, 0.3, DType::F32, d))
                      .to_data());
    auto xi = ops::cast(x, DType::I32);
    out.push_back(ops::scatter_add(xi, 1, gi, ops::cast(src, DType::I32)).to_data());
    // 16-bit floats add widened, rounded once: two adds of 0.4 ulp at 1 move it by an ulp.
    auto tiny = ops::full(Shape{2, 4}, 0.0004, DType::F32, d);
    for (DType h : {DType::F16, DType::BF16}) {
      auto xh = ops::cast(ops::ones(Shape{6, 5}, DType::F32, d), h);
      out.push_back(ops::scatter_add(xh, 1, gi, ops::cast(tiny, h)).to_data());
      out.push_back(
          ops::select_assign(xh, 0, ix({2, 2, 0}, Shape{3}), ops::full(Shape{3, 5}, 0.0004, h, d))
              .to_data());
    }
    return out;
  };
  const auto got = run(Device::vulkan(0)), want = run(Device::cpu());
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].bytes().size(), want[i].bytes().size()) << "result " << i;
    EXPECT_EQ(std::memcmp(got[i].bytes().data(), want[i].bytes().data(), got[i].bytes().size()), 0)
        << "result " << i;
  }
  const Device vk = Device::vulkan(0);
  auto x = ops::ones(Shape{2, 3}, DType::F32, vk);
  auto bad = DynTensor::from_data(TensorData::from<std::int64_t>({0, 7}, Shape{1, 2}), vk);
  const std::string m = error_of([&] { ops::gather(x, 1, bad).to_data(); });
  EXPECT_NE(m.find("gather.f32: index 7 is out of range"), std::string::npos) << m;
  EXPECT_NE(m.find("Vulkan device"), std::string::npos) << m;
  EXPECT_EQ((ops::reduce_all(ir::ReduceFn::Sum, x).to_data().to_vector<float>()),
            (std::vector<float>{6}));  // the device works on
}

// Sorting on the device is the Cpu's stable sort: NaN largest, ties (and -0, +0) in input
// order, ascending and descending, along an inner dim, values and indices bit for bit (NaN
// payloads aside: the f16 NaN here comes from each device's cast).
TEST(VulkanOps, SortMatchesCpu) {
  REQUIRE_VULKAN();
  const auto run = [](const Device& d, bool desc, DType dt) {
    std::vector<float> v(7 * 300);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 11) - 5;
    v[3] = NAN;
    v[10] = -0.0f;
    v[17] = 0.0f;
    v[600] = NAN;
    auto x = ops::cast(DynTensor::from_data(TensorData::from<float>(v, Shape{7, 300}), d), dt);
    auto [a, ia] = ops::sort_with_indices(x, 1, desc);
    auto [b, ib] = ops::sort_with_indices(x, 0, desc);
    return std::vector<TensorData>{a.to_data(), ia.to_data(), b.to_data(), ib.to_data()};
  };
  for (DType dt : {DType::F32, DType::F16, DType::I32}) {
    for (bool desc : {false, true}) {
      const auto got = run(Device::vulkan(0), desc, dt), want = run(Device::cpu(), desc, dt);
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(same_values(got[i], want[i]))
            << name(dt) << (desc ? " descending" : "") << ", result " << i;
      }
    }
  }
}

// Sliding windows on the device give the Cpu's values bit for bit (NaN payloads aside):
// unfold with stride, dilation and a padding value, fold (sums in kernel order), max
// pooling with a NaN and padding, average pooling, a 1-d and a 3-d window.
TEST(VulkanOps, WindowsMatchCpu) {
  REQUIRE_VULKAN();
  namespace mo = module_ops;
  const auto run = [](const Device& d) {
    std::vector<float> v(2 * 3 * 9 * 11);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>((i * 29) % 23) * 0.37f - 3.0f;
    v[40] = NAN;
    auto x = DynTensor::from_data(TensorData::from<float>(v, Shape{2, 3, 9, 11}), d);
    std::vector<TensorData> out;
    auto u = mo::unfold(x, {3, 2}, {{2, 1}, {1, 1}, {1, 2}}, -7.5);
    out.push_back(u.to_data());
    out.push_back(mo::fold(u, {9, 11}, {3, 2}, {{2, 1}, {1, 1}, {1, 2}}).to_data());
    out.push_back(mo::max_pool(x, {3, 3}, {{2, 2}, {1, 1}, {}}).to_data());
    out.push_back(mo::avg_pool(ops::cast(x, DType::F16), {2, 3}, {{1, 2}, {1, 1}, {}}).to_data());
    out.push_back(mo::max_pool(ops::cast(x, DType::I32), {3, 2}).to_data());
    auto x1 = ops::reshape(x, Shape{2, 3, 99});
    out.push_back(mo::unfold(x1, {4}, {{3}, {2}, {2}}).to_data());
    auto x3 = ops::reshape(x, Shape{1, 2, 3, 9, 11});
    out.push_back(mo::max_pool(x3, {2, 2, 2}).to_data());
    return out;
  };
  const auto got = run(Device::vulkan(0)), want = run(Device::cpu());
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(same_values(got[i], want[i])) << "result " << i;
  }
}

// Convolution's three passes (strides, padding, dilation, groups; 1-d and 3-d; the direct
// kernels and, with more channels, the product route) and batch
// norm with its gradient through vulkan(0).autodiff() against the Cpu's, on the device's
// own Conv, BatchNorm and BatchNormGrad ops (supports() says so).
TEST(VulkanOps, ConvAndBatchNormMatchCpu) {
  REQUIRE_VULKAN();
  namespace mo = module_ops;
  const auto data = [](std::size_t n, std::size_t salt) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = static_cast<float>((i * 37 + salt) % 29) * 0.07f - 1.0f;
    return v;
  };
  const auto run = [&](const Device& d) {
    const Device ad = d.autodiff();
    const auto t = [&](const Shape& s, std::size_t salt) {
      return ops::require_grad(
          DynTensor::from_data(TensorData::from<float>(data(s.num_elements(), salt), s), ad));
    };
    auto x = t(Shape{2, 4, 9, 8}, 1);
    auto w = t(Shape{6, 2, 3, 2}, 2);
    auto bias = t(Shape{6}, 3);
    auto y = mo::conv(x, w, bias, {{2, 1}, {1, 2}, {1, 2}}, 2);
    auto x1 = t(Shape{2, 3, 11}, 4);
    auto w1 = t(Shape{4, 3, 3}, 5);
    auto y1 = mo::conv(x1, w1, std::nullopt, {{2}, {1}, {1}}, 1);
    // Channels enough for the product route (Note [Convolution routes]): C K = 36, O = 32.
    auto x2 = t(Shape{2, 4, 6, 7}, 13);
    auto w2 = t(Shape{32, 4, 3, 3}, 14);
    auto y2 = mo::conv(x2, w2, std::nullopt, {{1, 1}, {1, 1}, {1, 1}}, 1);
    auto x3 = t(Shape{1, 2, 4, 5, 3}, 6);
    auto w3 = t(Shape{2, 2, 2, 3, 2}, 7);
    auto y3 = mo::conv(x3, w3, std::nullopt, {{1, 1, 1}, {1, 0, 1}, {1, 1, 1}}, 1);
    auto bw = t(Shape{6}, 8);
    auto bb = t(Shape{6}, 9);
    auto z = ops::batch_norm_training(y, bw, bb, 1e-5).y;
    auto z0 = ops::batch_norm_training(y3, std::nullopt, std::nullopt, 1e-5).y;
    const auto weighted = [&](const DynTensor& v, std::size_t salt) {
      auto g = DynTensor::from_data(
          TensorData::from<float>(data(v.shape().num_elements(), salt), v.shape()), ad);
      return ops::reduce_all(ir::ReduceFn::Sum, ops::binary(ir::BinaryFn::Mul, v, g));
    };
    auto loss = ops::binary(ir::BinaryFn::Add,
                            ops::binary(ir::BinaryFn::Add, weighted(z, 10), weighted(y1, 11)),
                            ops::binary(ir::BinaryFn::Add, weighted(z0, 12), weighted(y2, 15)));
    auto grads = ops::backward(loss);
    std::vector<TensorData> out = {z.to_data(), y1.to_data(), z0.to_data(), y2.to_data()};
    for (const DynTensor* p : {&x, &w, &bias, &x1, &w1, &x3, &w3, &bw, &bb, &x2, &w2})
      out.push_back(ops::grad(*p, grads).value().to_data());
    return out;
  };
  const Device vk = Device::vulkan(0);
  {
    const auto on_vk = [&](const Shape& s) {
      return DynTensor::from_data(TensorData::from<float>(data(s.num_elements(), 1), s), vk)
          .handle();
    };
    const auto x = on_vk(Shape{2, 4, 9, 8}), w = on_vk(Shape{6, 2, 3, 2}),
               g = on_vk(Shape{2, 6, 5, 10});
    const ir::Window win{{3, 2}, {2, 1}, {1, 2}, {1, 2}};
    EXPECT_TRUE(vk.backend().supports(ir::Conv{x, w, win, 2, ir::ConvPass::Forward, {}}));
    EXPECT_TRUE(vk.backend().supports(ir::Conv{g, w, win, 2, ir::ConvPass::InputGrad, {9, 8}}));
    EXPECT_TRUE(vk.backend().supports(ir::Conv{x, g, win, 2, ir::ConvPass::WeightGrad, {}}));
    EXPECT_TRUE(vk.backend().supports(ir::BatchNorm{x, {}, {}, 1e-5}));
  }
  const auto got = run(vk), want = run(Device::cpu());
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto g = got[i].to_vector<float>(), e = want[i].to_vector<float>();
    ASSERT_EQ(g.size(), e.size()) << "result " << i;
    for (std::size_t j = 0; j < g.size(); ++j)
      ASSERT_NEAR(g[j], e[j], 2e-4 * (1 + std::fabs(e[j]))) << "result " << i << " element " << j;
  }
}

// The cooperative-matrix matmul is chosen for f16 exactly where the device has the
// cooperative matrices (lavapipe has none; NVIDIA's driver does); every other matmul takes
// the shared-memory tiles. A product with edge tiles in every direction, a transposed
// operand and a batch, in f16, agrees with the Cpu's whichever kernel the device takes.
TEST(VulkanCodegen, CoopmatMatmulIsChosenForF16WhereTheDeviceHasIt) {
  EXPECT_TRUE(vulkan::takes_coopmat(DType::F16, true));
  EXPECT_FALSE(vulkan::takes_coopmat(DType::F16, false));
  EXPECT_FALSE(vulkan::takes_coopmat(DType::F32, true));
  EXPECT_FALSE(vulkan::takes_coopmat(DType::BF16, true));
}
TEST(VulkanOps, F16MatmulMatchesCpu) {
  REQUIRE_VULKAN();
  const auto run = [](const Device& d) {
    const auto t = [&](const Shape& s, std::size_t salt) {
      std::vector<float> v(s.num_elements());
      for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<float>((i * 13 + salt) % 17) * 0.125f - 1.0f;
      return ops::cast(DynTensor::from_data(TensorData::from<float>(v, s), d), DType::F16);
    };
    // General strides (a transposed operand, K and N not multiples of 8), then row-major
    // operands aligned to 8 elements (the 16-byte loads of the cooperative-matrix kernel).
    auto a = t(Shape{2, 130, 45}, 1);
    auto b = ops::transpose(t(Shape{2, 147, 45}, 2));
    auto y = ops::cast(ops::matmul(a, b), DType::F32).to_data().to_vector<float>();
    auto y8 = ops::cast(ops::matmul(t(Shape{2, 136, 72}, 3), t(Shape{2, 72, 200}, 4)), DType::F32)
                  .to_data()
                  .to_vector<float>();
    y.insert(y.end(), y8.begin(), y8.end());
    return y;
  };
  const auto got = run(Device::vulkan(0)), want = run(Device::cpu());
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-2 * (1 + std::fabs(want[i]))) << "element " << i;
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

// Random draws on a seeded vulkan:0 are the seeded Cpu's: uniform, default and Bernoulli
// draws bit for bit (the same hash and f64 arithmetic), normal draws to f32 rounding (log
// and cos in f32); seeding restarts the stream, and consecutive draws continue it.
TEST(VulkanRandom, SeededDrawsAreTheCpus) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan(0), cpu = Device::cpu();
  const auto draw = [](const Device& d, const Distribution& dist, DType dt) {
    d.seed(1234);
    DynTensor a = ops::random(Shape{3000}, dist, dt, d);
    DynTensor b = ops::random(Shape{17, 5}, dist, dt, d);  // continues the stream
    return std::make_pair(a.to_data(), b.to_data());
  };
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32}) {
    for (const Distribution& dist :
         {Distribution::default_(), Distribution::uniform(-2, 6), Distribution::bernoulli(0.3),
          Distribution::uniform(0, 1e-30)}) {
      const auto g = draw(vk, dist, dt), w = draw(cpu, dist, dt);
      EXPECT_TRUE(
          g.first.bytes().size() == w.first.bytes().size() &&
          std::memcmp(g.first.bytes().data(), w.first.bytes().data(), w.first.bytes().size()) == 0)
          << name(dt) << " kind " << static_cast<int>(dist.kind);
      EXPECT_TRUE(std::memcmp(g.second.bytes().data(), w.second.bytes().data(),
                              w.second.bytes().size()) == 0)
          << name(dt) << " kind " << static_cast<int>(dist.kind) << ": the second draw";
    }
  }
  const auto g = draw(vk, Distribution::normal(3, 0.5), DType::F32);
  const auto w = draw(cpu, Distribution::normal(3, 0.5), DType::F32);
  const auto gv = g.first.to_vector<float>(), wv = w.first.to_vector<float>();
  for (std::size_t i = 0; i < gv.size(); ++i) ASSERT_NEAR(gv[i], wv[i], 2e-5) << "element " << i;
  // Unseeded, two draws differ.
  vk.seed(7);
  const auto x = ops::random(Shape{64}, Distribution::default_(), DType::F32, vk).to_data();
  const auto y = ops::random(Shape{64}, Distribution::default_(), DType::F32, vk).to_data();
  EXPECT_NE(x.to_vector<float>(), y.to_vector<float>());
}

// ---- fused groups on the device (vulkan(0).fusion()) ----

std::vector<std::byte> bytes_of(const DynTensor& t) {
  const TensorData d = t.to_data();
  return {d.bytes().begin(), d.bytes().end()};
}

DynTensor random_input(const Shape& s, DType dt, std::uint32_t seed, const Device& dev) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<double> v(s.num_elements());
  for (double& x : v) x = kind_of(dt) == Kind::Int ? std::round(u(rng) * 3) : u(rng);
  return ops::cast(DynTensor::from_data(TensorData::from<double>(v, s), dev), dt);
}

// A program mixing dtypes — f16 and bf16 rounded after each instruction, casts, where over
// a comparison, a broadcast row, a transposed input, i32 arithmetic — gives on
// vulkan(0).fusion() the bytes it gives on vulkan(0), and the fuser fires.
TEST(VulkanFusion, GroupsMatchUnfusedBitForBit) {
  REQUIRE_VULKAN();
  using ir::BinaryFn;
  using ir::UnaryFn;
  const auto run = [](const Device& d) {
    const Shape s{37, 70};
    DynTensor h = random_input(s, DType::F16, 1, d);
    DynTensor bf = random_input(s, DType::BF16, 2, d);
    DynTensor row = random_input(Shape{1, 70}, DType::F32, 3, d);
    DynTensor t = ops::transpose(random_input(Shape{70, 37}, DType::F32, 4, d));
    DynTensor k = random_input(s, DType::I32, 5, d);
    DynTensor e = ops::unary(UnaryFn::Tanh, ops::binary_scalar(BinaryFn::Mul, h, 1.7));
    DynTensor f = ops::binary(BinaryFn::Add, ops::cast(e, DType::F32), row);
    DynTensor g = ops::binary(BinaryFn::Mul, ops::unary(UnaryFn::Sigmoid, f), t);
    DynTensor m = ops::binary(BinaryFn::Gt, g, ops::cast(bf, DType::F32));
    DynTensor w = ops::mask_where(m, ops::cast(g, DType::BF16), ops::unary(UnaryFn::Exp, bf));
    DynTensor ki = ops::binary(BinaryFn::Sub, ops::binary_scalar(BinaryFn::Mul, k, 7),
                               ops::cast(ops::unary(UnaryFn::Floor, g), DType::I32));
    return std::vector<std::vector<std::byte>>{bytes_of(w), bytes_of(ki), bytes_of(f)};
  };
  const Device vk = Device::vulkan(0), fused = vk.fusion();
  fusion::reset_report(fused);
  const auto want = run(vk), got = run(fused);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i] == want[i]) << "value " << i;
  const auto rep = fusion::report(fused);
  EXPECT_GE(rep.groups, 1u);
  EXPECT_GE(rep.ops_fused, 8u);
}

// A chain on a tensor the group owns alone runs as one kernel writing into that tensor's
// buffer: the device's peak memory stays at one tensor (op by op, every op here writes a
// fresh buffer, so two would be live at once).
TEST(VulkanFusion, OneKernelWritesInPlace) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan(0), fused = vk.fusion();
  const std::size_t n = std::size_t{24} << 20 >> 2;  // 24 MiB of f32, above earlier tests' peaks
  vk.sync();
  const std::size_t base = memory_stats(vk).in_use;
  std::vector<float> want;
  {
    auto x = Tensor<1>::full(Shape{n}, 0.5, fused);
    fused.sync();
    auto y = ((std::move(x) * 3.0f).exp() + 1.0f).tanh() - 0.25f;
    fused.sync();
    // (Measured before the read: a discrete GPU's read takes a staging buffer.)
    EXPECT_LT(memory_stats(vk).peak, base + n * 4 * 3 / 2) << "a second tensor's worth was live";
    want.assign({std::tanh(std::exp(1.5f) + 1.0f) - 0.25f});
    const auto v = y.to_data().to_vector<float>();
    ASSERT_EQ(v.size(), n);
    EXPECT_FLOAT_EQ(v[0], want[0]);
    EXPECT_FLOAT_EQ(v[n - 1], want[0]);
  }
}

// Integer division by zero inside a fused group raises the unfused op's error at the read,
// and the device keeps working.
TEST(VulkanFusion, DivisionByZeroRaisesTheUnfusedError) {
  REQUIRE_VULKAN();
  const auto run = [](const Device& d) {
    DynTensor a = ops::cast(
        DynTensor::from_data(TensorData::from<double>({4, 9, -3, 8}, Shape{4}), d), DType::I32);
    DynTensor b = ops::cast(
        DynTensor::from_data(TensorData::from<double>({2, 0, 1, 4}, Shape{4}), d), DType::I32);
    DynTensor q = ops::binary_scalar(
        ir::BinaryFn::Add,
        ops::binary(ir::BinaryFn::Div, ops::binary_scalar(ir::BinaryFn::Mul, a, 3), b), 1);
    return error_of([&] { q.to_data(); });
  };
  const Device vk = Device::vulkan(0);
  const std::string want = run(vk), got = run(vk.fusion());
  EXPECT_NE(want.find("binary.div.i32: integer division by zero"), std::string::npos) << want;
  EXPECT_EQ(got, want);
  auto x = Tensor<1>::ones(Shape{3}, vk.fusion());
  EXPECT_EQ((x * 2.0f + 1.0f).sum().into_scalar<float>(), 9.0f);
}

// A group whose values are all dropped before the flush has no outputs (the differential's
// seed 200000286: two draws nobody reads, beside a where): it runs, as unfused, and the
// draws still take their counters, so the next draw is the unfused one.
TEST(VulkanFusion, AGroupWithNoOutputsRunsAsUnfused) {
  REQUIRE_VULKAN();
  const auto run = [](const Device& d) {
    d.seed(11);
    auto x = Tensor<3>::full(Shape{1, 33, 3}, 0.5, d);
    {
      auto a = x.random_like(Distribution::bernoulli(0.4));
      auto b = x.random_like(Distribution::bernoulli(0.4));
    }
    d.sync();  // the flush: one group of the two draws, neither live
    auto c = x.random_like(Distribution::uniform(0, 1)) + 1.0f;
    return c.to_data().to_vector<float>();
  };
  const Device vk = Device::vulkan(0);
  const auto want = run(vk), got = run(vk.fusion());
  ASSERT_EQ(got.size(), 99u);
  EXPECT_EQ(got, want);
  EXPECT_GE(*std::min_element(got.begin(), got.end()), 1.0f);
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
namespace {

// A value rounded to f16 inside a fused kernel is the value a float16_t store gives: ties
// to even, the largest half, overflow to infinity, half subnormals and their ties, zeros
// of both signs, infinities (the kernel rounds in integer steps: NVIDIA's compiler folds a
// float -> float16_t -> float round trip).
TEST(VulkanFusion, F16RoundingIsTheStoresRounding) {
  REQUIRE_VULKAN();
  std::vector<float> v = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f,
                          65504.0f,        65519.0f,
                          65520.0f,        1e6f,
                          0x1p-24f,        0x1p-25f,
                          3 * 0x1p-25f,    0x1p-24f * 1.5f,
                          6.1e-5f,         0x1p-14f * (1 - 0x1p-11f),
                          1e-40f,          0.0f,
                          -0.0f,           INFINITY,
                          -INFINITY,       -2.7182818f,
                          3.14159265f,     1e-8f};
  for (int i = 0; i < 2000; ++i)
    v.push_back(std::ldexp(static_cast<float>(i % 97) + 0.37f * i, (i % 40) - 30));
  const auto run = [&](const Device& d) {
    auto x = DynTensor::from_data(TensorData::from<float>(v, Shape{v.size()}), d);
    auto y = ops::unary(ir::UnaryFn::Neg, ops::cast(ops::cast(x, DType::F16), DType::F32));
    return y.to_data();
  };
  const Device vk = Device::vulkan(0);
  const auto want = run(Device::cpu()), plain = run(vk), fused = run(vk.fusion());
  EXPECT_EQ(std::memcmp(plain.bytes().data(), want.bytes().data(), want.bytes().size()), 0);
  const auto f = fused.to_vector<float>(), w = want.to_vector<float>();
  for (std::size_t i = 0; i < w.size(); ++i) {
    ASSERT_EQ(std::memcmp(&f[i], &w[i], 4), 0)
        << "x = " << v[i] << ": fused " << f[i] << ", stored " << w[i];
  }
}

// f32 instructions in a kernel that also reads f64 (a cast from f64, then tanh) compute as
// the unfused f32 kernel does: every kernel declares the same float controls (Mesa
// compiles f32 math differently once the f64 mode is declared).
TEST(VulkanFusion, F32AfterAnF64CastMatchesUnfused) {
  REQUIRE_VULKAN();
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<double> v(4096);
  for (double& x : v) x = u(rng);
  const auto run = [&](const Device& d) {
    DynTensor x =
        ops::cast(DynTensor::from_data(TensorData::from<double>(v, Shape{4096}), d), DType::F32);
    return ops::unary(ir::UnaryFn::Tanh, ops::unary(ir::UnaryFn::Cos, x)).to_data();
  };
  const Device vk = Device::vulkan(0);
  const auto want = run(vk).to_vector<float>(), got = run(vk.fusion()).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], 4) != 0;
  EXPECT_EQ(differ, 0u);
}

}  // namespace
