// BlockAllocator: the bookkeeping of the Cuda backend's caching allocator — segments of
// device memory carved into blocks — over plain addresses, so it is tested without a GPU
// (tests/cuda/test_cuda_allocator.cpp). runtime.cpp supplies the segments (cudaMalloc).
//
// Requests are rounded up to 512 B. Requests below 1 MiB come from the small pool, whose
// segments are 2 MiB; larger ones from the large pool, whose segments are 20 MiB for
// requests below 10 MiB and the request rounded up to 2 MiB otherwise. A request takes
// the smallest free block of its pool that fits (best fit, ties to the lower address),
// or a new segment; the block is split when the rest is worth keeping (at least 512 B in
// the small pool, more than 1 MiB in the large one). A freed block merges with its free
// neighbours in its segment. empty_cache() returns segments that are wholly free. When a
// new segment cannot be had, the cache is emptied and the segment asked for once more;
// then ember::Error names the size.
//
// Stats are exact: in_use is the sum of the sizes of the blocks handed out (a request's
// rounded size, or the whole block when it was not split), reserved the sum of the
// segments held, peak the largest in_use seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "ember/backend/backend.hpp"

namespace ember::cuda {

// Where segments come from.
class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  // A new segment of `bytes` at a non-zero address, or 0 when the device is out of memory.
  // Other failures throw ember::Error.
  virtual std::uintptr_t map(std::size_t bytes) = 0;
  // Returns a segment that map gave, with its size.
  virtual void unmap(std::uintptr_t addr, std::size_t bytes) = 0;
};

class BlockAllocator {
 public:
  static constexpr std::size_t kRound = 512;
  static constexpr std::size_t kSmallRequest = std::size_t(1) << 20;  // below: small pool
  static constexpr std::size_t kSmallSegment = std::size_t(2) << 20;
  static constexpr std::size_t kMidRequest = std::size_t(10) << 20;  // below: shared segments
  static constexpr std::size_t kLargeSegment = std::size_t(20) << 20;
  static constexpr std::size_t kHugeRound = std::size_t(2) << 20;

  // `where` names the device in errors ("device 0").
  BlockAllocator(SegmentSource& source, std::string where);
  ~BlockAllocator();  // unmaps every segment
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  std::uintptr_t allocate(std::size_t bytes);
  void release(std::uintptr_t addr);  // an address allocate returned, not yet released
  backend::MemoryStats stats() const;
  void empty_cache();

  std::size_t segment_count() const;  // for tests
  static std::size_t round(std::size_t bytes);
  static std::size_t segment_size(std::size_t rounded);

 private:
  struct Block {
    std::uintptr_t addr = 0;
    std::size_t size = 0;
    bool small = false;
    bool allocated = false;
    Block* prev = nullptr;  // neighbours in the same segment, by address
    Block* next = nullptr;
  };
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->addr < b->addr;
    }
  };
  std::set<Block*, BySize>& pool(const Block* b) { return b->small ? small_ : large_; }
  void release_cached_locked();

  SegmentSource& source_;
  std::string where_;
  mutable std::mutex mu_;
  std::unordered_map<std::uintptr_t, Block> blocks_;  // every block, by address (owner)
  std::set<Block*, BySize> small_, large_;            // free blocks
  std::size_t in_use_ = 0, reserved_ = 0, peak_ = 0, segments_ = 0;
};

}  // namespace ember::cuda
