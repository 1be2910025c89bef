// Datasets: an indexable, sized collection of items, and the wrappers that build one
// dataset from others (map, slice, shuffle, select, sample, concatenate, window) without
// copying the items. A DataLoader (loader.hpp) reads a dataset from worker threads.
//
// Contract for every Dataset<I>:
// - get(i) returns the item at i for i < len(), and std::nullopt for i >= len();
// - get is safe to call from several threads at once (it is const; a dataset with mutable
//   internals, a database connection say, guards them itself);
// - set_epoch(e) is called by a loader before an epoch's reads begin and never while get
//   runs; datasets whose items depend on the epoch (random augmentation, sampling) use it,
//   wrappers forward it, the rest ignore it.
//
// Wrappers hold their inner datasets by std::shared_ptr, so a dataset can be shared by
// several wrappers and loaders and lives as long as its longest user.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/base/error.hpp"
#include "ember/data/random.hpp"

namespace ember::data {

template <class I>
class Dataset {
 public:
  using Item = I;
  virtual ~Dataset() = default;

  virtual std::optional<I> get(std::size_t index) const = 0;
  virtual std::size_t len() const = 0;
  virtual void set_epoch(std::uint64_t /*epoch*/) {}

  bool is_empty() const { return len() == 0; }
};

template <class I>
using DatasetPtr = std::shared_ptr<Dataset<I>>;

namespace detail {
template <class I>
DatasetPtr<I> checked(DatasetPtr<I> d, const char* who) {
  EMBER_CHECK(d != nullptr, std::string(who) + ": the inner dataset is null");
  return d;
}
}  // namespace detail

// Items held in memory, in order.
template <class I>
class InMemoryDataset : public Dataset<I> {
 public:
  explicit InMemoryDataset(std::vector<I> items) : items_(std::move(items)) {}
  std::optional<I> get(std::size_t i) const override {
    if (i >= items_.size()) return std::nullopt;
    return items_[i];
  }
  std::size_t len() const override { return items_.size(); }
  const std::vector<I>& items() const { return items_; }

 private:
  std::vector<I> items_;
};

// Each item of `inner` passed through a pure function (called on the reading thread).
template <class I, class O>
class MapperDataset : public Dataset<O> {
 public:
  using Mapper = std::function<O(I)>;
  MapperDataset(DatasetPtr<I> inner, Mapper mapper)
      : inner_(detail::checked(std::move(inner), "MapperDataset")), mapper_(std::move(mapper)) {
    EMBER_CHECK(mapper_ != nullptr, "MapperDataset: the mapper is empty");
  }
  std::optional<O> get(std::size_t i) const override {
    auto item = inner_->get(i);
    if (!item) return std::nullopt;
    return mapper_(std::move(*item));
  }
  std::size_t len() const override { return inner_->len(); }
  void set_epoch(std::uint64_t e) override { inner_->set_epoch(e); }

 private:
  DatasetPtr<I> inner_;
  Mapper mapper_;
};

// Each item of `inner` passed through a random function (an augmentation) given a
// generator seeded from (seed, epoch, index): an item's randomness depends on nothing
// else — not on the thread, the worker count or the order of reads — and changes with the
// epoch.
template <class I, class O>
class RandomMapperDataset : public Dataset<O> {
 public:
  using Mapper = std::function<O(I, Rng&)>;
  RandomMapperDataset(DatasetPtr<I> inner, std::uint64_t seed, Mapper mapper)
      : inner_(detail::checked(std::move(inner), "RandomMapperDataset")),
        mapper_(std::move(mapper)),
        seed_(seed) {
    EMBER_CHECK(mapper_ != nullptr, "RandomMapperDataset: the mapper is empty");
  }
  std::optional<O> get(std::size_t i) const override {
    auto item = inner_->get(i);
    if (!item) return std::nullopt;
    Rng rng(derive_seed(derive_seed(seed_, epoch_), i));
    return mapper_(std::move(*item), rng);
  }
  std::size_t len() const override { return inner_->len(); }
  void set_epoch(std::uint64_t e) override {
    epoch_ = e;
    inner_->set_epoch(e);
  }

 private:
  DatasetPtr<I> inner_;
  Mapper mapper_;
  std::uint64_t seed_;
  std::uint64_t epoch_ = 0;
};

// Items [start, end) of `inner`.
template <class I>
class PartialDataset : public Dataset<I> {
 public:
  PartialDataset(DatasetPtr<I> inner, std::size_t start, std::size_t end)
      : inner_(detail::checked(std::move(inner), "PartialDataset")), start_(start), end_(end) {
    EMBER_CHECK(start <= end && end <= inner_->len(),
                "PartialDataset: range [" + std::to_string(start) + ", " + std::to_string(end) +
                    ") does not lie within a dataset of " + std::to_string(inner_->len()) +
                    " items");
  }
  // `inner` cut into `parts` consecutive pieces whose sizes differ by at most one (the
  // first len % parts pieces get the extra item).
  static std::vector<DatasetPtr<I>> split(const DatasetPtr<I>& inner, std::size_t parts) {
    EMBER_CHECK(parts > 0, "PartialDataset::split: the number of parts must be positive");
    const std::size_t n = detail::checked(inner, "PartialDataset::split")->len();
    std::vector<DatasetPtr<I>> out;
    std::size_t start = 0;
    for (std::size_t p = 0; p < parts; ++p) {
      const std::size_t size = n / parts + (p < n % parts ? 1 : 0);
      out.push_back(std::make_shared<PartialDataset>(inner, start, start + size));
      start += size;
    }
    return out;
  }
  std::optional<I> get(std::size_t i) const override {
    if (i >= end_ - start_) return std::nullopt;
    return inner_->get(start_ + i);
  }
  std::size_t len() const override { return end_ - start_; }
  void set_epoch(std::uint64_t e) override { inner_->set_epoch(e); }

 private:
  DatasetPtr<I> inner_;
  std::size_t start_, end_;
};

// The items of `inner` at `indices`, in that order (repeats allowed).
template <class I>
class SelectionDataset : public Dataset<I> {
 public:
  SelectionDataset(DatasetPtr<I> inner, std::vector<std::size_t> indices)
      : inner_(detail::checked(std::move(inner), "SelectionDataset")),
        indices_(std::move(indices)) {
    const std::size_t n = inner_->len();
    for (std::size_t k = 0; k < indices_.size(); ++k) {
      EMBER_CHECK(indices_[k] < n, "SelectionDataset: index " + std::to_string(indices_[k]) +
                                       " (position " + std::to_string(k) +
                                       ") is out of range for a dataset of " + std::to_string(n) +
                                       " items");
    }
  }
  std::optional<I> get(std::size_t i) const override {
    if (i >= indices_.size()) return std::nullopt;
    return inner_->get(indices_[i]);
  }
  std::size_t len() const override { return indices_.size(); }
  void set_epoch(std::uint64_t e) override { inner_->set_epoch(e); }
  const std::vector<std::size_t>& indices() const { return indices_; }

 private:
  DatasetPtr<I> inner_;
  std::vector<std::size_t> indices_;
};

// `inner` in a fixed order drawn from `seed` (the same for every epoch; a DataLoader's own
// shuffle is the one that changes per epoch).
template <class I>
class ShuffledDataset : public SelectionDataset<I> {
 public:
  ShuffledDataset(DatasetPtr<I> inner, std::uint64_t seed)
      : SelectionDataset<I>(inner,
                            permutation(detail::checked(inner, "ShuffledDataset")->len(), seed)) {}
};

// `size` items drawn from `inner`, anew each epoch, from (seed, epoch) alone. With
// replacement each item is an independent uniform draw; without, the items are the
// successive entries of fresh random permutations of `inner` (so each inner item appears
// once before any appears twice).
template <class I>
class SamplerDataset : public Dataset<I> {
 public:
  enum class Replacement { With, Without };
  SamplerDataset(DatasetPtr<I> inner, std::size_t size, std::uint64_t seed,
                 Replacement replacement = Replacement::With)
      : inner_(detail::checked(std::move(inner), "SamplerDataset")),
        size_(size),
        seed_(seed),
        replacement_(replacement) {
    EMBER_CHECK(
        size == 0 || inner_->len() > 0,
        "SamplerDataset: cannot draw " + std::to_string(size) + " items from an empty dataset");
    draw(0);
  }
  std::optional<I> get(std::size_t i) const override {
    if (i >= size_) return std::nullopt;
    return inner_->get(indices_[i]);
  }
  std::size_t len() const override { return size_; }
  void set_epoch(std::uint64_t e) override {
    inner_->set_epoch(e);
    if (e != epoch_) draw(e);
  }
  // The inner indices this epoch reads, in order.
  const std::vector<std::size_t>& indices() const { return indices_; }

 private:
  void draw(std::uint64_t epoch) {
    epoch_ = epoch;
    const std::size_t n = inner_->len();
    const std::uint64_t s = derive_seed(seed_, epoch);
    indices_.clear();
    indices_.reserve(size_);
    if (replacement_ == Replacement::With) {
      Rng rng(s);
      for (std::size_t i = 0; i < size_; ++i) indices_.push_back(std::size_t(rng.below(n)));
    } else {
      for (std::uint64_t round = 0; indices_.size() < size_; ++round) {
        const auto p = permutation(n, derive_seed(s, round));
        const std::size_t take = std::min(n, size_ - indices_.size());
        indices_.insert(indices_.end(), p.begin(), p.begin() + std::ptrdiff_t(take));
      }
    }
  }

  DatasetPtr<I> inner_;
  std::size_t size_;
  std::uint64_t seed_;
  Replacement replacement_;
  std::uint64_t epoch_ = 0;
  std::vector<std::size_t> indices_;
};

// The datasets one after another.
template <class I>
class ComposedDataset : public Dataset<I> {
 public:
  explicit ComposedDataset(std::vector<DatasetPtr<I>> parts) : parts_(std::move(parts)) {
    std::size_t total = 0;
    for (const auto& p : parts_) {
      detail::checked(p, "ComposedDataset");
      total += p->len();
      ends_.push_back(total);
    }
  }
  std::optional<I> get(std::size_t i) const override {
    // The first part whose cumulative end lies beyond i holds it.
    const auto it = std::upper_bound(ends_.begin(), ends_.end(), i);
    if (it == ends_.end()) return std::nullopt;
    const auto k = std::size_t(it - ends_.begin());
    return parts_[k]->get(i - (k == 0 ? 0 : ends_[k - 1]));
  }
  std::size_t len() const override { return ends_.empty() ? 0 : ends_.back(); }
  void set_epoch(std::uint64_t e) override {
    for (auto& p : parts_) p->set_epoch(e);
  }

 private:
  std::vector<DatasetPtr<I>> parts_;
  std::vector<std::size_t> ends_;
};

// Every run of `size` consecutive items of `inner` (a sliding window with stride 1):
// item i holds inner items i .. i + size - 1; len() is inner.len() - size + 1, or 0.
template <class I>
class WindowsDataset : public Dataset<std::vector<I>> {
 public:
  WindowsDataset(DatasetPtr<I> inner, std::size_t size)
      : inner_(detail::checked(std::move(inner), "WindowsDataset")), size_(size) {
    EMBER_CHECK(size > 0, "WindowsDataset: the window size must be positive");
  }
  std::optional<std::vector<I>> get(std::size_t i) const override {
    if (i >= len()) return std::nullopt;
    std::vector<I> window;
    window.reserve(size_);
    for (std::size_t k = 0; k < size_; ++k) {
      auto item = inner_->get(i + k);
      EMBER_CHECK(item.has_value(), "WindowsDataset: the inner dataset has no item " +
                                        std::to_string(i + k) + " though its len() is " +
                                        std::to_string(inner_->len()));
      window.push_back(std::move(*item));
    }
    return window;
  }
  std::size_t len() const override {
    const std::size_t n = inner_->len();
    return n < size_ ? 0 : n - size_ + 1;
  }
  void set_epoch(std::uint64_t e) override { inner_->set_epoch(e); }

 private:
  DatasetPtr<I> inner_;
  std::size_t size_;
};

}  // namespace ember::data
