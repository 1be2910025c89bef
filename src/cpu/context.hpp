// CpuContext: the state a Cpu kernel may use — the allocator and the random generator's
// key and counter — and helpers to make outputs and read views.
#pragma once

#include <cstdint>
#include <memory>

#include "cpu/allocator.hpp"
#include "cpu/cpu_tensor.hpp"
#include "ember/base/config.hpp"

namespace ember::cpu {

struct CpuContext {
  CpuContext() = default;
  // Tensors in `arena` only (CpuAllocator's arena mode).
  explicit CpuContext(std::span<std::byte> arena) : allocator(arena) {}

  CpuAllocator allocator;
  Atomic<std::uint64_t> seed{0x5eed'e3be'2026ULL};
  Atomic<std::uint64_t> counter{0};

  // A fresh contiguous tensor (contents uninitialised); an ember::Error naming current_op,
  // the shape and the dtype when it cannot be allocated.
  std::shared_ptr<CpuTensor> empty(const Shape& shape, DType dtype);
  // The IR op this thread is executing (set by the backend), named in allocation errors.
  static EMBER_THREAD_LOCAL const char* current_op;
};

// x itself when it is contiguous, else a contiguous copy.
std::shared_ptr<const CpuTensor> contiguous(CpuContext& ctx, const ir::Handle& x);
// Copies the strided view src into the strided view dst (same shape and dtype).
void copy_strided(const CpuTensor& src, const CpuTensor& dst);
void copy_strided(const Shape& shape, std::size_t elem, const std::byte* src,
                  const std::int64_t* src_strides, std::byte* dst, const std::int64_t* dst_strides);

// Whether an op holding x may write its output into x's buffer: the one rule of Note
// [In-place reuse] (ember/backend/strided_tensor.hpp). When it may, what was derived from
// the buffer's contents is dropped first (Note [Derived data] in allocator.hpp): every Cpu
// op that writes an existing buffer asks here.
inline bool reusable(const ir::Handle& x, const Shape& shape, DType dtype) {
  if (!backend::reusable<Buffer>(x, shape, dtype)) return false;
  as_cpu(x).buffer()->derived.reset();
  return true;
}
// The tensor an in-place op writes: x's node itself when reusable, else a fresh tensor.
std::shared_ptr<CpuTensor> output_for(CpuContext& ctx, const ir::Handle& x, const Shape& shape,
                                      DType dtype);
// The tensor an op that updates part of x writes: x's node itself when reusable, else a
// contiguous copy of x.
std::shared_ptr<CpuTensor> writable_copy(CpuContext& ctx, const ir::Handle& x);

}  // namespace ember::cpu
