// Layer norm: x, weight and bias made contiguous, then a generated row kernel: rows held in
// registers (gen_layer_norm_regs) up to 4096 elements, else gen_layer_norm's three passes.
#include "cuda/codegen.hpp"
#include "cuda/kernels/kernels.hpp"

namespace ember::cuda {

ir::Handle run(CudaContext& ctx, ir::LayerNorm& op) {
  auto x = ctx.contiguous(op.x);
  const Shape& s = x->shape();
  auto out = ctx.empty(s, x->dtype());
  std::int64_t n = 1;
  for (std::size_t d = s.rank() - op.dims; d < s.rank(); ++d) n *= static_cast<std::int64_t>(s[d]);
  std::int64_t rows = n == 0 ? 0 : static_cast<std::int64_t>(s.num_elements()) / n;
  if (rows == 0) return out;
  std::shared_ptr<const CudaTensor> w, b;
  if (op.weight) w = ctx.contiguous(op.weight);
  if (op.bias) b = ctx.contiguous(op.bias);
  const void* xp = x->data();
  const void* wp = w ? w->data() : nullptr;
  const void* bp = b ? b->data() : nullptr;
  void* yp = out->data();
  double eps = op.eps;
  const DType dt = x->dtype();
  if (const auto [block, ept, vec] = rows_in_registers(n, dt, aligned16({xp, wp, bp, yp}));
      block > 0) {  // Note [Rows in registers]
    ctx.launch(LayerNormRegsKernel(dt, ept, vec), rows * block,
               {&xp, &wp, &bp, &eps, &yp, &rows, &n}, "layer_norm", false, block,
               CudaContext::kOneWave);
    return out;
  }
  constexpr unsigned kBlock = 256;
  ctx.launch(LayerNormKernel(dt), rows * kBlock, {&xp, &wp, &bp, &eps, &yp, &rows, &n},
             "layer_norm", false, kBlock, 1 << 20);
  return out;
}

}  // namespace ember::cuda
