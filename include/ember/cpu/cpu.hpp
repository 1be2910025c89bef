// The Cpu backend's public entry: a Cpu backend of one's own, with its tensors in memory the
// application provides. Device::cpu() is the registry's shared Cpu backend with the pooled
// system allocator; firmware without a heap for tensors, or a program that wants a hard
// bound on tensor memory, makes its device from an arena instead:
//
//   alignas(64) static std::byte arena[256 * 1024];
//   ember::Device dev(ember::cpu::make_cpu_backend(arena));
//
// Every tensor of that device lives in the arena; memory_stats(dev) reports it (reserved
// and capacity are the arena's usable size, in_use and peak what tensors hold), and an
// output it cannot hold fails (ember::Error, or the fail handler) naming the op, the shape
// and the sizes. Kernels' scratch and TensorData still use the heap. See docs/embedded.md.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "ember/backend/backend.hpp"

namespace ember::cpu {

// A Cpu backend whose tensors live in `arena` (which must outlive it and every tensor of
// it; its start is aligned up to 64 bytes and its size down to a multiple of 64).
std::shared_ptr<backend::Backend> make_cpu_backend(std::span<std::byte> arena);

// The kernels the Cpu backend runs, as EMBER_CPU_ISA spells them: the vector ISA ("scalar",
// "avx2", "avx512"), then "+" and the bf16 dot product where one is active ("avx512+amx").
// The best this CPU supports, or EMBER_CPU_ISA's choice (an ember::Error where it is unknown
// or the CPU lacks it). For tools and reports; the kernels read the same choice.
std::string kernel_isa();

}  // namespace ember::cpu
