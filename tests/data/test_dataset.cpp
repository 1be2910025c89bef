// Datasets and their wrappers: each case builds a dataset of known integers and checks
// every item against the index arithmetic the wrapper promises, plus the random source's
// published reference values and the bad-input errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include <ember/data/data.hpp>

#include "data/expect_error.hpp"

using namespace ember;
using ember::data::testing::expect_error;
using namespace ember::data;

namespace {

// 0, 10, 20, ...: an item's value says which inner index it came from.
std::shared_ptr<InMemoryDataset<int>> tens(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[std::size_t(i)] = 10 * i;
  return std::make_shared<InMemoryDataset<int>>(v);
}

template <class I>
std::vector<I> all_items(const Dataset<I>& d) {
  std::vector<I> out;
  for (std::size_t i = 0; i < d.len(); ++i) out.push_back(d.get(i).value());
  EXPECT_FALSE(d.get(d.len()).has_value());
  EXPECT_FALSE(d.get(d.len() + 1000).has_value());
  return out;
}

}  // namespace

TEST(Rng, MatchesSplitMix64ReferenceOutputs) {
  // The first outputs of SplitMix64 seeded with 0, from its reference definition
  // (state += 0x9E3779B97F4A7C15, then the 30/27/31 finaliser).
  Rng r(0);
  EXPECT_EQ(r.next_u64(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(r.next_u64(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(r.next_u64(), 0x06C45D188009454Full);
}

TEST(Rng, BelowIsUniformAndInRange) {
  Rng r(123);
  std::vector<int> counts(7, 0);
  const int draws = 70000;
  for (int i = 0; i < draws; ++i) {
    const auto v = r.below(7);
    ASSERT_LT(v, 7u);
    ++counts[v];
  }
  // Each count is Binomial(70000, 1/7): mean 10000, deviation ~92.6; 5 deviations.
  for (int c : counts) EXPECT_NEAR(c, 10000, 463);
  for (int i = 0; i < 1000; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(Rng, PermutationIsAPermutationAndSeeded) {
  const auto p = permutation(1000, 5);
  std::vector<std::size_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(p, permutation(1000, 5));
  EXPECT_NE(p, permutation(1000, 6));
  EXPECT_TRUE(permutation(0, 1).empty());
  // Every element reaches every position about equally: position 0 over many seeds.
  std::vector<int> first(4, 0);
  for (std::uint64_t s = 0; s < 8000; ++s) ++first[permutation(4, s)[0]];
  for (int c : first) EXPECT_NEAR(c, 2000, 5 * 38.7);  // Binomial(8000, 1/4)
  EXPECT_NE(derive_seed(1, 0), derive_seed(1, 1));
  EXPECT_NE(derive_seed(1, 0), derive_seed(2, 0));
}

TEST(Dataset, InMemory) {
  auto d = tens(4);
  EXPECT_EQ(d->len(), 4u);
  EXPECT_EQ(all_items(*d), (std::vector<int>{0, 10, 20, 30}));
  EXPECT_TRUE(InMemoryDataset<int>({}).is_empty());
}

TEST(Dataset, Mapper) {
  MapperDataset<int, std::string> d(tens(3), [](int v) { return std::to_string(v + 1); });
  EXPECT_EQ(all_items(d), (std::vector<std::string>{"1", "11", "21"}));
}

TEST(Dataset, RandomMapperIsAFunctionOfSeedEpochAndIndex) {
  auto draw = [](int v, Rng& rng) { return std::pair<int, std::uint64_t>(v, rng.next_u64()); };
  RandomMapperDataset<int, std::pair<int, std::uint64_t>> a(tens(5), 9, draw), b(tens(5), 9, draw);
  // Item i's generator is Rng(derive_seed(derive_seed(seed, epoch), i)).
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(a.get(i)->first, int(10 * i));
    EXPECT_EQ(a.get(i)->second, Rng(derive_seed(derive_seed(9, 0), i)).next_u64());
  }
  // Reads in another order give the same items.
  for (std::size_t i = 5; i-- > 0;) EXPECT_EQ(a.get(i), b.get(i));
  const auto epoch0 = all_items(a);
  a.set_epoch(1);
  const auto epoch1 = all_items(a);
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(epoch1[3].second, Rng(derive_seed(derive_seed(9, 1), 3)).next_u64());
  a.set_epoch(0);
  EXPECT_EQ(all_items(a), epoch0);
}

TEST(Dataset, Partial) {
  PartialDataset<int> d(tens(10), 3, 7);
  EXPECT_EQ(all_items(d), (std::vector<int>{30, 40, 50, 60}));
  EXPECT_EQ(PartialDataset<int>(tens(10), 5, 5).len(), 0u);
  const auto parts = PartialDataset<int>::split(tens(10), 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(all_items(*parts[0]), (std::vector<int>{0, 10, 20, 30}));
  EXPECT_EQ(all_items(*parts[1]), (std::vector<int>{40, 50, 60}));
  EXPECT_EQ(all_items(*parts[2]), (std::vector<int>{70, 80, 90}));
  expect_error([] { PartialDataset<int>(tens(10), 4, 11); }, "[4, 11)");
  expect_error([] { PartialDataset<int>(tens(10), 6, 5); }, "10 items");
  expect_error([] { PartialDataset<int>::split(tens(10), 0); }, "positive");
}

TEST(Dataset, Selection) {
  SelectionDataset<int> d(tens(5), {4, 0, 4, 2});
  EXPECT_EQ(all_items(d), (std::vector<int>{40, 0, 40, 20}));
  expect_error(
      [] {
        SelectionDataset<int>(tens(5), {1, 5});
      },
      "index 5 (position 1) is out of range for a dataset of 5 items");
}

TEST(Dataset, ShuffledIsASeededPermutation) {
  ShuffledDataset<int> d(tens(50), 3);
  const auto items = all_items(d);
  std::vector<int> sorted = items;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, all_items(*tens(50)));
  EXPECT_NE(items, all_items(*tens(50)));
  EXPECT_EQ(items, all_items(ShuffledDataset<int>(tens(50), 3)));
  EXPECT_NE(items, all_items(ShuffledDataset<int>(tens(50), 4)));
}

TEST(Dataset, SamplerWithReplacement) {
  SamplerDataset<int> d(tens(4), 4000, 11);
  ASSERT_EQ(d.len(), 4000u);
  std::map<int, int> counts;
  for (int v : all_items(d)) ++counts[v];
  ASSERT_EQ(counts.size(), 4u);
  for (auto [v, c] : counts) EXPECT_NEAR(c, 1000, 5 * 27.4) << v;  // Binomial(4000, 1/4)
  // With replacement, 4000 draws from 4 repeat; without, see below.
  const auto epoch0 = all_items(d);
  d.set_epoch(1);
  EXPECT_NE(all_items(d), epoch0);
  d.set_epoch(0);
  EXPECT_EQ(all_items(d), epoch0);
  EXPECT_EQ(epoch0, all_items(SamplerDataset<int>(tens(4), 4000, 11)));
}

TEST(Dataset, SamplerWithoutReplacementExhaustsBeforeRepeating) {
  SamplerDataset<int> d(tens(6), 15, 2, SamplerDataset<int>::Replacement::Without);
  const auto items = all_items(d);
  ASSERT_EQ(items.size(), 15u);
  // Items 0-5 and 6-11 are each a permutation of the 6 inner items; 12-14 are distinct.
  for (std::size_t round = 0; round < 2; ++round) {
    std::set<int> seen(items.begin() + std::ptrdiff_t(6 * round),
                       items.begin() + std::ptrdiff_t(6 * round + 6));
    EXPECT_EQ(seen.size(), 6u);
  }
  EXPECT_EQ(std::set<int>(items.begin() + 12, items.end()).size(), 3u);
  EXPECT_NE(std::vector<int>(items.begin(), items.begin() + 6),
            std::vector<int>(items.begin() + 6, items.begin() + 12));
  // A sample no larger than the dataset holds no repeat.
  SamplerDataset<int> small(tens(100), 100, 8, SamplerDataset<int>::Replacement::Without);
  const auto s = all_items(small);
  EXPECT_EQ(std::set<int>(s.begin(), s.end()).size(), 100u);
  expect_error([] { SamplerDataset<int>(tens(0), 3, 1); }, "empty dataset");
}

TEST(Dataset, Composed) {
  ComposedDataset<int> d(
      {tens(2), tens(0), std::make_shared<InMemoryDataset<int>>(std::vector<int>{7, 8, 9})});
  EXPECT_EQ(d.len(), 5u);
  EXPECT_EQ(all_items(d), (std::vector<int>{0, 10, 7, 8, 9}));
  EXPECT_EQ(ComposedDataset<int>({}).len(), 0u);
  expect_error([] { ComposedDataset<int>({tens(1), nullptr}); }, "null");
}

TEST(Dataset, Windows) {
  WindowsDataset<int> d(tens(5), 3);
  EXPECT_EQ(all_items(d), (std::vector<std::vector<int>>{{0, 10, 20}, {10, 20, 30}, {20, 30, 40}}));
  EXPECT_EQ(WindowsDataset<int>(tens(2), 3).len(), 0u);
  EXPECT_EQ(WindowsDataset<int>(tens(3), 3).len(), 1u);
  expect_error([] { WindowsDataset<int>(tens(5), 0); }, "window size must be positive");
}

TEST(Dataset, WrappersForwardTheEpoch) {
  // An epoch-dependent dataset seen through every wrapper changes with the epoch.
  auto base = std::make_shared<RandomMapperDataset<int, std::uint64_t>>(
      tens(8), 1, [](int, Rng& r) { return r.next_u64(); });
  std::vector<DatasetPtr<std::uint64_t>> views{
      std::make_shared<PartialDataset<std::uint64_t>>(base, 2, 6),
      std::make_shared<SelectionDataset<std::uint64_t>>(base, std::vector<std::size_t>{3, 1}),
      std::make_shared<MapperDataset<std::uint64_t, std::uint64_t>>(
          base, [](std::uint64_t v) { return v; }),
      std::make_shared<ComposedDataset<std::uint64_t>>(
          std::vector<DatasetPtr<std::uint64_t>>{base}),
  };
  for (auto& v : views) {
    v->set_epoch(0);
    const auto e0 = all_items(*v);
    v->set_epoch(5);
    EXPECT_NE(all_items(*v), e0);
  }
  WindowsDataset<std::uint64_t> w(base, 2);
  w.set_epoch(0);
  const auto e0 = all_items(w);
  w.set_epoch(5);
  EXPECT_NE(all_items(w), e0);
}
