// The GPU facts of ember-bench's header and its copy ceiling (see gpu_info.hpp).
#include "gpu_info.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#ifdef EMBER_BENCH_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstdio>
#endif

namespace ember::bench {

#ifdef EMBER_BENCH_HAVE_CUDA
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  }
}

// Device memory released on every path out.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { check(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { check(cudaEventCreate(&e), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

// Best of three batches of 20 copies of 256 MB, after 3 warm-up copies.
double copy_bandwidth_gbs() {
  const std::size_t bytes = std::size_t(256) << 20;
  DeviceBuffer a(bytes), b(bytes);
  check(cudaMemset(a.p, 0, bytes), "cudaMemset");
  Event e0, e1;
  for (int i = 0; i < 3; ++i) {
    check(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  }
  float best_ms = 1e30f;
  const int n = 20;
  for (int batch = 0; batch < 3; ++batch) {
    check(cudaEventRecord(e0.e), "cudaEventRecord");
    for (int i = 0; i < n; ++i) {
      check(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
    }
    check(cudaEventRecord(e1.e), "cudaEventRecord");
    check(cudaEventSynchronize(e1.e), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0.e, e1.e), "cudaEventElapsedTime");
    best_ms = std::min(best_ms, ms / n);
  }
  return 2.0 * double(bytes) / (double(best_ms) * 1e-3) / 1e9;
}

}  // namespace

GpuInfo gpu_info(int device, bool measure_copy) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (device >= count) {
    throw std::runtime_error("no CUDA device " + std::to_string(device) + " (" +
                             std::to_string(count) + " found)");
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  GpuInfo g;
  g.name = prop.name;
  char mem[64];
  std::snprintf(mem, sizeof mem, "%.0f GiB, sm_%d%d", double(prop.totalGlobalMem) / (1 << 30),
                prop.major, prop.minor);
  g.memory = mem;
  if (measure_copy) g.copy_gbs = copy_bandwidth_gbs();
  return g;
}
#else
GpuInfo gpu_info(int, bool) {
  throw std::runtime_error("this ember-bench was built without the Cuda backend (EMBER_CUDA=OFF)");
}
#endif

}  // namespace ember::bench
