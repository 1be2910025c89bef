// The autodiff functions of the tensor API: they find the device's AutodiffBackend
// capability and convert between its handles and DynTensors (see gradients.hpp).
#include "ember/tensor/gradients.hpp"
#include "tensor/op_support.hpp"

namespace ember::ops {

namespace {
backend::AutodiffBackend* find(const Device& d) { return d.backend().autodiff(); }
backend::AutodiffBackend& need(const DynTensor& x, const char* op) {
  auto* ad = find(x.device());
  EMBER_CHECK(ad != nullptr, std::string(op) + ": the tensor (shape " + x.shape().to_string() +
                                 ") is on " + x.device().name() +
                                 ", not an autodiff device (use Device::autodiff())");
  return *ad;
}
}  // namespace

DynTensor require_grad(DynTensor x) {
  auto& ad = need(x, "require_grad");
  detail::check_kind(x, {Kind::Float}, "require_grad");
  const Device dev = x.device();
  return DynTensor(ad.require_grad(x.handle()), dev);
}

bool is_require_grad(const DynTensor& x) {
  auto* ad = find(x.device());
  return ad != nullptr && ad->is_require_grad(x.handle());
}

bool detail::is_tracked(const DynTensor& x) {
  auto* ad = find(x.device());
  return ad != nullptr && ad->is_tracked(x.handle());
}

DynTensor detach(DynTensor x) {
  auto* ad = find(x.device());
  if (!ad) return x;
  const Device dev = x.device();
  return DynTensor(ad->detach(x.handle()), dev);
}

Gradients backward(const DynTensor& x) {
  auto& ad = need(x, "backward");
  return Gradients(ad.backward(x.handle()));
}

std::optional<DynTensor> grad(const DynTensor& x, const Gradients& grads) {
  auto& ad = need(x, "grad");
  auto key = ad.grad_key(x.handle());
  if (!key) return std::nullopt;
  const ir::Handle* h = grads.store().find(*key);
  if (!h) return std::nullopt;
  return DynTensor(*h, x.device().inner());
}

std::optional<DynTensor> grad_remove(const DynTensor& x, Gradients& grads) {
  auto& ad = need(x, "grad_remove");
  auto key = ad.grad_key(x.handle());
  if (!key) return std::nullopt;
  auto h = grads.store().remove(*key);
  if (!h) return std::nullopt;
  return DynTensor(std::move(*h), x.device().inner());
}

DynTensor inner(const DynTensor& x) {
  auto& ad = need(x, "inner");
  return DynTensor(ad.to_inner(x.handle()), x.device().inner());
}

DynTensor from_inner(const DynTensor& x, const Device& autodiff_device) {
  auto* ad = find(autodiff_device);
  EMBER_CHECK(ad != nullptr,
              "from_inner: " + autodiff_device.name() + " is not an autodiff device");
  EMBER_CHECK(autodiff_device.inner() == x.device(),
              "from_inner: the tensor is on " + x.device().name() + ", but " +
                  autodiff_device.name() + " wraps " + autodiff_device.inner().name());
  return DynTensor(ad->from_inner(x.handle()), autodiff_device);
}

}  // namespace ember::ops
