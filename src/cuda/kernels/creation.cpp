// Creation launchers: fill, arange and random. Random numbers use the Cpu's counter-based
// generator: element i of a draw hashes (seed, counter + i), so a seeded Cuda device draws
// the same bits as a seeded Cpu (values agree up to the device's log/cos rounding). A draw
// takes its counters when it runs (run) or when the Fusion decorator records it (draw, at
// counters reserve_counters took: Note [Reserved draws] in backend/fused_group.hpp).
#include <cstring>

#include "cuda/kernels/kernels.hpp"
#include "ember/backend/fused_group.hpp"
#include "ember/base/tensor_data.hpp"

namespace ember::cuda {

ir::Handle run(CudaContext& ctx, ir::Fill& op) {
  std::int64_t n = static_cast<std::int64_t>(op.shape.num_elements());
  // The element's bits, converted on the host exactly as the Cpu's fill converts them.
  const std::uint64_t bits = backend::fill_bits(op);
  if (n == 1) {  // a scalar operand: shared, filled once (CudaContext::constant)
    return std::make_shared<CudaTensor>(ctx.constant(op.dtype, bits), op.shape, op.dtype,
                                        contiguous_strides(op.shape), 0);
  }
  auto out = ctx.empty(op.shape, op.dtype);
  ctx.fill(out->data(), n, size_of(op.dtype), bits);
  return out;
}

ir::Handle run(CudaContext& ctx, ir::Arange& op) {
  auto out = ctx.empty(Shape{op.n}, op.dtype);
  std::int64_t n = static_cast<std::int64_t>(op.n);
  void* y = out->data();
  const DType dt = op.dtype;
  ctx.launch(ArangeKernel(dt), n, {&y, &n, &op.start, &op.step}, "arange");
  return out;
}

ir::Handle draw(CudaContext& ctx, const ir::Random& op, const backend::RandomCounters& at) {
  auto out = ctx.empty(op.shape, op.dtype);
  std::int64_t n = static_cast<std::int64_t>(op.shape.num_elements());
  std::uint64_t key = at.seed, base = at.first;
  int kind = static_cast<int>(op.dist.kind);
  double a = op.dist.a, b = op.dist.b;
  void* y = out->data();
  const DType dt = op.dtype;
  ctx.launch(RandomKernel(dt), n, {&y, &n, &key, &base, &kind, &a, &b}, "random");
  return out;
}

backend::RandomCounters reserve_counters(CudaContext& ctx, std::uint64_t n) {
  const std::uint64_t key = ctx.seed.load();
  return {key, ctx.counter.fetch_add(n)};
}

ir::Handle run(CudaContext& ctx, ir::Random& op) {
  return draw(ctx, op, reserve_counters(ctx, op.shape.num_elements()));
}

}  // namespace ember::cuda
