// The basic metrics: loss, accuracy, learning rate, items per second, epoch time.
#include "ember/train/metrics_basic.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "ember/base/error.hpp"

namespace ember::train {

namespace detail {

nn::Json state_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
double state_number(const nn::Json& j, const std::string& key) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  nn::detail::bad_config_value(key, "a number (or \"nan\", \"inf\", \"-inf\")", j);
}
const nn::Json& state_field(const nn::Json& state, const char* key) {
  EMBER_CHECK(state.is_object(), std::string("train::Metric::load_state: the state is not an "
                                             "object but ") +
                                     state.dump());
  const auto it = state.find(key);
  EMBER_CHECK(it != state.end(),
              std::string("train::Metric::load_state: the state has no '") + key + "'");
  return *it;
}

}  // namespace detail

namespace {
using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

void LossMetric::update(const MetricInput& in) {
  EMBER_CHECK(!std::isnan(in.loss), "train::LossMetric: the step gave no loss");
  const double w = in.items > 0 ? double(in.items) : 1.0;
  sum_ += in.loss * w;
  weight_ += w;
  last_ = in.loss;
}
double LossMetric::value() const { return weight_ > 0 ? sum_ / weight_ : kNoValue; }
void LossMetric::reset() {
  sum_ = weight_ = 0.0;
  last_ = kNoValue;
}

void AccuracyMetric::update(const MetricInput& in) {
  EMBER_CHECK(in.output != nullptr,
              "train::AccuracyMetric: the step gave no output (logits [N, C])");
  EMBER_CHECK(in.target != nullptr, "train::AccuracyMetric: the step gave no target (labels [N])");
  const Shape& os = in.output->shape();
  const Shape& ts = in.target->shape();
  EMBER_CHECK(os.rank() == 2 && ts.rank() == 1 && os[0] == ts[0],
              "train::AccuracyMetric: expected output [N, C] and target [N], got output " +
                  os.to_string() + " and target " + ts.to_string());
  EMBER_CHECK(kind_of(in.target->dtype()) == Kind::Int,
              "train::AccuracyMetric: the target must hold integer labels, got dtype " +
                  std::string(ember::name(in.target->dtype())));
  const std::size_t n = os[0], c = os[1];
  EMBER_CHECK(c > 0, "train::AccuracyMetric: the output has no classes: " + os.to_string());
  const auto scores = in.output->convert(DType::F64).to_vector<double>();
  const auto labels = in.target->convert(DType::I64).to_vector<std::int64_t>();
  std::size_t right = 0, counted = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t y = labels[i];
    if (ignore_ && y == *ignore_) continue;
    EMBER_CHECK(y >= 0 && std::uint64_t(y) < c,
                "train::AccuracyMetric: label " + std::to_string(y) + " at index " +
                    std::to_string(i) + " is outside the " + std::to_string(c) +
                    " classes of the output " + os.to_string());
    // The first maximum, as argmax; a NaN score is never the maximum.
    std::size_t best = 0;
    for (std::size_t k = 1; k < c; ++k) {
      if (scores[i * c + k] > scores[i * c + best]) best = k;
    }
    right += std::int64_t(best) == y ? 1 : 0;
    ++counted;
  }
  correct_ += right;
  counted_ += counted;
  last_ = counted > 0 ? double(right) / double(counted) : kNoValue;
}
double AccuracyMetric::value() const {
  return counted_ > 0 ? double(correct_) / double(counted_) : kNoValue;
}
void AccuracyMetric::reset() {
  correct_ = counted_ = 0;
  last_ = kNoValue;
}

void LearningRateMetric::update(const MetricInput& in) { last_ = in.lr; }

void ItemsPerSecondMetric::update(const MetricInput& in) {
  const auto now = Clock::now();
  items_ += in.items;
  elapsed_ = seconds_between(start_, now);
  any_ = true;
  last_ = (!std::isnan(in.seconds) && in.seconds > 0) ? double(in.items) / in.seconds : kNoValue;
}
double ItemsPerSecondMetric::value() const {
  return any_ && elapsed_ > 0 ? double(items_) / elapsed_ : kNoValue;
}
void ItemsPerSecondMetric::reset() {
  start_ = Clock::now();
  items_ = 0;
  elapsed_ = 0;
  last_ = kNoValue;
  any_ = false;
}

void EpochTimeMetric::update(const MetricInput&) {
  elapsed_ = seconds_between(start_, Clock::now());
  any_ = true;
}
// Wall clocks do not survive the process: the state is the time from reset to the last
// update, and a restore places the start that far before now.
nn::Json ItemsPerSecondMetric::state() const {
  return {{"items", items_},
          {"elapsed", detail::state_number(elapsed_)},
          {"last", detail::state_number(last_)},
          {"any", any_}};
}
void ItemsPerSecondMetric::load_state(const nn::Json& j) {
  detail::state_read(detail::state_field(j, "items"), "items", items_);
  elapsed_ = detail::state_number(detail::state_field(j, "elapsed"), "elapsed");
  last_ = detail::state_number(detail::state_field(j, "last"), "last");
  detail::state_read(detail::state_field(j, "any"), "any", any_);
  start_ = Clock::now() -
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(elapsed_));
}
nn::Json EpochTimeMetric::state() const {
  return {{"elapsed", detail::state_number(elapsed_)}, {"any", any_}};
}
void EpochTimeMetric::load_state(const nn::Json& j) {
  elapsed_ = detail::state_number(detail::state_field(j, "elapsed"), "elapsed");
  detail::state_read(detail::state_field(j, "any"), "any", any_);
  start_ = Clock::now() -
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(elapsed_));
}

void EpochTimeMetric::reset() {
  start_ = Clock::now();
  elapsed_ = 0;
  any_ = false;
}

}  // namespace ember::train
