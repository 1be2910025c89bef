// The Vulkan instance and the compute devices it finds, created once per process and never
// destroyed (backends live until the process exits). A device counts when it has a compute
// queue and what every kernel needs (Vulkan 1.1, VK_KHR_push_descriptor); the rest of its
// features (f64, i64, 16- and 8-bit types) decide what supports() answers.
#pragma once

#include <vulkan/vulkan.h>

#include <string>
#include <vector>

namespace ember::vulkan {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY", ...
const char* result_name(VkResult r);
// Throws ember::Error "<what>: <the call> failed with <result>" unless r is VK_SUCCESS.
void check(VkResult r, const char* what, const char* call);

struct Features {
  bool f64 = false, i64 = false, i16 = false, i8 = false, f16 = false;
  bool storage16 = false, storage8 = false;
  // Kernels may declare SignedZeroInfNanPreserve (VK_KHR_shader_float_controls), so that
  // -0, infinities and NaN keep IEEE semantics (x + 0 is not folded to x).
  bool preserve32 = false, preserve64 = false;
  // VK_NV_cooperative_matrix with the 16 x 16 x 16 shape of f16 A and B and f32 C and D at
  // subgroup scope, on 32-wide subgroups: what the cooperative-matrix matmul needs
  // (codegen.hpp, matmul_coop_spec). Debian's glslang prints GL_NV_cooperative_matrix (the
  // KHR extension's GLSL came later), which NVIDIA's driver runs.
  bool coopmat = false;
};

struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  std::uint32_t queue_family = 0;
  Features features;
  std::size_t max_allocation = 0;  // maxMemoryAllocationSize
  // The most storage buffers one kernel may bind (push descriptors and per-stage limits).
  std::uint32_t max_bindings = 0;
  std::string driver;  // the driver's name and version, for the pipeline cache's key
};

struct Instance {
  VkInstance handle = VK_NULL_HANDLE;
  std::vector<PhysicalDevice> devices;
  std::string why_none;  // when devices is empty: the loader's or the driver's words
};

bool device_has_extension(VkPhysicalDevice pd, const char* name);

// The one instance (created on first use; never throws).
const Instance& instance();

}  // namespace ember::vulkan
