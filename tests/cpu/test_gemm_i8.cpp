// Tests of the int8 GEMM (src/cpu/gemm/gemm_i8.cpp): each kernel family this CPU runs (the
// portable loop always; AVX512_VNNI and AMX-INT8 where present) is forced in turn and must
// give the exact integer product (Note [int8 sums]: every kernel the same bits) over shapes
// with edge tiles, k steps that pad, strided and transposed operands, batches and the
// extreme values; which family runs by default follows the CPU and EMBER_CPU_ISA.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cpu/gemm/gemm_i8.hpp"
#include "cpu/gemm_layouts.hpp"
#include "cpu/isa.hpp"

namespace ember::cpu {
namespace {

using detail::I8Kernel;
using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::ptrdiff_t;
using std::size_t;
using std::uint8_t;

const char* name_of(I8Kernel k) {
  switch (k) {
    case I8Kernel::Portable:
      return "Portable";
    case I8Kernel::Avx512Vnni:
      return "Avx512Vnni";
    case I8Kernel::Amx:
      return "Amx";
    case I8Kernel::Auto:
      break;
  }
  return "Auto";
}

// Forces a kernel family for a scope.
struct Forced {
  explicit Forced(I8Kernel k) { detail::gemm_u8s8_force(k); }
  ~Forced() { detail::gemm_u8s8_force(I8Kernel::Auto); }
  Forced(const Forced&) = delete;
  Forced& operator=(const Forced&) = delete;
};

using testing::Layout;
using testing::Operand;
constexpr auto layout = testing::make_layout;

struct Product {
  size_t batch, m, n, k;
  Operand oa, ob;
  ptrdiff_t a_bs, b_bs, c_bs, c_rs;
  std::vector<uint8_t> a;
  std::vector<int8_t> b;
};

// Values uniform over the whole ranges, or (extreme) only 255 and -128, the products of
// largest magnitude.
Product make_product(size_t batch, size_t m, size_t n, size_t k, Layout la, Layout lb, bool bcast_b,
                     std::mt19937& rng, bool extreme = false) {
  Product p{batch, m, n, k, layout(la, m, k), layout(lb, k, n), 0, 0, 0, 0, {}, {}};
  p.a_bs = static_cast<ptrdiff_t>(p.oa.elems);
  p.b_bs = bcast_b ? 0 : static_cast<ptrdiff_t>(p.ob.elems);
  p.c_rs = static_cast<ptrdiff_t>(n + 4);
  p.c_bs = static_cast<ptrdiff_t>(m * (n + 4) + 8);
  std::uniform_int_distribution<int> ua(0, 255), ub(-128, 127);
  p.a.resize(p.oa.elems * batch);
  p.b.resize(p.ob.elems * (bcast_b ? 1 : batch));
  for (auto& v : p.a) v = static_cast<uint8_t>(extreme ? 255 : ua(rng));
  for (auto& v : p.b) v = static_cast<int8_t>(extreme ? -128 : ub(rng));
  return p;
}

constexpr size_t kGuard = 16;
constexpr int32_t kSentinel = 0x5a5a5a5a;

std::vector<int32_t> run(const Product& p) {
  std::vector<int32_t> c(kGuard + static_cast<size_t>(p.c_bs) * p.batch + kGuard, kSentinel);
  gemm_u8s8(p.batch, p.m, p.n, p.k, p.a.data(), p.a_bs, p.oa.rs, p.oa.cs, p.b.data(), p.b_bs,
            p.ob.rs, p.ob.cs, c.data() + kGuard, p.c_bs, p.c_rs);
  return c;
}

std::string describe(const Product& p) {
  return "batch=" + std::to_string(p.batch) + " m=" + std::to_string(p.m) +
         " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
         " a_rs=" + std::to_string(p.oa.rs) + " a_cs=" + std::to_string(p.oa.cs) +
         " b_rs=" + std::to_string(p.ob.rs) + " b_cs=" + std::to_string(p.ob.cs) +
         " b_bs=" + std::to_string(p.b_bs);
}

// Every element equal to the product summed in int64 (it fits in int32 at these k), and
// everything outside the matrices untouched.
void check_exact(const Product& p, const std::vector<int32_t>& c) {
  SCOPED_TRACE(describe(p));
  std::vector<bool> inside(c.size(), false);
  size_t bad = 0;
  for (size_t t = 0; t < p.batch; ++t) {
    const uint8_t* a = p.a.data() + static_cast<ptrdiff_t>(t) * p.a_bs;
    const int8_t* b = p.b.data() + static_cast<ptrdiff_t>(t) * p.b_bs;
    for (size_t i = 0; i < p.m; ++i) {
      for (size_t j = 0; j < p.n; ++j) {
        int64_t ref = 0;
        for (size_t q = 0; q < p.k; ++q)
          ref +=
              int64_t(
                  a[static_cast<ptrdiff_t>(i) * p.oa.rs + static_cast<ptrdiff_t>(q) * p.oa.cs]) *
              int64_t(b[static_cast<ptrdiff_t>(q) * p.ob.rs + static_cast<ptrdiff_t>(j) * p.ob.cs]);
        const size_t at =
            kGuard + t * static_cast<size_t>(p.c_bs) + i * static_cast<size_t>(p.c_rs) + j;
        inside[at] = true;
        if (int64_t(c[at]) != ref && bad++ < 5)
          ADD_FAILURE() << "C[" << t << "][" << i << "][" << j << "] = " << c[at] << ", exact "
                        << ref;
      }
    }
  }
  for (size_t at = 0; at < c.size(); ++at)
    if (!inside[at] && c[at] != kSentinel && bad++ < 5)
      ADD_FAILURE() << "wrote outside C at " << at;
  EXPECT_EQ(bad, 0u);
}

std::vector<Product> products(std::mt19937& rng) {
  std::vector<Product> out;
  const Layout ls[] = {Layout::RowMajor, Layout::ColMajor, Layout::Strided};
  const size_t shapes[][3] = {{1, 1, 1},    {5, 7, 3},      {12, 32, 4},   {13, 33, 31},
                              {32, 32, 64}, {33, 65, 65},   {2, 1000, 33}, {100, 70, 600},
                              {64, 16, 1},  {31, 17, 1025}, {40, 48, 2100}};
  size_t v = 0;
  for (const auto& s : shapes) {
    const Layout la = ls[v % 3], lb = ls[(v / 3 + v) % 3];
    out.push_back(make_product(1, s[0], s[1], s[2], la, lb, false, rng));
    ++v;
  }
  for (Layout la : ls)
    for (Layout lb : ls) out.push_back(make_product(1, 70, 45, 77, la, lb, false, rng));
  out.push_back(make_product(3, 20, 40, 50, Layout::RowMajor, Layout::RowMajor, true, rng));
  out.push_back(make_product(2, 33, 9, 130, Layout::ColMajor, Layout::Strided, false, rng));
  out.push_back(make_product(2, 5, 6, 0, Layout::RowMajor, Layout::RowMajor, false, rng));
  out.push_back(make_product(1, 0, 6, 4, Layout::RowMajor, Layout::RowMajor, false, rng));
  // 255 x -128 over k = 4000: -130,560,000, near the int32 range's end, in two k blocks.
  out.push_back(
      make_product(1, 35, 37, 4000, Layout::RowMajor, Layout::RowMajor, false, rng, true));
  return out;
}

std::string skip_reason(I8Kernel k) {
  if (detail::gemm_u8s8_supported(k)) return {};
  return std::string("this CPU lacks the instructions of the ") + name_of(k) +
         " kernels (AVX512_VNNI; AMX-TILE and AMX-INT8 with the OS's tile state)";
}

class GemmI8Test : public ::testing::TestWithParam<I8Kernel> {
 protected:
  void SetUp() override {
    if (const std::string why = skip_reason(GetParam()); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_P(GemmI8Test, GivesTheExactIntegerProduct) {
  Forced forced(GetParam());
  ASSERT_EQ(detail::gemm_u8s8_active(), GetParam());
  std::mt19937 rng(7);
  for (const Product& p : products(rng)) check_exact(p, run(p));
}

// A product large enough to be split over threads, with k past one block.
TEST_P(GemmI8Test, ThreadedBlocksGiveTheExactProduct) {
  Forced forced(GetParam());
  std::mt19937 rng(8);
  const Product p = make_product(1, 300, 290, 2200, Layout::RowMajor, Layout::RowMajor, false, rng);
  check_exact(p, run(p));
}

// Past int32's range the sum wraps modulo 2^32, as the instructions add (Note [int8 sums]):
// 255 x -128 over k = 70,000 is -2,284,800,000, which reads 2,010,167,296 — the same bits
// from every kernel.
TEST_P(GemmI8Test, SumsWrapModulo2To32) {
  Forced forced(GetParam());
  const size_t k = 70000;
  const std::vector<uint8_t> a(k, 255);
  const std::vector<int8_t> b(k, -128);
  int32_t c = kSentinel;
  gemm_u8s8(1, 1, 1, k, a.data(), 0, ptrdiff_t(k), 1, b.data(), 0, 1, 1, &c, 0, 1);
  const auto want =
      static_cast<int32_t>(static_cast<std::uint32_t>(int64_t(-2284800000) + (int64_t(1) << 32)));
  EXPECT_EQ(c, want);
  EXPECT_EQ(want, 2010167296);
}

INSTANTIATE_TEST_SUITE_P(Kernel, GemmI8Test,
                         ::testing::Values(I8Kernel::Portable, I8Kernel::Avx512Vnni, I8Kernel::Amx),
                         [](const ::testing::TestParamInfo<I8Kernel>& info) {
                           return std::string(name_of(info.param));
                         });

// By default the product takes AMX where the bf16 GEMM does, VNNI where the vector ISA is
// AVX-512 and the CPU has it, else the portable loop (so EMBER_CPU_ISA=avx2 or scalar, which
// ctest's cpu_isa_ runs set, leave the dot-product kernels).
TEST(GemmI8, DefaultKernelFollowsTheCpuAndEmberCpuIsa) {
  I8Kernel want = I8Kernel::Portable;
  if (active_isa() == Isa::Avx512) {
    if (active_dot_isa() == DotIsa::Amx && int8_dot_supported(Int8Dot::Amx))
      want = I8Kernel::Amx;
    else if (int8_dot_supported(Int8Dot::Avx512Vnni))
      want = I8Kernel::Avx512Vnni;
  }
  EXPECT_EQ(detail::gemm_u8s8_active(), want) << name_of(detail::gemm_u8s8_active());
}

}  // namespace
}  // namespace ember::cpu
