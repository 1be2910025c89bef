#include "ember/tensor/device.hpp"

#include "ember/backend/registry.hpp"
#include "ember/base/error.hpp"

namespace ember {

using backend::Registry;

Device Device::cpu() { return Device(Registry::global().backend("cpu", 0)); }
Device Device::cuda(int index) { return Device(Registry::global().backend("cuda", index)); }
Device Device::vulkan(int index) { return Device(Registry::global().backend("vulkan", index)); }
Device Device::libtorch() { return Device(Registry::global().backend("libtorch", 0)); }
Device Device::libtorch_cuda(int index) {
  return Device(Registry::global().backend("libtorch_cuda", index));
}
std::vector<std::string> Device::available() { return Registry::global().available(); }
std::vector<backend::UnavailableBackend> Device::unavailable() {
  return Registry::global().unavailable();
}

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  for (const std::string& n : names) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace

Device Device::parse(const std::string& name) {
  Registry& reg = Registry::global();
  const std::string where = "Device::parse(\"" + name + "\"): ";
  std::size_t plus = name.find('+');
  const std::string base = name.substr(0, plus);
  const std::size_t colon = base.find(':');
  const std::string backend_name = base.substr(0, colon);
  const std::vector<std::string> backends = reg.backend_names();
  EMBER_CHECK(contains(backends, backend_name),
              where + "unknown backend '" + backend_name + "' (known: " + join(backends) + ")");
  int index = 0;
  if (colon != std::string::npos) {
    const std::string digits = base.substr(colon + 1);
    EMBER_CHECK(
        reg.is_indexed(backend_name),
        where + "'" + backend_name + "' takes no device index (write \"" + backend_name + "\")");
    bool ok = !digits.empty() && digits.size() <= 9;
    for (char c : digits) ok = ok && c >= '0' && c <= '9';
    EMBER_CHECK(ok, where + "the device index '" + digits + "' is not a number (expected e.g. \"" +
                        backend_name + ":0\")");
    index = std::stoi(digits);
  }
  Device dev(reg.backend(backend_name, index));
  const std::vector<std::string> decorators = reg.decorator_names();
  while (plus != std::string::npos) {
    const std::size_t next = name.find('+', plus + 1);
    const std::string decorator =
        name.substr(plus + 1, next == std::string::npos ? std::string::npos : next - plus - 1);
    EMBER_CHECK(contains(decorators, decorator),
                where + "unknown decorator '" + decorator + "' (known: " + join(decorators) + ")");
    dev = Device(reg.decorate(decorator, dev.backend_ptr()));
    plus = next;
  }
  return dev;
}

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

bool Device::is_autodiff() const { return backend_->autodiff() != nullptr; }
std::string Device::name() const { return backend_->name(); }
void Device::sync() const { backend_->sync(); }
void Device::seed(std::uint64_t seed) const { backend_->seed(seed); }

MemoryStats memory_stats(const Device& device) { return device.backend().memory_stats(); }
void empty_cache(const Device& device) { device.backend().empty_cache(); }

}  // namespace ember
