// Random draws under Fusion (Note [Reserved draws] in backend/fused_group.hpp, Note [Random
// sources] in src/fusion/elementwise_fuser.cpp): a Random takes its generator counters when
// it is recorded and is drawn inside the fused group that consumes it, so the values are
// those of the plain device and of EMBER_FUSION=0, bit for bit, however the records group.
// Statistics of the in-kernel draws are checked against closed forms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <ember/ember.hpp>
#include <ember/fusion/fusion.hpp>

using namespace ember;
using fusion::CloseReason;

namespace {

Device fused_with(const fusion::Options& o, const Device& inner = Device::cpu()) {
  return Device(fusion::make_fusion_backend(inner.backend_ptr(), o));
}
Device fused(const Device& inner = Device::cpu()) { return fused_with({}, inner); }
// EMBER_FUSION=0: every op runs at once on the inner device.
Device pass_through(const Device& inner = Device::cpu()) {
  fusion::Options o;
  o.enabled = false;
  return fused_with(o, inner);
}

bool same_bits(const TensorData& a, const TensorData& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.bytes() == b.bytes();
}

// A [rows, cols] tensor of dt, values in about [-2, 2].
DynTensor input(const Device& d, const Shape& s, DType dt) {
  std::vector<double> v(s.num_elements());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = (double(i % 23) - 11.0) / 5.5 + 0.03125;
  return DynTensor::from_data(TensorData::from<double>(v, s).convert(dt), d);
}

// The names of the ops of the groups of r, for messages.
std::string groups_of(const fusion::FusionReport& r) {
  std::string s;
  for (const auto& g : r.recent) {
    s += "[";
    for (auto op : g.ops) s += std::string(op) + " ";
    s += "] ";
  }
  return s;
}
bool has_op(const fusion::FusionGroupInfo& g, std::string_view op) {
  return std::find(g.ops.begin(), g.ops.end(), op) != g.ops.end();
}

// Dropout as nn::Dropout composes it: x * bernoulli(1 - p) / (1 - p), the mask a temporary.
DynTensor dropout(const DynTensor& x, double p) {
  DynTensor keep = ops::random(x.shape(), Distribution::bernoulli(1.0 - p), x.dtype(), x.device());
  return ops::binary_scalar(ir::BinaryFn::Mul, ops::binary(ir::BinaryFn::Mul, x, std::move(keep)),
                            1.0 / (1.0 - p));
}
// Noise added to an input: x + randn_like(x) * 0.1.
DynTensor noisy(const DynTensor& x) {
  DynTensor noise = ops::random(x.shape(), Distribution::normal(0.0, 1.0), x.dtype(), x.device());
  return ops::binary(ir::BinaryFn::Add, x,
                     ops::binary_scalar(ir::BinaryFn::Mul, std::move(noise), 0.1));
}

// program(d) on each device after seeding it the same way: their results' bits.
template <class P>
std::vector<TensorData> seeded(const Device& d, P&& program) {
  d.seed(20261206);
  std::vector<TensorData> out;
  for (const DynTensor& t : program(d)) out.push_back(t.to_data());
  return out;
}

// Checks that program gives the plain device's bits on its Fusion stack and on the
// pass-through.
template <class P>
void expect_same_everywhere(P&& program, const std::string& what,
                            const Device& inner = Device::cpu()) {
  const auto plain = seeded(inner, program);
  const auto off = seeded(pass_through(inner), program);
  const auto on = seeded(fused(inner), program);
  ASSERT_EQ(plain.size(), on.size()) << what;
  for (std::size_t k = 0; k < plain.size(); ++k) {
    EXPECT_TRUE(same_bits(plain[k], on[k])) << what << ": result " << k << " fused";
    EXPECT_TRUE(same_bits(plain[k], off[k])) << what << ": result " << k << " EMBER_FUSION=0";
  }
}

const DType kFloats[] = {DType::F32, DType::F64, DType::F16, DType::BF16};
// Extents 1, odd, and crossing the Cpu's 512-element tiles (and its rows).
const Shape kShapes[] = {Shape{1, 1}, Shape{7, 13}, Shape{3, 1300}};

}  // namespace

TEST(FusionRandom, DropoutIsOneGroupWithTheUnfusedBits) {
  for (DType dt : kFloats) {
    for (const Shape& s : kShapes) {
      const std::string what = std::string(name(dt)) + " " + s.to_string();
      const auto program = [&](const Device& d) {
        return std::vector<DynTensor>{dropout(input(d, s, dt), 0.3)};
      };
      expect_same_everywhere(program, what);
      const Device d = fused();
      d.seed(7);
      program(d)[0].to_data();
      const auto r = fusion::report(d);
      ASSERT_EQ(r.groups, 1u) << what << ": " << groups_of(r);
      const auto& g = r.recent.back();
      EXPECT_EQ(g.ops, (std::vector<std::string_view>{"random", "mul", "mul"})) << what;
      EXPECT_TRUE(g.fused) << what;
      EXPECT_EQ(g.inputs, 1u) << what;   // x: the mask is drawn in the program
      EXPECT_EQ(g.sources, 1u) << what;  // the scale
      EXPECT_EQ(g.outputs, 1u) << what;
      EXPECT_EQ(g.elided, 2u) << what;  // the mask and x * mask are never written
    }
  }
}

TEST(FusionRandom, NoiseOfAnInputIsDrawnInTheGroup) {
  for (DType dt : kFloats) {
    for (const Shape& s : kShapes) {
      const std::string what = std::string(name(dt)) + " " + s.to_string();
      const auto program = [&](const Device& d) {
        return std::vector<DynTensor>{noisy(input(d, s, dt))};
      };
      expect_same_everywhere(program, what);
      const Device d = fused();
      program(d)[0].to_data();
      const auto r = fusion::report(d);
      ASSERT_EQ(r.groups, 1u) << what << ": " << groups_of(r);
      EXPECT_EQ(r.recent.back().ops, (std::vector<std::string_view>{"random", "mul", "add"}))
          << what;
      EXPECT_EQ(r.recent.back().elided, 2u) << what;
    }
  }
}

// Every distribution, and integer and bool dtypes, drawn in a group (r * 1 + 0 keeps the
// draw's value; an integer draw is the floor of the value), kept and not kept.
TEST(FusionRandom, EveryDistributionAndDtypeDrawsTheUnfusedBits) {
  const Distribution dists[] = {Distribution::default_(), Distribution::uniform(-3, 5),
                                Distribution::normal(2, 3), Distribution::bernoulli(0.25)};
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    for (const Distribution& dist : dists) {
      for (bool keep : {false, true}) {
        const std::string what = std::string(name(dt)) + " kind " +
                                 std::to_string(static_cast<int>(dist.kind)) +
                                 (keep ? " kept" : "");
        const auto program = [&](const Device& d) {
          DynTensor r = ops::random(Shape{5, 700}, dist, dt, d);
          DynTensor y = ops::binary_scalar(ir::BinaryFn::Add,
                                           ops::binary_scalar(ir::BinaryFn::Mul, r, 1.0), 0.0);
          std::vector<DynTensor> out{std::move(y)};
          if (keep) out.push_back(std::move(r));
          return out;
        };
        expect_same_everywhere(program, what);
        const Device d = fused();
        const auto outs = program(d);
        outs[0].to_data();
        const auto r = fusion::report(d);
        ASSERT_EQ(r.groups, 1u) << what << ": " << groups_of(r);
        EXPECT_TRUE(has_op(r.recent.back(), "random")) << what;
        EXPECT_EQ(r.recent.back().outputs, keep ? 2u : 1u) << what;  // a kept draw is written
      }
    }
  }
}

// A second draw's counters follow the first's whatever the grouping: both draws recorded
// before either runs, consumed in the other order, in one group, in groups of their own,
// alone, flushed between, one record a flush.
TEST(FusionRandom, TwoDrawsFollowEachOtherWhateverTheGrouping) {
  const auto program = [](const Device& d) {
    DynTensor x = input(d, Shape{9, 600}, DType::F32);
    DynTensor a = ops::random(Shape{9, 600}, Distribution::normal(0, 1), DType::F32, d);
    DynTensor b = ops::random(Shape{4, 5}, Distribution::uniform(-1, 1), DType::F32, d);
    DynTensor c = ops::random(Shape{9, 600}, Distribution::bernoulli(0.5), DType::F32, d);
    DynTensor yb = ops::unary(ir::UnaryFn::Exp, b);  // consumed first
    DynTensor y = ops::binary(ir::BinaryFn::Mul, ops::binary(ir::BinaryFn::Add, x, a), c);
    return std::vector<DynTensor>{std::move(yb), std::move(y)};
  };
  expect_same_everywhere(program, "interleaved draws");
  fusion::Options one;
  one.max_records = 1;  // every record its own flush: each draw alone
  const auto plain = seeded(Device::cpu(), program);
  const auto each = seeded(fused_with(one), program);
  ASSERT_EQ(plain.size(), each.size());
  for (std::size_t k = 0; k < plain.size(); ++k) EXPECT_TRUE(same_bits(plain[k], each[k])) << k;
  // Reads between the draws (flushes), and draws fused with what follows.
  const auto stepwise = [](const Device& d) {
    DynTensor a = ops::random(Shape{3, 513}, Distribution::normal(1, 2), DType::F64, d);
    TensorData first = ops::binary_scalar(ir::BinaryFn::Mul, a, 3.0).to_data();
    DynTensor b = ops::random(Shape{3, 513}, Distribution::normal(1, 2), DType::F64, d);
    DynTensor y = ops::binary(ir::BinaryFn::Sub, b, a);
    return std::vector<DynTensor>{DynTensor::from_data(first, d), std::move(y)};
  };
  expect_same_everywhere(stepwise, "draws between reads");
}

// The counters are taken when the op is recorded, not when its stream flushes: a draw left
// pending by one thread and a draw another thread records and reads first keep the order in
// which they were recorded, as unfused.
TEST(FusionRandom, CountersAreTakenWhenRecorded) {
  const Shape s{4, 300};
  const auto draw = [&](const Device& d) {
    return ops::random(s, Distribution::uniform(0, 1), DType::F32, d);
  };
  const Device plain = Device::cpu();
  plain.seed(99);
  const TensorData first = draw(plain).to_data(), second = draw(plain).to_data();
  ASSERT_FALSE(same_bits(first, second));
  const Device d = fused();
  d.seed(99);
  DynTensor a = draw(d);  // pending in this thread's stream
  TensorData b;
  std::thread([&] { b = draw(d).to_data(); }).join();  // recorded and drawn second, run first
  EXPECT_TRUE(same_bits(a.to_data(), first));
  EXPECT_TRUE(same_bits(b, second));
}

// A draw joins a group ending in a reduction: the sum of a draw that is never written.
TEST(FusionRandom, ADrawIsAReductionsPrologue) {
  for (DType dt : {DType::F32, DType::F64, DType::BF16}) {
    const auto program = [&](const Device& d) {
      DynTensor r = ops::random(Shape{6, 1100}, Distribution::normal(0.5, 2), dt, d);
      return std::vector<DynTensor>{ops::reduce(ir::ReduceFn::Sum, std::move(r), 1)};
    };
    expect_same_everywhere(program, name(dt));
    const Device d = fused();
    program(d)[0].to_data();
    const auto r = fusion::report(d);
    ASSERT_EQ(r.groups, 1u) << name(dt) << ": " << groups_of(r);
    EXPECT_EQ(r.recent.back().ops, (std::vector<std::string_view>{"random", "sum"}));
    EXPECT_EQ(r.recent.back().closed, CloseReason::Reduction);
  }
}

// One plan serves draws of every seed, counter, parameter and size: none is in the key.
TEST(FusionRandom, ThePlanKeyHoldsNoSeedCounterOrParameter) {
  const Device d = fused();
  const auto run = [&](std::uint64_t seed, double p, std::size_t cols) {
    d.seed(seed);
    DynTensor x = input(d, Shape{3, cols}, DType::F32);
    dropout(x, p).to_data();
    return fusion::report(d).recent.back();
  };
  const auto g1 = run(1, 0.1, 100);
  EXPECT_TRUE(has_op(g1, "random")) << groups_of(fusion::report(d));
  const auto g2 = run(2, 0.5, 100);
  const auto g3 = run(2, 0.5, 3000);
  EXPECT_EQ(g1.key, g2.key);
  EXPECT_EQ(g1.key, g3.key);
  EXPECT_TRUE(g2.plan_cached);
  EXPECT_TRUE(g3.plan_cached);
  EXPECT_EQ(fusion::report(d).plans_built, 1u);
}

// The in-kernel draws have the distributions' moments: for 10^6 draws, the sample mean and
// variance within five standard errors of the closed forms.
TEST(FusionRandom, InKernelDrawsHaveTheirMoments) {
  struct Want {
    Distribution dist;
    double mean, var, mu4;  // mu4: the fourth central moment (the variance's standard error)
  };
  const double p = 0.3, q = 1 - p;
  const Want wants[] = {
      {Distribution::uniform(-2, 6), 2.0, 64.0 / 12, std::pow(8.0, 4) / 80},
      {Distribution::normal(1.5, 2.0), 1.5, 4.0, 3 * 16.0},
      {Distribution::bernoulli(p), p, p * q, p * q * (1 - 3 * p * q)},
      {Distribution::default_(), 0.5, 1.0 / 12, 1.0 / 80},
  };
  const Shape s{1000, 1000};
  const double n = double(s.num_elements());
  for (const Want& w : wants) {
    const Device d = fused();
    d.seed(5);
    DynTensor r = ops::random(s, w.dist, DType::F64, d);
    // r * 1 is the draw's value, computed in the group: the draw itself is never written.
    const auto v =
        ops::binary_scalar(ir::BinaryFn::Mul, std::move(r), 1.0).to_data().to_vector<double>();
    const auto rep = fusion::report(d);
    ASSERT_EQ(rep.groups, 1u);
    EXPECT_EQ(rep.recent.back().elided, 1u);
    double sum = 0;
    for (double x : v) sum += x;
    const double mean = sum / n;
    double sq = 0;
    for (double x : v) sq += (x - mean) * (x - mean);
    const double var = sq / (n - 1);
    const int kind = static_cast<int>(w.dist.kind);
    EXPECT_NEAR(mean, w.mean, 5 * std::sqrt(w.var / n)) << kind;
    EXPECT_NEAR(var, w.var, 5 * std::sqrt((w.mu4 - w.var * w.var) / n)) << kind;
  }
}

namespace {

// The Cpu generator's definition (src/cpu/kernels/creation.cpp), written out plainly: element
// i of a draw after seed(key) is a function of (key, i) alone.
std::uint64_t mix_ref(std::uint64_t key, std::uint64_t ctr) {
  std::uint64_t z = key ^ (ctr * 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  z = (z ^ (z >> 29)) * 0xbf58476d1ce4e5b9ULL;
  return z ^ (z >> 32);
}
double uniform01_ref(std::uint64_t bits) { return double(bits >> 11) / 9007199254740992.0; }
double value_ref(const Distribution& d, std::uint64_t key, std::uint64_t i) {
  const std::uint64_t r = mix_ref(key, i);
  switch (d.kind) {
    case Distribution::Kind::Normal: {
      const double u1 = 1.0 - uniform01_ref(r);
      const double u2 = uniform01_ref(mix_ref(key ^ 0x6a09e667f3bcc909ULL, i));
      return d.a + d.b * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
    case Distribution::Kind::Bernoulli:
      return uniform01_ref(r) < d.a ? 1.0 : 0.0;
    case Distribution::Kind::Uniform:
      return d.a + (d.b - d.a) * uniform01_ref(r);
    default:
      return uniform01_ref(r);
  }
}

}  // namespace

// The values are the generator's definition, bit for bit, fused or not — Bernoulli draws at
// probabilities whose threshold is exact or rounds (Note [Bernoulli threshold]) among them.
TEST(FusionRandom, DrawsAreTheGeneratorsDefinition) {
  const Distribution dists[] = {
      Distribution::default_(),          Distribution::uniform(-3, 4.3),
      Distribution::normal(2, 3),        Distribution::bernoulli(0.3),
      Distribution::bernoulli(0.5),      Distribution::bernoulli(0.0),
      Distribution::bernoulli(1.0),      Distribution::bernoulli(std::ldexp(1.0, -60)),
      Distribution::bernoulli(1 - 1e-9), Distribution::bernoulli(std::nextafter(0.75, 1.0))};
  const std::uint64_t key = 0x1234abcd5678ef01ULL;
  for (const Device& d : {Device::cpu(), fused()}) {
    for (const Distribution& dist : dists) {
      d.seed(key);
      // (r * 1 keeps the draw's value and makes the fused draw an instruction of a group.)
      const auto v =
          ops::binary_scalar(ir::BinaryFn::Mul, ops::random(Shape{4099}, dist, DType::F64, d), 1.0)
              .to_data()
              .to_vector<double>();
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < v.size(); ++i) {
        const double want = value_ref(dist, key, i);
        wrong += std::memcmp(&v[i], &want, sizeof want) != 0;
      }
      EXPECT_EQ(wrong, 0u) << d.name() << " kind " << static_cast<int>(dist.kind) << " a "
                           << dist.a;
    }
  }
}

// ---- on the first Cuda device, where there is one (skipped here otherwise) ----

namespace {

bool have_cuda() {
  const auto a = Device::available();
  return std::find(a.begin(), a.end(), "cuda:0") != a.end();
}

}  // namespace

// The same programs on cuda:0: the fused kernel draws with the Random kernel's code (Note
// [Fused draws]), at the counters reserved when recorded, so it reads the plain device's
// bits; the draws are inside the groups.
TEST(FusionRandomCuda, DrawsInKernelsAgreeBitForBit) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  for (DType dt : kFloats) {
    for (const Shape& s : {Shape{1, 1}, Shape{7, 13}, Shape{3, 1300}, Shape{257, 4099}}) {
      const std::string what = std::string(name(dt)) + " " + s.to_string();
      expect_same_everywhere(
          [&](const Device& d) {
            return std::vector<DynTensor>{dropout(input(d, s, dt), 0.3), noisy(input(d, s, dt))};
          },
          what, gpu);
      expect_same_everywhere(
          [&](const Device& d) {
            DynTensor r = ops::random(s, Distribution::normal(0.5, 2), dt, d);
            return std::vector<DynTensor>{ops::reduce(ir::ReduceFn::Sum, std::move(r), 1)};
          },
          what + " sum", gpu);
    }
  }
  const Device d = fused(gpu);
  dropout(input(d, Shape{64, 1000}, DType::F32), 0.1).to_data();
  const auto r = fusion::report(d);
  ASSERT_EQ(r.groups, 1u) << groups_of(r);
  EXPECT_EQ(r.recent.back().ops, (std::vector<std::string_view>{"random", "mul", "mul"}));
  EXPECT_TRUE(r.recent.back().fused);
  // Two draws recorded before either runs, consumed out of order.
  expect_same_everywhere(
      [](const Device& dev) {
        DynTensor a = ops::random(Shape{9, 600}, Distribution::normal(0, 1), DType::F32, dev);
        DynTensor b = ops::random(Shape{4, 5}, Distribution::uniform(-1, 1), DType::F32, dev);
        DynTensor yb = ops::unary(ir::UnaryFn::Exp, b);
        DynTensor y = ops::binary_scalar(ir::BinaryFn::Mul, a, 2.0);
        return std::vector<DynTensor>{std::move(yb), std::move(y)};
      },
      "two draws", gpu);
}

// The same on vulkan:0 (lavapipe in CI): a draw printed in a fused kernel is the Random
// kernel's own draw function at the reserved counters, so dropout and noise give the plain
// device's bits, every float dtype the device draws.
TEST(FusionRandomVulkan, DrawsInKernelsAgreeBitForBit) {
  const auto names = Device::available();
  if (std::find(names.begin(), names.end(), "vulkan:0") == names.end())
    GTEST_SKIP() << "no Vulkan device here";
  const Device vk = Device::parse("vulkan:0");
  for (DType dt : kFloats) {
    if (!vk.backend_ptr()->supports(ir::Random{Shape{1}, dt, Distribution::normal(0, 1)})) {
      continue;  // (a dtype the device cannot store or draw)
    }
    for (const Shape& s : kShapes) {
      const std::string what = std::string(name(dt)) + " " + s.to_string();
      expect_same_everywhere(
          [&](const Device& d) {
            return std::vector<DynTensor>{dropout(input(d, s, dt), 0.3), noisy(input(d, s, dt))};
          },
          what, vk);
    }
  }
  const Device d = fused(vk);
  d.seed(3);
  dropout(input(d, Shape{64, 1000}, DType::F32), 0.1).to_data();
  const auto r = fusion::report(d);
  ASSERT_FALSE(r.recent.empty());
  const auto& g = r.recent.back();
  EXPECT_NE(std::find(g.ops.begin(), g.ops.end(), "random"), g.ops.end()) << groups_of(r);
  EXPECT_TRUE(g.fused) << groups_of(r);
}

// The differential's seed 82000253 (a ptxas miscompile of the Bernoulli's double select:
// Note [Bernoulli in its own type] in src/cuda/codegen/creation.cpp): the group
// [random greater where] of an f16 Bernoulli draw compared with an input, the plan of a first
// size reused at a second, with the draw kept or elided, gives the plain device's bits; also
// in f32 and under other seeds. Each differing result names its elements.
TEST(FusionRandomCuda, BernoulliWhereGroupsAgreeBitForBit) {
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  const Device fd = fused(gpu);
  for (DType dt : {DType::F16, DType::F32}) {
    for (int keep2 = 0; keep2 < 2; ++keep2) {
      for (std::uint64_t seed : {82000253ull, 1ull, 2ull, 3ull, 4ull, 5ull, 6ull, 7ull}) {
        for (const Shape& s : {Shape{7, 2}, Shape{10, 5}, Shape{10, 5}, Shape{33, 17}}) {
          const auto run = [&](const Device& d) {
            d.seed(seed);
            DynTensor v0 = input(d, s, dt);
            DynTensor v2 = ops::random(s, Distribution::bernoulli(0.4), dt, d);
            std::vector<TensorData> r;
            if (keep2) {
              DynTensor m = ops::binary(ir::BinaryFn::Gt, v2, v0);
              DynTensor v3 = ops::mask_where(std::move(m), v2, v0);
              r.push_back(v3.to_data());
              r.push_back(v2.to_data());
            } else {
              DynTensor x = std::move(v2);
              DynTensor m = ops::binary(ir::BinaryFn::Gt, x, v0);
              DynTensor v3 = ops::mask_where(std::move(m), std::move(x), v0);
              r.push_back(v3.to_data());
            }
            r.push_back(v0.to_data());
            return r;
          };
          const auto a = run(gpu), b = run(fd);
          for (std::size_t k = 0; k < a.size(); ++k) {
            const auto x = a[k].convert(DType::F64).to_vector<double>();
            const auto y = b[k].convert(DType::F64).to_vector<double>();
            std::string diff;
            for (std::size_t i = 0; i < x.size(); ++i)
              if (x[i] != y[i])
                diff += " [" + std::to_string(i) + "] " + std::to_string(x[i]) + "/" +
                        std::to_string(y[i]);
            EXPECT_TRUE(diff.empty())
                << name(dt) << (keep2 ? ", draw kept" : ", draw elided") << ", seed " << seed
                << ", " << s.to_string() << ", result " << k << " (plain / fused):" << diff;
          }
        }
      }
    }
  }
}
