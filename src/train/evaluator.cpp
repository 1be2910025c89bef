// EvalResult: an evaluation's metric values.
#include "ember/train/evaluator.hpp"

#include <fmt/format.h>

namespace ember::train {

double EvalResult::at(const std::string& metric) const {
  auto it = values.find(metric);
  if (it != values.end()) return it->second;
  std::string names;
  for (const auto& [n, v] : values) names += (names.empty() ? "" : ", ") + n;
  fail("train::EvalResult::at: no metric '" + metric + "' (the evaluation has: " + names + ")");
}

std::string EvalResult::to_string() const {
  std::string s = fmt::format("{} items in {} batches, {:.2f} s:", items, batches, seconds);
  for (const auto& [n, v] : values) s += fmt::format(" {} {:.6g}", n, v);
  return s;
}

Evaluator& Evaluator::metric_ptr(std::unique_ptr<Metric> m) {
  EMBER_CHECK(m != nullptr, "train::Evaluator::metric: the metric is null");
  metrics_.push_back(std::move(m));
  return *this;
}

}  // namespace ember::train
