// Classification metrics: top-k accuracy, precision, recall, F-beta, AUROC, the confusion
// matrix and the Hamming score.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <ember/base/error.hpp>
#include <ember/train/metrics.hpp>

#include "train/metric_inputs.hpp"

namespace ember::train {
namespace {

double ratio(std::size_t a, std::size_t b) {
  return b == 0 ? kNoValue : static_cast<double>(a) / static_cast<double>(b);
}

}  // namespace

// ---- HitRateMetric ----

void HitRateMetric::add(std::size_t hits, std::size_t total) {
  last_hits_ = hits;
  last_total_ = total;
  hits_ += hits;
  total_ += total;
}
double HitRateMetric::value() const { return ratio(hits_, total_); }
double HitRateMetric::last() const { return ratio(last_hits_, last_total_); }
void HitRateMetric::reset() { hits_ = total_ = last_hits_ = last_total_ = 0; }

// ---- TopKAccuracy ----

TopKAccuracy::TopKAccuracy(TopKAccuracyConfig config) : config_(config) {
  EMBER_CHECK(config_.k >= 1, "TopKAccuracy: k is 0; expected k >= 1");
}

std::string TopKAccuracy::name() const { return "top" + std::to_string(config_.k); }

void TopKAccuracy::update(const MetricInput& in) {
  const detail::ClassBatch b = detail::read_classes(in, name());
  EMBER_CHECK(!b.multi_label, name() + ": output " + in.output->shape().to_string() +
                                  " and target " + in.target->shape().to_string() +
                                  ": expected scores [N, C] and labels [N]");
  EMBER_CHECK(config_.k <= b.cols, name() + ": k = " + std::to_string(config_.k) + " exceeds the " +
                                       std::to_string(b.cols) + " classes of output " +
                                       in.output->shape().to_string());
  std::size_t correct = 0;
  for (std::size_t r = 0; r < b.rows; ++r) {
    const double* row = b.scores.data() + r * b.cols;
    const double s = row[b.labels[r]];
    std::size_t higher = 0;
    for (std::size_t j = 0; j < b.cols; ++j) higher += row[j] > s ? 1 : 0;
    correct += higher < config_.k && !std::isnan(s) ? 1 : 0;
  }
  add(correct, b.rows);
}

std::unique_ptr<Metric> TopKAccuracy::clone_empty() const {
  return std::make_unique<TopKAccuracy>(config_);
}

// ---- Precision, Recall, FBeta ----

void ClassCounts::add(const ClassCounts& other) {
  if (tp.empty()) {
    *this = other;
    return;
  }
  EMBER_ASSERT(tp.size() == other.tp.size());
  for (std::size_t c = 0; c < tp.size(); ++c) {
    tp[c] += other.tp[c];
    fp[c] += other.fp[c];
    fn[c] += other.fn[c];
  }
  items += other.items;
}

std::string ClassScoreMetric::suffix() const {
  return config_.average == Average::Micro ? "_micro" : "";
}

void ClassScoreMetric::update(const MetricInput& in) {
  const detail::ClassBatch b = detail::read_classes(in, name());
  EMBER_CHECK(counts_.tp.empty() || counts_.tp.size() == b.cols,
              name() + ": output " + in.output->shape().to_string() + " has " +
                  std::to_string(b.cols) + " classes, but earlier steps had " +
                  std::to_string(counts_.tp.size()));
  ClassCounts c;
  c.tp.assign(b.cols, 0);
  c.fp.assign(b.cols, 0);
  c.fn.assign(b.cols, 0);
  c.items = static_cast<std::int64_t>(b.rows);
  for (std::size_t r = 0; r < b.rows; ++r) {
    if (b.multi_label) {
      for (std::size_t j = 0; j < b.cols; ++j) {
        const bool predicted = b.scores[r * b.cols + j] >= config_.threshold;
        const bool actual = b.truth[r * b.cols + j] != 0;
        c.tp[j] += predicted && actual ? 1 : 0;
        c.fp[j] += predicted && !actual ? 1 : 0;
        c.fn[j] += !predicted && actual ? 1 : 0;
      }
    } else {
      const std::size_t p = detail::arg_max(b, r);
      const std::size_t y = b.labels[r];
      if (p == y) {
        ++c.tp[y];
      } else {
        ++c.fp[p];
        ++c.fn[y];
      }
    }
  }
  counts_.add(c);
  last_ = std::move(c);
}

double ClassScoreMetric::average(const ClassCounts& c) const {
  if (c.items == 0) return kNoValue;
  bool defined = true;
  if (config_.average == Average::Micro) {
    double tp = 0, fp = 0, fn = 0;
    for (std::size_t j = 0; j < c.tp.size(); ++j) {
      tp += static_cast<double>(c.tp[j]);
      fp += static_cast<double>(c.fp[j]);
      fn += static_cast<double>(c.fn[j]);
    }
    const double s = score(tp, fp, fn, defined);
    return defined ? s : 0.0;
  }
  // Classes that neither occur nor are predicted are left out of the mean (as
  // scikit-learn's labels present in either, and torchmetrics).
  double sum = 0;
  std::size_t present = 0;
  for (std::size_t j = 0; j < c.tp.size(); ++j) {
    if (c.tp[j] + c.fp[j] + c.fn[j] == 0) continue;
    const double s = score(static_cast<double>(c.tp[j]), static_cast<double>(c.fp[j]),
                           static_cast<double>(c.fn[j]), defined);
    sum += defined ? s : 0.0;
    ++present;
  }
  return present == 0 ? 0.0 : sum / static_cast<double>(present);
}

double ClassScoreMetric::value() const { return average(counts_); }
double ClassScoreMetric::last() const { return average(last_); }
void ClassScoreMetric::reset() {
  counts_ = {};
  last_ = {};
}

std::string Precision::name() const {
  std::string out = "precision";
  out += suffix();
  return out;
}
double Precision::score(double tp, double fp, double, bool& defined) const {
  defined = tp + fp > 0;
  return defined ? tp / (tp + fp) : 0.0;
}
std::unique_ptr<Metric> Precision::clone_empty() const {
  return std::make_unique<Precision>(config_);
}

std::string Recall::name() const {
  std::string out = "recall";
  out += suffix();
  return out;
}
double Recall::score(double tp, double, double fn, bool& defined) const {
  defined = tp + fn > 0;
  return defined ? tp / (tp + fn) : 0.0;
}
std::unique_ptr<Metric> Recall::clone_empty() const { return std::make_unique<Recall>(config_); }

FBeta::FBeta(FBetaConfig config)
    : ClassScoreMetric(ClassificationConfig{config.average, config.threshold}), beta_(config.beta) {
  EMBER_CHECK(std::isfinite(beta_) && beta_ > 0,
              "FBeta: beta is " + detail::number(beta_) + "; expected a finite beta > 0");
}

std::string FBeta::name() const {
  std::string out = "f";  // appended, not "f" + ...: GCC 12 misreports that as -Wrestrict
  out += detail::number(beta_);
  out += suffix();
  return out;
}

double FBeta::score(double tp, double fp, double fn, bool& defined) const {
  const double b2 = beta_ * beta_;
  const double denominator = (1 + b2) * tp + b2 * fn + fp;
  defined = denominator > 0;
  return defined ? (1 + b2) * tp / denominator : 0.0;
}

std::unique_ptr<Metric> FBeta::clone_empty() const {
  return std::make_unique<FBeta>(FBetaConfig{beta_, config_.average, config_.threshold});
}

// ---- Auroc ----

namespace {

// The AUROC of one class: the probability that a random positive scores above a random
// negative, ties counting one half; from the average ranks of the sorted scores.
// kNoValue without both positives and negatives.
double auroc_of(const std::vector<double>& scores, const std::vector<std::uint8_t>& positive) {
  const std::size_t n = scores.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  double positive_rank_sum = 0;
  std::size_t positives = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double rank = 0.5 * static_cast<double>(i + 1 + j);  // mean of ranks i+1 .. j
    for (std::size_t k = i; k < j; ++k) {
      if (positive[order[k]]) {
        positive_rank_sum += rank;
        ++positives;
      }
    }
    i = j;
  }
  const std::size_t negatives = n - positives;
  if (positives == 0 || negatives == 0) return kNoValue;
  const double p = static_cast<double>(positives);
  return (positive_rank_sum - p * (p + 1) / 2) / (p * static_cast<double>(negatives));
}

double macro_auroc(const std::vector<std::vector<double>>& scores,
                   const std::vector<std::vector<std::uint8_t>>& positive) {
  double sum = 0;
  std::size_t defined = 0;
  for (std::size_t c = 0; c < scores.size(); ++c) {
    const double a = auroc_of(scores[c], positive[c]);
    if (!std::isnan(a)) {
      sum += a;
      ++defined;
    }
  }
  return defined == 0 ? kNoValue : sum / static_cast<double>(defined);
}

}  // namespace

void Auroc::update(const MetricInput& in) {
  const detail::ClassBatch b = detail::read_classes(in, name());
  EMBER_CHECK(columns_ == 0 || columns_ == b.cols,
              name() + ": output " + in.output->shape().to_string() + " has " +
                  std::to_string(b.cols) + " classes, but earlier steps had " +
                  std::to_string(columns_));
  for (std::size_t i = 0; i < b.scores.size(); ++i) {
    EMBER_CHECK(std::isfinite(b.scores[i]), name() + ": output element " + std::to_string(i) +
                                                " is " + detail::number(b.scores[i]) +
                                                "; scores must be finite");
  }
  std::vector<std::vector<double>> scores(b.cols, std::vector<double>(b.rows));
  std::vector<std::vector<std::uint8_t>> positive(b.cols, std::vector<std::uint8_t>(b.rows));
  for (std::size_t r = 0; r < b.rows; ++r) {
    for (std::size_t c = 0; c < b.cols; ++c) {
      scores[c][r] = b.scores[r * b.cols + c];
      positive[c][r] = b.multi_label ? b.truth[r * b.cols + c] : (b.labels[r] == c ? 1 : 0);
    }
  }
  last_ = macro_auroc(scores, positive);
  if (columns_ == 0) {
    columns_ = b.cols;
    scores_.resize(b.cols);
    positive_.resize(b.cols);
  }
  for (std::size_t c = 0; c < b.cols; ++c) {
    scores_[c].insert(scores_[c].end(), scores[c].begin(), scores[c].end());
    positive_[c].insert(positive_[c].end(), positive[c].begin(), positive[c].end());
  }
  stale_ = true;
}

double Auroc::value() const {
  if (stale_) {
    value_ = macro_auroc(scores_, positive_);
    stale_ = false;
  }
  return value_;
}

void Auroc::reset() {
  columns_ = 0;
  scores_.clear();
  positive_.clear();
  last_ = value_ = kNoValue;
  stale_ = false;
}

std::unique_ptr<Metric> Auroc::clone_empty() const { return std::make_unique<Auroc>(); }

nn::Json Auroc::state() const {
  return {{"columns", columns_},
          {"scores", detail::state_write(scores_)},
          {"positive", detail::state_write(positive_)},
          {"last", detail::state_number(last_)}};
}
void Auroc::load_state(const nn::Json& j) {
  detail::state_read(detail::state_field(j, "columns"), "columns", columns_);
  detail::state_read(detail::state_field(j, "scores"), "scores", scores_);
  detail::state_read(detail::state_field(j, "positive"), "positive", positive_);
  last_ = detail::state_number(detail::state_field(j, "last"), "last");
  EMBER_CHECK(scores_.size() == positive_.size() &&
                  (columns_ == 0 ? scores_.empty() : scores_.size() == columns_),
              "Auroc::load_state: the state's scores, labels and column count disagree");
  value_ = kNoValue;
  stale_ = !scores_.empty();
}

// ---- ConfusionMatrix ----

namespace {

double diagonal_fraction(const std::vector<std::vector<std::int64_t>>& m) {
  std::int64_t diagonal = 0, total = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    for (std::size_t j = 0; j < m[i].size(); ++j) total += m[i][j];
    diagonal += m[i][i];
  }
  return total == 0 ? kNoValue : static_cast<double>(diagonal) / static_cast<double>(total);
}

}  // namespace

ConfusionMatrix::ConfusionMatrix(ConfusionMatrixConfig config) : config_(config) { reset(); }

void ConfusionMatrix::update(const MetricInput& in) {
  const detail::ClassBatch b = detail::read_classes(in, name());
  EMBER_CHECK(!b.multi_label || b.binary,
              name() + ": output " + in.output->shape().to_string() + " and target " +
                  in.target->shape().to_string() +
                  ": expected scores [N, C] with labels [N], or binary scores [N] with 0/1 "
                  "targets [N]");
  const std::size_t classes = b.binary ? 2 : b.cols;
  if (counts_.empty()) {
    EMBER_CHECK(config_.num_classes == 0 || config_.num_classes == classes,
                name() + ": output " + in.output->shape().to_string() + " has " +
                    std::to_string(classes) + " classes; the config says " +
                    std::to_string(config_.num_classes));
    counts_.assign(classes, std::vector<std::int64_t>(classes, 0));
  }
  EMBER_CHECK(counts_.size() == classes, name() + ": output " + in.output->shape().to_string() +
                                             " has " + std::to_string(classes) +
                                             " classes, but the matrix has " +
                                             std::to_string(counts_.size()));
  std::vector<std::vector<std::int64_t>> step(classes, std::vector<std::int64_t>(classes, 0));
  for (std::size_t r = 0; r < b.rows; ++r) {
    std::size_t actual, predicted;
    if (b.binary) {
      actual = b.truth[r];
      predicted = b.scores[r] >= config_.threshold ? 1 : 0;
    } else {
      actual = b.labels[r];
      predicted = detail::arg_max(b, r);
    }
    ++step[actual][predicted];
  }
  for (std::size_t i = 0; i < classes; ++i) {
    for (std::size_t j = 0; j < classes; ++j) counts_[i][j] += step[i][j];
  }
  last_ = diagonal_fraction(step);
}

double ConfusionMatrix::value() const { return diagonal_fraction(counts_); }

void ConfusionMatrix::reset() {
  counts_.assign(config_.num_classes, std::vector<std::int64_t>(config_.num_classes, 0));
  last_ = kNoValue;
}

std::unique_ptr<Metric> ConfusionMatrix::clone_empty() const {
  return std::make_unique<ConfusionMatrix>(config_);
}

// ---- HammingScore ----

void HammingScore::update(const MetricInput& in) {
  const detail::ClassBatch b = detail::read_classes(in, name());
  EMBER_CHECK(b.multi_label, name() + ": output " + in.output->shape().to_string() +
                                 " and target " + in.target->shape().to_string() +
                                 ": expected multi-label scores [N, L] with 0/1 targets "
                                 "[N, L], or binary [N] with [N]");
  std::size_t right = 0;
  for (std::size_t i = 0; i < b.scores.size(); ++i) {
    const bool predicted = b.scores[i] >= config_.threshold;
    right += predicted == (b.truth[i] != 0) ? 1 : 0;
  }
  add(right, b.scores.size());
}

std::unique_ptr<Metric> HammingScore::clone_empty() const {
  return std::make_unique<HammingScore>(config_);
}

}  // namespace ember::train
