// The Cpu backend's contracts that the conformance harness cannot see from values alone:
// in-place reuse of sole-owned buffers, clone invariance, pooled memory accounting, views
// without copies, and ISA dispatch giving the same numbers on every instruction set.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include <ember/ember.hpp>

#include "cpu/kernels/elementwise_table.hpp"

using namespace ember;

namespace {
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

// Every ISA table the CPU can run gives the same element-wise results as the generic one.
TEST(CpuBackend, IsaTablesAgree) {
  using namespace ember::cpu;
  __builtin_cpu_init();
  std::vector<const ElementwiseTable*> tables = {&isa_generic::elementwise_table()};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    tables.push_back(&isa_avx2::elementwise_table());
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
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
