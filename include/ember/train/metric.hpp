// The metric interface of the train layer: what a Learner (or a custom loop) hands a
// metric after each step, and what it reads back.
//
// A step's results reach a metric on the host, as TensorData, once per step: the metrics
// are ordinary C++ over plain numbers, independent of any device. Every field is optional;
// a metric that needs a field that a step did not provide throws an ember::Error naming
// the metric and the field.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <ember/base/tensor_data.hpp>

namespace ember::train {

inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// One step's results, on the host.
struct MetricInput {
  double loss = kNoValue;          // the step's mean loss
  std::size_t items = 0;           // items in the batch (the weight of `loss`)
  double lr = kNoValue;            // the learning rate used by the step
  double grad_norm = kNoValue;     // global L2 norm of the gradients (before clipping)
  double seconds = kNoValue;       // wall time of the step
  const TensorData* output = nullptr;  // model output: logits [N, C], scores [N] or [N, L],
                                       // regression predictions [N] or [N, K]
  const TensorData* target = nullptr;  // labels [N] (integer), multi-label targets [N, L]
                                       // (0/1), regression targets (same shape as output)
  const std::vector<std::string>* text_output = nullptr;  // hypotheses (CER, WER, BLEU)
  const std::vector<std::string>* text_target = nullptr;  // references
};

class Metric {
 public:
  virtual ~Metric() = default;
  // A short name used in logs, file names and the dashboard ("loss", "accuracy", "top5").
  virtual std::string name() const = 0;
  // Adds one step's results to the running aggregate.
  virtual void update(const MetricInput& in) = 0;
  // The aggregate since the last reset (an epoch's value); kNoValue before any update.
  virtual double value() const = 0;
  // The value of the most recent update alone (the per-step curve); kNoValue before any.
  virtual double last() const = 0;
  // Forgets everything (the Learner calls it at the start of each epoch and split).
  virtual void reset() = 0;
  // Whether larger values are better (early stopping and best-checkpoint selection).
  virtual bool higher_is_better() const = 0;
  // A fresh metric of the same kind and configuration, with no state.
  virtual std::unique_ptr<Metric> clone_empty() const = 0;
};

}  // namespace ember::train
