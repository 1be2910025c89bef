// The Cpu backend's pooled allocator: 64-byte aligned blocks rounded up to size classes
// and kept in per-class free lists when released, so steady-state training allocates from
// the pool instead of the system. memory_stats reads its counters; empty_cache returns the
// free lists to the system.
//
// Or, made with an arena (a buffer the application owns, as firmware does with a static
// array), every block comes from that buffer: first fit over an address-ordered free list
// kept inside the free blocks themselves (no other memory), neighbours merged on release.
// memory_stats then reports the arena (reserved and capacity are its size), and a request
// it cannot hold fails with the sizes (refusal()), never touching the system allocator.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>  // std::lock_guard
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ember/backend/backend.hpp"
#include "ember/base/config.hpp"

namespace ember::cpu {

class CpuAllocator {
 public:
  CpuAllocator() = default;
  // Allocates from `arena` only; the memory must outlive the allocator. Its first byte is
  // aligned up to 64 and its size down to a multiple of 64.
  explicit CpuAllocator(std::span<std::byte> arena);
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;
  ~CpuAllocator();

  // Returns at least `bytes` bytes, 64-byte aligned; throws ember::Error at once when
  // `bytes` exceeds capacity(), and when the system is out of memory.
  void* allocate(std::size_t bytes);
  // Why allocate(bytes) would fail without trying it (beyond capacity, or in an arena: no
  // free block large enough, with the sizes), or nothing when it may succeed.
  std::optional<std::string> refusal(std::size_t bytes) const;
  void deallocate(void* p, std::size_t bytes);
  backend::MemoryStats stats() const;
  void empty_cache();
  // Whether blocks come from an arena (the constructor taking one).
  bool is_arena() const { return arena_ != nullptr; }

  static std::size_t size_class(std::size_t bytes);
  // The most this machine can ever give: its memory and swap (at most 2^62 bytes).
  static std::size_t capacity();

 private:
  // A free block of the arena, stored in its own first bytes.
  struct FreeBlock {
    std::size_t size;
    FreeBlock* next;
  };
  void* arena_allocate(std::size_t bytes);
  void arena_deallocate(void* p, std::size_t bytes);
  std::size_t arena_largest_free() const;              // with mu_ held
  std::string arena_refusal(std::size_t bytes) const;  // with mu_ held

  mutable Mutex mu_;
  std::map<std::size_t, std::vector<void*>> free_;
  std::size_t in_use_ = 0, reserved_ = 0, peak_ = 0;
  std::byte* arena_ = nullptr;  // null: the system allocator's pool
  std::size_t arena_size_ = 0;
  FreeBlock* arena_free_ = nullptr;  // by address
};

// A block of memory shared by every view of it: from a CpuAllocator, or adopted host
// memory (Backend::adopt_host: a mapped file's tensor) that `owner` keeps valid. Adopted
// memory is not the allocator's, so memory_stats does not count it.
class Buffer {
 public:
  Buffer(CpuAllocator& alloc, std::size_t bytes)
      : alloc_(&alloc), bytes_(bytes), data_(alloc.allocate(bytes)) {}
  Buffer(void* data, std::size_t bytes, std::shared_ptr<const void> owner)
      : alloc_(nullptr), bytes_(bytes), data_(data), owner_(std::move(owner)) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (alloc_ != nullptr) alloc_->deallocate(data_, bytes_);
  }
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

  // Note [Derived data]: values computed from this buffer's contents and kept with it, so
  // they live and die with it (the convolution's packed weight panels, Note [Packed weight
  // cache] in kernels/conv.cpp). An existing buffer is written only by an op that reuses it
  // in place, and cpu::reusable() (context.hpp), the one gate to that, drops this first.
  // reusable() is true only for the sole holder of the buffer, so it never races a reader;
  // readers, each holding the buffer, share it under their own lock.
  std::shared_ptr<void> derived;

 private:
  CpuAllocator* alloc_;  // null for adopted memory
  std::size_t bytes_;
  void* data_;
  std::shared_ptr<const void> owner_;
};

}  // namespace ember::cpu
