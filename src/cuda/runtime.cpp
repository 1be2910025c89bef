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

std::size_t Allocator::round(std::size_t bytes) {
  constexpr std::size_t kSmall = 512, kLarge = std::size_t(2) << 20, kSplit = std::size_t(1) << 20;
  if (bytes == 0) bytes = 1;
  if (bytes < kSplit) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

Allocator::~Allocator() {
  std::lock_guard lk(mu_);
  free_cached_locked();
}

void* Allocator::allocate(std::size_t bytes, std::size_t& rounded) {
  rounded = round(bytes);
  std::lock_guard lk(mu_);
  // A cached block of this class, or (large sizes) one at most 25% bigger.
  auto it = free_.lower_bound(rounded);
  if (it != free_.end() && it->first <= rounded + rounded / 4) {
    rounded = it->first;
    void* p = it->second;
    free_.erase(it);
    in_use_ += rounded;
    peak_ = std::max(peak_, in_use_);
    return p;
  }
  int prev = 0;
  cudaGetDevice(&prev);
  if (prev != device_) cudaSetDevice(device_);
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, rounded);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    free_cached_locked();
    e = cudaMalloc(&p, rounded);
  }
  if (prev != device_) cudaSetDevice(prev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("cuda: out of memory allocating " + std::to_string(bytes) + " bytes on device " +
         std::to_string(device_) + " (" + std::to_string(in_use_) + " bytes in use, " +
         std::to_string(reserved_) + " reserved): " + cudaGetErrorString(e));
  }
  reserved_ += rounded;
  in_use_ += rounded;
  peak_ = std::max(peak_, in_use_);
  return p;
}

void Allocator::release(void* p, std::size_t rounded) {
  std::lock_guard lk(mu_);
  in_use_ -= rounded;
  free_.emplace(rounded, p);
}

void Allocator::free_cached_locked() {
  if (free_.empty()) return;
  int prev = 0;
  cudaGetDevice(&prev);
  if (prev != device_) cudaSetDevice(device_);
  // cudaFree waits for the device, so no queued kernel still uses these blocks.
  for (auto& [size, p] : free_) {
    cudaFree(p);
    reserved_ -= size;
  }
  free_.clear();
  if (prev != device_) cudaSetDevice(prev);
}

backend::MemoryStats Allocator::stats() const {
  std::lock_guard lk(mu_);
  return {in_use_, reserved_, peak_};
}

void Allocator::empty_cache() {
  std::lock_guard lk(mu_);
  free_cached_locked();
}

}  // namespace ember::cuda
