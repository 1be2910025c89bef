// The Cuda backend: NVRTC-generated kernels, cuBLASLt matmul, a stream-ordered caching
// allocator, every op asynchronous until a read. See docs/backends/cuda.md.
#pragma once

#include <memory>
#include <string>

#include "ember/backend/backend.hpp"

namespace ember::cuda {

// The backend of GPU `index`. Throws ember::Error when the device cannot be used.
std::shared_ptr<backend::Backend> make_cuda_backend(int index);
// GPUs usable now; 0, never an exception, without a driver or a GPU.
int cuda_device_count();
// Why cuda_device_count() is 0 (no driver, no GPU: the CUDA runtime's message).
std::string cuda_no_device_reason();

}  // namespace ember::cuda
