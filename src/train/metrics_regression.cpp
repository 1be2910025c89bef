// Regression metrics: MSE, MAE and R².
#include <cmath>

#include <ember/base/error.hpp>
#include <ember/train/metrics.hpp>

#include "train/metric_inputs.hpp"

namespace ember::train {

// ---- MeanMetric, MeanSquaredError, MeanAbsoluteError ----

void MeanMetric::add(double sum, std::size_t count) {
  sum_ += sum;
  count_ += count;
  last_ = count == 0 ? kNoValue : sum / static_cast<double>(count);
}
double MeanMetric::value() const {
  return count_ == 0 ? kNoValue : sum_ / static_cast<double>(count_);
}
void MeanMetric::reset() {
  sum_ = 0;
  count_ = 0;
  last_ = kNoValue;
}

void MeanSquaredError::update(const MetricInput& in) {
  const detail::RegressionBatch b = detail::read_regression(in, name());
  double sum = 0;
  for (std::size_t i = 0; i < b.target.size(); ++i) {
    const double d = b.output[i] - b.target[i];
    sum += d * d;
  }
  add(sum, b.target.size());
}
std::unique_ptr<Metric> MeanSquaredError::clone_empty() const {
  return std::make_unique<MeanSquaredError>();
}

void MeanAbsoluteError::update(const MetricInput& in) {
  const detail::RegressionBatch b = detail::read_regression(in, name());
  double sum = 0;
  for (std::size_t i = 0; i < b.target.size(); ++i) sum += std::abs(b.output[i] - b.target[i]);
  add(sum, b.target.size());
}
std::unique_ptr<Metric> MeanAbsoluteError::clone_empty() const {
  return std::make_unique<MeanAbsoluteError>();
}

// ---- R2Score ----

namespace {

// Merges the moments of b into a, per output (Chan, Golub and LeVeque's pairwise update of
// the mean and the sum of squared deviations).
void merge(R2Score::Moments& a, const R2Score::Moments& b) {
  if (a.n.empty()) {
    a = b;
    return;
  }
  for (std::size_t k = 0; k < a.n.size(); ++k) {
    const double n = a.n[k] + b.n[k];
    if (n == 0) continue;
    const double delta = b.mean[k] - a.mean[k];
    a.m2[k] += b.m2[k] + delta * delta * a.n[k] * b.n[k] / n;
    a.mean[k] += delta * b.n[k] / n;
    a.n[k] = n;
    a.residual[k] += b.residual[k];
  }
}

}  // namespace

void R2Score::update(const MetricInput& in) {
  const detail::RegressionBatch b = detail::read_regression(in, name());
  EMBER_CHECK(moments_.n.empty() || moments_.n.size() == b.cols,
              name() + ": target " + in.target->shape().to_string() + " has " +
                  std::to_string(b.cols) + " outputs per item, but earlier steps had " +
                  std::to_string(moments_.n.size()));
  Moments m;
  m.n.assign(b.cols, static_cast<double>(b.rows));
  m.mean.assign(b.cols, 0.0);
  m.m2.assign(b.cols, 0.0);
  m.residual.assign(b.cols, 0.0);
  for (std::size_t r = 0; r < b.rows; ++r) {
    for (std::size_t k = 0; k < b.cols; ++k) m.mean[k] += b.target[r * b.cols + k];
  }
  for (std::size_t k = 0; k < b.cols; ++k) {
    m.mean[k] = b.rows == 0 ? 0.0 : m.mean[k] / static_cast<double>(b.rows);
  }
  for (std::size_t r = 0; r < b.rows; ++r) {
    for (std::size_t k = 0; k < b.cols; ++k) {
      const double y = b.target[r * b.cols + k];
      const double d = b.output[r * b.cols + k] - y;
      m.m2[k] += (y - m.mean[k]) * (y - m.mean[k]);
      m.residual[k] += d * d;
    }
  }
  last_ = score(m);
  merge(moments_, m);
}

double R2Score::score(const Moments& m) const {
  if (m.n.empty() || m.n[0] == 0) return kNoValue;
  const std::size_t outputs = m.n.size();
  if (config_.multioutput == MultiOutput::VarianceWeighted) {
    double residual = 0, total = 0;
    for (std::size_t k = 0; k < outputs; ++k) {
      residual += m.residual[k];
      total += m.m2[k];
    }
    if (total == 0) return residual == 0 ? 1.0 : 0.0;
    return 1.0 - residual / total;
  }
  double sum = 0;
  for (std::size_t k = 0; k < outputs; ++k) {
    if (m.m2[k] == 0) {
      sum += m.residual[k] == 0 ? 1.0 : 0.0;
    } else {
      sum += 1.0 - m.residual[k] / m.m2[k];
    }
  }
  return sum / static_cast<double>(outputs);
}

double R2Score::value() const { return score(moments_); }
void R2Score::reset() {
  moments_ = {};
  last_ = kNoValue;
}
std::unique_ptr<Metric> R2Score::clone_empty() const { return std::make_unique<R2Score>(config_); }

}  // namespace ember::train
