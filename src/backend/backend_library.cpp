#include "backend/backend_library.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#ifndef EMBER_VERSION_STRING
#error "EMBER_VERSION_STRING must name this build's version (CMakeLists.txt sets it)"
#endif

namespace ember::backend {
namespace {

// An object of libember itself: dladdr on its address names libember's file.
const char kLibraryAnchor = 0;

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

std::string backend_library_file(const std::string& name) { return "libember_" + name + ".so"; }

std::vector<std::string> backend_library_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("EMBER_BACKEND_PATH"); env != nullptr && *env != '\0') {
    std::string path = env;
    std::size_t start = 0;
    while (start <= path.size()) {
      const std::size_t end = std::min(path.find(':', start), path.size());
      if (end > start) dirs.push_back(path.substr(start, end - start));
      start = end + 1;
    }
    return dirs;
  }
  Dl_info info{};
  if (::dladdr(&kLibraryAnchor, &info) != 0 && info.dli_fname != nullptr) {
    const std::string self = info.dli_fname;
    const std::size_t slash = self.rfind('/');
    dirs.push_back(slash == std::string::npos ? "." : slash == 0 ? "/" : self.substr(0, slash));
  }
  return dirs;
}

void load_backend_library(Registry& registry, const std::string& name) {
  const std::string file = backend_library_file(name);
  const std::vector<std::string> dirs = backend_library_dirs();
  std::string path;
  for (const std::string& d : dirs) {
    if (is_file(d + "/" + file)) {
      path = d + "/" + file;
      break;
    }
  }
  if (path.empty()) {
    registry.add_unavailable(name, file + " was not found (looked in " +
                                       (dirs.empty() ? "nothing" : join(dirs, ", ")) +
                                       "; EMBER_BACKEND_PATH names the directories to look in)");
    return;
  }
  // RTLD_NOW: a missing symbol fails here, with dlopen's message, rather than at a call.
  // The handle is never closed: the backend's code runs until the process exits.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    registry.add_unavailable(name, path + " cannot be loaded: " + (err ? err : "unknown error"));
    return;
  }
  const std::string entry_name = "ember_register_backend_" + name;
  void* entry = ::dlsym(handle, entry_name.c_str());
  if (entry == nullptr) {
    registry.add_unavailable(name, path + " has no entry point " + entry_name);
    return;
  }
  reinterpret_cast<RegisterBackendEntry>(entry)(&registry, EMBER_VERSION_STRING);
}

}  // namespace ember::backend
