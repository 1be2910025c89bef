// A tiny classification task for the Learner's tests: 4 Gaussian clusters in 8 dims,
// a 2-layer net with batch norm and dropout (so resume must restore buffers and the
// generator), loaders with shuffling and a random augmentation (so it must restore
// the loaders' positions).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <ember/data/data.hpp>
#include <ember/ember.hpp>
#include <ember/train/train.hpp>

namespace ember::train::testing {

struct Item {
  std::vector<float> x;
  std::int64_t y = 0;
};
struct Batch {
  Tensor<2> x;
  Tensor<1, Int> y;
};
struct TinyBatcher {
  Batch batch(std::vector<Item> items, const Device& dev) const {
    const std::size_t n = items.size(), d = items.front().x.size();
    std::vector<float> xs;
    std::vector<std::int64_t> ys;
    for (const auto& it : items) {
      xs.insert(xs.end(), it.x.begin(), it.x.end());
      ys.push_back(it.y);
    }
    return {Tensor<2>::from_data(TensorData::from(xs, Shape{n, d}), dev),
            Tensor<1, Int>::from_data(TensorData::from(ys, Shape{n}), dev)};
  }
};

inline constexpr std::size_t kFeatures = 8, kClasses = 4;

// `n` items: class i % 4, features a class centre plus noise (data::Rng, fixed).
inline std::shared_ptr<data::InMemoryDataset<Item>> tiny_dataset(std::size_t n, std::uint64_t seed,
                                                                 std::int64_t bad_label = -1) {
  data::Rng rng(seed);
  std::vector<Item> items;
  for (std::size_t i = 0; i < n; ++i) {
    Item it;
    it.y = std::int64_t(i % kClasses);
    for (std::size_t k = 0; k < kFeatures; ++k) {
      const double centre = (k % kClasses) == std::size_t(it.y) ? 1.5 : 0.0;
      it.x.push_back(float(centre + (rng.uniform() - 0.5)));
    }
    items.push_back(std::move(it));
  }
  if (bad_label >= 0) items[n / 2].y = bad_label;
  return std::make_shared<data::InMemoryDataset<Item>>(std::move(items));
}

// The training set with an augmentation drawn per (seed, epoch, index).
inline std::shared_ptr<data::Dataset<Item>> augmented(
    std::shared_ptr<data::InMemoryDataset<Item>> d) {
  return std::make_shared<data::RandomMapperDataset<Item, Item>>(
      d, 11, [](Item it, data::Rng& rng) {
        for (auto& v : it.x) v += float(0.1 * (rng.uniform() - 0.5));
        return it;
      });
}

struct TinyNet {
  nn::Linear fc1;
  nn::BatchNorm bn;
  nn::Dropout dropout;
  nn::Linear fc2;
  EMBER_MODULE(TinyNet, fc1, bn, dropout, fc2)

  Tensor<2> forward(const Tensor<2>& x) const {
    return fc2.forward(dropout.forward(activation::relu(bn.forward(fc1.forward(x)))));
  }
  StepOutput train_step(const Batch& b) const {
    auto logits = forward(b.x);
    auto loss = nn::loss::cross_entropy(logits, b.y);
    return {std::move(loss), logits.dyn(), b.y.dyn()};
  }
  StepOutput valid_step(const Batch& b) const { return train_step(b); }
};

inline TinyNet tiny_net(const Device& dev, std::uint64_t seed, std::size_t hidden = 16) {
  dev.seed(seed);
  return {nn::LinearConfig{kFeatures, hidden}.init(dev), nn::BatchNormConfig{hidden}.init(dev),
          nn::DropoutConfig{0.25}.init(), nn::LinearConfig{hidden, kClasses}.init(dev)};
}

inline auto train_loader(const Device& ad, std::size_t workers = 0) {
  return data::DataLoaderBuilder(TinyBatcher{})
      .batch_size(16)
      .shuffle(3)
      .num_workers(workers)
      .device(ad)
      .build(augmented(tiny_dataset(96, 1)));
}
inline auto valid_loader(const Device& dev) {
  return data::DataLoaderBuilder(TinyBatcher{})
      .batch_size(20)
      .device(dev)
      .build(tiny_dataset(40, 2));
}

// A fresh folder under the test temp dir.
inline std::string fresh_dir(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("ember-train-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p.string();
}

}  // namespace ember::train::testing
