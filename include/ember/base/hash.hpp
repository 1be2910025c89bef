// The one 64-bit hash of byte strings: kernel and plan keys (the Fusion decorator's group
// signatures, ElementwiseProgram's), the names of the Vulkan shader cache's files and the
// checksums of the Cuda kernel cache's. Not cryptographic; stable across runs, builds and
// machines (the on-disk caches depend on it), so its definition never changes but with the
// caches' version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ember {

// Eight bytes a step (a multiply and a rotate each), where a byte-at-a-time hash spends a
// dependent multiply per byte: a fused group's signature is hashed on the recording path.
std::uint64_t hash_bytes(const void* data, std::size_t n);
inline std::uint64_t hash_bytes(std::string_view s) { return hash_bytes(s.data(), s.size()); }

}  // namespace ember
