// Concurrent backward passes (Note [Concurrent backward] in src/autodiff/graph.hpp): two
// threads calling backward at once on losses that share graph nodes. One pass gets the
// gradients a sequential run gives, the other an ember::Error (the freed graph, or the
// graph in use by the other thread) — never a crash. Graphs that share only leaves both
// succeed. Built under ThreadSanitizer by `make test-tsan`.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <ember/ember.hpp>

using namespace ember;
using ir::BinaryFn;
using ir::ReduceFn;

namespace {

struct Result {
  bool ok = false;
  std::vector<double> grad;
  std::string error;
};

// Runs f0 and f1 on two threads released together.
template <class F0, class F1>
void race(F0&& f0, F1&& f1) {
  std::atomic<int> ready{0};
  const auto start = [&] {
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();
  };
  std::thread t0([&] {
    start();
    f0();
  });
  std::thread t1([&] {
    start();
    f1();
  });
  t0.join();
  t1.join();
}

Result backward_of(const DynTensor& loss, const DynTensor& x) {
  Result r;
  try {
    auto g = ops::backward(loss);
    auto gx = ops::grad(x, g);
    r.ok = gx.has_value();
    if (gx) r.grad = gx->to_data().to_vector<double>();
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

const std::vector<double> kX{0.5, -1.0, 2.0};

void expect_scaled_exp(const std::vector<double>& g, double scale) {
  ASSERT_EQ(g.size(), kX.size());
  for (std::size_t i = 0; i < kX.size(); ++i) {
    EXPECT_NEAR(g[i], scale * std::exp(kX[i]), 1e-12 * scale * std::exp(kX[i])) << i;
  }
}

void shared_intermediate(Checkpointing ck, int rounds) {
  const Device dev = Device::cpu().autodiff(ck);
  int first_won = 0, second_won = 0;
  for (int round = 0; round < rounds; ++round) {
    auto x = ops::require_grad(ops::from_data(TensorData::from<double>(kX), dev));
    auto y = ops::unary(ir::UnaryFn::Exp, x);
    auto l1 = ops::reduce_all(ReduceFn::Sum, ops::binary_scalar(BinaryFn::Mul, y, 2.0));
    auto l2 = ops::reduce_all(ReduceFn::Sum, ops::binary_scalar(BinaryFn::Mul, y, 3.0));
    Result r1, r2;
    race([&] { r1 = backward_of(l1, x); }, [&] { r2 = backward_of(l2, x); });
    // Exactly one pass frees the shared node; the other reports it.
    ASSERT_NE(r1.ok, r2.ok) << "round " << round << ": " << r1.error << " | " << r2.error;
    const Result& won = r1.ok ? r1 : r2;
    const Result& lost = r1.ok ? r2 : r1;
    expect_scaled_exp(won.grad, r1.ok ? 2.0 : 3.0);
    EXPECT_EQ(lost.error.rfind("backward: the graph", 0), 0u) << lost.error;
    (r1.ok ? first_won : second_won)++;
    // Afterwards the loser's graph is freed, as after a sequential run.
    const Result again = backward_of(r1.ok ? l2 : l1, x);
    EXPECT_FALSE(again.ok);
    EXPECT_NE(again.error.find("already freed"), std::string::npos) << again.error;
  }
  EXPECT_EQ(first_won + second_won, rounds);
}

}  // namespace

TEST(ConcurrentBackward, SharedIntermediateOnePassWins) {
  shared_intermediate(Checkpointing::None, 300);
}

TEST(ConcurrentBackward, SharedIntermediateBalancedCheckpointing) {
  shared_intermediate(Checkpointing::Balanced, 200);
}

// Losses sharing only the leaf both get their gradients, as sequentially.
TEST(ConcurrentBackward, SharedLeafBothSucceed) {
  const Device dev = Device::cpu().autodiff();
  for (int round = 0; round < 200; ++round) {
    auto x = ops::require_grad(ops::from_data(TensorData::from<double>(kX), dev));
    auto l1 = ops::reduce_all(
        ReduceFn::Sum, ops::binary_scalar(BinaryFn::Mul, ops::unary(ir::UnaryFn::Exp, x), 2));
    auto l2 = ops::reduce_all(
        ReduceFn::Sum, ops::binary_scalar(BinaryFn::Mul, ops::unary(ir::UnaryFn::Exp, x), 3));
    Result r1, r2;
    race([&] { r1 = backward_of(l1, x); }, [&] { r2 = backward_of(l2, x); });
    ASSERT_TRUE(r1.ok) << r1.error;
    ASSERT_TRUE(r2.ok) << r2.error;
    expect_scaled_exp(r1.grad, 2.0);
    expect_scaled_exp(r2.grad, 3.0);
  }
}

// The same loss from two threads: one pass, one error.
TEST(ConcurrentBackward, SameLossTwice) {
  const Device dev = Device::cpu().autodiff();
  for (int round = 0; round < 200; ++round) {
    auto x = ops::require_grad(ops::from_data(TensorData::from<double>(kX), dev));
    auto l = ops::reduce_all(ReduceFn::Sum,
                             ops::binary_scalar(BinaryFn::Mul, ops::unary(ir::UnaryFn::Exp, x), 2));
    Result r1, r2;
    race([&] { r1 = backward_of(l, x); }, [&] { r2 = backward_of(l, x); });
    ASSERT_NE(r1.ok, r2.ok) << r1.error << " | " << r2.error;
    expect_scaled_exp(r1.ok ? r1.grad : r2.grad, 2.0);
  }
}
