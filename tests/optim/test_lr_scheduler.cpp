// Each scheduler's learning rate over 100 steps against torch.optim.lr_scheduler (golden
// values from tests/optim/make_golden.py), their state round trip and their bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <ember/ember.hpp>

using namespace ember;
using namespace ember::optim;

namespace {

std::vector<double> golden(const std::string& name) {
  std::ifstream f(std::string(EMBER_OPTIM_GOLDEN_DIR) + "/schedulers.json");
  EXPECT_TRUE(f.good()) << "run tests/optim/make_golden.py";
  return nn::Json::parse(f).at(name).get<std::vector<double>>();
}

void expect_sequence(LrScheduler& s, const std::string& name) {
  const auto want = golden(name);
  ASSERT_EQ(want.size(), 100u);
  for (std::size_t k = 0; k < want.size(); ++k) {
    const double lr = s.step();
    ASSERT_NEAR(lr, want[k], 1e-12 * std::max(1.0, std::abs(want[k])) + 1e-15)
        << name << " step " << k;
  }
  EXPECT_EQ(s.steps(), 100u);
}

TEST(LrScheduler, ConstantWithFactor) {
  auto s = ConstantLrConfig{0.1}.with_factor(0.25).with_total_iters(10).init();
  expect_sequence(s, "constant");
}
TEST(LrScheduler, Linear) {
  auto s = LinearLrConfig{0.01, 0.1, 30}.init();
  expect_sequence(s, "linear");
}
TEST(LrScheduler, Step) {
  auto s = StepLrConfig{0.1, 7}.with_gamma(0.5).init();
  expect_sequence(s, "step");
}
TEST(LrScheduler, MultiStep) {
  auto s = MultiStepLrConfig{0.1, {10, 25, 60}}.with_gamma(0.3).init();
  expect_sequence(s, "multistep");
}
TEST(LrScheduler, Exponential) {
  auto s = ExponentialLrConfig{0.1, 0.97}.init();
  expect_sequence(s, "exponential");
}
TEST(LrScheduler, CosineAnnealingPastItsPeriod) {
  auto s = CosineAnnealingLrConfig{0.1, 40}.with_min_lr(0.001).init();
  expect_sequence(s, "cosine");
}
TEST(LrScheduler, CosineAnnealingWarmRestarts) {
  auto s = CosineAnnealingWarmRestartsConfig{0.1, 10}.with_t_mult(2).with_min_lr(0.001).init();
  expect_sequence(s, "cosine_restarts");
}
TEST(LrScheduler, OneCycle) {
  auto s = OneCycleLrConfig{0.1, 100}.init();
  expect_sequence(s, "onecycle");
}
TEST(LrScheduler, OneCycleLinearThreePhase) {
  auto s = OneCycleLrConfig{0.1, 100}
               .with_pct_start(0.25)
               .with_anneal_strategy(AnnealStrategy::Linear)
               .with_div_factor(10.0)
               .with_final_div_factor(100.0)
               .with_three_phase(true)
               .init();
  expect_sequence(s, "onecycle_linear_three_phase");
}
TEST(LrScheduler, Noam) {
  // torch: LambdaLR with the Noam factor on a base lr of 1.
  auto s = NoamLrConfig{1.0}.with_warmup_steps(10).with_model_size(512).init();
  expect_sequence(s, "noam");
}
TEST(LrScheduler, LinearWarmupThenCosine) {
  auto s = SequentialLr::of({10}, LinearLrConfig{0.001, 0.1, 10}.init(),
                            CosineAnnealingLrConfig{0.1, 90}.with_min_lr(1e-4).init());
  expect_sequence(s, "warmup_cosine");
}
TEST(LrScheduler, ConstantWarmupThenExponential) {
  auto s = SequentialLr::of({5}, ConstantLrConfig{0.1}.with_factor(0.1).with_total_iters(5).init(),
                            ExponentialLrConfig{0.1, 0.95}.init());
  expect_sequence(s, "warmup_step");
}

TEST(LrScheduler, StateResumesTheSequence) {
  auto a = CosineAnnealingWarmRestartsConfig{0.1, 10}.with_t_mult(2).init();
  for (int i = 0; i < 13; ++i) a.step();
  const SchedulerState st = a.state();
  EXPECT_EQ(st.meta["step"].get<std::size_t>(), 13u);
  EXPECT_TRUE(st.tensors.empty());
  auto b = CosineAnnealingWarmRestartsConfig{0.1, 10}.with_t_mult(2).init();
  b.load_state(st);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a.step(), b.step());
  auto other = StepLrConfig{0.1, 7}.init();
  try {
    other.load_state(st);
    FAIL() << "a state from another scheduler must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optim::CosineAnnealingWarmRestarts"), std::string::npos)
        << e.what();
  }
}

TEST(LrScheduler, BadInput) {
  EXPECT_THROW((LinearLrConfig{0.1, 0.2, 0}.init()), Error);
  EXPECT_THROW((StepLrConfig{-0.1, 3}.init()), Error);
  EXPECT_THROW((ExponentialLrConfig{std::nan(""), 0.9}.init()), Error);
  EXPECT_THROW((MultiStepLrConfig{0.1, {30, 10}}.init()), Error);
  EXPECT_THROW((OneCycleLrConfig{0.1, 100}.with_pct_start(1.5).init()), Error);
  EXPECT_THROW((SequentialLr::of({}, StepLrConfig{0.1, 3}.init(), StepLrConfig{0.1, 3}.init())),
               Error);
  auto s = OneCycleLrConfig{0.1, 3}.init();
  for (int i = 0; i < 4; ++i) s.step();  // steps 0..3: 3 == total_steps is PyTorch's last
  EXPECT_THROW((s.step()), Error);
}

}  // namespace
