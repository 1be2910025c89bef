// Device: where a tensor lives and which backend (with its decorators) runs its ops.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/backend/autodiff_interface.hpp"
#include "ember/backend/backend.hpp"

namespace ember {

using backend::Checkpointing;
using backend::MemoryStats;

class Device {
 public:
  static Device cpu();
  static Device cuda(int index = 0);
  static Device vulkan(int index = 0);
  static Device libtorch();
  // Every device this build and machine can run, by name ("cpu", "cuda:0", ...).
  static std::vector<std::string> available();

  Device autodiff() const;  // decorators compose: Device::cpu().autodiff()
  // Autodiff with a checkpointing strategy (autodiff() is Checkpointing::None).
  Device autodiff(Checkpointing checkpointing) const;
  Device fusion() const;
  // The device this decorator wraps; throws ember::Error on a plain device.
  Device inner() const;
  bool is_autodiff() const;

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
