#include "ember/backend/registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>  // std::lock_guard, std::call_once

#include "backend/backend_library.hpp"
#include "ember/base/config.hpp"
#include "ember/base/error.hpp"

namespace ember::backend {

namespace {

// Whether EMBER_BACKEND_SKIP (names separated by ',' or ':') names the library backend
// `name`: its library is then never loaded (a test process that does not test it need not
// pay for loading it).
bool skipped_by_environment(const std::string& name) {
  const char* env = std::getenv("EMBER_BACKEND_SKIP");
  if (env == nullptr) return false;
  const std::string list = env;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find_first_of(",:", start), list.size());
    if (list.compare(start, end - start, name) == 0 && end - start == name.size()) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

struct Registry::Impl {
  // A backend library not loaded yet: loaded once, by the first caller that needs it.
  struct Pending {
    std::once_flag once;
    std::string library;  // the backend name of the library: libember_<library>.so
  };
  struct Entry {
    BackendFactory factory;  // null: unavailable (why says why) or pending
    BackendInfo info;
    std::string unavailable_why;
    std::shared_ptr<Pending> pending;
  };
  Mutex mu;
  std::map<std::string, Entry> backends;
  std::map<std::string, DecoratorFactory> decorators;
  std::map<std::pair<std::string, int>, std::shared_ptr<Backend>> instances;
  std::map<std::pair<std::string, const Backend*>, std::shared_ptr<Backend>> decorated;
};

Registry::Registry() : impl_(std::make_shared<Impl>()) {}

void Registry::add_backend(std::string name, BackendFactory factory, BackendInfo info) {
  std::lock_guard lk(impl_->mu);
  impl_->backends[std::move(name)] = {std::move(factory), std::move(info), {}, nullptr};
}

void Registry::add_unavailable(std::string name, std::string why, bool indexed) {
  std::lock_guard lk(impl_->mu);
  BackendInfo info{indexed, [] { return 0; }, {}};
  impl_->backends[std::move(name)] = {nullptr, std::move(info), std::move(why), nullptr};
}

void Registry::add_library_backend(std::string name, bool indexed, std::string library) {
  std::lock_guard lk(impl_->mu);
  BackendInfo info{indexed, [] { return 0; }, {}};
  if (library.empty()) library = name;
  // Names served by one library share its one load.
  std::shared_ptr<Impl::Pending> pending;
  for (auto& [n, e] : impl_->backends) {
    if (e.pending && e.pending->library == library) pending = e.pending;
  }
  if (!pending) {
    pending = std::make_shared<Impl::Pending>();
    pending->library = library;
  }
  impl_->backends[std::move(name)] = {nullptr, std::move(info), {}, std::move(pending)};
}

void Registry::add_decorator(std::string name, DecoratorFactory factory) {
  std::lock_guard lk(impl_->mu);
  impl_->decorators[std::move(name)] = std::move(factory);
}

// Loads `name`'s library if it is still pending. Runs without the lock held: the library's
// entry point registers through add_backend / add_unavailable. Concurrent callers wait in
// call_once for the one load.
void Registry::load_pending(const std::string& name) {
  std::shared_ptr<Impl::Pending> pending;
  bool indexed = true;
  {
    std::lock_guard lk(impl_->mu);
    auto it = impl_->backends.find(name);
    if (it == impl_->backends.end() || !it->second.pending) return;
    pending = it->second.pending;
    // The library's own backend's naming, for its unavailable entry.
    auto lib = impl_->backends.find(pending->library);
    indexed = (lib != impl_->backends.end() ? lib->second : it->second).info.indexed;
  }
  std::call_once(pending->once, [&] {
    const std::string& library = pending->library;
    ember::detail::catch_std<ember::detail::OnError::Handle>(
        [&] {
          if (skipped_by_environment(library)) {
            add_unavailable(library, "left out by EMBER_BACKEND_SKIP", indexed);
          } else {
            load_backend_library(*this, library);
          }
        },
        [&](const char* what, bool) { add_unavailable(library, what, indexed); });
    std::lock_guard lk(impl_->mu);
    const Impl::Entry* lib = nullptr;
    if (auto it = impl_->backends.find(library); it != impl_->backends.end()) lib = &it->second;
    for (auto& [n, e] : impl_->backends) {
      if (e.pending != pending) continue;  // registered by the library's entry point
      e.pending = nullptr;
      if (n != library && lib != nullptr && !lib->factory && !lib->pending) {
        e.unavailable_why = lib->unavailable_why;  // the library itself failed to load
      } else {
        e.unavailable_why =
            backend_library_file(library) + " did not register a backend named '" + n + "'";
      }
    }
  });
}

std::shared_ptr<Backend> Registry::backend(const std::string& name, int index) {
  load_pending(name);
  std::lock_guard lk(impl_->mu);
  auto it = impl_->backends.find(name);
  EMBER_CHECK(it != impl_->backends.end(), "Device: unknown backend '" + name + "'");
  auto& e = it->second;
  EMBER_CHECK(e.factory != nullptr, "Device::" + name + ": " + e.unavailable_why);
  const int count = e.info.device_count();
  if (count == 0) {
    std::string upper;
    for (char c : name) upper += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    const std::string why = e.info.why_none ? e.info.why_none() : std::string();
    fail("Device::" + name + "(" + std::to_string(index) + "): no " + upper +
         " device on this machine" + (why.empty() ? "" : " (" + why + ")"));
  }
  EMBER_CHECK(index >= 0 && index < count, "Device::" + name + "(" + std::to_string(index) +
                                               "): this machine has " + std::to_string(count) +
                                               " such device(s)");
  auto& inst = impl_->instances[{name, index}];
  if (!inst) inst = e.factory(index);
  return inst;
}

std::shared_ptr<Backend> Registry::decorate(const std::string& name,
                                            const std::shared_ptr<Backend>& inner) {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->decorators.find(name);
  EMBER_CHECK(it != impl_->decorators.end(),
              "Device::" + name + "(): this decorator is not part of this build");
  auto& inst = impl_->decorated[{name, inner.get()}];
  if (!inst) inst = it->second(inner);
  return inst;
}

std::vector<std::string> Registry::available() {
  for (const std::string& name : backend_names()) load_pending(name);
  std::lock_guard lk(impl_->mu);
  std::vector<std::string> out;
  for (auto& [name, e] : impl_->backends) {
    if (!e.factory) continue;
    const int n = e.info.device_count();
    if (!e.info.indexed) {
      if (n > 0) out.push_back(name);
    } else {
      for (int i = 0; i < n; ++i) out.push_back(name + ":" + std::to_string(i));
    }
  }
  return out;
}

std::vector<UnavailableBackend> Registry::unavailable() {
  for (const std::string& name : backend_names()) load_pending(name);
  std::lock_guard lk(impl_->mu);
  std::vector<UnavailableBackend> out;
  for (auto& [name, e] : impl_->backends) {
    if (!e.factory) {
      out.push_back({name, e.unavailable_why});
    } else if (e.info.device_count() == 0) {
      const std::string why = e.info.why_none ? e.info.why_none() : std::string();
      out.push_back({name, why.empty() ? "no device on this machine" : why});
    }
  }
  return out;
}

std::vector<std::string> Registry::backend_names() {
  std::lock_guard lk(impl_->mu);
  std::vector<std::string> out;
  for (auto& [name, e] : impl_->backends) out.push_back(name);
  return out;
}

std::vector<std::string> Registry::decorator_names() {
  std::lock_guard lk(impl_->mu);
  std::vector<std::string> out;
  for (auto& [name, f] : impl_->decorators) out.push_back(name);
  return out;
}

bool Registry::is_indexed(const std::string& name) {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->backends.find(name);
  EMBER_CHECK(it != impl_->backends.end(), "Device: unknown backend '" + name + "'");
  return it->second.info.indexed;
}

std::shared_ptr<Backend> Registry::fallback_for(const ir::Op& op, const Backend& from) {
  std::lock_guard lk(impl_->mu);
  for (auto& [name, e] : impl_->backends) {
    if (!e.factory || !e.info.fallback || e.info.device_count() == 0) continue;
    auto& inst = impl_->instances[{name, 0}];
    if (!inst) inst = e.factory(0);
    if (inst.get() != &from && inst->supports(op)) return inst;
  }
  return nullptr;
}

std::vector<ir::Handle> execute_on_fallback(Backend& from, ir::Op op) {
  auto to = Registry::global().fallback_for(op, from);
  if (!to) {
    std::string operands;
    ir::for_each_operand(op, [&](const ir::Handle& h) {
      if (!operands.empty()) operands += ", ";
      operands += h ? h->shape().to_string() + " " + ember::name(h->dtype()) : "none";
    });
    fail(from.name() + ": " + ir::name(ir::kind_of(op)) + " of (" + operands +
         ") is not supported by this backend, and no registered backend can run it");
  }
  ir::for_each_operand(op, [&](ir::Handle& h) {
    if (h) h = to->from_data(from.to_data(h));
  });
  auto outs = to->execute(std::move(op));
  for (auto& h : outs) h = from.from_data(to->to_data(h));
  return outs;
}

Registry& Registry::global() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: backends may outlive static destructors
    register_builtin_backends(*reg);
    return reg;
  }();
  return *r;
}

}  // namespace ember::backend
