// The model-independent part of the Learner (LearnerCore), its builder, the summary and
// the optimizer-state files.
#include "ember/train/learner.hpp"

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "ember/train/curves.hpp"
#include "ember/train/logger.hpp"
#include "ember/train/metrics.hpp"
#include "ember/train/metrics_basic.hpp"
#include "ember/train/plot.hpp"

namespace ember::train {

const char* name(Summary::Outcome o) {
  switch (o) {
    case Summary::Outcome::Completed:
      return "completed";
    case Summary::Outcome::EarlyStopped:
      return "early stopped";
    case Summary::Outcome::Interrupted:
      return "interrupted";
  }
  return "?";
}

std::string Summary::to_string() const {
  std::string s = fmt::format("training {}: {} epochs, {} optimizer steps, {} batches in {}\n",
                              name(outcome), epochs, steps, batches, format_duration(seconds));
  auto line = [&](const char* split, const std::map<std::string, double>& m) {
    if (m.empty()) return;
    s += fmt::format("  {}:", split);
    for (const auto& [n, v] : m) s += fmt::format(" {} {:.6g}", n, v);
    s += "\n";
  };
  line("train", train);
  line("valid", valid);
  if (best)
    s += fmt::format("  best {}: {:.6g} at epoch {}\n", best_metric, best->value, best->epoch);
  if (!model_path.empty()) s += "  model: " + model_path + "\n";
  if (!last_checkpoint.empty()) s += "  last checkpoint: " + last_checkpoint + "\n";
  return s;
}

namespace detail {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

const Metric* find_metric(const std::vector<std::unique_ptr<Metric>>& ms, const std::string& n) {
  for (const auto& m : ms)
    if (m->name() == n) return m.get();
  return nullptr;
}
std::string names_of(const std::vector<std::unique_ptr<Metric>>& ms) {
  std::string s;
  for (const auto& m : ms) s += (s.empty() ? "" : ", ") + m->name();
  return s.empty() ? "none" : s;
}
std::vector<std::string> name_list(const std::vector<std::unique_ptr<Metric>>& ms) {
  std::vector<std::string> v;
  for (const auto& m : ms) v.push_back(m->name());
  return v;
}
}  // namespace

struct LearnerCore::Impl {
  std::unique_ptr<CheckpointStore> store;
  std::unique_ptr<MetricLogger> logger;
  std::unique_ptr<Dashboard> dashboard;
  std::unique_ptr<SigintGuard> guard;
  bool fitting = false, has_valid = false;
  Clock::time_point fit_start, pass_start;
  std::size_t fit_start_batches = 0, train_batches = 0;
  Split split = Split::Train;
  std::size_t pass_batches = 0, pass_batch = 0, pass_first = 0, pass_items = 0;
  std::map<std::string, double> last_train, last_valid;
  std::optional<double> es_best;
  std::size_t es_bad = 0;
  std::string last_checkpoint;
  // A mid-epoch checkpoint's training-metric states, restored by the resumed pass's start.
  nn::Json resumed_metrics;
};

LearnerCore::LearnerCore(LearnerConfig config)
    : config_(std::move(config)), impl_(std::make_unique<Impl>()) {}
LearnerCore::~LearnerCore() { end_fit(); }
LearnerCore::LearnerCore(LearnerCore&&) noexcept = default;

CheckpointStore& LearnerCore::checkpoints() {
  if (!impl_->store)
    impl_->store = std::make_unique<CheckpointStore>(config_.artifact_dir + "/checkpoints");
  return *impl_->store;
}

static std::vector<std::unique_ptr<Metric>>& metrics_of(LearnerConfig& c, Split s) {
  return s == Split::Train ? c.train_metrics : c.valid_metrics;
}

void LearnerCore::begin_fit(std::size_t train_batches, bool has_valid) {
  Impl& I = *impl_;
  auto check_metric = [&](const std::string& metric, Split split, const char* what) {
    if (metric.empty()) return;
    EMBER_CHECK(split == Split::Train || has_valid,
                std::string("train::Learner::fit: ") + what + " watches the valid metric '" +
                    metric + "', but fit was given no validation loader");
    EMBER_CHECK(find_metric(metrics_of(config_, split), metric) != nullptr,
                std::string("train::Learner::fit: ") + what + " watches the " + name(split) +
                    " metric '" + metric + "', which is not among the " + name(split) +
                    " metrics (" + names_of(metrics_of(config_, split)) + ")");
  };
  check_metric(config_.checkpoints.best_metric, config_.checkpoints.best_split,
               "the best checkpoint");
  if (config_.early_stopping)
    check_metric(config_.early_stopping->metric, config_.early_stopping->split, "early stopping");

  ensure_writable_dir(config_.artifact_dir, "train::Learner::fit (the artifact folder)");
  checkpoints();
  I.logger = std::make_unique<MetricLogger>(config_.artifact_dir, name_list(config_.train_metrics),
                                            name_list(config_.valid_metrics));
  I.dashboard = make_dashboard(config_.dashboard, stdout, config_.plain_interval_seconds,
                               config_.dashboard_curves);
  I.guard = std::make_unique<SigintGuard>(config_.interrupter);
  I.fitting = true;
  I.has_valid = has_valid;
  I.fit_start = Clock::now();
  I.fit_start_batches = counters_.batches;
  I.train_batches = train_batches;
}

void LearnerCore::end_fit() {
  if (!impl_ || !impl_->fitting) return;
  impl_->fitting = false;
  if (impl_->dashboard) impl_->dashboard->finish();
  if (impl_->logger) impl_->logger->flush();
  impl_->guard.reset();
}
bool LearnerCore::fitting() const { return impl_->fitting; }

void LearnerCore::begin_pass(Split split, std::size_t batches, std::size_t first_batch) {
  Impl& I = *impl_;
  I.split = split;
  I.pass_batches = batches;
  I.pass_batch = first_batch;
  I.pass_first = first_batch;
  I.pass_items = 0;
  I.pass_start = Clock::now();
  for (auto& m : metrics_of(config_, split)) m->reset();
  if (split != Split::Train || first_batch == 0 || !I.resumed_metrics.is_object()) return;
  // Resumed inside the epoch: the aggregates continue from the checkpoint's.
  for (auto& m : metrics_of(config_, split)) {
    const auto it = I.resumed_metrics.find(m->name());
    if (it == I.resumed_metrics.end() || it->is_null()) continue;
    try {
      m->load_state(*it);
    } catch (...) {
      rethrow_with_context("train::Learner: cannot restore the train metric '" + m->name() +
                           "' from the checkpoint");
    }
  }
  I.resumed_metrics = nullptr;
}

void LearnerCore::record_batch(Split split, const HostStep& step, double lr, double grad_norm,
                               double seconds) {
  Impl& I = *impl_;
  const MetricInput in = step.metric_input(lr, grad_norm, seconds);
  auto& metrics = metrics_of(config_, split);
  MetricValues last, current;
  for (auto& m : metrics) {
    m->update(in);
    last.emplace_back(m->name(), m->last());
    current.emplace_back(m->name(), m->value());
  }
  ++I.pass_batch;
  I.pass_items += step.items();
  const std::size_t epoch = counters_.epoch + 1;
  const std::size_t at = split == Split::Train ? counters_.batches : I.pass_batch;
  for (const auto& [n, v] : last) history_.add_step(split, n, {epoch, at, v});
  I.logger->step(split, epoch, at, last);

  Progress p;
  p.split = split;
  p.epoch = epoch;
  p.epochs = config_.epochs;
  p.batch = I.pass_batch;
  p.batches = I.pass_batches;
  p.run_batch = counters_.batches;
  p.run_batches = I.train_batches * config_.epochs;
  p.epoch_seconds = since(I.pass_start);
  p.run_seconds = since(I.fit_start);
  const std::size_t pass_done = I.pass_batch - I.pass_first;
  p.epoch_eta =
      pass_done ? p.epoch_seconds / double(pass_done) * double(I.pass_batches - I.pass_batch) : -1;
  const std::size_t run_done = counters_.batches - I.fit_start_batches;
  p.run_eta = run_done && p.run_batches >= p.run_batch
                  ? p.run_seconds / double(run_done) * double(p.run_batches - p.run_batch)
                  : -1;
  p.items_per_second = p.epoch_seconds > 0 ? double(I.pass_items) / p.epoch_seconds : 0;
  I.dashboard->update(p, current, history_);
}

MetricValues LearnerCore::end_pass(Split split) {
  Impl& I = *impl_;
  MetricValues values;
  for (auto& m : metrics_of(config_, split)) values.emplace_back(m->name(), m->value());
  const std::size_t epoch = counters_.epoch + 1;
  for (const auto& [n, v] : values) history_.add_epoch(split, n, {epoch, counters_.batches, v});
  I.logger->epoch(split, epoch, counters_.batches, values);
  I.dashboard->epoch_end(split, epoch, values, history_);
  auto& last = split == Split::Train ? I.last_train : I.last_valid;
  last.clear();
  for (const auto& [n, v] : values) last[n] = v;
  return values;
}

void LearnerCore::write_pictures() const {
  if (!config_.pictures) return;
  write_curves(history_, config_.artifact_dir);
  for (const auto& m : config_.valid_metrics) {
    const auto* cm = dynamic_cast<const ConfusionMatrix*>(m.get());
    if (cm == nullptr || cm->counts().empty()) continue;
    std::vector<std::string> names = config_.class_names;
    EMBER_CHECK(names.empty() || names.size() == cm->counts().size(),
                "train::Learner: " + std::to_string(names.size()) + " class names for a " +
                    std::to_string(cm->counts().size()) + "-class confusion matrix");
    for (std::size_t i = names.size(); i < cm->counts().size(); ++i)
      names.push_back(std::to_string(i));
    for (const char* ext : {".png", ".svg"})
      plot::write_confusion_matrix(cm->counts(), names,
                                   config_.artifact_dir + "/confusion_matrix" + ext);
  }
}

bool LearnerCore::epoch_is_best() const {
  const auto& p = config_.checkpoints;
  if (p.best_metric.empty()) return false;
  const Metric* m = find_metric(
      p.best_split == Split::Train ? config_.train_metrics : config_.valid_metrics, p.best_metric);
  if (m == nullptr) return false;
  const auto best = history_.best_epoch(p.best_split, p.best_metric, m->higher_is_better());
  return best && best->epoch == counters_.epoch;
}

bool LearnerCore::early_stop() {
  if (!config_.early_stopping) return false;
  const EarlyStopping& es = *config_.early_stopping;
  const Metric* m = find_metric(
      es.split == Split::Train ? config_.train_metrics : config_.valid_metrics, es.metric);
  const auto v = history_.last_epoch(es.split, es.metric);
  if (m == nullptr || !v || std::isnan(*v)) return false;
  Impl& I = *impl_;
  const bool better = !I.es_best || (m->higher_is_better() ? *v > *I.es_best + es.min_delta
                                                           : *v < *I.es_best - es.min_delta);
  if (better) {
    I.es_best = *v;
    I.es_bad = 0;
    return false;
  }
  if (++I.es_bad < es.patience) return false;
  message(fmt::format("early stopping: {} {} has not improved on {:.6g} for {} epochs",
                      name(es.split), es.metric, *I.es_best, I.es_bad));
  return true;
}

bool LearnerCore::interrupt_requested() const {
  return config_.interrupter.should_stop(counters_.steps);
}

void LearnerCore::check_loss(double loss) const {
  if (std::isfinite(loss)) return;
  fail(fmt::format(
      "train::Learner::fit: the loss is {} at epoch {}, batch {} of {} (training batch {} of "
      "the run, after {} optimizer steps); the run stops here (EMBER_DETECT_NAN=1 names the first "
      "op that produced a NaN)",
      std::isnan(loss) ? "NaN" : "infinite", counters_.epoch + 1, counters_.epoch_batch,
      impl_->pass_batches, counters_.batches, counters_.steps));
}

std::string LearnerCore::step_context() const {
  return fmt::format(
      "train::Learner::fit: at epoch {}, batch {} of {} (training batch {} of the run, after {} "
      "optimizer steps)",
      counters_.epoch + 1, counters_.epoch_batch, impl_->pass_batches, counters_.batches,
      counters_.steps);
}

nn::Json LearnerCore::state_json() const {
  nn::Json j = {{"format", "ember.learner"}, {"version", 1},
                {"epoch", counters_.epoch},  {"batches", counters_.batches},
                {"steps", counters_.steps},  {"epoch_batch", counters_.epoch_batch},
                {"seed", config_.seed},      {"history", history_.to_json()}};
  nn::Json es = {{"bad_epochs", impl_->es_bad}};
  es["best"] = impl_->es_best ? nn::Json(*impl_->es_best) : nn::Json(nullptr);
  j["early_stopping"] = std::move(es);
  if (counters_.epoch_batch > 0) {  // inside an epoch: the aggregates so far
    nn::Json ms = nn::Json::object();
    for (const auto& m : config_.train_metrics) ms[m->name()] = m->state();
    j["train_metrics"] = std::move(ms);
  }
  return j;
}

void LearnerCore::load_state_json(const nn::Json& j) {
  EMBER_CHECK(
      j.is_object() && j.value("format", "") == "ember.learner",
      "train::Learner: learner.json is not a Learner state (no \"format\": \"ember.learner\")");
  EMBER_CHECK(j.at("version").get<int>() == 1, "train::Learner: learner.json has version " +
                                                   j.at("version").dump() +
                                                   "; this ember reads version 1");
  counters_.epoch = j.at("epoch").get<std::size_t>();
  counters_.batches = j.at("batches").get<std::size_t>();
  counters_.steps = j.at("steps").get<std::size_t>();
  counters_.epoch_batch = j.at("epoch_batch").get<std::size_t>();
  const auto seed = j.at("seed").get<std::uint64_t>();
  EMBER_CHECK(seed == config_.seed,
              fmt::format("train::Learner: the checkpoint was made with seed {}, "
                          "this Learner has seed {}: a resumed run must keep its seed",
                          seed, config_.seed));
  history_ = History::from_json(j.at("history"));
  const auto& es = j.at("early_stopping");
  impl_->es_bad = es.at("bad_epochs").get<std::size_t>();
  impl_->es_best =
      es.at("best").is_null() ? std::nullopt : std::optional<double>(es.at("best").get<double>());
  impl_->fit_start_batches = counters_.batches;
  impl_->resumed_metrics = j.value("train_metrics", nn::Json(nullptr));
  if (impl_->logger) impl_->logger->rewrite(history_);
}

std::string LearnerCore::checkpoint_name(bool mid_epoch) const {
  if (mid_epoch) return fmt::format("epoch-{:04}-step-{:06}", counters_.epoch + 1, counters_.steps);
  return fmt::format("epoch-{:04}", counters_.epoch);
}

std::string LearnerCore::commit_checkpoint(const std::string& name, bool is_best) {
  impl_->last_checkpoint = checkpoints().commit(name, is_best, config_.checkpoints.keep_last);
  message("checkpoint " + impl_->last_checkpoint + (is_best ? " (best)" : ""));
  return impl_->last_checkpoint;
}

void LearnerCore::message(const std::string& text) {
  if (impl_->dashboard) impl_->dashboard->message(text);
}

Summary LearnerCore::summary(Summary::Outcome outcome, double seconds,
                             std::string model_path) const {
  Summary s;
  s.outcome = outcome;
  s.epochs = counters_.epoch;
  s.steps = counters_.steps;
  s.batches = counters_.batches;
  s.seconds = seconds;
  s.train = impl_->last_train;
  s.valid = impl_->last_valid;
  if (s.train.empty())
    for (const auto& m : history_.metrics(Split::Train))
      if (auto v = history_.last_epoch(Split::Train, m)) s.train[m] = *v;
  if (s.valid.empty())
    for (const auto& m : history_.metrics(Split::Valid))
      if (auto v = history_.last_epoch(Split::Valid, m)) s.valid[m] = *v;
  std::string metric;
  Split split = Split::Valid;
  if (config_.early_stopping) {
    metric = config_.early_stopping->metric;
    split = config_.early_stopping->split;
  } else if (!config_.checkpoints.best_metric.empty()) {
    metric = config_.checkpoints.best_metric;
    split = config_.checkpoints.best_split;
  }
  if (!metric.empty()) {
    const Metric* m =
        find_metric(split == Split::Train ? config_.train_metrics : config_.valid_metrics, metric);
    s.best_metric = std::string(name(split)) + " " + metric;
    if (m) s.best = history_.best_epoch(split, metric, m->higher_is_better());
  }
  s.model_path = std::move(model_path);
  s.last_checkpoint = impl_->last_checkpoint;
  return s;
}

std::string LearnerCore::model_path() const { return config_.artifact_dir + "/model.ember"; }
std::string LearnerCore::config_path() const { return config_.artifact_dir + "/config.json"; }

void rethrow_with_context(const std::string& context) {
  try {
    throw;
  } catch (const std::exception& e) {
    fail(context + ": " + e.what());
  }
}

}  // namespace detail

LearnerBuilder::LearnerBuilder(std::string artifact_dir) {
  EMBER_CHECK(!artifact_dir.empty(), "train::LearnerBuilder: the artifact folder is empty");
  config_.artifact_dir = std::move(artifact_dir);
}
LearnerBuilder& LearnerBuilder::epochs(std::size_t n) {
  EMBER_CHECK(n > 0, "train::LearnerBuilder::epochs: the number of epochs must be positive, got 0");
  config_.epochs = n;
  return *this;
}
LearnerBuilder& LearnerBuilder::metric_ptr(std::unique_ptr<Metric> m) {
  EMBER_CHECK(m != nullptr, "train::LearnerBuilder::metric: the metric is null");
  config_.valid_metrics.push_back(m->clone_empty());
  config_.train_metrics.push_back(std::move(m));
  return *this;
}
LearnerBuilder& LearnerBuilder::train_metric(std::unique_ptr<Metric> m) {
  EMBER_CHECK(m != nullptr, "train::LearnerBuilder::train_metric: the metric is null");
  config_.train_metrics.push_back(std::move(m));
  return *this;
}
LearnerBuilder& LearnerBuilder::valid_metric(std::unique_ptr<Metric> m) {
  EMBER_CHECK(m != nullptr, "train::LearnerBuilder::valid_metric: the metric is null");
  config_.valid_metrics.push_back(std::move(m));
  return *this;
}
LearnerBuilder& LearnerBuilder::checkpoints(CheckpointPolicy p) {
  config_.checkpoints = std::move(p);
  return *this;
}
LearnerBuilder& LearnerBuilder::early_stopping(EarlyStopping e) {
  EMBER_CHECK(!e.metric.empty(), "train::LearnerBuilder::early_stopping: no metric named");
  EMBER_CHECK(e.patience > 0,
              "train::LearnerBuilder::early_stopping: the patience must be positive");
  config_.early_stopping = std::move(e);
  return *this;
}
LearnerBuilder& LearnerBuilder::grad_accumulation(std::size_t batches) {
  EMBER_CHECK(batches > 0,
              "train::LearnerBuilder::grad_accumulation: the number of batches per "
              "optimizer step must be positive, got 0");
  config_.grad_accumulation = batches;
  return *this;
}
LearnerBuilder& LearnerBuilder::grad_clipping(optim::GradientClipping c) {
  config_.grad_clipping = c;
  return *this;
}
LearnerBuilder& LearnerBuilder::track_grad_norm(bool on) {
  config_.track_grad_norm = on;
  return *this;
}
LearnerBuilder& LearnerBuilder::interrupter(Interrupter i) {
  config_.interrupter = std::move(i);
  return *this;
}
LearnerBuilder& LearnerBuilder::dashboard(DashboardMode mode, double plain_interval_seconds) {
  EMBER_CHECK(std::isfinite(plain_interval_seconds) && plain_interval_seconds >= 0,
              "train::LearnerBuilder::dashboard: the interval must be finite and >= 0");
  config_.dashboard = mode;
  config_.plain_interval_seconds = plain_interval_seconds;
  return *this;
}
LearnerBuilder& LearnerBuilder::dashboard_curves(std::vector<std::string> metrics) {
  config_.dashboard_curves = std::move(metrics);
  return *this;
}
LearnerBuilder& LearnerBuilder::seed(std::uint64_t s) {
  config_.seed = s;
  return *this;
}
LearnerBuilder& LearnerBuilder::resume(bool on) {
  config_.resume = on;
  return *this;
}
LearnerBuilder& LearnerBuilder::model_config(nn::Json config) {
  config_.model_config = std::move(config);
  return *this;
}

LearnerBuilder& LearnerBuilder::pictures(bool on) {
  config_.pictures = on;
  return *this;
}

LearnerBuilder& LearnerBuilder::class_names(std::vector<std::string> names) {
  config_.class_names = std::move(names);
  return *this;
}

LearnerConfig LearnerBuilder::take_config() {
  EMBER_CHECK(
      !config_.artifact_dir.empty(),
      "train::LearnerBuilder::build: the builder was already used (build moves its settings)");
  if (config_.train_metrics.empty())
    config_.train_metrics.push_back(std::make_unique<LossMetric>());
  if (config_.valid_metrics.empty())
    config_.valid_metrics.push_back(std::make_unique<LossMetric>());
  auto check_unique = [](const std::vector<std::unique_ptr<Metric>>& ms, const char* split) {
    for (std::size_t i = 0; i < ms.size(); ++i)
      for (std::size_t k = i + 1; k < ms.size(); ++k)
        EMBER_CHECK(ms[i]->name() != ms[k]->name(),
                    std::string("train::LearnerBuilder::build: two ") + split +
                        " metrics are named '" + ms[i]->name() + "'");
  };
  check_unique(config_.train_metrics, "train");
  check_unique(config_.valid_metrics, "valid");
  LearnerConfig out = std::move(config_);
  config_ = LearnerConfig{};
  return out;
}

}  // namespace ember::train
