#include "train/metric_inputs.hpp"

#include <cmath>
#include <sstream>

#include <ember/base/error.hpp>

namespace ember::train::detail {
namespace {

const TensorData& need(const TensorData* t, const std::string& metric, const char* field,
                       const char* expected) {
  EMBER_CHECK(t != nullptr,
              metric + ": MetricInput::" + field + " is missing (expected " + expected + ")");
  return *t;
}

std::vector<std::size_t> squeezed(const Shape& s) {
  std::vector<std::size_t> out;
  for (std::size_t d : s) {
    if (d != 1) out.push_back(d);
  }
  return out;
}

}  // namespace

ClassBatch read_classes(const MetricInput& in, const std::string& metric) {
  const char* expected =
      "scores [N, C] with labels [N], [N, L] with 0/1 targets [N, L], "
      "or [N] with 0/1 targets [N]";
  const TensorData& out = need(in.output, metric, "output", expected);
  const TensorData& tgt = need(in.target, metric, "target", expected);
  const Shape& os = out.shape();
  const Shape& ts = tgt.shape();
  const std::string shapes = "output " + os.to_string() + " and target " + ts.to_string();
  ClassBatch b;
  if (os.rank() == 2 && ts.rank() == 1 && ts[0] == os[0]) {
    b.multi_label = false;
  } else if (os.rank() == 2 && ts == os) {
    b.multi_label = true;
  } else if (os.rank() == 1 && ts == os) {
    b.multi_label = true;
    b.binary = true;
  } else {
    fail(metric + ": " + shapes + " do not match; expected " + expected);
  }
  b.rows = os[0];
  b.cols = os.rank() == 2 ? os[1] : 1;
  EMBER_CHECK(b.multi_label || b.cols > 0,
              metric + ": " + shapes + ": a multi-class output needs at least one class");
  b.scores = out.to_vector<double>();
  const std::vector<double> t = tgt.to_vector<double>();
  if (b.multi_label) {
    b.truth.resize(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) {
      EMBER_CHECK(t[i] == 0.0 || t[i] == 1.0, metric + ": target element " + std::to_string(i) +
                                                  " is " + number(t[i]) +
                                                  "; a multi-label or binary target is 0 or 1");
      b.truth[i] = t[i] == 1.0 ? 1 : 0;
    }
  } else {
    b.labels.resize(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) {
      EMBER_CHECK(t[i] >= 0 && t[i] < static_cast<double>(b.cols) && t[i] == std::floor(t[i]),
                  metric + ": label " + number(t[i]) + " of item " + std::to_string(i) +
                      " is not a class of output " + os.to_string() +
                      " (expected an integer in [0, " + std::to_string(b.cols) + "))");
      b.labels[i] = static_cast<std::size_t>(t[i]);
    }
  }
  return b;
}

std::size_t arg_max(const ClassBatch& b, std::size_t r) {
  const double* row = b.scores.data() + r * b.cols;
  std::size_t best = 0;
  for (std::size_t j = 1; j < b.cols; ++j) {
    if (std::isnan(row[best])) break;
    if (std::isnan(row[j]) || row[j] > row[best]) best = j;
  }
  return best;
}

RegressionBatch read_regression(const MetricInput& in, const std::string& metric) {
  const char* expected = "predictions and targets of one shape";
  const TensorData& out = need(in.output, metric, "output", expected);
  const TensorData& tgt = need(in.target, metric, "target", expected);
  EMBER_CHECK(squeezed(out.shape()) == squeezed(tgt.shape()),
              metric + ": output " + out.shape().to_string() + " and target " +
                  tgt.shape().to_string() +
                  " do not match; expected one shape (extents of 1 aside)");
  RegressionBatch b;
  const std::size_t n = tgt.num_elements();
  b.rows = tgt.shape().rank() == 0 ? 1 : tgt.shape()[0];
  b.cols = b.rows == 0 ? 0 : n / b.rows;
  b.output = out.to_vector<double>();
  b.target = tgt.to_vector<double>();
  return b;
}

TextBatch read_texts(const MetricInput& in, const std::string& metric) {
  EMBER_CHECK(in.text_output != nullptr,
              metric + ": MetricInput::text_output is missing (expected the hypotheses)");
  EMBER_CHECK(in.text_target != nullptr,
              metric + ": MetricInput::text_target is missing (expected the references)");
  EMBER_CHECK(in.text_output->size() == in.text_target->size(),
              metric + ": " + std::to_string(in.text_output->size()) + " hypotheses but " +
                  std::to_string(in.text_target->size()) +
                  " references; expected one reference per hypothesis");
  return {*in.text_output, *in.text_target};
}

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

double read_loss(const MetricInput& in, const std::string& metric) {
  EMBER_CHECK(!std::isnan(in.loss), metric + ": MetricInput::loss is missing (NaN)");
  return in.loss;
}

}  // namespace ember::train::detail
