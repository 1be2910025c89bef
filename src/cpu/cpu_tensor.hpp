// CpuTensor: the Cpu backend's tensor handle — a strided view (offset and strides in
// elements) into a shared host Buffer: backend::StridedTensor (ember/backend/
// strided_tensor.hpp), the layout every buffer-based backend shares. Views share buffers;
// kernels always write fresh contiguous outputs unless they reuse a sole-owned input (Note
// [In-place reuse] there).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/allocator.hpp"
#include "ember/backend/strided_tensor.hpp"
#include "ember/backend/strided_view.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cpu {

using Strides = std::vector<std::int64_t>;

using backend::contiguous_strides;

using CpuTensor = backend::StridedTensor<Buffer>;

inline const CpuTensor& as_cpu(const ir::Handle& h) { return static_cast<const CpuTensor&>(*h); }

}  // namespace ember::cpu
