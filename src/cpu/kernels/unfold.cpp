// Sliding-window kernels: unfold (im2col), fold (col2im) and pool, over the canonical 3-d
// window of backend/window.hpp. All run one (n, c) image plane per task; along the
// innermost dim the range of window positions that fall inside the image is computed once
// per row, so the copy (unfold), the sum (fold) or the max or sum (pool) runs without a
// bounds check per element. Fold's and pool's sums happen in a fixed order within each
// plane (kernel offsets in row-major order): deterministic for any thread count.
#include <algorithm>
#include <cstring>

#include "cpu/kernels/combine.hpp"
#include "cpu/kernels/dtype_dispatch.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/backend/window.hpp"

namespace ember::cpu {
namespace {

using backend::Window3;
using std::int64_t;

// Image coordinate of window position o at kernel offset k along dim `d`; may be outside
// [0, in) (in the padding).
inline int64_t coord(const Window3& g, int d, std::size_t o, std::size_t k) {
  return int64_t(o * g.stride[d] + k * g.dilation[d]) - int64_t(g.padding[d]);
}

// The positions [lo, hi) along the innermost dim whose coordinate at kernel offset k lies
// inside the image.
inline void inner_range(const Window3& g, std::size_t k, std::size_t& lo, std::size_t& hi) {
  const int64_t a = int64_t(k * g.dilation[2]) - int64_t(g.padding[2]);  // coord of o = 0
  const auto s = int64_t(g.stride[2]), in = int64_t(g.in[2]), out = int64_t(g.out[2]);
  const int64_t l = a >= 0 ? 0 : (-a + s - 1) / s;
  const int64_t h = in - a <= 0 ? 0 : (in - a + s - 1) / s;  // first o with coord >= in
  lo = static_cast<std::size_t>(std::min(l, out));
  hi = static_cast<std::size_t>(std::clamp(h, int64_t(lo), out));
}

// Calls f(kernel offset k, position row r, image row or -1, ox range lo, hi) for every
// (kernel offset, outer position) row of one plane.
template <class F>
void for_each_window_row(const Window3& g, F&& f) {
  std::size_t k = 0;
  for (std::size_t kz = 0; kz < g.kernel[0]; ++kz) {
    for (std::size_t ky = 0; ky < g.kernel[1]; ++ky) {
      for (std::size_t kx = 0; kx < g.kernel[2]; ++kx, ++k) {
        std::size_t lo = 0, hi = 0;
        inner_range(g, kx, lo, hi);
        for (std::size_t oz = 0; oz < g.out[0]; ++oz) {
          const int64_t iz = coord(g, 0, oz, kz);
          for (std::size_t oy = 0; oy < g.out[1]; ++oy) {
            const int64_t iy = coord(g, 1, oy, ky);
            const bool inside =
                iz >= 0 && iz < int64_t(g.in[0]) && iy >= 0 && iy < int64_t(g.in[1]);
            const int64_t row = inside ? (iz * int64_t(g.in[1]) + iy) * int64_t(g.in[2]) : -1;
            f(k, oz * g.out[1] + oy, row, kx, lo, hi);
          }
        }
      }
    }
  }
}

std::size_t plane_grain(std::size_t work_per_plane) {
  return std::max<std::size_t>(1,
                               (std::size_t(1) << 15) / std::max<std::size_t>(work_per_plane, 1));
}

// Pooling of every plane: each (kernel offset, position row) pass folds one strided image
// row into the output row with reduction F (Combine), in row-major kernel order.
template <ir::ReduceFn F, class T>
void pool_planes(const Window3& g, const T* xp, T* yp) {
  using Op = Combine<F, T>;
  const std::size_t image = g.image_size(), L = g.positions(), ow = g.out[2], s = g.stride[2];
  parallel_for(0, g.planes, plane_grain(g.kernel_size() * L), [&](std::size_t p0, std::size_t p1) {
    for (std::size_t p = p0; p < p1; ++p) {
      const T* src = xp + p * image;
      T* dst = yp + p * L;
      std::fill(dst, dst + L, Op::init());
      for_each_window_row(g, [&](std::size_t, std::size_t r, int64_t row, std::size_t kx,
                                 std::size_t lo, std::size_t hi) {
        if (row < 0) return;
        const T* xr = src + row + coord(g, 2, lo, kx);
        T* y = dst + r * ow;
        for (std::size_t o = lo; o < hi; ++o) y[o] = Op::apply(y[o], xr[(o - lo) * s]);
      });
    }
  });
}

}  // namespace

ir::Handle run(CpuContext& ctx, ir::Unfold& op) {
  auto out = ctx.empty(ir::out_shape(op), op.x->dtype());
  auto x = contiguous(ctx, op.x);
  const Window3 g = backend::window3(x->shape(), op.window);
  const std::size_t K = g.kernel_size(), L = g.positions();
  const std::size_t elem = size_of(x->dtype());
  std::uint64_t pad_bits = 0;
  convert_elements(&op.pad_value, DType::F64, &pad_bits, x->dtype(), 1);
  visit_bytes(elem, [&](auto tag) {
    using T = decltype(tag);
    T pad;
    std::memcpy(&pad, &pad_bits, sizeof(T));
    const T* xp = x->data_as<const T>();
    T* yp = out->data_as<T>();
    const std::size_t image = g.image_size(), ow = g.out[2], s = g.stride[2];
    parallel_for(0, g.planes, plane_grain(K * L), [&](std::size_t p0, std::size_t p1) {
      for (std::size_t p = p0; p < p1; ++p) {
        const T* src = xp + p * image;
        T* dst = yp + p * K * L;
        for_each_window_row(g, [&](std::size_t k, std::size_t r, int64_t row, std::size_t kx,
                                   std::size_t lo, std::size_t hi) {
          T* y = dst + k * L + r * ow;
          if (row < 0) {
            std::fill(y, y + ow, pad);
            return;
          }
          std::fill(y, y + lo, pad);
          const T* xr = src + row + (coord(g, 2, lo, kx));
          if (s == 1) {
            std::copy(xr, xr + (hi - lo), y + lo);
          } else {
            for (std::size_t o = lo; o < hi; ++o) y[o] = xr[(o - lo) * s];
          }
          std::fill(y + hi, y + ow, pad);
        });
      }
    });
  });
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Fold& op) {
  auto out = ctx.empty(ir::out_shape(op), op.x->dtype());
  auto x = contiguous(ctx, op.x);
  const Window3 g = backend::window3(out->shape(), op.window);
  const std::size_t K = g.kernel_size(), L = g.positions();
  EMBER_ASSERT(L == x->shape()[2]);
  visit_numeric(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* xp = x->data_as<const T>();
      T* yp = out->data_as<T>();
      const std::size_t image = g.image_size(), ow = g.out[2], s = g.stride[2];
      parallel_for(0, g.planes, plane_grain(K * L), [&](std::size_t p0, std::size_t p1) {
        for (std::size_t p = p0; p < p1; ++p) {
          T* dst = yp + p * image;
          const T* src = xp + p * K * L;
          std::fill(dst, dst + image, T(0));
          for_each_window_row(g, [&](std::size_t k, std::size_t r, int64_t row, std::size_t kx,
                                     std::size_t lo, std::size_t hi) {
            if (row < 0) return;
            const T* c = src + k * L + r * ow;
            T* yr = dst + row + coord(g, 2, lo, kx);
            for (std::size_t o = lo; o < hi; ++o) yr[(o - lo) * s] += c[o];
          });
        }
      });
    } else {
      fail(std::string("fold: dtype ") + name(x->dtype()) + " is not a float dtype");
    }
  });
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Pool& op) {
  auto out = ctx.empty(ir::out_shape(op), op.x->dtype());
  auto x = contiguous(ctx, op.x);
  const Window3 g = backend::window3(x->shape(), op.window);
  visit_numeric(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      fail("pool: bool tensors have no pooling");
    } else if (op.fn == ir::PoolFn::Max) {
      pool_planes<ir::ReduceFn::Max, T>(g, x->data_as<const T>(), out->data_as<T>());
    } else {
      pool_planes<ir::ReduceFn::Sum, T>(g, x->data_as<const T>(), out->data_as<T>());
    }
  });
  return out;
}

}  // namespace ember::cpu
