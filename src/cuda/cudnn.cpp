// cuDNN's loader: see cudnn.hpp.
#include "cuda/cudnn.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace ember::cuda::cudnn {
namespace {

struct Loaded {
#if defined(EMBER_CUDA_HAS_CUDNN)
  Api api;
#endif
  bool ok = false;
  std::string reason;
};

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded r;
#if defined(EMBER_CUDA_HAS_CUDNN)
    const char* env = std::getenv("EMBER_CUDA_CUDNN");
    if (env && std::strcmp(env, "0") == 0) {
      r.reason = "disabled by EMBER_CUDA_CUDNN=0";
      return r;
    }
    const std::string soname = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
    void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = dlerror();
      r.reason = soname + " not loaded: " + (why ? why : "dlopen failed");
      return r;
    }
    // The library stays open for the process's life (kernels may run until exit).
#define EMBER_CUDNN_LOOKUP(name)                                       \
  r.api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name)); \
  if (!r.api.name) {                                                   \
    r.reason = soname + " lacks " #name;                               \
    return r;                                                          \
  }
    EMBER_CUDNN_FUNCTIONS(EMBER_CUDNN_LOOKUP)
#undef EMBER_CUDNN_LOOKUP
    const std::size_t v = r.api.cudnnGetVersion();
    if (v / 10000 != CUDNN_MAJOR) {
      r.reason = soname + " reports version " + std::to_string(v) + ", expected major " +
                 std::to_string(CUDNN_MAJOR);
      return r;
    }
    r.ok = true;
    r.reason = "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
               std::to_string(v % 100);
#else
    r.reason = "built without cudnn.h";
#endif
    return r;
  }();
  return l;
}

}  // namespace

#if defined(EMBER_CUDA_HAS_CUDNN)
const Api* api() { return loaded().ok ? &loaded().api : nullptr; }
#endif

bool available() { return loaded().ok; }
std::string reason() { return loaded().reason; }

}  // namespace ember::cuda::cudnn
