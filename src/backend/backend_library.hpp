// Backend libraries: backends with heavy dependencies (Cuda, and later Vulkan and LibTorch)
// are shared libraries of their own, libember_<name>.so, that libember loads with dlopen
// when the backend's name is first used, so a program starts and runs on the Cpu where a
// backend's dependencies are missing. The library is looked for in the directories of
// EMBER_BACKEND_PATH (colon-separated) when it is set, else in libember's own directory.
// Its one entry point, ember_register_backend_<name> (RegisterBackendEntry), registers it.
#pragma once

#include <string>
#include <vector>

#include "ember/backend/registry.hpp"

namespace ember::backend {

// "libember_<name>.so".
std::string backend_library_file(const std::string& name);

// Where backend libraries are looked for, in order.
std::vector<std::string> backend_library_dirs();

// Finds, loads and calls backend `name`'s library. When that fails, registers `name` as
// unavailable with why: not found (and where it looked), or dlopen's own message (a
// dependency missing, ...), or a missing entry point.
void load_backend_library(Registry& registry, const std::string& name);

}  // namespace ember::backend
