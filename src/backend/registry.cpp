#include "ember/backend/registry.hpp"

#include <map>
#include <mutex>

#include "ember/base/error.hpp"

namespace ember::backend {

struct Registry::Impl {
  struct Entry {
    BackendFactory factory;
    std::function<int()> device_count;
    std::string unavailable_why;  // non-empty: known name, not in this build
    BackendTraits traits;
  };
  std::mutex mu;
  std::map<std::string, Entry> backends;
  std::map<std::string, DecoratorFactory> decorators;
  std::map<std::pair<std::string, int>, std::shared_ptr<Backend>> instances;
  std::map<std::pair<std::string, const Backend*>, std::shared_ptr<Backend>> decorated;
};

Registry::Registry() : impl_(std::make_shared<Impl>()) {}

void Registry::add_backend(std::string name, BackendFactory factory,
                           std::function<int()> device_count, BackendTraits traits) {
  std::lock_guard lk(impl_->mu);
  impl_->backends[std::move(name)] = {std::move(factory), std::move(device_count), {}, traits};
}

void Registry::add_unavailable(std::string name, std::string why) {
  std::lock_guard lk(impl_->mu);
  impl_->backends[std::move(name)] = {nullptr, [] { return 0; }, std::move(why), {}};
}

void Registry::add_decorator(std::string name, DecoratorFactory factory) {
  std::lock_guard lk(impl_->mu);
  impl_->decorators[std::move(name)] = std::move(factory);
}

std::shared_ptr<Backend> Registry::backend(const std::string& name, int index) {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->backends.find(name);
  EMBER_CHECK(it != impl_->backends.end(), "Device: unknown backend '" + name + "'");
  auto& e = it->second;
  EMBER_CHECK(e.factory != nullptr, "Device::" + name + ": " + e.unavailable_why);
  const int count = e.device_count();
  if (count == 0) {
    std::string upper;
    for (char c : name) upper += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    fail("Device::" + name + "(" + std::to_string(index) + "): no " + upper +
         " device on this machine");
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
  std::lock_guard lk(impl_->mu);
  std::vector<std::string> out;
  for (auto& [name, e] : impl_->backends) {
    if (!e.factory) continue;
    const int n = e.device_count();
    if (!e.traits.indexed) {
      if (n > 0) out.push_back(name);
    } else {
      for (int i = 0; i < n; ++i) out.push_back(name + ":" + std::to_string(i));
    }
  }
  return out;
}

std::shared_ptr<Backend> Registry::fallback_for(const ir::Op& op, const Backend& from) {
  std::lock_guard lk(impl_->mu);
  for (auto& [name, e] : impl_->backends) {
    if (!e.factory || !e.traits.fallback || e.device_count() == 0) continue;
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
