// Device: where a tensor lives and which backend (with its decorators) runs its ops.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/backend/autodiff_interface.hpp"
#include "ember/backend/backend.hpp"
#include "ember/backend/registry.hpp"

namespace ember {

using backend::Checkpointing;
using backend::MemoryStats;

class Device {
 public:
  static Device cpu();
  static Device cuda(int index = 0);
  static Device vulkan(int index = 0);
  static Device libtorch();  // ATen's CPU kernels (libember_libtorch.so)
  // ATen's CUDA kernels, where the libtorch it was built with has CUDA (Debian's has not:
  // Device::unavailable() says so).
  static Device libtorch_cuda(int index = 0);
  // Every device this build and machine can run, by name ("cpu", "cuda:0", ...).
  static std::vector<std::string> available();
  // Every backend the API knows that cannot run here, with why: not part of this build,
  // its library (libember_cuda.so) not found or its dependencies missing (dlopen's
  // message), or no driver or GPU (the CUDA runtime's message).
  static std::vector<backend::UnavailableBackend> unavailable();
  // The device a name denotes, as name() prints it: "cpu", "cuda:0" ("cuda" is "cuda:0"),
  // "vulkan:0", "libtorch", with decorators as suffixes applied left to right
  // ("cuda:0+autodiff"). Throws ember::Error naming an unknown backend or decorator, a
  // malformed index, or why the backend cannot run here.
  static Device parse(const std::string& name);

  Device autodiff() const;  // decorators compose: Device::cpu().autodiff()
  // Autodiff with a checkpointing strategy (autodiff() is Checkpointing::None).
  Device autodiff(Checkpointing checkpointing) const;
  Device fusion() const;
  // The device this decorator wraps; throws ember::Error on a plain device.
  Device inner() const;
  bool is_autodiff() const;

  // "cpu", "cuda:0", "cpu+autodiff": Device::parse(name()) is this device.
  std::string name() const;
  void sync() const;
  void seed(std::uint64_t seed) const;
  DType default_float() const { return backend_->default_float(); }
  DType default_int() const { return backend_->default_int(); }

  backend::Backend& backend() const { return *backend_; }
  const std::shared_ptr<backend::Backend>& backend_ptr() const { return backend_; }
  explicit Device(std::shared_ptr<backend::Backend> b) : backend_(std::move(b)) {}

  friend bool operator==(const Device& a, const Device& b) { return a.backend_ == b.backend_; }

 private:
  std::shared_ptr<backend::Backend> backend_;
};

MemoryStats memory_stats(const Device& device);
void empty_cache(const Device& device);

}  // namespace ember
