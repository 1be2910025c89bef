// The train metrics against independent values: golden/metrics.json (PyTorch, numpy and
// plain Python, from make_metrics_golden.py) fed in batches, small hand-computed cases,
// the run metrics against the operating system's own counters, and bad input.
#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numbers>
#include <thread>

#include <ember/ember.hpp>
#include <ember/train/metrics.hpp>
#include <ember/train/metrics_basic.hpp>

#include "data/expect_error.hpp"

namespace ember::train {
namespace {

using data::testing::expect_error;
using Json = nn::Json;

std::unique_ptr<Metric> make_metric(const std::string& name, const Json& config) {
  if (name == "precision")
    return std::make_unique<Precision>(ClassificationConfig::from_json(config));
  if (name == "recall") return std::make_unique<Recall>(ClassificationConfig::from_json(config));
  if (name == "fbeta") return std::make_unique<FBeta>(FBetaConfig::from_json(config));
  if (name == "topk") return std::make_unique<TopKAccuracy>(TopKAccuracyConfig::from_json(config));
  if (name == "hamming")
    return std::make_unique<HammingScore>(HammingScoreConfig::from_json(config));
  if (name == "auroc") return std::make_unique<Auroc>();
  if (name == "mse") return std::make_unique<MeanSquaredError>();
  if (name == "mae") return std::make_unique<MeanAbsoluteError>();
  if (name == "r2") return std::make_unique<R2Score>(R2Config::from_json(config));
  if (name == "cer") return std::make_unique<CharErrorRate>();
  if (name == "wer") return std::make_unique<WordErrorRate>();
  if (name == "bleu") return std::make_unique<Bleu>(BleuConfig::from_json(config));
  ADD_FAILURE() << "unknown metric " << name;
  return nullptr;
}

// Rows [lo, hi) of a row-major tensor given as flat values and a shape.
TensorData rows(const std::vector<double>& flat, std::vector<std::size_t> shape, std::size_t lo,
                std::size_t hi) {
  std::size_t row = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) row *= shape[i];
  shape[0] = hi - lo;
  return TensorData::from(std::vector<double>(flat.begin() + static_cast<std::ptrdiff_t>(lo * row),
                                              flat.begin() + static_cast<std::ptrdiff_t>(hi * row)),
                          Shape(shape));
}

void expect_close(double actual, const Json& expected, const std::string& what) {
  if (expected.is_null() || (expected.is_number() && std::isnan(expected.get<double>()))) {
    EXPECT_TRUE(std::isnan(actual)) << what << ": " << actual;
    return;
  }
  EXPECT_NEAR(actual, expected.get<double>(), 1e-12) << what;
}

TEST(Metrics, GoldenValuesFedInBatches) {
  std::ifstream f(std::string(EMBER_TRAIN_GOLDEN_DIR) + "/metrics.json");
  ASSERT_TRUE(f.good());
  const Json golden = Json::parse(f);
  std::size_t checked = 0;
  for (const Json& c : golden["cases"]) {
    auto m = make_metric(c["metric"], c["config"]);
    ASSERT_NE(m, nullptr);
    const std::string what = m->name() + " " + c["config"].dump();
    // A second copy goes through its state (as JSON text, as a checkpoint keeps it) into a
    // fresh metric after every batch: it must agree with the first exactly.
    std::unique_ptr<Metric> restored = m->clone_empty();
    std::size_t lo = 0;
    for (std::size_t b : c["batches"].get<std::vector<std::size_t>>()) {
      const auto update = [&](const MetricInput& in) {
        m->update(in);
        restored->update(in);
        auto fresh = restored->clone_empty();
        fresh->load_state(Json::parse(restored->state().dump()));
        restored = std::move(fresh);
        for (const auto& [a, r] :
             {std::pair{m->value(), restored->value()}, std::pair{m->last(), restored->last()}}) {
          if (std::isnan(a))
            EXPECT_TRUE(std::isnan(r)) << what << " after a state round trip: " << r;
          else
            EXPECT_EQ(a, r) << what << " after a state round trip";
        }
      };
      if (c.contains("hypotheses")) {
        const auto hyp = c["hypotheses"].get<std::vector<std::string>>();
        const auto ref = c["references"].get<std::vector<std::string>>();
        const std::vector<std::string> h(hyp.begin() + static_cast<std::ptrdiff_t>(lo),
                                         hyp.begin() + static_cast<std::ptrdiff_t>(lo + b));
        const std::vector<std::string> r(ref.begin() + static_cast<std::ptrdiff_t>(lo),
                                         ref.begin() + static_cast<std::ptrdiff_t>(lo + b));
        MetricInput in;
        in.text_output = &h;
        in.text_target = &r;
        update(in);
      } else {
        const TensorData out = rows(c["output"], c["output_shape"], lo, lo + b);
        const TensorData tgt = rows(c["target"], c["target_shape"], lo, lo + b);
        MetricInput in;
        in.output = &out;
        in.target = &tgt;
        in.items = b;
        update(in);
      }
      lo += b;
    }
    expect_close(m->value(), c["value"], what + " value");
    expect_close(m->last(), c["last"], what + " last");
    // A clone starts empty; reset forgets.
    EXPECT_TRUE(std::isnan(m->clone_empty()->value())) << what;
    EXPECT_EQ(m->clone_empty()->name(), m->name());
    m->reset();
    EXPECT_TRUE(std::isnan(m->value())) << what;
    ++checked;
  }
  EXPECT_EQ(checked, 40u);
}

// ---- hand-computed classification ----

struct Batch {
  TensorData out, tgt;
  MetricInput in() const {
    MetricInput i;
    i.output = &out;
    i.target = &tgt;
    return i;
  }
};

// Logits whose arg max is `pred`, for labels `labels`, C classes.
Batch multiclass(const std::vector<int>& pred, const std::vector<std::int64_t>& labels,
                 std::size_t c) {
  std::vector<float> logits(pred.size() * c, 0.0f);
  for (std::size_t i = 0; i < pred.size(); ++i)
    logits[i * c + static_cast<std::size_t>(pred[i])] = 1.0f;
  return {TensorData::from(logits, Shape{pred.size(), c}), TensorData::from(labels)};
}

TEST(Metrics, PrecisionRecallByHand) {
  // predictions 0 1 1 2 for labels 0 1 2 2: tp = (1, 1, 1), fp = (0, 1, 0), fn = (0, 0, 1).
  const Batch b = multiclass({0, 1, 1, 2}, {0, 1, 2, 2}, 3);
  Precision p;
  Recall r;
  FBeta f;
  Precision p_micro(ClassificationConfig{}.with_average(Average::Micro));
  for (Metric* m : std::vector<Metric*>{&p, &r, &f, &p_micro}) m->update(b.in());
  EXPECT_NEAR(p.value(), (1.0 + 0.5 + 1.0) / 3, 1e-15);
  EXPECT_NEAR(r.value(), (1.0 + 1.0 + 0.5) / 3, 1e-15);
  EXPECT_NEAR(f.value(), (1.0 + 2.0 / 3 + 2.0 / 3) / 3, 1e-15);  // F1 per class 1, 2/3, 2/3
  EXPECT_NEAR(p_micro.value(), 0.75, 1e-15);
  EXPECT_EQ(p.counts().tp, (std::vector<std::int64_t>{1, 1, 1}));
  EXPECT_EQ(p.counts().fp, (std::vector<std::int64_t>{0, 1, 0}));
  EXPECT_EQ(p.counts().fn, (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_EQ(p.name(), "precision");
  EXPECT_EQ(p_micro.name(), "precision_micro");
  EXPECT_EQ(f.name(), "f1");
  EXPECT_EQ(FBeta(FBetaConfig{}.with_beta(0.5)).name(), "f0.5");
}

TEST(Metrics, MacroLeavesOutClassesThatNeverOccur) {
  // Class 2 of 3 is neither a label nor predicted: the mean is over classes 0 and 1.
  const Batch b = multiclass({0, 0, 1}, {0, 1, 1}, 3);
  Precision p;
  p.update(b.in());
  EXPECT_NEAR(p.value(), (0.5 + 1.0) / 2, 1e-15);
}

TEST(Metrics, BinaryAndMultiLabelUseTheThreshold) {
  const Batch b{TensorData::from(std::vector<float>{0.9f, 0.4f, 0.6f, 0.1f}),
                TensorData::from(std::vector<float>{1, 1, 0, 0})};
  Precision p;
  Recall r;
  p.update(b.in());
  r.update(b.in());
  EXPECT_DOUBLE_EQ(p.value(), 0.5);  // predicted positives 0.9 (right) and 0.6 (wrong)
  EXPECT_DOUBLE_EQ(r.value(), 0.5);  // positives 0.9 (found) and 0.4 (missed)
  Recall low(ClassificationConfig{}.with_threshold(0.3));
  low.update(b.in());
  EXPECT_DOUBLE_EQ(low.value(), 1.0);
  HammingScore h;
  h.update(b.in());
  EXPECT_DOUBLE_EQ(h.value(), 0.5);
}

TEST(Metrics, TopKCountsTiesForTheLabel) {
  // Row 0: label 2 ties the best score; row 1: label 0 is third of four.
  const Batch b{
      TensorData::from(std::vector<float>{1, 0, 1, 0, 0.2f, 0.9f, 0.5f, 0.1f}, Shape{2, 4}),
      TensorData::from(std::vector<std::int64_t>{2, 0})};
  TopKAccuracy top1(TopKAccuracyConfig{1}), top2(TopKAccuracyConfig{2}),
      top3(TopKAccuracyConfig{3});
  for (Metric* m : std::vector<Metric*>{&top1, &top2, &top3}) m->update(b.in());
  EXPECT_DOUBLE_EQ(top1.value(), 0.5);
  EXPECT_DOUBLE_EQ(top2.value(), 0.5);
  EXPECT_DOUBLE_EQ(top3.value(), 1.0);
  EXPECT_EQ(top3.name(), "top3");
}

TEST(Metrics, AurocByHand) {
  // Positives 0.35, 0.8 against negatives 0.1, 0.4: 3 of 4 pairs ordered right.
  const Batch b{TensorData::from(std::vector<double>{0.1, 0.4, 0.35, 0.8}),
                TensorData::from(std::vector<double>{0, 0, 1, 1})};
  Auroc a;
  a.update(b.in());
  EXPECT_DOUBLE_EQ(a.value(), 0.75);
  // A second step pools with the first: a positive at 0.2 adds pairs won against 0.1
  // only, 3 + 1 of 6.
  const Batch more{TensorData::from(std::vector<double>{0.2}),
                   TensorData::from(std::vector<double>{1})};
  a.update(more.in());
  EXPECT_DOUBLE_EQ(a.value(), 4.0 / 6);
  EXPECT_TRUE(std::isnan(a.last()));  // the step alone has no negative
  // All scores equal: every pair a tie, 1/2.
  const Batch ties{TensorData::from(std::vector<double>{0.3, 0.3, 0.3}),
                   TensorData::from(std::vector<double>{0, 1, 1})};
  Auroc t;
  t.update(ties.in());
  EXPECT_DOUBLE_EQ(t.value(), 0.5);
  // One class only: no AUROC.
  const Batch one{TensorData::from(std::vector<double>{0.3, 0.7}),
                  TensorData::from(std::vector<double>{1, 1})};
  Auroc o;
  o.update(one.in());
  EXPECT_TRUE(std::isnan(o.value()));
}

TEST(Metrics, ConfusionMatrixCounts) {
  ConfusionMatrix m;
  m.update(multiclass({0, 1, 1, 2}, {0, 1, 2, 2}, 3).in());
  m.update(multiclass({2, 0}, {0, 0}, 3).in());
  const std::vector<std::vector<std::int64_t>> expected{{2, 0, 1}, {0, 1, 0}, {0, 1, 1}};
  EXPECT_EQ(m.counts(), expected);
  EXPECT_DOUBLE_EQ(m.value(), 4.0 / 6);
  EXPECT_DOUBLE_EQ(m.last(), 0.5);
  ConfusionMatrix binary;
  const Batch b{TensorData::from(std::vector<float>{0.9f, 0.4f, 0.6f, 0.1f}),
                TensorData::from(std::vector<float>{1, 1, 0, 0})};
  binary.update(b.in());
  EXPECT_EQ(binary.counts(), (std::vector<std::vector<std::int64_t>>{{1, 1}, {1, 1}}));
  ConfusionMatrix sized(ConfusionMatrixConfig{4});
  EXPECT_EQ(sized.counts().size(), 4u);
  expect_error([&] { sized.update(multiclass({0}, {0}, 3).in()); }, "confusion_matrix");
}

// ---- language ----

MetricInput texts(const std::vector<std::string>& h, const std::vector<std::string>& r) {
  MetricInput in;
  in.text_output = &h;
  in.text_target = &r;
  return in;
}

TEST(Metrics, ErrorRatesByHand) {
  const std::vector<std::string> h1{"kitten"}, r1{"sitting"};
  CharErrorRate cer;
  cer.update(texts(h1, r1));
  EXPECT_DOUBLE_EQ(cer.value(), 3.0 / 7);  // k->s, e->i, +g
  // Code points, not bytes: one substitution in five characters.
  const std::vector<std::string> h2{"naive"}, r2{"na\xc3\xafve"};
  CharErrorRate utf8;
  utf8.update(texts(h2, r2));
  EXPECT_DOUBLE_EQ(utf8.value(), 1.0 / 5);
  const std::vector<std::string> h3{"the cat sat", "a  dog"}, r3{"the cat sat on the mat", "a dog"};
  WordErrorRate wer;
  wer.update(texts(h3, r3));
  EXPECT_DOUBLE_EQ(wer.value(), 3.0 / 8);  // three deletions over 6 + 2 reference words
  const std::vector<std::string> empty{""}, some{"x"};
  WordErrorRate none;
  none.update(texts(empty, empty));
  EXPECT_DOUBLE_EQ(none.value(), 0.0);
  none.update(texts(some, empty));
  EXPECT_TRUE(std::isinf(none.value()));
}

TEST(Metrics, BleuByHand) {
  const std::vector<std::string> same{"the cat sat on the mat"};
  Bleu exact;
  exact.update(texts(same, same));
  EXPECT_DOUBLE_EQ(exact.value(), 1.0);
  // Every n-gram of the hypothesis matches; it is 4 words against 6: BP = exp(1 - 6/4).
  const std::vector<std::string> short_hyp{"the cat sat on"};
  Bleu brief;
  brief.update(texts(short_hyp, same));
  EXPECT_NEAR(brief.value(), std::exp(-0.5), 1e-15);
  // Clipping: "the the the" against "the cat": p1 = 1/3, p2 = 0 -> 0 without smoothing.
  const std::vector<std::string> h{"the the the"}, r{"the cat"};
  Bleu clipped(BleuConfig{2});
  clipped.update(texts(h, r));
  EXPECT_DOUBLE_EQ(clipped.value(), 0.0);
  Bleu smoothed(BleuConfig{2, true});  // p2 = (0 + 1) / (2 + 1)
  smoothed.update(texts(h, r));
  EXPECT_NEAR(smoothed.value(), std::sqrt(1.0 / 3 * 1.0 / 3), 1e-15);
}

TEST(Metrics, PerplexityWeighsByItems) {
  Perplexity p;
  MetricInput a, b;
  a.loss = 1.0;
  a.items = 2;
  b.loss = 2.0;
  b.items = 6;
  p.update(a);
  p.update(b);
  EXPECT_NEAR(p.value(), std::exp((2.0 + 12.0) / 8), 1e-12);
  EXPECT_NEAR(p.last(), std::exp(2.0), 1e-12);
  EXPECT_FALSE(p.higher_is_better());
}

// ---- regression ----

TEST(Metrics, RegressionByHand) {
  // Targets 1 2 3 4 (mean 2.5, SS_tot 5), predictions off by 0.5, -0.5, 0, 1: SS_res 1.5.
  const Batch b{TensorData::from(std::vector<float>{1.5f, 1.5f, 3, 5}, Shape{4, 1}),
                TensorData::from(std::vector<float>{1, 2, 3, 4})};
  MeanSquaredError mse;
  MeanAbsoluteError mae;
  R2Score r2;
  for (Metric* m : std::vector<Metric*>{&mse, &mae, &r2}) m->update(b.in());
  EXPECT_DOUBLE_EQ(mse.value(), 1.5 / 4);
  EXPECT_DOUBLE_EQ(mae.value(), 2.0 / 4);
  EXPECT_DOUBLE_EQ(r2.value(), 1 - 1.5 / 5);
  // Constant targets: 1 when predicted exactly, else 0.
  const Batch flat{TensorData::from(std::vector<float>{2, 2}),
                   TensorData::from(std::vector<float>{2, 2})};
  R2Score exact;
  exact.update(flat.in());
  EXPECT_DOUBLE_EQ(exact.value(), 1.0);
  const Batch off{TensorData::from(std::vector<float>{2, 3}),
                  TensorData::from(std::vector<float>{2, 2})};
  R2Score wrong;
  wrong.update(off.in());
  EXPECT_DOUBLE_EQ(wrong.value(), 0.0);
}

// ---- the run ----

TEST(Metrics, GradientNormIsTheMeanOfTheSteps) {
  GradientNorm g;
  MetricInput a, b;
  a.grad_norm = 3.0;
  b.grad_norm = 5.0;
  g.update(a);
  g.update(b);
  EXPECT_DOUBLE_EQ(g.value(), 4.0);
  EXPECT_DOUBLE_EQ(g.last(), 5.0);
}

double process_cpu() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

TEST(Metrics, CpuUseMatchesTheProcessClock) {
  using Clock = std::chrono::steady_clock;
  const double cpu0 = process_cpu();
  const auto wall0 = Clock::now();
  CpuUse m;
  volatile double sink = 0;
  while (Clock::now() - wall0 < std::chrono::milliseconds(150)) sink = sink + std::sqrt(sink + 1.0);
  m.update({});
  const double cpu1 = process_cpu();
  const double wall1 = std::chrono::duration<double>(Clock::now() - wall0).count();
  const double expected = 100.0 * (cpu1 - cpu0) / wall1;
  // The two clocks bracket the metric's interval to within the few microseconds spent
  // outside the loop; rusage's accounting granularity gives a few more percent.
  EXPECT_NEAR(m.value(), expected, 5.0 + 0.05 * expected);
  EXPECT_GT(m.value(), 0.0);
  EXPECT_NEAR(m.last(), m.value(), 1e-9);  // one update: the same interval
}

double status_rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  }
  return -1;
}

TEST(Metrics, HostMemoryIsTheResidentSetSize) {
  HostMemory m;
  m.update({});
  const double before = m.last();
  EXPECT_NEAR(before, status_rss_mib(), 4.0);
  std::vector<char> block(64u << 20);
  std::memset(block.data(), 1, block.size());  // touch every page
  m.update({});
  EXPECT_GT(m.last() - before, 60.0);
  EXPECT_NEAR(m.last(), status_rss_mib(), 4.0);
  EXPECT_DOUBLE_EQ(m.value(), std::max(before, m.last()));
  EXPECT_EQ(block[12345], 1);
}

TEST(Metrics, DeviceMemoryReadsMemoryStats) {
  const Device cpu = Device::cpu();
  DeviceMemory m(cpu);
  m.update({});
  const double before = m.last();
  EXPECT_DOUBLE_EQ(before, static_cast<double>(memory_stats(cpu).in_use) / (1024.0 * 1024.0));
  auto t = Tensor<1>::zeros(Shape{1u << 20}, cpu);  // 4 MiB of f32
  m.update({});
  EXPECT_GE(m.last() - before, 4.0);
  EXPECT_DOUBLE_EQ(m.last(), static_cast<double>(memory_stats(cpu).in_use) / (1024.0 * 1024.0));
  EXPECT_DOUBLE_EQ(m.value(), m.last());
}

// ---- state (checkpoints) ----

// A metric restored from its state (through JSON text) continues as the original.
std::unique_ptr<Metric> through_state(const Metric& m) {
  auto fresh = m.clone_empty();
  fresh->load_state(Json::parse(m.state().dump()));
  return fresh;
}

TEST(Metrics, StateRoundTripsForTheMetricsOutsideTheGoldenSet) {
  // Exact counts and sums: the restored metric, fed the rest, gives the uninterrupted value.
  const Batch b1 = multiclass({0, 1, 1, 2}, {0, 1, 2, 2}, 3), b2 = multiclass({2, 0}, {0, 0}, 3);
  MetricInput l1 = b1.in(), l2 = b2.in();
  l1.loss = 0.75;
  l1.items = 4;
  l1.grad_norm = 3;
  l1.lr = 0.1;
  l2.loss = 1.25;
  l2.items = 2;
  l2.grad_norm = 5;
  l2.lr = 0.05;
  std::vector<std::unique_ptr<Metric>> ms;
  ms.push_back(std::make_unique<LossMetric>());
  ms.push_back(std::make_unique<AccuracyMetric>());
  ms.push_back(std::make_unique<LearningRateMetric>());
  ms.push_back(std::make_unique<ConfusionMatrix>());
  ms.push_back(std::make_unique<Perplexity>());
  ms.push_back(std::make_unique<GradientNorm>());
  ms.push_back(std::make_unique<DeviceMemory>(Device::cpu()));
  for (auto& m : ms) {
    m->update(l1);
    auto r = through_state(*m);
    m->update(l2);
    r->update(l2);
    EXPECT_EQ(r->value(), m->value()) << m->name();
    EXPECT_EQ(r->last(), m->last()) << m->name();
  }
  const auto restored_cm = through_state(*ms[3]);
  EXPECT_EQ(dynamic_cast<const ConfusionMatrix&>(*restored_cm).counts(),
            (std::vector<std::vector<std::int64_t>>{{2, 0, 1}, {0, 1, 0}, {0, 1, 1}}));
  HostMemory host;  // the resident set moves between two reads: the peak as saved
  host.update(l1);
  EXPECT_EQ(through_state(host)->value(), host.value());
  // Before any update: NaN survives the trip (JSON has no NaN; the state spells it).
  LossMetric empty;
  EXPECT_TRUE(std::isnan(through_state(empty)->value()));
  EXPECT_TRUE(std::isnan(through_state(empty)->last()));
}

TEST(Metrics, WallClockStateCountsTheTimeBeforeTheStop) {
  using namespace std::chrono_literals;
  MetricInput in;
  in.items = 50;
  in.seconds = 0.5;
  ItemsPerSecondMetric ips;
  EpochTimeMetric time;
  CpuUse cpu;
  std::this_thread::sleep_for(30ms);
  ips.update(in);
  time.update(in);
  cpu.update(in);
  const double before = time.value();
  auto ips2 = through_state(ips), time2 = through_state(time), cpu2 = through_state(cpu);
  EXPECT_EQ(time2->value(), before);  // restored as saved, until the next update
  EXPECT_EQ(ips2->value(), ips.value());
  EXPECT_EQ(cpu2->value(), cpu.value());
  std::this_thread::sleep_for(20ms);
  ips2->update(in);
  time2->update(in);
  // The epoch's time is the time before the stop plus the time since the restore.
  EXPECT_GE(time2->value(), before + 0.019);
  EXPECT_LT(time2->value(), before + 1.0);
  // 100 items over the time before the stop (50 / the saved rate) and the 20 ms since.
  const double ips_before = 50.0 / ips.value();
  EXPECT_LE(ips2->value(), 100.0 / (ips_before + 0.019));
  EXPECT_GT(ips2->value(), 100.0 / (ips_before + 1.0));
}

TEST(Metrics, StateOfAnotherShapeIsAnError) {
  LossMetric m;
  expect_error([&] { m.load_state(Json::parse(R"({"sum_": 1.0})")); }, "has no 'weight_'");
  expect_error([&] { m.load_state(Json::parse(R"({"sum_": "x", "weight_": 1, "last_": 0})")); },
               "sum_");
  expect_error([&] { m.load_state(Json::array()); }, "not an object");
  // A metric of one's own keeps no state by default.
  struct Counter final : Metric {
    std::string name() const override { return "counter"; }
    void update(const MetricInput&) override { ++n; }
    double value() const override { return double(n); }
    double last() const override { return 1; }
    void reset() override { n = 0; }
    bool higher_is_better() const override { return true; }
    std::unique_ptr<Metric> clone_empty() const override { return std::make_unique<Counter>(); }
    int n = 0;
  } c;
  EXPECT_TRUE(c.state().is_null());
}

// ---- bad input ----

TEST(Metrics, BadInputNamesTheMetric) {
  const Batch b = multiclass({0, 1}, {0, 1}, 3);
  MetricInput no_output;
  no_output.target = &b.tgt;
  expect_error([&] { Precision().update(no_output); }, "precision: MetricInput::output is missing");
  MetricInput no_target;
  no_target.output = &b.out;
  expect_error([&] { Auroc().update(no_target); }, "auroc: MetricInput::target is missing");
  const TensorData three_labels = TensorData::from(std::vector<std::int64_t>{0, 1, 2});
  MetricInput mismatched = b.in();
  mismatched.target = &three_labels;
  expect_error([&] { Recall().update(mismatched); }, "recall: output [2, 3] and target [3]");
  const TensorData bad_label = TensorData::from(std::vector<std::int64_t>{0, 3});
  MetricInput out_of_range = b.in();
  out_of_range.target = &bad_label;
  expect_error([&] { FBeta().update(out_of_range); },
               "f1: label 3 of item 1 is not a class of output [2, 3]");
  expect_error([&] { TopKAccuracy(TopKAccuracyConfig{4}).update(b.in()); }, "top4: k = 4 exceeds");
  expect_error([] { TopKAccuracy(TopKAccuracyConfig{0}); }, "TopKAccuracy: k is 0");
  expect_error([] { FBeta(FBetaConfig{}.with_beta(-1)); }, "FBeta: beta");
  const Batch not_binary{TensorData::from(std::vector<float>{0.2f, 0.8f}),
                         TensorData::from(std::vector<float>{0, 2})};
  expect_error([&] { HammingScore().update(not_binary.in()); },
               "hamming_score: target element 1 is 2");
  expect_error([&] { HammingScore().update(b.in()); }, "hamming_score: output [2, 3]");
  Precision p;
  p.update(b.in());
  expect_error([&] { p.update(multiclass({0}, {0}, 4).in()); }, "earlier steps had 3");
  const Batch nan_score{TensorData::from(std::vector<double>{NAN, 0.5}),
                        TensorData::from(std::vector<double>{0, 1})};
  expect_error([&] { Auroc().update(nan_score.in()); }, "auroc: output element 0");
  const Batch regression{TensorData::from(std::vector<float>{1, 2, 3}, Shape{3, 1}),
                         TensorData::from(std::vector<float>{1, 2}, Shape{2})};
  expect_error([&] { MeanSquaredError().update(regression.in()); },
               "mse: output [3, 1] and target [2]");
  const std::vector<std::string> two{"a", "b"}, one{"a"};
  expect_error([&] { WordErrorRate().update(texts(two, one)); },
               "wer: 2 hypotheses but 1 references");
  expect_error([] { Bleu().update(MetricInput{}); }, "bleu: MetricInput::text_output is missing");
  expect_error([] { Perplexity().update(MetricInput{}); },
               "perplexity: MetricInput::loss is missing");
  expect_error([] { GradientNorm().update(MetricInput{}); },
               "grad_norm: MetricInput::grad_norm is missing");
}

TEST(Metrics, ConfigsRoundTripThroughJson) {
  const FBetaConfig c =
      FBetaConfig{}.with_beta(2).with_average(Average::Micro).with_threshold(0.25);
  const FBetaConfig back = FBetaConfig::from_json(c.to_json());
  EXPECT_EQ(back.beta, 2);
  EXPECT_EQ(back.average, Average::Micro);
  EXPECT_EQ(back.threshold, 0.25);
  EXPECT_EQ(FBeta(back).name(), "f2_micro");
}

}  // namespace
}  // namespace ember::train
