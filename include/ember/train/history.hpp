// History: every metric value a run produced, per step and per epoch, for the training and
// the validation split. The dashboard draws its curves from it, the logs mirror it, the
// curve pictures are built from it after (or during) a run, and a checkpoint stores it, so
// a resumed run's history is the uninterrupted one's.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ember/nn/config.hpp"

namespace ember::train {

enum class Split { Train, Valid };
const char* name(Split s);  // "train", "valid"

// One value: the epoch it belongs to (1-based), the global step it was taken at (for a
// training step the optimizer steps so far; for validation the batch index within the
// epoch's validation pass, 1-based; for an epoch value the last training step), and the
// value itself.
struct MetricPoint {
  std::size_t epoch = 0;
  std::size_t step = 0;
  double value = 0.0;
  friend bool operator==(const MetricPoint&, const MetricPoint&) = default;
};

class History {
 public:
  void add_step(Split split, const std::string& metric, MetricPoint p);
  void add_epoch(Split split, const std::string& metric, MetricPoint p);

  // Empty when the metric has no values on that split.
  const std::vector<MetricPoint>& steps(Split split, const std::string& metric) const;
  const std::vector<MetricPoint>& epochs(Split split, const std::string& metric) const;
  // The metrics with any value on the split, in the order they first appeared.
  std::vector<std::string> metrics(Split split) const;
  // The last epoch value, if any.
  std::optional<double> last_epoch(Split split, const std::string& metric) const;
  // The epoch point with the best value (the first of equals), if any.
  std::optional<MetricPoint> best_epoch(Split split, const std::string& metric,
                                        bool higher_is_better) const;

  nn::Json to_json() const;
  // Throws ember::Error naming what is malformed.
  static History from_json(const nn::Json& j);

  friend bool operator==(const History&, const History&) = default;

 private:
  struct Series {
    std::vector<MetricPoint> steps, epochs;
    friend bool operator==(const Series&, const Series&) = default;
  };
  Series& series(Split split, const std::string& metric);
  const Series* find(Split split, const std::string& metric) const;

  // Per split: metric name -> its series, and the names in order of appearance.
  std::map<std::string, Series> train_, valid_;
  std::vector<std::string> train_order_, valid_order_;
};

}  // namespace ember::train
