// Reading a MetricInput for a metric: the fields it needs, checked, as plain f64 arrays.
// Every failure is an ember::Error that starts with the metric's name. One place for the
// shape rules stated at the top of include/ember/train/metrics.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ember/train/metric.hpp>

namespace ember::train::detail {

// A classifier's step: scores [rows, cols] row-major, and either labels (multi-class) or
// 0/1 truth per entry (multi-label; binary output [N] is multi-label with one column).
struct ClassBatch {
  bool multi_label = false;
  bool binary = false;  // output was [N]
  std::size_t rows = 0, cols = 0;
  std::vector<double> scores;       // rows * cols
  std::vector<std::size_t> labels;  // multi-class: rows, each in [0, cols)
  std::vector<std::uint8_t> truth;  // multi-label: rows * cols, each 0 or 1
};
ClassBatch read_classes(const MetricInput& in, const std::string& metric);

// The index of the largest score of row r (the first one on ties; NaN counts as largest,
// as torch.argmax).
std::size_t arg_max(const ClassBatch& b, std::size_t r);

// A regression step: output and target as [rows, cols] (rows = the target's first
// extent), same element count, shapes equal up to extents of 1.
struct RegressionBatch {
  std::size_t rows = 0, cols = 0;
  std::vector<double> output, target;
};
RegressionBatch read_regression(const MetricInput& in, const std::string& metric);

// text_output and text_target, both present and of one length.
struct TextBatch {
  const std::vector<std::string>& hypotheses;
  const std::vector<std::string>& references;
};
TextBatch read_texts(const MetricInput& in, const std::string& metric);

// A number as an error message shows it: "3" for 3.0, "0.25", "nan".
std::string number(double v);

// MetricInput::loss, required finite or infinite but not NaN (missing).
double read_loss(const MetricInput& in, const std::string& metric);

}  // namespace ember::train::detail
