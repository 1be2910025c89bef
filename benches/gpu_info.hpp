// What ember-bench reports about a GPU, measured with the CUDA runtime directly (never the
// driver library): the device's name and its device-to-device copy bandwidth, the memory
// ceiling of the GPU roofline. Without the Cuda backend in the build, gpu_info throws.
#pragma once

#include <string>

namespace ember::bench {

struct GpuInfo {
  std::string name;     // e.g. "NVIDIA H200"
  std::string memory;   // e.g. "141 GiB"
  double copy_gbs = 0;  // cudaMemcpyAsync of 256 MB device to device, reads + writes
};

// Throws std::runtime_error when the build has no Cuda backend or the device is missing.
GpuInfo gpu_info(int device, bool measure_copy);

}  // namespace ember::bench
