// The Fusion decorator as a device: names and composition, the lazy stream and when it
// flushes, drops, errors raised at the read, threads, the pass-through. Values are checked
// against the plain Cpu (bit for bit) and against closed forms.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <ember/ember.hpp>
#include <ember/fusion/fusion.hpp>
#include "support/forwarding_backend.hpp"

using namespace ember;
using fusion::CloseReason;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::size_t at(const std::array<std::size_t, std::size_t(CloseReason::Count_)>& a, CloseReason r) {
  return a[static_cast<std::size_t>(r)];
}

Device fused_with(const fusion::Options& o) {
  return Device(fusion::make_fusion_backend(Device::cpu().backend_ptr(), o));
}

std::vector<float> values(const Tensor<2>& t) { return t.to_data().to_vector<float>(); }

Tensor<2> input(const Device& d, std::size_t r, std::size_t c, float scale) {
  std::vector<float> v(r * c);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * (float(i % 17) - 8.0f) / 7.0f;
  return Tensor<2>::from_data(TensorData::from<float>(v, Shape{r, c}), d);
}

// exp then argmin over the rows of a [5, cols] input: a reduction whose prologue is fused.
std::vector<std::int64_t> exp_argmin(const Device& dev, std::size_t cols) {
  return (input(dev, 5, cols, 2.0f) - 1.0f).exp().argmin_dim(1).to_data().to_vector<std::int64_t>();
}

}  // namespace

TEST(FusionDevice, NamesParseAndCompose) {
  const Device f = Device::cpu().fusion();
  EXPECT_EQ(f.name(), "cpu+fusion");
  EXPECT_EQ(Device::parse("cpu+fusion"), f);
  EXPECT_EQ(f.inner(), Device::cpu());
  EXPECT_TRUE(fusion::is_fused(f));
  EXPECT_FALSE(fusion::is_fused(Device::cpu()));
  const Device fa = Device::parse("cpu+fusion+autodiff");
  EXPECT_EQ(fa, Device::cpu().fusion().autodiff());
  EXPECT_TRUE(fa.is_autodiff());
  EXPECT_TRUE(fusion::is_fused(fa));
  EXPECT_TRUE(has(error_of([] { fusion::report(Device::cpu()); }), "no fusion decorator"));
}

TEST(FusionDevice, AutodiffInsideFusionIsRefused) {
  const std::string m = error_of([] { Device::cpu().autodiff().fusion(); });
  EXPECT_TRUE(has(m, "Device::fusion()") && has(m, "fusion().autodiff()")) << m;
  EXPECT_TRUE(has(error_of([] { Device::parse("cpu+autodiff+fusion"); }), "autodiff goes outside"));
}

// Gradients through fusion equal the plain device's, bit for bit.
TEST(FusionDevice, AutodiffOverFusionGivesTheSameGradients) {
  const auto grad_on = [](const Device& d) {
    auto x = input(d, 5, 7, 0.7f).require_grad();
    auto w = input(d, 7, 3, -0.4f).require_grad();
    auto y = activation::relu(x.matmul(w) * 1.5f + 0.25f).exp();
    auto loss = (y * y.tanh()).sum();
    Gradients g = loss.backward();
    return std::make_pair(x.grad(g).value().to_data().to_vector<float>(),
                          w.grad(g).value().to_data().to_vector<float>());
  };
  const auto plain = grad_on(Device::cpu().autodiff());
  const auto fused = grad_on(Device::cpu().fusion().autodiff());
  EXPECT_EQ(plain.first, fused.first);
  EXPECT_EQ(plain.second, fused.second);
}

// Ops are recorded, not run, until a read.
TEST(FusionDevice, RecordsLazilyAndFlushesOnRead) {
  const Device d = fused_with({});
  auto x = input(d, 3, 5, 1.0f);
  auto y = ((x * 2.0f + 1.0f).exp() - x).abs();
  auto r = fusion::report(d);
  EXPECT_EQ(r.records, 5u);  // a scalar operand is no record (Note [Scalar constants])
  EXPECT_EQ(r.flushes, 0u);
  const auto got = values(y);
  r = fusion::report(d);
  EXPECT_EQ(r.flushes, 1u);
  EXPECT_EQ(at(r.flushed, CloseReason::Read), 1u);
  auto xs = values(x);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double want = std::fabs(std::exp(2.0 * xs[i] + 1.0) - xs[i]);
    EXPECT_NEAR(got[i], want, 1e-5 * want) << i;
  }
  const auto plain = values(
      ((input(Device::cpu(), 3, 5, 1.0f) * 2.0f + 1.0f).exp() - input(Device::cpu(), 3, 5, 1.0f))
          .abs());
  EXPECT_EQ(got, plain);
  // into_scalar and sync flush too.
  auto s = (x * 3.0f).sum();
  EXPECT_NEAR(
      s.into_scalar<float>(),
      3.0 *
          [&] {
            double t = 0;
            for (float v : xs) t += v;
            return t;
          }(),
      1e-4);
  auto z = x + 1.0f;
  d.sync();
  EXPECT_EQ(at(fusion::report(d).flushed, CloseReason::Sync), 1u);
}

// Note [Scalar constants]: a one-element Fill is no record; the groups that read it take it
// as a Fill instruction, and it runs only where it is needed in memory: read, read by an op
// run alone, read from another thread — whenever that comes, as often as it is read.
TEST(FusionDevice, ScalarConstantsRunOnlyWhereNeededInMemory) {
  const Device d = fused_with({});
  auto x = input(d, 3, 5, 1.0f);
  x.to_data();
  fusion::reset_report(d);
  auto half = Tensor<2>::full(Shape{1, 1}, 0.5, d);
  auto three = Tensor<2, Int>::full(Shape{1, 1}, 3, d);
  EXPECT_EQ(fusion::report(d).records, 0u);
  auto y = x * half + half;  // one group of two ops, both reading the constant
  const auto plain_x = values(input(Device::cpu(), 3, 5, 1.0f));
  const auto got = values(y);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], plain_x[i] * 0.5f + 0.5f) << i;
  auto r = fusion::report(d);
  EXPECT_EQ(r.records, 2u);
  EXPECT_EQ(r.groups, 1u);
  EXPECT_EQ(r.ops_unfused, 0u);  // the constant never ran
  // Read by an op that cannot fuse (run at once), by a later group, and from another
  // thread: each finds the value.
  auto c = half.cumsum(0);
  EXPECT_EQ(values(c), std::vector<float>{0.5f});
  EXPECT_EQ(values((x - half).abs()), values((input(Device::cpu(), 3, 5, 1.0f) - 0.5f).abs()));
  auto late = Tensor<2>::full(Shape{1, 1}, -2.0, d);
  std::vector<float> from_thread;
  std::thread([&] { from_thread = values(x * late); }).join();
  EXPECT_EQ(from_thread, values(input(Device::cpu(), 3, 5, 1.0f) * -2.0f));
  EXPECT_EQ(values(late), std::vector<float>{-2.0f});
  // An integer constant (its bits from the integer value) and a read of it.
  auto i = Tensor<1, Int>::arange(0, 6, d).reshape<2>(Shape{2, 3}).mul(three);
  EXPECT_EQ(i.to_data().to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 3, 6, 9, 12, 15}));
  EXPECT_EQ(three.to_data().to_vector<std::int64_t>(), std::vector<std::int64_t>{3});
}

TEST(FusionDevice, NonFusableAndDataDependentOpsFlush) {
  const Device d = fused_with({});
  auto x = input(d, 4, 4, 1.0f);
  auto y = (x + 1.0f).cumsum(1);
  EXPECT_EQ(at(fusion::report(d).flushed, CloseReason::NonFusableOp), 1u);
  auto nz = (x - 1.0f).greater_elem(0.0f).nonzero();
  EXPECT_EQ(at(fusion::report(d).flushed, CloseReason::DataDependent), 1u);
  const auto xs = values(x);
  std::size_t count = 0;
  for (float v : xs) count += v - 1.0f > 0.0f;
  EXPECT_EQ(nz.shape(), (Shape{count, 2}));
  (void)y;
}

TEST(FusionDevice, CapsFlushTheStream) {
  fusion::Options o;
  o.max_records = 4;
  const Device d = fused_with(o);
  auto x = input(d, 2, 3, 1.0f);
  for (int i = 0; i < 10; ++i) x = x + 1.0f;  // 10 records: the adds (the 1s are none)
  EXPECT_EQ(at(fusion::report(d).flushed, CloseReason::StreamCap), 2u);
  const auto got = values(x);
  const auto base = values(input(Device::cpu(), 2, 3, 1.0f));
  for (std::size_t i = 0; i < got.size(); ++i) {
    float want = base[i];
    for (int k = 0; k < 10; ++k) want += 1.0f;
    EXPECT_EQ(got[i], want);
  }
  fusion::Options m;
  m.max_pending_bytes = 64;  // 24 bytes per tensor
  const Device dm = fused_with(m);
  auto y = input(dm, 2, 3, 1.0f);
  // Outputs dropped as they are consumed never need memory: no flush.
  auto z = ((y + 1.0f) * 2.0f - 3.0f) * 4.0f;
  EXPECT_EQ(at(fusion::report(dm).flushed, CloseReason::MemoryBudget), 0u);
  // Three referenced outputs do: the third op flushes.
  auto a = y + 1.0f;
  auto b = a * 2.0f;
  auto c = b - 3.0f;
  EXPECT_EQ(at(fusion::report(dm).flushed, CloseReason::MemoryBudget), 1u);
  EXPECT_EQ(values(c), values(((input(Device::cpu(), 2, 3, 1.0f) + 1.0f) * 2.0f) - 3.0f));
}

// A value error inside the stream surfaces at the read, naming the op; what depends on it
// fails the same way.
TEST(FusionDevice, ErrorsSurfaceAtTheRead) {
  const Device d = fused_with({});
  auto a = Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({4, 5, 6}, Shape{3}), d);
  auto b = Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({1, 0, 2}, Shape{3}), d);
  auto q = a / b;
  auto r = q + a;
  const std::string m = error_of([&] { r.to_data(); });
  EXPECT_TRUE(has(m, "division by zero")) << m;
  EXPECT_TRUE(has(error_of([&] { q.to_data(); }), "division by zero"));
  EXPECT_TRUE(has(error_of([&] { (q * a).to_data(); }), "division by zero"));
  // The stream goes on working.
  EXPECT_EQ((a + a).to_data().to_vector<std::int64_t>(), (std::vector<std::int64_t>{8, 10, 12}));
}

TEST(FusionDevice, HandlesCrossThreads) {
  const Device d = fused_with({});
  auto x = input(d, 3, 3, 1.0f);
  auto y = x * 2.0f;  // pending in this thread's stream
  Tensor<2> z = x;
  std::thread t([&] { z = (y + 1.0f).exp(); });  // flushes this thread's stream
  t.join();
  EXPECT_GE(at(fusion::report(d).flushed, CloseReason::CrossThread), 1u);
  // The other thread's stream was flushed when the thread ended.
  EXPECT_GE(at(fusion::report(d).flushed, CloseReason::ThreadExit), 1u);
  EXPECT_EQ(values(z), values((input(Device::cpu(), 3, 3, 1.0f) * 2.0f + 1.0f).exp()));
}

// Values and handles come from per-thread free lists (Note [Value blocks]): values made on
// a thread that has ended, read on another and dropped on a third that never made one,
// keep their numbers (and, under AddressSanitizer, nothing leaks or is used after a free).
TEST(FusionDevice, ValuesOutliveTheThreadsThatMadeAndDropThem) {
  const Device d = fused_with({});
  const std::size_t n = 300;  // more than one stream's worth of records (256)
  std::vector<Tensor<2>> made;
  std::thread maker([&] {
    for (std::size_t i = 0; i < n; ++i) {
      made.push_back(Tensor<2>::full(Shape{1, 3}, double(i), d) * 2.0f + 1.0f);
    }
  });
  maker.join();
  ASSERT_EQ(made.size(), n);
  for (std::size_t i = 0; i < n; i += 37) {
    const float want = static_cast<float>(2 * i + 1);  // exact in f32
    EXPECT_EQ(values(made[i]), (std::vector<float>{want, want, want})) << i;
  }
  std::thread dropper([&] { made.clear(); });
  dropper.join();
  // The device goes on working on this thread.
  EXPECT_EQ(values(input(d, 1, 2, 1.0f) * 2.0f), values(input(Device::cpu(), 1, 2, 1.0f) * 2.0f));
}

// Note [Counted before the drop]: a Ready value with a read pending in another thread's
// stream, its last handle moved into an op on this thread while the other thread flushes.
// The other flush must not take the value away from the read this thread records: before the
// fix the read was counted after the drop, and a flush in between moved the value out (the
// invariant stop "a group input is Consumed"). Each round is a timed race, so the test can
// catch the bug, never prove it absent; the fusion differential's two-thread programs run
// the same pattern (under TSan in CI too).
TEST(FusionDevice, AReadIsCountedBeforeItsHandleDrops) {
  const Device d = fused_with({});
  // Up to 20,000 rounds or 2 s (the old order failed within a few hundred rounds, 5 runs in 6).
  constexpr int kRounds = 20000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::vector<std::vector<float>> plus_one, twice;
  for (int k = 0; k < 7; ++k) {
    plus_one.push_back(values(input(Device::cpu(), 1, 4, float(k)) + 1.0f));
    twice.push_back(values(input(Device::cpu(), 1, 4, float(k)) * 2.0f));
  }
  std::atomic<int> phase{0};
  std::atomic<bool> stop{false};
  std::vector<std::optional<Tensor<2>>> theirs(kRounds);
  std::vector<std::vector<float>> read(kRounds);
  std::thread other([&] {
    for (int r = 0; r < kRounds; ++r) {
      while (phase.load() < 3 * r + 1) {
        if (stop.load()) return;
        std::this_thread::yield();
      }
      auto y = *theirs[r] * 2.0f;  // a read pending in this thread's stream
      theirs[r].reset();           // this thread's handle gone: the other one is the last
      phase.fetch_add(1);
      while (phase.load() < 3 * r + 3) std::this_thread::yield();
      read[r] = values(y);  // the flush: this read takes the value
    }
  });
  int rounds = 0;
  for (; rounds < kRounds && std::chrono::steady_clock::now() < deadline; ++rounds) {
    const int r = rounds;
    auto x = input(d, 1, 4, float(r % 7));  // Ready
    theirs[r] = x;
    phase.fetch_add(1);
    while (phase.load() < 3 * r + 2) std::this_thread::yield();
    phase.fetch_add(1);
    auto z = std::move(x) + 1.0f;  // the last handle, moved in while the other flushes
    if (values(z) != plus_one[r % 7]) ADD_FAILURE() << "round " << r;
  }
  stop.store(true);
  other.join();
  EXPECT_GT(rounds, 100);
  for (int r = 0; r < rounds; ++r) {
    if (read[r] != twice[r % 7]) ADD_FAILURE() << "the other thread's read, round " << r;
  }
}

TEST(FusionDevice, PassThroughRunsEveryOpAtOnce) {
  fusion::Options o;
  o.enabled = false;
  const Device d = fused_with(o);
  auto x = input(d, 3, 5, 1.0f);
  auto y = (x * 2.0f + 1.0f).exp();
  auto r = fusion::report(d);
  EXPECT_EQ(r.records, 0u);
  EXPECT_EQ(r.ops_unfused, 5u);
  EXPECT_EQ(values(y), values((input(Device::cpu(), 3, 5, 1.0f) * 2.0f + 1.0f).exp()));
  EXPECT_EQ(fusion::report(d).flushes, 0u);
}

// Note [Ops run at once, counted by their stream]: an op that cannot fuse, with nothing
// pending, runs at once and counts as a record run alone — counted by its thread's stream,
// and by the report once that thread has ended; a reset starts the count again.
TEST(FusionDevice, OpsRunAtOnceCountInTheReport) {
  const Device d = fused_with({});
  auto x = input(d, 3, 5, 1.0f);
  x.to_data();
  fusion::reset_report(d);
  auto y = x.cumsum(1).cumsum(0).cumsum(1);  // three at once, nothing pending
  std::thread([&] {
    auto z = x.cumsum(0).cumsum(0);  // two more, on a stream that ends with its thread
    z.to_data();
  }).join();
  auto r = fusion::report(d);
  EXPECT_EQ(r.records, 5u);
  EXPECT_EQ(r.ops_unfused, 5u);
  EXPECT_EQ(r.kernels, 5u);
  EXPECT_EQ(r.flushes, 0u);
  fusion::reset_report(d);
  EXPECT_EQ(fusion::report(d).records, 0u);
  auto w = y.cumsum(0);
  r = fusion::report(d);
  EXPECT_EQ(r.records, 1u);
  EXPECT_EQ(r.ops_unfused, 1u);
  auto c = input(Device::cpu(), 3, 5, 1.0f);
  EXPECT_EQ(values(w), values(c.cumsum(1).cumsum(0).cumsum(1).cumsum(0)));
}

// An rvalue is consumed through the decorator as unfused: the same values whether or not
// another reference exists (clone invariance).
TEST(FusionDevice, CloneInvariance) {
  const Device d = fused_with({});
  auto a = input(d, 4, 6, 1.0f);
  Tensor<2> keep = a;
  auto moved = (std::move(a) * 3.0f).exp();
  auto b = input(d, 4, 6, 1.0f);
  auto copied = (b * 3.0f).exp();
  EXPECT_EQ(values(moved), values(copied));
  EXPECT_EQ(values(keep), values(input(Device::cpu(), 4, 6, 1.0f)));
}

// A chain of element-wise ops on one input is one group: one program, the intermediates
// never written, and the values of the plain Cpu bit for bit.
TEST(FusionElementwise, AChainIsOneGroup) {
  const Device d = fused_with({});
  const auto chain = [](Tensor<2> x, Tensor<2> b) {
    return ((x * 0.5f + b).exp().tanh() * x - 0.25f).abs();
  };
  auto x = input(d, 33, 47, 1.3f);
  auto b = input(d, 1, 47, -0.6f);  // broadcast along rows
  auto y = chain(x, b);
  const auto got = values(y);
  const auto r = fusion::report(d);
  ASSERT_EQ(r.groups, 1u);
  const auto& g = r.recent.back();
  EXPECT_EQ(g.ops,
            (std::vector<std::string_view>{"mul", "add", "exp", "tanh", "mul", "sub", "abs"}));
  EXPECT_EQ(g.inputs, 2u);   // x and b
  EXPECT_EQ(g.sources, 2u);  // the scalars: parameters, never read from memory
  EXPECT_EQ(g.outputs, 1u);
  EXPECT_EQ(g.elided, 6u);
  EXPECT_EQ(g.bytes_saved, 6u * 2 * 33 * 47 * 4);  // each written once and read once
  EXPECT_TRUE(g.fused);
  EXPECT_EQ(g.closed, CloseReason::Read);
  EXPECT_EQ(got,
            values(chain(input(Device::cpu(), 33, 47, 1.3f), input(Device::cpu(), 1, 47, -0.6f))));
  // The same chain at other sizes reuses the plan (same liveness: the inputs kept).
  auto x2 = input(d, 5, 1000, 0.9f);
  auto b2 = input(d, 1, 1000, 0.2f);
  auto y2 = chain(x2, b2);
  y2.to_data();
  EXPECT_TRUE(fusion::report(d).recent.back().plan_cached);
  EXPECT_EQ(fusion::report(d).plans_built, 1u);
  // Other scalar values: the same plan (a scalar is a parameter, not part of the key).
  const auto chain2 = [](Tensor<2> x, Tensor<2> b) {
    return ((x * -1.75f + b).exp().tanh() * x - 3.0f).abs();
  };
  const auto got2 = values(chain2(input(d, 7, 9, 1.1f), input(d, 1, 9, 0.4f)));
  EXPECT_TRUE(fusion::report(d).recent.back().plan_cached);
  EXPECT_EQ(fusion::report(d).plans_built, 1u);
  EXPECT_EQ(got2,
            values(chain2(input(Device::cpu(), 7, 9, 1.1f), input(Device::cpu(), 1, 9, 0.4f))));
}

// A scalar read by a group and also by an op run alone, or still held, is in memory too.
TEST(FusionElementwise, ScalarSourcesAreStoredWhenSomethingElseNeedsThem) {
  const Device d = fused_with({});
  auto x = input(d, 4, 5, 1.0f);
  auto s = Tensor<2>::full(Shape{1, 1}, 2.5f, d);  // held: read after the flush
  auto y = (x * s).exp() + s;
  auto m = y.matmul(s.expand<2>(Shape{5, 1}));  // a non-fusable op reads the scalar (a view)
  const auto yv = values(y), mv = values(m), sv = values(s);
  const auto r = fusion::report(d);
  ASSERT_GE(r.groups, 1u) << r.groups;
  EXPECT_EQ(sv, std::vector<float>{2.5f});
  const Device c = Device::cpu();
  auto xc = input(c, 4, 5, 1.0f);
  auto sc = Tensor<2>::full(Shape{1, 1}, 2.5f, c);
  auto yc = (xc * sc).exp() + sc;
  EXPECT_EQ(yv, values(yc));
  EXPECT_EQ(mv, values(yc.matmul(sc.expand<2>(Shape{5, 1}))));
}

// 16-bit floats: every intermediate rounded as if stored, as unfused.
TEST(FusionElementwise, HalfIntermediatesRoundAsStored) {
  for (DType dt : {DType::F16, DType::BF16}) {
    const auto run = [&](const Device& d) {
      auto x = input(d, 9, 130, 2.1f).cast(dt);
      auto y = input(d, 130, 9, 0.7f).cast(dt).transpose();  // a strided input
      auto z = (activation::sigmoid(x * y + 1.0f) * x).sqrt() - y;
      return z.cast(DType::F32).to_data().template to_vector<float>();
    };
    const Device d = fused_with({});
    const auto got = run(d);
    const auto want = run(Device::cpu());
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
          << name(dt) << " " << i << ": " << got[i] << " vs " << want[i];
    }
    EXPECT_GE(fusion::report(d).ops_fused, 6u) << name(dt);
  }
}

// Kept intermediates are outputs; a consumer of another shape closes the group.
TEST(FusionElementwise, KeptValuesAreWrittenAndShapesCloseGroups) {
  const Device d = fused_with({});
  auto x = input(d, 6, 8, 1.0f);
  auto kept = (x * 2.0f).exp();
  auto y = kept.sin() + x;
  auto s = y.sum_dim(1) * 3.0f;  // the scale is the sum's epilogue (Note [Row epilogues])
  const auto sv = s.to_data().to_vector<float>();
  const auto r = fusion::report(d);
  ASSERT_GE(r.groups, 1u);
  EXPECT_EQ(r.recent.front().ops,
            (std::vector<std::string_view>{"mul", "exp", "sin", "add", "sum", "mul"}));
  EXPECT_EQ(r.recent.front().outputs, 3u);  // kept, y and the scaled sum
  EXPECT_EQ(r.recent.front().closed, CloseReason::Read);
  const Device c = Device::cpu();
  auto xc = input(c, 6, 8, 1.0f);
  auto kc = (xc * 2.0f).exp();
  EXPECT_EQ(values(kept), values(kc));
  EXPECT_EQ(sv, ((kc.sin() + xc).sum_dim(1) * 3.0f).to_data().to_vector<float>());
}

// ---- canonical patterns: the fuser fires where it should (via the report) and the values
// are the plain Cpu's, bit for bit ----
namespace {

// The latest group of the report whose ops are exactly `ops`, or null.
const fusion::FusionGroupInfo* group_with(const fusion::FusionReport& r,
                                          const std::vector<std::string_view>& ops) {
  for (auto g = r.recent.rbegin(); g != r.recent.rend(); ++g) {
    if (g->ops == ops) return &*g;
  }
  return nullptr;
}

// The latest group whose ops begin with `ops` (a row op's group may go on with an epilogue:
// Note [Row epilogues]), or null.
const fusion::FusionGroupInfo* group_starting(const fusion::FusionReport& r,
                                              const std::vector<std::string_view>& ops) {
  for (auto g = r.recent.rbegin(); g != r.recent.rend(); ++g) {
    if (g->ops.size() >= ops.size() && std::equal(ops.begin(), ops.end(), g->ops.begin()))
      return &*g;
  }
  return nullptr;
}

std::string groups_of(const fusion::FusionReport& r) {
  std::string s;
  for (const auto& g : r.recent) {
    s += "[";
    for (const auto& o : g.ops) (s += o) += " ";
    s += "] ";
  }
  return s;
}

// The canonical patterns, on any device.
std::vector<float> mlp_block(const Device& d) {
  auto x = input(d, 16, 24, 0.8f);
  auto w1 = input(d, 24, 32, 0.3f);
  auto b1 = input(d, 1, 32, 0.5f);
  auto w2 = input(d, 32, 8, -0.2f);
  auto h = activation::gelu(x.matmul(w1) + b1);
  return values(activation::relu(h.matmul(w2)) * 0.5f);
}

std::vector<float> scaled_softmax(const Device& d) {
  auto s = input(d, 12, 12, 2.0f);
  auto mask = Tensor<2>::triu_mask(Shape{12, 12}, 1, d);
  auto logits = (s * 0.125f).mask_fill(mask, -1e9);
  return values(activation::softmax(logits, 1));
}

std::vector<float> norm_residual(const Device& d) {
  auto x = input(d, 8, 64, 1.0f);
  auto f = input(d, 8, 64, -0.7f);
  auto y = module_ops::layer_norm(x + f * 0.5f, Shape{64});
  return values(y + x);
}

std::vector<float> adam_update(const Device& d) {
  auto p = input(d, 40, 30, 1.0f);
  auto g = input(d, 40, 30, 0.3f);
  auto m = input(d, 40, 30, 0.1f);
  auto v = input(d, 40, 30, 0.05f).abs();
  const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f, eps = 1e-8f;
  m = m * b1 + g * (1 - b1);
  v = v * b2 + g * g * (1 - b2);
  auto mhat = m / (1 - b1 * b1);
  auto vhat = v / (1 - b2 * b2);
  p = p - mhat / (vhat.sqrt() + eps) * lr;
  auto out = values(p);
  auto mv = values(m);
  out.insert(out.end(), mv.begin(), mv.end());
  return out;
}

}  // namespace

// Note [Outputs in place] (cpu/kernels/fused.cpp): a group keeping several values, of
// f32 and bool, over rows the Cpu splits over its threads ([512, 256]), writes each kept
// value straight into its output on every thread: bit for bit the plain Cpu's values, and
// a group read after a smaller one (whose lists the threads held before).
TEST(FusionElementwise, KeptValuesAreWrittenInPlaceOnEveryThread) {
  const auto run = [](const Device& d) {
    auto small = input(d, 3, 4, 1.0f);
    auto sv = values((small * 2.0f).exp() + small);  // a group of one output first
    auto x = input(d, 512, 256, 1.0f);
    auto row = input(d, 1, 256, 0.25f);  // broadcast: the space stays 512 rows of 256
    auto a = (x * 0.5f + row).exp();
    auto b = a.sin() * x;
    auto m = b.greater_elem(0.1f);
    auto y = (b + a).tanh();
    std::vector<float> out = values(y);
    for (const auto& v : {values(a), values(b), sv}) out.insert(out.end(), v.begin(), v.end());
    const auto mv = m.to_data().convert(DType::F32).to_vector<float>();
    out.insert(out.end(), mv.begin(), mv.end());
    return out;
  };
  const Device d = fused_with({});
  const auto fused = run(d);
  const auto r = fusion::report(d);
  const auto* g = group_with(r, {"mul", "add", "exp", "sin", "mul", "greater", "add", "tanh"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->outputs, 4u);  // a, b, m and y
  EXPECT_EQ(fused, run(Device::cpu()));
}

// Note [Outputs in place] where outputs take inputs' buffers: m's buffer goes to m2,
// whose instruction is the last to read m — written in place; t's goes to a = exp(t), but
// b = a * t reads t after it — a is stored only once b has read t. Bit for bit the plain
// Cpu's values.
TEST(FusionElementwise, KeptValuesInPlaceOfInputsOnlyOnceRead) {
  const auto run = [](const Device& d) {
    auto x = input(d, 64, 96, 1.0f);
    auto m = input(d, 64, 96, 0.5f);
    auto t = input(d, 64, 96, -0.3f);
    auto m2 = std::move(m) * 0.9f + x * 0.1f;
    auto [a, b] = [&] {
      auto tt = std::move(t);
      auto e = tt.exp();
      auto f = e * tt;
      return std::pair{e, f};
    }();
    std::vector<float> out = values(m2);
    for (const auto& v : {values(a), values(b)}) out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  const Device d = fused_with({});
  const auto fused = run(d);
  const auto r = fusion::report(d);
  const auto* g = group_with(r, {"mul", "mul", "add", "exp", "mul"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->outputs, 3u);
  EXPECT_EQ(fused, run(Device::cpu()));
}

// Reshapes of group values are relabellings inside the group (Note [Reshapes in a group]):
// ember-bench's elementwise_chain — (0.5 x + 1) as [B*M, N], exp(y) * y as [B, M*N], tanh,
// back to [B, M, N] — is one program, bit for bit the plain Cpu's and close to f64.
namespace {

// ember-bench's elementwise_chain on [3, 37, 29] (rows of 29 and 1073: tiles cross them),
// read after y and z are gone, as the bench reads it.
float chain_input(std::size_t i) { return (float(i % 23) - 11.0f) / 9.0f; }
std::vector<float> reshape_chain(const Device& dev) {
  const std::size_t b = 3, m = 37, n = 29;
  const Shape shape{b, m, n}, rows{b * m, n}, flat{b, m * n};
  std::vector<float> xv(shape.num_elements());
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = chain_input(i);
  const auto chain = [&] {
    auto x = Tensor<3>::from_data(TensorData::from<float>(xv, shape), dev);
    auto y = x.mul_scalar(0.5).add_scalar(1.0).reshape<2>(rows);
    auto z = y.exp().mul(y).reshape<2>(flat);
    return std::move(z).tanh().reshape<3>(shape);
  };
  return chain().to_data().to_vector<float>();
}

// Groups whose iteration space refines several shapes ([4, 6], [4, 2, 3], [2, 12], [8, 3]:
// [2, 2, 2, 3]), with inputs broadcast in each, a reduction along the last dim of one, and
// a reshape that no refinement serves ([4, 2, 3] as [6, 4]). Returns the sum, z and q.
std::vector<float> reshaped_groups(const Device& dev) {
  const auto make = [&](const Shape& sh, float scale) {
    std::vector<float> v(sh.num_elements());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * (float(i % 7) - 3.0f) / 4.0f;
    return DynTensor::from_data(TensorData::from<float>(v, sh), dev);
  };
  auto x = Tensor<2>(make(Shape{4, 6}, 1.0f));
  auto b = Tensor<2>(make(Shape{1, 6}, 0.5f));
  auto c = Tensor<3>(make(Shape{1, 2, 1}, -1.5f));
  auto dd = Tensor<2>(make(Shape{2, 1}, 2.0f));
  auto y = x.exp() + b;
  auto z = y.reshape<3>(Shape{4, 2, 3}) * c;  // kept
  auto w = z.reshape<2>(Shape{2, 12}) + dd;
  auto s = w.reshape<2>(Shape{8, 3}).sum_dim(1);
  auto q = (z * 2.0f).exp().reshape<2>(Shape{6, 4}).abs();
  std::vector<float> out = s.to_data().to_vector<float>();
  for (const auto& v : {z.to_data().to_vector<float>(), q.to_data().to_vector<float>()})
    out.insert(out.end(), v.begin(), v.end());
  return out;
}

}  // namespace

TEST(FusionElementwise, ReshapesOfGroupValuesStayInTheGroup) {
  const Device d = fused_with({});
  const auto got = reshape_chain(d);
  const auto r = fusion::report(d);
  ASSERT_EQ(r.groups, 1u) << groups_of(r);
  EXPECT_EQ(r.ops_unfused, 0u);  // the reshapes ran inside the group
  const auto& g = r.recent.back();
  EXPECT_EQ(g.ops, (std::vector<std::string_view>{"mul", "add", "exp", "mul", "tanh"}));
  EXPECT_EQ(g.inputs, 1u);
  EXPECT_EQ(g.outputs, 1u);
  EXPECT_EQ(g.elided, 4u);
  EXPECT_TRUE(g.fused);
  const auto want = reshape_chain(Device::cpu());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double y = 0.5 * double(chain_input(i)) + 1.0;
    const double ref = std::tanh(std::exp(y) * y);
    ASSERT_NEAR(got[i], ref, 2e-6 * std::max(1.0, std::fabs(ref))) << i;
  }
}

// Outputs of 16 MiB and more are stored with non-temporal stores (Note [Streamed outputs]
// of the Cpu): the same bits, including at row pieces that start and end off a 16-byte
// boundary (rows of 4099 elements split between threads, 2-byte elements).
TEST(FusionElementwise, LargeOutputsAreStreamedWithTheSameBits) {
  for (DType dt : {DType::F32, DType::BF16}) {
    for (const bool in_place : {false, true}) {  // (the output in x's buffer, sole-owned)
      const auto run = [&](const Device& dev) {  // (16.8 MB of bf16, 33.6 MB of f32)
        auto x = input(dev, 2051, 4099, 1.7f).cast(dt);
        x.to_data();  // (computed: an input of the group)
        auto y = x * 0.5f + 1.0f;
        if (in_place) return ((std::move(x) * y) - 0.25f).abs().to_data();
        return ((x * y) - 0.25f).abs().to_data();
      };
      const Device d = fused_with({});
      const TensorData got = run(d);
      const TensorData want = run(Device::cpu());
      ASSERT_EQ(got.bytes().size(), want.bytes().size());
      EXPECT_EQ(std::memcmp(got.bytes().data(), want.bytes().data(), got.bytes().size()), 0)
          << name(dt) << (in_place ? " in place" : "");
      EXPECT_GE(fusion::report(d).groups, 1u) << name(dt);
    }
  }
}

// The iteration space refines every shape of the group; inputs broadcast in one of them are
// split to it; a reduction along the last dim of one ends the group; a reshape that no
// refinement serves closes it (reshaped_groups).
TEST(FusionElementwise, ReshapedGroupsTakeBroadcastInputsAndReductions) {
  const Device d = fused_with({});
  const auto got = reshaped_groups(d);
  const auto want = reshaped_groups(Device::cpu());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  const auto r = fusion::report(d);
  const auto* g = group_with(r, {"exp", "add", "mul", "add", "sum"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->closed, CloseReason::Reduction);
  EXPECT_EQ(g->inputs, 4u);
  EXPECT_EQ(g->outputs, 4u);  // y, z and w (held) and the sum
  EXPECT_GE(at(r.closed, CloseReason::ViewOfInternal), 1u) << groups_of(r);
}

// Reductions along rows take their element-wise prologue (Note [Fused reductions] of the
// Cpu): one program, the reduced values never written, the plain kernel's bits — in
// the kernel's order, so across rows longer than a tile and not a multiple of its lanes.
TEST(FusionPatterns, ReductionsTakeTheirPrologue) {
  const Device c = Device::cpu();
  for (const std::size_t cols : {std::size_t(7), std::size_t(1300)}) {
    const Device d = fused_with({});
    const auto exp_sum = [&](const Device& dev) {
      return (input(dev, 37, cols, 1.5f) * 0.5f).exp().sum_dim(1);
    };
    EXPECT_EQ(values(exp_sum(d)), values(exp_sum(c)));
    auto r = fusion::report(d);
    const auto* g = group_with(r, {"mul", "exp", "sum"});
    ASSERT_NE(g, nullptr) << groups_of(r);
    EXPECT_EQ(g->closed, CloseReason::Reduction);
    EXPECT_EQ(g->elided, 2u);  // x * 0.5 and its exp
    EXPECT_EQ(g->outputs, 1u);
    // exp + argmin, and a mean and a max in 16 bits (reduced in f32, as unfused).
    EXPECT_EQ(exp_argmin(d, cols), exp_argmin(c, cols));
    EXPECT_NE(group_with(fusion::report(d), {"sub", "exp", "argmin"}), nullptr)
        << groups_of(fusion::report(d));
    for (DType dt : {DType::F16, DType::BF16}) {
      const auto half = [&](const Device& dev) {
        auto x = input(dev, 6, cols, 3.0f).cast(dt);
        auto t = (x * x).tanh();
        auto mean = t.mean_dim(1).cast(DType::F32);
        auto mx = (t + x).max_dim(1).cast(DType::F32);
        auto out = values(mean);
        const auto m2 = values(mx);
        out.insert(out.end(), m2.begin(), m2.end());
        return out;
      };
      EXPECT_EQ(half(d), half(c)) << name(dt);
    }
    // (The cast of the mean is its epilogue: Note [Row epilogues].)
    EXPECT_NE(group_with(fusion::report(d), {"cast", "mul", "tanh", "mean", "cast"}), nullptr)
        << groups_of(fusion::report(d));
    // A kept prologue value is written on the way; a reduction along another dim runs alone.
    auto x = input(d, 9, cols, 0.7f);
    auto e = (x * 2.0f).exp();
    auto s = e.sum_dim(1);
    auto col = (x + 1.0f).sum_dim(0);
    auto xc = input(c, 9, cols, 0.7f);
    auto ec = (xc * 2.0f).exp();
    EXPECT_EQ(values(s), values(ec.sum_dim(1)));
    EXPECT_EQ(values(e), values(ec));
    EXPECT_EQ(values(col), values((xc + 1.0f).sum_dim(0)));
    r = fusion::report(d);
    bool kept = false;  // the group of e and s: e is one of its outputs
    for (const auto& gi : r.recent) {
      kept =
          kept || (gi.ops == std::vector<std::string_view>{"mul", "exp", "sum"} && gi.outputs == 2);
    }
    EXPECT_TRUE(kept) << groups_of(r);
  }
}

namespace {

// A [r, c] tensor of dt whose elements are f(i, j), rounded to dt.
template <class F>
Tensor<2> filled(const Device& d, std::size_t r, std::size_t c, DType dt, F f) {
  std::vector<double> v(r * c);
  for (std::size_t i = 0; i < r; ++i) {
    for (std::size_t j = 0; j < c; ++j) v[i * c + j] = f(i, j);
  }
  return Tensor<2>::from_data(TensorData::from<double>(v, Shape{r, c}).convert(dt), d);
}

// Softmax (or log-softmax) of each row of x, in f64.
std::vector<double> softmax_f64(const std::vector<double>& x, std::size_t cols, bool log) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r * cols < x.size(); ++r) {
    const double* row = x.data() + r * cols;
    double m = -INFINITY, s = 0;
    for (std::size_t j = 0; j < cols; ++j) m = std::max(m, row[j]);
    for (std::size_t j = 0; j < cols; ++j) s += std::exp(row[j] - m);
    for (std::size_t j = 0; j < cols; ++j) {
      y[r * cols + j] = log ? row[j] - m - std::log(s) : std::exp(row[j] - m) / s;
    }
  }
  return y;
}

// Layer norm of each row of x (biased variance), times w plus b, in f64.
std::vector<double> layer_norm_f64(const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, double eps) {
  const std::size_t cols = w.size();
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r * cols < x.size(); ++r) {
    const double* row = x.data() + r * cols;
    double mean = 0, var = 0;
    for (std::size_t j = 0; j < cols; ++j) mean += row[j] / double(cols);
    for (std::size_t j = 0; j < cols; ++j) var += (row[j] - mean) * (row[j] - mean) / double(cols);
    for (std::size_t j = 0; j < cols; ++j) {
      y[r * cols + j] = (row[j] - mean) / std::sqrt(var + eps) * w[j] + b[j];
    }
  }
  return y;
}

// The largest |got - want| / (atol + rtol |want|).
double worst(const TensorData& got, const std::vector<double>& want, double atol, double rtol) {
  const auto g = got.to_vector<double>();
  double e = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    e = std::max(e, std::abs(g[i] - want[i]) / (atol + rtol * std::abs(want[i])));
  }
  return e;
}

}  // namespace

// Softmax, log-softmax and layer norm take their element-wise prologue (Note [Fused rows] in
// backend/fused_group.hpp): attention's scaled, masked logits and a residual's add join the
// row op's group, are never written, and the result is the plain Cpu's bit for bit and the
// f64 reference's within the dtype's rounding — in f32, f64, f16 and bf16, for rows of 1, 7
// (odd) and 1300 (past a 512-element tile) elements.
// Note [Coarsened iteration space]: a full reduction (a loss's sum or mean) of a value the
// group computed reshapes it to one row; the group's iteration space merges to that row and
// the reduction joins, with the unfused bits. An input that cannot merge as a view (a row
// broadcast over the rows, a transposed one) leaves the reduction alone.
TEST(FusionPatterns, FullReductionsTakeTheirPrologue) {
  const Device c = Device::cpu();
  // 37 x 5000 is one row of 185,000 elements: reduced in chunks (Note [Chunked fused rows]).
  for (const std::size_t cols : {std::size_t(7), std::size_t(1300), std::size_t(5000)}) {
    const Device d = fused_with({});
    const auto loss = [&](const Device& dev) {
      auto a = input(dev, 37, cols, 1.5f), b = input(dev, 37, cols, -0.5f);
      auto e = (a * 0.5f).exp().sum();
      auto m = ((a - b) * (a - b)).mean();
      auto i = (a - 1.0f).exp().argmin();
      auto out = e.to_data().to_vector<float>();
      for (float v : m.to_data().to_vector<float>()) out.push_back(v);
      for (auto v : i.to_data().to_vector<std::int64_t>()) out.push_back(float(v));
      return out;
    };
    EXPECT_EQ(loss(d), loss(c)) << cols;
    const auto r = fusion::report(d);
    for (const std::vector<std::string_view>& ops : std::vector<std::vector<std::string_view>>{
             {"mul", "exp", "sum"}, {"sub", "sub", "mul", "mean"}, {"sub", "exp", "argmin"}}) {
      const auto* g = group_with(r, ops);
      ASSERT_NE(g, nullptr) << groups_of(r);
      EXPECT_EQ(g->closed, CloseReason::Reduction);
      EXPECT_EQ(g->outputs, 1u);
    }
    // A [1, cols] row broadcast over the rows, or a transposed input: no view merges them.
    const auto apart = [&](const Device& dev) {
      auto a = input(dev, 37, cols, 1.5f);
      auto row = input(dev, 1, cols, 0.25f);
      auto t = input(dev, cols, 37, 0.75f).transpose();
      auto s1 = (a * row).exp().sum();
      auto s2 = (a + t).exp().sum();
      auto out = s1.to_data().to_vector<float>();
      out.push_back(s2.to_data().to_vector<float>()[0]);
      return out;
    };
    fusion::reset_report(d);
    EXPECT_EQ(apart(d), apart(c)) << cols;
    const auto r2 = fusion::report(d);
    EXPECT_EQ(group_with(r2, {"mul", "exp", "sum"}), nullptr) << groups_of(r2);
    EXPECT_EQ(group_with(r2, {"add", "exp", "sum"}), nullptr) << groups_of(r2);
  }
}

// Note [Chunked fused rows]: rows the Reduce kernel reduces in chunks (2^17 elements and
// more) take their prologue too, each row's chunks over the threads, with the kernel's bits:
// sums, means, extremes and arg extremes in f32, and in bf16 (reduced in f32), a kept
// prologue value too.
TEST(FusionPatterns, LongRowsReduceInChunks) {
  const Device c = Device::cpu(), d = fused_with({});
  for (const std::size_t cols : {std::size_t(131072), std::size_t(200003)}) {
    const auto rows = [&](const Device& dev, DType dt) {
      auto x = input(dev, 3, cols, 1.5f).cast(dt);
      auto e = (x * 0.5f).exp();
      std::vector<float> out;
      for (const auto& t :
           {e.sum_dim(1), e.mean_dim(1), (x - 1.0f).max_dim(1), (x + 1.0f).min_dim(1)}) {
        for (float v : t.cast(DType::F32).to_data().to_vector<float>()) out.push_back(v);
      }
      for (const auto& t : {(x * 2.0f).argmax_dim(1), (x - 3.0f).argmin_dim(1)}) {
        for (std::int64_t v : t.to_data().to_vector<std::int64_t>()) out.push_back(float(v));
      }
      for (float v : e.cast(DType::F32).to_data().to_vector<float>()) out.push_back(v);
      return out;
    };
    for (DType dt : {DType::F32, DType::BF16}) {
      fusion::reset_report(d);
      EXPECT_EQ(rows(d, dt), rows(c, dt)) << cols << " " << name(dt);
      const auto r = fusion::report(d);
      for (const auto& ops :
           {std::vector<std::string_view>{"sub", "max"}, {"mul", "argmax"}, {"sub", "argmin"}}) {
        const auto* g = group_with(r, ops);
        ASSERT_NE(g, nullptr) << groups_of(r);
        EXPECT_TRUE(g->fused) << groups_of(r);
      }
    }
  }
}

TEST(FusionPatterns, SoftmaxAndLayerNormTakeTheirPrologue) {
  const Device c = Device::cpu();
  const std::size_t rows = 5;
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    // The dtype's rounding of a value near 1, a few times over (16-bit results round once
    // more when the f32 result is stored).
    const double tol = dt == DType::F64   ? 1e-12
                       : dt == DType::F32 ? 1e-5
                       : dt == DType::F16 ? 4e-3
                                          : 3e-2;
    for (const std::size_t cols : {std::size_t(1), std::size_t(7), std::size_t(1300)}) {
      SCOPED_TRACE(std::string(name(dt)) + ", rows of " + std::to_string(cols));
      const Device d = fused_with({});
      const auto s_of = [&](const Device& dev) {
        return filled(dev, rows, cols, dt,
                      [](auto i, auto j) { return double((i * 7 + j * 3) % 23) - 11.0; });
      };
      const auto mask_of = [&](const Device& dev) {  // additive, as attention's
        return filled(dev, rows, cols, dt,
                      [](auto i, auto j) { return (i + j) % 3 == 2 ? -1e4 : 0.0; });
      };
      // softmax(s * scale + mask) and log_softmax of the same logits.
      for (const bool log : {false, true}) {
        const auto attention = [&](const Device& dev) {
          // (The logits are a temporary, dropped before the read: never written.)
          auto y = log ? activation::log_softmax(s_of(dev) * 0.125f + mask_of(dev), 1)
                       : activation::softmax(s_of(dev) * 0.125f + mask_of(dev), 1);
          return y.to_data();
        };
        const TensorData got = attention(d);
        EXPECT_EQ(got, attention(c)) << (log ? "log_softmax" : "softmax");
        const auto r = fusion::report(d);
        const auto* g = group_with(r, {"mul", "add", log ? "log_softmax" : "softmax"});
        ASSERT_NE(g, nullptr) << groups_of(r);
        EXPECT_TRUE(g->fused);
        EXPECT_EQ(g->closed, CloseReason::Reduction);
        EXPECT_EQ(g->sources, 1u);  // the scale
        EXPECT_EQ(g->elided, 2u);   // the scaled and the masked logits
        EXPECT_EQ(g->outputs, 1u);
        std::vector<double> logits = s_of(c).to_data().to_vector<double>();
        const auto m = mask_of(c).to_data().to_vector<double>();
        const double scale = TensorData::from<float>({0.125f}).convert(dt).to_vector<double>()[0];
        for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = logits[i] * scale + m[i];
        EXPECT_LE(worst(got, softmax_f64(logits, cols, log), log ? tol * 10 : tol, tol), 1.0);
      }
      // layer_norm(x + residual) with a weight and a bias, and without.
      const auto x_of = [&](const Device& dev) {
        return filled(dev, rows, cols, dt,
                      [&](auto i, auto j) { return std::sin(double(i * cols + j)) * 3.0; });
      };
      const auto res_of = [&](const Device& dev) {
        return filled(dev, rows, cols, dt,
                      [](auto i, auto j) { return double((i + 2 * j) % 5) * 0.25; });
      };
      const auto w_of = [&](const Device& dev) {
        return Tensor<1>(filled(dev, 1, cols, dt, [](auto, auto j) {
                           return 1.0 + 0.01 * double(j % 9);
                         }).reshape<1>(Shape{cols}));
      };
      const auto b_of = [&](const Device& dev) {
        return Tensor<1>(filled(dev, 1, cols, dt, [](auto, auto j) {
                           return 0.1 * double(j % 4);
                         }).reshape<1>(Shape{cols}));
      };
      for (const bool affine : {true, false}) {
        const auto norm = [&](const Device& dev) {
          // (x + residual is a temporary, dropped before the read: never written.)
          auto y = affine ? module_ops::layer_norm(x_of(dev) + res_of(dev), w_of(dev), b_of(dev))
                          : module_ops::layer_norm(x_of(dev) + res_of(dev), Shape{cols});
          return y.to_data();
        };
        const TensorData got = norm(d);
        EXPECT_EQ(got, norm(c)) << (affine ? "with weight and bias" : "plain");
        const auto r = fusion::report(d);
        const auto* g = group_with(r, {"add", "layer_norm"});
        ASSERT_NE(g, nullptr) << groups_of(r);
        EXPECT_TRUE(g->fused);
        EXPECT_EQ(g->closed, CloseReason::Reduction);
        EXPECT_EQ(g->inputs, affine ? 4u : 2u);
        EXPECT_EQ(g->elided, 1u);  // x + residual
        std::vector<double> h = x_of(c).to_data().to_vector<double>();
        const auto res = res_of(c).to_data().to_vector<double>();
        for (std::size_t i = 0; i < h.size(); ++i) {  // the sum as stored in dt
          h[i] = TensorData::from<double>({h[i] + res[i]}).convert(dt).to_vector<double>()[0];
        }
        std::vector<double> w(cols, 1.0), b(cols, 0.0);
        if (affine) {
          w = w_of(c).to_data().to_vector<double>();
          b = b_of(c).to_data().to_vector<double>();
        }
        // (A row of one element normalises to 0 exactly: its bias.)
        EXPECT_LE(worst(got, layer_norm_f64(h, w, b, 1e-5), tol * 10, tol), 1.0);
      }
    }
  }
}

// A prologue value kept beside the row op is written on the way; a softmax along a dim
// with later extents above 1, and a layer norm whose weight the group computes (possible
// in one dimension only), close the group and run alone.
TEST(FusionPatterns, RowOpsKeepPrologueValuesAndCloseOtherwise) {
  const Device d = fused_with({});
  const Device c = Device::cpu();
  const auto prog = [](const Device& dev) {
    auto x = input(dev, 6, 600, 0.9f);
    auto e = (x * 2.0f).exp();  // kept: read after the softmax
    auto y = activation::softmax(e - 1.0f, 1);
    auto z = activation::softmax(x + 1.0f, 0);  // along the rows' dim: runs alone
    auto v = input(dev, 1, 600, 0.1f).reshape<1>(Shape{600});
    auto h = v * 0.5f;
    auto n = module_ops::layer_norm(h, h + 1.0f, v);
    const auto flat = [](const Tensor<1>& t) { return t.to_data().to_vector<float>(); };
    return std::vector<std::vector<float>>{values(y), values(e), values(z), flat(n)};
  };
  EXPECT_EQ(prog(d), prog(c));
  const auto r = fusion::report(d);
  const auto* g = group_with(r, {"mul", "exp", "sub", "softmax"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->outputs, 2u);  // e and the softmax
  EXPECT_EQ(group_with(r, {"add", "softmax"}), nullptr) << groups_of(r);
  g = group_with(r, {"mul", "add"});  // h and its weight h + 1; the layer norm alone
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->closed, CloseReason::NonFusableOp);
}

namespace {

// The Cpu as a backend with fused code for element-wise groups but none for a softmax or
// layer norm at their end, nor for row epilogues (Cuda's case): it runs such a group apart
// (Note [Row instructions apart]), counting the prologues it ran as groups.
class RowsApartCpu final : public ember::testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  backend::FusedCaps fused_caps() const override {
    backend::FusedCaps caps = inner_->fused_caps();
    caps.row_epilogue = false;
    return caps;
  }
  std::vector<ir::Handle> run_fused(backend::FusedGroup g) override {
    if (!g.ends_in_row() || g.reduces()) return inner_->run_fused(std::move(g));
    return backend::run_row_apart(*this, std::move(g), [this](backend::FusedGroup p) {
      EXPECT_FALSE(p.ends_in_row());
      ++prologues;
      return inner_->run_fused(std::move(p));
    });
  }
  std::size_t prologues = 0;
};

}  // namespace

// A backend with no fused code for the row instruction runs the prologue as one group and
// the softmax or layer norm alone: the plain Cpu's bits, kept prologue values included.
TEST(FusionPatterns, RowInstructionsRunApartWhereNotFused) {
  auto apart = std::make_shared<RowsApartCpu>(Device::cpu().backend_ptr());
  const Device d(fusion::make_fusion_backend(apart, fusion::Options{}));
  const Device c = Device::cpu();
  EXPECT_EQ(scaled_softmax(d), scaled_softmax(c));
  EXPECT_EQ(norm_residual(d), norm_residual(c));
  EXPECT_EQ(apart->prologues, 2u);
  const auto prog = [](const Device& dev) {
    auto x = input(dev, 6, 33, 0.9f).cast(DType::BF16);
    auto e = (x * 2.0f).exp();  // kept beside the softmax
    auto y = activation::log_softmax(e - 1.0f, 1);
    auto w = input(dev, 1, 33, 0.1f).cast(DType::BF16).reshape<1>(Shape{33});
    auto n = module_ops::layer_norm((x + 1.0f).abs(), w, w * 0.5f);  // weight: not in the prologue
    const auto f32 = [](const Tensor<2>& t) { return values(t.cast(DType::F32)); };
    return std::vector<std::vector<float>>{f32(y), f32(e), f32(n)};
  };
  EXPECT_EQ(prog(d), prog(c));
  EXPECT_EQ(apart->prologues, 4u);
}

TEST(FusionPatterns, MlpBlock) {
  const Device d = fused_with({});
  EXPECT_EQ(mlp_block(d), mlp_block(Device::cpu()));
  const auto r = fusion::report(d);
  // Each matmul opens a group with its epilogue (Note [Matmul epilogues]).
  const auto* g = group_with(r, {"matmul", "add", "gelu"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->elided, 2u);                   // the product and the sum
  EXPECT_EQ(g->closed, CloseReason::Matmul);  // the second matmul reads it
  EXPECT_TRUE(g->fused);
  EXPECT_NE(group_with(r, {"matmul", "relu", "mul"}), nullptr) << groups_of(r);
}

// ---- matmul epilogues (Note [Matmul epilogues]): the matmul and its element-wise consumers
// are one group, the product applied to each finished GEMM block on the Cpu ----
namespace {

// A deterministic [dims] input of dtype dt (built in f32, then cast).
DynTensor pattern(const Device& d, const Shape& sh, float scale, std::size_t salt, DType dt) {
  std::vector<float> v(sh.num_elements());
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = scale * (float((i * 7 + salt * 5) % 23) - 11.0f) / 11.0f;
  }
  auto t = DynTensor::from_data(TensorData::from<float>(v, sh), d);
  return dt == DType::F32 ? t : ops::cast(t, dt);
}

std::vector<double> as_f64(const DynTensor& t) {
  return ops::cast(t, DType::F64).to_data().to_vector<double>();
}

// The dtype's unit roundoff.
double roundoff(DType dt) {
  switch (dt) {
    case DType::F64:
      return std::ldexp(1.0, -53);
    case DType::F16:
      return std::ldexp(1.0, -11);
    case DType::BF16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -24);
  }
}

enum class Epi { BiasGelu, BiasResidual, Scale };

struct MatmulRun {
  TensorData got;                 // the result
  std::vector<double> ref, size;  // an f64 reference and the magnitude its error scales with
};

// The pattern `epi` over a product of batch x [m, k] · [k, n] (batch 0: 2-D), the weight
// stored [n, k] and transposed when `transposed` (x·Wᵀ, as nn::Linear), in dtype dt.
MatmulRun matmul_pattern(const Device& d, Epi epi, DType dt, std::size_t batch, std::size_t m,
                         std::size_t k, std::size_t n, bool transposed) {
  const auto dims = [&](std::size_t r, std::size_t c) {
    return batch ? Shape{batch, r, c} : Shape{r, c};
  };
  DynTensor x = pattern(d, dims(m, k), 1.0f, 1, dt);
  DynTensor w = transposed ? ops::transpose(pattern(d, dims(n, k), 0.5f, 2, dt))
                           : pattern(d, dims(k, n), 0.5f, 2, dt);
  DynTensor b = pattern(d, batch ? Shape{1, 1, n} : Shape{1, n}, 0.7f, 3, dt);
  DynTensor res = pattern(d, dims(m, n), 0.9f, 4, dt);
  const auto apply = [&]() -> DynTensor {
    switch (epi) {
      case Epi::BiasGelu:
        return ops::unary(ir::UnaryFn::Gelu, ops::binary(ir::BinaryFn::Add, ops::matmul(x, w), b));
      case Epi::BiasResidual:
        return ops::binary(ir::BinaryFn::Add, ops::binary(ir::BinaryFn::Add, ops::matmul(x, w), b),
                           res);
      case Epi::Scale:
        break;
    }
    return ops::binary_scalar(ir::BinaryFn::Mul, ops::matmul(x, w), 0.125);
  };
  const DynTensor y = apply();
  MatmulRun out{y.to_data(), {}, {}};
  // The reference, from the inputs as the device holds them (rounded to dt).
  const auto xv = as_f64(x), wv = as_f64(w), bv = as_f64(b), rv = as_f64(res);
  const std::size_t nb = std::max<std::size_t>(batch, 1);
  for (std::size_t q = 0; q < nb; ++q) {
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        double p = 0, mag = 0;
        for (std::size_t l = 0; l < k; ++l) {
          const double t = xv[(q * m + i) * k + l] * wv[(q * k + l) * n + j];
          p += t;
          mag += std::fabs(t);
        }
        const double r = rv[(q * m + i) * n + j];
        double v = 0;
        switch (epi) {
          case Epi::BiasGelu:
            v = p + bv[j];
            mag += std::fabs(bv[j]);
            v = 0.5 * v * std::erfc(-v * 0.70710678118654752440);
            break;
          case Epi::BiasResidual:
            v = p + bv[j] + r;
            mag += std::fabs(bv[j]) + std::fabs(r);
            break;
          case Epi::Scale:
            v = p * 0.125;
            mag *= 0.125;
            break;
        }
        out.ref.push_back(v);
        out.size.push_back(mag + std::fabs(v));
      }
    }
  }
  return out;
}

}  // namespace

// The canonical matmul patterns — an MLP block gelu(x·W + b), x·W + b + residual, a batched
// matmul and scale — in f32, f64, bf16 and f16, extents 1, odd and crossing the GEMM's
// blocks (rows past MC, k past KC, columns past an epilogue block; one-row products take the
// matrix-vector path), W plain and transposed: one group with the matmul and its epilogue
// (the report), the plain Cpu's bits, and an f64 reference within the dtype's rounding.
TEST(FusionPatterns, MatmulEpilogues) {
  struct Size {
    std::size_t batch, m, k, n;
  };
  const Size sizes[] = {{0, 1, 1, 1},       {0, 7, 13, 5},  {0, 1, 40, 300},
                        {0, 151, 300, 290}, {3, 9, 17, 33}, {2, 150, 70, 260}};
  for (const DType dt : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    for (const Size& z : sizes) {
      for (const bool transposed : {false, true}) {
        for (const Epi epi : {Epi::BiasGelu, Epi::BiasResidual, Epi::Scale}) {
          const std::string what = std::string(name(dt)) + " " + std::to_string(z.batch) + "x[" +
                                   std::to_string(z.m) + "," + std::to_string(z.k) + "," +
                                   std::to_string(z.n) + "]" + (transposed ? " W^T" : "") +
                                   " epilogue " + std::to_string(int(epi));
          const Device d = fused_with({});
          const MatmulRun got = matmul_pattern(d, epi, dt, z.batch, z.m, z.k, z.n, transposed);
          const MatmulRun want =
              matmul_pattern(Device::cpu(), epi, dt, z.batch, z.m, z.k, z.n, transposed);
          ASSERT_EQ(got.got.bytes().size(), want.got.bytes().size()) << what;
          EXPECT_EQ(
              std::memcmp(got.got.bytes().data(), want.got.bytes().data(), got.got.bytes().size()),
              0)
              << what;
          const auto r = fusion::report(d);
          const std::vector<std::string_view> ops =
              epi == Epi::BiasGelu       ? std::vector<std::string_view>{"matmul", "add", "gelu"}
              : epi == Epi::BiasResidual ? std::vector<std::string_view>{"matmul", "add", "add"}
                                         : std::vector<std::string_view>{"matmul", "mul"};
          const auto* g = group_with(r, ops);
          ASSERT_NE(g, nullptr) << what << ": " << groups_of(r);
          EXPECT_TRUE(g->fused) << what;
          EXPECT_EQ(g->outputs, 1u) << what;
          EXPECT_EQ(g->elided, ops.size() - 1) << what;  // the product and the sums
          const std::vector<double> v = as_f64(DynTensor::from_data(got.got, Device::cpu()));
          ASSERT_EQ(v.size(), got.ref.size()) << what;
          const double u = roundoff(dt);
          for (std::size_t i = 0; i < v.size(); ++i) {
            const double tol = 8 * u * got.size[i] * (1 + std::sqrt(double(z.k)) / 4) + 1e-300;
            ASSERT_NEAR(v[i], got.ref[i], tol) << what << " at " << i;
          }
        }
      }
    }
  }
}

// The product is written only where something reads it: kept beside the epilogue's result
// it is an output of the group, with the plain Cpu's bits; nn::Linear's 3-D input (x·Wᵀ on
// [B*T, d] reshaped to [B, T, n], then the bias [n]) stays one group.
TEST(FusionPatterns, MatmulProductKeptAndLinearOfThreeDims) {
  const auto prog = [](const Device& dev) {
    DynTensor x = pattern(dev, Shape{5, 6}, 1.0f, 1, DType::F32);
    DynTensor w = pattern(dev, Shape{6, 4}, 0.5f, 2, DType::F32);
    DynTensor p = ops::matmul(x, w);  // kept
    DynTensor y = ops::unary(ir::UnaryFn::Relu, p);
    DynTensor x3 = pattern(dev, Shape{2, 3, 8}, 1.0f, 5, DType::F32);
    DynTensor w3 = pattern(dev, Shape{7, 8}, 0.5f, 6, DType::F32);
    DynTensor b3 = pattern(dev, Shape{7}, 0.3f, 7, DType::F32);
    DynTensor z = ops::unary(ir::UnaryFn::Gelu, nn::detail::linear(x3, w3, b3, "test"));
    std::vector<float> out = y.to_data().to_vector<float>();
    for (const DynTensor* t : {&p, &z}) {
      const auto v = t->to_data().to_vector<float>();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  const Device d = fused_with({});
  EXPECT_EQ(prog(d), prog(Device::cpu()));
  const auto r = fusion::report(d);
  const auto* g = group_with(r, {"matmul", "relu"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->outputs, 2u);  // the product and the relu
  EXPECT_EQ(g->elided, 0u);
  g = group_with(r, {"matmul", "add", "gelu"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_TRUE(g->fused);
  EXPECT_EQ(g->elided, 2u);
}

// A batch of one-row products and a transposed [seq, batch, k] operand run as the plain
// matmul runs them (Note [Batch folded into rows]: one GEMM of all rows; the batch dim
// swapped with the rows), epilogue or not, so fused and plain agree bit for bit (the
// differential's seed 110001119: [33, 1, 2] @ Wt ran unfolded under an epilogue, as 33
// matrix-vector products, and differed in the last bit).
TEST(FusionPatterns, MatmulEpiloguesRunThePlainProductsGemms) {
  const auto prog = [](const Device& dev) {
    std::vector<double> out;
    for (const DType dt : {DType::F64, DType::F32}) {
      DynTensor x = pattern(dev, Shape{33, 1, 67}, 1.0f, 1, dt);
      DynTensor w = pattern(dev, Shape{67, 67}, 0.5f, 2, dt);
      DynTensor p = ops::matmul(x, ops::transpose(w));
      DynTensor y = ops::binary(ir::BinaryFn::Add, ops::unary(ir::UnaryFn::Relu, p), x);
      DynTensor s = ops::permute(pattern(dev, Shape{3, 40, 67}, 1.0f, 3, dt), {1, 0, 2});
      DynTensor w3 = pattern(dev, Shape{1, 67, 9}, 0.5f, 4, dt);
      DynTensor z = ops::unary(ir::UnaryFn::Tanh, ops::matmul(s, w3));
      for (const DynTensor* t : {&y, &z}) {
        const auto v = as_f64(*t);
        out.insert(out.end(), v.begin(), v.end());
      }
    }
    return out;
  };
  const Device d = fused_with({});
  const auto got = prog(d), want = prog(Device::cpu());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(double)), 0);
  const auto r = fusion::report(d);
  EXPECT_NE(group_with(r, {"matmul", "relu", "add"}), nullptr) << groups_of(r);
  EXPECT_NE(group_with(r, {"matmul", "tanh"}), nullptr) << groups_of(r);
}

// A matmul group's plan is keyed by structure: the same pattern at other sizes of the same
// dim classes reuses it; a transposed weight (another layout class) does not.
TEST(FusionPatterns, MatmulGroupPlansServeEverySize) {
  const Device d = fused_with({});
  const auto run = [&](std::size_t m, std::size_t k, std::size_t n, bool transposed) {
    (void)matmul_pattern(d, Epi::BiasGelu, DType::F32, 0, m, k, n, transposed);
    const auto r = fusion::report(d);
    const auto* g = group_with(r, {"matmul", "add", "gelu"});
    EXPECT_NE(g, nullptr) << groups_of(r);
    return g ? std::make_pair(g->key, g->plan_cached) : std::make_pair(std::uint64_t(0), false);
  };
  const auto first = run(7, 13, 5, false);
  const auto again = run(150, 300, 260, false);
  EXPECT_EQ(first.first, again.first);
  EXPECT_FALSE(first.second);
  EXPECT_TRUE(again.second);
  EXPECT_NE(run(7, 13, 5, true).first, first.first);
}

// A value error inside a matmul's epilogue (an integer division by zero, raised from the
// GEMM's threads) surfaces at the read with the unfused op's message.
TEST(FusionPatterns, MatmulEpilogueErrorsSurfaceAtTheRead) {
  const auto prog = [](const Device& dev) {
    DynTensor x = pattern(dev, Shape{40, 30}, 4.0f, 1, DType::F32);
    DynTensor w = pattern(dev, Shape{30, 50}, 2.0f, 2, DType::F32);
    std::vector<std::int32_t> zv(40 * 50, 3);
    zv[1234] = 0;
    DynTensor z = DynTensor::from_data(TensorData::from<std::int32_t>(zv, Shape{40, 50}), dev);
    return error_of([&] {  // (the plain Cpu raises it at the op, the fused device at the read)
      ops::binary(ir::BinaryFn::Div, ops::cast(ops::matmul(x, w), DType::I32), z).to_data();
    });
  };
  const Device d = fused_with({});
  const std::string got = prog(d), want = prog(Device::cpu());
  EXPECT_TRUE(has(want, "division by zero")) << want;
  EXPECT_EQ(got, want);
}

// A matmul whose product no element-wise op of the flush reads has no epilogue: it runs
// alone and leaves the open group open (Note [Matmul epilogues]); one with an epilogue
// closes it (CloseReason::Matmul).
TEST(FusionPatterns, AMatmulOpensAGroupOnlyForAnEpilogue) {
  const auto prog = [](const Device& dev, bool epilogue) {
    auto x = input(dev, 6, 6, 1.0f);
    auto w = input(dev, 6, 6, 0.5f);
    auto a = (x * 2.0f).exp();
    auto m = x.matmul(w);
    auto b = (a + 1.0f).abs();
    auto e = epilogue ? m.tanh() : m;
    std::vector<float> out = values(b);
    const auto v = values(e);
    out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  for (const bool epilogue : {false, true}) {
    const Device d = fused_with({});
    EXPECT_EQ(prog(d, epilogue), prog(Device::cpu(), epilogue));
    const auto r = fusion::report(d);
    if (epilogue) {
      const auto* g = group_with(r, {"mul", "exp"});
      ASSERT_NE(g, nullptr) << groups_of(r);
      EXPECT_EQ(g->closed, CloseReason::Matmul);
      // (the ops of the matmul's shape that follow join it, its epilogue's or not)
      g = group_with(r, {"matmul", "add", "abs", "tanh"});
      ASSERT_NE(g, nullptr) << groups_of(r);
      EXPECT_EQ(g->outputs, 3u);  // b, the tanh and the product, whose handle m lives
    } else {
      EXPECT_NE(group_with(r, {"mul", "exp", "add", "abs"}), nullptr) << groups_of(r);
      EXPECT_EQ(r.closed[static_cast<std::size_t>(CloseReason::Matmul)], 0u);
    }
  }
}

// ---- convolution epilogues (Note [Conv epilogues]) ----
namespace {

enum class ConvEpi { BiasRelu, ScaleShiftResidualRelu, BiasRelu6, BiasSilu, BiasGelu };

struct ConvCase {
  Shape x, w;  // [N, C, *spatial], [O, C / groups, *kernel]
  std::size_t stride, padding, groups;
  ConvEpi epi;
};

std::string describe(const ConvCase& c, DType dt) {
  return std::string(name(dt)) + " x" + c.x.to_string() + " w" + c.w.to_string() + " s" +
         std::to_string(c.stride) + " p" + std::to_string(c.padding) + " g" +
         std::to_string(c.groups) + " epilogue " + std::to_string(int(c.epi));
}

// The report's ops for a case's group.
std::vector<std::string_view> conv_ops(ConvEpi e) {
  switch (e) {
    case ConvEpi::BiasRelu:
      return {"conv", "add", "relu"};
    case ConvEpi::ScaleShiftResidualRelu:
      return {"conv", "mul", "add", "add", "relu"};
    case ConvEpi::BiasRelu6:
      return {"conv", "add", "clamp"};
    case ConvEpi::BiasSilu:
      return {"conv", "add", "silu"};
    case ConvEpi::BiasGelu:
      break;
  }
  return {"conv", "add", "gelu"};
}

// The case's pattern on d, with an f64 reference computed from the inputs as the device
// holds them and the magnitude each element's error scales with.
MatmulRun conv_pattern(const Device& d, const ConvCase& c, DType dt) {
  const std::size_t sp = c.x.rank() - 2, o = c.w[0];
  DynTensor x = pattern(d, c.x, 1.0f, 1, dt);
  DynTensor w = pattern(d, c.w, 0.5f, 2, dt);
  DynTensor b = pattern(d, Shape{o}, 0.7f, 3, dt);
  std::vector<std::size_t> chan(c.x.rank(), 1);
  chan[1] = o;
  DynTensor scale = pattern(d, Shape(chan), 0.6f, 5, dt),
            shift = pattern(d, Shape(chan), 0.4f, 6, dt);
  const module_ops::WindowOptions opt{
      std::vector<std::size_t>(sp, c.stride), std::vector<std::size_t>(sp, c.padding), {}};
  std::vector<std::size_t> out_dims{c.x[0], o};
  for (std::size_t i = 0; i < sp; ++i)
    out_dims.push_back((c.x[2 + i] + 2 * c.padding - c.w[2 + i]) / c.stride + 1);
  const DynTensor res = pattern(d, Shape(out_dims), 0.9f, 4, dt);  // (made before the conv)
  const auto apply = [&]() -> DynTensor {
    switch (c.epi) {
      case ConvEpi::BiasRelu:
        return ops::unary(ir::UnaryFn::Relu, module_ops::conv(x, w, b, opt, c.groups));
      case ConvEpi::ScaleShiftResidualRelu: {
        DynTensor p = module_ops::conv(x, w, std::nullopt, opt, c.groups);
        return ops::unary(
            ir::UnaryFn::Relu,
            ops::binary(ir::BinaryFn::Add,
                        ops::binary(ir::BinaryFn::Add,
                                    ops::binary(ir::BinaryFn::Mul, std::move(p), scale), shift),
                        res));
      }
      case ConvEpi::BiasRelu6:
        return ops::clamp(module_ops::conv(x, w, b, opt, c.groups), 0.0, 6.0);
      case ConvEpi::BiasSilu:
        return ops::unary(ir::UnaryFn::Silu, module_ops::conv(x, w, b, opt, c.groups));
      case ConvEpi::BiasGelu:
        break;
    }
    return ops::unary(ir::UnaryFn::Gelu, module_ops::conv(x, w, b, opt, c.groups));
  };
  const DynTensor y = apply();
  MatmulRun out{y.to_data(), {}, {}};
  // The reference: spatial dims padded to three (extent 1 in front).
  const auto xv = as_f64(x), wv = as_f64(w), bv = as_f64(b), sv = as_f64(scale), hv = as_f64(shift);
  const Shape ys = y.shape();
  const std::vector<double> rv = c.epi == ConvEpi::ScaleShiftResidualRelu
                                     ? as_f64(res)
                                     : std::vector<double>(ys.num_elements(), 0.0);
  std::array<std::size_t, 3> in{1, 1, 1}, k{1, 1, 1}, on{1, 1, 1};
  for (std::size_t i = 0; i < sp; ++i) {
    in[3 - sp + i] = c.x[2 + i];
    k[3 - sp + i] = c.w[2 + i];
    on[3 - sp + i] = ys[2 + i];
  }
  const std::size_t n = c.x[0], ci = c.x[1], cg = ci / c.groups, og = o / c.groups;
  const std::size_t kk = k[0] * k[1] * k[2], ii = in[0] * in[1] * in[2];
  const auto pad = [&](std::size_t d) { return 3 - sp <= d ? c.padding : 0; };
  const auto str = [&](std::size_t d) { return 3 - sp <= d ? c.stride : 1; };
  std::size_t e = 0;
  for (std::size_t q = 0; q < n; ++q)
    for (std::size_t oc = 0; oc < o; ++oc)
      for (std::size_t z = 0; z < on[0]; ++z)
        for (std::size_t yy = 0; yy < on[1]; ++yy)
          for (std::size_t xx = 0; xx < on[2]; ++xx, ++e) {
            double p = 0, mag = 0;
            const std::size_t gi = oc / og;
            for (std::size_t cc = 0; cc < cg; ++cc)
              for (std::size_t a = 0; a < k[0]; ++a)
                for (std::size_t bb = 0; bb < k[1]; ++bb)
                  for (std::size_t cx = 0; cx < k[2]; ++cx) {
                    const auto iz = std::int64_t(z * str(0) + a) - std::int64_t(pad(0));
                    const auto iy = std::int64_t(yy * str(1) + bb) - std::int64_t(pad(1));
                    const auto ix = std::int64_t(xx * str(2) + cx) - std::int64_t(pad(2));
                    if (iz < 0 || iy < 0 || ix < 0 || iz >= std::int64_t(in[0]) ||
                        iy >= std::int64_t(in[1]) || ix >= std::int64_t(in[2]))
                      continue;
                    const double t =
                        xv[(q * ci + gi * cg + cc) * ii +
                           (std::size_t(iz) * in[1] + std::size_t(iy)) * in[2] + std::size_t(ix)] *
                        wv[(oc * cg + cc) * kk + (a * k[1] + bb) * k[2] + cx];
                    p += t;
                    mag += std::fabs(t);
                  }
            double v = 0;
            switch (c.epi) {
              case ConvEpi::BiasRelu:
                v = std::max(0.0, p + bv[oc]);
                mag += std::fabs(bv[oc]);
                break;
              case ConvEpi::ScaleShiftResidualRelu:
                v = std::max(0.0, p * sv[oc] + hv[oc] + rv[e]);
                mag = mag * std::fabs(sv[oc]) + std::fabs(hv[oc]) + std::fabs(rv[e]);
                break;
              case ConvEpi::BiasRelu6:
                v = std::clamp(p + bv[oc], 0.0, 6.0);
                mag += std::fabs(bv[oc]);
                break;
              case ConvEpi::BiasSilu:
                v = (p + bv[oc]) / (1 + std::exp(-(p + bv[oc])));
                mag += std::fabs(bv[oc]);
                break;
              case ConvEpi::BiasGelu:
                v = p + bv[oc];
                mag += std::fabs(bv[oc]);
                v = 0.5 * v * std::erfc(-v * 0.70710678118654752440);
                break;
            }
            out.ref.push_back(v);
            out.size.push_back(mag + std::fabs(v));
          }
  return out;
}

}  // namespace

// The canonical convolution patterns — conv + bias + relu, ResNet's block tail (a batch
// norm as a per-channel scale and shift, the residual, relu), a depthwise conv + bias +
// relu6 (MobileNetV2), 1-D conv + bias + silu, 3-D conv + bias + gelu — in f32, f64, bf16 and
// f16, odd extents, strides, groups, 1x1 windows (the image as its own columns) and products
// crossing the GEMM's blocks: one group with the conv and its epilogue (the report), the
// plain Cpu's bits, and an f64 reference within the dtype's rounding.
TEST(FusionPatterns, ConvEpilogues) {
  const ConvCase cases[] = {
      {Shape{2, 5, 9, 11}, Shape{7, 5, 3, 3}, 1, 1, 1, ConvEpi::BiasRelu},
      {Shape{2, 6, 8, 7}, Shape{6, 6, 3, 3}, 1, 1, 1, ConvEpi::ScaleShiftResidualRelu},
      {Shape{1, 24, 19, 21}, Shape{40, 24, 3, 3}, 2, 1, 1, ConvEpi::ScaleShiftResidualRelu},
      {Shape{2, 8, 13, 13}, Shape{8, 1, 3, 3}, 2, 1, 8, ConvEpi::BiasRelu6},
      {Shape{1, 6, 20, 20}, Shape{6, 1, 3, 3}, 1, 1, 6, ConvEpi::BiasRelu6},
      {Shape{1, 5, 9, 6}, Shape{5, 1, 5, 5}, 1, 2, 5, ConvEpi::BiasRelu},
      {Shape{2, 6, 10, 10}, Shape{4, 3, 3, 3}, 1, 0, 2, ConvEpi::BiasRelu},
      {Shape{1, 40, 20, 30}, Shape{70, 40, 1, 1}, 1, 0, 1, ConvEpi::BiasRelu},
      {Shape{1, 3, 9, 9}, Shape{1, 3, 3, 3}, 1, 1, 1, ConvEpi::BiasRelu},
      {Shape{3, 4, 17}, Shape{5, 4, 3}, 2, 1, 1, ConvEpi::BiasSilu},
      {Shape{1, 3, 5, 6, 7}, Shape{4, 3, 2, 3, 3}, 1, 1, 1, ConvEpi::BiasGelu},
  };
  for (const DType dt : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    for (const ConvCase& c : cases) {
      const std::string what = describe(c, dt);
      const Device d = fused_with({});
      const MatmulRun got = conv_pattern(d, c, dt);
      const MatmulRun want = conv_pattern(Device::cpu(), c, dt);
      ASSERT_EQ(got.got.bytes().size(), want.got.bytes().size()) << what;
      EXPECT_EQ(
          std::memcmp(got.got.bytes().data(), want.got.bytes().data(), got.got.bytes().size()), 0)
          << what;
      const auto r = fusion::report(d);
      const std::vector<std::string_view> ops = conv_ops(c.epi);
      const auto* g = group_with(r, ops);
      ASSERT_NE(g, nullptr) << what << ": " << groups_of(r);
      EXPECT_TRUE(g->fused) << what;
      EXPECT_EQ(g->outputs, 1u) << what;
      EXPECT_EQ(g->elided, ops.size() - 1) << what;  // the conv's output and the sums
      const std::vector<double> v = as_f64(DynTensor::from_data(got.got, Device::cpu()));
      ASSERT_EQ(v.size(), got.ref.size()) << what;
      const double u = roundoff(dt);
      const double depth = double(c.w.num_elements() / c.w[0]);
      for (std::size_t i = 0; i < v.size(); ++i) {
        const double tol = 8 * u * got.size[i] * (1 + std::sqrt(depth) / 4) + 1e-300;
        ASSERT_NEAR(v[i], got.ref[i], tol) << what << " at " << i;
      }
    }
  }
}

// A conv's output kept beside its epilogue's result is an output of the group (the plain
// Cpu's bits); a conv whose output nothing element-wise reads runs alone; the backward
// passes (a conv through autodiff over fusion) give the plain device's gradients bit for
// bit, so a training step's losses do not change with fusion.
TEST(FusionPatterns, ConvOutputKeptAloneAndDifferentiated) {
  const auto prog = [](const Device& dev) {
    DynTensor x = pattern(dev, Shape{2, 4, 7, 7}, 1.0f, 1, DType::F32);
    DynTensor w = pattern(dev, Shape{5, 4, 3, 3}, 0.5f, 2, DType::F32);
    DynTensor b = pattern(dev, Shape{5}, 0.3f, 3, DType::F32);
    DynTensor p = module_ops::conv(x, w, std::nullopt, {{1, 1}, {1, 1}, {}});  // kept
    DynTensor y = ops::unary(ir::UnaryFn::Relu,
                             ops::binary(ir::BinaryFn::Add, p, ops::reshape(b, Shape{1, 5, 1, 1})));
    DynTensor alone = module_ops::conv(x, w, std::nullopt, {{2, 2}, {0, 0}, {}});
    std::vector<float> out = y.to_data().to_vector<float>();
    for (const DynTensor* t : {&p, &alone}) {
      const auto v = t->to_data().to_vector<float>();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  const Device d = fused_with({});
  EXPECT_EQ(prog(d), prog(Device::cpu()));
  const auto r = fusion::report(d);
  const auto* g = group_with(r, {"conv", "add", "relu"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->outputs, 2u);  // the conv's output and the relu
  for (const auto& grp : r.recent) EXPECT_NE(grp.ops, std::vector<std::string_view>{"conv"});

  const auto grads = [](const Device& dev) {
    auto x = Tensor<4>::from_data(
                 pattern(dev.inner(), Shape{2, 3, 6, 6}, 1.0f, 1, DType::F32).to_data(), dev)
                 .require_grad();
    auto w = Tensor<4>::from_data(
                 pattern(dev.inner(), Shape{4, 3, 3, 3}, 0.5f, 2, DType::F32).to_data(), dev)
                 .require_grad();
    auto y =
        activation::relu(module_ops::conv2d(x, w, std::nullopt, {{1, 1}, {1, 1}}) * 1.5f + 0.25f);
    auto loss = (y * y).mean();
    Gradients gr = loss.backward();
    std::vector<float> out = loss.to_data().to_vector<float>();
    for (auto* t : {&x, &w}) {
      const auto v = t->grad(gr).value().to_data().to_vector<float>();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  EXPECT_EQ(grads(Device::cpu().fusion().autodiff()), grads(Device::cpu().autodiff()));
}

TEST(FusionPatterns, ScaledSoftmaxWithMask) {
  const Device d = fused_with({});
  EXPECT_EQ(scaled_softmax(d), scaled_softmax(Device::cpu()));
  const auto r = fusion::report(d);
  std::size_t fused = 0;
  for (const auto& g : r.recent) fused += g.ops.size();
  EXPECT_GE(r.groups, 1u) << groups_of(r);
  EXPECT_GE(fused, 2u) << groups_of(r);  // the scale and the mask in one group
  // The mask (made in the group), the scale and the masking end in the softmax.
  const auto* g = group_with(r, {"sub", "greater", "mul", "where", "softmax"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->closed, CloseReason::Reduction);
  EXPECT_EQ(g->outputs, 3u);  // the softmax, and the mask and the logits (named, so kept)
}

TEST(FusionPatterns, LayerNormWithResidual) {
  const Device d = fused_with({});
  EXPECT_EQ(norm_residual(d), norm_residual(Device::cpu()));
  const auto r = fusion::report(d);
  // The residual add after the norm is its epilogue (Note [Row epilogues]).
  const auto* g = group_with(r, {"mul", "add", "layer_norm", "add"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->elided, 2u);  // f * 0.5 and the sum (y is named, so kept)
}

TEST(FusionPatterns, AdamUpdate) {
  const Device d = fused_with({});
  EXPECT_EQ(adam_update(d), adam_update(Device::cpu()));
  const auto r = fusion::report(d);
  ASSERT_EQ(r.groups, 1u) << groups_of(r);  // the whole update is one program
  EXPECT_GE(r.recent.back().ops.size(), 12u);
  EXPECT_EQ(r.recent.back().outputs, 5u);  // p, m, v and the named mhat, vhat: the rest elided
}

// EMBER_FUSION_LOG's levels: 1 a line per flush, 2 a line per group or op run alone,
// 3 each join and close decision.
TEST(FusionReport, LogLevels) {
  for (int level = 1; level <= 3; ++level) {
    fusion::Options o;
    o.log = level;
    const Device d = fused_with(o);
    auto x = input(d, 4, 4, 1.0f);
    ::testing::internal::CaptureStderr();
    auto y = ((x * 2.0f).exp() + x).sum_dim(1);
    y.to_data();
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(has(log, "flush (read)")) << log;  // the sum waits for the read
    EXPECT_EQ(has(log, "group [mul exp add sum]"), level >= 2) << log;
    EXPECT_EQ(has(log, "closed: ends in a reduction"), level >= 2) << log;
    EXPECT_EQ(has(log, "exp: joins the group"), level >= 3) << log;
  }
  EXPECT_EQ(std::string(backend::name(CloseReason::ViewOfInternal)), "view of an internal value");
}

// ---- on Cuda: groups run as generated kernels (cuda/kernels/fused.cpp), bit for bit the
// plain device's single-op kernels; skipped where there is no GPU ----
namespace {

bool have_cuda() {
  const auto a = Device::available();
  return std::find(a.begin(), a.end(), "cuda:0") != a.end();
}
std::string no_cuda_reason() {
  for (const auto& u : Device::unavailable()) {
    if (u.name == "cuda") return u.why;
  }
  return "not registered";
}
#define EMBER_NEED_CUDA() \
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device: " << no_cuda_reason()

Device cuda_fused() {
  return Device(fusion::make_fusion_backend(Device::cuda(0).backend_ptr(), {}));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

}  // namespace

TEST(FusionCuda, CanonicalPatternsAgreeBitForBit) {
  EMBER_NEED_CUDA();
  const Device plain = Device::cuda(0);
  using Pattern = std::vector<float> (*)(const Device&);
  const std::pair<const char*, Pattern> patterns[] = {{"mlp", mlp_block},
                                                      {"softmax", scaled_softmax},
                                                      {"layer norm", norm_residual},
                                                      {"adam", adam_update}};
  for (const auto& [what, f] : patterns) {
    const Device d = cuda_fused();
    EXPECT_TRUE(same_bits(f(d), f(plain))) << what;
    const auto r = fusion::report(d);
    EXPECT_GE(r.groups, 1u) << what << ": " << groups_of(r);
    for (const auto& g : r.recent) EXPECT_TRUE(g.fused) << what;
  }
}

// Softmax, log-softmax and layer norm with a prologue (Note [Fused rows in registers]): one
// kernel where the row fits in registers, with every chunk width the row length allows
// (odd lengths: one element a chunk), the prologue's kept value written beside the row op's
// result; longer rows run apart. Each dtype, bit for bit the plain device's.
TEST(FusionCuda, SoftmaxAndLayerNormTakeTheirPrologue) {
  EMBER_NEED_CUDA();
  const Device plain = Device::cuda(0);
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    for (std::size_t cols : {1u, 33u, 64u, 1000u, 2048u, 4096u, 4100u}) {
      const auto run = [&](const Device& dev) {
        auto x = input(dev, 6, cols, 1.5f).cast(dt);
        auto f = input(dev, 6, cols, -0.7f).cast(dt);
        auto w = input(dev, 1, cols, 0.4f).cast(dt).reshape<1>(Shape{cols});
        auto b = input(dev, 1, cols, -0.3f).cast(dt).reshape<1>(Shape{cols});
        for (auto* t : {&x, &f}) t->to_data();  // (stored: their casts are not the pattern)
        w.to_data();
        b.to_data();
        auto res = x + f * 0.5f;
        auto y = module_ops::layer_norm(res, w, b);
        auto s = activation::softmax(x * 0.125f + f, 1);
        auto l = activation::log_softmax((x - f).tanh(), 1);
        auto ln = module_ops::layer_norm(x * 2.0f, Shape{cols});
        std::vector<float> out;
        for (auto* t : {&y, &s, &l, &ln, &res}) {
          const auto v = values(t->cast(DType::F32));
          out.insert(out.end(), v.begin(), v.end());
        }
        return out;
      };
      const Device d = cuda_fused();
      EXPECT_TRUE(same_bits(run(d), run(plain))) << name(dt) << " " << cols;
      const auto r = fusion::report(d);
      if (cols > 2048 && dt == DType::F64) continue;  // (4 an f64 thread: 2048 at most)
      if (cols > 4096) continue;
      // (A later cast of a result may join the last group as its epilogue.)
      EXPECT_NE(group_starting(r, {"mul", "add", "softmax"}), nullptr) << groups_of(r);
      EXPECT_NE(group_starting(r, {"mul", "add", "layer_norm"}), nullptr) << groups_of(r);
      EXPECT_NE(group_starting(r, {"sub", "tanh", "log_softmax"}), nullptr) << groups_of(r);
      EXPECT_NE(group_starting(r, {"mul", "layer_norm"}), nullptr) << groups_of(r);
      for (const auto& g : r.recent) EXPECT_TRUE(g.fused) << name(dt) << " " << cols;
    }
  }
}

// Matmul groups on Cuda: cuBLASLt's GEMM, then the epilogue as one generated kernel (Note
// [Matmul apart]): the plain device's bits, every dtype, 2-D and batched, W plain and
// transposed, extents 1 and odd, and the report's one group per pattern.
TEST(FusionCuda, MatmulEpiloguesAgreeBitForBit) {
  EMBER_NEED_CUDA();
  const Device plain = Device::cuda(0);
  struct Size {
    std::size_t batch, m, k, n;
  };
  const Size sizes[] = {{0, 1, 1, 1}, {0, 7, 13, 5}, {0, 151, 300, 290}, {3, 9, 17, 33}};
  for (const DType dt : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    for (const Size& z : sizes) {
      for (const bool transposed : {false, true}) {
        for (const Epi epi : {Epi::BiasGelu, Epi::BiasResidual, Epi::Scale}) {
          const std::string what = std::string(name(dt)) + " m" + std::to_string(z.m) + " k" +
                                   std::to_string(z.k) + " n" + std::to_string(z.n) +
                                   (transposed ? " W^T" : "") + " " + std::to_string(int(epi));
          const Device d = cuda_fused();
          const MatmulRun got = matmul_pattern(d, epi, dt, z.batch, z.m, z.k, z.n, transposed);
          const MatmulRun want = matmul_pattern(plain, epi, dt, z.batch, z.m, z.k, z.n, transposed);
          ASSERT_EQ(got.got.bytes().size(), want.got.bytes().size()) << what;
          EXPECT_EQ(
              std::memcmp(got.got.bytes().data(), want.got.bytes().data(), got.got.bytes().size()),
              0)
              << what;
          const auto r = fusion::report(d);
          bool found = false;
          for (const auto& g : r.recent) found = found || (!g.ops.empty() && g.ops[0] == "matmul");
          EXPECT_TRUE(found) << what << ": " << groups_of(r);
        }
      }
    }
  }
}

// Conv groups on Cuda: the Conv kernel (cuDNN or the generated implicit GEMM), then the
// epilogue as one generated kernel (Note [Matmul apart]): the plain device's bits in every
// float dtype, dense, depthwise, 1-D and 3-D, and a group starting with the conv in the
// report.
TEST(FusionCuda, ConvEpiloguesAgreeBitForBit) {
  EMBER_NEED_CUDA();
  const Device plain = Device::cuda(0);
  const ConvCase cases[] = {
      {Shape{2, 5, 9, 11}, Shape{7, 5, 3, 3}, 1, 1, 1, ConvEpi::BiasRelu},
      {Shape{1, 24, 19, 21}, Shape{40, 24, 3, 3}, 2, 1, 1, ConvEpi::ScaleShiftResidualRelu},
      {Shape{2, 8, 13, 13}, Shape{8, 1, 3, 3}, 2, 1, 8, ConvEpi::BiasRelu6},
      {Shape{3, 4, 17}, Shape{5, 4, 3}, 2, 1, 1, ConvEpi::BiasSilu},
      {Shape{1, 3, 5, 6, 7}, Shape{4, 3, 2, 3, 3}, 1, 1, 1, ConvEpi::BiasGelu},
  };
  for (const DType dt : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    for (const ConvCase& c : cases) {
      const std::string what = describe(c, dt);
      const Device d = cuda_fused();
      const MatmulRun got = conv_pattern(d, c, dt);
      const MatmulRun want = conv_pattern(plain, c, dt);
      ASSERT_EQ(got.got.bytes().size(), want.got.bytes().size()) << what;
      EXPECT_EQ(
          std::memcmp(got.got.bytes().data(), want.got.bytes().data(), got.got.bytes().size()), 0)
          << what;
      const auto r = fusion::report(d);
      EXPECT_NE(group_with(r, conv_ops(c.epi)), nullptr) << what << ": " << groups_of(r);
    }
  }
}

// Note [Integer selects on sm_90]: min(min(a, -x), y) and max(max(a, |x|), y) in i32, and
// the differential's seed 30001079 (min(min(-x, |x|), x)), where ptxas 13.0 had dropped the
// negation or absolute value by joining the two into one three-input min.
TEST(FusionCuda, ChainedIntegerMinAndMaxKeepTheirOperands) {
  EMBER_NEED_CUDA();
  const auto run = [](const Device& dev) {
    std::vector<std::int32_t> v(5 * 33), w(5 * 33);
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<std::int32_t>((i * 7 + 3) % 9) - 4;
      w[i] = static_cast<std::int32_t>((i * 5 + 1) % 11) - 5;
    }
    auto x = Tensor<2, Int>::from_data(TensorData::from<std::int32_t>(v, Shape{5, 33}), dev);
    auto y = Tensor<2, Int>::from_data(TensorData::from<std::int32_t>(w, Shape{5, 33}), dev);
    auto a = (-x).minimum(y).minimum(x + 1);
    auto b = x.abs().maximum(y).maximum(y - 2);
    auto c = (-x).minimum(x.abs()).minimum(x);
    std::vector<std::int32_t> out;
    for (auto* t : {&a, &b, &c}) {
      const auto r = t->to_data().to_vector<std::int32_t>();
      out.insert(out.end(), r.begin(), r.end());
    }
    return out;
  };
  const auto got = run(cuda_fused());
  EXPECT_EQ(got, run(Device::cuda(0)));
  EXPECT_EQ(got, run(Device::cpu()));
}

// Softmax and layer norm whose prologue reads inputs broadcast along the rows or through
// transposed strides (Note [Fused rows over strided inputs]): attention's additive masks
// ([1, 1, L, L] and [B, 1, 1, L] under [B, H, L, L] scores), a position table under a
// batch, a transposed view. Bit for bit the plain device's, each dtype, rows that fit in
// registers and one that does not (run apart).
TEST(FusionCuda, SoftmaxAndLayerNormTakeBroadcastInputs) {
  EMBER_NEED_CUDA();
  const Device plain = Device::cuda(0);
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    for (std::size_t l : {1u, 33u, 256u, 1000u, 4100u}) {
      const std::size_t b = 2, h = 3;
      const auto run = [&](const Device& dev) {
        auto s = Tensor<4>(input(dev, b * h * l, l, 1.5f).cast(dt).reshape<4>(Shape{b, h, l, l}));
        auto causal = Tensor<4>(input(dev, l, l, -3.0f).cast(dt).reshape<4>(Shape{1, 1, l, l}));
        auto pad = Tensor<4>(input(dev, b, l, 2.0f).cast(dt).reshape<4>(Shape{b, 1, 1, l}));
        auto x = Tensor<3>(input(dev, b * l, 64, 0.9f).cast(dt).reshape<3>(Shape{b, l, 64}));
        auto pos = Tensor<3>(input(dev, l, 64, -0.4f).cast(dt).reshape<3>(Shape{1, l, 64}));
        auto w = input(dev, 1, 64, 0.4f).cast(dt).reshape<1>(Shape{64});
        auto bias = input(dev, 1, 64, -0.3f).cast(dt).reshape<1>(Shape{64});
        auto t = input(dev, 48, l, 0.8f).cast(dt);
        for (auto* v : {&s, &causal, &pad})
          v->to_data();  // (stored: the casts are not the pattern)
        for (auto* v : {&x, &pos}) v->to_data();
        for (auto* v : {&w, &bias}) v->to_data();
        t.to_data();
        auto p1 = activation::softmax(s * 0.125f + causal, 3);
        auto p2 = activation::log_softmax(s * 0.125f + pad, 3);
        auto p3 = module_ops::layer_norm(x + pos, w, bias);
        auto p4 = activation::softmax(t.transpose() * 2.0f, 1);  // [l, 48] rows, strided
        std::vector<float> out;
        const auto add = [&](const auto& v) {
          const auto f = v.cast(DType::F32).to_data().template to_vector<float>();
          out.insert(out.end(), f.begin(), f.end());
        };
        add(p1);
        add(p2);
        add(p3);
        add(p4);
        return out;
      };
      const Device d = cuda_fused();
      EXPECT_TRUE(same_bits(run(d), run(plain))) << name(dt) << " " << l;
      const auto r = fusion::report(d);
      EXPECT_NE(group_with(r, {"mul", "add", "softmax"}), nullptr) << groups_of(r);
      EXPECT_NE(group_with(r, {"mul", "add", "log_softmax"}), nullptr) << groups_of(r);
      EXPECT_NE(group_with(r, {"add", "layer_norm"}), nullptr) << groups_of(r);
      EXPECT_NE(group_with(r, {"mul", "softmax"}), nullptr) << groups_of(r);
    }
  }
}

TEST(FusionCuda, AChainIsOneKernelAtEverySize) {
  EMBER_NEED_CUDA();
  const auto chain = [](Tensor<2> x, Tensor<2> b) {
    return ((x * 0.5f + b).exp().tanh() * x - 0.25f).abs();
  };
  const Device d = cuda_fused(), plain = Device::cuda(0);
  for (std::size_t n : {std::size_t(47), std::size_t(1000), std::size_t(4099)}) {
    auto got = values(chain(input(d, 33, n, 1.3f), input(d, 1, n, -0.6f)));
    auto want = values(chain(input(plain, 33, n, 1.3f), input(plain, 1, n, -0.6f)));
    EXPECT_TRUE(same_bits(got, want)) << n;
  }
  const auto r = fusion::report(d);
  EXPECT_EQ(r.groups, 3u);
  EXPECT_EQ(r.plans_built, 1u);
}

TEST(FusionCuda, HalfIntermediatesAndStridedInputs) {
  EMBER_NEED_CUDA();
  for (DType dt : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    const auto run = [&](const Device& d) {
      auto x = input(d, 9, 130, 2.1f).cast(dt);
      auto y = input(d, 130, 9, 0.7f).cast(dt).transpose();  // a strided input
      auto z = (activation::sigmoid(x * y + 1.0f) * x).sqrt() - y;
      auto w = activation::gelu(z) * z + x;
      return (w.cast(DType::F32) + z.cast(DType::F32)).to_data().template to_vector<float>();
    };
    const Device d = cuda_fused();
    EXPECT_TRUE(same_bits(run(d), run(Device::cuda(0)))) << name(dt);
    EXPECT_GE(fusion::report(d).ops_fused, 8u) << name(dt);
  }
}

TEST(FusionCuda, IntegerDivisionByZeroSurfacesAtTheRead) {
  EMBER_NEED_CUDA();
  const Device d = cuda_fused();
  auto a = Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({4, 5, 6}, Shape{3}), d);
  auto b = Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({1, 0, 2}, Shape{3}), d);
  auto r = (a / b + a) * a;
  const std::string m = error_of([&] { r.to_data(); });
  EXPECT_TRUE(has(m, "division by zero")) << m;
  EXPECT_EQ((a + a).to_data().to_vector<std::int64_t>(), (std::vector<std::int64_t>{8, 10, 12}));
}

// A moved input the group owns alone is overwritten in place (no new memory), as unfused.
TEST(FusionCuda, SoleOwnedInputsAreReusedInPlace) {
  EMBER_NEED_CUDA();
  const Device d = cuda_fused();
  auto x = input(d, 256, 1024, 1.0f);
  x = ((std::move(x) * 0.5f).exp() + 1.0f).sqrt();  // (the scalars' constants allocated)
  x.to_data();
  const auto before = memory_stats(d).in_use;
  for (int k = 1; k < 10; ++k) x = ((std::move(x) * 0.5f).exp() + 1.0f).sqrt();
  const auto got = values(x);
  EXPECT_LE(memory_stats(d).in_use, before);
  auto y = input(Device::cuda(0), 256, 1024, 1.0f);
  for (int k = 0; k < 10; ++k) y = ((std::move(y) * 0.5f).exp() + 1.0f).sqrt();
  EXPECT_TRUE(same_bits(got, values(y)));
}

// Reshapes of group values inside Cuda kernels (Note [Reshapes in a group]): the same bits
// as the plain device's single-op kernels, elementwise_chain one kernel.
TEST(FusionCuda, ReshapesOfGroupValuesStayInTheKernel) {
  EMBER_NEED_CUDA();
  const Device plain = Device::cuda(0);
  const Device d = cuda_fused();
  EXPECT_TRUE(same_bits(reshape_chain(d), reshape_chain(plain)));
  const auto r = fusion::report(d);
  ASSERT_EQ(r.groups, 1u) << groups_of(r);
  EXPECT_TRUE(r.recent.back().fused);
  EXPECT_TRUE(same_bits(reshaped_groups(d), reshaped_groups(plain)));
}

// Row reductions with their prologue on Cuda (Note [Fused row reductions] in
// src/cuda/codegen/fused.cpp; EMBER_CUDA_FUSED_REDUCE=0 turns them off): the
// plain device's bits, in rows shorter than a warp, longer than a block's four-way steps,
// and long enough that the plain reduction takes two passes (the fused kernel is then the
// first pass: Note [Fused two-pass reductions] in src/cuda/kernels/fused.cpp).
TEST(FusionCuda, ReductionsTakeTheirPrologue) {
  EMBER_NEED_CUDA();
  const char* off = std::getenv("EMBER_CUDA_FUSED_REDUCE");
  const bool fused_reduce = off == nullptr || std::string(off) != "0";
  const Device plain = Device::cuda(0);
  for (const std::size_t cols : {std::size_t(7), std::size_t(1300), std::size_t(70000)}) {
    const Device d = cuda_fused();
    const auto exp_sum = [&](const Device& dev, std::size_t rows) {
      return values((input(dev, rows, cols, 1.5f) * 0.5f).exp().sum_dim(1));
    };
    EXPECT_TRUE(same_bits(exp_sum(d, 37), exp_sum(plain, 37))) << cols;
    EXPECT_TRUE(same_bits(exp_sum(d, 2), exp_sum(plain, 2))) << cols;
    EXPECT_EQ(exp_argmin(d, cols), exp_argmin(plain, cols)) << cols;
    for (DType dt : {DType::F16, DType::BF16, DType::F64}) {
      const auto half = [&](const Device& dev) {
        auto x = input(dev, 6, cols, 3.0f).cast(dt);
        auto t = (x * x).tanh();
        auto out = values(t.mean_dim(1).cast(DType::F32));
        const auto m2 = values((t + x).max_dim(1).cast(DType::F32));
        out.insert(out.end(), m2.begin(), m2.end());
        return out;
      };
      EXPECT_TRUE(same_bits(half(d), half(plain))) << name(dt) << " " << cols;
    }
    const auto ints = [&](const Device& dev) {
      std::vector<std::int32_t> v(4 * cols);
      for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<std::int32_t>(k % 29) - 14;
      auto i = Tensor<2, Int>::from_data(TensorData::from<std::int32_t>(v, Shape{4, cols}), dev);
      return (i * 3 + 1).sum_dim(1).to_data().to_vector<std::int32_t>();
    };
    EXPECT_EQ(ints(d), ints(plain)) << cols;
    // Full reductions (one row: two passes once it is long) with a prologue, sum and mean.
    const auto full = [&](const Device& dev) {
      auto e = (input(dev, 16, cols, 1.5f) * 0.5f).exp();
      auto out = e.sum().to_data().to_vector<float>();
      const auto m = (e * e).mean().to_data().to_vector<float>();
      out.insert(out.end(), m.begin(), m.end());
      return out;
    };
    EXPECT_TRUE(same_bits(full(d), full(plain))) << cols;
    const auto r = fusion::report(d);
    const auto* g = group_with(r, {"mul", "exp", "sum"});
    if (fused_reduce) {
      ASSERT_NE(g, nullptr) << groups_of(r);
      EXPECT_EQ(g->closed, CloseReason::Reduction);
      EXPECT_TRUE(g->fused) << cols << ": the group ran op by op";
      // The full mean of e * e took its prologue (Note [Coarsened iteration space]).
      const auto* m = group_with(r, {"mul", "mean"});
      ASSERT_NE(m, nullptr) << groups_of(r);
      EXPECT_TRUE(m->fused) << cols << ": the full mean ran op by op";
    } else {
      EXPECT_EQ(g, nullptr) << groups_of(r);  // the reduction runs alone after the group
    }
  }
}

namespace {

// The bytes of t as stored (any dtype), for a bit-for-bit comparison.
std::vector<std::byte> bytes_of(const DynTensor& t) { return t.to_data().bytes(); }

// pattern's values made in dt on the host (no cast recorded on the device).
DynTensor made(const Device& d, const Shape& sh, float scale, std::size_t salt, DType dt) {
  return DynTensor::from_data(pattern(Device::cpu(), sh, scale, salt, dt).to_data(), d);
}

}  // namespace

namespace {

// Row epilogue patterns on rows of n (Note [Row epilogues]): softmax's backward pass (a
// full-row epilogue reading the sum broadcast), a scale of the sum and an argmax compared
// with labels (row values, one element a row), dropout of a softmax (a draw in the
// epilogue), a residual after a layer norm. Each result's bytes.
std::vector<std::vector<std::byte>> row_epilogue_program(const Device& d, DType dt,
                                                         std::size_t rows, std::size_t n) {
  const Shape sh{rows, n};
  d.seed(11);
  auto y = ops::softmax(made(d, sh, 2.0f, 1, dt), 1);  // (no prologue: runs alone)
  auto g = made(d, sh, 1.0f, 2, dt);
  auto gy = ops::binary(ir::BinaryFn::Mul, g, y);
  auto s = ops::reduce(ir::ReduceFn::Sum, std::move(gy), 1);
  auto dx = ops::binary(ir::BinaryFn::Mul, y, ops::binary(ir::BinaryFn::Sub, g, s));
  auto scaled = ops::binary_scalar(ir::BinaryFn::Mul, s, 3.0);  // a row value, kept
  auto x = made(d, sh, 1.5f, 3, dt);
  auto am = ops::reduce(ir::ReduceFn::ArgMax, ops::unary(ir::UnaryFn::Exp, x), 1);
  std::vector<std::int64_t> lv(rows);
  for (std::size_t i = 0; i < rows; ++i) lv[i] = static_cast<std::int64_t>((i * 5) % n);
  auto label = DynTensor::from_data(TensorData::from<std::int64_t>(lv, Shape{rows, 1}), d);
  auto hit = ops::cast(ops::binary(ir::BinaryFn::Eq, std::move(am), label), dt);
  auto p = ops::softmax(ops::binary_scalar(ir::BinaryFn::Mul, x, 0.5), 1);
  auto keep = ops::random(sh, Distribution::bernoulli(0.9), dt, d);
  auto drop = ops::binary_scalar(ir::BinaryFn::Mul,
                                 ops::binary(ir::BinaryFn::Mul, std::move(p), keep), 1 / 0.9);
  auto res = ops::binary(ir::BinaryFn::Add,
                         ops::layer_norm(ops::binary(ir::BinaryFn::Add, x, g), Shape{n},
                                         std::nullopt, std::nullopt, 1e-5),
                         x);
  std::vector<std::vector<std::byte>> out;
  for (const DynTensor& t : {dx, s, scaled, hit, drop, res}) out.push_back(bytes_of(t));
  EXPECT_EQ(hit.shape(), (Shape{rows, 1}));
  EXPECT_EQ(scaled.shape(), (Shape{rows, 1}));
  return out;
}

// The program on the fused device d and on plain: the same bytes, one group a pattern.
void expect_row_epilogues(const Device& d, const Device& plain, DType dt, std::size_t n) {
  const std::size_t rows = n > 5000 ? 2 : 7;
  const std::string what = std::string(name(dt)) + ", rows of " + std::to_string(n);
  fusion::reset_report(d);
  const auto got = row_epilogue_program(d, dt, rows, n);
  const auto want = row_epilogue_program(plain, dt, rows, n);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << what << ", " << i;
  const auto r = fusion::report(d);
  const auto* g = group_with(r, {"mul", "sum", "sub", "mul", "mul"});
  ASSERT_NE(g, nullptr) << what << ": " << groups_of(r);
  EXPECT_TRUE(g->fused) << what;
  EXPECT_EQ(g->elided, 2u) << what;   // g * y and g - s (the sum is named: kept)
  EXPECT_EQ(g->outputs, 3u) << what;  // dx, the sum, its scale
  EXPECT_NE(group_with(r, {"exp", "argmax", "equal", "cast"}), nullptr)
      << what << ": " << groups_of(r);
  EXPECT_NE(group_with(r, {"mul", "softmax", "random", "mul", "mul"}), nullptr)
      << what << ": " << groups_of(r);
  EXPECT_NE(group_with(r, {"add", "layer_norm", "add"}), nullptr) << what << ": " << groups_of(r);
}

}  // namespace

// Note [Row epilogues]: the element-wise consumers of a reduction, softmax or layer norm run
// in its group, row by row once the row is computed, with the plain device's bits; rows
// shorter than, equal to, and longer than a tile, and rows the reduction takes in chunks.
TEST(FusionPatterns, RowEpilogues) {
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    for (const std::size_t n : {std::size_t(1), std::size_t(37), std::size_t(1024),
                                std::size_t(2500), std::size_t(200003)}) {
      expect_row_epilogues(fused_with({}), Device::cpu(), dt, n);
    }
  }
}

// The same on Cuda (Note [Fused row epilogues] in cuda/codegen/fused.cpp): the epilogue in
// the row kernels — rows in registers and past them (apart), a reduction in one pass and in
// two (apart), an argmax compared with per-row labels (apart: a strided input).
TEST(FusionCuda, RowEpiloguesAgreeBitForBit) {
  EMBER_NEED_CUDA();
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    for (const std::size_t n : {std::size_t(1), std::size_t(37), std::size_t(1024),
                                std::size_t(2500), std::size_t(200003)}) {
      expect_row_epilogues(cuda_fused(), Device::cuda(0), dt, n);
    }
  }
}

namespace {

// Note [Rows of an input]: a reduction, softmax or layer norm of a value computed before
// (here: tensors made on the host) with element-wise consumers opens a group for them.
void expect_rows_of_inputs(const Device& d, const Device& plain, DType dt) {
  const Shape sh{6, 45};
  const auto prog = [&](const Device& dev) {
    dev.seed(5);
    auto x = made(dev, sh, 1.5f, 1, dt);
    auto r = made(dev, sh, 0.5f, 2, dt);
    auto norm = ops::binary(ir::BinaryFn::Div, x, ops::reduce(ir::ReduceFn::Sum, x, 1));
    auto p = ops::softmax(x, 1);
    auto keep = ops::random(sh, Distribution::bernoulli(0.8), dt, dev);
    auto drop = ops::binary_scalar(ir::BinaryFn::Mul,
                                   ops::binary(ir::BinaryFn::Mul, std::move(p), keep), 1.25);
    auto res = ops::binary(ir::BinaryFn::Add,
                           ops::layer_norm(x, Shape{45}, std::nullopt, std::nullopt, 1e-5), r);
    auto alone = ops::reduce(ir::ReduceFn::Max, r, 1);  // no consumer: runs as itself
    // log-softmax's backward pass, g - exp(y) * sum(g): exp(y) reads inputs alone, but the
    // op after it reads it with the sum.
    auto sg = ops::reduce(ir::ReduceFn::Sum, r, 1);
    auto ey = ops::unary(ir::UnaryFn::Exp, x);
    auto lsb = ops::binary(ir::BinaryFn::Sub, r,
                           ops::binary(ir::BinaryFn::Mul, std::move(ey), std::move(sg)));
    std::vector<std::vector<std::byte>> out;
    for (const DynTensor& t : {norm, drop, res, alone, lsb}) out.push_back(bytes_of(t));
    return out;
  };
  fusion::reset_report(d);
  EXPECT_EQ(prog(d), prog(plain)) << name(dt);
  const auto rep = fusion::report(d);
  EXPECT_NE(group_with(rep, {"sum", "div"}), nullptr) << name(dt) << ": " << groups_of(rep);
  EXPECT_NE(group_with(rep, {"softmax", "random", "mul", "mul"}), nullptr)
      << name(dt) << ": " << groups_of(rep);
  EXPECT_NE(group_with(rep, {"layer_norm", "add"}), nullptr) << name(dt) << ": " << groups_of(rep);
  EXPECT_NE(group_with(rep, {"sum", "exp", "mul", "sub"}), nullptr)
      << name(dt) << ": " << groups_of(rep);
}

}  // namespace

TEST(FusionPatterns, RowsOfAnInputTakeTheirEpilogue) {
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16})
    expect_rows_of_inputs(fused_with({}), Device::cpu(), dt);
}

TEST(FusionCuda, RowsOfAnInputTakeTheirEpilogue) {
  EMBER_NEED_CUDA();
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16})
    expect_rows_of_inputs(cuda_fused(), Device::cuda(0), dt);
}

namespace {

// The Cpu as a backend that takes row epilogues but has no fused code for them: it runs
// such a group apart (Note [Epilogues apart]), counting the parts it ran.
class EpiloguesApartCpu final : public ember::testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  backend::FusedCaps fused_caps() const override { return inner_->fused_caps(); }
  std::vector<ir::Handle> run_fused(backend::FusedGroup g) override {
    if (!g.has_row_epilogue()) return inner_->run_fused(std::move(g));
    ++groups;
    return backend::run_epilogue_apart(*this, std::move(g), [this](backend::FusedGroup p) {
      EXPECT_FALSE(p.has_row_epilogue());
      ++parts;
      return inner_->run_fused(std::move(p));
    });
  }
  std::size_t groups = 0, parts = 0;
};

}  // namespace

// A backend without fused code for row epilogues runs each such group as its head, its row
// values and its other values: the plain Cpu's bits, row values in their row shape.
TEST(FusionPatterns, RowEpiloguesRunApartWhereNotFused) {
  auto apart = std::make_shared<EpiloguesApartCpu>(Device::cpu().backend_ptr());
  const Device d(fusion::make_fusion_backend(apart, fusion::Options{}));
  const Device c = Device::cpu();
  for (DType dt : {DType::F32, DType::BF16}) {
    const Shape sh{9, 70};
    const auto prog = [&](const Device& dev) {
      auto y = ops::softmax(made(dev, sh, 2.0f, 1, dt), 1);
      auto g = made(dev, sh, 1.0f, 2, dt);
      auto s = ops::reduce(ir::ReduceFn::Sum, ops::binary(ir::BinaryFn::Mul, g, y), 1);
      // Mixed: a row value (the scaled sum) between two full values, a scalar read by both.
      auto t = ops::binary(ir::BinaryFn::Sub, g, s);
      auto scaled = ops::binary_scalar(ir::BinaryFn::Mul, s, 3.0);
      auto dx =
          ops::binary(ir::BinaryFn::Mul, ops::binary(ir::BinaryFn::Mul, y, std::move(t)), scaled);
      auto res = ops::binary(ir::BinaryFn::Add,
                             ops::softmax(ops::binary_scalar(ir::BinaryFn::Mul, g, 0.5), 1), y);
      std::vector<std::vector<std::byte>> out;
      for (const DynTensor& v : {dx, s, scaled, res}) out.push_back(bytes_of(v));
      EXPECT_EQ(scaled.shape(), (Shape{9, 1}));
      return out;
    };
    EXPECT_EQ(prog(d), prog(c)) << name(dt);
  }
  EXPECT_EQ(apart->groups, 4u);  // two a dtype
  EXPECT_EQ(apart->parts, 10u);  // head, rows, full; head, full
}

// An epilogue takes only what it can read once the row is computed: a consumer of a prologue
// value closes the group (the value is kept for it), a consumer that feeds a later row
// instruction opens the next group as its prologue (var's `(x - mean)²` summed: never
// written), and so does an op of inputs alone.
TEST(FusionPatterns, RowEpiloguesCloseWhereTheyCannotTake) {
  const Device c = Device::cpu(), d = fused_with({});
  const auto prog = [](const Device& dev) {
    auto x = input(dev, 9, 40, 1.0f);
    auto e = (x * 2.0f).exp();
    auto y = activation::softmax(e, 1) * e;  // reads e, a prologue value: not the epilogue
    auto a = input(dev, 9, 40, 0.8f);
    auto m = (a * 2.0f).mean_dim(1);
    auto v = ((a - m) * (a - m)).sum_dim(1);         // a - m feeds the sum
    auto u = input(dev, 9, 40, 0.3f) * 0.5f + 1.0f;  // inputs alone: not the sum's epilogue
    auto out = values(y);
    for (float f : values(v)) out.push_back(f);
    for (float f : values(u)) out.push_back(f);
    return out;
  };
  EXPECT_EQ(prog(d), prog(c));
  const auto r = fusion::report(d);
  const auto* g = group_with(r, {"mul", "exp", "softmax"});
  ASSERT_NE(g, nullptr) << groups_of(r);
  EXPECT_EQ(g->closed, CloseReason::Reduction);
  // (softmax(e) * e opens the next group, which a * 2 and its mean join.)
  EXPECT_NE(group_with(r, {"mul", "mul", "mean"}), nullptr) << groups_of(r);
  EXPECT_NE(group_with(r, {"sub", "sub", "mul", "sum"}), nullptr) << groups_of(r);
  EXPECT_NE(group_with(r, {"mul", "add"}), nullptr) << groups_of(r);
}
