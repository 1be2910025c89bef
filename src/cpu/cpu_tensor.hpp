// CpuTensor: the Cpu backend's tensor handle — a strided view (offset and strides in
// elements) into a shared Buffer. Views share buffers; kernels always write fresh
// contiguous outputs unless they reuse a sole-owned input (Note [In-place reuse]).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/allocator.hpp"
#include "ember/backend/strided_view.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cpu {

using Strides = std::vector<std::int64_t>;

using backend::contiguous_strides;

class CpuTensor final : public ir::TensorNode {
 public:
  CpuTensor(std::shared_ptr<Buffer> buffer, Shape shape, DType dtype, Strides strides,
            std::int64_t offset)
      : TensorNode(std::move(shape), dtype),
        buffer_(std::move(buffer)),
        strides_(std::move(strides)),
        offset_(offset) {}

  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  const Strides& strides() const { return strides_; }
  std::int64_t offset() const { return offset_; }
  // Address of element 0 of the view.
  std::byte* data() const {
    return static_cast<std::byte*>(buffer_->data()) + offset_ * std::int64_t(size_of(dtype_));
  }
  template <class T>
  T* data_as() const {
    return reinterpret_cast<T*>(data());
  }
  bool is_contiguous() const;

 private:
  std::shared_ptr<Buffer> buffer_;
  Strides strides_;
  std::int64_t offset_;
};

inline const CpuTensor& as_cpu(const ir::Handle& h) { return static_cast<const CpuTensor&>(*h); }

}  // namespace ember::cpu
