// The train layer's metrics beyond the basic ones (loss, accuracy, learning rate, items/s,
// epoch time): classification (top-k accuracy, precision, recall, F-beta, AUROC, the
// confusion matrix, Hamming score), language (perplexity, CER, WER, BLEU), regression
// (MSE, MAE, R²) and the run itself (gradient norm, CPU use, host and device memory).
//
// Each is a train::Metric (metric.hpp): update() adds one step's MetricInput, value() is
// the aggregate since reset() computed from the pooled counts or sums of every step (so an
// epoch's precision is the precision of the epoch, not a mean of per-step precisions) and
// last() the value of the most recent step alone. A config, where a metric has options,
// is an EMBER_CONFIG aggregate (JSON, with_* setters) passed to the metric's constructor.
//
// How classification outputs are read (docs/train.md, "Metrics"), from the shapes:
//   multi-class   output [N, C] (logits or probabilities), target [N] labels in [0, C);
//                 the prediction is the arg max;
//   multi-label   output [N, L] scores, target [N, L] of 0/1; a label is predicted when its
//                 score >= threshold (0.5 for probabilities, 0 for logits);
//   binary        output [N] scores, target [N] of 0/1; the one-label case of multi-label.
// A missing MetricInput field, a shape that fits none of these, a label outside [0, C) or
// a multi-label target other than 0/1 is an ember::Error naming the metric.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ember/nn/config.hpp>
#include <ember/tensor/device.hpp>
#include <ember/train/metric.hpp>

namespace ember::train {

// How per-class scores combine: Micro pools the true/false positives and negatives of every
// class before dividing; Macro divides per class and takes the unweighted mean over
// classes that occur in the targets or the predictions (a class whose denominator is 0
// scores 0, as scikit-learn's zero_division=0).
enum class Average : std::uint8_t { Micro, Macro };

// ---- shared parts ----

// The metrics that count hits among items (TopKAccuracy, HammingScore): hits / items over
// the epoch (value) and over the last step (last); kNoValue when nothing was counted.
class HitRateMetric : public Metric {
 public:
  double value() const override;
  double last() const override;
  void reset() override;
  bool higher_is_better() const override { return true; }
  EMBER_METRIC_STATE(hits_, total_, last_hits_, last_total_)

 protected:
  void add(std::size_t hits, std::size_t total);  // one step's counts

 private:
  std::size_t hits_ = 0, total_ = 0, last_hits_ = 0, last_total_ = 0;
};

// The metrics that average a quantity (MSE and MAE per element, GradientNorm per step):
// sum / count over the epoch (value) and over the last step (last).
class MeanMetric : public Metric {
 public:
  double value() const override;
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return false; }
  EMBER_METRIC_STATE(sum_, count_, last_)

 protected:
  void add(double sum, std::size_t count);  // one step's sum over `count` values

 private:
  double sum_ = 0, last_ = kNoValue;
  std::size_t count_ = 0;
};

// ---- classification ----

struct TopKAccuracyConfig {
  std::size_t k = 5;
  EMBER_CONFIG(TopKAccuracyConfig, k)
};
// The fraction of items whose label is among the k highest scores of output [N, C]. A tie
// with the label's score counts in its favour (the label's rank is the number of strictly
// higher scores). Name "top<k>".
class TopKAccuracy final : public HitRateMetric {
 public:
  explicit TopKAccuracy(TopKAccuracyConfig config = {});
  std::string name() const override;
  void update(const MetricInput& in) override;
  std::unique_ptr<Metric> clone_empty() const override;

 private:
  TopKAccuracyConfig config_;
};

struct ClassificationConfig {
  Average average = Average::Macro;
  double threshold = 0.5;  // multi-label and binary: score >= threshold predicts the label
  EMBER_CONFIG(ClassificationConfig, average, threshold)
};

// Per-class true positives, false positives and false negatives: the counts precision,
// recall and F-beta are computed from.
struct ClassCounts {
  std::vector<std::int64_t> tp, fp, fn;
  std::int64_t items = 0;  // rows counted
  void add(const ClassCounts& other);
  EMBER_CONFIG(ClassCounts, tp, fp, fn, items)
};

// The shared part of Precision, Recall and FBeta: the per-class counts of the epoch and of
// the last step, and the averaging; a subclass says how one class scores.
class ClassScoreMetric : public Metric {
 public:
  void update(const MetricInput& in) override;
  double value() const override;
  double last() const override;
  void reset() override;
  bool higher_is_better() const override { return true; }
  const ClassCounts& counts() const { return counts_; }
  EMBER_METRIC_STATE(counts_, last_)

 protected:
  explicit ClassScoreMetric(ClassificationConfig config) : config_(config) {}
  // The score of one class (or of the pooled counts); `defined` is false when its
  // denominator is 0.
  virtual double score(double tp, double fp, double fn, bool& defined) const = 0;
  std::string suffix() const;  // "" for macro, "_micro" for micro
  ClassificationConfig config_;

 private:
  double average(const ClassCounts& c) const;
  ClassCounts counts_, last_;
};

// tp / (tp + fp). Name "precision" (macro) or "precision_micro".
class Precision final : public ClassScoreMetric {
 public:
  explicit Precision(ClassificationConfig config = {}) : ClassScoreMetric(config) {}
  std::string name() const override;
  std::unique_ptr<Metric> clone_empty() const override;

 protected:
  double score(double tp, double fp, double fn, bool& defined) const override;
};

// tp / (tp + fn). Name "recall" (macro) or "recall_micro".
class Recall final : public ClassScoreMetric {
 public:
  explicit Recall(ClassificationConfig config = {}) : ClassScoreMetric(config) {}
  std::string name() const override;
  std::unique_ptr<Metric> clone_empty() const override;

 protected:
  double score(double tp, double fp, double fn, bool& defined) const override;
};

struct FBetaConfig {
  double beta = 1.0;  // recall is beta times as important as precision
  Average average = Average::Macro;
  double threshold = 0.5;
  EMBER_CONFIG(FBetaConfig, beta, average, threshold)
};
// (1 + b²) tp / ((1 + b²) tp + b² fn + fp); macro averages the per-class F-beta. Name "f1"
// for beta 1, else "f<beta>" ("f2", "f0.5"), with "_micro" for micro.
class FBeta final : public ClassScoreMetric {
 public:
  explicit FBeta(FBetaConfig config = {});
  std::string name() const override;
  std::unique_ptr<Metric> clone_empty() const override;

 protected:
  double score(double tp, double fp, double fn, bool& defined) const override;

 private:
  double beta_;
};

// The area under the ROC curve, exact (the Mann-Whitney statistic, ties counting one half),
// over every score of the epoch. Binary: output [N], target [N] of 0/1. Multi-class: output
// [N, C], target labels [N], the macro mean of the one-vs-rest AUROC of each class.
// Multi-label: output [N, L], target [N, L], the macro mean over labels. A class without
// both positives and negatives has no AUROC and is left out of the mean (kNoValue when no
// class has one). Scores must be finite. Keeps every score of the epoch: value() costs a
// sort of them, once after each update. Name "auroc".
class Auroc final : public Metric {
 public:
  Auroc() = default;
  std::string name() const override { return "auroc"; }
  void update(const MetricInput& in) override;
  double value() const override;
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return true; }
  std::unique_ptr<Metric> clone_empty() const override;
  nn::Json state() const override;  // every score and label of the epoch
  void load_state(const nn::Json& state) override;

 private:
  std::size_t columns_ = 0;                          // classes (0 before the first update)
  std::vector<std::vector<double>> scores_;          // per class, every item's score
  std::vector<std::vector<std::uint8_t>> positive_;  // per class, whether the item is one
  double last_ = kNoValue;
  // value() sorts every score of the epoch: it is computed once per update, when asked.
  mutable double value_ = kNoValue;
  mutable bool stale_ = false;
};

struct ConfusionMatrixConfig {
  std::size_t num_classes = 0;  // 0: the output's column count (2 for binary output [N])
  double threshold = 0.5;       // binary output [N]: score >= threshold predicts class 1
  EMBER_CONFIG(ConfusionMatrixConfig, num_classes, threshold)
};
// counts()[true class][predicted class] over the epoch; multi-class (arg max) or binary.
// value() is the fraction on the diagonal (the accuracy the matrix implies); last() that
// of the last step. Name "confusion_matrix".
class ConfusionMatrix final : public Metric {
 public:
  explicit ConfusionMatrix(ConfusionMatrixConfig config = {});
  std::string name() const override { return "confusion_matrix"; }
  void update(const MetricInput& in) override;
  double value() const override;
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return true; }
  std::unique_ptr<Metric> clone_empty() const override;
  // Rows are true classes, columns predictions; empty before the first update when the
  // config gives no class count.
  const std::vector<std::vector<std::int64_t>>& counts() const { return counts_; }
  EMBER_METRIC_STATE(counts_, last_)

 private:
  ConfusionMatrixConfig config_;
  std::vector<std::vector<std::int64_t>> counts_;
  double last_ = kNoValue;
};

struct HammingScoreConfig {
  double threshold = 0.5;
  EMBER_CONFIG(HammingScoreConfig, threshold)
};
// Multi-label (or binary) accuracy: the fraction of (item, label) entries predicted right,
// 1 - Hamming loss. Name "hamming_score".
class HammingScore final : public HitRateMetric {
 public:
  explicit HammingScore(HammingScoreConfig config = {}) : config_(config) {}
  std::string name() const override { return "hamming_score"; }
  void update(const MetricInput& in) override;
  std::unique_ptr<Metric> clone_empty() const override;

 private:
  HammingScoreConfig config_;
};

// ---- language ----

// exp of the item-weighted mean of MetricInput::loss (a mean cross-entropy in nats): the
// epoch's perplexity is exp(sum loss * items / sum items). A step with items == 0 weighs 1.
// Name "perplexity".
class Perplexity final : public Metric {
 public:
  std::string name() const override { return "perplexity"; }
  void update(const MetricInput& in) override;
  double value() const override;
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return false; }
  std::unique_ptr<Metric> clone_empty() const override;
  EMBER_METRIC_STATE(sum_, weight_, last_)

 private:
  double sum_ = 0, weight_ = 0, last_ = kNoValue;
};

// The shared part of CER and WER: the Levenshtein distance of each hypothesis
// (text_output) to its reference (text_target), summed over the epoch and divided by the
// summed reference lengths (a corpus error rate, as jiwer and torchmetrics compute it).
// Empty references throughout: 0 when every hypothesis is empty too, else +inf.
class ErrorRateMetric : public Metric {
 public:
  void update(const MetricInput& in) override;
  double value() const override;
  double last() const override;
  void reset() override;
  bool higher_is_better() const override { return false; }
  EMBER_METRIC_STATE(errors_, length_, last_errors_, last_length_, updated_)

 protected:
  // The text as the sequence compared: Unicode code points (CER) or words (WER).
  virtual std::vector<std::u32string> units(const std::string& text) const = 0;

 private:
  std::size_t errors_ = 0, length_ = 0, last_errors_ = 0, last_length_ = 0;
  bool updated_ = false;
};

// Character error rate over UTF-8 code points (a byte that is not valid UTF-8 counts as
// one character). Name "cer".
class CharErrorRate final : public ErrorRateMetric {
 public:
  std::string name() const override { return "cer"; }
  std::unique_ptr<Metric> clone_empty() const override;

 protected:
  std::vector<std::u32string> units(const std::string& text) const override;
};

// Word error rate over whitespace-separated words. Name "wer".
class WordErrorRate final : public ErrorRateMetric {
 public:
  std::string name() const override { return "wer"; }
  std::unique_ptr<Metric> clone_empty() const override;

 protected:
  std::vector<std::u32string> units(const std::string& text) const override;
};

// The Levenshtein distance between two sequences (unit-cost insertion, deletion,
// substitution): what CER and WER count.
std::size_t edit_distance(const std::vector<std::u32string>& a,
                          const std::vector<std::u32string>& b);

struct BleuConfig {
  std::size_t max_n = 4;  // n-gram orders 1..max_n, uniformly weighted
  bool smooth = false;    // add one to the counts of orders >= 2 (Lin and Och, 2004)
  EMBER_CONFIG(BleuConfig, max_n, smooth)
};
// Corpus BLEU (Papineni et al., 2002) of text_output against text_target (one reference
// each), on whitespace tokens: clipped n-gram precisions pooled over the epoch, their
// geometric mean times the brevity penalty min(1, exp(1 - r / c)). In [0, 1]; 0 when an
// order has no match (without smoothing). Name "bleu".
class Bleu final : public Metric {
 public:
  explicit Bleu(BleuConfig config = {});
  std::string name() const override { return "bleu"; }
  void update(const MetricInput& in) override;
  double value() const override;
  double last() const override;
  void reset() override;
  bool higher_is_better() const override { return true; }
  std::unique_ptr<Metric> clone_empty() const override;

  // The pooled statistics BLEU is computed from.
  struct Counts {
    std::vector<std::size_t> matches, candidates;  // per order n = 1..max_n
    std::size_t hypothesis_length = 0, reference_length = 0;
    EMBER_CONFIG(Counts, matches, candidates, hypothesis_length, reference_length)
  };
  EMBER_METRIC_STATE(counts_, last_, updated_)

 private:
  double score(const Counts& c) const;
  BleuConfig config_;
  Counts counts_, last_;
  bool updated_ = false;
};

// ---- regression ----
// Output and target have the same shape (extents of 1 aside: [N, 1] against [N] is fine).

// Mean squared error over every element. Name "mse".
class MeanSquaredError final : public MeanMetric {
 public:
  std::string name() const override { return "mse"; }
  void update(const MetricInput& in) override;
  std::unique_ptr<Metric> clone_empty() const override;
};

// Mean absolute error over every element. Name "mae".
class MeanAbsoluteError final : public MeanMetric {
 public:
  std::string name() const override { return "mae"; }
  void update(const MetricInput& in) override;
  std::unique_ptr<Metric> clone_empty() const override;
};

enum class MultiOutput : std::uint8_t {
  UniformAverage,    // the mean of each output's R²
  VarianceWeighted,  // 1 - sum of residuals / sum of total variation, over the outputs
};
struct R2Config {
  MultiOutput multioutput = MultiOutput::UniformAverage;
  EMBER_CONFIG(R2Config, multioutput)
};
// The coefficient of determination 1 - SS_res / SS_tot per output column (output [N] or
// [N, K]; more dimensions fold into K), over the epoch's items. An output whose targets
// are constant scores 1 when predicted exactly, else 0 (scikit-learn's force_finite).
// Name "r2".
class R2Score final : public Metric {
 public:
  explicit R2Score(R2Config config = {}) : config_(config) {}
  std::string name() const override { return "r2"; }
  void update(const MetricInput& in) override;
  double value() const override;
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return true; }
  std::unique_ptr<Metric> clone_empty() const override;

  // Per output: item count, target mean, sum of squared deviations of the target from its
  // mean (merged across steps as Chan et al.), and sum of squared residuals.
  struct Moments {
    std::vector<double> n, mean, m2, residual;
    EMBER_CONFIG(Moments, n, mean, m2, residual)
  };
  EMBER_METRIC_STATE(moments_, last_)

 private:
  double score(const Moments& m) const;
  R2Config config_;
  Moments moments_;
  double last_ = kNoValue;
};

// ---- the run ----

// MetricInput::grad_norm (the global L2 norm before clipping); the epoch's value is the
// mean over steps. Name "grad_norm".
class GradientNorm final : public MeanMetric {
 public:
  std::string name() const override { return "grad_norm"; }
  void update(const MetricInput& in) override;
  std::unique_ptr<Metric> clone_empty() const override;
};

// The process's CPU time (user + system, all threads, from getrusage) over wall time, in
// percent of one core (top's convention: two busy cores read 200). value() covers the time
// from reset() (or construction) to the last update, last() the time between the last two
// updates (or from reset). Needs no MetricInput field. Name "cpu_use".
class CpuUse final : public Metric {
 public:
  CpuUse();
  std::string name() const override { return "cpu_use"; }
  void update(const MetricInput& in) override;
  double value() const override { return value_; }
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return false; }
  std::unique_ptr<Metric> clone_empty() const override;
  nn::Json state() const override;  // CPU and wall seconds since reset, value, last
  void load_state(const nn::Json& state) override;

 private:
  double start_cpu_ = 0, start_wall_ = 0, prev_cpu_ = 0, prev_wall_ = 0;
  double value_ = kNoValue, last_ = kNoValue;
};

// The process's resident set size in MiB (/proc/self/statm), read at each update; value()
// is the largest since reset. Name "host_memory".
class HostMemory final : public Metric {
 public:
  std::string name() const override { return "host_memory"; }
  void update(const MetricInput& in) override;
  double value() const override { return peak_; }
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return false; }
  std::unique_ptr<Metric> clone_empty() const override;
  // The resident set size of this process in bytes, now.
  static std::size_t resident_bytes();
  EMBER_METRIC_STATE(peak_, last_)

 private:
  double peak_ = kNoValue, last_ = kNoValue;
};

// The bytes held by live tensors on a device (ember::memory_stats(device).in_use) in MiB,
// read at each update; value() is the largest since reset. Name "device_memory".
class DeviceMemory final : public Metric {
 public:
  explicit DeviceMemory(Device device);
  std::string name() const override { return "device_memory"; }
  void update(const MetricInput& in) override;
  double value() const override { return peak_; }
  double last() const override { return last_; }
  void reset() override;
  bool higher_is_better() const override { return false; }
  std::unique_ptr<Metric> clone_empty() const override;
  EMBER_METRIC_STATE(peak_, last_)

 private:
  Device device_;
  double peak_ = kNoValue, last_ = kNoValue;
};

}  // namespace ember::train
