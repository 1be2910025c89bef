// libember_vulkan.so's one entry point: libember's registry loads this library on first
// use of "vulkan" (src/backend/backend_library.cpp) and calls ember_register_backend_vulkan,
// which registers the backend. Nothing here runs at load time (no static initializers).
#include <cstring>
#include <string>

#include "ember/backend/registry.hpp"
#include "vulkan/vulkan_backend.hpp"

#ifndef EMBER_VERSION_STRING
#error "EMBER_VERSION_STRING must name this build's version (CMakeLists.txt sets it)"
#endif

extern "C" __attribute__((visibility("default"))) void ember_register_backend_vulkan(
    ember::backend::Registry* registry, const char* ember_version) {
  using namespace ember;
  // The library calls libember's C++ internals, so it must come from the same version.
  if (ember_version == nullptr || std::strcmp(ember_version, EMBER_VERSION_STRING) != 0) {
    registry->add_unavailable("vulkan", std::string("libember_vulkan.so is ember ") +
                                            EMBER_VERSION_STRING + " but libember is ember " +
                                            (ember_version ? ember_version : "(unknown)"));
    return;
  }
  registry->add_backend(
      "vulkan", [](int index) { return vulkan::make_vulkan_backend(index); },
      backend::BackendInfo{.indexed = true,
                           .device_count = [] { return vulkan::vulkan_device_count(); },
                           .why_none = [] { return vulkan::vulkan_no_device_reason(); }});
}
