// Tests of the bf16 GEMM (src/cpu/gemm/gemm_bf16.cpp): each kernel family this CPU runs
// (the portable model of vdpbf16ps always; AVX512_BF16 and AMX where present) is forced in
// turn and compared with the f64 product of the same bf16 values over shapes with edge
// tiles, k steps that pad, strided and transposed operands and batches; the AVX512_BF16
// kernel must match the model bit for bit, subnormals and the order of additions included;
// and a bf16 matmul through the tensor API takes the bf16 GEMM when one is active.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <ember/ember.hpp>

#include "cpu/gemm/gemm_bf16.hpp"
#include "cpu/gemm_layouts.hpp"

namespace ember::cpu {
namespace {

using detail::Bf16Kernel;
using std::ptrdiff_t;
using std::size_t;
using std::uint16_t;

float widen(uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t bf16_bits(float f) { return bf16(f).bits; }

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

const char* name_of(Bf16Kernel k) {
  switch (k) {
    case Bf16Kernel::Emulated:
      return "Emulated";
    case Bf16Kernel::Avx512Bf16:
      return "Avx512Bf16";
    case Bf16Kernel::Amx:
      return "Amx";
    case Bf16Kernel::Auto:
      break;
  }
  return "Auto";
}

// Forces a kernel family for a scope.
struct Forced {
  explicit Forced(Bf16Kernel k) { detail::gemm_bf16_force(k); }
  ~Forced() { detail::gemm_bf16_force(Bf16Kernel::Auto); }
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
  std::vector<uint16_t> a, b;
};

Product make_product(size_t batch, size_t m, size_t n, size_t k, Layout la, Layout lb, bool bcast_b,
                     std::mt19937& rng) {
  Product p{batch, m, n, k, layout(la, m, k), layout(lb, k, n), 0, 0, 0, 0, {}, {}};
  p.a_bs = static_cast<ptrdiff_t>(p.oa.elems);
  p.b_bs = bcast_b ? 0 : static_cast<ptrdiff_t>(p.ob.elems);
  p.c_rs = static_cast<ptrdiff_t>(n + 4);
  p.c_bs = static_cast<ptrdiff_t>(m * (n + 4) + 8);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  p.a.resize(p.oa.elems * batch);
  p.b.resize(p.ob.elems * (bcast_b ? 1 : batch));
  for (auto& v : p.a) v = bf16_bits(dist(rng));
  for (auto& v : p.b) v = bf16_bits(dist(rng));
  return p;
}

// C of the product, with a guard of sentinels before, between and after the matrices.
constexpr size_t kGuard = 16;
constexpr float kSentinel = 1234.5f;

std::vector<float> run(const Product& p) {
  std::vector<float> c(kGuard + static_cast<size_t>(p.c_bs) * p.batch + kGuard, kSentinel);
  gemm_bf16(p.batch, p.m, p.n, p.k, p.a.data(), p.a_bs, p.oa.rs, p.oa.cs, p.b.data(), p.b_bs,
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

// Every element against the f64 product of the same bf16 values, within f32 accumulation's
// bound ((k + 2) eps32 sum |a||b|); everything outside the matrices untouched.
void check_against_f64(const Product& p, const std::vector<float>& c) {
  SCOPED_TRACE(describe(p));
  const double eps = std::numeric_limits<float>::epsilon();
  std::vector<bool> inside(c.size(), false);
  size_t bad = 0;
  for (size_t t = 0; t < p.batch; ++t) {
    const uint16_t* a = p.a.data() + static_cast<ptrdiff_t>(t) * p.a_bs;
    const uint16_t* b = p.b.data() + static_cast<ptrdiff_t>(t) * p.b_bs;
    for (size_t i = 0; i < p.m; ++i) {
      for (size_t j = 0; j < p.n; ++j) {
        double ref = 0, mag = 0;
        for (size_t q = 0; q < p.k; ++q) {
          const double x =
              widen(a[static_cast<ptrdiff_t>(i) * p.oa.rs + static_cast<ptrdiff_t>(q) * p.oa.cs]);
          const double y =
              widen(b[static_cast<ptrdiff_t>(q) * p.ob.rs + static_cast<ptrdiff_t>(j) * p.ob.cs]);
          ref += x * y;
          mag += std::fabs(x * y);
        }
        const size_t at =
            kGuard + t * static_cast<size_t>(p.c_bs) + i * static_cast<size_t>(p.c_rs) + j;
        inside[at] = true;
        const double tol = (static_cast<double>(p.k) + 2) * eps * mag;
        if (!(std::fabs(c[at] - ref) <= tol) && bad++ < 5)
          ADD_FAILURE() << "C[" << t << "][" << i << "][" << j << "] = " << c[at] << ", f64 " << ref
                        << " (tolerance " << tol << ")";
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
  const size_t shapes[][3] = {{1, 1, 1},    {5, 7, 3},      {12, 32, 2},   {13, 33, 31},
                              {32, 32, 32}, {33, 65, 64},   {2, 1000, 33}, {100, 70, 600},
                              {64, 16, 1},  {31, 17, 1025}, {20, 40, 4300}};
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
  return out;
}

// Why the tests cannot run a kernel family here (empty where they can).
std::string skip_reason(Bf16Kernel k) {
  if (detail::gemm_bf16_supported(k)) return {};
  return std::string("this CPU lacks the instructions of the ") + name_of(k) +
         " kernels (AVX512_BF16; AMX-TILE and AMX-BF16 with the OS's tile state)";
}

class GemmBf16Test : public ::testing::TestWithParam<Bf16Kernel> {
 protected:
  void SetUp() override {
    if (const std::string why = skip_reason(GetParam()); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_P(GemmBf16Test, MatchesTheF64ProductOfTheBf16Values) {
  Forced forced(GetParam());
  ASSERT_EQ(detail::gemm_bf16_active(), GetParam());
  std::mt19937 rng(7);
  for (const Product& p : products(rng)) check_against_f64(p, run(p));
}

// A product large enough to be split over threads, with k past one block; and one past
// two of AVX512_BF16's deep blocks (Note [Deep bf16 blocks] in gemm_bf16.cpp), more row
// blocks than threads.
TEST_P(GemmBf16Test, ThreadedBlocksMatchTheF64Product) {
  Forced forced(GetParam());
  std::mt19937 rng(8);
  const Product p = make_product(1, 300, 290, 1100, Layout::RowMajor, Layout::RowMajor, false, rng);
  check_against_f64(p, run(p));
  const Product deep =
      make_product(1, 200, 40, 4200, Layout::RowMajor, Layout::ColMajor, false, rng);
  check_against_f64(deep, run(deep));
}

INSTANTIATE_TEST_SUITE_P(Kernel, GemmBf16Test,
                         ::testing::Values(Bf16Kernel::Emulated, Bf16Kernel::Avx512Bf16,
                                           Bf16Kernel::Amx),
                         [](const ::testing::TestParamInfo<Bf16Kernel>& info) {
                           return std::string(name_of(info.param));
                         });

// The model's arithmetic (Note [bf16 dot products]): each k pair adds its odd product, then
// its even one, each addition rounded to f32. Products 1 and 2^24 (pair 0), then -2^24 and
// 1 (pair 1): odd first, 2^24, 2^24 + 1 rounds to 2^24, again, then 0. In k order (the
// widened f32 product's) the same values give 1; the exact sum is 2.
TEST(GemmBf16Model, AddsEachPairsOddProductFirst) {
  Forced forced(Bf16Kernel::Emulated);
  const float two12 = 4096.0f;
  const uint16_t a[4] = {bf16_bits(1), bf16_bits(two12), bf16_bits(-two12), bf16_bits(1)};
  const uint16_t b[4] = {bf16_bits(1), bf16_bits(two12), bf16_bits(two12), bf16_bits(1)};
  float c = kSentinel;
  gemm_bf16(1, 1, 1, 4, a, 0, 4, 1, b, 0, 1, 1, &c, 0, 1);
  EXPECT_EQ(c, 0.0f);
}

// Subnormal inputs read as zero; a result below f32's normal range is flushed to zero.
TEST(GemmBf16Model, FlushesSubnormalInputsAndResults) {
  Forced forced(Bf16Kernel::Emulated);
  const uint16_t tiny = 0x0001;  // the least positive bf16 subnormal
  const uint16_t big = bf16_bits(std::ldexp(1.0f, 100));
  float c = kSentinel;
  gemm_bf16(1, 1, 1, 1, &tiny, 0, 1, 1, &big, 0, 1, 1, &c, 0, 1);
  EXPECT_EQ(c, 0.0f) << "a subnormal input times 2^100";
  const uint16_t small = bf16_bits(std::ldexp(1.0f, -70));
  c = kSentinel;
  gemm_bf16(1, 1, 1, 1, &small, 0, 1, 1, &small, 0, 1, 1, &c, 0, 1);
  EXPECT_EQ(c, 0.0f) << "2^-70 squared (2^-140, subnormal in f32)";
  const uint16_t neg = bf16_bits(-std::ldexp(1.0f, -70));
  c = kSentinel;
  gemm_bf16(1, 1, 1, 1, &small, 0, 1, 1, &neg, 0, 1, 1, &c, 0, 1);
  EXPECT_TRUE(c == 0.0f && std::signbit(c)) << "a flushed negative result keeps its sign: " << c;
}

// The AVX512_BF16 kernel computes what the model computes, bit for bit: random products
// with subnormal and order-sensitive values mixed in.
TEST(GemmBf16Model, Avx512Bf16MatchesTheModelBitForBit) {
  if (const std::string why = skip_reason(Bf16Kernel::Avx512Bf16); !why.empty())
    GTEST_SKIP() << why;
  std::mt19937 rng(9);
  std::vector<Product> ps = products(rng);
  std::uniform_int_distribution<int> pick(0, 9);
  const uint16_t specials[] = {0x0001,
                               0x8003,
                               bf16_bits(std::ldexp(1.0f, -70)),
                               bf16_bits(4096.0f),
                               bf16_bits(-4096.0f),
                               bf16_bits(1.0f)};
  for (Product& p : ps) {
    for (auto& v : p.a)
      if (pick(rng) == 0) v = specials[static_cast<size_t>(pick(rng)) % 6];
    for (auto& v : p.b)
      if (pick(rng) == 0) v = specials[static_cast<size_t>(pick(rng)) % 6];
    std::vector<float> model, hw;
    {
      Forced f(Bf16Kernel::Emulated);
      model = run(p);
    }
    {
      Forced f(Bf16Kernel::Avx512Bf16);
      hw = run(p);
    }
    SCOPED_TRACE(describe(p));
    size_t diff = 0;
    for (size_t i = 0; i < model.size(); ++i)
      if (bits_of(model[i]) != bits_of(hw[i]) && diff++ < 5)
        ADD_FAILURE() << "element " << i << ": model " << model[i] << ", AVX512_BF16 " << hw[i];
    EXPECT_EQ(diff, 0u);
  }
}

// A bf16 matmul through the tensor API runs the bf16 GEMM when one is active (here forced
// to the model) and the widened f32 product otherwise; both round the f32 result to bf16
// once, within one bf16 rounding of each other.
TEST(GemmBf16Matmul, TensorMatmulTakesTheBf16Gemm) {
  const Device dev = Device::cpu();
  std::mt19937 rng(10);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> av(3 * 37 * 41), bv(41 * 29);
  for (auto& v : av) v = dist(rng);
  for (auto& v : bv) v = dist(rng);
  auto a = Tensor<3>::from_data(TensorData::from(av, Shape{3, 37, 41}), dev).cast(DType::BF16);
  auto b = Tensor<3>::from_data(TensorData::from(bv, Shape{1, 41, 29}), dev).cast(DType::BF16);
  std::vector<float> native, widened;
  {
    Forced f(Bf16Kernel::Emulated);
    ASSERT_TRUE(gemm_bf16_native());
    auto c = a.matmul(b);
    EXPECT_EQ(c.dtype(), DType::BF16);
    native = c.to_data().to_vector<float>();
  }
  if (gemm_bf16_native()) GTEST_SKIP() << "this CPU always runs the bf16 GEMM";
  widened = a.matmul(b).to_data().to_vector<float>();
  ASSERT_EQ(native.size(), widened.size());
  const auto ad = a.to_data().to_vector<float>(), bd = b.to_data().to_vector<float>();
  for (size_t t = 0; t < 3; ++t)
    for (size_t i = 0; i < 37; ++i)
      for (size_t j = 0; j < 29; ++j) {
        double ref = 0, mag = 0;
        for (size_t q = 0; q < 41; ++q) {
          const double x = ad[(t * 37 + i) * 41 + q], y = bd[q * 29 + j];
          ref += x * y;
          mag += std::fabs(x * y);
        }
        const size_t at = (t * 37 + i) * 29 + j;
        // One bf16 rounding (2^-8 relative) of a value within f32 accumulation of ref.
        const double tol = std::ldexp(std::fabs(ref), -8) + 50 * 1.2e-7 * mag;
        EXPECT_NEAR(native[at], ref, tol) << at;
        EXPECT_NEAR(widened[at], ref, tol) << at;
      }
}

// Under Fusion a bf16 product with an epilogue (gelu(a b + bias)) reads what the plain device
// reads, bit for bit, when the bf16 GEMM runs: the group's product is the Matmul kernel's.
// Each row of a is (1, 2^12, -2^12, 1) times a random sign, b's columns (1, 2^12, 2^12, 1):
// the bf16 GEMM's order of additions gives 0 where the widened f32 product gives 1
// (GemmBf16Model.AddsEachPairsOddProductFirst), so a group that widened would differ.
TEST(GemmBf16Matmul, FusedEpilogueReadsThePlainProduct) {
  Forced forced(Bf16Kernel::Emulated);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::size_t m = 45, k = 4, n = 33;
  std::vector<float> av(m * k), bv(k * n), cv(n);
  for (std::size_t i = 0; i < m; ++i) {
    const float s = dist(rng) < 0 ? -1.0f : 1.0f;
    const float row[4] = {s, s * 4096.0f, -s * 4096.0f, s};
    for (std::size_t p = 0; p < k; ++p) av[i * k + p] = row[p];
  }
  for (std::size_t j = 0; j < n; ++j) {
    const float col[4] = {1.0f, 4096.0f, 4096.0f, 1.0f};
    for (std::size_t p = 0; p < k; ++p) bv[p * n + j] = col[p];
  }
  for (auto& v : cv) v = dist(rng);
  const auto bias = [&](const Device& dev) {
    return Tensor<2>::from_data(TensorData::from(cv, Shape{1, n}), dev).cast(DType::BF16);
  };
  const auto run_on = [&](const Device& dev) {
    auto a = Tensor<2>::from_data(TensorData::from(av, Shape{m, k}), dev).cast(DType::BF16);
    auto b = Tensor<2>::from_data(TensorData::from(bv, Shape{k, n}), dev).cast(DType::BF16);
    auto c = bias(dev);  // recorded before the product, so the group is [matmul add gelu]
    return activation::gelu(a.matmul(b).add(c)).to_data().to_vector<float>();
  };
  const std::vector<float> plain = run_on(Device::cpu()), fused = run_on(Device::cpu().fusion());
  // The product is 0: each row reads gelu of the bias alone.
  const std::vector<float> expect =
      activation::gelu(bias(Device::cpu())).to_data().to_vector<float>();
  ASSERT_EQ(plain.size(), fused.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(bits_of(plain[i]), bits_of(expect[i % n])) << i;
    EXPECT_EQ(bits_of(fused[i]), bits_of(plain[i])) << i;
  }
}

}  // namespace
}  // namespace ember::cpu
