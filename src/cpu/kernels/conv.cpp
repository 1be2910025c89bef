// Convolution (ir::Conv): the forward product and both adjoints on the GEMM (cpu/gemm),
// one (image, group) at a time, so the column matrix of one image — C / groups * prod(kernel)
// rows of L window positions — is built in a per-thread buffer that stays in cache, and is
// never materialised for the whole batch as Unfold + Matmul would:
//   Forward:    y[n, g] = W_g [O/G, CK] * cols(x[n, g]) [CK, L];
//   InputGrad:  dcols = W_g^T [CK, O/G] * g[n, g] [O/G, L], folded back onto dx[n, g];
//   WeightGrad: dW_g += g[n, g] [O/G, L] * cols(x[n, g])^T [L, CK], summed over n.
// A 1x1 window of stride 1 without padding needs no column matrix: the image is one.
// (image, group) tasks run on the thread pool, each with a single-threaded GEMM, when there
// are enough of them; otherwise they run in turn and each GEMM uses the threads. WeightGrad
// sums the images in fixed chunks (their number depends on the sizes alone) whose partial
// sums are added in chunk order, so no result depends on the thread count.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/gemm/gemm.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/kernels/window_rows.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/backend/window.hpp"
#include "ember/base/config.hpp"

namespace ember::cpu {
namespace {

using backend::Window3;
using std::int64_t;
using std::ptrdiff_t;
using std::size_t;
using window_rows::coord;
using window_rows::for_each_window_row;

void gemm(size_t m, size_t n, size_t k, const float* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
          const float* b, ptrdiff_t b_rs, ptrdiff_t b_cs, float* c, ptrdiff_t c_rs, bool acc) {
  gemm_f32(1, m, n, k, a, 0, a_rs, a_cs, b, 0, b_rs, b_cs, c, 0, c_rs, acc);
}
void gemm(size_t m, size_t n, size_t k, const double* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
          const double* b, ptrdiff_t b_rs, ptrdiff_t b_cs, double* c, ptrdiff_t c_rs, bool acc) {
  gemm_f64(1, m, n, k, a, 0, a_rs, a_cs, b, 0, b_rs, b_cs, c, 0, c_rs, acc);
}

// The sizes of one convolution.
struct Geometry {
  Window3 w;  // over the image [N, C, *in] (planes = N * C)
  size_t n, c, o, groups;
  size_t cg, og, k, l;  // C / G, O / G, prod(kernel), positions
  size_t ck() const { return cg * k; }
  size_t image() const { return w.image_size(); }
  // Whether the image is its own column matrix (1x1 window, stride 1, no padding).
  bool pointwise() const {
    for (int d = 0; d < 3; ++d)
      if (w.kernel[d] != 1 || w.stride[d] != 1 || w.padding[d] != 0) return false;
    return true;
  }
};

Geometry geometry(const Shape& image, const ir::Window& window, size_t out_channels,
                  size_t groups) {
  Geometry g;
  g.w = backend::window3(image, window);
  g.n = image[0];
  g.c = image[1];
  g.o = out_channels;
  g.groups = groups;
  g.cg = g.c / groups;
  g.og = g.o / groups;
  g.k = g.w.kernel_size();
  g.l = g.w.positions();
  return g;
}

// The column matrix [cg * K, L] of `planes` consecutive image planes starting at src.
template <class T>
void unfold_planes(const Window3& w, const T* src, size_t planes, T* dst) {
  const size_t image = w.image_size(), K = w.kernel_size(), L = w.positions(), ow = w.out[2],
               s = w.stride[2];
  for (size_t p = 0; p < planes; ++p) {
    const T* x = src + p * image;
    T* d = dst + p * K * L;
    for_each_window_row(w, [&](size_t k, size_t r, int64_t row, size_t kx, size_t lo, size_t hi) {
      T* y = d + k * L + r * ow;
      if (row < 0) {
        std::fill(y, y + ow, T(0));
        return;
      }
      std::fill(y, y + lo, T(0));
      const T* xr = x + row + coord(w, 2, lo, kx);
      if (s == 1) {
        std::copy(xr, xr + (hi - lo), y + lo);
      } else {
        for (size_t q = lo; q < hi; ++q) y[q] = xr[(q - lo) * s];
      }
      std::fill(y + hi, y + ow, T(0));
    });
  }
}

// Folds the column matrix [cg * K, L] back onto `planes` image planes at dst (overwritten).
template <class T>
void fold_planes(const Window3& w, const T* src, size_t planes, T* dst) {
  const size_t image = w.image_size(), K = w.kernel_size(), L = w.positions(), ow = w.out[2],
               s = w.stride[2];
  for (size_t p = 0; p < planes; ++p) {
    T* x = dst + p * image;
    const T* c = src + p * K * L;
    std::fill(x, x + image, T(0));
    for_each_window_row(w, [&](size_t k, size_t r, int64_t row, size_t kx, size_t lo, size_t hi) {
      if (row < 0) return;
      const T* cr = c + k * L + r * ow;
      T* xr = x + row + coord(w, 2, lo, kx);
      if (s == 1) {
        for (size_t q = lo; q < hi; ++q) xr[q - lo] += cr[q];
      } else {
        for (size_t q = lo; q < hi; ++q) xr[(q - lo) * s] += cr[q];
      }
    });
  }
}

// A per-thread scratch buffer for one column matrix.
template <class T>
T* scratch(size_t count) {
  static EMBER_THREAD_LOCAL std::vector<T> buf;
  if (buf.size() < count) buf.resize(count);
  return buf.data();
}

// Runs task(i) for i < count: on the thread pool when there are enough tasks to share,
// else in turn (each task's GEMM then spreads over the threads itself).
template <class F>
void for_each_task(size_t count, F&& task) {
  if (count >= 2 && count >= num_threads()) {
    parallel_for(0, count, 1, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) task(i);
    });
  } else {
    for (size_t i = 0; i < count; ++i) task(i);
  }
}

template <class T>
void forward(const Geometry& g, const T* x, const T* wt, T* y) {
  const size_t ck = g.ck(), L = g.l;
  for_each_task(g.n * g.groups, [&](size_t t) {
    const size_t n = t / g.groups, gi = t % g.groups;
    const T* planes = x + (n * g.c + gi * g.cg) * g.image();
    const T* cols = planes;
    if (!g.pointwise()) {
      T* buf = scratch<T>(ck * L);
      unfold_planes(g.w, planes, g.cg, buf);
      cols = buf;
    }
    gemm(g.og, L, ck, wt + gi * g.og * ck, ptrdiff_t(ck), 1, cols, ptrdiff_t(L), 1,
         y + (n * g.o + gi * g.og) * L, ptrdiff_t(L), false);
  });
}

template <class T>
void input_grad(const Geometry& g, const T* gy, const T* wt, T* dx) {
  const size_t ck = g.ck(), L = g.l;
  for_each_task(g.n * g.groups, [&](size_t t) {
    const size_t n = t / g.groups, gi = t % g.groups;
    T* planes = dx + (n * g.c + gi * g.cg) * g.image();
    T* dcols = g.pointwise() ? planes : scratch<T>(ck * L);
    // dcols [ck, L] = W_g^T * gy[n, g]: W_g [og, ck] read transposed.
    gemm(ck, L, g.og, wt + gi * g.og * ck, 1, ptrdiff_t(ck), gy + (n * g.o + gi * g.og) * L,
         ptrdiff_t(L), 1, dcols, ptrdiff_t(L), false);
    if (!g.pointwise()) fold_planes(g.w, dcols, g.cg, planes);
  });
}

template <class T>
void weight_grad(CpuContext& ctx, const Geometry& g, const T* x, const T* gy, T* dw) {
  const size_t ck = g.ck(), L = g.l, per_group = g.og * ck, total = g.o * ck;
  if (total == 0) return;
  if (g.n == 0 || L == 0) {
    std::fill(dw, dw + total, T(0));
    return;
  }
  // Images are summed in `chunks` fixed runs; at most 16, and at most ~32 MiB of partials.
  const size_t budget = (size_t{32} << 20) / sizeof(T);
  const size_t chunks = std::clamp<size_t>(budget / total, 1, std::min<size_t>(16, g.n));
  // The partial sums, from the backend's pool (a fresh heap block would be page-faulted in
  // on every call); every element is written before it is read.
  const auto partial_buf =
      chunks > 1 ? ctx.empty(Shape{chunks * total}, sizeof(T) == 4 ? DType::F32 : DType::F64)
                 : nullptr;
  T* const partial = chunks > 1 ? partial_buf->template data_as<T>() : nullptr;
  for_each_task(chunks * g.groups, [&](size_t t) {
    const size_t ch = t / g.groups, gi = t % g.groups;
    const size_t n0 = g.n * ch / chunks, n1 = g.n * (ch + 1) / chunks;
    T* out = (chunks > 1 ? partial + ch * total : dw) + gi * per_group;
    for (size_t n = n0; n < n1; ++n) {
      const T* planes = x + (n * g.c + gi * g.cg) * g.image();
      const T* cols = planes;
      if (!g.pointwise()) {
        T* buf = scratch<T>(ck * L);
        unfold_planes(g.w, planes, g.cg, buf);
        cols = buf;
      }
      // out [og, ck] += gy[n, g] [og, L] * cols^T [L, ck].
      gemm(g.og, ck, L, gy + (n * g.o + gi * g.og) * L, ptrdiff_t(L), 1, cols, 1, ptrdiff_t(L), out,
           ptrdiff_t(ck), n > n0);
    }
  });
  if (chunks == 1) return;
  parallel_for(0, total, 4096, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      T s = partial[i];
      for (size_t ch = 1; ch < chunks; ++ch) s += partial[ch * total + i];
      dw[i] = s;
    }
  });
}

}  // namespace

ir::Handle run(CpuContext& ctx, ir::Conv& op) {
  auto out = ctx.empty(ir::out_shape(op), op.x->dtype());
  if (out->shape().num_elements() == 0) return out;
  auto x = contiguous(ctx, op.x);
  auto w = contiguous(ctx, op.w);
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    switch (op.pass) {
      case ir::ConvPass::Forward: {
        const Geometry g = geometry(x->shape(), op.window, w->shape()[0], op.groups);
        forward<T>(g, x->data_as<const T>(), w->data_as<const T>(), out->data_as<T>());
        break;
      }
      case ir::ConvPass::InputGrad: {
        const Geometry g = geometry(out->shape(), op.window, x->shape()[1], op.groups);
        input_grad<T>(g, x->data_as<const T>(), w->data_as<const T>(), out->data_as<T>());
        break;
      }
      case ir::ConvPass::WeightGrad:
      case ir::ConvPass::Count_: {
        const Geometry g = geometry(x->shape(), op.window, w->shape()[1], op.groups);
        weight_grad<T>(ctx, g, x->data_as<const T>(), w->data_as<const T>(), out->data_as<T>());
        break;
      }
    }
  };
  switch (x->dtype()) {
    case DType::F32:
      run(float{});
      break;
    case DType::F64:
      run(double{});
      break;
    default:
      fail(std::string("conv: dtype ") + name(x->dtype()) + " has no convolution kernel");
  }
  return out;
}

}  // namespace ember::cpu
