// demo-bench: what the Learner and the data loader cost over a bare loop of the same steps,
// and the demo's training time against the same pipeline in PyTorch.
//
//   demo-bench [--batches K] [--reps N] [--python PATH] [--torch-script PATH] [--data DIR]
//              [--loops all|bare]
//
// Each repetition runs, one after the other (so drifts in machine load hit all three):
//   bare     K training steps of the demo's CNN (examples/fashion_cnn.hpp) over batches
//            prepared before the clock starts (the demo's loader, drained into a vector):
//            seed the device, train_step, the loss to the host, backward, the one-cycle
//            scheduler and AdamW — the steps the Learner runs, and nothing else;
//   learner  the same K steps as `make demo` runs them: a Learner (the demo's five
//            training metrics, logs, the model saved at the end; dashboard, checkpoints
//            and pictures off) over the demo's DataLoader (augmentation, one worker);
//   torch    benches/fashion_cnn_torch.py: the same model, augmentation, DataLoader (one
//            worker process), AdamW and one-cycle schedule, K batches (skipped without
//            --python or when the script fails).
// Prints each repetition and the medians: the Learner's overhead (learner / bare - 1,
// target <= 3%) and learner / torch (target <= 0.7). Never asserts timings.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "../examples/fashion_cnn.hpp"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::size_t batches = 20, reps = 3, batch = 128;
  std::string python;  // empty: no PyTorch side
  std::string torch_script = std::string(EMBER_SOURCE_DIR) + "/benches/fashion_cnn_torch.py";
  std::string data = data::FashionMnist::default_dir();
  bool learner = true;  // --loops bare: the bare loop alone (to profile the step)
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    EMBER_CHECK(i + 1 < argc, "demo-bench: " + a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--batches")
      o.batches = std::stoul(v);
    else if (a == "--reps")
      o.reps = std::stoul(v);
    else if (a == "--python")
      o.python = v;
    else if (a == "--torch-script")
      o.torch_script = v;
    else if (a == "--data")
      o.data = v;
    else if (a == "--loops" && (v == "bare" || v == "all"))
      o.learner = v == "all";
    else
      fail("demo-bench: unknown option " + a);
  }
  EMBER_CHECK(o.batches > 0 && o.reps > 0, "demo-bench: --batches and --reps must be positive");
  return o;
}

// The demo's training loader over its first `batches` batches of images.
auto demo_loader(const Options& o, const Device& ad) {
  std::shared_ptr<data::Dataset<data::MnistItem>> train = data::FashionMnist::train(o.data);
  train = std::make_shared<data::PartialDataset<data::MnistItem>>(train, 0, o.batches * o.batch);
  auto augmented = std::make_shared<data::RandomMapperDataset<data::MnistItem, data::LabeledImage>>(
      train, 7, [](data::MnistItem m, data::Rng& rng) {
        auto img = data::random_crop(data::mnist_image(m), 28, 28, 2, rng);
        img = data::random_horizontal_flip(std::move(img), 0.5, rng);
        img =
            data::normalize(std::move(img), {data::FashionMnist::mean}, {data::FashionMnist::std});
        return data::LabeledImage{std::move(img), m.label};
      });
  return data::DataLoaderBuilder(data::ImageBatcher{10})
      .batch_size(o.batch)
      .shuffle(42)
      .num_workers(1)
      .drop_last(true)
      .device(ad)
      .build(augmented);
}

optim::OneCycleLr schedule(std::size_t steps) {
  return optim::OneCycleLrConfig{4e-3, steps}.init();
}

double bare_ms(const Options& o, const Device& ad, const std::vector<data::ImageBatch>& batches) {
  ad.seed(2026);
  fashion::Cnn net = fashion::CnnConfig{}.init(ad);
  auto opt = optim::AdamWConfig{}.with_weight_decay(5e-4).init();
  auto sched = schedule(o.batches);
  double sink = 0;
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < batches.size(); ++i) {
    ad.seed(data::derive_seed(1, i));
    train::StepOutput out = net.train_step(batches[i]);
    sink += out.loss.into_scalar<double>();
    auto gp = optim::GradientsParams::from_grads(out.loss.backward(), net);
    net = opt.step(sched.step(), std::move(net), std::move(gp));
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EMBER_CHECK(std::isfinite(sink), "demo-bench: the bare loop's loss is not finite");
  return ms;
}

double learner_ms(const Options& o, const Device& ad, const std::string& dir) {
  ad.seed(2026);
  fashion::Cnn net = fashion::CnnConfig{}.init(ad);
  auto loader = demo_loader(o, ad);
  std::filesystem::remove_all(dir);
  auto learner = train::LearnerBuilder(dir)
                     .epochs(1)
                     .metric(train::LossMetric{})
                     .metric(train::AccuracyMetric{})
                     .metric(train::ItemsPerSecondMetric{})
                     .metric(train::EpochTimeMetric{})
                     .train_metric(std::make_unique<train::LearningRateMetric>())
                     .checkpoints({.every_epoch = false})
                     .pictures(false)
                     .dashboard(train::DashboardMode::None)
                     .seed(1)
                     .model_config(fashion::CnnConfig{}.to_json())
                     .build(std::move(net), optim::AdamWConfig{}.with_weight_decay(5e-4).init(),
                            schedule(o.batches));
  const auto t0 = Clock::now();
  learner.fit(loader);
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One run of the PyTorch script (one repetition); a negative value when it failed.
double torch_ms(const Options& o) {
  if (o.python.empty()) return -1;
  const std::string cmd = o.python + " " + o.torch_script + " --batches " +
                          std::to_string(o.batches) + " --reps 1 --data " + o.data + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char line[4096];
  double ms = -1;
  static bool said_version = false;
  while (std::fgets(line, sizeof line, p) != nullptr) {
    if (std::strncmp(line, "times_ms=", 9) == 0) {
      ms = std::atof(line + 9);
    } else if (std::strncmp(line, "torch ", 6) == 0) {
      if (!said_version) std::printf("  %s", line);
      said_version = true;
    } else {
      std::fprintf(stderr, "  torch: %s", line);
    }
  }
  pclose(p);
  return ms;
}

// The process's CPU time (user + system, every thread) in ms: on a shared machine the
// bare loop's CPU time per step moves far less with the load than its wall time.
double cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  const auto ms = [](const timeval& t) { return double(t.tv_sec) * 1e3 + double(t.tv_usec) / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const Device ad = Device::cpu().autodiff();
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("demo-bench-" + std::to_string(::getpid())))
          .string();
  std::vector<data::ImageBatch> batches;
  {
    auto loader = demo_loader(o, ad);
    for (auto& b : loader) batches.push_back(b);
  }
  std::printf("demo-bench: %zu batches of %zu, %zu repetitions, EMBER_NUM_THREADS=%s\n", o.batches,
              o.batch, o.reps,
              std::getenv("EMBER_NUM_THREADS") ? std::getenv("EMBER_NUM_THREADS") : "(default)");
  bare_ms(o, ad, batches);  // warm-up: the allocator's pools, the kernels' first calls
  std::vector<double> bare, bare_cpu, learner, torch;
  for (std::size_t r = 0; r < o.reps; ++r) {
    const double c0 = cpu_ms();
    bare.push_back(bare_ms(o, ad, batches));
    bare_cpu.push_back(cpu_ms() - c0);
    learner.push_back(o.learner ? learner_ms(o, ad, dir) : 0.0);
    const double t = torch_ms(o);
    if (t > 0) torch.push_back(t);
    std::printf(
        "  rep %zu: bare %.1f ms (CPU %.1f ms), learner %.1f ms, torch %s ms (per step: %.2f / "
        "%.2f)\n",
        r + 1, bare.back(), bare_cpu.back(), learner.back(),
        t > 0 ? std::to_string(t).c_str() : "-", bare.back() / double(o.batches),
        learner.back() / double(o.batches));
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  const double mb = median(bare), ml = median(learner);
  std::printf("median ms per step: bare %.2f, learner %.2f: the Learner and loader add %+.1f%%\n",
              mb / double(o.batches), ml / double(o.batches), 100.0 * (ml / mb - 1.0));
  std::printf("median CPU ms per step (all threads) of the bare loop: %.2f\n",
              median(bare_cpu) / double(o.batches));
  if (!torch.empty()) {
    const double mt = median(torch);
    std::printf("median ms per step: torch %.2f: learner / torch = %.2f\n", mt / double(o.batches),
                ml / mt);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "demo-bench: %s\n", e.what());
  return 1;
}
