// Stable sort along a dim, returning values and I64 indices. NaN sorts as the largest
// value (last ascending, first descending), as PyTorch.
#include <algorithm>
#include <numeric>
#include <type_traits>
#include <vector>

#include "cpu/kernels/dtype_dispatch.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/thread_pool.hpp"

namespace ember::cpu {

Outputs run(CpuContext& ctx, ir::Sort& op) {
  auto x = contiguous(ctx, op.x);
  const Shape& s = x->shape();
  std::size_t outer = 1, inner = 1;
  const std::size_t n = s[op.dim];
  for (std::size_t i = 0; i < op.dim; ++i) outer *= s[i];
  for (std::size_t i = op.dim + 1; i < s.rank(); ++i) inner *= s[i];
  auto values = ctx.empty(s, x->dtype());
  auto indices = ctx.empty(s, DType::I64);
  visit_numeric(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x->data_as<const T>();
    T* vp = values->data_as<T>();
    std::int64_t* ip = indices->data_as<std::int64_t>();
    const auto less = [](T a, T b) {
      if constexpr (std::is_floating_point_v<T>) {
        if (b != b) return a == a;  // everything but NaN is less than NaN
        if (a != a) return false;
      }
      return a < b;
    };
    parallel_for(0, outer * inner, 64, [&](std::size_t i0, std::size_t i1) {
      std::vector<std::int64_t> idx(n);
      for (std::size_t i = i0; i < i1; ++i) {
        const std::size_t o = i / inner, j = i % inner;
        const T* base = xp + o * n * inner + j;
        std::iota(idx.begin(), idx.end(), 0);
        if (op.descending) {
          std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
            return less(base[static_cast<std::size_t>(b) * inner],
                        base[static_cast<std::size_t>(a) * inner]);
          });
        } else {
          std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
            return less(base[static_cast<std::size_t>(a) * inner],
                        base[static_cast<std::size_t>(b) * inner]);
          });
        }
        for (std::size_t r = 0; r < n; ++r) {
          const std::size_t at = o * n * inner + r * inner + j;
          vp[at] = base[static_cast<std::size_t>(idx[r]) * inner];
          ip[at] = idx[r];
        }
      }
    });
  });
  return {values, indices};
}

}  // namespace ember::cpu
