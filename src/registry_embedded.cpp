// The registry file of an embedded build (EMBER_EMBEDDED; compiled in place of
// src/registry.cpp, see docs/embedded.md): the Cpu backend alone. The decorators and the
// other backends are not part of such a build and are registered as unavailable with why.
#include "cpu/cpu_backend.hpp"
#include "ember/backend/registry.hpp"

namespace ember::backend {

void register_builtin_backends(Registry& registry) {
  BackendInfo cpu_info;
  cpu_info.indexed = false;
  cpu_info.fallback = true;
  registry.add_backend(
      "cpu", [](int) { return cpu::make_cpu_backend(); }, cpu_info);
  const char* why = "not part of an embedded build (EMBER_EMBEDDED: the Cpu backend only)";
  for (const char* name : {"cuda", "vulkan", "libtorch_cuda"}) registry.add_unavailable(name, why);
  registry.add_unavailable("libtorch", why, /*indexed=*/false);
}

}  // namespace ember::backend
