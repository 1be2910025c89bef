// Batched, broadcasting matmul over the GEMM (cpu/gemm). Operand views are passed with
// their strides, so transposed and sliced matrices need no copy; batch dims are walked
// as one strided dim where they collapse, else one GEMM call per batch index.
#include <vector>

#include "cpu/gemm/gemm.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/strided.hpp"

namespace ember::cpu {

ir::Handle run(CpuContext& ctx, ir::Matmul& op) {
  const auto& a = as_cpu(op.a);
  const auto& b = as_cpu(op.b);
  const DType dt = a.dtype();
  const std::size_t r = op.out_shape.rank();
  const std::size_t m = op.out_shape[r - 2], n = op.out_shape[r - 1], k = a.shape()[r - 1];
  auto out = ctx.empty(op.out_shape, dt);
  if (op.out_shape.num_elements() == 0) return out;
  // Inner-matrix strides; a row stride of a single-row matrix is irrelevant but must not be 0
  // for the GEMM's packing to be well defined.
  const std::ptrdiff_t a_rs = a.strides()[r - 2], a_cs = a.strides()[r - 1];
  const std::ptrdiff_t b_rs = b.strides()[r - 2], b_cs = b.strides()[r - 1];
  // Batch dims, with broadcast dims as stride 0.
  StridedSpace<3> sp;
  for (std::size_t i = 0; i + 2 < r; ++i) {
    sp.shape.push_back(op.out_shape[i]);
    sp.strides[0].push_back(a.shape()[i] == 1 ? 0 : a.strides()[i]);
    sp.strides[1].push_back(b.shape()[i] == 1 ? 0 : b.strides()[i]);
    sp.strides[2].push_back(out->strides()[i]);
  }
  sp.shape.push_back(1);  // a trailing unit dim keeps the space non-empty
  for (auto& s : sp.strides) s.push_back(0);
  sp.collapse();
  const std::ptrdiff_t a_bs = sp.strides[0].back(), b_bs = sp.strides[1].back(),
                       c_bs = sp.strides[2].back();
  sp.for_each_row(
      [&](const std::array<std::int64_t, 3>& off, std::size_t len) {
        if (dt == DType::F64) {
          gemm_f64(len, m, n, k, a.data_as<const double>() + off[0], a_bs, a_rs, a_cs,
                   b.data_as<const double>() + off[1], b_bs, b_rs, b_cs,
                   out->data_as<double>() + off[2], c_bs, static_cast<std::ptrdiff_t>(n), false);
        } else {
          gemm_f32(len, m, n, k, a.data_as<const float>() + off[0], a_bs, a_rs, a_cs,
                   b.data_as<const float>() + off[1], b_bs, b_rs, b_cs,
                   out->data_as<float>() + off[2], c_bs, static_cast<std::ptrdiff_t>(n), false);
        }
      },
      std::size_t(-1));  // the GEMM parallelises internally
  return out;
}

}  // namespace ember::cpu
