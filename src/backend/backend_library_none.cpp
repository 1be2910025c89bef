// Backend libraries where nothing is loaded at run time (EMBER_EMBEDDED; the build compiles
// this file in place of backend_library.cpp): a backend named for a library is registered
// as unavailable with the reason, so Device::unavailable() says why.
#include "backend/backend_library.hpp"

namespace ember::backend {

std::string backend_library_file(const std::string& name) { return "libember_" + name + ".so"; }

std::vector<std::string> backend_library_dirs() { return {}; }

void load_backend_library(Registry& registry, const std::string& name) {
  registry.add_unavailable(name, "backend libraries are not loaded in an embedded build (" +
                                     backend_library_file(name) + ")");
}

}  // namespace ember::backend
