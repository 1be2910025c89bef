// The Cpu's random generator (creation.cpp), for the Random kernel and the fused groups'
// Random instructions (fused.cpp): one definition, so both draw the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu/context.hpp"
#include "ember/backend/fused_group.hpp"
#include "ember/base/distribution.hpp"
#include "ember/base/dtype.hpp"

namespace ember::cpu {

// The compute dtype of a draw of dtype dt: dt itself, f32 for a 16-bit float (whose values
// are drawn in f32 and rounded, as the Random kernel does).
inline DType random_compute_type(DType dt) { return is_half(dt) ? DType::F32 : dt; }

// Writes n values of a draw of `dist` to out, in the compute dtype ct: value k is the
// element at counter first + k under the seed `key` (Note [Reserved draws] in
// backend/fused_group.hpp), whatever n and first are.
// The variant for cpu::active_isa() of the rows of random_rows.inc, each ISA's below.
void draw_values(std::uint64_t key, std::uint64_t first, const Distribution& dist, DType ct,
                 void* out, std::size_t n);
namespace isa_generic {
void draw_values(std::uint64_t key, std::uint64_t first, const Distribution& dist, DType ct,
                 void* out, std::size_t n);
}
namespace isa_avx2 {
void draw_values(std::uint64_t key, std::uint64_t first, const Distribution& dist, DType ct,
                 void* out, std::size_t n);
}
namespace isa_avx512 {
void draw_values(std::uint64_t key, std::uint64_t first, const Distribution& dist, DType ct,
                 void* out, std::size_t n);
}

// The counters of a draw of n elements made now: the device's seed and its next n counters.
inline backend::RandomCounters reserve_counters(CpuContext& ctx, std::uint64_t n) {
  const std::uint64_t key = ctx.seed.load();
  return {key, ctx.counter.fetch_add(n)};
}

// op drawn at the counters `at`: what run(ctx, op) draws when it takes those counters.
ir::Handle draw(CpuContext& ctx, const ir::Random& op, const backend::RandomCounters& at);

}  // namespace ember::cpu
