// CUDA runtime plumbing shared by the Cuda backend: error checks that turn CUDA failures
// into ember::Error (CUDA's message and the op), the device count that never throws, and
// the caching allocator's device buffers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cuda/block_allocator.hpp"
#include "ember/backend/backend.hpp"

namespace ember::cuda {

// Throws ember::Error "cuda: <what>: <CUDA's name>: <CUDA's message>" when e is an error.
void check(cudaError_t e, const std::string& what);

// GPUs usable now; 0 (never an exception) without a driver or a device.
int device_count();
// Why device_count() is 0, in the CUDA runtime's words ("cudaGetDeviceCount:
// cudaErrorNoDevice: no CUDA-capable device is detected"); empty when it is not.
std::string no_device_reason();

// A stream-ordered caching allocator for one device: BlockAllocator's segments and blocks
// (block_allocator.hpp) over cudaMalloc'd segments. All of a backend's work runs on one
// stream, so a block freed on the host may be handed to the next allocation at once: any
// later use is ordered after the earlier kernels on that stream. On
// cudaErrorMemoryAllocation the wholly free segments are returned to the driver and the
// segment asked for once more, then ember::Error is thrown and the device keeps working.
class Allocator {
 public:
  explicit Allocator(int device);
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  void* allocate(std::size_t bytes);
  void release(void* p);
  backend::MemoryStats stats() const { return blocks_.stats(); }
  void empty_cache() { blocks_.empty_cache(); }

 private:
  class Segments final : public SegmentSource {
   public:
    explicit Segments(int device) : device_(device) {}
    std::uintptr_t map(std::size_t bytes) override;
    void unmap(std::uintptr_t addr, std::size_t bytes) override;

   private:
    int device_;
  };
  Segments segments_;  // declared first: outlives blocks_, which unmaps through it
  BlockAllocator blocks_;
};

// Device memory of one tensor buffer; returned to the allocator's cache when the last
// view of it dies.
class DeviceBuffer {
 public:
  DeviceBuffer(std::shared_ptr<Allocator> alloc, std::size_t bytes)
      : alloc_(std::move(alloc)), ptr_(alloc_->allocate(bytes)), bytes_(bytes) {}
  ~DeviceBuffer() {
    if (ptr_) alloc_->release(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<Allocator> alloc_;
  void* ptr_;
  std::size_t bytes_;
};

}  // namespace ember::cuda
