// Gradients and the autodiff methods of Tensor. A backward pass returns a Gradients: a
// movable container of the gradients of the require_grad leaves behind the loss, living
// on the autodiff device's inner device. x.grad(grads) looks one up; x.grad_remove(grads)
// takes it out (an optimizer consumes gradients that way).
//
// The tensor layer does not know the Autodiff decorator: it reaches it through the
// backend::AutodiffBackend capability of a device's backend (DESIGN §1 layering).
#pragma once

#include <cstddef>
#include <optional>
#include <utility>

#include "ember/backend/autodiff_interface.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember {

class Gradients {
 public:
  Gradients() = default;
  explicit Gradients(backend::GradientsStore store) : store_(std::move(store)) {}
  Gradients(Gradients&&) noexcept = default;
  Gradients& operator=(Gradients&&) noexcept = default;
  Gradients(const Gradients&) = delete;
  Gradients& operator=(const Gradients&) = delete;

  // Number of leaf gradients held.
  std::size_t size() const { return store_.size(); }
  bool empty() const { return store_.empty(); }
  const backend::GradientsStore& store() const { return store_; }
  backend::GradientsStore& store() { return store_; }

 private:
  backend::GradientsStore store_;
};

namespace ops {
// The autodiff functions over DynTensor (src/tensor/ops_autodiff.cpp). Those that need an
// autodiff device throw ember::Error naming the device otherwise.
DynTensor require_grad(DynTensor x);
bool is_require_grad(const DynTensor& x);
DynTensor detach(DynTensor x);  // on a plain device: x itself
Gradients backward(const DynTensor& x);
std::optional<DynTensor> grad(const DynTensor& x, const Gradients& grads);
std::optional<DynTensor> grad_remove(const DynTensor& x, Gradients& grads);
DynTensor inner(const DynTensor& x);  // same values on the inner device, outside any graph
// x (on a plain device) onto autodiff_device, whose inner device must be x's.
DynTensor from_inner(const DynTensor& x, const Device& autodiff_device);
}  // namespace ops

template <std::size_t D, class K>
Tensor<D, K> Tensor<D, K>::require_grad() const {
  return Tensor(ops::require_grad(t_));
}
template <std::size_t D, class K>
bool Tensor<D, K>::is_require_grad() const {
  return ops::is_require_grad(t_);
}
template <std::size_t D, class K>
Tensor<D, K> Tensor<D, K>::detach() const {
  return Tensor(ops::detach(t_));
}
template <std::size_t D, class K>
Gradients Tensor<D, K>::backward() const {
  return ops::backward(t_);
}
template <std::size_t D, class K>
std::optional<Tensor<D, K>> Tensor<D, K>::grad(const Gradients& grads) const {
  auto g = ops::grad(t_, grads);
  if (!g) return std::nullopt;
  return Tensor(std::move(*g));
}
template <std::size_t D, class K>
std::optional<Tensor<D, K>> Tensor<D, K>::grad_remove(Gradients& grads) const {
  auto g = ops::grad_remove(t_, grads);
  if (!g) return std::nullopt;
  return Tensor(std::move(*g));
}
template <std::size_t D, class K>
Tensor<D, K> Tensor<D, K>::inner() const {
  return Tensor(ops::inner(t_));
}
template <std::size_t D, class K>
Tensor<D, K> Tensor<D, K>::from_inner(const Tensor& t) {
  return Tensor(ops::from_inner(t.t_, t.device().autodiff()));
}
template <std::size_t D, class K>
Tensor<D, K> Tensor<D, K>::from_inner(const Tensor& t, const Device& autodiff_device) {
  return Tensor(ops::from_inner(t.t_, autodiff_device));
}

}  // namespace ember
