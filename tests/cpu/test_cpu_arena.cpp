// The Cpu backend over a fixed arena (ember/cpu/cpu.hpp): the accounting memory_stats
// reports, an output the arena cannot hold (an ember::Error with the op, the shape and the
// sizes, the arena still usable after it), the same numbers as the pooled device, and the
// allocator itself against a model under random allocation and release (no two live blocks
// overlap, freed neighbours merge so the whole arena is one block again).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <ember/cpu/cpu.hpp>
#include <ember/ember.hpp>

#include "cpu/allocator.hpp"

using namespace ember;

namespace {

struct AlignedArena {
  explicit AlignedArena(std::size_t n) : bytes(n + 64) {}
  std::span<std::byte> span(std::size_t offset, std::size_t n) {
    auto base = reinterpret_cast<std::uintptr_t>(bytes.data());
    const std::size_t skip = (64 - base % 64) % 64;
    return {bytes.data() + skip + offset, n};
  }
  std::vector<std::byte> bytes;
};

std::string error_of(const auto& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CpuArena, ReportsTheArenaInMemoryStats) {
  AlignedArena mem(4096);
  Device dev(cpu::make_cpu_backend(mem.span(0, 4096)));
  MemoryStats s = memory_stats(dev);
  EXPECT_EQ(s.capacity, 4096u);
  EXPECT_EQ(s.reserved, 4096u);
  EXPECT_EQ(s.in_use, 0u);
  {
    auto a = Tensor<1>::zeros(Shape{16}, dev);   // 64 bytes
    auto b = Tensor<1>::zeros(Shape{100}, dev);  // 400 bytes: 448 in 64-byte blocks
    s = memory_stats(dev);
    EXPECT_EQ(s.in_use, 64u + 448u);
    EXPECT_EQ(s.peak, 64u + 448u);
  }
  s = memory_stats(dev);
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.peak, 512u);
  empty_cache(dev);  // nothing to return: the arena stays the application's
  EXPECT_EQ(memory_stats(dev).reserved, 4096u);
}

TEST(CpuArena, AlignsTheBufferAndRejectsOneTooSmall) {
  AlignedArena mem(4096);
  // Starting 1 byte past a 64-byte boundary: the first 63 bytes and the ragged tail go.
  Device dev(cpu::make_cpu_backend(mem.span(1, 4000)));
  EXPECT_EQ(memory_stats(dev).capacity, (4000u - 63u) / 64u * 64u);
  const std::string e = error_of([&] { cpu::make_cpu_backend(mem.span(1, 100)); });
  EXPECT_NE(e.find("cpu arena"), std::string::npos) << e;
  EXPECT_NE(e.find("100 bytes"), std::string::npos) << e;
}

TEST(CpuArena, AnOutputItCannotHoldIsAnErrorWithTheSizes) {
  AlignedArena mem(8192);
  Device dev(cpu::make_cpu_backend(mem.span(0, 8192)));
  auto keep = Tensor<1>::ones(Shape{1024}, dev);  // 4096 bytes in use
  // A [2000] output (8000 bytes) does not fit beside keep.
  const std::string e2 = error_of([&] { (void)Tensor<1>::zeros(Shape{2000}, dev); });
  for (const char* part : {"[2000]", "f32", "arena", "8000 bytes", "4096 of its 8192",
                           "largest free block has 4096"}) {
    EXPECT_NE(e2.find(part), std::string::npos) << part << " in: " << e2;
  }
  // The arena is intact and usable after the error.
  EXPECT_EQ(memory_stats(dev).in_use, 4096u);
  auto more = Tensor<1>::full(Shape{1000}, 2.0, dev);
  EXPECT_EQ(more.sum().into_scalar<float>(), 2000.0f);
}

TEST(CpuArena, GivesTheSameNumbersAsThePooledDevice) {
  AlignedArena mem(1 << 16);
  Device arena(cpu::make_cpu_backend(mem.span(0, 1 << 16)));
  Device pooled = Device::cpu();
  auto run = [](const Device& dev) {
    std::vector<float> v(64);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
    auto x = Tensor<2>::from_data(TensorData::from<float>(v, Shape{8, 8}), dev);
    auto y = activation::softmax(x.matmul(x.transpose()).tanh(), 1).sum_dim(0);
    return y.to_data().to_vector<float>();
  };
  const auto a = run(arena), b = run(pooled);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  EXPECT_EQ(memory_stats(arena).in_use, 0u);
}

// The allocator under random allocation and release, against a model of the live blocks:
// each block is filled with its own byte and checked before release, the live blocks never
// overlap and stay inside the arena, and once all are released one block takes it all.
TEST(CpuArena, RandomAllocationNeverOverlapsAndMerges) {
  constexpr std::size_t kSize = 1 << 15;
  AlignedArena mem(kSize);
  const auto span = mem.span(0, kSize);
  cpu::CpuAllocator alloc(span);
  struct Live {
    std::byte* p;
    std::size_t bytes;
    std::byte fill;
  };
  std::vector<Live> live;
  std::mt19937 rng(7);
  int refused = 0;
  for (int step = 0; step < 4000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const std::size_t bytes = 1 + rng() % 1500;
      if (alloc.refusal(bytes)) {
        ++refused;
        EXPECT_THROW(alloc.allocate(bytes), Error);
        continue;
      }
      auto* p = static_cast<std::byte*>(alloc.allocate(bytes));
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
      ASSERT_GE(p, span.data());
      ASSERT_LE(p + bytes, span.data() + span.size());
      for (const Live& l : live) ASSERT_TRUE(p + bytes <= l.p || l.p + l.bytes <= p);
      const auto fill = static_cast<std::byte>(step & 0xff);
      std::memset(p, static_cast<int>(fill), bytes);
      live.push_back({p, bytes, fill});
    } else {
      const std::size_t i = rng() % live.size();
      const Live l = live[i];
      for (std::size_t k = 0; k < l.bytes; ++k) ASSERT_EQ(l.p[k], l.fill);
      alloc.deallocate(l.p, l.bytes);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  EXPECT_GT(refused, 0);  // the arena did fill up
  for (const Live& l : live) alloc.deallocate(l.p, l.bytes);
  EXPECT_EQ(alloc.stats().in_use, 0u);
  EXPECT_FALSE(alloc.refusal(kSize).has_value());  // merged back into one block
  void* all = alloc.allocate(kSize);
  EXPECT_EQ(all, span.data());
  alloc.deallocate(all, kSize);
}

}  // namespace
