// The DataLoader: reads a dataset in batches, on worker threads ahead of the consumer, and
// turns each batch of items into tensors on a device through a Batcher.
//
//   auto loader = data::DataLoaderBuilder(MnistBatcher{})
//                     .batch_size(64).shuffle(42).num_workers(2).device(dev)
//                     .build(dataset);
//   for (auto& batch : loader) { ... }         // one epoch; the next loop is the next epoch
//
// Note [Loader determinism]: the batches of an epoch are a function of (seed, epoch) and
// the dataset alone. The epoch's item order is a permutation drawn from derive_seed(seed,
// epoch) (or the identity without shuffle); batch j holds the items at positions
// [j * batch_size, (j + 1) * batch_size) of that order; workers only decide *when* a batch
// is built, never which items it holds, and batches are handed out in order. Datasets whose
// items are random (RandomMapperDataset, SamplerDataset) draw from (seed, epoch, index)
// after the loader's set_epoch. So 0, 1 or 8 workers give identical batches, and a loader
// restored to a saved state() continues exactly where the saved one was.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/base/error.hpp"
#include "ember/data/dataset.hpp"
#include "ember/data/prefetch.hpp"
#include "ember/data/random.hpp"
#include "ember/tensor/device.hpp"

namespace ember::data {

// Turns items into a batch on a device. batch() is called from worker threads, several at
// once, so it must not mutate shared state.
template <class T, class I>
concept Batcher = requires(const T& batcher, std::vector<I> items, const Device& device) {
  { batcher.batch(std::move(items), device) } -> std::move_constructible;
};

template <class T, class I>
requires Batcher<T, I>
using BatchOf = decltype(std::declval<const T&>().batch(std::declval<std::vector<I>>(),
                                                        std::declval<const Device&>()));

// Where a loader stands: the epoch in progress (or about to start) and how many of its
// batches were handed out. Saved with a checkpoint, restored to resume mid-epoch.
struct LoaderState {
  std::uint64_t epoch = 0;
  std::size_t batch = 0;
  friend bool operator==(const LoaderState&, const LoaderState&) = default;
};

struct LoaderOptions {
  std::size_t batch_size = 1;
  std::optional<std::uint64_t> shuffle_seed;  // none: the dataset's order
  std::size_t num_workers = 0;                // 0: batches built on the iterating thread
  std::size_t prefetch = 0;                   // batches in flight; 0: 2 per worker
  bool drop_last = false;                     // drop a last batch smaller than batch_size
};

template <class I, class B>
class DataLoader {
 public:
  using BatchFn = std::function<B(std::vector<I>, const Device&)>;

  DataLoader(DatasetPtr<I> dataset, BatchFn batch, LoaderOptions options, Device device)
      : dataset_(std::move(dataset)),
        batch_(std::move(batch)),
        options_(options),
        device_(std::move(device)) {
    EMBER_CHECK(dataset_ != nullptr, "DataLoader: the dataset is null");
    EMBER_CHECK(options_.batch_size > 0, "DataLoader: batch_size must be positive, got 0");
    check_batches("DataLoader");
  }

  class Iterator;
  // Starts (or resumes, after restore() or a loop left early) the current epoch. One
  // iteration at a time: a later begin() retires the iterators of earlier ones (using one
  // is an ember::Error), and the loader must outlive its iterators and not move meanwhile.
  Iterator begin() { return Iterator(this); }
  std::default_sentinel_t end() const { return {}; }

  // Batches in one epoch, and items in the dataset.
  std::size_t num_batches() const {
    const std::size_t n = dataset_->len(), bs = options_.batch_size;
    return options_.drop_last ? n / bs : (n + bs - 1) / bs;
  }
  std::size_t num_items() const { return dataset_->len(); }
  const LoaderOptions& options() const { return options_; }
  const Device& device() const { return device_; }

  // The position after the batches handed out so far (an epoch handed out in full reads as
  // the start of the next).
  LoaderState state() const {
    if (position_ >= num_batches()) return {epoch_ + 1, 0};
    return {epoch_, position_};
  }
  // The next iteration starts at `s` (an iteration in progress is retired, as by begin()).
  // Throws ember::Error when s lies beyond an epoch.
  void restore(const LoaderState& s) {
    EMBER_CHECK(s.batch <= num_batches(), "DataLoader::restore: batch " + std::to_string(s.batch) +
                                              " lies beyond the " + std::to_string(num_batches()) +
                                              " batches of an epoch (" +
                                              std::to_string(num_items()) + " items, batch size " +
                                              std::to_string(options_.batch_size) + ")");
    run_.reset();
    ++generation_;
    epoch_ = s.epoch;
    position_ = s.batch;
  }

  // The items' dataset indices in the order epoch `epoch` reads them.
  std::vector<std::size_t> epoch_order(std::uint64_t epoch) const {
    const std::size_t n = dataset_->len();
    if (options_.shuffle_seed) return permutation(n, derive_seed(*options_.shuffle_seed, epoch));
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    return order;
  }

  class Iterator {
   public:
    using value_type = B;
    using difference_type = std::ptrdiff_t;

    B& operator*() const { return *current_; }
    B* operator->() const { return &*current_; }
    Iterator& operator++() {
      advance();
      return *this;
    }
    void operator++(int) { advance(); }
    friend bool operator==(const Iterator& it, std::default_sentinel_t) {
      return !it.current_.has_value();
    }

    Iterator(Iterator&& o) noexcept
        : loader_(std::exchange(o.loader_, nullptr)),
          generation_(o.generation_),
          current_(std::move(o.current_)) {}
    Iterator& operator=(Iterator&&) = delete;
    // Leaving a loop early stops the epoch's workers (after their current batch).
    ~Iterator() {
      if (loader_ != nullptr && generation_ == loader_->generation_) loader_->run_.reset();
    }

   private:
    friend class DataLoader;

    explicit Iterator(DataLoader* loader) : loader_(loader) {
      DataLoader& l = *loader_;
      // An earlier iteration's workers stop before the dataset learns the new epoch.
      l.run_.reset();
      generation_ = ++l.generation_;
      l.check_batches("DataLoader::begin");
      if (l.position_ >= l.num_batches()) {
        ++l.epoch_;
        l.position_ = 0;
      }
      l.dataset_->set_epoch(l.epoch_);
      auto run = std::make_unique<Run>();
      run->order = l.epoch_order(l.epoch_);
      const std::size_t batches = l.num_batches();
      run->slots.resize(batches);
      const std::size_t workers = l.options_.num_workers;
      const std::size_t depth = l.options_.prefetch > 0 ? l.options_.prefetch : 2 * workers;
      run->pipeline = std::make_unique<PrefetchPipeline>(
          l.position_, batches, workers, depth,
          [&l, r = run.get()](std::size_t j) { r->slots[j] = l.make_batch(r->order, j); });
      l.run_ = std::move(run);
      try {
        fetch();
      } catch (...) {
        l.run_.reset();  // no iterator will exist to stop the workers
        throw;
      }
    }

    void fetch() {
      DataLoader& l = *loader_;
      const std::size_t j = l.position_;
      l.run_->pipeline->wait(j);
      current_ = std::move(*l.run_->slots[j]);
      l.run_->slots[j].reset();
      l.position_ = j + 1;
    }
    void advance() {
      EMBER_CHECK(loader_ != nullptr && generation_ == loader_->generation_,
                  "DataLoader: an iterator was used after a later begin() or restore() retired it");
      DataLoader& l = *loader_;
      current_.reset();
      if (l.position_ < l.num_batches()) {
        fetch();
        return;
      }
      l.run_.reset();
      ++l.epoch_;
      l.position_ = 0;
    }

    DataLoader* loader_;
    std::uint64_t generation_ = 0;
    mutable std::optional<B> current_;
  };

 private:
  void check_batches(const char* who) const {
    const std::size_t n = dataset_->len();
    EMBER_CHECK(n > 0, std::string(who) + ": the dataset is empty");
    EMBER_CHECK(num_batches() > 0, std::string(who) +
                                       ": drop_last leaves no batch: " + std::to_string(n) +
                                       " items, batch size " + std::to_string(options_.batch_size));
  }

  B make_batch(const std::vector<std::size_t>& order, std::size_t j) const {
    const std::size_t n = order.size(), bs = options_.batch_size;
    const std::size_t start = j * bs, stop = std::min(n, start + bs);
    std::vector<I> items;
    items.reserve(stop - start);
    for (std::size_t k = start; k < stop; ++k) {
      auto item = dataset_->get(order[k]);
      EMBER_CHECK(item.has_value(), "DataLoader: the dataset has no item " +
                                        std::to_string(order[k]) + " though its len() is " +
                                        std::to_string(n));
      items.push_back(std::move(*item));
    }
    return batch_(std::move(items), device_);
  }

  DatasetPtr<I> dataset_;
  BatchFn batch_;
  LoaderOptions options_;
  Device device_;
  std::uint64_t epoch_ = 0;
  std::size_t position_ = 0;
  std::uint64_t generation_ = 0;  // counts begin() calls; see begin()
  // The epoch in progress. The pipeline is Run's last member, so it joins its workers
  // before the slots they write die; run_ is the loader's last, so it dies first.
  struct Run {
    std::vector<std::size_t> order;
    std::vector<std::optional<B>> slots;
    std::unique_ptr<PrefetchPipeline> pipeline;
  };
  std::unique_ptr<Run> run_;
};

// Builds a DataLoader: DataLoaderBuilder(batcher).batch_size(n).shuffle(seed)
// .num_workers(k).drop_last(true).device(dev).build(dataset).
template <class Bt>
class DataLoaderBuilder {
 public:
  explicit DataLoaderBuilder(Bt batcher) : batcher_(std::move(batcher)), device_(Device::cpu()) {}

  DataLoaderBuilder& batch_size(std::size_t n) {
    EMBER_CHECK(n > 0, "DataLoaderBuilder::batch_size: the batch size must be positive, got 0");
    options_.batch_size = n;
    return *this;
  }
  DataLoaderBuilder& shuffle(std::uint64_t seed) {
    options_.shuffle_seed = seed;
    return *this;
  }
  DataLoaderBuilder& num_workers(std::size_t k) {
    options_.num_workers = k;
    return *this;
  }
  DataLoaderBuilder& prefetch(std::size_t batches) {
    options_.prefetch = batches;
    return *this;
  }
  DataLoaderBuilder& drop_last(bool drop = true) {
    options_.drop_last = drop;
    return *this;
  }
  DataLoaderBuilder& device(Device d) {
    device_ = std::move(d);
    return *this;
  }

  template <class D>
  requires std::derived_from<D, Dataset<typename D::Item>> && Batcher<Bt, typename D::Item>
      DataLoader<typename D::Item, BatchOf<Bt, typename D::Item>> build(std::shared_ptr<D> dataset)
  const {
    using I = typename D::Item;
    using B = BatchOf<Bt, I>;
    auto batcher = std::make_shared<const Bt>(batcher_);
    auto fn = [batcher](std::vector<I> items, const Device& dev) -> B {
      return batcher->batch(std::move(items), dev);
    };
    return DataLoader<I, B>(DatasetPtr<I>(std::move(dataset)), std::move(fn), options_, device_);
  }

 private:
  Bt batcher_;
  LoaderOptions options_;
  Device device_;
};

}  // namespace ember::data
