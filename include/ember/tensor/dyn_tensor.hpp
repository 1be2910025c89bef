// DynTensor: a tensor whose rank is known at run time — a handle on its device's backend.
// It is what Tensor<D, K> wraps and what generic code (the ONNX importer, the conformance
// harness) works with. The ops on it are the free functions of ember/tensor/ops.hpp.
#pragma once

#include <cstddef>
#include <utility>

#include "ember/base/tensor_data.hpp"
#include "ember/ir/ops.hpp"
#include "ember/tensor/device.hpp"

namespace ember {

class DynTensor {
 public:
  DynTensor(ir::Handle handle, Device device)
      : handle_(std::move(handle)), device_(std::move(device)) {}
  static DynTensor from_data(const TensorData& data, const Device& device);

  const Shape& shape() const { return handle_->shape(); }
  std::size_t rank() const { return handle_->shape().rank(); }
  std::size_t num_elements() const { return handle_->shape().num_elements(); }
  DType dtype() const { return handle_->dtype(); }
  Kind kind() const { return kind_of(dtype()); }
  const Device& device() const { return device_; }
  const ir::Handle& handle() const& { return handle_; }
  ir::Handle handle() && { return std::move(handle_); }

  TensorData to_data() const;  // a sync point

 private:
  ir::Handle handle_;
  Device device_;
};

}  // namespace ember
