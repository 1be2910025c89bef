// StridedTensor: the tensor handle of every backend whose memory is a buffer addressed by
// element offsets — a strided view (shape, strides and offset in elements) into a buffer
// shared by every view of it. The Cpu (host memory) and Cuda (device memory) handles are
// this template over their own Buffer type; a Vulkan or any other buffer-based backend
// reuses it. Also here: the in-place reuse rule and the view ops, which only rewrite the
// layout (strided_view.hpp holds their arithmetic).
//
// Buffer needs `void* data() const` (the address of element 0 of the buffer, host or
// device) and `std::size_t bytes() const` (the bytes it was allocated with).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "ember/backend/strided_view.hpp"
#include "ember/ir/ops.hpp"

namespace ember::backend {

template <class Buffer>
class StridedTensor final : public ir::TensorNode {
 public:
  StridedTensor(std::shared_ptr<Buffer> buffer, Shape shape, DType dtype,
                std::vector<std::int64_t> strides, std::int64_t offset)
      : TensorNode(std::move(shape), dtype),
        buffer_(std::move(buffer)),
        strides_(std::move(strides)),
        offset_(offset) {}

  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  const std::vector<std::int64_t>& strides() const { return strides_; }
  std::int64_t offset() const { return offset_; }
  // Address of element 0 of the view (a host or a device address, as the buffer's).
  std::byte* data() const {
    return static_cast<std::byte*>(buffer_->data()) + offset_ * std::int64_t(size_of(dtype_));
  }
  template <class T>
  T* data_as() const {
    return reinterpret_cast<T*>(data());
  }
  bool is_contiguous() const { return backend::is_contiguous(shape_, strides_); }
  StridedView layout() const { return {shape_, strides_, offset_}; }

 private:
  std::shared_ptr<Buffer> buffer_;
  std::vector<std::int64_t> strides_;
  std::int64_t offset_;
};

// Note [In-place reuse]: an op may write its output into an operand's buffer when
//  - the op holds the only reference to that operand's handle (the caller moved it in),
//  - nothing else shares the buffer (no other view, no cached constant, no saved tensor),
//  - and the operand is a contiguous view of the whole buffer — offset 0, the buffer's
//    exact byte count — with the output's shape and dtype (so it is not broadcast).
// Any other reference makes a use count exceed one, so results never depend on whether
// other references exist (clone invariance). "The whole buffer" is `==`, not `>=`: a
// contiguous prefix (x[0:1] of a large x, whose parent was dropped) is written fresh, so
// an output never keeps alive memory it does not address; and an empty tensor (a one-byte
// allocation holding no element) is never reused. Every backend applies this one rule.
// Whether the op that holds x may write an output of shape and dtype into x's buffer
// (Note [In-place reuse]). x is a StridedTensor<Buffer> handle, or null.
template <class Buffer>
bool reusable(const ir::Handle& x, const Shape& shape, DType dtype) {
  if (!x || x.use_count() != 1) return false;
  const auto& t = static_cast<const StridedTensor<Buffer>&>(*x);
  if (t.buffer().use_count() != 1 || t.offset() != 0 || t.dtype() != dtype || t.shape() != shape ||
      !t.is_contiguous()) {
    return false;
  }
  const std::size_t bytes = t.buffer()->bytes();
  return bytes > 0 && bytes == shape.num_elements() * size_of(dtype);
}

// ---- view ops: a new handle on x's buffer with another layout, no data moved ----

template <class Buffer>
std::shared_ptr<StridedTensor<Buffer>> with_layout(const StridedTensor<Buffer>& x, StridedView v) {
  return std::make_shared<StridedTensor<Buffer>>(x.buffer(), std::move(v.shape), x.dtype(),
                                                 std::move(v.strides), v.offset);
}

// Reshape as a view where the layout allows (reshape_view), else as a view of
// contiguous(x), the backend's contiguous copy (or x itself when already contiguous).
template <class Buffer, class Contiguous>
ir::Handle reshape(const ir::Reshape& op, Contiguous&& contiguous) {
  const auto& x = static_cast<const StridedTensor<Buffer>&>(*op.x);
  if (auto v = reshape_view(x.layout(), op.shape)) return with_layout(x, std::move(*v));
  auto c = contiguous(op.x);
  return with_layout(*c, {op.shape, contiguous_strides(op.shape), c->offset()});
}
template <class Buffer>
ir::Handle permute(const ir::Permute& op) {
  const auto& x = static_cast<const StridedTensor<Buffer>&>(*op.x);
  return with_layout(x, permute_view(x.layout(), op.axes));
}
template <class Buffer>
ir::Handle expand(const ir::Expand& op) {
  const auto& x = static_cast<const StridedTensor<Buffer>&>(*op.x);
  return with_layout(x, expand_view(x.layout(), op.shape));
}
template <class Buffer>
ir::Handle slice(const ir::Slice& op) {
  const auto& x = static_cast<const StridedTensor<Buffer>&>(*op.x);
  return with_layout(x, slice_view(x.layout(), op.ranges));
}
template <class Buffer>
ir::Handle flip(const ir::Flip& op) {
  const auto& x = static_cast<const StridedTensor<Buffer>&>(*op.x);
  return with_layout(x, flip_view(x.layout(), op.axes));
}

}  // namespace ember::backend
