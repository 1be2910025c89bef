// The one place that registers this build's backends and decorators (DESIGN §1: an
// explicit call, never static initializers). The Cpu backend and the decorators are part
// of libember; backends with heavy dependencies are libraries of their own, loaded on first
// use (src/backend/backend_library.cpp), so a program runs on the Cpu where, say, the CUDA
// libraries are missing, and Device::unavailable() / Device::cuda(0) say why. Backends not
// in this build are registered as unavailable with the reason, never as "unknown".
#include "ember/backend/registry.hpp"
#include "cpu/cpu_backend.hpp"
#include "ember/autodiff/autodiff.hpp"
#include "ember/fusion/fusion.hpp"

namespace ember::backend {

void register_builtin_backends(Registry& registry) {
  // The Cpu is one device ("cpu") and the fallback for what another backend does not run.
  BackendInfo cpu_info;
  cpu_info.indexed = false;
  cpu_info.fallback = true;
  registry.add_backend(
      "cpu", [](int) { return cpu::make_cpu_backend(); }, cpu_info);
  registry.add_decorator("autodiff", [](std::shared_ptr<Backend> inner) {
    return autodiff::make_autodiff_backend(std::move(inner), Checkpointing::None);
  });
  registry.add_decorator("autodiff_balanced", [](std::shared_ptr<Backend> inner) {
    return autodiff::make_autodiff_backend(std::move(inner), Checkpointing::Balanced);
  });
  registry.add_decorator("fusion", [](std::shared_ptr<Backend> inner) {
    return fusion::make_fusion_backend(std::move(inner));
  });
#ifdef EMBER_WITH_CUDA
  // libember_cuda.so (src/cuda/register.cpp). Without a driver or GPU its device count is
  // 0, and the reason is the CUDA runtime's.
  registry.add_library_backend("cuda");
#else
  registry.add_unavailable("cuda",
                           "the Cuda backend is not part of this build (configured with "
                           "EMBER_CUDA=OFF, or where no CUDA toolkit was found)");
#endif
#ifdef EMBER_WITH_VULKAN
  // libember_vulkan.so (src/vulkan/register.cpp). Without a Vulkan driver its device count
  // is 0, and the reason is the loader's.
  registry.add_library_backend("vulkan");
#else
  registry.add_unavailable("vulkan",
                           "the Vulkan backend is not part of this build (configured with "
                           "EMBER_VULKAN=OFF, or where the Vulkan loader or shaderc was not "
                           "found: libvulkan-dev, libshaderc-dev, glslang-dev, spirv-tools)");
#endif
#ifdef EMBER_WITH_LIBTORCH
  // libember_libtorch.so (src/libtorch/register.cpp) registers both: ATen's CPU kernels, and
  // its CUDA kernels where that libtorch has CUDA (otherwise libtorch_cuda has no device,
  // and unavailable() says why).
  registry.add_library_backend("libtorch", /*indexed=*/false);
  registry.add_library_backend("libtorch_cuda", /*indexed=*/true, "libtorch");
#else
  const char* no_libtorch =
      "the LibTorch backend is not part of this build (configured with EMBER_LIBTORCH=OFF, "
      "or where libtorch-dev was not found)";
  registry.add_unavailable("libtorch", no_libtorch, /*indexed=*/false);
  registry.add_unavailable("libtorch_cuda", no_libtorch);
#endif
}

}  // namespace ember::backend
