// Fashion-MNIST with a CNN trained by the Learner: AdamW with a one-cycle schedule, light
// augmentation (horizontal flips; random crops with --crop-padding), the dashboard, checkpoints
// and metric logs in the artifact folder, then the model and its config saved for
// fashion_mnist_infer.
//
//   fashion_mnist [--epochs N] [--device cpu|cuda] [--data DIR] [--out DIR] [--batch N]
//                 [--lr MAX_LR] [--workers K] [--limit ITEMS] [--test-limit ITEMS]
//                 [--resume] [--seed S]
//                 [--dropout P] [--weight-decay W] [--crop-padding N] [--flip P]
//                 [--dashboard auto|terminal|plain|none]
//
// The data are Debian's dataset-fashion-mnist files (/usr/share/datasets/fashion-mnist by
// default). The first 2000 test images serve as the validation split (nothing is selected
// on them: the final model is the one saved); the Evaluator then measures the whole test
// set. Ctrl-C stops after the current step with a checkpoint;
// --resume continues from it.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fashion_cnn.hpp"

using namespace ember;

namespace {

struct Options {
  std::size_t epochs = 7;
  std::string device = "cpu";
  std::string data_dir = data::FashionMnist::default_dir();
  std::string out = "artifacts/fashion-mnist";
  std::size_t batch = 128;
  double lr = 4e-3;
  std::size_t workers = 1;
  std::size_t limit = 0;       // 0: every training image
  std::size_t test_limit = 0;  // 0: every test image (quick runs on slow devices: fewer)
  bool resume = false;
  std::string dashboard = "auto";
  double dropout = fashion::CnnConfig{}.dropout;
  double weight_decay = 5e-4;
  // No random crop by default: with seven epochs it slowed learning more than it
  // regularised (docs/train.md, "The demo": 91.93% with padding 2, 92.39% without).
  std::size_t crop_padding = 0;  // 0: no random crop
  double flip = 0.5;             // horizontal flip probability
  std::size_t seed = 2026;       // the initial weights; the order and augmentations follow
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "fashion_mnist: %s\nusage: fashion_mnist [--epochs N] [--device cpu|cuda] [--data DIR] "
      "[--out DIR] [--batch N] [--lr MAX_LR] [--workers K] [--limit ITEMS] [--test-limit ITEMS] "
      "[--resume] "
      "[--seed S] [--dropout P] [--weight-decay W] [--crop-padding N] [--flip P] "
      "[--dashboard auto|terminal|plain|none]\n",
      why);
  std::exit(2);
}

std::size_t parse_count(const char* s, const char* flag, bool allow_zero) {
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v < (allow_zero ? 0 : 1))
    usage((std::string(flag) + " wants a " + (allow_zero ? "non-negative" : "positive") +
           " integer, got '" + s + "'")
              .c_str());
  return std::size_t(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--epochs")
      o.epochs = parse_count(next(), "--epochs", false);
    else if (a == "--device")
      o.device = next();
    else if (a == "--data")
      o.data_dir = next();
    else if (a == "--out")
      o.out = next();
    else if (a == "--batch")
      o.batch = parse_count(next(), "--batch", false);
    else if (a == "--lr")
      o.lr = std::atof(next());
    else if (a == "--workers")
      o.workers = parse_count(next(), "--workers", true);
    else if (a == "--limit")
      o.limit = parse_count(next(), "--limit", true);
    else if (a == "--test-limit")
      o.test_limit = parse_count(next(), "--test-limit", true);
    else if (a == "--resume")
      o.resume = true;
    else if (a == "--dashboard")
      o.dashboard = next();
    else if (a == "--dropout")
      o.dropout = std::atof(next());
    else if (a == "--weight-decay")
      o.weight_decay = std::atof(next());
    else if (a == "--crop-padding")
      o.crop_padding = parse_count(next(), "--crop-padding", true);
    else if (a == "--flip")
      o.flip = std::atof(next());
    else if (a == "--seed")
      o.seed = parse_count(next(), "--seed", true);
    else
      usage(("unknown argument '" + a + "'").c_str());
  }
  return o;
}

train::DashboardMode dashboard_mode(const std::string& s) {
  if (s == "auto") return train::DashboardMode::Auto;
  if (s == "terminal") return train::DashboardMode::Terminal;
  if (s == "plain") return train::DashboardMode::Plain;
  if (s == "none") return train::DashboardMode::None;
  usage(("--dashboard takes auto, terminal, plain or none, not '" + s + "'").c_str());
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    const Device dev = Device::parse(o.device);  // "cuda" selects the GPU (cuda:0)
    const Device ad = dev.autodiff();
    std::printf("fashion_mnist: training on %s (available: ", dev.name().c_str());
    for (const auto& d : Device::available()) std::printf("%s ", d.c_str());
    std::printf(")\n");

    // Every seed of the run moves with --seed (the defaults are those of the measurements).
    const std::uint64_t seed_offset = std::uint64_t(o.seed) - 2026;
    std::shared_ptr<data::Dataset<data::MnistItem>> train_set =
        data::FashionMnist::train(o.data_dir);
    std::shared_ptr<data::Dataset<data::MnistItem>> test_set = data::FashionMnist::test(o.data_dir);
    if (o.test_limit > 0 && o.test_limit < test_set->len())
      test_set = std::make_shared<data::PartialDataset<data::MnistItem>>(test_set, 0, o.test_limit);
    if (o.limit > 0 && o.limit < train_set->len())
      train_set = std::make_shared<data::PartialDataset<data::MnistItem>>(train_set, 0, o.limit);
    auto augmented =
        std::make_shared<data::RandomMapperDataset<data::MnistItem, data::LabeledImage>>(
            train_set, /*seed=*/7 + seed_offset, [&o](data::MnistItem m, data::Rng& rng) {
              auto img = data::mnist_image(m);
              if (o.crop_padding > 0)
                img = data::random_crop(std::move(img), 28, 28, o.crop_padding, rng);
              if (o.flip > 0) img = data::random_horizontal_flip(std::move(img), o.flip, rng);
              img = data::normalize(std::move(img), {data::FashionMnist::mean},
                                    {data::FashionMnist::std});
              return data::LabeledImage{std::move(img), m.label};
            });
    auto train_loader = data::DataLoaderBuilder(data::ImageBatcher{10})
                            .batch_size(o.batch)
                            .shuffle(42 + seed_offset)
                            .num_workers(o.workers)
                            .drop_last(true)
                            .device(ad)
                            .build(augmented);
    // Each epoch validates on the first 2000 test images (a progress signal that costs
    // little); the test accuracy reported at the end is the Evaluator's, on all 10000.
    auto valid_set = std::make_shared<data::PartialDataset<data::MnistItem>>(
        test_set, 0, std::min<std::size_t>(2000, test_set->len()));
    auto valid_loader = data::DataLoaderBuilder(data::MnistBatcher{})
                            .batch_size(500)
                            .num_workers(o.workers)
                            .device(dev)
                            .build(valid_set);
    std::printf("fashion_mnist: %zu training images (%zu batches of %zu), %zu test images\n",
                train_set->len(), train_loader.num_batches(), o.batch, test_set->len());

    const fashion::CnnConfig config = fashion::CnnConfig{}.with_dropout(o.dropout);
    ad.seed(o.seed);
    fashion::Cnn net = config.init(ad);
    std::printf("%s", nn::summary(net).c_str());

    const std::size_t total_steps = o.epochs * train_loader.num_batches();
    auto learner =
        train::LearnerBuilder(o.out)
            .epochs(o.epochs)
            .metric(train::LossMetric{})
            .metric(train::AccuracyMetric{})
            .metric(train::ItemsPerSecondMetric{})
            .metric(train::EpochTimeMetric{})
            .train_metric(std::make_unique<train::LearningRateMetric>())
            .valid_metric(std::make_unique<train::ConfusionMatrix>())
            .class_names({data::FashionMnist::class_names().begin(),
                          data::FashionMnist::class_names().end()})
            .checkpoints({.keep_last = 2, .best_metric = "accuracy"})
            .dashboard(dashboard_mode(o.dashboard), /*plain_interval_seconds=*/10.0)
            .dashboard_curves({"loss", "accuracy"})
            .seed(1 + seed_offset)
            .resume(o.resume)
            .model_config(config.to_json())
            .build(std::move(net), optim::AdamWConfig{}.with_weight_decay(o.weight_decay).init(),
                   optim::OneCycleLrConfig{o.lr, total_steps}.init());

    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    const train::Summary s = learner.fit(train_loader, valid_loader);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = cpu_seconds() - c0;
    std::printf("%s", s.to_string().c_str());
    std::printf("fashion_mnist: %.1f s wall, %.1f s CPU (%.2f cores busy on average)\n", wall, cpu,
                wall > 0 ? cpu / wall : 0.0);
    if (s.outcome == train::Summary::Outcome::Interrupted) {
      std::printf("fashion_mnist: interrupted; run again with --resume to continue\n");
      return 130;
    }
    auto test_loader = data::DataLoaderBuilder(data::MnistBatcher{})
                           .batch_size(500)
                           .num_workers(o.workers)
                           .device(dev)
                           .build(test_set);
    train::Evaluator ev;
    ev.metric(train::LossMetric{}).metric(train::AccuracyMetric{});
    const train::EvalResult r = ev.evaluate(learner.model(), test_loader);
    std::printf(
        "fashion_mnist: test accuracy %.2f%% (loss %.4f, %zu images); the model is %s "
        "(config %s/config.json)\n",
        100.0 * r.at("accuracy"), r.at("loss"), r.items, s.model_path.c_str(), o.out.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
  return 0;
}
