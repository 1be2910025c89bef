// The backend registry: devices find backends and decorators by name. It is filled by one
// explicit call, register_builtin_backends (src/registry.cpp in the umbrella target), on
// first use — never by static initializers, so no backend is silently dropped at link time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/backend/backend.hpp"

namespace ember::backend {

using BackendFactory = std::function<std::shared_ptr<Backend>(int index)>;
using DecoratorFactory = std::function<std::shared_ptr<Backend>(std::shared_ptr<Backend>)>;

// How the registry treats a backend.
struct BackendTraits {
  // Its devices are named "name:index" ("cuda:0"); false: one device named "name" ("cpu").
  bool indexed = true;
  // It may run, through host copies, the ops another backend does not support
  // (execute_on_fallback). Fallbacks are tried in name order.
  bool fallback = false;
};

class Registry {
 public:
  // `available` says whether index exists on this machine (e.g. a GPU is present).
  void add_backend(
      std::string name, BackendFactory factory,
      std::function<int()> device_count = [] { return 1; }, BackendTraits traits = {});
  // A name the API knows but this build lacks; using it throws `why`.
  void add_unavailable(std::string name, std::string why);
  void add_decorator(std::string name, DecoratorFactory factory);

  // The backend instance for (name, index), created once. Throws ember::Error when the
  // name is unknown, unavailable or the index is out of range.
  std::shared_ptr<Backend> backend(const std::string& name, int index);
  // The decorator `name` wrapping inner, created once per inner backend.
  std::shared_ptr<Backend> decorate(const std::string& name, const std::shared_ptr<Backend>& inner);
  // "cpu", "cuda:0", ... for every backend usable now.
  std::vector<std::string> available();
  // The first fallback backend (device 0) other than `from` that supports op; null when
  // there is none.
  std::shared_ptr<Backend> fallback_for(const ir::Op& op, const Backend& from);

  static Registry& global();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  Registry();
  friend void register_builtin_backends(Registry&);
};

// Runs op, which `from` does not support, on the registry's fallback for it: the operands
// are copied out of `from` (to_data, a sync point), the op runs there and its outputs are
// copied back into `from`. Throws ember::Error naming the op and its operands' shapes and
// dtypes when no registered backend supports it.
std::vector<ir::Handle> execute_on_fallback(Backend& from, ir::Op op);

// Defined once, in the umbrella target: registers every backend and decorator of this build.
void register_builtin_backends(Registry& registry);

}  // namespace ember::backend
