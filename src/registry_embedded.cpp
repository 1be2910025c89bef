// The registry file of an embedded build (EMBER_EMBEDDED; compiled in place of
// src/registry.cpp, see docs/embedded.md): the Cpu backend and the autodiff decorator, or
// the Cpu alone where EMBER_EMBEDDED_AUTODIFF is 0 (an inference-only build: Device::
// autodiff() then fails saying the decorator is not part of the build). The fusion
// decorator and the other backends are not part of such a build; the backends are
// registered as unavailable with why.
#ifndef EMBER_EMBEDDED_AUTODIFF
#define EMBER_EMBEDDED_AUTODIFF 1
#endif

#include "cpu/cpu_backend.hpp"
#include "ember/backend/registry.hpp"
#if EMBER_EMBEDDED_AUTODIFF
#include "ember/autodiff/autodiff.hpp"
#endif

namespace ember::backend {

void register_builtin_backends(Registry& registry) {
  BackendInfo cpu_info;
  cpu_info.indexed = false;
  cpu_info.fallback = true;
  registry.add_backend(
      "cpu", [](int) { return cpu::make_cpu_backend(); }, cpu_info);
#if EMBER_EMBEDDED_AUTODIFF
  registry.add_decorator("autodiff", [](std::shared_ptr<Backend> inner) {
    return autodiff::make_autodiff_backend(std::move(inner), Checkpointing::None);
  });
  registry.add_decorator("autodiff_balanced", [](std::shared_ptr<Backend> inner) {
    return autodiff::make_autodiff_backend(std::move(inner), Checkpointing::Balanced);
  });
#endif
  const char* why = "not part of an embedded build (EMBER_EMBEDDED: the Cpu backend only)";
  for (const char* name : {"cuda", "vulkan", "libtorch_cuda"}) registry.add_unavailable(name, why);
  registry.add_unavailable("libtorch", why, /*indexed=*/false);
}

}  // namespace ember::backend
