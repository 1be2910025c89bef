// The Cpu backend: strided views, a pooled allocator, a thread pool and vectorized
// kernels with run-time ISA dispatch. See docs/backends/cpu.md.
#pragma once

#include <memory>

#include "ember/backend/backend.hpp"

namespace ember::cpu {

std::shared_ptr<backend::Backend> make_cpu_backend();

}  // namespace ember::cpu
