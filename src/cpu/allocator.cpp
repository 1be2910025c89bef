#include "cpu/allocator.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
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

void* CpuAllocator::allocate(std::size_t bytes) {
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
  void* p = std::aligned_alloc(64, cls);
  if (p == nullptr) {
    empty_cache();
    p = std::aligned_alloc(64, cls);
  }
  EMBER_CHECK(p != nullptr, "cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
  std::lock_guard lk(mu_);
  reserved_ += cls;
  in_use_ += cls;
  peak_ = std::max(peak_, in_use_);
  return p;
}

void CpuAllocator::deallocate(void* p, std::size_t bytes) {
  const std::size_t cls = size_class(bytes);
  std::lock_guard lk(mu_);
  in_use_ -= cls;
  free_[cls].push_back(p);
}

backend::MemoryStats CpuAllocator::stats() const {
  std::lock_guard lk(mu_);
  return {in_use_, reserved_, peak_, capacity()};
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
