// The Vulkan backend: GLSL compute kernels printed at run time from the IR's element-wise
// expressions, compiled with shaderc, recorded asynchronously; the portable GPU. See
// docs/vulkan.md.
#pragma once

#include <memory>
#include <string>

#include "ember/backend/backend.hpp"

namespace ember::vulkan {

// The backend of Vulkan device `index` (in the loader's order, among devices that can run
// ember's kernels). Throws ember::Error when the device cannot be used.
std::shared_ptr<backend::Backend> make_vulkan_backend(int index);
// Whether device `index` runs the preview kernels (Note [Preview kernels] in
// vulkan_backend.cpp): $EMBER_VULKAN_PREVIEW=1 / 0, else on CPU implementations only.
bool preview_kernels(int index);
// Devices usable now; 0, never an exception, without a loader, a driver or a device.
int vulkan_device_count();
// Why vulkan_device_count() is 0 (the loader's or the driver's words).
std::string vulkan_no_device_reason();

}  // namespace ember::vulkan
