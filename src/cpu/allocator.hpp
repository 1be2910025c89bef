// The Cpu backend's pooled allocator: 64-byte aligned blocks rounded up to size classes
// and kept in per-class free lists when released, so steady-state training allocates from
// the pool instead of the system. memory_stats reads its counters; empty_cache returns the
// free lists to the system.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ember/backend/backend.hpp"

namespace ember::cpu {

class CpuAllocator {
 public:
  CpuAllocator() = default;
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;
  ~CpuAllocator();

  // Returns at least `bytes` bytes, 64-byte aligned; throws ember::Error at once when
  // `bytes` exceeds capacity(), and when the system is out of memory.
  void* allocate(std::size_t bytes);
  void deallocate(void* p, std::size_t bytes);
  backend::MemoryStats stats() const;
  void empty_cache();

  static std::size_t size_class(std::size_t bytes);
  // The most this machine can ever give: its memory and swap (at most 2^62 bytes).
  static std::size_t capacity();

 private:
  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<void*>> free_;
  std::size_t in_use_ = 0, reserved_ = 0, peak_ = 0;
};

// A block of memory from a CpuAllocator, shared by every view of it.
class Buffer {
 public:
  Buffer(CpuAllocator& alloc, std::size_t bytes)
      : alloc_(alloc), bytes_(bytes), data_(alloc.allocate(bytes)) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { alloc_.deallocate(data_, bytes_); }
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  CpuAllocator& alloc_;
  std::size_t bytes_;
  void* data_;
};

}  // namespace ember::cpu
