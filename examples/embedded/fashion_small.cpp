// The host side of the firmware example (docs/embedded.md): trains the small Fashion-MNIST
// CNN of fashion_cnn_small.hpp and saves it as .ember, and computes the predictions the
// firmware must reproduce.
//
//   fashion_small train  [--data DIR] [--out MODEL.ember] [--epochs N] [--seed S]
//   fashion_small export --model MODEL.ember [--data DIR] [--count N] --out INPUTS.bin
//                        [--weights WEIGHTS.bin]
//
// `train` made the committed examples/embedded/fashion_cnn_small.ember (the defaults; its
// metadata holds the test accuracy). `export` runs at build time: it loads the model with
// the same nn code the firmware runs, classifies the first N test images on the host Cpu
// and writes them with the host's predictions and logits into one blob that the firmware
// links (layout in write_inputs below). --weights also writes the model's float tensors as
// raw f32 in a fixed order, for the plain-loop firmware that measures the framework's cost
// (tests/embedded/firmware_model_plain.cpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ember/data/data.hpp"
#include "ember/ember.hpp"
#include "fashion_cnn_small.hpp"

using namespace ember;

namespace {

static_assert(fashion_small::kMean == data::FashionMnist::mean &&
                  fashion_small::kStd == data::FashionMnist::std,
              "the firmware normalizes as the training batcher does");

struct Options {
  std::string command, data_dir = data::FashionMnist::default_dir(), model, out, weights;
  std::size_t epochs = 2, count = 8, seed = 2026, batch = 64;
  double lr = 3e-3;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "fashion_small: %s\nusage: fashion_small train [--data DIR] [--out MODEL.ember] "
               "[--epochs N] [--seed S]\n       fashion_small export --model MODEL.ember "
               "[--data DIR] [--count N] --out INPUTS.bin [--weights WEIGHTS.bin]\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  if (argc < 2) usage("no command");
  o.command = argv[1];
  if (o.command != "train" && o.command != "export") usage("unknown command '" + o.command + "'");
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string v = argv[++i];
    auto count = [&] {
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < 1) usage(a + " wants a positive integer");
      return std::size_t(n);
    };
    if (a == "--data")
      o.data_dir = v;
    else if (a == "--out")
      o.out = v;
    else if (a == "--weights")
      o.weights = v;
    else if (a == "--model")
      o.model = v;
    else if (a == "--epochs")
      o.epochs = count();
    else if (a == "--seed")
      o.seed = count();
    else if (a == "--count")
      o.count = count();
    else
      usage("unknown argument '" + a + "'");
  }
  if (o.command == "export" && (o.model.empty() || o.out.empty()))
    usage("export needs --model and --out");
  if (o.out.empty()) o.out = "fashion_cnn_small.ember";
  return o;
}

// The logits of n images (pixels 0..255, n * 28 * 28 bytes) on dev.
Tensor<2> classify(const fashion_small::Cnn& net, const std::uint8_t* pixels, std::size_t n,
                   const Device& dev) {
  const std::size_t px = fashion_small::kHeight * fashion_small::kWidth;
  std::vector<float> x(n * px);
  fashion_small::normalize(pixels, n * px, x.data());
  return net.forward(Tensor<4>::from_data(
      TensorData::from(x, Shape{n, 1, fashion_small::kHeight, fashion_small::kWidth}), dev));
}

double test_accuracy(const fashion_small::Cnn& net, const data::MnistDataset& test,
                     const Device& dev) {
  std::size_t right = 0;
  const std::size_t chunk = 500, px = fashion_small::kHeight * fashion_small::kWidth;
  std::vector<std::uint8_t> pixels(chunk * px);
  for (std::size_t first = 0; first < test.len(); first += chunk) {
    const std::size_t n = std::min(chunk, test.len() - first);
    std::vector<std::uint8_t> labels(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto item = *test.get(first + i);
      std::memcpy(pixels.data() + i * px, item.pixels.data(), px);
      labels[i] = item.label;
    }
    const auto pred =
        classify(net, pixels.data(), n, dev).argmax_dim(1).to_data().to_vector<std::int64_t>();
    for (std::size_t i = 0; i < n; ++i) right += pred[i] == labels[i];
  }
  return double(right) / double(test.len());
}

int train_model(const Options& o) {
  const Device dev = Device::cpu(), ad = dev.autodiff();
  auto train_set = data::FashionMnist::train(o.data_dir);
  auto test_set = data::FashionMnist::test(o.data_dir);
  auto loader = data::DataLoaderBuilder(data::MnistBatcher{})
                    .batch_size(o.batch)
                    .shuffle(o.seed)
                    .drop_last(true)
                    .device(ad)
                    .build(train_set);
  const fashion_small::CnnConfig config = fashion_small::small_config();
  ad.seed(o.seed);
  fashion_small::Cnn net = config.init(ad);
  std::printf("%s", nn::summary(net).c_str());
  auto opt = optim::AdamConfig{}.init();
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t steps = o.epochs * loader.num_batches();
  std::size_t step = 0;
  for (std::size_t epoch = 0; epoch < o.epochs; ++epoch) {
    double loss_sum = 0;
    std::size_t batches = 0;
    for (auto& b : loader) {
      auto loss = nn::loss::cross_entropy(net.forward(b.images), b.labels);
      loss_sum += loss.into_scalar<float>();
      ++batches;
      auto gp = optim::GradientsParams::from_grads(loss.backward(), net);
      // Linear decay to a tenth of the rate over the run.
      const double lr = o.lr * (1.0 - 0.9 * double(step++) / double(steps));
      net = opt.step(lr, std::move(net), std::move(gp));
    }
    std::printf("fashion_small: epoch %zu: mean loss %.4f\n", epoch + 1,
                loss_sum / double(batches));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const fashion_small::Cnn trained = net.valid();
  const double acc = test_accuracy(trained, *test_set, dev);
  char acc_text[32];
  std::snprintf(acc_text, sizeof acc_text, "%.4f", acc);
  record::SaveOptions so;
  so.config = config.to_json();
  so.metadata = {{"test_accuracy", acc_text},
                 {"trained_by", "examples/embedded/fashion_small.cpp train"},
                 {"epochs", std::to_string(o.epochs)},
                 {"seed", std::to_string(o.seed)}};
  record::save(trained, o.out, so);
  std::printf(
      "fashion_small: %zu parameters, trained in %.1f s, test accuracy %.2f%% (10000 "
      "images); saved %s\n",
      nn::num_params(trained), secs, 100.0 * acc, o.out.c_str());
  return 0;
}

// The blob the firmware links, little-endian u32 words and bytes:
//   "EMBI", count, height, width, classes,
//   pixels   u8 [count * height * width] (padded to 4 bytes)
//   labels   u8 [count]                  (padded to 4 bytes)
//   predicted i32 [count]   the host's argmax
//   logits    f32 [count * classes]  the host's logits
void write_inputs(const std::string& path, const std::vector<std::uint8_t>& pixels,
                  const std::vector<std::uint8_t>& labels, const std::vector<std::int64_t>& pred,
                  const std::vector<float>& logits) {
  std::vector<char> out;
  auto put = [&](const void* p, std::size_t n) {
    out.insert(out.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
    while (out.size() % 4 != 0) out.push_back(0);
  };
  auto u32 = [&](std::uint32_t v) { put(&v, 4); };
  put("EMBI", 4);
  u32(std::uint32_t(labels.size()));
  u32(fashion_small::kHeight);
  u32(fashion_small::kWidth);
  u32(fashion_small::kClasses);
  put(pixels.data(), pixels.size());
  put(labels.data(), labels.size());
  for (std::int64_t p : pred) u32(std::uint32_t(p));
  put(logits.data(), logits.size() * sizeof(float));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(out.data(), std::streamsize(out.size()));
  f.close();
  EMBER_CHECK(f.good(), "fashion_small export: writing '" + path + "' failed");
}

// The float tensors the plain-loop firmware reads, in its order, as raw f32.
void write_weights(const std::string& model, const std::string& path) {
  static const char* const kOrder[] = {
      "conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
      "conv2.weight", "conv2.bias", "bn2.weight", "bn2.bias", "bn2.running_mean", "bn2.running_var",
      "fc1.weight",   "fc1.bias",   "fc2.weight", "fc2.bias"};
  const auto tensors = record::load_tensors(model, Device::cpu());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  for (const char* key : kOrder) {
    const auto it = std::find_if(tensors.begin(), tensors.end(),
                                 [&](const record::NamedTensor& t) { return t.key == key; });
    EMBER_CHECK(it != tensors.end(),
                "fashion_small export: the model has no '" + std::string(key) + "'");
    const auto v = it->tensor.to_data().convert(DType::F32).to_vector<float>();
    f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  }
  f.close();
  EMBER_CHECK(f.good(), "fashion_small export: writing '" + path + "' failed");
}

int export_inputs(const Options& o) {
  const Device dev = Device::cpu();
  const auto info = record::inspect(o.model);
  const auto config = fashion_small::CnnConfig::from_json(info.config);
  const fashion_small::Cnn net = record::load(config.init(dev), o.model, dev);
  auto test_set = data::FashionMnist::test(o.data_dir);
  EMBER_CHECK(o.count <= test_set->len(), "fashion_small export: --count exceeds the test set");
  const std::size_t px = fashion_small::kHeight * fashion_small::kWidth;
  std::vector<std::uint8_t> pixels(o.count * px), labels(o.count);
  for (std::size_t i = 0; i < o.count; ++i) {
    const auto item = *test_set->get(i);
    std::memcpy(pixels.data() + i * px, item.pixels.data(), px);
    labels[i] = item.label;
  }
  const auto logits = classify(net, pixels.data(), o.count, dev);
  const auto pred = logits.argmax_dim(1).to_data().to_vector<std::int64_t>();
  // Host time per image, one image a call as the firmware runs it (median of 15 runs).
  std::vector<double> times;
  for (int r = 0; r < 15; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)classify(net, pixels.data(), 1, dev).to_data();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  write_inputs(o.out, pixels, labels, pred, logits.to_data().to_vector<float>());
  if (!o.weights.empty()) write_weights(o.model, o.weights);
  std::printf("fashion_small export: %zu test images to %s; host predictions", o.count,
              o.out.c_str());
  for (auto p : pred) std::printf(" %lld", static_cast<long long>(p));
  std::printf(" (labels");
  for (auto l : labels) std::printf(" %d", int(l));
  std::printf("); host Cpu %.1f us per image (median)\n", 1e6 * times[times.size() / 2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    return o.command == "train" ? train_model(o) : export_inputs(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "fashion_small: %s\n", e.what());
    return 1;
  }
}
