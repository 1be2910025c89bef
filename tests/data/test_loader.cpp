// The DataLoader: batch composition, shuffling per epoch, the same batches whatever the
// number of workers (Note [Loader determinism]), resuming from a saved state, tensors on
// the device, and errors raised on worker threads reaching the consumer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include <ember/data/data.hpp>
#include <ember/ember.hpp>

#include "data/expect_error.hpp"

using namespace ember;
using ember::data::testing::expect_error;
using namespace ember::data;

namespace {

struct VectorBatcher {
  std::vector<int> batch(std::vector<int> items, const Device&) const { return items; }
};
static_assert(Batcher<VectorBatcher, int>);

std::shared_ptr<InMemoryDataset<int>> iota_dataset(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return std::make_shared<InMemoryDataset<int>>(v);
}

// Items that take a pseudo-random time to read, so that workers finish out of order.
class SlowDataset : public Dataset<int> {
 public:
  explicit SlowDataset(int n) : n_(std::size_t(n)) {}
  std::optional<int> get(std::size_t i) const override {
    if (i >= n_) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::microseconds((i * 7919) % 300));
    return int(i);
  }
  std::size_t len() const override { return n_; }

 private:
  std::size_t n_;
};

template <class L>
std::vector<std::vector<int>> one_epoch(L& loader) {
  std::vector<std::vector<int>> out;
  for (auto& b : loader) out.push_back(b);
  return out;
}

}  // namespace

TEST(DataLoader, BatchesInOrderWithoutShuffle) {
  auto loader = DataLoaderBuilder(VectorBatcher{}).batch_size(4).build(iota_dataset(10));
  EXPECT_EQ(loader.num_batches(), 3u);
  EXPECT_EQ(loader.num_items(), 10u);
  EXPECT_EQ(one_epoch(loader), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  // The next loop is the next epoch, the same without shuffle.
  EXPECT_EQ(loader.state(), (LoaderState{1, 0}));
  EXPECT_EQ(one_epoch(loader).size(), 3u);
  EXPECT_EQ(loader.state(), (LoaderState{2, 0}));
}

TEST(DataLoader, DropLast) {
  auto loader =
      DataLoaderBuilder(VectorBatcher{}).batch_size(4).drop_last(true).build(iota_dataset(10));
  EXPECT_EQ(loader.num_batches(), 2u);
  EXPECT_EQ(one_epoch(loader), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

TEST(DataLoader, ShuffleCoversEveryItemOnceAndChangesPerEpoch) {
  auto loader =
      DataLoaderBuilder(VectorBatcher{}).batch_size(7).shuffle(42).build(iota_dataset(100));
  std::vector<std::vector<int>> flat;
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<int> all;
    for (auto& b : loader) {
      EXPECT_LE(b.size(), 7u);
      all.insert(all.end(), b.begin(), b.end());
    }
    // The epoch's order is the permutation drawn from derive_seed(seed, epoch).
    const auto order = permutation(100, derive_seed(42, std::uint64_t(epoch)));
    EXPECT_EQ(all, std::vector<int>(order.begin(), order.end()));
    std::vector<int> sorted = all;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> expect(100);
    std::iota(expect.begin(), expect.end(), 0);
    EXPECT_EQ(sorted, expect);
    flat.push_back(all);
  }
  EXPECT_NE(flat[0], flat[1]);
  EXPECT_NE(flat[1], flat[2]);
}

TEST(DataLoader, SameBatchesForZeroOneAndThreeWorkers) {
  // A slow dataset (workers finish out of order) under a random augmentation, shuffled.
  auto make = [](std::size_t workers) {
    auto slow = std::make_shared<SlowDataset>(203);
    auto augmented = std::make_shared<RandomMapperDataset<int, int>>(
        slow, 17, [](int v, Rng& rng) { return v * 1000 + int(rng.below(1000)); });
    return DataLoaderBuilder(VectorBatcher{})
        .batch_size(8)
        .shuffle(5)
        .num_workers(workers)
        .build(augmented);
  };
  auto l0 = make(0), l1 = make(1), l3 = make(3);
  for (int epoch = 0; epoch < 3; ++epoch) {
    const auto b0 = one_epoch(l0);
    EXPECT_EQ(b0.size(), 26u);
    EXPECT_EQ(one_epoch(l1), b0) << "epoch " << epoch;
    EXPECT_EQ(one_epoch(l3), b0) << "epoch " << epoch;
  }
}

TEST(DataLoader, ResumesFromASavedStateMidEpoch) {
  auto make = [] {
    return DataLoaderBuilder(VectorBatcher{})
        .batch_size(5)
        .shuffle(9)
        .num_workers(2)
        .build(iota_dataset(33));
  };
  // Uninterrupted: two epochs.
  auto full = make();
  auto expect = one_epoch(full);
  const auto second = one_epoch(full);
  expect.insert(expect.end(), second.begin(), second.end());

  // Interrupted after 3 batches of epoch 0; the state is carried to a fresh loader.
  auto first = make();
  std::vector<std::vector<int>> got;
  LoaderState saved;
  for (auto& b : first) {
    got.push_back(b);
    if (got.size() == 3) {
      saved = first.state();
      break;
    }
  }
  EXPECT_EQ(saved, (LoaderState{0, 3}));
  auto resumed = make();
  resumed.restore(saved);
  for (int e = 0; e < 2 && got.size() < expect.size(); ++e) {
    for (auto& b : resumed) got.push_back(b);
  }
  EXPECT_EQ(got, expect);
  EXPECT_EQ(resumed.state(), (LoaderState{2, 0}));

  expect_error([&] { resumed.restore({0, 8}); }, "batch 8 lies beyond the 7 batches");
}

TEST(DataLoader, LeavingEarlyStopsTheWorkers) {
  auto loader = DataLoaderBuilder(VectorBatcher{})
                    .batch_size(1)
                    .num_workers(3)
                    .prefetch(4)
                    .build(std::make_shared<SlowDataset>(500));
  int seen = 0;
  for (auto& b : loader) {
    (void)b;
    if (++seen == 2) break;
  }
  // The loop left with workers mid-task; the loader continues where it stopped.
  EXPECT_EQ(loader.state(), (LoaderState{0, 2}));
  auto it = loader.begin();
  EXPECT_EQ(*it, std::vector<int>{2});
}

TEST(DataLoader, BatchesAreTensorsOnTheDevice) {
  struct TensorBatcher {
    Tensor<1, Int> batch(std::vector<int> items, const Device& dev) const {
      std::vector<std::int64_t> v(items.begin(), items.end());
      return Tensor<1, Int>::from_data(TensorData::from(v), dev);
    }
  };
  const Device dev = Device::cpu();
  auto loader = DataLoaderBuilder(TensorBatcher{})
                    .batch_size(3)
                    .num_workers(2)
                    .device(dev)
                    .build(iota_dataset(7));
  std::vector<std::vector<std::int64_t>> got;
  for (auto& t : loader) {
    EXPECT_TRUE(t.device() == dev);
    got.push_back(t.to_data().to_vector<std::int64_t>());
  }
  EXPECT_EQ(got, (std::vector<std::vector<std::int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}}));
}

TEST(DataLoader, BadInput) {
  expect_error([] { DataLoaderBuilder(VectorBatcher{}).batch_size(0); },
               "batch size must be positive");
  expect_error([] { DataLoaderBuilder(VectorBatcher{}).build(iota_dataset(0)); },
               "the dataset is empty");
  expect_error(
      [] { DataLoaderBuilder(VectorBatcher{}).batch_size(8).drop_last().build(iota_dataset(5)); },
      "drop_last leaves no batch: 5 items, batch size 8");
  expect_error([] { DataLoaderBuilder(VectorBatcher{}).build(DatasetPtr<int>{}); }, "null");

  // A dataset that reports more items than it has: the error is raised on a worker and
  // reaches the loop; the loader's position stays at the failing batch.
  class Lying : public Dataset<int> {
   public:
    std::optional<int> get(std::size_t i) const override {
      return i < 5 ? std::optional<int>(int(i)) : std::nullopt;
    }
    std::size_t len() const override { return 9; }
  };
  for (std::size_t workers : {0u, 2u}) {
    auto loader = DataLoaderBuilder(VectorBatcher{})
                      .batch_size(3)
                      .num_workers(workers)
                      .build(std::make_shared<Lying>());
    std::size_t batches = 0;
    expect_error(
        [&] {
          for (auto& b : loader) {
            (void)b;
            ++batches;
          }
        },
        "the dataset has no item 5 though its len() is 9");
    EXPECT_EQ(batches, 1u);
  }

  // A batcher's own error reaches the loop too.
  struct Throwing {
    int batch(std::vector<int> items, const Device&) const {
      EMBER_CHECK(items.front() < 4, "Throwing: item " + std::to_string(items.front()));
      return items.front();
    }
  };
  auto loader = DataLoaderBuilder(Throwing{}).batch_size(2).num_workers(3).build(iota_dataset(10));
  expect_error(
      [&] {
        for (auto& b : loader) (void)b;
      },
      "Throwing: item 4");
}

TEST(DataLoader, ALaterBeginRetiresEarlierIterators) {
  // Over an epoch-dependent dataset, with workers still prefetching for the first
  // iterator when the second begins (the second must stop them before set_epoch).
  auto augmented = std::make_shared<RandomMapperDataset<int, int>>(
      std::make_shared<SlowDataset>(60), 4, [](int v, Rng&) { return v; });
  auto loader =
      DataLoaderBuilder(VectorBatcher{}).batch_size(2).num_workers(3).prefetch(6).build(augmented);
  auto first = loader.begin();
  EXPECT_EQ(*first, (std::vector<int>{0, 1}));
  auto second = loader.begin();  // resumes at batch 1
  EXPECT_EQ(*second, (std::vector<int>{2, 3}));
  expect_error([&] { ++first; }, "used after a later begin() or restore() retired it");
  ++second;
  EXPECT_EQ(*second, (std::vector<int>{4, 5}));
  // restore() retires a running iteration too.
  loader.restore({0, 10});
  expect_error([&] { ++second; }, "used after a later begin() or restore() retired it");
  EXPECT_EQ(*loader.begin(), (std::vector<int>{20, 21}));
}
