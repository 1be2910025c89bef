// The Cpu backend's contracts that the conformance harness cannot see from values alone:
// in-place reuse of sole-owned buffers, clone invariance, pooled memory accounting, views
// without copies, and ISA dispatch giving the same numbers on every instruction set.
#include <gtest/gtest.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <ember/backend/registry.hpp>
#include <ember/ember.hpp>
#include <ember/ir/ops.hpp>

#include "cpu/allocator.hpp"
#include "cpu/gemm/gemm.hpp"
#include "cpu/gemm/gemm_bf16.hpp"
#include "cpu/isa.hpp"
#include "cpu/kernels/conv.hpp"
#include "cpu/kernels/elementwise_table.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/backend/fused_group.hpp"
#include "ember/cpu/cpu.hpp"
#include "support/isolated.hpp"

using namespace ember;

namespace {

// tests/CMakeLists.txt runs this binary once per ISA with EMBER_CPU_ISA set: on a CPU that
// lacks the ISA, every test is skipped, saying so.
class IsaEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* env = std::getenv("EMBER_CPU_ISA");
    if (env == nullptr) return;
    for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
      if (std::string(env) == cpu::isa_name(isa) && !cpu::isa_supported(isa)) {
        GTEST_SKIP() << "EMBER_CPU_ISA=" << env << ": this CPU cannot run these kernels";
      }
    }
    for (cpu::DotIsa isa : {cpu::DotIsa::Avx512Bf16, cpu::DotIsa::Amx}) {
      if (std::string(env) == cpu::dot_isa_name(isa) && !cpu::dot_isa_supported(isa)) {
        GTEST_SKIP() << "EMBER_CPU_ISA=" << env << ": this CPU cannot run these kernels";
      }
    }
  }
};
[[maybe_unused]] const auto* const kIsaEnvironment =
    ::testing::AddGlobalTestEnvironment(new IsaEnvironment);

Tensor<1> iota(std::size_t n, const Device& dev) {
  return Tensor<1, Int>::arange(0, static_cast<std::int64_t>(n), dev).float_();
}
}  // namespace

// Note [Batch folded into rows]: a batched product whose B is one matrix runs as one GEMM
// over every row (rows that continue at one stride) or as m GEMMs along the one batch dim
// (transposed [seq, batch, k] views); each case against the f64 sum, and against the same
// product with B given per batch index (a path that folds nothing).
TEST(CpuMatmul, BroadcastBFoldsTheBatchIntoRows) {
  const Device dev = Device::cpu();
  struct Case {
    const char* what;
    std::vector<std::size_t> a_dims;  // before the permutation
    std::vector<std::int64_t> perm;
    std::size_t n;
  };
  const std::vector<Case> cases{
      {"contiguous [3, 4, 5, 6] x [6, 7]", {3, 4, 5, 6}, {0, 1, 2, 3}, 7},
      {"rows of one [5, 1, 6] x [6, 9]", {5, 1, 6}, {0, 1, 2}, 9},
      {"transposed [2, 7, 8] as [7, 2, 8] x [8, 10]", {2, 7, 8}, {1, 0, 2}, 10},
      {"transposed [7, 2, 8] as [2, 7, 8] x [8, 3] (batch below m)", {7, 2, 8}, {1, 0, 2}, 3},
      {"two batch dims, transposed [2, 3, 4, 5] as [3, 2, 4, 5] x [5, 6]",
       {2, 3, 4, 5},
       {1, 0, 2, 3},
       6},
  };
  for (const Case& c : cases) {
    const Shape as(c.a_dims);
    const std::size_t k = c.a_dims.back();
    std::vector<float> av(as.num_elements()), bv(k * c.n);
    for (std::size_t i = 0; i < av.size(); ++i) av[i] = float((i * 7) % 13) / 8.0f - 0.75f;
    for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = float((i * 5) % 11) / 4.0f - 1.25f;
    const DynTensor a = ops::permute(ops::from_data(TensorData::from<float>(av, as), dev), c.perm);
    const DynTensor b = ops::from_data(TensorData::from<float>(bv, Shape{k, c.n}), dev);
    const TensorData got = ops::matmul(a, b).to_data();
    // The f64 reference over A's logical (permuted) rows.
    const TensorData ad = a.to_data();
    const std::vector<float> al = ad.to_vector<float>();
    const std::size_t rows = al.size() / k;
    std::vector<double> want(rows * c.n);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < c.n; ++j) {
        double sum = 0;
        for (std::size_t p = 0; p < k; ++p) sum += double(al[r * k + p]) * double(bv[p * c.n + j]);
        want[r * c.n + j] = sum;
      }
    std::vector<std::size_t> od = a.shape().dims();
    od.back() = c.n;
    got.assert_approx_eq(TensorData::from<double>(want, Shape(od)).convert(DType::F32), 1e-5, 1e-5);
    // B per batch index: the same bits (each element is the same dot product either way).
    std::vector<std::size_t> bd(a.rank() - 2, 1);
    bd.push_back(k);
    bd.push_back(c.n);
    std::vector<std::size_t> be = a.shape().dims();
    be[be.size() - 2] = k;
    be.back() = c.n;
    const DynTensor b_full = ops::binary_scalar(
        ir::BinaryFn::Mul, ops::expand(ops::reshape(b, Shape(bd)), Shape(be)), 1.0);
    EXPECT_TRUE(ops::matmul(a, b_full).to_data() == got) << c.what;
  }
}

// Note [Fused matmul epilogues]: the Cpu's fused executor takes a group that starts with a
// Matmul (it does not fall back to running it op by op) and gives the plain ops' bits:
// gelu(x·W + b) with W transposed, in f32 and bf16, rows and columns past the GEMM's blocks.
TEST(CpuFused, MatmulGroupsRunWithTheirEpilogue) {
  using backend::FusedInstr;
  const std::size_t m = 151, k = 300, n = 290;
  const auto data = [](std::size_t count, std::size_t salt) {
    std::vector<float> v(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = (float((i * 7 + salt) % 23) - 11.0f) / 19.0f;
    return v;
  };
  const std::vector<float> xv = data(m * k, 1), wv = data(n * k, 2), bv = data(n, 3);
  for (const DType dt : {DType::F32, DType::BF16}) {
    cpu::CpuContext ctx;
    const auto make = [&](const std::vector<float>& v, const Shape& sh) {
      auto t = ctx.empty(sh, dt);
      convert_elements(v.data(), DType::F32, t->data(), dt, v.size());
      return t;
    };
    backend::FusedGroup g;
    g.shape = Shape{m, n};
    ir::Permute wt{make(wv, Shape{n, k}), {1, 0}};
    g.inputs = {make(xv, Shape{m, k}), cpu::run(ctx, wt), make(bv, Shape{1, n})};
    FusedInstr mm;
    mm.kind = FusedInstr::Kind::Matmul;
    mm.args = {0, 1, -1};
    mm.out = dt;
    FusedInstr add;
    add.kind = FusedInstr::Kind::Binary;
    add.binary = ir::BinaryFn::Add;
    add.args = {3, 2, -1};
    add.out = dt;
    FusedInstr gelu;
    gelu.unary = ir::UnaryFn::Gelu;
    gelu.args = {4, -1, -1};
    gelu.out = dt;
    g.code = {mm, add, gelu};
    g.outputs = {5};
    g.signature = std::string("test matmul bias gelu ") + name(dt);
    g.key = std::hash<std::string>{}(g.signature);
    const auto outs = cpu::run_fused(ctx, g);
    // A bf16 product the bf16 GEMM runs (AMX) is not the widened one: such a group runs
    // apart, its product by the Matmul kernel (GemmBf16Matmul.FusedEpilogueReadsThePlainProduct).
    if (dt == DType::BF16 && cpu::gemm_bf16_native()) {
      EXPECT_FALSE(outs.has_value());
      continue;
    }
    ASSERT_TRUE(outs.has_value()) << name(dt);
    ASSERT_EQ(outs->size(), 1u);
    const TensorData got = Device::cpu().backend().to_data((*outs)[0]);
    const Device c = Device::cpu();
    const auto in = [&](const std::vector<float>& v, const Shape& sh) {
      return ops::cast(DynTensor::from_data(TensorData::from<float>(v, sh), c), dt);
    };
    const DynTensor want = ops::unary(
        ir::UnaryFn::Gelu,
        ops::binary(ir::BinaryFn::Add,
                    ops::matmul(in(xv, Shape{m, k}), ops::transpose(in(wv, Shape{n, k}))),
                    in(bv, Shape{1, n})));
    const TensorData w = want.to_data();
    ASSERT_EQ(got.bytes().size(), w.bytes().size());
    EXPECT_EQ(std::memcmp(got.bytes().data(), w.bytes().data(), w.bytes().size()), 0) << name(dt);
  }
}

// Note [Fused conv epilogues]: the Cpu's fused executor takes a group that starts with a
// Conv and gives the plain ops' bits: relu(conv(x, w) + bias + residual), 3x3 padded by one
// (both phase routes) and 1x1 (the image its own column matrix), in f32 and f16. A residual whose
// spatial dims do not collapse into one (a transposed view) leaves the group to
// Backend::run_fused's default (the conv, then the epilogue), with the same bits.
TEST(CpuFused, ConvGroupsRunWithTheirEpilogue) {
  using backend::FusedInstr;
  const std::size_t n = 2, c = 8, o = 16, h = 10, w = 12;
  const auto data = [](std::size_t count, std::size_t salt) {
    std::vector<float> v(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = (float((i * 7 + salt) % 23) - 11.0f) / 19.0f;
    return v;
  };
  const std::vector<float> xv = data(n * c * h * w, 1), wv = data(o * c * 9, 2), bv = data(o, 3),
                           rv = data(n * o * h * w, 4);
  // Both phase routes: tiles of channels by flat positions, and Note [Output rows as tiles].
  for (const std::size_t k : {std::size_t{3}, std::size_t{1}})
    for (const int rows : {0, 1})
      for (const DType dt : {DType::F32, DType::F16}) {
        if (k == 1 && rows == 1) continue;  // no phase route
        const std::vector<float> wk(wv.begin(), wv.begin() + std::ptrdiff_t(o * c * k * k));
        for (const bool transposed : {false, true}) {
          cpu::detail::conv_force_rows(rows);
          cpu::CpuContext ctx;
          const auto make = [&](const std::vector<float>& v, const Shape& sh) {
            auto t = ctx.empty(sh, dt);
            convert_elements(v.data(), DType::F32, t->data(), dt, v.size());
            return t;
          };
          ir::Window win{{k, k}, {1, 1}, {k / 2, k / 2}, {1, 1}};
          backend::FusedGroup g;
          g.shape = Shape{n, o, h, w};
          ir::Handle res = make(rv, Shape{n, o, h, w});
          if (transposed) {  // the same values, read through a transpose of the spatial dims
            std::vector<float> t(rv.size());
            for (std::size_t p = 0; p < n * o; ++p)
              for (std::size_t y = 0; y < h; ++y)
                for (std::size_t x = 0; x < w; ++x)
                  t[(p * w + x) * h + y] = rv[(p * h + y) * w + x];
            ir::Permute pt{make(t, Shape{n, o, w, h}), {0, 1, 3, 2}};
            res = cpu::run(ctx, pt);
          }
          g.inputs = {make(xv, Shape{n, c, h, w}), make(wk, Shape{o, c, k, k}),
                      make(bv, Shape{1, o, 1, 1}), res};
          FusedInstr cv;
          cv.kind = FusedInstr::Kind::Conv;
          g.conv_window = win;
          cv.args = {0, 1, -1};
          cv.out = dt;
          FusedInstr add;
          add.kind = FusedInstr::Kind::Binary;
          add.binary = ir::BinaryFn::Add;
          add.args = {4, 2, -1};
          add.out = dt;
          FusedInstr add2 = add;
          add2.args = {5, 3, -1};
          FusedInstr relu;
          relu.unary = ir::UnaryFn::Relu;
          relu.args = {6, -1, -1};
          relu.out = dt;
          g.code = {cv, add, add2, relu};
          g.outputs = {7};
          g.signature = std::string("test conv bias residual relu ") + name(dt);
          g.key = std::hash<std::string>{}(g.signature);
          const std::string what = std::string(name(dt)) + (transposed ? " transposed" : "") +
                                   (rows ? " by output rows" : "") + (k == 1 ? " 1x1" : "");
          const auto outs = cpu::run_fused(ctx, g);
          ASSERT_EQ(outs.has_value(), !transposed) << what;
          const std::vector<ir::Handle> got_h =
              outs ? *outs : Device::cpu().backend().run_fused(std::move(g));
          ASSERT_EQ(got_h.size(), 1u);
          const TensorData got = Device::cpu().backend().to_data(got_h[0]);
          const Device cd = Device::cpu();
          const auto in = [&](const std::vector<float>& v, const Shape& sh) {
            return ops::cast(DynTensor::from_data(TensorData::from<float>(v, sh), cd), dt);
          };
          const DynTensor want = ops::unary(
              ir::UnaryFn::Relu,
              ops::binary(
                  ir::BinaryFn::Add,
                  ops::binary(ir::BinaryFn::Add,
                              module_ops::conv(in(xv, Shape{n, c, h, w}), in(wk, Shape{o, c, k, k}),
                                               std::nullopt, {{1, 1}, {k / 2, k / 2}, {}}),
                              in(bv, Shape{1, o, 1, 1})),
                  in(rv, Shape{n, o, h, w})));
          const TensorData wd = want.to_data();
          ASSERT_EQ(got.bytes().size(), wd.bytes().size()) << what;
          EXPECT_EQ(std::memcmp(got.bytes().data(), wd.bytes().data(), wd.bytes().size()), 0)
              << what;
        }
      }
  cpu::detail::conv_force_rows(-1);
}

TEST(CpuBackend, RvalueReusesTheSoleOwnersBuffer) {
  Device dev = Device::cpu();
  const std::size_t n = 1 << 20;
  auto x = iota(n, dev);
  const std::size_t before = memory_stats(dev).in_use;
  auto y = std::move(x).exp();  // sole owner: computed in place
  EXPECT_EQ(memory_stats(dev).in_use, before);
  auto z = y.exp();  // y is still referenced: a new buffer
  EXPECT_GT(memory_stats(dev).in_use, before);
  EXPECT_FLOAT_EQ(y.slice({{1, 2}}).into_scalar<float>(), std::exp(1.0f));
}

// Note [In-place reuse] takes only a view of the whole buffer: a contiguous prefix of a
// buffer whose parent was dropped is written fresh, so the result does not keep the parent's
// memory alive.
TEST(CpuBackend, APrefixViewIsNotReusedAndItsParentIsFreed) {
  Device dev = Device::cpu();
  const std::size_t before = memory_stats(dev).in_use;
  auto prefix = iota(std::size_t{1} << 20, dev).slice({{0, 16}});  // the parent is dropped
  auto y = std::move(prefix).exp();
  EXPECT_LT(memory_stats(dev).in_use, before + (std::size_t{1} << 20));  // 4 MiB freed
  const auto v = y.to_data().to_vector<float>();
  ASSERT_EQ(v.size(), 16u);
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_FLOAT_EQ(v[i], std::exp(float(i)));
}

TEST(CpuBackend, CloneInvariance) {
  Device dev = Device::cpu();
  auto a = iota(1000, dev);
  auto keep = a;  // a second reference: the op must not write into a's buffer
  auto b = std::move(a).mul_scalar(2.0).add_scalar(1.0).sqrt();
  auto c = keep.mul_scalar(2.0).add_scalar(1.0).sqrt();
  EXPECT_TRUE(b.to_data() == c.to_data());
  EXPECT_TRUE(keep.to_data() == iota(1000, dev).to_data());
}

TEST(CpuBackend, ViewsShareMemoryAndWritesDoNotLeakThroughThem) {
  Device dev = Device::cpu();
  auto a = iota(12, dev).reshape<2>(Shape{3, 4});
  const std::size_t before = memory_stats(dev).in_use;
  auto t = a.transpose();
  auto s = a.slice({{1, 3},
                    {
                        0,
                        4,
                    }});
  auto f = a.flip({0});
  auto e = a.slice({{0, 1}}).expand<2>(Shape{5, 4});
  EXPECT_EQ(memory_stats(dev).in_use, before);  // no copies
  EXPECT_EQ(t.to_data().to_vector<float>(),
            (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(f.to_data().to_vector<float>(),
            (std::vector<float>{8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3}));
  EXPECT_EQ(e.shape(), (Shape{5, 4}));
  // slice_assign on a tensor that has views must leave the views' values alone.
  auto b = a.slice_fill({{0, 1}}, -1.0);
  EXPECT_EQ(s.to_data().to_vector<float>(), (std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(a.to_data().to_vector<float>()[0], 0.0f);
  EXPECT_EQ(b.to_data().to_vector<float>()[0], -1.0f);
}

TEST(CpuBackend, MemoryStatsAndEmptyCache) {
  Device dev = Device::cpu();
  empty_cache(dev);
  const auto s0 = memory_stats(dev);
  {
    auto big = Tensor<1>::zeros(Shape{1 << 22}, dev);
    const auto s1 = memory_stats(dev);
    EXPECT_GE(s1.in_use, s0.in_use + (std::size_t{4} << 22));
    EXPECT_GE(s1.peak, s1.in_use);
  }
  const auto s2 = memory_stats(dev);
  EXPECT_EQ(s2.in_use, s0.in_use);
  EXPECT_GT(s2.reserved, s0.reserved);  // cached for reuse
  empty_cache(dev);
  EXPECT_EQ(memory_stats(dev).reserved, s0.reserved);
}

// cpu::cache_sizes (CPUID) against what Linux lists in sysfs for cpu0, the kernel's own
// reading of the CPU, where it lists a cache of that level.
TEST(CpuIsa, CacheSizesAreTheOnesLinuxLists) {
  const auto& c = ember::cpu::cache_sizes();
#if defined(__x86_64__) && defined(__linux__)
  std::size_t listed[4] = {0, 0, 0, 0};
  bool any = false;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level(dir + "level"), type(dir + "type"), size(dir + "size");
    int lv = 0;
    std::string ty, sz;
    if (!(level >> lv) || !(type >> ty) || !(size >> sz) || lv < 1 || lv > 3) continue;
    if (ty == "Instruction") continue;
    const char unit = sz.back();
    std::size_t bytes = std::stoull(sz);
    if (unit == 'K') bytes <<= 10;
    if (unit == 'M') bytes <<= 20;
    listed[lv] = bytes;
    any = true;
  }
  if (!any) GTEST_SKIP() << "sysfs lists no caches for cpu0 here";
  if (listed[1]) {
    EXPECT_EQ(c.l1d, listed[1]);
  }
  if (listed[2]) {
    EXPECT_EQ(c.l2, listed[2]);
  }
  if (listed[3]) {
    EXPECT_EQ(c.l3, listed[3]);
  }
#else
  GTEST_SKIP() << "CPUID's caches are read on x86 only (here: l1d " << c.l1d << ")";
#endif
}

// GEMM and the element-wise kernels run the ISA of cpu::active_isa(): EMBER_CPU_ISA's when
// set, else the best this CPU supports. An unknown name is an error naming it.
TEST(CpuIsa, OneChoiceForGemmAndElementwise) {
  using namespace ember::cpu;
  const char* env = std::getenv("EMBER_CPU_ISA");
  const std::string want = env ? env : "";
  const bool known = want.empty() || want == "scalar" || want == "avx2" || want == "avx512" ||
                     want == "avx512bf16" || want == "amx";
  if (!known) {
    const auto expect_unknown = [&](auto&& f) {
      try {
        f();
        ADD_FAILURE() << "EMBER_CPU_ISA=" << want << " was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("EMBER_CPU_ISA=" + want + ": unknown ISA"),
                  std::string::npos)
            << e.what();
      }
    };
    expect_unknown([] { active_isa(); });
    expect_unknown([] { iota(8, Device::cpu()).exp().to_data(); });
    return;
  }
  Isa expect = isa_supported(Isa::Avx512) ? Isa::Avx512
               : isa_supported(Isa::Avx2) ? Isa::Avx2
                                          : Isa::Scalar;
  // The bf16 dot product: AMX where EMBER_CPU_ISA is unset and the CPU has it, else
  // AVX512_BF16 on an AMD CPU that has it (Note [Dot kernels by default] in cpu/isa.cpp),
  // none under a vector ISA's name, the named one (with the avx512 vector kernels) under its
  // own name.
  bool amd = false;
#if defined(__x86_64__)
  unsigned regs[4] = {};
  __get_cpuid(0, &regs[0], &regs[1], &regs[2], &regs[3]);
  const std::string vendor = std::string(reinterpret_cast<const char*>(&regs[1]), 4) +
                             std::string(reinterpret_cast<const char*>(&regs[3]), 4) +
                             std::string(reinterpret_cast<const char*>(&regs[2]), 4);
  amd = vendor == "AuthenticAMD";
#endif
  DotIsa expect_dot = dot_isa_supported(DotIsa::Amx)                 ? DotIsa::Amx
                      : amd && dot_isa_supported(DotIsa::Avx512Bf16) ? DotIsa::Avx512Bf16
                                                                     : DotIsa::None;
  if (!want.empty()) {
    expect_dot = DotIsa::None;
    for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (want == isa_name(i)) expect = i;
    }
    for (DotIsa i : {DotIsa::Avx512Bf16, DotIsa::Amx}) {
      if (want == dot_isa_name(i)) {
        expect = Isa::Avx512;
        expect_dot = i;
      }
    }
  }
  ASSERT_EQ(active_isa(), expect) << isa_name(active_isa());
  ASSERT_EQ(active_dot_isa(), expect_dot) << dot_isa_name(active_dot_isa());
  const cpu::detail::Bf16Kernel bf16 = expect_dot == DotIsa::Amx ? cpu::detail::Bf16Kernel::Amx
                                       : expect_dot == DotIsa::Avx512Bf16
                                           ? cpu::detail::Bf16Kernel::Avx512Bf16
                                           : cpu::detail::Bf16Kernel::Auto;
  EXPECT_EQ(cpu::detail::gemm_bf16_active(), bf16);
  EXPECT_EQ(cpu::gemm_bf16_native(), expect_dot != DotIsa::None);
  EXPECT_EQ(cpu::kernel_isa(),
            std::string(isa_name(expect)) +
                (expect_dot == DotIsa::None ? "" : std::string("+") + dot_isa_name(expect_dot)));
  const ElementwiseTable* table = expect == Isa::Avx512 ? &isa_avx512::elementwise_table()
                                  : expect == Isa::Avx2 ? &isa_avx2::elementwise_table()
                                                        : &isa_generic::elementwise_table();
  EXPECT_EQ(&elementwise_table(), table) << elementwise_table().isa;
  const cpu::detail::GemmIsa gemm = expect == Isa::Avx512 ? cpu::detail::GemmIsa::Avx512
                                    : expect == Isa::Avx2 ? cpu::detail::GemmIsa::Avx2
                                                          : cpu::detail::GemmIsa::Scalar;
  EXPECT_EQ(cpu::detail::gemm_active_isa(), gemm);
}

// Every ISA table the CPU can run gives the same element-wise results as the generic one.
TEST(CpuBackend, IsaTablesAgree) {
  using namespace ember::cpu;
  std::vector<const ElementwiseTable*> tables = {&isa_generic::elementwise_table()};
  if (isa_supported(Isa::Avx2)) tables.push_back(&isa_avx2::elementwise_table());
  if (isa_supported(Isa::Avx512)) {
    tables.push_back(&isa_avx512::elementwise_table());
  } else {
    std::printf("note: this CPU lacks AVX-512; that table is compiled but not run here\n");
  }
  std::vector<float> x(1037), y0(x.size()), y1(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = -20.0f + 40.0f * float(i) / float(x.size());
  for (std::size_t f = 0; f < static_cast<std::size_t>(ir::UnaryFn::Count_); ++f) {
    const auto fn = static_cast<ir::UnaryFn>(f);
    if (fn == ir::UnaryFn::IsNan || fn == ir::UnaryFn::IsInf || fn == ir::UnaryFn::IsFinite)
      continue;
    const auto k = static_cast<std::size_t>(DType::F32);
    auto* ref = tables[0]->unary[f][k];
    if (ref == nullptr) continue;
    ref(x.data(), y0.data(), x.size(), 0.5, 2.0);
    for (std::size_t t = 1; t < tables.size(); ++t) {
      tables[t]->unary[f][k](x.data(), y1.data(), x.size(), 0.5, 2.0);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const float a = y0[i], b = y1[i];
        if (std::isnan(a) && std::isnan(b)) continue;
        // Tables differ only in FMA contraction: a few ulp.
        EXPECT_NEAR(a, b, 4e-6f * std::max(1.0f, std::fabs(a)))
            << ir::name(fn) << " at x = " << x[i] << " on " << tables[t]->isa;
      }
    }
  }
}

// Note [Half rows]: each ISA table's conversions between f32 and f16 / bf16 give base's
// scalar conversions bit for bit: every 16-bit pattern widened; every f32 upper half with
// low halves around the rounding points (ties, one either side) and NaN payloads
// narrowed; at every start offset and length around the eight-element step. A few values
// are checked against their closed forms too.
TEST(CpuCast, HalfRowsAreBaseConversionsBitForBit) {
  using namespace ember::cpu;
  std::vector<const ElementwiseTable*> tables = {&isa_generic::elementwise_table()};
  if (isa_supported(Isa::Avx2)) tables.push_back(&isa_avx2::elementwise_table());
  if (isa_supported(Isa::Avx512)) tables.push_back(&isa_avx512::elementwise_table());
  std::vector<std::uint16_t> halves(65536);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<std::uint16_t>(i);
  std::vector<std::uint32_t> words;
  for (std::uint32_t hi = 0; hi < 65536; ++hi) {
    for (std::uint32_t lo : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x7fffu, 0x8000u, 0x8001u,
                             0xffffu, (hi * 2654435761u) >> 16}) {
      words.push_back(hi << 16 | lo);
    }
  }
  const auto f32_bits = [](float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
  };
  for (const ElementwiseTable* t : tables) {
    // Widening: every pattern, each table against base.
    for (int k = 0; k < 2; ++k) {
      std::vector<std::uint32_t> y(halves.size());
      t->half_to_f32[k](halves.data(), y.data(), halves.size());
      for (std::size_t i = 0; i < halves.size(); ++i) {
        float want;
        if (k == 0) {
          f16 h;
          h.bits = halves[i];
          want = static_cast<float>(h);
        } else {
          bf16 h;
          h.bits = halves[i];
          want = static_cast<float>(h);
        }
        ASSERT_EQ(y[i], f32_bits(want))
            << (k ? "bf16" : "f16") << " bits " << halves[i] << " widened on " << t->isa;
      }
    }
    // Narrowing.
    for (int k = 0; k < 2; ++k) {
      std::vector<std::uint16_t> y(words.size());
      t->f32_to_half[k](words.data(), y.data(), words.size());
      for (std::size_t i = 0; i < words.size(); ++i) {
        float v;
        std::memcpy(&v, &words[i], 4);
        const std::uint16_t want = k == 0 ? f16(v).bits : bf16(v).bits;
        ASSERT_EQ(y[i], want) << (k ? "bf16" : "f16") << " of f32 bits " << words[i]
                              << " narrowed on " << t->isa;
      }
    }
    // Offsets and lengths around the vector step: the same elements as the whole row.
    std::vector<std::uint16_t> whole(64), part(64);
    std::vector<std::uint32_t> src(words.begin() + 0x7f7c * 10, words.begin() + 0x7f7c * 10 + 64);
    for (int k = 0; k < 2; ++k) {
      t->f32_to_half[k](src.data(), whole.data(), 64);
      for (std::size_t at = 0; at < 9; ++at) {
        for (std::size_t n = 0; at + n <= 64; n += 3) {
          std::fill(part.begin(), part.end(), std::uint16_t{0xabcd});
          t->f32_to_half[k](src.data() + at, part.data() + at, n);
          for (std::size_t i = 0; i < 64; ++i) {
            const bool inside = i >= at && i < at + n;
            ASSERT_EQ(part[i], inside ? whole[i] : std::uint16_t{0xabcd})
                << "element " << i << " of a row at " << at << " of " << n << " on " << t->isa;
          }
        }
      }
    }
    // Closed forms: 1, the largest finite f16 and the first value that rounds past it,
    // the smallest subnormal, a bf16 tie to even and one past it.
    const float vals[] = {1.0f, 65519.0f, 65520.0f, 0x1p-24f, 1.00390625f, 1.01171875f, -0.0f};
    const std::uint16_t f16_want[] = {0x3c00, 0x7bff, 0x7c00, 0x0001, 0x3c04, 0x3c0c, 0x8000};
    const std::uint16_t bf16_want[] = {0x3f80, 0x4780, 0x4780, 0x3380, 0x3f80, 0x3f82, 0x8000};
    std::uint16_t y16[7], yb[7];
    t->f32_to_half[0](vals, y16, 7);
    t->f32_to_half[1](vals, yb, 7);
    for (int i = 0; i < 7; ++i) {
      EXPECT_EQ(y16[i], f16_want[i]) << vals[i] << " to f16 on " << t->isa;
      EXPECT_EQ(yb[i], bf16_want[i]) << vals[i] << " to bf16 on " << t->isa;
    }
  }
}

// The size classes (a regression of the hardening issue's item 2: sizes above 2^61 hung): every
// request gets a class at least as large, wasting at most a quarter above 4 KiB, and sizes beyond
// 2^62 (which allocate refuses) return at once.
TEST(CpuAllocator, SizeClassesNeverHang) {
  using ember::testing::Outcome;
  using ember::testing::run_isolated;
  const Outcome o = run_isolated(
      [] {
        std::string bad;
        for (std::size_t b :
             {std::size_t{1}, std::size_t{64}, std::size_t{65}, std::size_t{4096},
              std::size_t{4097}, std::size_t{8192}, std::size_t{12289}, (std::size_t{1} << 40) + 1,
              (std::size_t{1} << 61) + 1, std::size_t{1} << 62}) {
          const std::size_t c = cpu::CpuAllocator::size_class(b);
          const bool ok = c >= b && c % 64 == 0 && (b <= 4096 || c - b <= c / 4);
          if (!ok) bad += std::to_string(b) + " -> " + std::to_string(c) + "; ";
        }
        for (std::size_t b : {(std::size_t{1} << 62) + 1, (std::size_t{1} << 63), SIZE_MAX}) {
          if (cpu::CpuAllocator::size_class(b) < b) bad += "huge " + std::to_string(b) + "; ";
        }
        if (cpu::CpuAllocator::size_class(8192) != 8192) bad += "8192 is its own class; ";
        return bad;
      },
      10);
  ASSERT_TRUE(o.ok()) << o.str();
  EXPECT_EQ(o.text, "");
}

// ---- convolution (ir::Conv): every pass against an f64 reference ----
namespace {

struct ConvGeo {
  std::vector<std::size_t> x;  // [N, C, *spatial]
  std::size_t out_c, groups;
  ir::Window w;
};

// One loop over every (n, o, c, kernel offset, position) product of the definition, giving
// the forward output, the input gradient and the weight gradient, in f64.
struct ConvRef {
  std::vector<double> y, dx, dw;
};
ConvRef conv_reference(const ConvGeo& g, const std::vector<double>& x,
                       const std::vector<double>& wt, const std::vector<double>& gy) {
  const std::size_t sp = g.x.size() - 2, n = g.x[0], c = g.x[1], o = g.out_c, cg = c / g.groups,
                    og = o / g.groups;
  std::vector<std::size_t> in(g.x.begin() + 2, g.x.end()), out(sp);
  std::size_t image = 1, k = 1, l = 1;
  for (std::size_t d = 0; d < sp; ++d) {
    out[d] =
        (in[d] + 2 * g.w.padding[d] - g.w.dilation[d] * (g.w.kernel[d] - 1) - 1) / g.w.stride[d] +
        1;
    image *= in[d];
    k *= g.w.kernel[d];
    l *= out[d];
  }
  ConvRef r{std::vector<double>(n * o * l), std::vector<double>(n * c * image),
            std::vector<double>(o * cg * k)};
  for (std::size_t b = 0; b < n; ++b)
    for (std::size_t oc = 0; oc < o; ++oc)
      for (std::size_t ci = 0; ci < cg; ++ci)
        for (std::size_t ki = 0; ki < k; ++ki)
          for (std::size_t pos = 0; pos < l; ++pos) {
            std::size_t kr = ki, pr = pos, idx = 0;
            bool inside = true;
            std::vector<std::size_t> kd(sp), pd(sp);
            for (std::size_t d = sp; d-- > 0;) {
              kd[d] = kr % g.w.kernel[d];
              kr /= g.w.kernel[d];
              pd[d] = pr % out[d];
              pr /= out[d];
            }
            for (std::size_t d = 0; d < sp; ++d) {
              const long long v = (long long)(pd[d] * g.w.stride[d] + kd[d] * g.w.dilation[d]) -
                                  (long long)g.w.padding[d];
              inside = inside && v >= 0 && v < (long long)in[d];
              idx = idx * in[d] + (inside ? std::size_t(v) : 0);
            }
            if (!inside) continue;
            const std::size_t xi = (b * c + (oc / og) * cg + ci) * image + idx,
                              wi = (oc * cg + ci) * k + ki, yi = (b * o + oc) * l + pos;
            r.y[yi] += wt[wi] * x[xi];
            r.dx[xi] += wt[wi] * gy[yi];
            r.dw[wi] += gy[yi] * x[xi];
          }
  return r;
}

// The weight's shape of g, [out, in / groups, *kernel], and a case's name for messages.
Shape conv_weight_shape(const ConvGeo& g) {
  std::vector<std::size_t> wd{g.out_c, g.x[1] / g.groups};
  wd.insert(wd.end(), g.w.kernel.begin(), g.w.kernel.end());
  return Shape(wd);
}
std::string conv_case_name(DType dt, std::size_t t, const Shape& xs, const Shape& ws) {
  return std::string(name(dt)) + " case " + std::to_string(t) + " " + xs.to_string() + " * " +
         ws.to_string();
}

std::vector<double> uniform_values(std::size_t count, std::uint64_t seed) {
  std::vector<double> v(count);
  for (auto& e : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    e = double(seed >> 40) / double(1ull << 24) * 2.0 - 1.0;  // exact in f32
  }
  return v;
}

void expect_close(const TensorData& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  const auto g = got.convert(DType::F64).to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (std::size_t i = 0; i < g.size(); ++i) {
    ASSERT_NEAR(g[i], want[i], tol * (1.0 + std::abs(want[i]))) << what << " at " << i;
  }
}

}  // namespace

TEST(CpuConv, EveryPassMatchesAnF64Reference) {
  auto be = backend::Registry::global().backend("cpu", 0);
  const std::vector<ConvGeo> geos = {
      // the CNN's layers, small: 3x3 pad 1, with one and several input channels
      {{5, 1, 8, 8}, 4, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{4, 6, 7, 5}, 8, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      // one image (the GEMM spreads over the threads), stride, dilation, uneven padding
      {{1, 3, 11, 10}, 5, 1, {{3, 2}, {2, 3}, {1, 0}, {2, 1}}},
      // groups, depthwise, pointwise (the image is its own column matrix)
      {{3, 6, 9, 8}, 4, 2, {{3, 3}, {1, 2}, {1, 1}, {1, 1}}},
      {{2, 8, 6, 6}, 8, 8, {{3, 3}, {2, 2}, {1, 1}, {1, 1}}},
      {{3, 7, 5, 6}, 9, 1, {{1, 1}, {1, 1}, {0, 0}, {1, 1}}},
      // pointwise over more positions: past a sliver (99, 72 in groups), over several
      // column blocks of the threads (900)
      {{2, 5, 9, 11}, 7, 1, {{1, 1}, {1, 1}, {0, 0}, {1, 1}}},
      {{3, 8, 8, 9}, 6, 2, {{1, 1}, {1, 1}, {0, 0}, {1, 1}}},
      {{1, 64, 30, 30}, 48, 1, {{1, 1}, {1, 1}, {0, 0}, {1, 1}}},
      {{2, 4, 5, 6}, 6, 2, {{1, 1}, {2, 1}, {0, 0}, {1, 1}}},
      // 1-d and 3-d, a kernel spanning the whole padded input
      {{3, 4, 17}, 6, 2, {{4}, {3}, {2}, {2}}},
      {{2, 2, 4, 5, 6}, 3, 1, {{2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2}}},
      {{2, 3, 3, 3}, 4, 1, {{5, 5}, {1, 1}, {1, 1}, {1, 1}}},
      // more images than weight-gradient chunks (16): partial sums added in chunk order
      {{37, 3, 6, 6}, 4, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      // the direct path (one input channel per output channel): a channel multiplier of 2,
      // rows longer than the row kernel's blocks (64 f32, 32 f64) at strides 1, 2 and 3,
      // dilation, a kernel wider than tall, 3-d
      {{2, 4, 9, 10}, 8, 4, {{3, 3}, {2, 2}, {1, 1}, {1, 1}}},
      {{1, 3, 5, 75}, 3, 3, {{3, 3}, {1, 1}, {2, 2}, {2, 2}}},
      {{1, 2, 7, 83}, 2, 2, {{3, 3}, {2, 2}, {1, 1}, {1, 1}}},
      {{1, 2, 7, 40}, 4, 2, {{3, 5}, {3, 3}, {2, 1}, {1, 1}}},
      {{1, 3, 4, 5, 6}, 3, 3, {{3, 3, 3}, {1, 1, 2}, {1, 1, 1}, {1, 1, 1}}},
      // the implicit GEMM: more column rows (C/G * K = 288) than one k block (256), output
      // channels no multiple of the micro-tile, a 1x1 window with stride and padding
      {{1, 32, 6, 7}, 13, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{2, 5, 7, 7}, 3, 1, {{1, 1}, {2, 2}, {1, 1}, {1, 1}}},
      // stride 2 along rows long enough for the packer's vector gather (ow = 20)
      {{1, 2, 5, 40}, 3, 1, {{3, 3}, {2, 2}, {1, 1}, {1, 1}}},
      // Note [Phase images]: a map of several column blocks (flat positions past one task's
      // block) with an odd width; AlexNet's 11x11 stride-4 window (16 phases), a stride
      // of 3 by 2 with dilation; 1-d and 3-d; output channels past a micro-tile
      {{2, 3, 40, 70}, 8, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{2, 3, 35, 37}, 5, 1, {{11, 11}, {4, 4}, {2, 2}, {1, 1}}},
      // a row's phases split at once (stride 2 or 4 along rows) with padding past the
      // stride, so phases start and end at different columns
      {{1, 2, 21, 45}, 3, 1, {{7, 7}, {4, 4}, {3, 5}, {1, 1}}},
      {{1, 2, 9, 31}, 3, 1, {{5, 5}, {2, 2}, {2, 3}, {1, 1}}},
      {{1, 4, 13, 17}, 7, 1, {{3, 3}, {3, 2}, {2, 1}, {2, 2}}},
      {{2, 6, 300}, 9, 3, {{5}, {1}, {2}, {1}}},
      // Note [Shared padding]: windows that read past a phase row's end (1-d, 2-d, stride 2)
      {{3, 4, 17}, 5, 1, {{3}, {2}, {1}, {1}}},
      {{2, 3, 9, 11}, 4, 1, {{3, 3}, {2, 2}, {1, 1}, {1, 1}}},
      {{1, 3, 5, 6, 7}, 7, 1, {{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}},
      // Note [Input grad as a forward]: dilation with padding below its reach (2 of 4),
      // padding equal to it, and a kernel padded past its reach (forward only then)
      {{2, 5, 12, 11}, 6, 1, {{3, 3}, {1, 1}, {2, 2}, {2, 2}}},
      {{1, 4, 9, 9}, 5, 1, {{3, 3}, {1, 1}, {2, 2}, {1, 1}}},
      {{1, 4, 6, 9}, 3, 1, {{2, 3}, {1, 1}, {2, 1}, {1, 1}}},
      // depthwise of stride 1: the input grad through the flipped kernels (the plane kernel
      // at a width past a vector, the flat rows in 1-d and 3-d), the weight grad as long
      // dot products; a channel multiplier of 2 (its own input-grad path)
      {{2, 5, 11, 37}, 5, 5, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{2, 3, 50}, 3, 3, {{5}, {1}, {2}, {1}}},
      {{1, 2, 4, 5, 19}, 2, 2, {{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}},
      {{1, 2, 6, 21}, 4, 2, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      // the direct path's stride-2 row kernel on rows whose last window ends at the image's
      // last element (the last plane's): no vector reads past it
      {{1, 2, 2, 64}, 2, 2, {{2, 4}, {2, 2}, {0, 0}, {1, 1}}},
  };
  for (DType dt : {DType::F32, DType::F64}) {
    for (std::size_t t = 0; t < geos.size(); ++t) {
      const ConvGeo& g = geos[t];
      const Shape xs(g.x), ws = conv_weight_shape(g);
      auto xv = uniform_values(xs.num_elements(), 11 + t);
      auto wv = uniform_values(ws.num_elements(), 23 + t);
      const auto to_node = [&](const std::vector<double>& v, const Shape& s) {
        return be->from_data(TensorData::from(v, s).convert(dt));
      };
      auto x = to_node(xv, xs), w = to_node(wv, ws);
      auto y = be->execute(ir::Conv{x, w, g.w, g.groups, ir::ConvPass::Forward, {}})[0];
      auto gv = uniform_values(y->shape().num_elements(), 37 + t);
      auto gy = to_node(gv, y->shape());
      const ConvRef ref = conv_reference(g, xv, wv, gv);
      const std::vector<std::size_t> image(g.x.begin() + 2, g.x.end());
      auto dx = be->execute(ir::Conv{gy, w, g.w, g.groups, ir::ConvPass::InputGrad, image})[0];
      auto dw = be->execute(ir::Conv{x, gy, g.w, g.groups, ir::ConvPass::WeightGrad, {}})[0];
      EXPECT_EQ(dx->shape(), xs);
      EXPECT_EQ(dw->shape(), ws);
      const double tol = dt == DType::F64 ? 1e-12 : 2e-5;
      const std::string what = conv_case_name(dt, t, xs, ws);
      expect_close(be->to_data(y), ref.y, tol * 8, what + " forward");
      expect_close(be->to_data(dx), ref.dx, tol * 8, what + " input grad");
      expect_close(be->to_data(dw), ref.dw, tol * 64, what + " weight grad");
    }
  }
}

// Note [Output rows as tiles]: the forward and the input gradient (a forward of the flipped
// weight) by output rows give the phase route's results bit for bit, and the f64
// reference's: rows of one tile of 14 (the CNN's second layer), of several (30: three
// tiles of 10, short of the kernel's rows), of half a tile (7, the half kernel, and 3) and
// of tiles of 8 (8, 32, 24: the middle kernel where the CPU has one);
// output channels short of a sliver and past several; many output rows a task (a C^T block
// of several tasks an image); stride (phase images), dilation, groups, 1-d and 3-d.
TEST(CpuConv, OutputRowsAsTilesAreThePhaseRouteBitForBit) {
  auto be = backend::Registry::global().backend("cpu", 0);
  const std::vector<ConvGeo> geos = {
      {{3, 32, 14, 14}, 64, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{2, 5, 9, 30}, 13, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{2, 4, 7, 7}, 40, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{1, 3, 5, 3}, 7, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{2, 6, 8, 8}, 64, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{1, 3, 6, 32}, 20, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{1, 2, 4, 24}, 5, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{1, 2, 40, 61}, 150, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {{2, 6, 15, 17}, 10, 2, {{3, 3}, {2, 2}, {1, 1}, {1, 1}}},
      {{1, 4, 12, 13}, 9, 1, {{3, 3}, {1, 1}, {2, 2}, {2, 2}}},
      {{2, 6, 40}, 33, 3, {{5}, {1}, {2}, {1}}},
      {{1, 3, 5, 6, 7}, 17, 1, {{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}},
  };
  for (DType dt : {DType::F32, DType::F64}) {
    for (std::size_t t = 0; t < geos.size(); ++t) {
      const ConvGeo& g = geos[t];
      const Shape xs(g.x), ws = conv_weight_shape(g);
      const auto xv = uniform_values(xs.num_elements(), 5 + t),
                 wv = uniform_values(ws.num_elements(), 7 + t);
      auto x = be->from_data(TensorData::from(xv, xs).convert(dt));
      const std::vector<std::size_t> image(g.x.begin() + 2, g.x.end());
      std::vector<TensorData> y(2), dx(2);
      for (const int rows : {0, 1}) {
        cpu::detail::conv_force_rows(rows);
        // A fresh weight each time: a cached packing of the other route is not this one's.
        auto w = be->from_data(TensorData::from(wv, ws).convert(dt));
        auto yh = be->execute(ir::Conv{x, w, g.w, g.groups, ir::ConvPass::Forward, {}})[0];
        y[rows] = be->to_data(yh);
        dx[rows] = be->to_data(
            be->execute(ir::Conv{yh, w, g.w, g.groups, ir::ConvPass::InputGrad, image})[0]);
      }
      cpu::detail::conv_force_rows(-1);
      const std::string what = conv_case_name(dt, t, xs, ws);
      ASSERT_EQ(y[0].bytes().size(), y[1].bytes().size()) << what;
      EXPECT_EQ(std::memcmp(y[0].bytes().data(), y[1].bytes().data(), y[0].bytes().size()), 0)
          << what << " forward";
      ASSERT_EQ(dx[0].bytes().size(), dx[1].bytes().size()) << what;
      EXPECT_EQ(std::memcmp(dx[0].bytes().data(), dx[1].bytes().data(), dx[0].bytes().size()), 0)
          << what << " input grad";
      const std::vector<double> yv = y[1].convert(DType::F64).to_vector<double>();
      const ConvRef ref = conv_reference(g, xv, wv, yv);
      const double tol = dt == DType::F64 ? 1e-12 : 2e-5;
      expect_close(y[1], ref.y, tol * 8, what + " forward");
      expect_close(dx[1], ref.dx, tol * 64, what + " input grad");
    }
  }
}

// Note [Phase images]: images whose phase images pass the 32 MB a forward splits at once
// go a chunk at a time (here two images, then a short chunk of one in the same buffer).
TEST(CpuConv, PhaseImagesAChunkAtATime) {
  auto be = backend::Registry::global().backend("cpu", 0);
  const ConvGeo g{{3, 1, 1200, 2500}, 4, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}};
  const Shape xs(g.x), ws{4, 1, 3, 3};
  const auto xv = uniform_values(xs.num_elements(), 8), wv = uniform_values(ws.num_elements(), 9);
  // The definition in f64 (3x3, padding 1, one input channel).
  const std::size_t h = 1200, wd = 2500;
  std::vector<double> want(3 * 4 * h * wd, 0.0);
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t o = 0; o < 4; ++o)
      for (std::size_t i = 0; i < h; ++i)
        for (std::size_t ky = 0; ky < 3; ++ky) {
          if (i + ky < 1 || i + ky > h) continue;
          const double* xr = xv.data() + (b * h + i + ky - 1) * wd;
          double* yr = want.data() + ((b * 4 + o) * h + i) * wd;
          for (std::size_t kx = 0; kx < 3; ++kx) {
            const double wv_k = wv[o * 9 + ky * 3 + kx];
            for (std::size_t j = 0; j < wd; ++j)
              if (j + kx >= 1 && j + kx <= wd) yr[j] += wv_k * xr[j + kx - 1];
          }
        }
  auto x = be->from_data(TensorData::from(xv, xs).convert(DType::F32));
  auto w = be->from_data(TensorData::from(wv, ws).convert(DType::F32));
  auto y = be->execute(ir::Conv{x, w, g.w, 1, ir::ConvPass::Forward, {}})[0];
  expect_close(be->to_data(y), want, 1e-5, "forward");
}

// Note [Phase images]: the flat positions past each output row read image elements that
// no window reads (here column 6 of each row: stride 3 reads columns 0-1 and 3-4); they are
// dropped from the output and kept out of the weight gradient's sums, so an infinity there
// changes nothing.
TEST(CpuConv, ElementsNoWindowReadsStayOutOfTheSums) {
  auto be = backend::Registry::global().backend("cpu", 0);
  const ConvGeo g{{1, 2, 4, 7}, 3, 1, {{1, 2}, {1, 3}, {0, 0}, {1, 1}}};
  const Shape xs(g.x), ws{3, 2, 1, 2}, ys{1, 3, 4, 2};
  auto xv = uniform_values(xs.num_elements(), 3);
  const auto wv = uniform_values(ws.num_elements(), 4), gv = uniform_values(ys.num_elements(), 5);
  const ConvRef ref = conv_reference(g, xv, wv, gv);
  for (std::size_t c = 0; c < 2; ++c)
    for (std::size_t r = 0; r < 4; ++r)
      xv[(c * 4 + r) * 7 + 6] = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::F32, DType::F64}) {
    const auto node = [&](const std::vector<double>& v, const Shape& s) {
      return be->from_data(TensorData::from(v, s).convert(dt));
    };
    auto x = node(xv, xs), w = node(wv, ws), gy = node(gv, ys);
    auto y = be->execute(ir::Conv{x, w, g.w, 1, ir::ConvPass::Forward, {}})[0];
    auto dw = be->execute(ir::Conv{x, gy, g.w, 1, ir::ConvPass::WeightGrad, {}})[0];
    expect_close(be->to_data(y), ref.y, 1e-5, std::string(name(dt)) + " forward");
    expect_close(be->to_data(dw), ref.dw, 1e-5, std::string(name(dt)) + " weight grad");
  }
}

// Note [Packed weight cache]: a weight convolved again unchanged reuses its packed panels
// (packed on the second call, read from the cache on the third), bit for bit the results of
// packing per call; an op that writes the weight's buffer in place drops them, so the next
// convolution sees the new values; and panels of one micro-kernel family are never given to
// another's kernel.
TEST(CpuConv, PackedWeightsFollowTheWeightsBuffer) {
  auto be = backend::Registry::global().backend("cpu", 0);
  const ConvGeo g{{2, 6, 9, 8}, 8, 1, {{3, 3}, {1, 1}, {1, 1}, {1, 1}}};
  const Shape xs(g.x), ws{8, 6, 3, 3}, ys{2, 8, 9, 8};
  const auto xv = uniform_values(xs.num_elements(), 5), wv = uniform_values(ws.num_elements(), 6),
             gv = uniform_values(ys.num_elements(), 7);
  const ConvRef ref = conv_reference(g, xv, wv, gv);
  std::vector<double> neg_y(ref.y.size()), neg_dx(ref.dx.size());
  for (std::size_t i = 0; i < ref.y.size(); ++i) neg_y[i] = -ref.y[i];
  for (std::size_t i = 0; i < ref.dx.size(); ++i) neg_dx[i] = -ref.dx[i];
  const auto node = [&](const std::vector<double>& v, const Shape& s) {
    return be->from_data(TensorData::from(v, s).convert(DType::F32));
  };
  auto x = node(xv, xs), gy = node(gv, ys), w = node(wv, ws);
  const auto forward = [&](const ir::Handle& wt) {
    return be->to_data(be->execute(ir::Conv{x, wt, g.w, 1, ir::ConvPass::Forward, {}})[0]);
  };
  const auto input_grad = [&](const ir::Handle& wt) {
    return be->to_data(be->execute(ir::Conv{gy, wt, g.w, 1, ir::ConvPass::InputGrad, {9, 8}})[0]);
  };
  const TensorData y1 = forward(w), y2 = forward(w), y3 = forward(w);
  const TensorData d1 = input_grad(w), d2 = input_grad(w), d3 = input_grad(w);
  EXPECT_TRUE(y1 == y2 && y2 == y3) << "forward: per call, into the cache, from the cache";
  EXPECT_TRUE(d1 == d2 && d2 == d3) << "input grad: per call, into the cache, from the cache";
  expect_close(y3, ref.y, 2e-4, "forward from the cache");
  expect_close(d3, ref.dx, 2e-4, "input grad from the cache");

  // Another micro-kernel family (the test hook): its own panels and kernels, so the results
  // are those of that family packing per call (a fresh copy of the weight, seen once).
  cpu::detail::gemm_force_isa(cpu::detail::GemmIsa::Scalar);
  const TensorData fresh = forward(node(wv, ws));
  const TensorData ys1 = forward(w), ys2 = forward(w), ys3 = forward(w);
  cpu::detail::gemm_force_isa(cpu::detail::GemmIsa::Auto);
  EXPECT_TRUE(fresh == ys1 && ys1 == ys2 && ys2 == ys3);
  expect_close(ys3, ref.y, 2e-4, "forward with the scalar kernels");
  EXPECT_TRUE(forward(w) == y1);

  // The weight's sole owner negates it in place: the cached panels are dropped.
  const std::byte* before = be->host_data(w);
  auto neg = be->execute(ir::Unary{ir::UnaryFn::Neg, std::move(w), DType::F32})[0];
  ASSERT_EQ(be->host_data(neg), before) << "the negation was expected to reuse the buffer";
  expect_close(forward(neg), neg_y, 2e-4, "forward after the weight changed in place");
  expect_close(input_grad(neg), neg_dx, 2e-4, "input grad after the weight changed in place");
}

// Note [Packed weight cache] for matmul's right operand (Note [Prepacked B] in gemm.hpp): a
// B multiplied again unchanged by few rows is packed on the second product and read from
// the cache on the third (its panels held as long as B's buffer lives: memory in use grows
// once, by about B's size), bit for bit the results of packing per call, for B itself and
// for its transposed view (an entry each, in the one buffer); a product with many rows caches
// nothing; an op writing B's buffer in place drops the panels, so the next product sees the new
// values.
TEST(CpuMatmul, PrepackedRightOperandFollowsItsBuffer) {
  auto be = backend::Registry::global().backend("cpu", 0);
  const std::size_t m = 24, k = 96, n = 96;  // square: B and B^T are views of one buffer
  const auto av = uniform_values(m * k, 31), bv = uniform_values(k * n, 32),
             tall = uniform_values(400 * k, 33);
  const auto node = [&](const std::vector<double>& v, const Shape& s) {
    return be->from_data(TensorData::from(v, s).convert(DType::F32));
  };
  // f64 references: a b, a b^T and tall b.
  const auto reference = [&](const std::vector<double>& x, std::size_t rows, bool transposed,
                             double sign) {
    std::vector<double> y(rows * n, 0.0);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t p = 0; p < k; ++p)
          y[i * n + j] += x[i * k + p] * sign * bv[transposed ? j * k + p : p * n + j];
    return y;
  };
  auto a = node(av, Shape{m, k});
  const std::size_t only_a = be->memory_stats().in_use;
  auto b = node(bv, Shape{k, n});
  auto bt = be->execute(ir::Permute{b, {1, 0}})[0];  // B^T, a view of B's buffer
  const auto product = [&](const ir::Handle& x, const ir::Handle& w) {
    return be->to_data(be->execute(ir::Matmul{x, w, Shape{x->shape()[0], n}})[0]);
  };
  const std::size_t base = be->memory_stats().in_use;
  const TensorData y1 = product(a, b), y2 = product(a, b);
  const std::size_t after_two = be->memory_stats().in_use;
  const TensorData y3 = product(a, b);
  EXPECT_TRUE(y1 == y2 && y2 == y3) << "per call, into the cache, from the cache";
  expect_close(y3, reference(av, m, false, 1.0), 1e-5, "a b from the cache");
  EXPECT_GE(after_two, base + k * n * sizeof(float)) << "the second product kept B's panels";
  EXPECT_EQ(be->memory_stats().in_use, after_two) << "the third product packed nothing";
  const TensorData t1 = product(a, bt), t2 = product(a, bt), t3 = product(a, bt);
  EXPECT_TRUE(t1 == t2 && t2 == t3);
  expect_close(t3, reference(av, m, true, 1.0), 1e-5, "a b^T from the cache");
  const std::size_t with_both = be->memory_stats().in_use;
  EXPECT_GE(with_both, after_two + k * n * sizeof(float)) << "the view has panels of its own";
  // Many rows: the GEMM packs each panel of B once for them all; nothing more is cached.
  auto x = node(tall, Shape{400, k});
  const std::size_t with_x = be->memory_stats().in_use;
  for (int i = 0; i < 3; ++i)
    expect_close(product(x, b), reference(tall, 400, false, 1.0), 1e-5, "tall x b");
  EXPECT_EQ(be->memory_stats().in_use, with_x) << "a product of 400 rows cached panels";
  x.reset();

  // B's sole owner negates it in place: the cached panels are dropped.
  bt.reset();
  const std::byte* before = be->host_data(b);
  auto neg = be->execute(ir::Unary{ir::UnaryFn::Neg, std::move(b), DType::F32})[0];
  ASSERT_EQ(be->host_data(neg), before) << "the negation was expected to reuse the buffer";
  expect_close(product(a, neg), reference(av, m, false, -1.0), 1e-5, "after B changed in place");
  expect_close(product(a, neg), reference(av, m, false, -1.0), 1e-5, "after B changed, again");
  expect_close(product(a, neg), reference(av, m, false, -1.0), 1e-5, "after B changed, cached");
  // The panels die with their buffer.
  neg.reset();
  EXPECT_EQ(be->memory_stats().in_use, only_a) << "panels outlived their buffers";
}

// Empty batches and channels: zeros or empty outputs, never a read out of bounds.
TEST(CpuConv, EmptyExtents) {
  auto be = backend::Registry::global().backend("cpu", 0);
  const ir::Window w{{3, 3}, {1, 1}, {1, 1}, {1, 1}};
  auto x0 = be->from_data(TensorData::from(std::vector<float>{}, Shape{0, 2, 4, 4}));
  auto w0 = be->from_data(TensorData::from(std::vector<float>(3 * 2 * 9, 1.0f), Shape{3, 2, 3, 3}));
  EXPECT_EQ(be->execute(ir::Conv{x0, w0, w, 1, ir::ConvPass::Forward, {}})[0]->shape(),
            (Shape{0, 3, 4, 4}));
  auto g0 = be->from_data(TensorData::from(std::vector<float>{}, Shape{0, 3, 4, 4}));
  const auto dw = be->to_data(be->execute(ir::Conv{x0, g0, w, 1, ir::ConvPass::WeightGrad, {}})[0]);
  EXPECT_EQ(dw.shape(), (Shape{3, 2, 3, 3}));
  for (float v : dw.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  // No input channels: every output is an empty sum, 0 (1-d and 2-d, strided or not).
  for (const auto& [xs, ws, win] :
       {std::tuple{Shape{2, 0, 4}, Shape{1, 0, 3}, ir::Window{{3}, {3}, {1}, {1}}},
        std::tuple{Shape{2, 0, 5, 5}, Shape{4, 0, 3, 3}, w}}) {
    auto xe = be->from_data(TensorData::from(std::vector<double>{}, xs));
    auto we = be->from_data(TensorData::from(std::vector<double>{}, ws));
    const auto y = be->to_data(be->execute(ir::Conv{xe, we, win, 1, ir::ConvPass::Forward, {}})[0]);
    EXPECT_EQ(y.shape()[1], ws[0]);
    EXPECT_GT(y.shape().num_elements(), 0u);
    for (double v : y.to_vector<double>()) EXPECT_EQ(v, 0.0);
  }
}

// ---- the max-pooling gradient (ir::MaxPoolGrad) against an f64 reference ----
TEST(CpuPool, MaxPoolGradSharesTiesAndSkipsThePadding) {
  auto be = backend::Registry::global().backend("cpu", 0);
  struct Geo {
    std::vector<std::size_t> x;
    ir::Window w;
  };
  const std::vector<Geo> geos = {
      {{2, 3, 8, 8}, {{2, 2}, {2, 2}, {0, 0}, {1, 1}}},  // the CNN's pooling
      {{1, 2, 7, 9}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}}},  // overlapping windows, padding
      {{2, 2, 9, 8}, {{2, 3}, {1, 2}, {1, 1}, {2, 1}}},  // dilation
      {{3, 2, 11}, {{3}, {2}, {1}, {1}}},
      {{1, 2, 4, 5, 6}, {{2, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}}},
  };
  for (DType dt : {DType::F32, DType::F64}) {
    for (std::size_t t = 0; t < geos.size(); ++t) {
      const Geo& g = geos[t];
      const Shape xs(g.x);
      // Values on a coarse grid, so windows hold ties.
      auto xv = uniform_values(xs.num_elements(), 5 + t);
      for (auto& v : xv) v = std::round(v * 2.0);
      auto x = be->from_data(TensorData::from(xv, xs).convert(dt));
      auto y = be->execute(ir::Pool{x, g.w, ir::PoolFn::Max})[0];
      const auto yv = be->to_data(y).convert(DType::F64).to_vector<double>();
      const auto gv = uniform_values(yv.size(), 9 + t);
      auto gy = be->from_data(TensorData::from(gv, y->shape()).convert(dt));
      auto dx = be->execute(ir::MaxPoolGrad{x, y, gy, g.w})[0];
      // Reference: every (position, kernel offset) entry inside the image, twice: count the
      // ties, then share.
      const std::size_t sp = g.x.size() - 2, planes = g.x[0] * g.x[1];
      std::vector<std::size_t> in(g.x.begin() + 2, g.x.end()), out(sp);
      std::size_t image = 1, l = 1, k = 1;
      for (std::size_t d = 0; d < sp; ++d) {
        out[d] = (in[d] + 2 * g.w.padding[d] - g.w.dilation[d] * (g.w.kernel[d] - 1) - 1) /
                     g.w.stride[d] +
                 1;
        image *= in[d];
        l *= out[d];
        k *= g.w.kernel[d];
      }
      std::vector<double> want(xs.num_elements());
      const auto entry = [&](std::size_t pos, std::size_t ki) -> long long {
        std::vector<std::size_t> pd(sp), kd(sp);
        for (std::size_t d = sp; d-- > 0;) {
          pd[d] = pos % out[d];
          pos /= out[d];
          kd[d] = ki % g.w.kernel[d];
          ki /= g.w.kernel[d];
        }
        long long idx = 0;
        for (std::size_t d = 0; d < sp; ++d) {
          const long long v = (long long)(pd[d] * g.w.stride[d] + kd[d] * g.w.dilation[d]) -
                              (long long)g.w.padding[d];
          if (v < 0 || v >= (long long)in[d]) return -1;
          idx = idx * (long long)in[d] + v;
        }
        return idx;
      };
      for (std::size_t p = 0; p < planes; ++p) {
        for (std::size_t pos = 0; pos < l; ++pos) {
          const double yy = yv[p * l + pos];
          std::size_t ties = 0;
          for (std::size_t ki = 0; ki < k; ++ki) {
            const long long i = entry(pos, ki);
            if (i >= 0 && xv[p * image + std::size_t(i)] == yy) ++ties;
          }
          ASSERT_GT(ties, 0u);
          for (std::size_t ki = 0; ki < k; ++ki) {
            const long long i = entry(pos, ki);
            if (i >= 0 && xv[p * image + std::size_t(i)] == yy)
              want[p * image + std::size_t(i)] += gv[p * l + pos] / double(ties);
          }
        }
      }
      expect_close(be->to_data(dx), want, dt == DType::F64 ? 1e-14 : 1e-6,
                   std::string(name(dt)) + " max pool grad case " + std::to_string(t));
    }
  }
}

// Note [Chunked rows] (cpu/kernels/reduce.cpp): a long row is reduced in the same chunks
// whatever the number of rows beside it (and so whatever EMBER_NUM_THREADS is): row 0 of a
// [3, n] tensor reduces to the bits of the same row alone, for rows of one, two and many
// chunks; and the sum is the f64 sum to f32 rounding.
TEST(CpuReduce, ALongRowReducesTheSameBesideOtherRows) {
  const Device dev = Device::cpu();
  for (const std::size_t n :
       {std::size_t(1000), std::size_t(131072), std::size_t(3 * 65536 + 123)}) {
    std::vector<float> v(3 * n);
    std::uint32_t s = 12345;
    for (float& e : v) {
      s = s * 1664525u + 1013904223u;
      e = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * ((s & 7u) == 0 ? 1000.0f : 1.0f);
    }
    const auto three = Tensor<2>::from_data(TensorData::from<float>(v, Shape{3, n}), dev);
    const auto one = Tensor<2>::from_data(
        TensorData::from<float>(std::vector<float>(v.begin(), v.begin() + n), Shape{1, n}), dev);
    const auto bits = [](const Tensor<2>& t) {
      const float f = t.to_data().to_vector<float>()[0];
      std::uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    };
    EXPECT_EQ(bits(three.sum_dim(1)), bits(one.sum_dim(1))) << n;
    EXPECT_EQ(bits(three.mean_dim(1)), bits(one.mean_dim(1))) << n;
    EXPECT_EQ(bits(three.max_dim(1)), bits(one.max_dim(1))) << n;
    double ref = 0, mag = 0;
    for (std::size_t i = 0; i < n; ++i) {
      ref += v[i];
      mag += std::fabs(v[i]);
    }
    EXPECT_NEAR(one.sum_dim(1).to_data().to_vector<float>()[0], ref, mag * 1e-6) << n;
  }
}

// Note [Chunked columns] (cpu/kernels/reduce.cpp): a reduction over a dim with others after
// it, of at least two chunks of kColumnChunk (2^20) elements of whole rows, combines each
// chunk's rows in order into a part and folds the parts in chunk order: the sums here are
// those of that order, computed by a plain walk (so they do not depend on the threads), and
// the f64 sums to f32 rounding; max, min and an integer sum are exact, and argmax / argmin
// the first extreme (or NaN) as a walk finds it, ties across chunks included. Shapes: one
// chunk (row after row), two and three chunks with a short last one, beside outer blocks.
TEST(CpuReduce, ReductionsOverOuterDimsCombineChunksInOrder) {
  const Device dev = Device::cpu();
  struct Case {
    std::size_t outer, n, inner;
  };
  for (const Case c : {Case{1, 1000, 600}, Case{1, 3500, 600}, Case{3, 2 * 1747 + 100, 600},
                       Case{1, 300, 4096}, Case{2, 600, 4096}}) {
    const std::size_t rows = (std::size_t(1) << 20) / c.inner;  // per chunk
    const bool chunked = rows >= 8 && c.n >= 2 * rows;
    std::vector<float> v(c.outer * c.n * c.inner);
    std::vector<std::int32_t> iv(v.size());
    std::uint32_t s = 777;
    for (std::size_t i = 0; i < v.size(); ++i) {
      s = s * 1664525u + 1013904223u;
      v[i] = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * ((s & 15u) == 0 ? 100.0f : 1.0f);
      iv[i] = static_cast<std::int32_t>(s >> 20) - 2048;
    }
    const Shape shape{c.outer, c.n, c.inner};
    const auto x = Tensor<3>::from_data(TensorData::from<float>(v, shape), dev);
    const auto xi = Tensor<3, Int>::from_data(TensorData::from<std::int32_t>(iv, shape), dev);
    const auto sum = x.sum_dim(1).to_data().to_vector<float>();
    const auto mean = x.mean_dim(1).to_data().to_vector<float>();
    const auto mx = x.max_dim(1).to_data().to_vector<float>();
    const auto mn = x.min_dim(1).to_data().to_vector<float>();
    const auto isum = xi.sum_dim(1).to_data().to_vector<std::int32_t>();
    // Coarse copies of the values (ties across chunks) with NaNs in some columns, for the
    // arg reductions: the first extreme, or the first NaN, as a walk finds it.
    std::vector<float> q(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      q[i] = std::round(v[i] * 4.0f);
      if (i % 9973 == 5) q[i] = NAN;
    }
    const auto xq = Tensor<3>::from_data(TensorData::from<float>(q, shape), dev);
    const auto amax = xq.argmax_dim(1).to_data().to_vector<std::int64_t>();
    const auto amin = xq.argmin_dim(1).to_data().to_vector<std::int64_t>();
    const std::string what = "[" + std::to_string(c.outer) + ", " + std::to_string(c.n) + ", " +
                             std::to_string(c.inner) + "]";
    for (std::size_t o = 0; o < c.outer; ++o) {
      for (std::size_t j = 0; j < c.inner; j += 7) {
        const auto at = [&](std::size_t r) { return (o * c.n + r) * c.inner + j; };
        float want = 0, part = 0, hi = -INFINITY, lo = INFINITY;
        double ref = 0, mag = 0;
        std::int32_t iwant = 0;
        for (std::size_t r = 0; r < c.n; ++r) {
          part += v[at(r)];
          if (!chunked || (r + 1) % rows == 0 || r + 1 == c.n) {
            want = chunked ? want + part : part;
            if (chunked) part = 0;
          }
          hi = std::max(hi, v[at(r)]);
          lo = std::min(lo, v[at(r)]);
          ref += v[at(r)];
          mag += std::fabs(v[at(r)]);
          iwant += iv[at(r)];
        }
        const std::size_t k = o * c.inner + j;
        std::int64_t first_max = 0, first_min = 0;
        for (std::size_t r = 1; r < c.n; ++r) {
          const float e = q[at(r)], bmax = q[at(std::size_t(first_max))],
                      bmin = q[at(std::size_t(first_min))];
          if (bmax == bmax && (e != e || e > bmax)) first_max = std::int64_t(r);
          if (bmin == bmin && (e != e || e < bmin)) first_min = std::int64_t(r);
        }
        ASSERT_EQ(amax[k], first_max) << what << " column " << j;
        ASSERT_EQ(amin[k], first_min) << what << " column " << j;
        ASSERT_EQ(sum[k], want) << what << " column " << j;
        ASSERT_EQ(mean[k], want * (1.0f / static_cast<float>(c.n))) << what << " column " << j;
        ASSERT_NEAR(sum[k], ref, mag * 1e-5) << what << " column " << j;
        ASSERT_EQ(mx[k], hi) << what;
        ASSERT_EQ(mn[k], lo) << what;
        ASSERT_EQ(isum[k], iwant) << what;
      }
    }
  }
}

// Note [Chunked rows]: a long row's argmax / argmin is reduced in chunks over the threads,
// and is still the row's first extreme, counted here by a plain walk: the extreme planted in
// two chunks (the first wins), equal extremes of either sign of zero, a NaN after the
// extreme (the first NaN wins, as PyTorch), rows of one chunk and of many, beside other rows.
TEST(CpuReduce, ALongRowsArgExtremeIsItsFirst) {
  const Device dev = Device::cpu();
  const auto first = [](const std::vector<double>& v, std::size_t lo, std::size_t n, bool max) {
    std::size_t at = lo;
    for (std::size_t i = lo; i < lo + n; ++i) {
      if (v[i] != v[i]) return static_cast<std::int64_t>(i - lo);  // the first NaN
      if (max ? v[i] > v[at] : v[i] < v[at]) at = i;
    }
    return static_cast<std::int64_t>(at - lo);
  };
  for (const std::size_t n :
       {std::size_t(65536), std::size_t(131072), std::size_t(5 * 65536 + 77)}) {
    for (int planted = 0; planted < 4; ++planted) {
      std::vector<double> v(3 * n);
      std::uint32_t s = 777u + static_cast<std::uint32_t>(planted);
      for (double& e : v) {
        s = s * 1664525u + 1013904223u;
        e = static_cast<double>(s >> 12) / 1048576.0 - 0.5;  // in (-0.5, 0.5)
      }
      for (std::size_t r = 0; r < 3; ++r) {
        double* row = v.data() + r * n;
        switch (planted) {
          case 0:  // none: the random extremes
            break;
          case 1:  // the extremes twice, in a late chunk and then an early one's tail
            row[n - 5] = 9.0;
            row[n / 2 + 3] = 9.0;
            row[n - 7] = -9.0;
            row[70000 % n] = -9.0;
            break;
          case 2:  // all zeros, -0 first: every element is an extreme, index 0 the first
            for (std::size_t i = 0; i < n; ++i) row[i] = (i % 3 == 0) ? -0.0 : 0.0;
            break;
          case 3:  // a NaN after the extreme, in a later chunk
            row[3] = r % 2 == 0 ? 9.0 : -9.0;
            row[n - 10] = std::nan("");
            row[n - 2] = std::nan("");
            break;
        }
      }
      for (DType dt : {DType::F32, DType::F64, DType::I32}) {
        if (dt == DType::I32 && planted >= 2) continue;  // (zero signs and NaNs are floats')
        std::vector<double> w = v;
        if (dt == DType::I32) {
          for (double& e : w) e = std::floor(e * 1000.0);  // many ties
        } else if (dt == DType::F32) {
          for (double& e : w) e = static_cast<double>(static_cast<float>(e));
        }
        const auto check = [&](const auto& x) {
          return std::array{x.argmax_dim(1).to_data().template to_vector<std::int64_t>(),
                            x.argmin_dim(1).to_data().template to_vector<std::int64_t>(),
                            x.argmax().to_data().template to_vector<std::int64_t>()};
        };
        const TensorData data = TensorData::from<double>(w, Shape{3, n});
        const auto got =
            dt == DType::I32 ? check(Tensor<2, Int>::from_data(
                                   TensorData::from<std::int32_t>(
                                       std::vector<std::int32_t>(w.begin(), w.end()), Shape{3, n}),
                                   dev))
                             : check(Tensor<2>::from_data(data, dev).cast(dt));
        const auto& am = got[0];
        const auto& an = got[1];
        for (std::size_t r = 0; r < 3; ++r) {
          const std::string what = std::string(name(dt)) + " n " + std::to_string(n) + " case " +
                                   std::to_string(planted) + " row " + std::to_string(r);
          EXPECT_EQ(am[r], first(w, r * n, n, true)) << what;
          EXPECT_EQ(an[r], first(w, r * n, n, false)) << what;
        }
        // The full reduction: the tensor as one row of 3n.
        EXPECT_EQ(got[2][0], first(w, 0, 3 * n, true)) << name(dt) << " all";
      }
    }
  }
}

// Note [Fork] in thread_pool.cpp: a child forked right after a parallel region, while the
// workers go back to their wait, runs parallel regions of its own (on its one thread) and
// never inherits a lock a worker held. Each round forks just after the workers were woken.
TEST(CpuThreadPool, AChildForkedAfterAParallelRegionRunsRegions) {
  constexpr std::size_t n = 1 << 16;
  const auto sum_of_indices = [] {
    std::vector<std::uint64_t> part(n);
    cpu::parallel_for(0, n, 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) part[i] = i;
    });
    std::uint64_t s = 0;
    for (auto v : part) s += v;
    return s;
  };
  const std::uint64_t expected = std::uint64_t{n} * (n - 1) / 2;
  for (int round = 0; round < 100; ++round) {
    ASSERT_EQ(sum_of_indices(), expected);
    const auto o = ember::testing::run_isolated(
        [&] {
          const std::uint64_t a = sum_of_indices();
          const std::uint64_t b = sum_of_indices();
          return std::to_string(a) + " " + std::to_string(b);
        },
        20);
    ASSERT_TRUE(o.ok()) << "round " << round << ": " << o.str();
    EXPECT_EQ(o.text, std::to_string(expected) + " " + std::to_string(expected));
  }
}
