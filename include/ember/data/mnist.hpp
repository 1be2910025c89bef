// MNIST-format datasets (an IDX file of u8 images [N, H, W] and one of u8 labels [N]) on
// the IDX reader, and Fashion-MNIST's files as Debian's dataset-fashion-mnist installs
// them. Items keep the raw bytes, so reading one costs a copy of H * W bytes; a
// MnistBatcher turns them into normalised tensors, or mnist_image() into an Image for the
// transforms.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/base/tensor_data.hpp"
#include "ember/data/dataset.hpp"
#include "ember/data/image.hpp"

namespace ember::data {

struct MnistItem {
  std::vector<std::uint8_t> pixels;  // height * width bytes, row-major
  std::size_t height = 0, width = 0;
  std::uint8_t label = 0;
};

// The item's pixels as a one-channel Image in [0, 1].
Image mnist_image(const MnistItem& item);

class MnistDataset : public Dataset<MnistItem> {
 public:
  // Reads both files whole. Throws ember::Error naming the file when one is missing or
  // malformed, when their counts differ, or when a label is not below num_classes.
  MnistDataset(const std::string& images_path, const std::string& labels_path,
               std::size_t num_classes = 10);

  std::optional<MnistItem> get(std::size_t index) const override;
  std::size_t len() const override { return count_; }
  std::size_t height() const { return height_; }
  std::size_t width() const { return width_; }
  std::size_t num_classes() const { return num_classes_; }

 private:
  TensorData images_, labels_;
  std::size_t count_ = 0, height_ = 0, width_ = 0, num_classes_ = 0;
};

// Fashion-MNIST: 60000 training and 10000 test images of 28 x 28, ten classes.
struct FashionMnist {
  // $EMBER_FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist (Debian's package).
  static std::string default_dir();
  static std::shared_ptr<MnistDataset> train(const std::string& dir = default_dir());
  static std::shared_ptr<MnistDataset> test(const std::string& dir = default_dir());
  static const std::array<const char*, 10>& class_names();
  // The training images' mean and standard deviation (of pixels scaled to [0, 1]).
  static constexpr float mean = 0.2860f, std = 0.3530f;
};

// MnistItems to an ImageBatch: images [N, 1, H, W] as (pixel / 255 - mean) / std, labels
// [N] (i64). The defaults are Fashion-MNIST's statistics.
struct MnistBatcher {
  float mean = FashionMnist::mean, std = FashionMnist::std;
  ImageBatch batch(std::vector<MnistItem> items, const Device& device) const;
};

}  // namespace ember::data
