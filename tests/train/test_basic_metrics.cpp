// The basic metrics against values counted by hand, and the History's JSON round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include <ember/train/train.hpp>

#include "data/expect_error.hpp"

using namespace ember;
using namespace ember::train;
using ember::data::testing::expect_error;

namespace {
MetricInput input(double loss, std::size_t items) {
  MetricInput in;
  in.loss = loss;
  in.items = items;
  return in;
}
}  // namespace

TEST(Metrics, LossIsTheItemWeightedMean) {
  LossMetric m;
  EXPECT_TRUE(std::isnan(m.value()));
  m.update(input(2.0, 10));
  m.update(input(0.5, 30));
  EXPECT_DOUBLE_EQ(m.value(), (2.0 * 10 + 0.5 * 30) / 40.0);
  EXPECT_DOUBLE_EQ(m.last(), 0.5);
  EXPECT_FALSE(m.higher_is_better());
  m.reset();
  EXPECT_TRUE(std::isnan(m.value()));
  EXPECT_TRUE(std::isnan(m.last()));
  expect_error([&] { m.update(MetricInput{}); }, "train::LossMetric: the step gave no loss");
}

TEST(Metrics, AccuracyCountsArgmaxHits) {
  // Rows: argmax 2 (label 2: hit), argmax 0 (label 1: miss), argmax 1 (label 1: hit; the
  // first of two equal maxima), argmax 0 (label 3: miss).
  const TensorData logits =
      TensorData::from<float>({0.1f, 0.2f, 0.9f, 0.0f, 5.0f, 1.0f, 1.0f, 1.0f, 0.0f, 3.0f, 3.0f,
                               0.0f, 2.0f, 1.0f, 0.0f, -1.0f},
                              Shape{4, 4});
  const TensorData labels = TensorData::from<std::int64_t>({2, 1, 1, 3}, Shape{4});
  MetricInput in;
  in.output = &logits;
  in.target = &labels;
  AccuracyMetric m;
  m.update(in);
  EXPECT_DOUBLE_EQ(m.value(), 0.5);
  EXPECT_DOUBLE_EQ(m.last(), 0.5);
  const TensorData labels2 = TensorData::from<std::int64_t>({2, 0, 1, 3}, Shape{4});
  in.target = &labels2;
  m.update(in);
  EXPECT_DOUBLE_EQ(m.value(), 5.0 / 8.0);
  EXPECT_DOUBLE_EQ(m.last(), 0.75);
  EXPECT_TRUE(m.higher_is_better());

  AccuracyMetric ignoring(std::int64_t{3});
  in.target = &labels;
  ignoring.update(in);
  EXPECT_DOUBLE_EQ(ignoring.value(), 2.0 / 3.0);
  EXPECT_EQ(ignoring.clone_empty()->name(), "accuracy");
}

TEST(Metrics, AccuracyBadInput) {
  const TensorData logits = TensorData::from<float>({0, 1, 1, 0}, Shape{2, 2});
  const TensorData out_of_range = TensorData::from<std::int64_t>({1, 2}, Shape{2});
  const TensorData wrong_n = TensorData::from<std::int64_t>({1, 0, 1}, Shape{3});
  const TensorData float_labels = TensorData::from<float>({1, 0}, Shape{2});
  AccuracyMetric m;
  MetricInput in;
  expect_error([&] { m.update(in); }, "the step gave no output");
  in.output = &logits;
  in.target = &out_of_range;
  expect_error([&] { m.update(in); }, "label 2 at index 1 is outside the 2 classes");
  in.target = &wrong_n;
  expect_error([&] { m.update(in); },
               "expected output [N, C] and target [N], got output [2, 2] and target [3]");
  in.target = &float_labels;
  expect_error([&] { m.update(in); }, "must hold integer labels, got dtype f32");
}

TEST(Metrics, LearningRateThroughputAndEpochTime) {
  LearningRateMetric lr;
  MetricInput in = input(1.0, 50);
  in.lr = 0.01;
  in.seconds = 0.5;
  lr.update(in);
  EXPECT_DOUBLE_EQ(lr.value(), 0.01);
  ItemsPerSecondMetric ips;
  EpochTimeMetric time;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ips.update(in);
  time.update(in);
  EXPECT_DOUBLE_EQ(ips.last(), 100.0);  // 50 items in 0.5 s
  // The aggregate is over wall time since reset: at least the 20 ms slept.
  EXPECT_GT(time.value(), 0.019);
  EXPECT_LT(ips.value(), 50.0 / 0.019);
  EXPECT_GT(ips.value(), 0.0);
  ips.reset();
  time.reset();
  EXPECT_TRUE(std::isnan(ips.value()));
  EXPECT_TRUE(std::isnan(time.value()));
}

TEST(History, JsonRoundTripAndBest) {
  History h;
  h.add_step(Split::Train, "loss", {1, 1, 2.5});
  h.add_step(Split::Train, "loss", {1, 2, std::nan("")});
  h.add_epoch(Split::Valid, "accuracy", {1, 2, 0.5});
  h.add_epoch(Split::Valid, "accuracy", {2, 4, 0.75});
  h.add_epoch(Split::Valid, "accuracy", {3, 6, 0.75});
  const History back = History::from_json(nn::Json::parse(h.to_json().dump()));
  EXPECT_EQ(back.metrics(Split::Train), std::vector<std::string>{"loss"});
  EXPECT_EQ(back.epochs(Split::Valid, "accuracy"), h.epochs(Split::Valid, "accuracy"));
  ASSERT_EQ(back.steps(Split::Train, "loss").size(), 2u);
  EXPECT_TRUE(std::isnan(back.steps(Split::Train, "loss")[1].value));
  EXPECT_EQ(back.best_epoch(Split::Valid, "accuracy", true)->epoch, 2u);  // first of equals
  EXPECT_EQ(back.best_epoch(Split::Valid, "accuracy", false)->epoch, 1u);
  EXPECT_TRUE(back.steps(Split::Valid, "nothing").empty());
  expect_error([] { History::from_json(nn::Json::parse(R"({"train": [{"name": "x"}]})")); },
               "a metric needs name, steps and epochs");
}
