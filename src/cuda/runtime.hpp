// CUDA runtime plumbing shared by the Cuda backend: error checks that turn CUDA failures
// into ember::Error (CUDA's message and the op), the device count that never throws, and
// the caching allocator's device buffers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ember/backend/backend.hpp"

namespace ember::cuda {

// Throws ember::Error "cuda: <what>: <CUDA's name>: <CUDA's message>" when e is an error.
void check(cudaError_t e, const std::string& what);

// GPUs usable now; 0 (never an exception) without a driver or a device.
int device_count();

// A stream-ordered caching allocator for one device. All of a backend's work runs on one
// stream, so a block freed on the host may be handed to the next allocation at once: any
// later use is ordered after the earlier kernels on that stream. Sizes are rounded to
// classes (512 B steps below 1 MiB, 2 MiB steps above) and cached in per-size free lists;
// on cudaErrorMemoryAllocation the cache is returned to the driver and the allocation
// retried once, then ember::Error is thrown and the device keeps working.
class Allocator {
 public:
  explicit Allocator(int device) : device_(device) {}
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  void* allocate(std::size_t bytes, std::size_t& rounded);
  void release(void* p, std::size_t rounded);
  backend::MemoryStats stats() const;
  void empty_cache();
  static std::size_t round(std::size_t bytes);

 private:
  void free_cached_locked();
  int device_;
  mutable std::mutex mu_;
  std::multimap<std::size_t, void*> free_;
  std::size_t in_use_ = 0, reserved_ = 0, peak_ = 0;
};

// Device memory of one tensor buffer; returned to the allocator's cache when the last
// view of it dies.
class DeviceBuffer {
 public:
  DeviceBuffer(std::shared_ptr<Allocator> alloc, std::size_t bytes)
      : alloc_(std::move(alloc)), ptr_(alloc_->allocate(bytes, rounded_)), bytes_(bytes) {}
  ~DeviceBuffer() {
    if (ptr_) alloc_->release(ptr_, rounded_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<Allocator> alloc_;
  std::size_t rounded_ = 0;
  void* ptr_;
  std::size_t bytes_;
};

}  // namespace ember::cuda
