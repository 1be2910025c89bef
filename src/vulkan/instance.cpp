#include "vulkan/instance.hpp"

#include <algorithm>
#include <cstring>

#include "ember/base/error.hpp"

namespace ember::vulkan {

const char* result_name(VkResult r) {
  switch (r) {
#define EMBER_VK_RESULT(x) \
  case x:                  \
    return #x;
    EMBER_VK_RESULT(VK_SUCCESS)
    EMBER_VK_RESULT(VK_NOT_READY)
    EMBER_VK_RESULT(VK_TIMEOUT)
    EMBER_VK_RESULT(VK_INCOMPLETE)
    EMBER_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    EMBER_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    EMBER_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    EMBER_VK_RESULT(VK_ERROR_DEVICE_LOST)
    EMBER_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    EMBER_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    EMBER_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    EMBER_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    EMBER_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    EMBER_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    EMBER_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    EMBER_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    EMBER_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    EMBER_VK_RESULT(VK_ERROR_UNKNOWN)
#undef EMBER_VK_RESULT
    default:
      return "an unknown VkResult";
  }
}

void check(VkResult r, const char* what, const char* call) {
  if (r == VK_SUCCESS) return;
  fail(std::string(what) + ": " + call + " failed with " + result_name(r) + " (" +
       std::to_string(static_cast<int>(r)) + ")");
}

namespace {

bool has_extension(VkPhysicalDevice pd, const char* name) {
  std::uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data());
  for (const auto& e : exts) {
    if (std::strcmp(e.extensionName, name) == 0) return true;
  }
  return false;
}

Features query_features(VkPhysicalDevice pd) {
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{};
  f16i8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  VkPhysicalDevice8BitStorageFeatures s8{};
  s8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
  s8.pNext = &f16i8;
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  s16.pNext = &s8;
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f2.pNext = &s16;
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  Features f;
  f.f64 = f2.features.shaderFloat64;
  f.i64 = f2.features.shaderInt64;
  f.i16 = f2.features.shaderInt16;
  f.storage16 = s16.storageBuffer16BitAccess;
  f.storage8 = s8.storageBuffer8BitAccess;
  f.f16 = f16i8.shaderFloat16;
  f.i8 = f16i8.shaderInt8;
  return f;
}

// Features::coopmat: the extension and its feature, 32-wide subgroups with compute
// support, and the 16 x 16 x 16 f16 x f16 + f32 shape at subgroup scope among the
// properties.
bool has_coopmat(VkInstance inst, VkPhysicalDevice pd) {
  if (!has_extension(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) return false;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cf{};
  cf.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f2.pNext = &cf;
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  VkPhysicalDeviceSubgroupProperties sg{};
  sg.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceProperties2 p2{};
  p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  p2.pNext = &sg;
  vkGetPhysicalDeviceProperties2(pd, &p2);
  if (!cf.cooperativeMatrix || sg.subgroupSize != 32 ||
      (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) == 0)
    return false;
  const auto props_of = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (props_of == nullptr) return false;
  std::uint32_t n = 0;
  if (props_of(pd, &n, nullptr) != VK_SUCCESS || n == 0) return false;
  std::vector<VkCooperativeMatrixPropertiesNV> ps(n);
  for (auto& p : ps) p.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  if (props_of(pd, &n, ps.data()) != VK_SUCCESS) return false;
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto& p = ps[i];
    if (p.MSize == 16 && p.NSize == 16 && p.KSize == 16 &&
        p.AType == VK_COMPONENT_TYPE_FLOAT16_NV && p.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
        p.CType == VK_COMPONENT_TYPE_FLOAT32_NV && p.DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
        p.scope == VK_SCOPE_SUBGROUP_NV)
      return true;
  }
  return false;
}

std::string version_text(std::uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

Instance create_instance() {
  Instance inst;
  std::uint32_t api = 0;
  if (vkEnumerateInstanceVersion(&api) != VK_SUCCESS || api < VK_API_VERSION_1_1) {
    inst.why_none = "the Vulkan loader offers Vulkan " + version_text(api) + ", 1.1 is needed";
    return inst;
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "ember";
  app.pEngineName = "ember";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  const VkResult r = vkCreateInstance(&ci, nullptr, &inst.handle);
  if (r != VK_SUCCESS) {
    inst.handle = VK_NULL_HANDLE;
    inst.why_none = std::string("vkCreateInstance failed with ") + result_name(r) +
                    (r == VK_ERROR_INCOMPATIBLE_DRIVER
                         ? ": no Vulkan driver (ICD) was found; VK_ICD_FILENAMES names one"
                         : "");
    return inst;
  }
  std::uint32_t n = 0;
  vkEnumeratePhysicalDevices(inst.handle, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(inst.handle, &n, pds.data());
  std::string skipped;
  for (VkPhysicalDevice pd : pds) {
    PhysicalDevice d;
    d.handle = pd;
    vkGetPhysicalDeviceProperties(pd, &d.props);
    std::uint32_t qn = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, nullptr);
    std::vector<VkQueueFamilyProperties> qs(qn);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, qs.data());
    bool found = false;
    for (std::uint32_t q = 0; q < qn && !found; ++q) {
      if (qs[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        d.queue_family = q;
        found = true;
      }
    }
    std::string missing;
    if (!found) missing = "no compute queue";
    if (d.props.apiVersion < VK_API_VERSION_1_1)
      missing = "Vulkan " + version_text(d.props.apiVersion);
    if (!has_extension(pd, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME))
      missing = "no VK_KHR_push_descriptor";
    if (!missing.empty()) {
      skipped += std::string(skipped.empty() ? "" : "; ") + d.props.deviceName + ": " + missing;
      continue;
    }
    d.features = query_features(pd);
    {
      VkPhysicalDevicePushDescriptorPropertiesKHR pushp{};
      pushp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR;
      VkPhysicalDeviceMaintenance3Properties m3{};
      m3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
      m3.pNext = &pushp;
      VkPhysicalDeviceProperties2 p2{};
      p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
      p2.pNext = &m3;
      vkGetPhysicalDeviceProperties2(pd, &p2);
      d.max_allocation = m3.maxMemoryAllocationSize;
      d.max_bindings =
          std::min({pushp.maxPushDescriptors, d.props.limits.maxPerStageDescriptorStorageBuffers,
                    d.props.limits.maxPerStageResources});
    }
    if (d.props.apiVersion >= VK_API_VERSION_1_2 ||
        has_extension(pd, VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME)) {
      VkPhysicalDeviceFloatControlsProperties fc{};
      fc.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES;
      VkPhysicalDeviceProperties2 p2{};
      p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
      p2.pNext = &fc;
      vkGetPhysicalDeviceProperties2(pd, &p2);
      d.features.preserve32 = fc.shaderSignedZeroInfNanPreserveFloat32;
      d.features.preserve64 = fc.shaderSignedZeroInfNanPreserveFloat64;
    }
    d.features.coopmat = d.features.f16 && d.features.storage16 && has_coopmat(inst.handle, pd);
    // 8-bit storage and float16/int8 arithmetic are core only from Vulkan 1.2.
    const bool core12 = d.props.apiVersion >= VK_API_VERSION_1_2;
    if (!core12 && !has_extension(pd, VK_KHR_8BIT_STORAGE_EXTENSION_NAME))
      d.features.storage8 = false;
    if (!core12 && !has_extension(pd, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) {
      d.features.f16 = d.features.i8 = false;
    }
    d.driver = std::string(d.props.deviceName) + " driver " +
               std::to_string(d.props.driverVersion) + " vendor " +
               std::to_string(d.props.vendorID);
    inst.devices.push_back(std::move(d));
  }
  // GPUs first (discrete, integrated, virtual), CPU implementations such as lavapipe last,
  // each kind in the loader's order: vulkan:0 is the best device there is.
  const auto rank = [](const PhysicalDevice& d) {
    switch (d.props.deviceType) {
      case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return 0;
      case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return 1;
      case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return 2;
      case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return 4;
      default:
        return 3;
    }
  };
  std::stable_sort(
      inst.devices.begin(), inst.devices.end(),
      [&](const PhysicalDevice& a, const PhysicalDevice& b) { return rank(a) < rank(b); });
  if (inst.devices.empty()) {
    inst.why_none = n == 0 ? "the Vulkan loader found no physical device"
                           : "no Vulkan device can run ember's kernels (" + skipped + ")";
  }
  return inst;
}

}  // namespace

bool device_has_extension(VkPhysicalDevice pd, const char* name) { return has_extension(pd, name); }

const Instance& instance() {
  static const Instance inst = create_instance();
  return inst;
}

}  // namespace ember::vulkan
