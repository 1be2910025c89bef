// The one place that registers this build's backends and decorators (DESIGN §1: an
// explicit call, never static initializers). Backends not in this build are registered as
// unavailable with the reason, so Device::cuda() says why rather than "unknown".
#include "cpu/cpu_backend.hpp"
#ifdef EMBER_WITH_CUDA
#include "cuda/cuda_backend.hpp"
#endif
#include "ember/autodiff/autodiff.hpp"
#include "ember/backend/registry.hpp"

namespace ember::backend {

void register_builtin_backends(Registry& registry) {
  // The Cpu is one device ("cpu") and the fallback for what another backend does not run.
  registry.add_backend(
      "cpu", [](int) { return cpu::make_cpu_backend(); }, [] { return 1; },
      BackendTraits{.indexed = false, .fallback = true});
  registry.add_decorator("autodiff", [](std::shared_ptr<Backend> inner) {
    return autodiff::make_autodiff_backend(std::move(inner), Checkpointing::None);
  });
  registry.add_decorator("autodiff_balanced", [](std::shared_ptr<Backend> inner) {
    return autodiff::make_autodiff_backend(std::move(inner), Checkpointing::Balanced);
  });
#ifdef EMBER_WITH_CUDA
  // device_count is 0 without a driver or GPU: Device::available() then omits "cuda" and
  // Device::cuda(0) throws "no CUDA device".
  registry.add_backend(
      "cuda", [](int index) { return cuda::make_cuda_backend(index); },
      [] { return cuda::cuda_device_count(); });
#else
  registry.add_unavailable("cuda",
                           "the Cuda backend is not part of this build (no CUDA toolkit found)");
#endif
  registry.add_unavailable("vulkan", "the Vulkan backend is not part of this build yet");
  registry.add_unavailable("libtorch", "the LibTorch backend is not part of this build yet");
}

}  // namespace ember::backend
