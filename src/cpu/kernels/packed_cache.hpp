// Operands packed into the GEMM's panels and kept with their buffer for the next call: the
// convolution's weights (its A, Note [Packed A] in cpu/gemm/gemm.hpp) and matmul's reused
// right operands (its B, Note [Prepacked B] there).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "cpu/context.hpp"
#include "cpu/cpu_tensor.hpp"
#include "cpu/gemm/gemm.hpp"

namespace ember::cpu {

// Note [Packed weight cache]: packing an operand into the GEMM's panels reads and writes
// all of it on every call: 7.5% of an imported ResNet-18's run at batch 1, whose weights are
// each convolved once per run, run after run, and a tenth of an LSTM's step, whose W_hh is
// packed again for each step's product with 32 rows of state. So the panels of an operand
// are kept with its buffer (Buffer::derived, Note [Derived data] in allocator.hpp) and
// reused while the buffer is unchanged:
//  - they are dropped when an op is about to write the buffer in place (cpu::reusable()),
//    the only way an existing buffer's contents change, and they die with the buffer;
//  - an operand is packed into the cache on its second sighting (the first leaves an empty
//    entry), so a tensor used once, as a training step's fresh weights, costs no memory;
//    a model run repeatedly keeps one packed copy of each such weight (about the weights'
//    size again), as onnxruntime's pre-packing does;
//  - entries are per use, view (offset, shape, strides), dtype, the use's own parameters
//    and micro-kernel family (the test hook gemm_force_isa changes it), and never made in
//    an arena (firmware's memory is the application's budget) or for a copy made by the
//    calling op.
// The results are bit for bit those of packing per call (Note [Packed A], Note [Prepacked
// B]).
enum class PackedUse : std::uint8_t { ConvWeight, MatmulRight };

struct PackedKey {
  PackedUse use;
  std::int64_t offset;
  Shape shape;
  Strides strides;
  DType dtype;
  std::array<std::int64_t, 3> params;  // the use's own (a convolution: groups, pass, flip)
  detail::GemmIsa isa;
  bool operator==(const PackedKey&) const = default;
};

// The key of tensor w's view for `use` with the kernels the next GEMM would use.
PackedKey packed_key(PackedUse use, const CpuTensor& w, std::array<std::int64_t, 3> params = {});

namespace detail {
// Under one lock: the cached panels of key in buf (null if none), noting a first sighting
// in *first (an entry made empty).
std::shared_ptr<const void> find_packed(Buffer& buf, const PackedKey& key, bool* first);
// Puts `panels` in key's entry unless another call did meanwhile; returns the entry's.
std::shared_ptr<const void> keep_packed(Buffer& buf, const PackedKey& key,
                                        std::shared_ptr<const void> panels);
}  // namespace detail

// The cached panels (a P) of w's view for key (Note [Packed weight cache]), made by make()
// on the second sighting; null on the first sighting and where nothing is cached (`given`
// false: w is a copy the calling op made; an arena's memory).
template <class P, class Make>
std::shared_ptr<const P> cached_packing(CpuContext& ctx, const CpuTensor& w, bool given,
                                        const PackedKey& key, const Make& make) {
  if (!given || ctx.allocator.is_arena()) return nullptr;
  Buffer& buf = *w.buffer();
  bool first = false;
  if (auto hit = detail::find_packed(buf, key, &first))
    return std::static_pointer_cast<const P>(hit);
  if (first) return nullptr;
  // The second sighting: packed outside the lock (on the thread pool); a call that packed
  // it meanwhile on another thread wins.
  std::shared_ptr<const P> packed = make();
  return std::static_pointer_cast<const P>(detail::keep_packed(buf, key, packed));
}

}  // namespace ember::cpu
