#include "cpu/allocator.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>

#if defined(__linux__)
#include <sys/sysinfo.h>
#endif

#include "ember/base/checked.hpp"
#include "ember/base/error.hpp"

namespace ember::cpu {

// Classes: multiples of 64 bytes up to 4 KiB, then four steps per power of two, so a block
// wastes at most 25% and sizes that vary a little between steps still hit the cache.
// Sizes beyond kMaxSize have no class (allocate refuses them before asking).
std::size_t CpuAllocator::size_class(std::size_t bytes) {
  if (bytes <= 4096) return std::max<std::size_t>(64, (bytes + 63) & ~std::size_t{63});
  if (bytes > kMaxSize) return bytes;
  const std::size_t p = std::bit_ceil(bytes) / 2;  // the power of two with p < bytes <= 2p
  const std::size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

std::size_t CpuAllocator::capacity() {
  static const std::size_t cap = [] {
#if defined(__linux__)
    struct sysinfo si {};
    if (sysinfo(&si) == 0) {
      const double total =
          (static_cast<double>(si.totalram) + static_cast<double>(si.totalswap)) * si.mem_unit;
      return total >= static_cast<double>(kMaxSize) ? kMaxSize : static_cast<std::size_t>(total);
    }
#endif
    return kMaxSize;
  }();
  return cap;
}

CpuAllocator::~CpuAllocator() { empty_cache(); }

namespace {
constexpr std::size_t kArenaAlign = 64;
std::size_t arena_block(std::size_t bytes) {
  return (std::max<std::size_t>(bytes, 1) + kArenaAlign - 1) & ~(kArenaAlign - 1);
}
}  // namespace

CpuAllocator::CpuAllocator(std::span<std::byte> arena) {
  const auto base = reinterpret_cast<std::uintptr_t>(arena.data());
  const std::size_t skip = (kArenaAlign - base % kArenaAlign) % kArenaAlign;
  const std::size_t size = arena.size() > skip ? (arena.size() - skip) & ~(kArenaAlign - 1) : 0;
  EMBER_CHECK(size >= kArenaAlign, "cpu arena: a buffer of " + std::to_string(arena.size()) +
                                       " bytes holds no 64-byte aligned block of 64 bytes");
  arena_ = arena.data() + skip;
  arena_size_ = size;
  reserved_ = size;
  arena_free_ = new (arena_) FreeBlock{size, nullptr};
}

std::size_t CpuAllocator::arena_largest_free() const {
  std::size_t largest = 0;
  for (const FreeBlock* b = arena_free_; b != nullptr; b = b->next) {
    largest = std::max(largest, b->size);
  }
  return largest;
}

std::string CpuAllocator::arena_refusal(std::size_t bytes) const {
  return "the Cpu arena cannot hold " + std::to_string(bytes) + " bytes (" +
         std::to_string(bytes > kMaxSize ? bytes : arena_block(bytes)) +
         " as 64-byte blocks): " + std::to_string(in_use_) + " of its " +
         std::to_string(arena_size_) + " bytes are in use and the largest free block has " +
         std::to_string(arena_largest_free()) + " bytes";
}

std::optional<std::string> CpuAllocator::refusal(std::size_t bytes) const {
  if (arena_ == nullptr) {
    if (bytes <= capacity()) return std::nullopt;
    return "cpu: cannot allocate " + std::to_string(bytes) + " bytes, more than the " +
           std::to_string(capacity()) + " bytes of memory and swap this machine has";
  }
  std::lock_guard lk(mu_);
  if (bytes <= kMaxSize && arena_block(bytes) <= arena_largest_free()) return std::nullopt;
  return arena_refusal(bytes);
}

void* CpuAllocator::arena_allocate(std::size_t bytes) {
  std::lock_guard lk(mu_);
  const std::size_t need = bytes <= kMaxSize ? arena_block(bytes) : 0;
  FreeBlock** link = &arena_free_;
  while (need != 0 && *link != nullptr && (*link)->size < need) link = &(*link)->next;
  if (need == 0 || *link == nullptr) fail(arena_refusal(bytes));
  FreeBlock* b = *link;
  if (b->size == need) {
    *link = b->next;
  } else {  // the block's tail stays free
    *link = new (reinterpret_cast<std::byte*>(b) + need) FreeBlock{b->size - need, b->next};
  }
  in_use_ += need;
  peak_ = std::max(peak_, in_use_);
  return b;
}

void CpuAllocator::arena_deallocate(void* p, std::size_t bytes) {
  std::lock_guard lk(mu_);
  const std::size_t size = arena_block(bytes);
  auto* at = static_cast<std::byte*>(p);
  EMBER_ASSERT(at >= arena_ && at + size <= arena_ + arena_size_);
  in_use_ -= size;
  FreeBlock* prev = nullptr;
  FreeBlock* next = arena_free_;
  while (next != nullptr && reinterpret_cast<std::byte*>(next) < at) {
    prev = next;
    next = next->next;
  }
  auto* b = new (at) FreeBlock{size, next};
  if (next != nullptr && at + size == reinterpret_cast<std::byte*>(next)) {
    b->size += next->size;
    b->next = next->next;
  }
  if (prev == nullptr) {
    arena_free_ = b;
  } else if (reinterpret_cast<std::byte*>(prev) + prev->size == at) {
    prev->size += b->size;
    prev->next = b->next;
  } else {
    prev->next = b;
  }
}

void* CpuAllocator::allocate(std::size_t bytes) {
  if (arena_ != nullptr) return arena_allocate(bytes);
  EMBER_CHECK(bytes <= capacity(), "cpu: cannot allocate " + std::to_string(bytes) +
                                       " bytes, more than the " + std::to_string(capacity()) +
                                       " bytes of memory and swap this machine has");
  const std::size_t cls = size_class(bytes);
  {
    std::lock_guard lk(mu_);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      in_use_ += cls;
      peak_ = std::max(peak_, in_use_);
      return p;
    }
  }
  void* p = ::aligned_alloc(64, cls);
  if (p == nullptr) {
    empty_cache();
    p = ::aligned_alloc(64, cls);
  }
  EMBER_CHECK(p != nullptr, "cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
  std::lock_guard lk(mu_);
  reserved_ += cls;
  in_use_ += cls;
  peak_ = std::max(peak_, in_use_);
  return p;
}

void CpuAllocator::deallocate(void* p, std::size_t bytes) {
  if (arena_ != nullptr) return arena_deallocate(p, bytes);
  const std::size_t cls = size_class(bytes);
  std::lock_guard lk(mu_);
  in_use_ -= cls;
  free_[cls].push_back(p);
}

backend::MemoryStats CpuAllocator::stats() const {
  std::lock_guard lk(mu_);
  return {in_use_, reserved_, peak_, arena_ != nullptr ? arena_size_ : capacity()};
}

void CpuAllocator::empty_cache() {
  std::lock_guard lk(mu_);
  for (auto& [cls, ptrs] : free_) {
    for (void* p : ptrs) std::free(p);
    reserved_ -= cls * ptrs.size();
  }
  free_.clear();
}

}  // namespace ember::cpu
