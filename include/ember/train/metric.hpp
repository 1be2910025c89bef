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
#include <type_traits>
#include <vector>

#include <ember/base/tensor_data.hpp>
#include <ember/nn/config.hpp>

namespace ember::train {

inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// One step's results, on the host.
struct MetricInput {
  double loss = kNoValue;              // the step's mean loss
  std::size_t items = 0;               // items in the batch (the weight of `loss`)
  double lr = kNoValue;                // the learning rate used by the step
  double grad_norm = kNoValue;         // global L2 norm of the gradients (before clipping)
  double seconds = kNoValue;           // wall time of the step
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
  // What value() and last() are computed from, as JSON, and back: a Learner's mid-epoch
  // checkpoint keeps it, so a run resumed inside an epoch reports that epoch's aggregates
  // as if it had never stopped (a wall-clock metric counts the time before the stop and the
  // time since the resume). null, the default: the metric keeps nothing, and its resumed
  // epoch covers the batches since the resume. load_state takes what state() gave; an
  // ember::Error names the key that does not fit. EMBER_METRIC_STATE writes both.
  virtual nn::Json state() const { return nullptr; }
  virtual void load_state(const nn::Json& state) { (void)state; }
};

namespace detail {

// A metric state's values as JSON: numbers exactly (nlohmann writes the shortest form that
// reads back to the same double), NaN and infinities — which JSON lacks — as the strings
// "nan", "inf" and "-inf"; vectors as arrays; EMBER_CONFIG structs as objects.
nn::Json state_number(double v);
double state_number(const nn::Json& j, const std::string& key);

template <class T>
nn::Json state_write(const T& v) {
  if constexpr (std::is_floating_point_v<T>) {
    return state_number(double(v));
  } else if constexpr (nn::detail::is_std_vector<T>::value) {
    nn::Json a = nn::Json::array();
    for (const auto& e : v) a.push_back(state_write(e));
    return a;
  } else {
    return nn::detail::write_value(v);
  }
}
template <class T>
void state_read(const nn::Json& j, const std::string& key, T& out) {
  if constexpr (std::is_floating_point_v<T>) {
    out = T(state_number(j, key));
  } else if constexpr (nn::detail::is_std_vector<T>::value) {
    if (!j.is_array()) nn::detail::bad_config_value(key, "an array", j);
    T v(j.size());
    for (std::size_t i = 0; i < j.size(); ++i)
      state_read(j[i], key + "[" + std::to_string(i) + "]", v[i]);
    out = std::move(v);
  } else {
    nn::detail::read_value(j, out, key);
  }
}
// The value of `key` in a state object, with an error naming it when it is missing.
const nn::Json& state_field(const nn::Json& state, const char* key);

}  // namespace detail

}  // namespace ember::train

// EMBER_METRIC_STATE(fields...) inside a Metric subclass: state() and load_state() over the
// listed members (each a number, bool, integer, vector of them or EMBER_CONFIG struct).
#define EMBER_METRIC_STATE(...)                                \
  ::ember::nn::Json state() const override {                   \
    ::ember::nn::Json ember_j = ::ember::nn::Json::object();   \
    EMBER_PP_FOR_EACH(EMBER_METRIC_STATE_PUT_, __VA_ARGS__)    \
    return ember_j;                                            \
  }                                                            \
  void load_state(const ::ember::nn::Json& ember_j) override { \
    EMBER_PP_FOR_EACH(EMBER_METRIC_STATE_GET_, __VA_ARGS__)    \
  }
#define EMBER_METRIC_STATE_PUT_(f) ember_j[#f] = ::ember::train::detail::state_write(f);
#define EMBER_METRIC_STATE_GET_(f) \
  ::ember::train::detail::state_read(::ember::train::detail::state_field(ember_j, #f), #f, f);
