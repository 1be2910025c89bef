// The backend registry: devices find backends and decorators by name. It is filled by one
// explicit call, register_builtin_backends (src/registry.cpp in the umbrella target), on
// first use — never by static initializers, so no backend is silently dropped at link time.
// Backends with heavy dependencies live in libraries of their own (libember_cuda.so, ...),
// loaded with dlopen when their name is first used (src/backend/backend_library.cpp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/backend/backend.hpp"

namespace ember::backend {

using BackendFactory = std::function<std::shared_ptr<Backend>(int index)>;
using DecoratorFactory = std::function<std::shared_ptr<Backend>(std::shared_ptr<Backend>)>;

// How a backend's devices are named and counted.
struct BackendInfo {
  // Devices are named "<name>:<index>" ("cuda:0"); false: one device named "<name>" ("cpu").
  bool indexed = true;
  // Devices usable now; never throws (0 where a GPU or its driver is missing).
  std::function<int()> device_count = [] { return 1; };
  // Why device_count() is 0 (the driver's own words), asked only then; may be empty.
  std::function<std::string()> why_none;
  // It may run, through host copies, the ops another backend does not support
  // (execute_on_fallback). Fallbacks are tried in name order.
  bool fallback = false;
};

// A backend name the API knows that cannot run here, and why.
struct UnavailableBackend {
  std::string name;
  std::string why;
};

class Registry {
 public:
  void add_backend(std::string name, BackendFactory factory, BackendInfo info = {});
  // A name the API knows but this build or machine lacks; using it throws `why`.
  void add_unavailable(std::string name, std::string why, bool indexed = true);
  // A backend in a library of its own, libember_<name>.so, loaded when `name` is first
  // used: its entry point (RegisterBackendEntry) registers it, or it is registered as
  // unavailable with what went wrong (not found, a dependency missing, ...). `library`
  // names another backend's library that registers `name` too (libtorch_cuda is in
  // libember_libtorch.so): one load serves both.
  void add_library_backend(std::string name, bool indexed = true, std::string library = {});
  void add_decorator(std::string name, DecoratorFactory factory);

  // The backend instance for (name, index), created once. Throws ember::Error when the
  // name is unknown, unavailable or the index is out of range.
  std::shared_ptr<Backend> backend(const std::string& name, int index);
  // The decorator `name` wrapping inner, created once per inner backend.
  std::shared_ptr<Backend> decorate(const std::string& name, const std::shared_ptr<Backend>& inner);
  // "cpu", "cuda:0", ... for every device usable now.
  std::vector<std::string> available();
  // Every known backend with no usable device here, with why.
  std::vector<UnavailableBackend> unavailable();

  // Every backend name known (usable or not) and every decorator name, sorted.
  std::vector<std::string> backend_names();
  std::vector<std::string> decorator_names();
  // Whether `name`'s devices take an index ("cuda:0"). Throws for an unknown name.
  bool is_indexed(const std::string& name);
  // The first fallback backend (device 0) other than `from` that supports op; null when
  // there is none.
  std::shared_ptr<Backend> fallback_for(const ir::Op& op, const Backend& from);

  static Registry& global();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  Registry();
  void load_pending(const std::string& name);
  friend void register_builtin_backends(Registry&);
};

// Runs op, which `from` does not support, on the registry's fallback for it: the operands
// are copied out of `from` (to_data, a sync point), the op runs there and its outputs are
// copied back into `from`. Throws ember::Error naming the op and its operands' shapes and
// dtypes when no registered backend supports it.
std::vector<ir::Handle> execute_on_fallback(Backend& from, ir::Op op);

// Defined once, in the umbrella target: registers every backend and decorator of this build.
void register_builtin_backends(Registry& registry);

// The one C entry point a backend library exports, named ember_register_backend_<name>
// (extern "C"): it registers backend <name> in `registry` — or registers it as unavailable,
// with why — given the version of the libember that loads it.
using RegisterBackendEntry = void (*)(Registry* registry, const char* ember_version);

}  // namespace ember::backend
