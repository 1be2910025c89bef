// The Cpu backend's contracts that the conformance harness cannot see from values alone:
// in-place reuse of sole-owned buffers, clone invariance, pooled memory accounting, views
// without copies, and ISA dispatch giving the same numbers on every instruction set.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <ember/ember.hpp>

#include "cpu/allocator.hpp"
#include "cpu/gemm/gemm.hpp"
#include "cpu/isa.hpp"
#include "cpu/kernels/elementwise_table.hpp"
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
  }
};
[[maybe_unused]] const auto* const kIsaEnvironment =
    ::testing::AddGlobalTestEnvironment(new IsaEnvironment);

Tensor<1> iota(std::size_t n, const Device& dev) {
  return Tensor<1, Int>::arange(0, static_cast<std::int64_t>(n), dev).float_();
}
}  // namespace

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

// GEMM and the element-wise kernels run the ISA of cpu::active_isa(): EMBER_CPU_ISA's when
// set, else the best this CPU supports. An unknown name is an error naming it.
TEST(CpuIsa, OneChoiceForGemmAndElementwise) {
  using namespace ember::cpu;
  const char* env = std::getenv("EMBER_CPU_ISA");
  const std::string want = env ? env : "";
  const bool known = want.empty() || want == "scalar" || want == "avx2" || want == "avx512";
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
  if (!want.empty()) {
    for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (want == isa_name(i)) expect = i;
    }
  }
  ASSERT_EQ(active_isa(), expect) << isa_name(active_isa());
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
