// CUDA error checks, device discovery and the caching allocator (runtime.hpp).
#include "cuda/runtime.hpp"

#include "ember/base/error.hpp"

namespace ember::cuda {

void check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the device keeps working
  fail("cuda: " + what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess) return n == 0 ? "the CUDA runtime reports no device" : "";
  cudaGetLastError();
  return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}

namespace {
// Makes `device` current for the scope: segments may be mapped or unmapped from any thread.
class OnDevice {
 public:
  explicit OnDevice(int device) : device_(device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      cudaGetLastError();
      prev_ = device;
    }
    if (prev_ != device_) check(cudaSetDevice(device_), "cudaSetDevice");
  }
  ~OnDevice() {
    if (prev_ != device_) cudaSetDevice(prev_);
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int device_, prev_ = 0;
};
}  // namespace

std::uintptr_t Allocator::Segments::map(std::size_t bytes) {
  OnDevice on(device_);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return 0;
  }
  check(e, "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  return reinterpret_cast<std::uintptr_t>(p);
}

void Allocator::Segments::unmap(std::uintptr_t addr, std::size_t) {
  OnDevice on(device_);
  // cudaFree waits for the device, so no queued kernel still uses the segment.
  cudaFree(reinterpret_cast<void*>(addr));
  cudaGetLastError();
}

Allocator::Allocator(int device)
    : segments_(device), blocks_(segments_, "device " + std::to_string(device)) {}

void* Allocator::allocate(std::size_t bytes) {
  return reinterpret_cast<void*>(blocks_.allocate(bytes));
}

void Allocator::release(void* p) { blocks_.release(reinterpret_cast<std::uintptr_t>(p)); }

}  // namespace ember::cuda
