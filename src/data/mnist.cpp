#include "ember/data/mnist.hpp"

#include <cstdlib>
#include <cstring>

#include "ember/base/error.hpp"
#include "ember/data/idx.hpp"

namespace ember::data {

Image mnist_image(const MnistItem& item) {
  return image_from_bytes(item.pixels, item.height, item.width, 1);
}

MnistDataset::MnistDataset(const std::string& images_path, const std::string& labels_path,
                           std::size_t num_classes)
    : images_(load_idx(images_path)), labels_(load_idx(labels_path)), num_classes_(num_classes) {
  EMBER_CHECK(images_.dtype() == DType::U8 && images_.shape().rank() == 3,
              "MnistDataset: '" + images_path + "' holds " + name(images_.dtype()) + " " +
                  images_.shape().to_string() + ", expected u8 images [N, H, W]");
  EMBER_CHECK(labels_.dtype() == DType::U8 && labels_.shape().rank() == 1,
              "MnistDataset: '" + labels_path + "' holds " + name(labels_.dtype()) + " " +
                  labels_.shape().to_string() + ", expected u8 labels [N]");
  count_ = images_.shape()[0];
  height_ = images_.shape()[1];
  width_ = images_.shape()[2];
  EMBER_CHECK(labels_.shape()[0] == count_, "MnistDataset: '" + images_path + "' holds " +
                                                std::to_string(count_) + " images but '" +
                                                labels_path + "' holds " +
                                                std::to_string(labels_.shape()[0]) + " labels");
  const auto* labels = static_cast<const std::uint8_t*>(labels_.data());
  for (std::size_t i = 0; i < count_; ++i) {
    EMBER_CHECK(labels[i] < num_classes_, "MnistDataset: '" + labels_path + "': label " +
                                              std::to_string(labels[i]) + " of item " +
                                              std::to_string(i) + " is outside the " +
                                              std::to_string(num_classes_) + " classes");
  }
}

std::optional<MnistItem> MnistDataset::get(std::size_t index) const {
  if (index >= count_) return std::nullopt;
  const std::size_t n = height_ * width_;
  const auto* px = static_cast<const std::uint8_t*>(images_.data()) + index * n;
  MnistItem item;
  item.pixels.assign(px, px + n);
  item.height = height_;
  item.width = width_;
  item.label = static_cast<const std::uint8_t*>(labels_.data())[index];
  return item;
}

std::string FashionMnist::default_dir() {
  const char* env = std::getenv("EMBER_FASHION_MNIST_DIR");
  return env != nullptr && *env != '\0' ? env : "/usr/share/datasets/fashion-mnist";
}

std::shared_ptr<MnistDataset> FashionMnist::train(const std::string& dir) {
  return std::make_shared<MnistDataset>(dir + "/train-images-idx3-ubyte.gz",
                                        dir + "/train-labels-idx1-ubyte.gz");
}

std::shared_ptr<MnistDataset> FashionMnist::test(const std::string& dir) {
  return std::make_shared<MnistDataset>(dir + "/t10k-images-idx3-ubyte.gz",
                                        dir + "/t10k-labels-idx1-ubyte.gz");
}

const std::array<const char*, 10>& FashionMnist::class_names() {
  static const std::array<const char*, 10> names{"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                 "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                 "Bag",         "Ankle boot"};
  return names;
}

ImageBatch MnistBatcher::batch(std::vector<MnistItem> items, const Device& device) const {
  EMBER_CHECK(!items.empty(), "MnistBatcher: no items");
  EMBER_CHECK(std > 0.0f, "MnistBatcher: the standard deviation must be positive");
  const std::size_t h = items[0].height, w = items[0].width, n = h * w;
  // Pixels go straight into the TensorData's bytes (one host buffer per batch), a row of
  // floats at a time.
  std::vector<std::byte> images(items.size() * n * sizeof(float));
  std::vector<float> row(n);
  std::vector<std::int64_t> labels(items.size());
  // One multiply-add per pixel: (p / 255 - mean) / std = p * a + b.
  const float a = 1.0f / (255.0f * std), b = -mean / std;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const MnistItem& it = items[i];
    EMBER_CHECK(it.height == h && it.width == w && it.pixels.size() == n,
                "MnistBatcher: item " + std::to_string(i) + " is " + std::to_string(it.height) +
                    " x " + std::to_string(it.width) + " but item 0 is " + std::to_string(h) +
                    " x " + std::to_string(w));
    for (std::size_t k = 0; k < n; ++k) row[k] = float(it.pixels[k]) * a + b;
    std::memcpy(images.data() + i * n * sizeof(float), row.data(), n * sizeof(float));
    labels[i] = it.label;
  }
  return {Tensor<4>::from_data(
              TensorData(std::move(images), Shape{items.size(), 1, h, w}, DType::F32), device),
          Tensor<1, Int>::from_data(TensorData::from(labels), device)};
}

}  // namespace ember::data
