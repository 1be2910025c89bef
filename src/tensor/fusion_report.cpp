#include "ember/tensor/fusion_report.hpp"

#include "ember/base/error.hpp"

namespace ember::fusion {

namespace {
backend::FusionInspector* find(const Device& device) {
  for (backend::Backend* b = &device.backend(); b; b = b->inner().get()) {
    if (auto* f = b->fusion_inspector()) return f;
  }
  return nullptr;
}
backend::FusionInspector& get(const Device& device, const char* fn) {
  auto* f = find(device);
  EMBER_CHECK(f != nullptr, std::string(fn) + ": " + device.name() +
                                " has no fusion decorator (use Device::fusion())");
  return *f;
}
}  // namespace

FusionReport report(const Device& device) { return get(device, "fusion::report").report(); }
void reset_report(const Device& device) { get(device, "fusion::reset_report").reset_report(); }
bool is_fused(const Device& device) { return find(device) != nullptr; }

}  // namespace ember::fusion
