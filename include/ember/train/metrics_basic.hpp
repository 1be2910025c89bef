// The basic metrics every training run shows: the loss, classification accuracy, the
// learning rate, throughput (items per second) and the epoch's wall time. Each is a
// train::Metric (metric.hpp), so a Learner, an Evaluator or a custom loop drives them
// alike; the other metrics of the train layer sit on the same interface.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "ember/train/metric.hpp"

namespace ember::train {

// The mean of the steps' losses weighted by their items (an epoch's mean loss per item).
class LossMetric final : public Metric {
 public:
  std::string name() const override { return "loss"; }
  void update(const MetricInput& in) override;
  double value() const override;
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return false; }
  std::unique_ptr<Metric> clone_empty() const override { return std::make_unique<LossMetric>(); }
  EMBER_METRIC_STATE(sum_, weight_, last_)

 private:
  double sum_ = 0.0, weight_ = 0.0, last_ = kNoValue;
};

// The fraction of items whose predicted class is the target: output logits (or scores)
// [N, C] whose argmax is compared with integer labels [N]; labels equal to ignore_index
// are not counted. A label outside [0, C) is an ember::Error naming it.
class AccuracyMetric final : public Metric {
 public:
  AccuracyMetric() = default;
  explicit AccuracyMetric(std::optional<std::int64_t> ignore_index) : ignore_(ignore_index) {}
  std::string name() const override { return "accuracy"; }
  void update(const MetricInput& in) override;
  double value() const override;
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return true; }
  std::unique_ptr<Metric> clone_empty() const override {
    return std::make_unique<AccuracyMetric>(ignore_);
  }
  EMBER_METRIC_STATE(correct_, counted_, last_)

 private:
  std::optional<std::int64_t> ignore_;
  std::size_t correct_ = 0, counted_ = 0;
  double last_ = kNoValue;
};

// The learning rate of the most recent step (value and last alike).
class LearningRateMetric final : public Metric {
 public:
  std::string name() const override { return "lr"; }
  void update(const MetricInput& in) override;
  double value() const override { return last_; }
  double last() const override { return last_; }
  void reset() override { last_ = kNoValue; }
  bool higher_is_better() const override { return false; }
  std::unique_ptr<Metric> clone_empty() const override {
    return std::make_unique<LearningRateMetric>();
  }
  EMBER_METRIC_STATE(last_)

 private:
  double last_ = kNoValue;
};

// Items per second: value() is the items since reset over the wall time since reset (so
// data loading counts), last() one step's items over its own time (MetricInput::seconds).
class ItemsPerSecondMetric final : public Metric {
 public:
  std::string name() const override { return "items_per_second"; }
  void update(const MetricInput& in) override;
  double value() const override;
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return true; }
  std::unique_ptr<Metric> clone_empty() const override {
    return std::make_unique<ItemsPerSecondMetric>();
  }
  nn::Json state() const override;  // elapsed seconds at the last update, items, last
  void load_state(const nn::Json& state) override;

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::size_t items_ = 0;
  double elapsed_ = 0.0, last_ = kNoValue;
  bool any_ = false;
};

// Seconds of wall time from reset (the start of the epoch) to the latest update.
class EpochTimeMetric final : public Metric {
 public:
  std::string name() const override { return "epoch_time"; }
  void update(const MetricInput& in) override;
  double value() const override { return any_ ? elapsed_ : kNoValue; }
  double last() const override { return value(); }
  void reset() override;
  bool higher_is_better() const override { return false; }
  std::unique_ptr<Metric> clone_empty() const override {
    return std::make_unique<EpochTimeMetric>();
  }
  nn::Json state() const override;  // elapsed seconds at the last update
  void load_state(const nn::Json& state) override;

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double elapsed_ = 0.0;
  bool any_ = false;
};

}  // namespace ember::train
