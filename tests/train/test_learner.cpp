// The Learner: a run trains (accuracy rises above chance), logs and checkpoints; a run
// stopped mid-epoch and resumed ends with bit for bit the weights of an uninterrupted one
// (with and without gradient accumulation); early stopping; the best checkpoint; bad input.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ember/autodiff/autodiff.hpp>

#include "data/expect_error.hpp"
#include "train/tiny_task.hpp"

using namespace ember;
using namespace ember::train;
using namespace ember::train::testing;
using ember::data::testing::expect_error;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kEpochs = 3, kBatchesPerEpoch = 6;  // 96 items, batch 16

struct Setup {
  std::size_t accumulation = 1;
  std::size_t workers = 0;
  std::optional<std::size_t> stop_at = {};
  bool resume = false;
  std::uint64_t init_seed = 7;
};

LearnerBuilder builder(const std::string& dir, const Setup& s, Interrupter stop = {}) {
  LearnerBuilder b(dir);
  b.epochs(kEpochs)
      .metric(LossMetric{})
      .metric(AccuracyMetric{})
      .train_metric(std::make_unique<LearningRateMetric>())
      .grad_accumulation(s.accumulation)
      .grad_clipping(optim::GradientClipping::norm(1.0))
      .dashboard(DashboardMode::None)
      .seed(99)
      .interrupter(stop)
      .resume(s.resume);
  return b;
}

// Runs (or resumes) the tiny task in `dir`; returns the summary and the final weights.
std::pair<Summary, TinyNet> run(const std::string& dir, const Setup& s) {
  const Device ad = Device::cpu().autodiff();
  Interrupter stop;
  if (s.stop_at) stop.stop_at_step(*s.stop_at);
  const std::size_t steps_per_epoch = (kBatchesPerEpoch + s.accumulation - 1) / s.accumulation;
  auto learner =
      builder(dir, s, stop)
          .build(tiny_net(ad, s.init_seed), optim::AdamWConfig{}.with_weight_decay(0.01).init(),
                 optim::CosineAnnealingLrConfig{0.02, kEpochs * steps_per_epoch}.init());
  auto train = train_loader(ad, s.workers);
  auto valid = valid_loader(ad.inner());
  Summary sum = learner.fit(train, valid);
  return {sum, std::move(learner).model()};
}

std::vector<TensorData> tensors_of(const TinyNet& net) {
  std::vector<TensorData> out;
  nn::visit(net, [&](const nn::TensorEntry& e) { out.push_back(e.tensor.to_data()); });
  return out;
}

void expect_bitwise_equal(const TinyNet& a, const TinyNet& b) {
  const auto ta = tensors_of(a), tb = tensors_of(b);
  ASSERT_EQ(ta.size(), tb.size());
  for (std::size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(ta[i].shape(), tb[i].shape());
    EXPECT_EQ(ta[i].bytes(), tb[i].bytes()) << "tensor " << i << " differs";
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The numeric rows of a CSV log (header skipped; empty cells read as NaN).
std::vector<std::vector<double>> csv_rows(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<std::vector<double>> rows;
  while (std::getline(in, line)) {
    std::vector<double> row;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) row.push_back(cell.empty() ? NAN : std::stod(cell));
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST(Learner, TrainsLogsAndCheckpoints) {
  const std::string dir = fresh_dir("trains");
  auto [sum, net] = run(dir, {});
  EXPECT_EQ(sum.outcome, Summary::Outcome::Completed);
  EXPECT_EQ(sum.epochs, kEpochs);
  EXPECT_EQ(sum.steps, kEpochs * kBatchesPerEpoch);
  EXPECT_EQ(sum.batches, kEpochs * kBatchesPerEpoch);
  // Separable clusters: far above the 25% of chance after three epochs.
  EXPECT_GT(sum.valid.at("accuracy"), 0.8);
  EXPECT_TRUE(fs::exists(dir + "/model.ember"));
  // The curve pictures of every metric, per epoch and per step, in both formats.
  for (const char* f : {"/curves/loss.png", "/curves/loss.svg", "/curves/loss_steps.png",
                        "/curves/loss_steps.svg"}) {
    EXPECT_TRUE(fs::exists(dir + f)) << f;
    if (fs::exists(dir + f)) {
      EXPECT_GT(fs::file_size(dir + f), 200u) << f;
    }
  }
  // Logs: a header and one row per step / epoch.
  const std::string steps = slurp(dir + "/train_steps.csv");
  EXPECT_EQ(steps.substr(0, steps.find('\n')), "epoch,step,loss,accuracy,lr");
  EXPECT_EQ(std::count(steps.begin(), steps.end(), '\n'), long(1 + kEpochs * kBatchesPerEpoch));
  const std::string epochs = slurp(dir + "/valid_epochs.csv");
  EXPECT_EQ(std::count(epochs.begin(), epochs.end(), '\n'), long(1 + kEpochs));
  const std::string jl = slurp(dir + "/epochs.jsonl");
  EXPECT_EQ(std::count(jl.begin(), jl.end(), '\n'), long(2 * kEpochs));
  // The epoch's loss is the item-weighted mean of its steps' losses (16 items each).
  const auto step_rows = csv_rows(dir + "/train_steps.csv");
  const auto epoch_rows = csv_rows(dir + "/train_epochs.csv");
  ASSERT_EQ(epoch_rows.size(), kEpochs);
  for (std::size_t e = 0; e < kEpochs; ++e) {
    double mean = 0;
    for (std::size_t b = 0; b < kBatchesPerEpoch; ++b)
      mean += step_rows[e * kBatchesPerEpoch + b][2];
    mean /= double(kBatchesPerEpoch);
    EXPECT_NEAR(epoch_rows[e][2], mean, 1e-7 * std::fabs(mean)) << "epoch " << e + 1;
    EXPECT_EQ(epoch_rows[e][1], double((e + 1) * kBatchesPerEpoch));  // the step column
  }
  // Checkpoints: keep_last 2 by default.
  CheckpointStore store(dir + "/checkpoints");
  EXPECT_EQ(store.list(), (std::vector<std::string>{"epoch-0002", "epoch-0003"}));
  ASSERT_TRUE(store.latest());
  EXPECT_EQ(fs::path(*store.latest()).filename(), "epoch-0003");
  // The saved model is the returned one.
  const Device cpu = Device::cpu();
  TinyNet loaded = record::load(tiny_net(cpu, 1), dir + "/model.ember", cpu);
  expect_bitwise_equal(loaded, net);
}

// Note [Deterministic resume] in learner.hpp: stopped mid-epoch, resumed by a fresh
// Learner (fresh model with other initial weights, optimizer, scheduler, loaders), the run
// ends with the uninterrupted run's weights, bit for bit.
std::string fmt_name(std::size_t epoch, std::size_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "epoch-%04zu-step-%06zu", epoch, step);
  return buf;
}

void check_resume(const Setup& base, std::size_t stop_at, const std::string& tag) {
  const std::string whole = fresh_dir(tag + "-whole"), parts = fresh_dir(tag + "-parts");
  auto [full, full_net] = run(whole, base);

  Setup first = base;
  first.stop_at = stop_at;
  auto [stopped, stopped_net] = run(parts, first);
  EXPECT_EQ(stopped.outcome, Summary::Outcome::Interrupted);
  EXPECT_EQ(stopped.steps, stop_at);
  EXPECT_TRUE(stopped.model_path.empty());
  CheckpointStore store(parts + "/checkpoints");
  ASSERT_TRUE(store.latest());
  EXPECT_EQ(fs::path(*store.latest()).filename(), fmt_name(2, stop_at));

  Setup second = base;
  second.resume = true;
  second.init_seed = 12345;  // other initial weights: the checkpoint must replace them
  auto [resumed, resumed_net] = run(parts, second);
  EXPECT_EQ(resumed.outcome, Summary::Outcome::Completed);
  EXPECT_EQ(resumed.steps, full.steps);
  EXPECT_EQ(resumed.batches, full.batches);
  expect_bitwise_equal(resumed_net, full_net);
  // Validation runs on the same weights, so its logs are the same, digit for digit; the
  // step logs are restored from the checkpoint's history.
  EXPECT_EQ(slurp(parts + "/valid_epochs.csv"), slurp(whole + "/valid_epochs.csv"));
  EXPECT_EQ(slurp(parts + "/train_steps.csv"), slurp(whole + "/train_steps.csv"));
  EXPECT_EQ(resumed.valid, full.valid);
  // The interrupted epoch's training aggregates cover the whole epoch (the metrics'
  // states are in the checkpoint), as in the uninterrupted run.
  EXPECT_EQ(slurp(parts + "/train_epochs.csv"), slurp(whole + "/train_epochs.csv"));
  EXPECT_EQ(resumed.train, full.train);
}

TEST(Learner, ResumeMidEpochGivesTheUninterruptedWeights) {
  // Step 8 is the second batch of epoch 2 (6 batches an epoch); two loader workers.
  check_resume({.workers = 2}, 8, "resume");
}

TEST(Learner, ResumeWithGradientAccumulation) {
  // Two batches a step: 3 steps an epoch; step 4 ends batch 8, inside epoch 2.
  check_resume({.accumulation = 2}, 4, "resume-accum");
}

TEST(Learner, ResumeAfterTheLastEpochOnlySavesTheModel) {
  const std::string dir = fresh_dir("resume-done");
  auto [a, net_a] = run(dir, {});
  auto [b, net_b] = run(dir, {.resume = true, .init_seed = 3});
  EXPECT_EQ(b.outcome, Summary::Outcome::Completed);
  EXPECT_EQ(b.steps, a.steps);
  expect_bitwise_equal(net_a, net_b);
}

TEST(Learner, EarlyStoppingAndTheBestCheckpoint) {
  const std::string dir = fresh_dir("early");
  const Device ad = Device::cpu().autodiff();
  // min_delta 10 on the loss: no epoch after the first counts as an improvement, so with
  // patience 2 the run stops after epoch 3 of 10.
  auto learner =
      LearnerBuilder(dir)
          .epochs(10)
          .metric(LossMetric{})
          .metric(AccuracyMetric{})
          .early_stopping({.metric = "loss", .patience = 2, .min_delta = 10.0})
          .checkpoints({.keep_last = 1, .best_metric = "accuracy"})
          .dashboard(DashboardMode::None)
          .build(tiny_net(ad, 7), optim::SgdConfig{}.init(), optim::ConstantLrConfig{0.05}.init());
  auto train = train_loader(ad);
  auto valid = valid_loader(ad.inner());
  Summary s = learner.fit(train, valid);
  EXPECT_EQ(s.outcome, Summary::Outcome::EarlyStopped);
  EXPECT_EQ(s.epochs, 3u);
  // The best checkpoint is the epoch of the highest validation accuracy in the history
  // (the first of equals), kept besides the last one.
  const auto& acc = learner.history().epochs(Split::Valid, "accuracy");
  ASSERT_EQ(acc.size(), 3u);
  std::size_t best = 0;
  for (std::size_t e = 1; e < acc.size(); ++e)
    if (acc[e].value > acc[best].value) best = e;
  CheckpointStore store(dir + "/checkpoints");
  ASSERT_TRUE(store.best());
  char name[32];
  std::snprintf(name, sizeof name, "epoch-%04zu", best + 1);
  EXPECT_EQ(fs::path(*store.best()).filename(), name);
  ASSERT_TRUE(s.best);
  EXPECT_EQ(s.best_metric, "valid loss");  // the early-stopping metric
  EXPECT_EQ(s.best->epoch, learner.history().best_epoch(Split::Valid, "loss", false)->epoch);
  const auto kept = store.list();
  EXPECT_LE(kept.size(), 2u);
  EXPECT_NE(std::find(kept.begin(), kept.end(), "epoch-0003"), kept.end());
  EXPECT_NE(std::find(kept.begin(), kept.end(), std::string(name)), kept.end());
}

TEST(Learner, PeriodicCheckpointsAndGradNorm) {
  const std::string dir = fresh_dir("periodic");
  const Device ad = Device::cpu().autodiff();
  auto learner =
      LearnerBuilder(dir)
          .epochs(1)
          .checkpoints({.every_epoch = false, .every_steps = 4, .keep_last = 0})
          .track_grad_norm()
          .dashboard(DashboardMode::None)
          .build(tiny_net(ad, 7), optim::SgdConfig{}.init(), optim::ConstantLrConfig{0.05}.init());
  auto train = train_loader(ad);
  Summary s = learner.fit(train);
  EXPECT_EQ(s.outcome, Summary::Outcome::Completed);
  CheckpointStore store(dir + "/checkpoints");
  EXPECT_EQ(store.list(), (std::vector<std::string>{"epoch-0001-step-000004"}));
  EXPECT_EQ(learner.history().steps(Split::Train, "loss").size(), kBatchesPerEpoch);
}

// ---- bad input ----

struct NanNet : TinyNet {
  EMBER_MODULE(NanNet, fc1, bn, dropout, fc2)
  mutable int calls = 0;
  StepOutput train_step(const Batch& b) const {
    StepOutput out = TinyNet::train_step(b);
    if (++calls == 3) out.loss = out.loss * std::numeric_limits<double>::quiet_NaN();
    return out;
  }
};

// A Ctrl-C arriving during a step (SIGINT raised from inside it).
struct CtrlCNet : TinyNet {
  EMBER_MODULE(CtrlCNet, fc1, bn, dropout, fc2)
  mutable int calls = 0;
  StepOutput train_step(const Batch& b) const {
    if (++calls == 3) std::raise(SIGINT);
    return TinyNet::train_step(b);
  }
};

TEST(Learner, CtrlCStopsAfterTheCurrentStepWithACheckpoint) {
  const std::string dir = fresh_dir("ctrl-c");
  const Device ad = Device::cpu().autodiff();
  auto learner = LearnerBuilder(dir)
                     .epochs(2)
                     .dashboard(DashboardMode::None)
                     .build(CtrlCNet{tiny_net(ad, 7)}, optim::SgdConfig{}.init(),
                            optim::ConstantLrConfig{0.05}.init());
  auto train = train_loader(ad);
  Summary s = learner.fit(train);
  EXPECT_EQ(s.outcome, Summary::Outcome::Interrupted);
  EXPECT_EQ(s.steps, 3u);  // the step in progress completed, no further one
  CheckpointStore store(dir + "/checkpoints");
  ASSERT_TRUE(store.latest());
  EXPECT_EQ(fs::path(*store.latest()).filename(), "epoch-0001-step-000003");
  EXPECT_EQ(train.state(), (data::LoaderState{0, 3}));
  // The handler is the previous one again once fit returns.
  struct sigaction now {};
  sigaction(SIGINT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

// The third step's loss goes NaN through an op (the log of a negative number).
struct LogNanNet : TinyNet {
  EMBER_MODULE(LogNanNet, fc1, bn, dropout, fc2)
  mutable int calls = 0;
  StepOutput train_step(const Batch& b) const {
    StepOutput out = TinyNet::train_step(b);
    if (++calls == 3) out.loss = (out.loss - 100.0).log();
    return out;
  }
};

TEST(LearnerBadInput, DetectNanNamesTheOpAndTheStep) {
  const autodiff::NanCheck before = autodiff::detect_nan();
  autodiff::set_detect_nan(autodiff::NanCheck::Nan);
  const Device ad = Device::cpu().autodiff();
  auto learner = LearnerBuilder(fresh_dir("detect-nan"))
                     .dashboard(DashboardMode::None)
                     .build(LogNanNet{tiny_net(ad, 7)}, optim::SgdConfig{}.init(),
                            optim::ConstantLrConfig{0.05}.init());
  auto train = train_loader(ad);
  expect_error(
      [&] { learner.fit(train); },
      "train::Learner::fit: at epoch 1, batch 3 of 6 (training batch 3 of the run, after "
      "2 optimizer steps): EMBER_DETECT_NAN: Unary(log) (forward) produced NaN at element 0");
  autodiff::set_detect_nan(before);
}

TEST(LearnerBadInput, NanLossNamesTheStep) {
  const Device ad = Device::cpu().autodiff();
  NanNet net{tiny_net(ad, 7)};
  auto learner =
      LearnerBuilder(fresh_dir("nan"))
          .dashboard(DashboardMode::None)
          .build(std::move(net), optim::SgdConfig{}.init(), optim::ConstantLrConfig{0.05}.init());
  auto train = train_loader(ad);
  expect_error([&] { learner.fit(train); }, "the loss is NaN at epoch 1, batch 3 of 6");
}

TEST(LearnerBadInput, UnwritableArtifactFolder) {
  const std::string dir = fresh_dir("unwritable");
  fs::create_directories(dir);
  std::ofstream(dir + "/file") << "x";
  const Device ad = Device::cpu().autodiff();
  auto learner =
      LearnerBuilder(dir + "/file/run")
          .dashboard(DashboardMode::None)
          .build(tiny_net(ad, 7), optim::SgdConfig{}.init(), optim::ConstantLrConfig{0.05}.init());
  auto train = train_loader(ad);
  expect_error([&] { learner.fit(train); }, "cannot create the folder '" + dir + "/file/run'");
}

TEST(LearnerBadInput, CheckpointFromAnotherModel) {
  const std::string dir = fresh_dir("other-model");
  run(dir, {});
  const Device ad = Device::cpu().autodiff();
  auto learner = builder(dir, {.resume = true})
                     .build(tiny_net(ad, 7, /*hidden=*/12), optim::AdamWConfig{}.init(),
                            optim::ConstantLrConfig{0.01}.init());
  auto train = train_loader(ad);
  auto valid = valid_loader(ad.inner());
  expect_error([&] { learner.fit(train, valid); },
               "the checkpoint's model does not match this model");
  expect_error([&] { learner.fit(train, valid); }, "fc1.weight");
}

TEST(LearnerBadInput, LabelOutsideTheClasses) {
  const Device ad = Device::cpu().autodiff();
  auto learner =
      LearnerBuilder(fresh_dir("label"))
          .metric(AccuracyMetric{})
          .dashboard(DashboardMode::None)
          .build(tiny_net(ad, 7), optim::SgdConfig{}.init(), optim::ConstantLrConfig{0.05}.init());
  auto train = data::DataLoaderBuilder(TinyBatcher{})
                   .batch_size(16)
                   .device(ad)
                   .build(tiny_dataset(32, 1, /*bad_label=*/9));
  expect_error([&] { learner.fit(train); }, "label 9");
}

TEST(LearnerBadInput, EmptyDatasetAndBatchSizeZero) {
  expect_error([] { data::DataLoaderBuilder(TinyBatcher{}).batch_size(0); },
               "the batch size must be positive, got 0");
  expect_error([] { data::DataLoaderBuilder(TinyBatcher{}).build(tiny_dataset(0, 1)); },
               "the dataset is empty");
}

TEST(LearnerBadInput, SettingsAndMetricsNamedByEarlyStoppingMustExist) {
  expect_error([] { LearnerBuilder("x").epochs(0); }, "the number of epochs must be positive");
  expect_error([] { LearnerBuilder("x").grad_accumulation(0); }, "must be positive, got 0");
  expect_error([] { LearnerBuilder(""); }, "the artifact folder is empty");
  const Device ad = Device::cpu().autodiff();
  auto learner =
      LearnerBuilder(fresh_dir("es-metric"))
          .metric(LossMetric{})
          .early_stopping({.metric = "accuracy"})
          .dashboard(DashboardMode::None)
          .build(tiny_net(ad, 7), optim::SgdConfig{}.init(), optim::ConstantLrConfig{0.05}.init());
  auto train = train_loader(ad);
  auto valid = valid_loader(ad.inner());
  expect_error([&] { learner.fit(train, valid); },
               "'accuracy', which is not among the valid metrics (loss)");
  expect_error([&] { learner.fit(train); }, "but fit was given no validation loader");
}

TEST(Evaluator, AccuracyOnATestSetMatchesAHandCount) {
  const Device ad = Device::cpu().autodiff();
  auto [sum, net] = run(fresh_dir("eval"), {});
  auto test = valid_loader(Device::cpu());
  Evaluator ev;
  ev.metric(LossMetric{}).metric(AccuracyMetric{});
  EvalResult r = ev.evaluate(net, test);
  EXPECT_EQ(r.items, 40u);
  EXPECT_EQ(r.batches, 2u);
  // The same count by hand: argmax of the logits of net.valid() against the labels.
  const TinyNet eval = net.valid();
  std::size_t right = 0;
  for (auto& b : test) {
    const auto pred =
        eval.forward(b.x).argmax_dim(1).to_data().convert(DType::I64).to_vector<std::int64_t>();
    const auto y = b.y.to_data().convert(DType::I64).to_vector<std::int64_t>();
    for (std::size_t i = 0; i < y.size(); ++i) right += pred[i] == y[i];
  }
  EXPECT_DOUBLE_EQ(r.at("accuracy"), double(right) / 40.0);
  EXPECT_DOUBLE_EQ(r.at("accuracy"), sum.valid.at("accuracy"));  // the last validation pass
  expect_error([&] { (void)r.at("f1"); }, "no metric 'f1'");
}
