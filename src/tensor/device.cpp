#include "ember/tensor/device.hpp"

#include "ember/backend/registry.hpp"
#include "ember/base/error.hpp"

namespace ember {

using backend::Registry;

Device Device::cpu() { return Device(Registry::global().backend("cpu", 0)); }
Device Device::cuda(int index) { return Device(Registry::global().backend("cuda", index)); }
Device Device::vulkan(int index) { return Device(Registry::global().backend("vulkan", index)); }
Device Device::libtorch() { return Device(Registry::global().backend("libtorch", 0)); }
std::vector<std::string> Device::available() { return Registry::global().available(); }

Device Device::autodiff() const {
  return Device(Registry::global().decorate("autodiff", backend_));
}
Device Device::autodiff(Checkpointing checkpointing) const {
  const char* name = checkpointing == Checkpointing::Balanced ? "autodiff_balanced" : "autodiff";
  return Device(Registry::global().decorate(name, backend_));
}
Device Device::fusion() const { return Device(Registry::global().decorate("fusion", backend_)); }

Device Device::inner() const {
  auto in = backend_->inner();
  EMBER_CHECK(in != nullptr, "Device::inner: " + name() + " is not a decorated device");
  return Device(std::move(in));
}

bool Device::is_autodiff() const {
  return dynamic_cast<const backend::AutodiffBackend*>(backend_.get()) != nullptr;
}
std::string Device::name() const { return backend_->name(); }
void Device::sync() const { backend_->sync(); }
void Device::seed(std::uint64_t seed) const { backend_->seed(seed); }

MemoryStats memory_stats(const Device& device) { return device.backend().memory_stats(); }
void empty_cache(const Device& device) { device.backend().empty_cache(); }

}  // namespace ember
