// The caching allocator's block bookkeeping (block_allocator.hpp).
#include "cuda/block_allocator.hpp"

#include <algorithm>

#include "ember/base/error.hpp"

namespace ember::cuda {

BlockAllocator::BlockAllocator(SegmentSource& source, std::string where)
    : source_(source), where_(std::move(where)) {}

BlockAllocator::~BlockAllocator() {
  std::lock_guard lk(mu_);
  // Every buffer holds the allocator, so by now every block is free and every segment is
  // one block.
  release_cached_locked();
}

std::size_t BlockAllocator::round(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  return (bytes + kRound - 1) / kRound * kRound;
}

std::size_t BlockAllocator::segment_size(std::size_t rounded) {
  if (rounded < kSmallRequest) return kSmallSegment;
  if (rounded < kMidRequest) return kLargeSegment;
  return (rounded + kHugeRound - 1) / kHugeRound * kHugeRound;
}

std::uintptr_t BlockAllocator::allocate(std::size_t bytes) {
  EMBER_CHECK(bytes <= (std::size_t(1) << 62),
              "cuda: cannot allocate " + std::to_string(bytes) + " bytes on " + where_);
  const std::size_t size = round(bytes);
  const bool small = size < kSmallRequest;
  std::lock_guard lk(mu_);
  auto& free_set = small ? small_ : large_;
  Block key;
  key.size = size;
  Block* b = nullptr;
  if (auto it = free_set.lower_bound(&key); it != free_set.end()) {
    b = *it;
    free_set.erase(it);
  } else {
    const std::size_t seg = segment_size(size);
    std::uintptr_t addr = source_.map(seg);
    if (addr == 0) {
      release_cached_locked();
      addr = source_.map(seg);
    }
    if (addr == 0) {
      fail("cuda: out of memory allocating " + std::to_string(bytes) + " bytes on " + where_ +
           " (" + std::to_string(in_use_) + " bytes in use, " + std::to_string(reserved_) +
           " reserved)");
    }
    reserved_ += seg;
    ++segments_;
    Block nb;
    nb.addr = addr;
    nb.size = seg;
    nb.small = small;
    auto [at, fresh] = blocks_.emplace(addr, nb);
    EMBER_ASSERT(fresh);
    b = &at->second;
  }
  const std::size_t rest = b->size - size;
  if (small ? rest >= kRound : rest > kSmallRequest) {
    Block rb;
    rb.addr = b->addr + size;
    rb.size = rest;
    rb.small = small;
    rb.prev = b;
    rb.next = b->next;
    auto [it, fresh] = blocks_.emplace(rb.addr, rb);
    EMBER_ASSERT(fresh);
    Block* r = &it->second;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    free_set.insert(r);
  }
  b->allocated = true;
  in_use_ += b->size;
  peak_ = std::max(peak_, in_use_);
  return b->addr;
}

void BlockAllocator::release(std::uintptr_t addr) {
  std::lock_guard lk(mu_);
  auto found = blocks_.find(addr);
  EMBER_ASSERT(found != blocks_.end() && found->second.allocated);
  Block* b = &found->second;
  b->allocated = false;
  in_use_ -= b->size;
  if (Block* n = b->next; n && !n->allocated) {
    pool(n).erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    const std::uintptr_t gone = n->addr;  // not a reference into the erased node
    blocks_.erase(gone);
  }
  if (Block* p = b->prev; p && !p->allocated) {
    pool(p).erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    const std::uintptr_t gone = b->addr;
    blocks_.erase(gone);
    b = p;
  }
  pool(b).insert(b);
}

void BlockAllocator::release_cached_locked() {
  for (auto* set : {&small_, &large_}) {
    for (auto it = set->begin(); it != set->end();) {
      Block* b = *it;
      if (b->prev || b->next) {
        ++it;
        continue;
      }
      source_.unmap(b->addr, b->size);
      reserved_ -= b->size;
      --segments_;
      const std::uintptr_t gone = b->addr;
      it = set->erase(it);
      blocks_.erase(gone);
    }
  }
}

backend::MemoryStats BlockAllocator::stats() const {
  std::lock_guard lk(mu_);
  return {in_use_, reserved_, peak_};
}

void BlockAllocator::empty_cache() {
  std::lock_guard lk(mu_);
  release_cached_locked();
}

std::size_t BlockAllocator::segment_count() const {
  std::lock_guard lk(mu_);
  return segments_;
}

}  // namespace ember::cuda
