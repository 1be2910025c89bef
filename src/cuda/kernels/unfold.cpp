// Sliding-window launchers: unfold (im2col), fold (col2im) and pool, one thread per output
// element over the canonical 3-d window of backend/window.hpp. Fold gathers the column
// entries of each image element instead of scattering into it: deterministic, no atomics.
#include "cuda/kernels/kernels.hpp"
#include "ember/backend/window.hpp"
#include "ember/base/tensor_data.hpp"

namespace ember::cuda {
namespace {

Win to_win(const backend::Window3& g) {
  Win w;
  w.planes = static_cast<std::int64_t>(g.planes);
  w.K = static_cast<std::int64_t>(g.kernel_size());
  w.L = static_cast<std::int64_t>(g.positions());
  w.image = static_cast<std::int64_t>(g.image_size());
  for (int d = 0; d < 3; ++d) {
    w.in[d] = static_cast<std::int64_t>(g.in[d]);
    w.k[d] = static_cast<std::int64_t>(g.kernel[d]);
    w.s[d] = static_cast<std::int64_t>(g.stride[d]);
    w.p[d] = static_cast<std::int64_t>(g.padding[d]);
    w.d[d] = static_cast<std::int64_t>(g.dilation[d]);
    w.out[d] = static_cast<std::int64_t>(g.out[d]);
  }
  return w;
}

// Whether the window kernels need 64-bit index arithmetic: an index of the image or the
// columns (planes * image, planes * K * L), or a coordinate with padding and the kernel's
// reach, reaches 2^31.
bool window_index_wide(const Win& w) {
  constexpr std::int64_t kMax = std::int64_t(1) << 31;
  bool wide = w.planes * w.image >= kMax || w.planes * w.K * w.L >= kMax;
  for (int d = 0; d < 3; ++d) {
    wide = wide || w.in[d] + w.p[d] + w.out[d] * w.s[d] + w.k[d] * w.d[d] >= kMax;
  }
  return wide;
}

}  // namespace

ir::Handle run(CudaContext& ctx, ir::Unfold& op) {
  auto out = ctx.empty(ir::out_shape(op), op.x->dtype());
  auto x = ctx.contiguous(op.x);
  const auto g = backend::window3(x->shape(), op.window);
  Win w = to_win(g);
  const std::int64_t n = w.planes * w.K * w.L;
  if (n == 0) return out;
  std::uint64_t pad_bits = 0;  // converted as the Cpu converts it
  convert_elements(&op.pad_value, DType::F64, &pad_bits, x->dtype(), 1);
  void* y = out->data();
  const void* xp = x->data();
  const std::size_t elem = size_of(x->dtype());
  const bool wide = window_index_wide(w);
  ctx.launch(UnfoldKernel(elem, wide), n, {&w, &y, &xp, &pad_bits}, "unfold");
  return out;
}

ir::Handle run(CudaContext& ctx, ir::Fold& op) {
  auto out = ctx.empty(ir::out_shape(op), op.x->dtype());
  auto x = ctx.contiguous(op.x);
  const auto g = backend::window3(out->shape(), op.window);
  Win w = to_win(g);
  const std::int64_t n = w.planes * w.image;
  if (n == 0) return out;
  void* y = out->data();
  const void* xp = x->data();
  const DType dt = x->dtype();
  const bool wide = window_index_wide(w);
  ctx.launch(FoldKernel(dt, wide), n, {&w, &y, &xp}, "fold");
  return out;
}

ir::Handle run(CudaContext& ctx, ir::Pool& op) {
  auto out = ctx.empty(ir::out_shape(op), op.x->dtype());
  auto x = ctx.contiguous(op.x);
  const auto g = backend::window3(x->shape(), op.window);
  Win w = to_win(g);
  const std::int64_t n = w.planes * w.L;
  if (n == 0) return out;
  void* y = out->data();
  const void* xp = x->data();
  const DType dt = x->dtype();
  const bool max = op.fn == ir::PoolFn::Max, wide = window_index_wide(w);
  ctx.launch(PoolKernel(dt, max, wide), n, {&w, &y, &xp}, "pool");
  return out;
}

// Unreachable: supports() refuses these, so execute() sends them to the fallback backend.
ir::Handle run(CudaContext&, ir::MaxPoolGrad&) {
  fail("Cuda: MaxPoolGrad has no kernel on this backend");
}
std::vector<ir::Handle> run(CudaContext&, ir::Svd&) {
  fail("Cuda: Svd has no kernel on this backend");
}

}  // namespace ember::cuda
