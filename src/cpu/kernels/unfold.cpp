// Sliding-window kernels: unfold (im2col), fold (col2im) and pool, over the canonical 3-d
// window of backend/window.hpp. All run one (n, c) image plane per task; along the
// innermost dim the range of window positions that fall inside the image is computed once
// per row, so the copy (unfold), the sum (fold) or the max or sum (pool) runs without a
// bounds check per element. Fold's and pool's sums happen in a fixed order within each
// plane (kernel offsets in row-major order): deterministic for any thread count.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/kernels/combine.hpp"
#include "cpu/kernels/dtype_dispatch.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/kernels/window_rows.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/backend/window.hpp"
#include "ember/base/config.hpp"

namespace ember::cpu {
namespace {

using backend::Window3;
using std::int64_t;
using window_rows::coord;
using window_rows::for_each_window_row;

std::size_t plane_grain(std::size_t work_per_plane) {
  return std::max<std::size_t>(1,
                               (std::size_t(1) << 15) / std::max<std::size_t>(work_per_plane, 1));
}

// Windows that tile the image without overlap or padding (stride == kernel, dilation 1, no
// padding, the 2x2 stride-2 pooling of most CNNs), in at most 2 spatial dims.
bool tiles_image(const Window3& g) {
  if (g.in[0] != 1 || g.kernel[0] != 1) return false;
  for (int d = 1; d < 3; ++d) {
    if (g.stride[d] != g.kernel[d] || g.dilation[d] != 1 || g.padding[d] != 0 ||
        g.out[d] * g.kernel[d] > g.in[d])
      return false;
  }
  return true;
}

// pool_planes where tiles_image(g): each output folds its own kh x kw block in row-major
// kernel order, as the general walk does, but one output at a time in registers: the walk's
// kernel-offset passes over short output rows (7 and 14 wide in the demo's CNN) cost five
// times the loads and compares themselves.
template <ir::ReduceFn F, class T>
void pool_tiled(const Window3& g, const T* xp, T* yp) {
  using Op = Combine<F, T>;
  const std::size_t image = g.image_size(), L = g.positions(), iw = g.in[2], ow = g.out[2],
                    oh = g.out[1], kh = g.kernel[1], kw = g.kernel[2];
  parallel_for(0, g.planes, plane_grain(image), [&](std::size_t p0, std::size_t p1) {
    for (std::size_t p = p0; p < p1; ++p) {
      for (std::size_t r = 0; r < oh; ++r) {
        const T* x0 = xp + p * image + r * kh * iw;
        T* y = yp + p * L + r * ow;
        if (kh == 2 && kw == 2) {  // one loop per offset: each vectorizes (stride 2)
          const T* x1 = x0 + iw;
          for (std::size_t o = 0; o < ow; ++o) y[o] = Op::apply(Op::init(), x0[2 * o]);
          for (std::size_t o = 0; o < ow; ++o) y[o] = Op::apply(y[o], x0[2 * o + 1]);
          for (std::size_t o = 0; o < ow; ++o) y[o] = Op::apply(y[o], x1[2 * o]);
          for (std::size_t o = 0; o < ow; ++o) y[o] = Op::apply(y[o], x1[2 * o + 1]);
          continue;
        }
        for (std::size_t o = 0; o < ow; ++o) {
          T v = Op::init();
          for (std::size_t ky = 0; ky < kh; ++ky) {
            for (std::size_t kx = 0; kx < kw; ++kx) v = Op::apply(v, x0[ky * iw + o * kw + kx]);
          }
          y[o] = v;
        }
      }
    }
  });
}

// Pooling of every plane: each (kernel offset, position row) pass folds one strided image
// row into the output row with reduction F (Combine), in row-major kernel order.
template <ir::ReduceFn F, class T>
void pool_planes(const Window3& g, const T* xp, T* yp) {
  using Op = Combine<F, T>;
  if (tiles_image(g)) {
    pool_tiled<F, T>(g, xp, yp);
    return;
  }
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

// `keep ? v : +0` without a branch: which entries equal their window's maximum is data,
// and a mispredicted branch per entry costs more than the whole pass's loads and stores.
template <class T>
inline T select_bits(bool keep, T v) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  return std::bit_cast<T>(std::bit_cast<U>(v) & (U(0) - U(keep)));
}

// max_pool_grad_planes where tiles_image(g): every image entry lies in at most one window,
// so each is written once — its window's share where it equals the window's maximum, else 0 —
// in one pass over the image rows, with no accumulation. Bits equal the general walk's (which
// adds the one share to 0: hence `share + 0`, turning a -0 share into +0 as that sum does).
template <class T>
void max_pool_grad_tiled(const Window3& g, const T* xp, const T* yp, const T* gp, T* dp) {
  const std::size_t image = g.image_size(), L = g.positions(), iw = g.in[2], ow = g.out[2],
                    oh = g.out[1], kh = g.kernel[1], kw = g.kernel[2];
  const std::size_t covered_w = ow * kw;
  parallel_for(0, g.planes, plane_grain(2 * image), [&](std::size_t p0, std::size_t p1) {
    static EMBER_THREAD_LOCAL std::vector<T> share;
    static EMBER_THREAD_LOCAL std::vector<std::uint32_t> hits;
    share.resize(ow);
    hits.resize(ow);
    for (std::size_t p = p0; p < p1; ++p) {
      const T* src = xp + p * image;
      T* dst = dp + p * image;
      for (std::size_t r = 0; r < oh; ++r) {
        const T* y = yp + p * L + r * ow;
        const T* gr = gp + p * L + r * ow;
        const T* x0 = src + r * kh * iw;
        T* d0 = dst + r * kh * iw;
        if (kh == 2 && kw == 2) {  // the common window: one loop, each window in registers
          const T* x1 = x0 + iw;
          T* d1 = d0 + iw;
          for (std::size_t o = 0; o < ow; ++o) {
            const T m = y[o];
            const bool e00 = x0[2 * o] == m, e01 = x0[2 * o + 1] == m, e10 = x1[2 * o] == m,
                       e11 = x1[2 * o + 1] == m;
            const T sh = gr[o] / T(std::uint32_t(e00) + e01 + e10 + e11) + T(0);
            d0[2 * o] = select_bits(e00, sh);
            d0[2 * o + 1] = select_bits(e01, sh);
            d1[2 * o] = select_bits(e10, sh);
            d1[2 * o + 1] = select_bits(e11, sh);
          }
          std::fill(d0 + covered_w, d0 + iw, T(0));
          std::fill(d1 + covered_w, d1 + iw, T(0));
          continue;
        }
        std::fill(hits.begin(), hits.end(), 0u);
        for (std::size_t ky = 0; ky < kh; ++ky) {
          const T* xr = x0 + ky * iw;
          if (kw == 2) {
            for (std::size_t o = 0; o < ow; ++o)
              hits[o] += std::uint32_t(xr[2 * o] == y[o]) + std::uint32_t(xr[2 * o + 1] == y[o]);
            continue;
          }
          for (std::size_t o = 0; o < ow; ++o) {
            std::uint32_t n = 0;
            for (std::size_t kx = 0; kx < kw; ++kx) n += xr[o * kw + kx] == y[o] ? 1u : 0u;
            hits[o] += n;
          }
        }
        for (std::size_t o = 0; o < ow; ++o) share[o] = gr[o] / T(hits[o]) + T(0);
        for (std::size_t ky = 0; ky < kh; ++ky) {
          const T* xr = x0 + ky * iw;
          T* dr = d0 + ky * iw;
          if (kw == 2) {
            for (std::size_t o = 0; o < ow; ++o) {
              dr[2 * o] = select_bits(xr[2 * o] == y[o], share[o]);
              dr[2 * o + 1] = select_bits(xr[2 * o + 1] == y[o], share[o]);
            }
          } else {
            for (std::size_t o = 0; o < ow; ++o) {
              for (std::size_t kx = 0; kx < kw; ++kx) {
                dr[o * kw + kx] = select_bits(xr[o * kw + kx] == y[o], share[o]);
              }
            }
          }
          std::fill(dr + covered_w, dr + iw, T(0));
        }
      }
      // Rows below the last window row take no gradient.
      std::fill(dst + oh * kh * iw, dst + image, T(0));
    }
  });
}

// The gradient of max pooling over every plane (ir::MaxPoolGrad): per window position the
// count of its entries equal to y (the padding's -inf entries count where y is -inf, as an
// unfold padded with -inf would give), then each such entry receives g / count, summed in
// row-major kernel order.
template <class T>
void max_pool_grad_planes(const Window3& g, const T* xp, const T* yp, const T* gp, T* dp) {
  if (tiles_image(g)) {
    max_pool_grad_tiled(g, xp, yp, gp, dp);
    return;
  }
  const std::size_t image = g.image_size(), L = g.positions(), ow = g.out[2], s = g.stride[2],
                    K = g.kernel_size();
  parallel_for(0, g.planes, plane_grain(2 * K * L), [&](std::size_t p0, std::size_t p1) {
    static EMBER_THREAD_LOCAL std::vector<T> share;
    static EMBER_THREAD_LOCAL std::vector<std::uint32_t> hits, inside;
    share.resize(L);
    hits.assign(L, 0);
    inside.assign(L, 0);
    for (std::size_t p = p0; p < p1; ++p) {
      const T* src = xp + p * image;
      const T* y = yp + p * L;
      const T* gr = gp + p * L;
      T* dst = dp + p * image;
      std::fill(hits.begin(), hits.end(), 0u);
      std::fill(inside.begin(), inside.end(), 0u);
      for_each_window_row(g, [&](std::size_t, std::size_t r, int64_t row, std::size_t kx,
                                 std::size_t lo, std::size_t hi) {
        if (row < 0) return;
        const T* xr = src + row + coord(g, 2, lo, kx);
        const std::size_t base = r * ow;
        for (std::size_t o = lo; o < hi; ++o) {
          hits[base + o] += xr[(o - lo) * s] == y[base + o] ? 1u : 0u;
          inside[base + o] += 1;
        }
      });
      for (std::size_t l = 0; l < L; ++l) {
        std::uint32_t n = hits[l];
        if (y[l] == -std::numeric_limits<T>::infinity()) n += std::uint32_t(K) - inside[l];
        share[l] = gr[l] / T(n);  // n == 0 (a NaN window): no entry takes it
      }
      std::fill(dst, dst + image, T(0));
      for_each_window_row(g, [&](std::size_t, std::size_t r, int64_t row, std::size_t kx,
                                 std::size_t lo, std::size_t hi) {
        if (row < 0) return;
        const std::size_t off = std::size_t(int64_t(row) + coord(g, 2, lo, kx));
        const T* xr = src + off;
        T* dr = dst + off;
        const std::size_t base = r * ow;
        for (std::size_t o = lo; o < hi; ++o) {
          const std::size_t i = (o - lo) * s;
          if (xr[i] == y[base + o]) dr[i] += share[base + o];
        }
      });
    }
  });
}

}  // namespace

ir::Handle run(CpuContext& ctx, ir::MaxPoolGrad& op) {
  auto out = ctx.empty(ir::out_shape(op), op.x->dtype());
  if (out->shape().num_elements() == 0) return out;
  auto x = contiguous(ctx, op.x);
  auto y = contiguous(ctx, op.y);
  auto g = contiguous(ctx, op.g);
  const Window3 w = backend::window3(x->shape(), op.window);
  switch (x->dtype()) {
    case DType::F32:
      max_pool_grad_planes<float>(w, x->data_as<const float>(), y->data_as<const float>(),
                                  g->data_as<const float>(), out->data_as<float>());
      break;
    case DType::F64:
      max_pool_grad_planes<double>(w, x->data_as<const double>(), y->data_as<const double>(),
                                   g->data_as<const double>(), out->data_as<double>());
      break;
    default:
      fail(std::string("max_pool_grad: dtype ") + name(x->dtype()) + " has no kernel");
  }
  return out;
}

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
