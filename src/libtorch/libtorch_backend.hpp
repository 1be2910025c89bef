// The LibTorch backend: ATen tensors as the primitive and ATen's kernels running the IR
// ops, with ember's exact semantics where ATen's differ. See docs/backends/libtorch.md.
// This header does not include ATen: only libtorch_backend.cpp does.
#pragma once

#include <memory>
#include <string>

#include "ember/backend/backend.hpp"

namespace ember::libtorch {

// ATen's CPU device ("libtorch").
std::shared_ptr<backend::Backend> make_libtorch_backend();
// ATen's CUDA device `index` ("libtorch_cuda:<index>"); throws ember::Error where it
// cannot be used.
std::shared_ptr<backend::Backend> make_libtorch_cuda_backend(int index);
// CUDA devices ATen can use now: 0 where the libtorch this library was built with has no
// CUDA, or where no driver or GPU is present. Never throws.
int libtorch_cuda_device_count();
// Why libtorch_cuda_device_count() is 0.
std::string libtorch_cuda_no_device_reason();

}  // namespace ember::libtorch
