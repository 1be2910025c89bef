// Evaluator: runs a model's valid_step (or any step function) over a loader — a test set —
// on model.valid() (the inner device, inference mode) and returns every metric's value.
//
//   train::Evaluator ev;
//   ev.metric(train::LossMetric{}).metric(train::AccuracyMetric{});
//   train::EvalResult r = ev.evaluate(net, test_loader);     // r.at("accuracy")
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/base/error.hpp"
#include "ember/nn/module.hpp"
#include "ember/train/metric.hpp"
#include "ember/train/step.hpp"

namespace ember::train {

struct EvalResult {
  std::map<std::string, double> values;
  std::size_t items = 0, batches = 0;
  double seconds = 0.0;
  // The metric's value; an ember::Error naming it and the metrics there are otherwise.
  double at(const std::string& metric) const;
  std::string to_string() const;
};

class Evaluator {
 public:
  Evaluator() = default;
  template <class T>
  requires std::derived_from<T, Metric> Evaluator& metric(T m) {
    return metric_ptr(std::make_unique<T>(std::move(m)));
  }
  Evaluator& metric_ptr(std::unique_ptr<Metric> m);

  // model.valid().valid_step(batch) over every batch of one pass of `loader`.
  template <nn::Module M, class L>
  EvalResult evaluate(const M& model, L& loader) {
    const M eval = model.valid();
    return run(loader, [&](const auto& batch) { return eval.valid_step(batch); });
  }
  // step(batch) -> StepOutput over every batch (a custom step, any model).
  template <class L, class F>
  EvalResult run(L& loader, F&& step) {
    EMBER_CHECK(!metrics_.empty(), "train::Evaluator: no metrics to evaluate");
    for (auto& m : metrics_) m->reset();
    EvalResult r;
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& batch : loader) {
      const auto ts = std::chrono::steady_clock::now();
      HostStep host(step(batch));
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();
      const MetricInput in = host.metric_input(kNoValue, kNoValue, secs);
      for (auto& m : metrics_) m->update(in);
      r.items += host.items();
      ++r.batches;
    }
    EMBER_CHECK(r.batches > 0, "train::Evaluator: the loader gave no batches");
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& m : metrics_) r.values[m->name()] = m->value();
    return r;
  }

 private:
  std::vector<std::unique_ptr<Metric>> metrics_;
};

}  // namespace ember::train
