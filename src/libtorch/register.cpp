// libember_libtorch.so's one entry point: libember's registry loads this library on first
// use of "libtorch" or "libtorch_cuda" (src/backend/backend_library.cpp) and calls
// ember_register_backend_libtorch, which registers both. Nothing here runs at load time.
#include <cstring>
#include <string>

#include "ember/backend/registry.hpp"
#include "libtorch/libtorch_backend.hpp"

#ifndef EMBER_VERSION_STRING
#error "EMBER_VERSION_STRING must name this build's version (CMakeLists.txt sets it)"
#endif

extern "C" __attribute__((visibility("default"))) void ember_register_backend_libtorch(
    ember::backend::Registry* registry, const char* ember_version) {
  using namespace ember;
  // The library calls libember's C++ internals, so it must come from the same version.
  if (ember_version == nullptr || std::strcmp(ember_version, EMBER_VERSION_STRING) != 0) {
    const std::string why = std::string("libember_libtorch.so is ember ") + EMBER_VERSION_STRING +
                            " but libember is ember " +
                            (ember_version ? ember_version : "(unknown)");
    registry->add_unavailable("libtorch", why, /*indexed=*/false);
    registry->add_unavailable("libtorch_cuda", why);
    return;
  }
  backend::BackendInfo cpu_info;
  cpu_info.indexed = false;
  registry->add_backend(
      "libtorch", [](int) { return libtorch::make_libtorch_backend(); }, cpu_info);
  backend::BackendInfo cuda_info;
  cuda_info.device_count = [] { return libtorch::libtorch_cuda_device_count(); };
  cuda_info.why_none = [] { return libtorch::libtorch_cuda_no_device_reason(); };
  registry->add_backend(
      "libtorch_cuda", [](int index) { return libtorch::make_libtorch_cuda_backend(index); },
      cuda_info);
}
