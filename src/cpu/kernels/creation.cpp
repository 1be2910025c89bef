// Creation kernels: fill, arange and random. Random numbers come from a counter-based
// generator: element i of a draw hashes (seed, counter + i), so a draw is the same however
// it is split across threads or tiles, and seeding the device restarts the sequence. A draw
// takes its counters when it runs (run) or when the Fusion decorator records it (draw, at
// counters reserve_random took: Note [Reserved draws] in backend/fused_group.hpp); fused
// groups draw their tiles with the same draw_values.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu/isa.hpp"
#include "cpu/kernels/dtype_dispatch.hpp"
#include "cpu/kernels/from_double.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/kernels/random.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/base/config.hpp"

namespace ember::cpu {

ir::Handle run(CpuContext& ctx, ir::Fill& op) {
  auto out = ctx.empty(op.shape, op.dtype);
  const std::size_t n = op.shape.num_elements();
  if (op.dtype == DType::F16 || op.dtype == DType::BF16) {
    const float v = static_cast<float>(op.value);
    std::byte one[2];
    convert_elements(&v, DType::F32, one, op.dtype, 1);
    for (std::size_t i = 0; i < n; ++i) std::memcpy(out->data() + 2 * i, one, 2);
    return out;
  }
  visit_numeric(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = std::is_integral_v<T> && !std::is_same_v<T, bool> ? static_cast<T>(op.int_value)
                                                                  : from_double<T>(op.value);
    T* y = out->data_as<T>();
    parallel_for(0, n, 1 << 16, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) y[i] = v;
    });
  });
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Arange& op) {
  auto out = ctx.empty(Shape{op.n}, op.dtype);
  if (op.dtype == DType::F16 || op.dtype == DType::BF16) {
    for (std::size_t i = 0; i < op.n; ++i) {
      const float v = static_cast<float>(op.start + static_cast<double>(i) * op.step);
      convert_elements(&v, DType::F32, out->data() + 2 * i, op.dtype, 1);
    }
    return out;
  }
  visit_numeric(op.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = out->data_as<T>();
    for (std::size_t i = 0; i < op.n; ++i) {
      y[i] = from_double<T>(op.start + static_cast<double>(i) * op.step);
    }
  });
  return out;
}

// The generator's row, compiled for each ISA (random_rows.inc), as active_isa() picks.
void draw_values(std::uint64_t key, std::uint64_t first, const Distribution& dist, DType ct,
                 void* out, std::size_t n) {
  static const auto row = [] {
    switch (active_isa()) {
#if EMBER_HAS_X86_KERNELS
      case Isa::Avx512:
        return &isa_avx512::draw_values;
      case Isa::Avx2:
        return &isa_avx2::draw_values;
#endif
      default:
        return &isa_generic::draw_values;
    }
  }();
  row(key, first, dist, ct, out, n);
}

ir::Handle draw(CpuContext& ctx, const ir::Random& op, const backend::RandomCounters& at) {
  const std::size_t n = op.shape.num_elements();
  const DType compute = random_compute_type(op.dtype);
  auto out = ctx.empty(op.shape, compute);
  std::byte* y = out->data();
  const std::size_t elem = size_of(compute);
  parallel_for(0, n, 1 << 14, [&](std::size_t b, std::size_t e) {
    draw_values(at.seed, at.first + b, op.dist, compute, y + b * elem, e - b);
  });
  if (compute == op.dtype) return out;
  auto h = ctx.empty(op.shape, op.dtype);
  convert_row(out->data(), DType::F32, h->data(), op.dtype, n);
  return h;
}

ir::Handle run(CpuContext& ctx, ir::Random& op) {
  return draw(ctx, op, reserve_counters(ctx, op.shape.num_elements()));
}

}  // namespace ember::cpu
