// Reloads the model fashion_mnist saved (its config from the .ember file, then the
// weights), prints a few test images as ASCII art with the predicted and true labels, and
// measures the test accuracy again.
//
//   fashion_mnist_infer [--model PATH] [--data DIR] [--device cpu|cuda] [--show N]
//                       [--limit ITEMS]   (measure on the first ITEMS test images; 0: all)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fashion_cnn.hpp"

using namespace ember;

namespace {

// 28 x 28 pixels as 28 columns x 14 rows (two pixel rows a character row, averaged).
void print_ascii(const data::MnistItem& m) {
  static const char ramp[] = " .:-=+*#%@";
  for (std::size_t r = 0; r + 1 < m.height; r += 2) {
    std::string line = "    ";
    for (std::size_t c = 0; c < m.width; ++c) {
      const int v = (m.pixels[r * m.width + c] + m.pixels[(r + 1) * m.width + c]) / 2;
      line += ramp[v * 9 / 255];
    }
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path = "artifacts/fashion-mnist/model.ember";
  std::string data_dir = data::FashionMnist::default_dir();
  std::string device = "cpu";
  std::size_t show = 4;
  std::size_t limit = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "fashion_mnist_infer: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--model")
      model_path = v;
    else if (a == "--data")
      data_dir = v;
    else if (a == "--device")
      device = v;
    else if (a == "--show")
      show = std::size_t(std::atoi(v.c_str()));
    else if (a == "--limit")
      limit = std::size_t(std::atoll(v.c_str()));
    else {
      std::fprintf(stderr, "fashion_mnist_infer: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  try {
    const Device dev = Device::parse(device);
    const auto info = record::inspect(model_path);
    const auto config = fashion::CnnConfig::from_json(info.config);
    fashion::Cnn net = record::load(config.init(dev), model_path, dev);
    std::printf("fashion_mnist_infer: loaded %s (%zu params) on %s\n", model_path.c_str(),
                nn::num_params(net), dev.name().c_str());

    std::shared_ptr<data::Dataset<data::MnistItem>> test_set = data::FashionMnist::test(data_dir);
    const auto& names = data::FashionMnist::class_names();
    // A few images spread over the test set.
    for (std::size_t k = 0; k < show; ++k) {
      const std::size_t index = (k * 2477 + 13) % test_set->len();
      const data::MnistItem item = *test_set->get(index);
      const data::ImageBatch b = data::MnistBatcher{}.batch({item}, dev);
      const auto pred = net.forward(b.images)
                            .argmax_dim(1)
                            .to_data()
                            .convert(DType::I64)
                            .to_vector<std::int64_t>()[0];
      std::printf("\ntest image %zu: predicted %s, true %s%s\n", index, names[std::size_t(pred)],
                  names[item.label], std::size_t(pred) == item.label ? "" : "  (wrong)");
      print_ascii(item);
    }

    if (limit > 0 && limit < test_set->len())
      test_set = std::make_shared<data::PartialDataset<data::MnistItem>>(test_set, 0, limit);
    auto loader =
        data::DataLoaderBuilder(data::MnistBatcher{}).batch_size(500).device(dev).build(test_set);
    train::Evaluator ev;
    ev.metric(train::LossMetric{}).metric(train::AccuracyMetric{});
    const train::EvalResult r = ev.evaluate(net, loader);
    std::printf("\nfashion_mnist_infer: test accuracy %.2f%% (loss %.4f) on %zu images in %.1f s\n",
                100.0 * r.at("accuracy"), r.at("loss"), r.items, r.seconds);
  } catch (const Error& e) {
    std::fprintf(stderr, "fashion_mnist_infer: %s\n", e.what());
    return 1;
  }
  return 0;
}
