// The Learner: runs the training loop of a model that provides its steps (step.hpp) —
// backward, gradient accumulation and clipping, the optimizer and scheduler steps, the
// validation pass, metrics, logs, the dashboard, checkpoints, resume, early stopping — and
// returns a Summary. Built by a LearnerBuilder, as Burn's:
//
//   auto learner = train::LearnerBuilder("artifacts/run")
//                      .epochs(10)
//                      .metric(train::LossMetric{}).metric(train::AccuracyMetric{})
//                      .checkpoints({.keep_last = 2, .best_metric = "accuracy"})
//                      .early_stopping({.metric = "loss", .patience = 3})
//                      .build(net, optim::AdamWConfig{}.init(),
//                      optim::CosineAnnealingLrConfig{1e-3, n}.init());
//   train::Summary s = learner.fit(train_loader, valid_loader);
//   Net trained = std::move(learner).model();
//
// A loader is anything iterable whose batches the model's steps take, with DataLoader's
// num_batches(), state() and restore() (data/loader.hpp); the training loader's batches
// live on the model's (autodiff) device, the validation loader's on its inner device (the
// validation pass runs on model.valid()).
//
// Note [Deterministic resume]: a stopped run and its resumption give bit for bit the
// weights of an uninterrupted run. What a step depends on is all in the checkpoint or a
// function of it: the weights and buffers (batch norm's running statistics), the optimizer
// state, the scheduler's step, the loaders' positions (data::LoaderState: the item order
// and the augmentations are functions of the seed, the epoch and the index), and the
// device's generator, which the Learner seeds before every training batch with
// derive_seed(seed, batch index of the run) — so dropout masks depend on the batch, never
// on what ran before in the process. A stop is taken only at an optimizer-step boundary,
// so no accumulated gradient is ever lost. A mid-epoch checkpoint also keeps each training
// metric's state (Metric::state()), so the resumed epoch's aggregates cover the whole epoch
// as in the uninterrupted run (a metric without state — the default for one's own — covers
// the batches since the resume); the History and the logs are restored from the checkpoint.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/base/error.hpp"
#include "ember/data/loader.hpp"
#include "ember/data/random.hpp"
#include "ember/nn/module.hpp"
#include "ember/optim/clipping.hpp"
#include "ember/optim/gradients_params.hpp"
#include "ember/optim/lr_scheduler.hpp"
#include "ember/optim/optimizer.hpp"
#include "ember/optim/state_record.hpp"
#include "ember/record/record.hpp"
#include "ember/train/checkpoint.hpp"
#include "ember/train/dashboard.hpp"
#include "ember/train/history.hpp"
#include "ember/train/interrupter.hpp"
#include "ember/train/metric.hpp"
#include "ember/train/step.hpp"

namespace ember::train {

// Stops training when an epoch metric has not improved by more than min_delta for
// `patience` epochs in a row (the direction is the metric's higher_is_better()).
struct EarlyStopping {
  std::string metric;
  Split split = Split::Valid;
  std::size_t patience = 3;
  double min_delta = 0.0;
};

struct LearnerConfig {
  std::string artifact_dir;
  std::size_t epochs = 1;
  std::vector<std::unique_ptr<Metric>> train_metrics, valid_metrics;
  CheckpointPolicy checkpoints = {};
  std::optional<EarlyStopping> early_stopping = {};
  std::size_t grad_accumulation = 1;  // batches per optimizer step
  // Applied to all gradients together before each optimizer step: Value clamps each
  // element, Norm scales them all to a global 2-norm of at most the limit.
  optim::GradientClipping grad_clipping = {};
  bool track_grad_norm = false;  // MetricInput::grad_norm without clipping by norm
  Interrupter interrupter = {};
  DashboardMode dashboard = DashboardMode::Auto;
  double plain_interval_seconds = 10.0;
  std::vector<std::string> dashboard_curves = {};
  std::uint64_t seed = 0;      // the generator seeds of the training batches
  bool resume = false;         // continue from checkpoints/latest when there is one
  nn::Json model_config = {};  // saved with the model (model.ember and config.json)
  bool pictures = true;        // curves/ (PNG and SVG) and the confusion matrix each epoch
  std::vector<std::string> class_names = {};  // the confusion matrix's labels ("0", "1", ...)
};

struct Summary {
  enum class Outcome { Completed, EarlyStopped, Interrupted };
  Outcome outcome = Outcome::Completed;
  std::size_t epochs = 0;                      // epochs completed
  std::size_t steps = 0;                       // optimizer steps
  std::size_t batches = 0;                     // training batches
  double seconds = 0.0;                        // wall time of this fit call
  std::map<std::string, double> train, valid;  // the last epoch's values
  std::string best_metric;                     // the early-stopping or best-checkpoint metric
  std::optional<MetricPoint> best;             // its best epoch
  std::string model_path;                      // the final model (empty when interrupted)
  std::string last_checkpoint;
  std::string to_string() const;
};
const char* name(Summary::Outcome o);  // "completed", "early stopped", "interrupted"

namespace detail {

// Counters of a run; a checkpoint stores them.
struct RunCounters {
  std::size_t epoch = 0;        // epochs completed
  std::size_t batches = 0;      // training batches run
  std::size_t steps = 0;        // optimizer steps
  std::size_t epoch_batch = 0;  // training batches run in the epoch in progress
};

// The part of a Learner that does not depend on the model's type: metrics, history, logs,
// dashboard, checkpoint bookkeeping, early stopping, the summary.
class LearnerCore {
 public:
  explicit LearnerCore(LearnerConfig config);
  ~LearnerCore();
  LearnerCore(LearnerCore&&) noexcept;
  LearnerCore& operator=(LearnerCore&&) = delete;

  const LearnerConfig& config() const { return config_; }
  RunCounters& counters() { return counters_; }
  const History& history() const { return history_; }
  CheckpointStore& checkpoints();

  // Checks the folders and opens logs and the dashboard; installs the SIGINT guard.
  void begin_fit(std::size_t train_batches, bool has_valid);
  // Leaves the terminal clean, removes the guard. Safe to call twice.
  void end_fit();
  bool fitting() const;

  void begin_pass(Split split, std::size_t batches, std::size_t first_batch);
  // One batch's results: updates the metrics, the history, the logs and the dashboard.
  void record_batch(Split split, const HostStep& step, double lr, double grad_norm, double seconds);
  // The pass's aggregates into the history and logs; returns them.
  MetricValues end_pass(Split split);
  // After an epoch's passes: whether it is the best by the checkpoint metric.
  bool epoch_is_best() const;
  // After an epoch: the curves and the confusion matrix (LearnerConfig::pictures).
  void write_pictures() const;
  // After an epoch: whether early stopping ends the run (says why on the dashboard).
  bool early_stop();
  bool interrupt_requested() const;

  // Throws an ember::Error naming the step when the loss is not finite.
  void check_loss(double loss) const;
  // "train::Learner::fit: at epoch 2, batch 7 of 468 (training batch 475 of the run, after
  // 474 optimizer steps)": the batch in progress, for errors raised by its step.
  std::string step_context() const;

  // The counters, history and early-stopping state as JSON (learner.json's core).
  nn::Json state_json() const;
  void load_state_json(const nn::Json& j);
  // A checkpoint's name for the current counters ("epoch-0003", "epoch-0004-step-000931").
  std::string checkpoint_name(bool mid_epoch) const;
  std::string commit_checkpoint(const std::string& name, bool is_best);
  void message(const std::string& text);

  Summary summary(Summary::Outcome outcome, double seconds, std::string model_path) const;
  std::string model_path() const;
  std::string config_path() const;

 private:
  struct Impl;
  LearnerConfig config_;
  RunCounters counters_;
  History history_;
  std::unique_ptr<Impl> impl_;
};

// The device of a module's first tensor; an ember::Error when it has none.
template <nn::Module M>
Device device_of(const M& m) {
  std::optional<Device> dev;
  nn::visit(m, [&](const nn::TensorEntry& e) {
    if (!dev) dev = e.tensor.device();
  });
  EMBER_CHECK(dev.has_value(), "train::Learner: the model has no params or buffers");
  return *dev;
}
// Rethrows the current exception as an ember::Error prefixed with `context`.
[[noreturn]] void rethrow_with_context(const std::string& context);

// The loader interface the Learner needs to resume (data::DataLoader has it).
template <class L>
concept ResumableLoader = requires(L& l, const data::LoaderState& s) {
  { l.num_batches() } -> std::convertible_to<std::size_t>;
  { l.state() } -> std::convertible_to<data::LoaderState>;
  l.restore(s);
  l.begin();
  l.end();
};

struct NoValidation {};

}  // namespace detail

template <nn::Module M>
class Learner {
 public:
  Learner(M model, std::unique_ptr<optim::Optimizer> optimizer,
          std::unique_ptr<optim::LrScheduler> scheduler, LearnerConfig config)
      : model_(std::move(model)),
        optimizer_(std::move(optimizer)),
        scheduler_(std::move(scheduler)),
        core_(std::move(config)),
        device_(detail::device_of(model_)) {
    EMBER_CHECK(optimizer_ != nullptr, "train::Learner: the optimizer is null");
    EMBER_CHECK(scheduler_ != nullptr, "train::Learner: the learning-rate scheduler is null");
  }

  // Trains for the configured epochs (from the latest checkpoint when resuming), with a
  // validation pass after each training epoch.
  template <detail::ResumableLoader TL, detail::ResumableLoader VL>
  Summary fit(TL& train, VL& valid) {
    return run(train, &valid);
  }
  // Trains without validation.
  template <detail::ResumableLoader TL>
  Summary fit(TL& train) {
    return run(train, static_cast<detail::NoValidation*>(nullptr));
  }

  const M& model() const& { return model_; }
  M model() && { return std::move(model_); }
  const History& history() const { return core_.history(); }
  const optim::Optimizer& optimizer() const { return *optimizer_; }
  const optim::LrScheduler& scheduler() const { return *scheduler_; }

 private:
  using Clock = std::chrono::steady_clock;

  template <class TL, class VL>
  Summary run(TL& train, VL* valid) {
    const auto t0 = Clock::now();
    const LearnerConfig& cfg = core_.config();
    EMBER_CHECK(train.num_batches() > 0, "train::Learner::fit: the training loader has no batches");
    core_.begin_fit(train.num_batches(), valid != nullptr);
    struct EndFit {
      detail::LearnerCore& c;
      ~EndFit() { c.end_fit(); }
    } end_fit{core_};
    if (cfg.resume) resume(train, valid);
    auto& n = core_.counters();

    Summary::Outcome outcome = Summary::Outcome::Completed;
    std::string model_path;
    while (n.epoch < cfg.epochs) {
      if (!train_epoch(train, valid)) {
        save_checkpoint(train, valid, /*mid_epoch=*/true);
        outcome = Summary::Outcome::Interrupted;
        break;
      }
      if constexpr (!std::is_same_v<VL, detail::NoValidation>) valid_epoch(*valid);
      ++n.epoch;
      n.epoch_batch = 0;
      core_.write_pictures();
      const bool best = core_.epoch_is_best();
      const bool stop_early = core_.early_stop();
      if (cfg.checkpoints.every_epoch || best || core_.interrupt_requested())
        save_checkpoint(train, valid, /*mid_epoch=*/false, best);
      if (stop_early) {
        outcome = Summary::Outcome::EarlyStopped;
        break;
      }
      if (core_.interrupt_requested() && n.epoch < cfg.epochs) {
        outcome = Summary::Outcome::Interrupted;
        break;
      }
    }
    if (outcome != Summary::Outcome::Interrupted) {
      model_path = core_.model_path();
      record::save(model_, model_path, {.config = cfg.model_config});
      if (!cfg.model_config.is_null())
        write_file_atomically(core_.config_path(), cfg.model_config.dump(2) + "\n");
    }
    core_.end_fit();
    return core_.summary(outcome, std::chrono::duration<double>(Clock::now() - t0).count(),
                         model_path);
  }

  // One training pass; false when it stopped early on an interrupt (mid-epoch).
  template <class TL, class VL>
  bool train_epoch(TL& train, VL* valid) {
    const LearnerConfig& cfg = core_.config();
    auto& n = core_.counters();
    const std::size_t accum = cfg.grad_accumulation;
    const std::size_t batches = train.num_batches();
    core_.begin_pass(Split::Train, batches, n.epoch_batch);
    optim::GradientsAccumulator acc;
    bool interrupted = false;
    for (auto& batch : train) {
      const auto ts = Clock::now();
      device_.seed(data::derive_seed(cfg.seed, n.batches));
      ++n.batches;
      ++n.epoch_batch;
      // An error of the step (EMBER_DETECT_NAN's among them) says where the run was.
      std::optional<StepOutput> out;
      std::optional<HostStep> host;
      optim::GradientsParams gp;
      try {
        out.emplace(model_.train_step(batch));
        host.emplace(*out);
      } catch (...) {
        detail::rethrow_with_context(core_.step_context());
      }
      core_.check_loss(host->loss());
      try {
        Tensor<1> loss =
            accum > 1 ? std::move(out->loss) * (1.0 / double(accum)) : std::move(out->loss);
        gp = optim::GradientsParams::from_grads(loss.backward(), model_);
      } catch (...) {
        detail::rethrow_with_context(core_.step_context() + ", in backward");
      }
      double lr = scheduler_->lr(), grad_norm = kNoValue;
      if (accum > 1) {
        acc.accumulate(std::move(gp));
        const bool last = n.epoch_batch == batches;
        if (acc.count() < accum && !last) {
          core_.record_batch(Split::Train, *host, lr, grad_norm, seconds_since(ts));
          continue;
        }
        gp = acc.grads();
      }
      grad_norm = clip(gp);
      lr = scheduler_->step();
      model_ = optimizer_->step(lr, std::move(model_), std::move(gp));
      ++n.steps;
      core_.record_batch(Split::Train, *host, lr, grad_norm, seconds_since(ts));
      if (cfg.interrupter.should_stop(n.steps) && n.epoch_batch < batches) {
        interrupted = true;
        break;
      }
      if (cfg.checkpoints.every_steps > 0 && n.steps % cfg.checkpoints.every_steps == 0 &&
          n.epoch_batch < batches)
        save_checkpoint(train, valid, /*mid_epoch=*/true);
    }
    if (interrupted) return false;
    core_.end_pass(Split::Train);
    return true;
  }

  template <class VL>
  void valid_epoch(VL& valid) {
    if constexpr (ValidStep<M, std::remove_cvref_t<decltype(*valid.begin())>>) {
      const M eval = model_.valid();
      core_.begin_pass(Split::Valid, valid.num_batches(), 0);
      for (auto& batch : valid) {
        const auto ts = Clock::now();
        HostStep host(eval.valid_step(batch));
        core_.record_batch(Split::Valid, host, kNoValue, kNoValue, seconds_since(ts));
      }
      core_.end_pass(Split::Valid);
    } else {
      static_assert(ValidStep<M, std::remove_cvref_t<decltype(*valid.begin())>>,
                    "train::Learner::fit: the model has no valid_step for the validation batches");
    }
  }

  double clip(optim::GradientsParams& gp) const {
    const auto& c = core_.config().grad_clipping;
    switch (c.kind) {
      case optim::GradientClipping::Kind::Norm:
        return optim::clip_grad_norm(gp, c.limit);
      case optim::GradientClipping::Kind::Value:
        optim::clip_grad_value(gp, c.limit);
        break;
      case optim::GradientClipping::Kind::None:
        break;
    }
    if (core_.config().track_grad_norm)
      return optim::clip_grad_norm(gp, std::numeric_limits<double>::max());
    return kNoValue;
  }

  template <class TL, class VL>
  void save_checkpoint(TL& train, VL* valid, bool mid_epoch, bool best = false) {
    const std::string name = core_.checkpoint_name(mid_epoch);
    const std::string dir = core_.checkpoints().stage(name);
    record::save(model_, dir + "/model.ember", {.config = core_.config().model_config});
    record::save(optimizer_->state(), dir + "/optimizer.ember");
    nn::Json j = core_.state_json();
    j["scheduler"] = scheduler_->state().meta;
    const data::LoaderState ts = train.state();
    j["train_loader"] = {{"epoch", ts.epoch}, {"batch", ts.batch}};
    if constexpr (!std::is_same_v<VL, detail::NoValidation>) {
      const data::LoaderState vs = valid->state();
      j["valid_loader"] = {{"epoch", vs.epoch}, {"batch", vs.batch}};
    }
    write_file_atomically(dir + "/learner.json", j.dump(1) + "\n");
    core_.commit_checkpoint(name, best);
  }

  template <class TL, class VL>
  void resume(TL& train, VL* valid) {
    const auto latest = core_.checkpoints().latest();
    if (!latest) {
      core_.message("resume: no checkpoint in " + core_.checkpoints().dir() + ", starting afresh");
      return;
    }
    const std::string& dir = *latest;
    try {
      model_ = record::load(std::move(model_), dir + "/model.ember", device_);
    } catch (...) {
      detail::rethrow_with_context("train::Learner: cannot resume from " + dir +
                                   ": the checkpoint's model does not match this model");
    }
    const Device state_device = device_.is_autodiff() ? device_.inner() : device_;
    try {
      optimizer_->load_state(
          record::load(optim::OptimizerState{}, dir + "/optimizer.ember", state_device), model_);
    } catch (...) {
      detail::rethrow_with_context("train::Learner: cannot resume from " + dir +
                                   ": the optimizer state does not match");
    }
    nn::Json j;
    try {
      j = nn::Json::parse(read_file(dir + "/learner.json"));
      core_.load_state_json(j);
      optim::SchedulerState s;
      s.meta = j.at("scheduler");
      scheduler_->load_state(s);
      const auto& tl = j.at("train_loader");
      train.restore({tl.at("epoch").get<std::uint64_t>(), tl.at("batch").get<std::size_t>()});
      if constexpr (!std::is_same_v<VL, detail::NoValidation>) {
        if (j.contains("valid_loader")) {
          const auto& vl = j.at("valid_loader");
          valid->restore({vl.at("epoch").get<std::uint64_t>(), vl.at("batch").get<std::size_t>()});
        }
      }
    } catch (...) {
      detail::rethrow_with_context("train::Learner: cannot resume from " + dir);
    }
    core_.message("resumed from " + dir);
  }

  static double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  }

  M model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrScheduler> scheduler_;
  detail::LearnerCore core_;
  Device device_;
};

// Builds a Learner: every setting has a default but the artifact folder.
class LearnerBuilder {
 public:
  explicit LearnerBuilder(std::string artifact_dir);

  LearnerBuilder& epochs(std::size_t n);
  // A metric for both splits (each gets its own copy).
  template <class T>
  requires std::derived_from<T, Metric> LearnerBuilder& metric(T m) {
    return metric_ptr(std::make_unique<T>(std::move(m)));
  }
  LearnerBuilder& metric_ptr(std::unique_ptr<Metric> m);
  LearnerBuilder& train_metric(std::unique_ptr<Metric> m);
  LearnerBuilder& valid_metric(std::unique_ptr<Metric> m);
  LearnerBuilder& checkpoints(CheckpointPolicy p);
  LearnerBuilder& early_stopping(EarlyStopping e);
  LearnerBuilder& grad_accumulation(std::size_t batches);
  LearnerBuilder& grad_clipping(optim::GradientClipping c);
  LearnerBuilder& track_grad_norm(bool on = true);
  LearnerBuilder& interrupter(Interrupter i);
  LearnerBuilder& dashboard(DashboardMode mode, double plain_interval_seconds = 10.0);
  LearnerBuilder& dashboard_curves(std::vector<std::string> metrics);
  LearnerBuilder& seed(std::uint64_t s);
  LearnerBuilder& resume(bool on = true);
  LearnerBuilder& model_config(nn::Json config);
  // Training curves (curves/<metric>.png, .svg) and, with a ConfusionMatrix among the
  // validation metrics, confusion_matrix.png and .svg, written at the end of each epoch.
  LearnerBuilder& pictures(bool on = true);
  LearnerBuilder& class_names(std::vector<std::string> names);

  // The optimizer and the scheduler by value (any optim::Optimizer, any LrScheduler).
  template <nn::Module M, class O, class S>
  requires std::derived_from<O, optim::Optimizer> && std::derived_from<S, optim::LrScheduler>
      Learner<M> build(M model, O optimizer, S scheduler) {
    return Learner<M>(std::move(model), std::make_unique<O>(std::move(optimizer)),
                      std::make_unique<S>(std::move(scheduler)), take_config());
  }
  template <nn::Module M>
  Learner<M> build(M model, std::unique_ptr<optim::Optimizer> optimizer,
                   std::unique_ptr<optim::LrScheduler> scheduler) {
    return Learner<M>(std::move(model), std::move(optimizer), std::move(scheduler), take_config());
  }

 private:
  LearnerConfig take_config();  // checks it; the builder is left empty
  LearnerConfig config_;
};

}  // namespace ember::train
