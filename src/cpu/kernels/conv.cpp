// Convolution (ir::Conv): the forward product and both adjoints, one (image, group) at a
// time. With cols(x[n, g]) the column matrix [C/G * K, L] of one image's group (row r a
// channel and kernel offset, column l a window position):
//   Forward:    y[n, g] = W_g [O/G, CK] * cols(x[n, g]) [CK, L];
//   InputGrad:  dcols = W_g^T [CK, O/G] * g[n, g] [O/G, L], folded back onto dx[n, g];
//   WeightGrad: dW_g += g[n, g] [O/G, L] * cols(x[n, g])^T [L, CK], summed over n.
// The column matrix is never stored. Where it pays (Note [Phase images]: all but maps where
// more than half the positions again would be dropped) each image is split by stride phase
// so every column-matrix row is a contiguous run: Forward's GEMM reads those runs in place
// (gemm_packed_a_in_place), a cache-sized run of positions per task, and WeightGrad packs
// its B by transposing them. Elsewhere Forward and WeightGrad are implicit GEMMs whose B
// panels are gathered from the image row run by row run (pack_cols, pack_cols_t, walk_row).
// InputGrad of a stride-1 window is the forward of the flipped weight (Note [Input grad as a
// forward]); other strides compute dcols a cache-sized run of window positions at a time
// and fold each run onto dx while it is in cache. A 1x1 window of stride 1 without padding
// needs none of this: the image is its own columns.
// The weight, the GEMM's A in Forward and InputGrad, is packed into the GEMM's panels once
// per call for all images and threads (GroupWeights, Note [Packed A] in gemm.hpp), and
// kept with the weight's buffer for the next call when it is convolved again unchanged
// (Note [Packed weight cache] in packed_cache.hpp).
// Convolutions where every output channel reads one input channel (C / G == 1: depthwise,
// and any single-channel input) take a direct path instead, a multiply-add of image rows
// per kernel offset, for all three passes: a GEMM with K-deep products would waste its tiles.
// Forward takes an epilogue (conv_forward_into in conv.hpp, for fused groups): the GEMM path
// passes it to each (image, group) product, shifted to the group's channels
// (ShiftedEpilogue), the phase route calls it on each block's valid output rows once copied
// out, and the direct path on each output plane once computed.
// (image, group[, run of positions]) tasks run on the thread pool, each with a
// single-threaded GEMM, when there are enough of them; otherwise they run in turn and each
// GEMM uses the threads. Every sum runs in an order fixed by the sizes alone: WeightGrad
// sums the images in fixed chunks whose partial sums are added in chunk order, so no
// result depends on the thread count.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "cpu/kernels/conv.hpp"

#include "cpu/gemm/gemm.hpp"
#include "cpu/isa.hpp"
#include "cpu/kernels/conv_rows.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/kernels/packed_cache.hpp"
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
using window_rows::inner_range;

void gemm(size_t m, size_t n, size_t k, const float* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
          const float* b, ptrdiff_t b_rs, ptrdiff_t b_cs, float* c, ptrdiff_t c_rs, bool acc) {
  gemm_f32(1, m, n, k, a, 0, a_rs, a_cs, b, 0, b_rs, b_cs, c, 0, c_rs, acc);
}
void gemm(size_t m, size_t n, size_t k, const double* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
          const double* b, ptrdiff_t b_rs, ptrdiff_t b_cs, double* c, ptrdiff_t c_rs, bool acc) {
  gemm_f64(1, m, n, k, a, 0, a_rs, a_cs, b, 0, b_rs, b_cs, c, 0, c_rs, acc);
}
void gemm_packed(size_t m, size_t n, size_t k, const float* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                 const PackedB<float>& b, float* c, ptrdiff_t c_rs, bool acc) {
  gemm_f32_packed_b(m, n, k, a, a_rs, a_cs, b, c, c_rs, acc);
}
void gemm_packed(size_t m, size_t n, size_t k, const double* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                 const PackedB<double>& b, double* c, ptrdiff_t c_rs, bool acc) {
  gemm_f64_packed_b(m, n, k, a, a_rs, a_cs, b, c, c_rs, acc);
}

// Each group's weight as the GEMM's left operand, packed once per call and read by every
// image's products on every thread (Note [Packed A] in gemm.hpp), where a plain GEMM would
// pack it again for each image, and for each run of window positions of InputGrad. Group
// gi's matrix [m, k] is w[gi * group_stride + i * rs + p * cs]. The results are bit for bit
// those of packing per product. The panels live in a block of the backend's pool for the
// call (a fresh heap block would be page-faulted in on every call).
template <class T>
class GroupWeights {
 public:
  // `source`, when given, is the tensor w points into, made for these panels (InputGrad's
  // flipped weight, Note [Input grad as a forward]): kept alive with them, as PackedA's
  // matrix-vector products read their source.
  // `transposed`: packed as the right operand W_g^T [k, m] instead (PrepackedB, for Note
  // [Output rows as tiles]).
  GroupWeights(CpuContext& ctx, size_t groups, size_t m, size_t k, const T* w,
               ptrdiff_t group_stride, ptrdiff_t rs, ptrdiff_t cs,
               std::shared_ptr<CpuTensor> source = nullptr, bool transposed = false)
      : source_(std::move(source)) {
    if (transposed) {
      bt_.assign(groups, PrepackedB<T>(k, m));
      pack(ctx, bt_, w, group_stride, cs, rs);
    } else {
      a_.assign(groups, PackedA<T>(m, k));
      pack(ctx, a_, w, group_stride, rs, cs);
    }
  }
  bool transposed() const { return !bt_.empty(); }
  const PackedA<T>& operator[](size_t gi) const { return a_[gi]; }
  const PrepackedB<T>& transposed_at(size_t gi) const { return bt_[gi]; }

 private:
  template <class P>
  void pack(CpuContext& ctx, std::vector<P>& packs, const T* w, ptrdiff_t group_stride,
            ptrdiff_t rs, ptrdiff_t cs) {
    const size_t per = packs.empty() ? 0 : packs[0].size();
    if (per == 0) return;
    storage_ = ctx.empty(Shape{packs.size() * per}, sizeof(T) == 4 ? DType::F32 : DType::F64);
    T* panels = storage_->template data_as<T>();
    for (size_t gi = 0; gi < packs.size(); ++gi)
      packs[gi].pack(panels + gi * per, w + ptrdiff_t(gi) * group_stride, rs, cs);
  }
  std::vector<PackedA<T>> a_;
  std::vector<PrepackedB<T>> bt_;
  std::shared_ptr<CpuTensor> source_, storage_;
};

// The packed weight of `w` (the contiguous operand of op; `given` whether it is op's own
// tensor rather than a copy) for one pass (flipped: InputGrad's forward route; transposed:
// Note [Output rows as tiles]): make(), a shared GroupWeights<T>, taken from or put in the
// cache (Note [Packed weight cache] in packed_cache.hpp).
template <class T, class Make>
std::shared_ptr<const GroupWeights<T>> packed_weights(CpuContext& ctx, const CpuTensor& w,
                                                      bool given, ir::ConvPass pass, bool flipped,
                                                      bool transposed, size_t groups,
                                                      const Make& make) {
  const PackedKey key = packed_key(
      PackedUse::ConvWeight, w,
      {std::int64_t(groups), std::int64_t(pass), (flipped ? 1 : 0) + (transposed ? 2 : 0)});
  if (auto cached = cached_packing<GroupWeights<T>>(ctx, w, given, key, make)) return cached;
  return make();
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
  // Whether each output channel reads a single input channel (the direct path).
  bool per_channel() const { return cg == 1; }
  // Whether Forward takes the direct path: depthwise (groups > 1), and a single-channel
  // input with few output channels. With one group and a sliver's worth of output channels
  // (the stem of a CNN on grey images), each image is one GEMM of O rows and K-deep
  // products that reads each image row once for all O channels, where the direct path
  // reads it once per channel.
  bool direct_forward() const { return per_channel() && (groups > 1 || og < 4); }
  // Whether WeightGrad does: depthwise only; a single-channel input with one group has a
  // GEMM of O rows and K columns per image, which the GEMM path does better.
  bool direct_weight_grad() const { return per_channel() && groups > 1; }
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

// Splits entries [l0, l0 + n) of row r of the column matrix of the planes at offset 0 into
// runs along the innermost dim and calls piece(i, count, src) for each: entries i .. i +
// count - 1 (counted from l0) are the image elements src, src + stride[2], ... (src >= 0),
// or padding (src < 0).
template <class F>
void walk_row(const Geometry& g, size_t r, size_t l0, size_t n, F&& piece) {
  const Window3& w = g.w;
  const size_t ch = r / g.k, kk = r % g.k;
  const size_t kx = kk % w.kernel[2], ky = kk / w.kernel[2] % w.kernel[1],
               kz = kk / (w.kernel[2] * w.kernel[1]);
  size_t lo = 0, hi = 0;
  inner_range(w, kx, lo, hi);
  const size_t ow = w.out[2];
  size_t ox = l0 % ow, oy = l0 / ow % w.out[1], oz = l0 / ow / w.out[1];
  const int64_t plane = int64_t(ch * g.image());
  for (size_t i = 0; i < n;) {
    const size_t run = std::min(ow - ox, n - i);
    const int64_t iz = coord(w, 0, oz, kz), iy = coord(w, 1, oy, ky);
    if (iz >= 0 && iz < int64_t(w.in[0]) && iy >= 0 && iy < int64_t(w.in[1])) {
      const size_t a = std::clamp(lo, ox, ox + run), b = std::clamp(hi, a, ox + run);
      if (a > ox) piece(i, a - ox, int64_t(-1));
      if (b > a)
        piece(i + (a - ox), b - a,
              plane + (iz * int64_t(w.in[1]) + iy) * int64_t(w.in[2]) + coord(w, 2, a, kx));
      if (ox + run > b) piece(i + (b - ox), ox + run - b, int64_t(-1));
    } else {
      piece(i, run, int64_t(-1));
    }
    i += run;
    ox = 0;
    if (++oy == w.out[1]) {
      oy = 0;
      ++oz;
    }
  }
}

// o[e] = x[e] (x non-null) or 0 for e < len: the runs of a column-matrix row are short
// (an output row: 7 to 28 entries in a small CNN, single entries of padding), where a call
// of the library's memcpy or memset costs more than the copy. 16-byte moves, the last one
// overlapping the one before when len is not a multiple of a vector (runs never overlap
// each other, so rewriting an entry with its own value is harmless).
template <class T>
inline void copy_run(T* o, const T* x, size_t len) {
  typedef T V __attribute__((vector_size(16)));
  constexpr size_t n = 16 / sizeof(T);
  if (len < n) {
    for (size_t e = 0; e < len; ++e) o[e] = x ? x[e] : T(0);
    return;
  }
  V v = {};
  for (size_t e = 0; e + n <= len; e += n) {
    if (x) std::memcpy(&v, x + e, 16);
    std::memcpy(o + e, &v, 16);
  }
  if (x) std::memcpy(&v, x + len - n, 16);
  std::memcpy(o + len - n, &v, 16);
}

// Entries [l0, l0 + n) of column-matrix row r into out[0], out[os], ... .
template <class T>
void gather_row(const Geometry& g, const T* planes, size_t r, size_t l0, size_t n, T* out,
                size_t os) {
  const size_t s = g.w.stride[2];
  walk_row(g, r, l0, n, [&](size_t i, size_t count, int64_t src) {
    T* o = out + i * os;
    if (os == 1 && (src < 0 || s == 1)) {
      copy_run(o, src < 0 ? nullptr : planes + src, count);
    } else if (src < 0) {
      for (size_t q = 0; q < count; ++q) o[q * os] = T(0);
    } else {
      const T* x = planes + src;
      for (size_t q = 0; q < count; ++q) o[q * os] = x[q * s];
    }
  });
}

// o[e] = x[e * s] for e < len; stride 2 (the common strided window) as shuffles of 16-byte
// vectors, which every target has (SSE2 is part of x86-64).
template <class T>
inline void copy_strided(T* o, const T* x, size_t len, size_t s) {
  size_t e = 0;
  if (s == 2) {
    typedef T V __attribute__((vector_size(16)));
    constexpr size_t n = 16 / sizeof(T);
    // The second load reaches x[2 * (e + n) - 1], one past the last element read when
    // e + n == len: so the vector loop stops a vector early of that.
    for (; e + n < len; e += n) {
      V a, b;
      std::memcpy(&a, x + 2 * e, 16);
      std::memcpy(&b, x + 2 * e + n, 16);
      V r;
      if constexpr (n == 4)
        r = __builtin_shufflevector(a, b, 0, 2, 4, 6);
      else
        r = __builtin_shufflevector(a, b, 0, 2);
      std::memcpy(o + e, &r, 16);
    }
  }
  for (; e < len; ++e) o[e] = x[e * s];
}

// A per-thread scratch buffer; a kernel that runs while another's buffer is live takes its
// own slot (ColsOperand's packers run inside a convolution's tasks).
template <class T, int Slot = 0>
T* scratch(size_t count) {
  static EMBER_THREAD_LOCAL std::vector<T> buf;
  if (buf.size() < count) buf.resize(count);
  return buf.data();
}

// d[p * ld_d + j] = row(j)[p] for j < jn, p < kc (row(j) a const T*): 16-byte blocks of
// rows turned into 16-byte blocks of columns by shuffles (4 x 4 floats, 2 x 2 doubles),
// which every target has (SSE2 is part of x86-64).
template <class T, class Row>
void transpose_rows(const Row& row, size_t jn, size_t kc, T* d, size_t ld_d) {
  typedef T V __attribute__((vector_size(16)));
  constexpr size_t n = 16 / sizeof(T);
  const auto at = [&](size_t j, size_t p) {
    V v;
    std::memcpy(&v, row(j) + p, 16);
    return v;
  };
  size_t j = 0;
  for (; j + n <= jn; j += n) {
    size_t p = 0;
    for (; p + n <= kc; p += n) {
      V o[n];
      if constexpr (n == 4) {
        const V r0 = at(j, p), r1 = at(j + 1, p), r2 = at(j + 2, p), r3 = at(j + 3, p);
        const V t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5);
        const V t1 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
        const V t2 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
        const V t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
        o[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
        o[1] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
        o[2] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
        o[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
      } else {
        const V r0 = at(j, p), r1 = at(j + 1, p);
        o[0] = __builtin_shufflevector(r0, r1, 0, 2);
        o[1] = __builtin_shufflevector(r0, r1, 1, 3);
      }
      for (size_t q = 0; q < n; ++q) std::memcpy(d + (p + q) * ld_d + j, &o[q], 16);
    }
    for (; p < kc; ++p)
      for (size_t q = 0; q < n; ++q) d[p * ld_d + j + q] = row(j + q)[p];
  }
  for (; j < jn; ++j)
    for (size_t p = 0; p < kc; ++p) d[p * ld_d + j] = row(j)[p];
}

// The implicit B operands: cols(planes) for Forward, cols(planes)^T for WeightGrad.
template <class T>
struct ColsOperand {
  const Geometry* g;
  const T* planes;

  // B = cols [CK, L]: each row's positions [j0, j0 + cols) walked once, its runs cut at
  // sliver boundaries.
  static void pack_cols(const void* ctx, T* dst, size_t nr, size_t p0, size_t kc, size_t j0,
                        size_t cols) {
    const auto& self = *static_cast<const ColsOperand*>(ctx);
    const size_t s = self.g->w.stride[2], slivers = (cols + nr - 1) / nr;
    for (size_t p = 0; p < kc; ++p) {
      T* row = dst + p * nr;  // sliver q's part of this row is row + q * nr * kc
      // The pieces arrive in order, so sliver q and lane (i = q * nr + lane) advance with them.
      size_t q = 0, lane = 0;
      walk_row(*self.g, p0 + p, j0, cols, [&](size_t, size_t count, int64_t src) {
        const T* x = self.planes + (src < 0 ? 0 : src);
        while (count > 0) {
          const size_t len = std::min(count, nr - lane);
          T* o = row + q * nr * kc + lane;
          if (src < 0 || s == 1) {
            copy_run(o, src < 0 ? nullptr : x, len);
            x += len;
          } else {
            copy_strided(o, x, len, s);
            x += len * s;
          }
          lane += len;
          if (lane == nr) {
            lane = 0;
            ++q;
          }
          count -= len;
        }
      });
      const size_t tail = slivers * nr - cols;
      if (tail > 0) {
        T* o = row + (slivers - 1) * nr * kc + (nr - tail);
        std::fill(o, o + tail, T(0));
      }
    }
  }
  // B = cols^T [L, CK]: per sliver, its columns (column-matrix rows) gathered along their
  // positions into rows of a scratch block (image runs copied whole), then transposed into
  // the sliver: a column written straight down the sliver would store one element per
  // nr-wide row.
  static void pack_cols_t(const void* ctx, T* dst, size_t nr, size_t p0, size_t kc, size_t j0,
                          size_t cols) {
    const auto& self = *static_cast<const ColsOperand*>(ctx);
    T* rows = scratch<T, 1>(nr * kc);
    for (size_t s = 0; s * nr < cols; ++s) {
      const size_t jn = std::min(nr, cols - s * nr);
      T* d = dst + s * nr * kc;
      for (size_t j = 0; j < jn; ++j)
        gather_row(*self.g, self.planes, j0 + s * nr + j, p0, kc, rows + j * kc, 1);
      transpose_rows([&](size_t j) { return rows + j * kc; }, jn, kc, d, nr);
      if (jn < nr)
        for (size_t p = 0; p < kc; ++p) std::fill(d + p * nr + jn, d + p * nr + nr, T(0));
    }
  }
};

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

// The extents of w's image with `padding` zeros on both sides of every dim (pad_plane's
// layout), its size, and each kernel tap's offset in it (taps in z, y, x order).
struct PaddedVolume {
  std::array<size_t, 3> pin{};
  size_t size = 0;
  explicit PaddedVolume(const Window3& w) {
    for (int d = 0; d < 3; ++d) pin[d] = w.in[d] + 2 * w.padding[d];
    size = pin[0] * pin[1] * pin[2];
  }
  std::vector<ptrdiff_t> tap_offsets(const Window3& w) const {
    std::vector<ptrdiff_t> off;
    off.reserve(w.kernel[0] * w.kernel[1] * w.kernel[2]);
    for (size_t kz = 0; kz < w.kernel[0]; ++kz)
      for (size_t ky = 0; ky < w.kernel[1]; ++ky)
        for (size_t kx = 0; kx < w.kernel[2]; ++kx)
          off.push_back(ptrdiff_t(((kz * w.dilation[0]) * pin[1] + ky * w.dilation[1]) * pin[2] +
                                  kx * w.dilation[2]));
    return off;
  }
};

// The image plane src copied into dst with `padding` zeros on both sides of every dim
// (pin the padded extents).
template <class T>
void pad_plane(const Window3& w, const std::array<size_t, 3>& pin, const T* src, T* dst) {
  const size_t pz = w.padding[0], py = w.padding[1], px = w.padding[2];
  if (pz + py + px == 0) {
    std::memcpy(dst, src, w.image_size() * sizeof(T));
    return;
  }
  std::fill(dst, dst + pin[0] * pin[1] * pin[2], T(0));
  for (size_t z = 0; z < w.in[0]; ++z)
    for (size_t r = 0; r < w.in[1]; ++r)
      std::memcpy(dst + ((z + pz) * pin[1] + r + py) * pin[2] + px,
                  src + (z * w.in[1] + r) * w.in[2], w.in[2] * sizeof(T));
}

// Note [Padded image for the packers]
// The image panels' walk (walk_row) cuts every column-matrix row at the padding: each
// padded entry is a piece of its own, and each output row's run is clamped against the
// image's edges. With the group's planes copied once per image into a zero-padded buffer
// (a small CNN's image: a few KiB per plane), the same walk over the geometry without
// padding meets only whole runs. The panels hold the same values (the padding's zeros are
// written as zeros). Images whose padded planes pass kPaddedBudget elements keep the walk
// with padding rather than a thread-local buffer of that size.
constexpr size_t kPaddedBudget = size_t{1} << 18;

template <class T>
struct PaddedImage {
  Geometry g;
  const T* planes;
  PaddedImage(const Geometry& geo, const T* src) : g(geo), planes(src) {
    const Window3& w = geo.w;
    if (w.padding[0] + w.padding[1] + w.padding[2] == 0) return;
    const PaddedVolume pv(w);
    const std::array<size_t, 3>& pin = pv.pin;
    const size_t padded = pv.size;
    if (geo.cg * padded > kPaddedBudget) return;
    T* buf = scratch<T, 3>(geo.cg * padded);
    for (size_t c = 0; c < geo.cg; ++c)
      pad_plane(w, pin, src + c * w.image_size(), buf + c * padded);
    g.w.in = pin;
    g.w.padding = {0, 0, 0};
    planes = buf;
  }
};

// Calls f(out_row, k, lo, count, src) for every (output row, kernel offset k) pair of one
// plane whose image row is inside the image: positions lo .. lo + count - 1 of the output
// row starting at out_row read the image elements src, src + stride[2], ... (offsets into
// the image plane). Output rows outer, so a row stays in L1 while every offset meets it.
template <class F>
void for_each_tap_row(const Window3& w, F&& f) {
  size_t lo[64], hi[64];
  std::vector<size_t> lo_v, hi_v;
  size_t* plo = lo;
  size_t* phi = hi;
  if (w.kernel[2] > 64) {
    lo_v.resize(w.kernel[2]);
    hi_v.resize(w.kernel[2]);
    plo = lo_v.data();
    phi = hi_v.data();
  }
  for (size_t kx = 0; kx < w.kernel[2]; ++kx) inner_range(w, kx, plo[kx], phi[kx]);
  const size_t ow = w.out[2];
  for (size_t oz = 0; oz < w.out[0]; ++oz)
    for (size_t oy = 0; oy < w.out[1]; ++oy) {
      const size_t out_row = (oz * w.out[1] + oy) * ow;
      for (size_t kz = 0; kz < w.kernel[0]; ++kz) {
        const int64_t iz = coord(w, 0, oz, kz);
        if (iz < 0 || iz >= int64_t(w.in[0])) continue;
        for (size_t ky = 0; ky < w.kernel[1]; ++ky) {
          const int64_t iy = coord(w, 1, oy, ky);
          if (iy < 0 || iy >= int64_t(w.in[1])) continue;
          const int64_t row = (iz * int64_t(w.in[1]) + iy) * int64_t(w.in[2]);
          const size_t k0 = (kz * w.kernel[1] + ky) * w.kernel[2];
          for (size_t kx = 0; kx < w.kernel[2]; ++kx) {
            if (phi[kx] <= plo[kx]) continue;
            f(out_row, k0 + kx, plo[kx], phi[kx] - plo[kx], size_t(row + coord(w, 2, plo[kx], kx)));
          }
        }
      }
    }
}

// ---- the direct path (C / G == 1): output channel oc reads input channel oc / (O/G) ----

// The build of kernel `fn` for the active ISA (isa_avx512::fn, isa_avx2::fn or
// isa_generic::fn).
#if EMBER_HAS_X86_KERNELS
#define EMBER_CONV_KERNEL(fn)                    \
  (active_isa() == Isa::Avx512 ? &isa_avx512::fn \
   : active_isa() == Isa::Avx2 ? &isa_avx2::fn   \
                               : &isa_generic::fn)
#else
#define EMBER_CONV_KERNEL(fn) (&isa_generic::fn)
#endif

TapRow<float> tap_row_kernel(float) { return EMBER_CONV_KERNEL(tap_row_f32); }
TapRow<double> tap_row_kernel(double) { return EMBER_CONV_KERNEL(tap_row_f64); }

// Forward, stride 1 along y and x: each (image, output channel) plane from a zero-padded
// copy of its input plane, so every tap reads inside it and an output z-slice is one flat
// row over the padded width (pitch pin[2]; the positions past ow in each row are computed
// and dropped): the row kernel sees long rows even where the image is narrow.
// The epilogue of output plane t (image t / O, channel t % O) once it is computed.
template <class T>
void finish_plane(const GemmEpilogue<T>* ep, const Geometry& g, size_t t, T* plane) {
  if (ep) ep->apply(ep->ctx, t / g.o, t % g.o, 0, plane, ptrdiff_t(g.l), 1, g.l);
}

template <class T>
void forward_per_channel_flat(const Geometry& g, const T* x, const T* wt, T* y,
                              const GemmEpilogue<T>* ep) {
  const Window3& w = g.w;
  const size_t L = g.l, K = g.k, img = g.image();
  const PaddedVolume pv(w);
  const std::array<size_t, 3>& pin = pv.pin;
  const size_t padded = pv.size;
  const TapRow<T> row = tap_row_kernel(T{});
  const std::vector<ptrdiff_t> off = pv.tap_offsets(w);
  const size_t ow = w.out[2], oh = w.out[1];
  const size_t flat_n = (oh - 1) * pin[2] + ow;
  parallel_for(0, g.n * g.o, std::max<size_t>(1, (size_t{1} << 14) / std::max<size_t>(K * L, 1)),
               [&](size_t b, size_t e) {
                 T* xp = scratch<T>(padded + flat_n);
                 T* yflat = xp + padded;
                 size_t filled = ~size_t{0};  // the input plane xp holds
                 for (size_t t = b; t < e; ++t) {
                   const size_t n = t / g.o, oc = t % g.o, src = n * g.c + oc / g.og;
                   if (src != filled) {
                     pad_plane(w, pin, x + src * img, xp);
                     filled = src;
                   }
                   T* yp = y + t * L;
                   for (size_t oz = 0; oz < w.out[0]; ++oz) {
                     row(flat_n, 1, xp + oz * w.stride[0] * pin[1] * pin[2], off.data(),
                         wt + oc * K, K, yflat);
                     for (size_t oy = 0; oy < oh; ++oy)
                       std::memcpy(yp + (oz * oh + oy) * ow, yflat + oy * pin[2], ow * sizeof(T));
                   }
                   finish_plane(ep, g, t, yp);
                 }
               });
}

// Forward, any stride: straight from the image, output row by output row: the taps whose
// image row is inside, the positions [a, b) where every tap reads inside the row through
// the row kernel, the edge positions (in the padding for some tap) one by one.
template <class T>
void forward_per_channel_rows(const Geometry& g, const T* x, const T* wt, T* y,
                              const GemmEpilogue<T>* ep) {
  const Window3& w = g.w;
  const size_t L = g.l, K = g.k, img = g.image(), kw = w.kernel[2], s = w.stride[2],
               d = w.dilation[2], ow = w.out[2], oh = w.out[1];
  const int64_t pad = int64_t(w.padding[2]), in2 = int64_t(w.in[2]);
  const TapRow<T> row = tap_row_kernel(T{});
  size_t a = 0, b = 0, lo = 0, hi = 0;
  inner_range(w, 0, a, hi);       // kx = 0 reads inside from a on
  inner_range(w, kw - 1, lo, b);  // the last kx reads inside before b
  b = std::max(a, b);
  parallel_for(0, g.n * g.o, std::max<size_t>(1, (size_t{1} << 14) / std::max<size_t>(K * L, 1)),
               [&](size_t t0, size_t t1) {
                 std::vector<ptrdiff_t> off(K), inner(K);
                 std::vector<T> tw(K);
                 std::vector<size_t> tkx(K);
                 for (size_t t = t0; t < t1; ++t) {
                   const size_t n = t / g.o, oc = t % g.o;
                   const T* xp = x + (n * g.c + oc / g.og) * img;
                   const T* wk = wt + oc * K;
                   for (size_t oz = 0; oz < w.out[0]; ++oz)
                     for (size_t oy = 0; oy < oh; ++oy) {
                       size_t nt = 0;
                       for (size_t kz = 0; kz < w.kernel[0]; ++kz) {
                         const int64_t iz = coord(w, 0, oz, kz);
                         if (iz < 0 || iz >= int64_t(w.in[0])) continue;
                         for (size_t ky = 0; ky < w.kernel[1]; ++ky) {
                           const int64_t iy = coord(w, 1, oy, ky);
                           if (iy < 0 || iy >= int64_t(w.in[1])) continue;
                           const int64_t rowoff = (iz * int64_t(w.in[1]) + iy) * in2;
                           for (size_t kx = 0; kx < kw; ++kx, ++nt) {
                             off[nt] = ptrdiff_t(rowoff + int64_t(kx * d) - pad);  // at ox = 0
                             inner[nt] = off[nt] + ptrdiff_t(a * s);
                             tw[nt] = wk[(kz * w.kernel[1] + ky) * kw + kx];
                             tkx[nt] = kx;
                           }
                         }
                       }
                       T* yr = y + t * L + (oz * oh + oy) * ow;
                       if (b > a) row(b - a, s, xp, inner.data(), tw.data(), nt, yr + a);
                       const auto edge = [&](size_t ox) {
                         T acc = 0;
                         for (size_t k = 0; k < nt; ++k) {
                           const int64_t ix = int64_t(ox * s + tkx[k] * d) - pad;
                           if (ix >= 0 && ix < in2) acc += tw[k] * xp[off[k] + ptrdiff_t(ox * s)];
                         }
                         yr[ox] = acc;
                       };
                       for (size_t ox = 0; ox < std::min(a, ow); ++ox) edge(ox);
                       for (size_t ox = b; ox < ow; ++ox) edge(ox);
                     }
                   finish_plane(ep, g, t, y + t * L);
                 }
               });
}

Depthwise3x3<float> depthwise3x3_kernel(float) { return EMBER_CONV_KERNEL(depthwise3x3_f32); }
Depthwise3x3<double> depthwise3x3_kernel(double) { return EMBER_CONV_KERNEL(depthwise3x3_f64); }

// Whether a per-channel forward is the plane kernel's (conv_rows.hpp's Depthwise3x3): a 2-D
// 3x3 window without dilation, strides 2 and 2, or 1 and 1 with output rows of at least a
// 64-byte vector (narrower planes of stride 1 do better as the flat rows of
// forward_per_channel_flat; of stride 2, measured on MobileNetV2's, the plane kernel's
// scalar edges still beat forward_per_channel_rows).
template <class T>
bool depthwise3x3_fits(const Window3& w) {
  return w.in[0] == 1 && w.kernel == std::array<size_t, 3>{1, 3, 3} && w.padding[0] == 0 &&
         w.dilation == std::array<size_t, 3>{1, 1, 1} && w.stride[1] == w.stride[2] &&
         (w.stride[2] == 2 || (w.stride[2] == 1 && w.out[2] >= 64 / sizeof(T)));
}

// Forward, a 3x3 window: each (image, output channel) plane by the plane kernel, straight
// from the image.
template <class T>
void forward_depthwise3x3(const Geometry& g, const T* x, const T* wt, T* y,
                          const GemmEpilogue<T>* ep) {
  const Window3& w = g.w;
  const Depthwise3x3<T> plane = depthwise3x3_kernel(T{});
  const size_t L = g.l, img = g.image();
  parallel_for(0, g.n * g.o, std::max<size_t>(1, (size_t{1} << 14) / std::max<size_t>(9 * L, 1)),
               [&](size_t b, size_t e) {
                 for (size_t t = b; t < e; ++t) {
                   const size_t n = t / g.o, oc = t % g.o;
                   plane(x + (n * g.c + oc / g.og) * img, w.in[1], w.in[2], wt + oc * 9,
                         w.stride[2], w.padding[1], w.padding[2], y + t * L, w.out[1], w.out[2]);
                   finish_plane(ep, g, t, y + t * L);
                 }
               });
}

template <class T>
void forward_per_channel(const Geometry& g, const T* x, const T* wt, T* y,
                         const GemmEpilogue<T>* ep) {
  if (depthwise3x3_fits<T>(g.w))
    forward_depthwise3x3(g, x, wt, y, ep);
  else if (g.w.stride[1] == 1 && g.w.stride[2] == 1 && g.w.out[1] > 1)
    forward_per_channel_flat(g, x, wt, y, ep);
  else
    forward_per_channel_rows(g, x, wt, y, ep);
}

template <class T>
void input_grad_per_channel(const Geometry& g, const T* gy, const T* wt, T* dx) {
  const size_t L = g.l, K = g.k, img = g.image(), s = g.w.stride[2];
  const size_t planes = g.n * g.c;
  parallel_for(
      0, planes, std::max<size_t>(1, (size_t{1} << 14) / std::max<size_t>(g.og * K * L, 1)),
      [&](size_t b, size_t e) {
        for (size_t t = b; t < e; ++t) {
          const size_t n = t / g.c, ch = t % g.c;
          T* xp = dx + t * img;
          std::fill(xp, xp + img, T(0));
          for (size_t oc = ch * g.og; oc < (ch + 1) * g.og; ++oc) {
            const T* gp = gy + (n * g.o + oc) * L;
            const T* wk = wt + oc * K;
            for_each_tap_row(g.w, [&](size_t orow, size_t k, size_t lo, size_t cnt, size_t src) {
              const T* gr = gp + orow + lo;
              T* xr = xp + src;
              const T wv = wk[k];
              if (s == 1) {
                for (size_t q = 0; q < cnt; ++q) xr[q] += wv * gr[q];
              } else {
                for (size_t q = 0; q < cnt; ++q) xr[q * s] += wv * gr[q];
              }
            });
          }
        }
      });
}

TapDots<float> tap_dots_kernel(float) { return EMBER_CONV_KERNEL(tap_dots_f32); }
TapDots<double> tap_dots_kernel(double) { return EMBER_CONV_KERNEL(tap_dots_f64); }

// WeightGrad, stride 1: as forward_per_channel_flat, each input plane zero-padded and each
// output-gradient plane laid over the padded pitch (zeros in the positions past each output
// row), so every tap's sum over a plane is one long dot product (tap_dots) instead of one
// per output row. Each tap sums the images in order.
template <class T>
void weight_grad_per_channel_flat(const Geometry& g, const T* x, const T* gy, T* dw) {
  const Window3& w = g.w;
  const size_t L = g.l, K = g.k, img = g.image();
  const PaddedVolume pv(w);
  const std::array<size_t, 3>& pin = pv.pin;
  const size_t padded = pv.size;
  const size_t flat_n = ((w.out[0] - 1) * pin[1] + w.out[1] - 1) * pin[2] + w.out[2];
  const std::vector<ptrdiff_t> off = pv.tap_offsets(w);
  const TapDots<T> dots = tap_dots_kernel(T{});
  parallel_for(0, g.o, 1, [&](size_t b, size_t e) {
    T* xp = scratch<T>(padded + flat_n);
    T* gf = xp + padded;
    std::fill(gf, gf + flat_n, T(0));  // the positions past each row stay zero
    for (size_t oc = b; oc < e; ++oc) {
      T* dk = dw + oc * K;
      std::fill(dk, dk + K, T(0));
      for (size_t n = 0; n < g.n; ++n) {
        pad_plane(w, pin, x + (n * g.c + oc / g.og) * img, xp);
        const T* gp = gy + (n * g.o + oc) * L;
        for (size_t oz = 0; oz < w.out[0]; ++oz)
          for (size_t oy = 0; oy < w.out[1]; ++oy)
            std::memcpy(gf + (oz * pin[1] + oy) * pin[2], gp + (oz * w.out[1] + oy) * w.out[2],
                        w.out[2] * sizeof(T));
        dots(flat_n, gf, xp, off.data(), K, dk);
      }
    }
  });
}

template <class T>
void weight_grad_per_channel(const Geometry& g, const T* x, const T* gy, T* dw) {
  const size_t L = g.l, K = g.k, img = g.image(), s = g.w.stride[2];
  if (g.w.stride == std::array<size_t, 3>{1, 1, 1} && L > 0)
    return weight_grad_per_channel_flat(g, x, gy, dw);
  parallel_for(0, g.o, 1, [&](size_t b, size_t e) {
    for (size_t oc = b; oc < e; ++oc) {
      T* dk = dw + oc * K;
      std::fill(dk, dk + K, T(0));
      for (size_t n = 0; n < g.n; ++n) {
        const T* xp = x + (n * g.c + oc / g.og) * img;
        const T* gp = gy + (n * g.o + oc) * L;
        for_each_tap_row(g.w, [&](size_t orow, size_t k, size_t lo, size_t cnt, size_t src) {
          const T* gr = gp + orow + lo;
          const T* xr = xp + src;
          // Eight partial sums (so the loop vectorizes), added in a fixed order.
          T part[8] = {};
          size_t q = 0;
          if (s == 1) {
            for (; q + 8 <= cnt; q += 8)
              for (size_t j = 0; j < 8; ++j) part[j] += gr[q + j] * xr[q + j];
          }
          for (; q < cnt; ++q) part[q % 8] += gr[q] * xr[q * s];
          T acc = 0;
          for (size_t j = 0; j < 8; ++j) acc += part[j];
          dk[k] += acc;
        });
      }
    }
  });
}

// ---- the GEMM path ----

// An epilogue of the output [O, L] of one image seen from the product of one of its groups
// [O/G, L]: block (i0, j0) of the product is block (ch0 + i0, j0) of image n.
template <class T>
struct ShiftedEpilogue {
  const GemmEpilogue<T>* outer;
  size_t n, ch0;
  static void apply(const void* ctx, size_t, size_t i0, size_t j0, T* c, ptrdiff_t c_rs,
                    size_t rows, size_t cols) {
    const auto* s = static_cast<const ShiftedEpilogue*>(ctx);
    s->outer->apply(s->outer->ctx, s->n, s->ch0 + i0, j0, c, c_rs, rows, cols);
  }
};

// Note [Phase images]
// Packing the window columns (ColsOperand::pack_cols) walks each column-matrix row in runs
// cut at output rows, sliver edges and padding: a quarter of a ResNet 3x3 layer's forward,
// a third of AlexNet's 11x11 stride-4 one. Split each padded image plane by stride phase —
// phase (rz, ry, rx) holds the elements at coordinates (iz sz + rz, iy sy + ry, ix sx + rx),
// an image of ceil(padded / stride) elements a dim, zeros where the padding is — and every
// column-matrix row becomes a contiguous run of one phase image: row (c, kz, ky, kx), with
// t = k dilation = q stride + r per dim, reads for the output position (oz, oy, ox) the
// element (oz + qz, oy + qy, ox + qx) of channel c's phase r. Numbered flat over the phase
// image's extents, j = (oz PH + oy) PW + ox, that is element off[row] + j: the implicit
// B [CK, flat] is a matrix whose row r is the run at off[r], which the micro-kernels read
// in place, never packed (gemm_packed_a_in_place, Note [B rows in place] in gemm.hpp).
// The flat positions past each output row (ox >= ow, and oy >= oh in 3-D) are computed and
// dropped: PW - ow of every PW (3.4% of a 56x56 map with padding 1). So the product runs
// into a cache-sized block of C, a run of flat positions at a time (forward_phases), and
// the block's valid columns are copied to the output rows, where the epilogue meets them.
// Every output element sums the same products in the same order as through pack_cols (the
// weight's k blocks are the same; only which columns share a tile changes), so the results
// are bit for bit the same. Measured on ResNet's 3x3 layers (one thread, 8 images), the
// route is as fast or faster at every stage even where a quarter of the positions are
// dropped (7x7 maps, 512 channels: 27.1 ms both; 56x56: 25.0 -> 22.6 ms; 14x14 with 32
// input channels 17.3 -> 14.5 ms), so pack_cols stays only where more than half the
// positions again would be dropped (phase_layout). The phase images take about the padded input's
// size again, made a chunk of images at a time (kPhaseBudget).
constexpr size_t kPhaseBudget = size_t{32} << 20;  // bytes of phase images at once

struct PhaseLayout {
  std::array<size_t, 3> ext{};  // each phase image's extents
  size_t phases = 1;            // prod(stride)
  size_t plane = 0;             // elements of one phase image, its tail of zeros included
  size_t flat = 0;              // flat positions of one output plane
  size_t tail = 0;              // zeros after each phase image (Note [Shared padding])
  std::vector<ptrdiff_t> off;   // per column-matrix row: its run's start in the group's images
  size_t channel() const { return phases * plane; }  // elements of one channel's phases
  // The flat position of output row r's first output (r over the output's rows, oz oh + oy).
  size_t row_at(size_t r, size_t oh) const { return (r / oh * ext[1] + r % oh) * ext[2]; }
};

// The phase layout of g's forward, or none (flat == 0) where Note [Phase images] keeps
// pack_cols.
PhaseLayout phase_layout(const Geometry& g) {
  PhaseLayout p;
  const Window3& w = g.w;
  // No channels (c or ck zero) leave nothing to lay out: the GEMM route writes the zeros.
  if (g.pointwise() || g.l == 0 || g.n == 0 || g.c == 0 || g.ck() == 0) return p;
  // Note [Shared padding]: a phase row is ceil((iw + px) / sx) long, not ceil((iw + 2 px) /
  // sx): a window past a row's end reads on into the next row's first elements, which are
  // its left padding (element e of a row is padded column e sx + rx, and a read of column
  // at most iw + 2 px - 1 lands e - PW with (e - PW) sx + rx < px), so the right padding
  // needs no zeros of its own. After a phase image's last row come `tail` zeros of its own
  // (the next phase image's first row is another phase's: its first elements may be data).
  // Each output row then drops k - 1 - px positions of stride 1 fewer (3x3, padding 1: one
  // of 57 at 56x56, one of 15 at 14x14, instead of two).
  for (int d = 0; d < 3; ++d) {
    const size_t pad = d == 2 ? w.padding[d] : 2 * w.padding[d];
    p.ext[d] = (w.in[d] + pad + w.stride[d] - 1) / w.stride[d];
    p.phases *= w.stride[d];
  }
  p.tail = w.padding[2] / w.stride[2] + 1;
  p.plane = p.ext[0] * p.ext[1] * p.ext[2] + p.tail;
  const size_t flat = ((w.out[0] - 1) * p.ext[1] + (w.out[1] - 1)) * p.ext[2] + w.out[2];
  if (2 * flat > 3 * g.l) return p;  // more than half the positions again dropped
  p.flat = flat;
  p.off.resize(g.ck());
  size_t r = 0;
  for (size_t c = 0; c < g.cg; ++c)
    for (size_t kz = 0; kz < w.kernel[0]; ++kz)
      for (size_t ky = 0; ky < w.kernel[1]; ++ky)
        for (size_t kx = 0; kx < w.kernel[2]; ++kx, ++r) {
          const std::array<size_t, 3> t{kz * w.dilation[0], ky * w.dilation[1], kx * w.dilation[2]};
          size_t phase = 0, at = 0;
          for (int d = 0; d < 3; ++d) {
            phase = phase * w.stride[d] + t[d] % w.stride[d];
            at = at * p.ext[d] + t[d] / w.stride[d];
          }
          p.off[r] = ptrdiff_t(c * p.channel() + phase * p.plane + at);
        }
  return p;
}

// o[rx][e] = x[e * s + rx] for e < len and every rx < s: a row's s stride phases at once.
// Strides 2 and 4 of floats (and 2 of doubles) as shuffles of 16-byte vectors (a 4 x 4
// transpose for 4), which every target has (SSE2 is part of x86-64); each image row is then
// read once for all its phases, not once a phase element by element (AlexNet's 11 x 11
// stride-4 stem: 8.4% of its forward in split_phases).
template <class T>
inline void deinterleave(T* const* o, const T* x, size_t len, size_t s) {
  size_t e = 0;
  typedef T V __attribute__((vector_size(16)));
  constexpr size_t n = 16 / sizeof(T);
  const auto ld = [](const T* at) {
    V v;
    std::memcpy(&v, at, 16);
    return v;
  };
  const auto st = [](T* at, V v) { std::memcpy(at, &v, 16); };
  if (s == 2) {
    for (; e + n <= len; e += n) {
      const V a = ld(x + 2 * e), b = ld(x + 2 * e + n);
      if constexpr (n == 4) {
        st(o[0] + e, __builtin_shufflevector(a, b, 0, 2, 4, 6));
        st(o[1] + e, __builtin_shufflevector(a, b, 1, 3, 5, 7));
      } else {
        st(o[0] + e, __builtin_shufflevector(a, b, 0, 2));
        st(o[1] + e, __builtin_shufflevector(a, b, 1, 3));
      }
    }
  } else if constexpr (n == 4) {
    if (s == 4) {
      for (; e + n <= len; e += n) {
        const V v0 = ld(x + 4 * e), v1 = ld(x + 4 * e + 4), v2 = ld(x + 4 * e + 8),
                v3 = ld(x + 4 * e + 12);
        const V t0 = __builtin_shufflevector(v0, v1, 0, 4, 1, 5),
                t1 = __builtin_shufflevector(v2, v3, 0, 4, 1, 5),
                t2 = __builtin_shufflevector(v0, v1, 2, 6, 3, 7),
                t3 = __builtin_shufflevector(v2, v3, 2, 6, 3, 7);
        st(o[0] + e, __builtin_shufflevector(t0, t1, 0, 1, 4, 5));
        st(o[1] + e, __builtin_shufflevector(t0, t1, 2, 3, 6, 7));
        st(o[2] + e, __builtin_shufflevector(t2, t3, 0, 1, 4, 5));
        st(o[3] + e, __builtin_shufflevector(t2, t3, 2, 3, 6, 7));
      }
    }
  }
  for (; e < len; ++e)
    for (size_t rx = 0; rx < s; ++rx) o[rx][e] = x[e * s + rx];
}

// The phase images of one plane of x (Window3 w's image) into dst (p.channel() elements):
// phase (rz, ry, rx) at dst + ((rz sy + ry) sx + rx) p.plane. The sx phases of a (rz, ry)
// read the same image rows, so each row is split into all of them at once (deinterleave):
// over the phase columns every phase reads inside the row; the few at its ends where a
// phase reads padding, element by element.
template <class T>
void split_phases(const Window3& w, const PhaseLayout& p, const T* x, T* dst) {
  const size_t sz = w.stride[0], sy = w.stride[1], sx = w.stride[2];
  if (sz == 1 && sy == 1 && sx == 1) {
    // One phase, the zero-padded image (Note [Shared padding]: a row is its left padding and
    // the image row): the rows of a small map are short, and the general walk's per-row
    // bounds cost more than the copy (8% of a CIFAR-sized ResNet's training step).
    const size_t pz = w.padding[0], py = w.padding[1], px = w.padding[2], iw = w.in[2];
    const size_t row_len = p.ext[2];
    T* d = dst;
    for (size_t iz = 0; iz < p.ext[0]; ++iz)
      for (size_t iy = 0; iy < p.ext[1]; ++iy, d += row_len) {
        if (iz < pz || iz - pz >= w.in[0] || iy < py || iy - py >= w.in[1]) {
          std::fill_n(d, row_len, T(0));
          continue;
        }
        std::fill_n(d, px, T(0));
        copy_run(d + px, x + ((iz - pz) * w.in[1] + (iy - py)) * iw, iw);
        std::fill(d + px + iw, d + row_len, T(0));
      }
    std::fill_n(d, p.tail, T(0));
    return;
  }
  const int64_t in_x = int64_t(w.in[2]), px = int64_t(w.padding[2]), step = int64_t(sx);
  const size_t rows_of_phase = p.ext[0] * p.ext[1], row_len = p.ext[2];
  EMBER_ASSERT(p.plane == rows_of_phase * row_len + p.tail);
  // Phase columns [lo, hi) of phase rx read inside an image row: ix sx + rx - px in [0, in_x).
  const auto range = [&](size_t rx) {
    const int64_t first = int64_t(rx) - px;
    const int64_t lo = first >= 0 ? 0 : (-first + step - 1) / step;
    return std::pair{lo,
                     std::clamp<int64_t>((in_x - first + step - 1) / step, lo, int64_t(row_len))};
  };
  // The columns every phase reads inside the row, split at once where the stride has
  // shuffles (deinterleave); the rest element by element.
  constexpr size_t kTogether = 4;
  const bool together = sx == 2 || (sx == 4 && sizeof(T) == 4);
  int64_t both_lo = 0, both_hi = int64_t(row_len);
  for (size_t rx = 0; rx < sx; ++rx) {
    const auto [lo, hi] = range(rx);
    both_lo = std::max(both_lo, lo);
    both_hi = std::min(both_hi, hi);
  }
  if (!together) both_hi = both_lo;
  for (size_t rz = 0; rz < sz; ++rz)
    for (size_t ry = 0; ry < sy; ++ry) {
      T* const phase0 = dst + (rz * sy + ry) * sx * p.plane;
      for (size_t iz = 0; iz < p.ext[0]; ++iz)
        for (size_t iy = 0; iy < p.ext[1]; ++iy) {
          T* const at = phase0 + (iz * p.ext[1] + iy) * row_len;  // phase rx's: + rx plane
          const int64_t z = int64_t(iz * sz + rz) - int64_t(w.padding[0]),
                        y = int64_t(iy * sy + ry) - int64_t(w.padding[1]);
          if (z < 0 || z >= int64_t(w.in[0]) || y < 0 || y >= int64_t(w.in[1])) {
            for (size_t rx = 0; rx < sx; ++rx) std::fill_n(at + rx * p.plane, row_len, T(0));
            continue;
          }
          const T* const row = x + (z * int64_t(w.in[1]) + y) * in_x;  // image column 0
          for (size_t rx = 0; rx < sx; ++rx) {
            T* const d = at + rx * p.plane;
            const T* const src = row + int64_t(rx) - px;  // phase column e: src[e * sx]
            const auto [lo, hi] = range(rx);
            std::fill(d, d + lo, T(0));
            const int64_t a = std::clamp(both_lo, lo, hi), b = std::clamp(both_hi, a, hi);
            if (sx == 1) {
              copy_run(d + lo, src + lo, size_t(hi - lo));
            } else {
              copy_strided(d + lo, src + lo * step, size_t(a - lo), sx);
              copy_strided(d + b, src + b * step, size_t(hi - b), sx);
            }
            std::fill(d + hi, d + row_len, T(0));
          }
          if (sx > 1 && both_hi > both_lo) {
            std::array<T*, kTogether> o{};
            for (size_t rx = 0; rx < sx; ++rx) o[rx] = at + rx * p.plane + both_lo;
            deinterleave(o.data(), row + both_lo * step - px, size_t(both_hi - both_lo), sx);
          }
        }
      for (size_t rx = 0; rx < sx; ++rx)
        std::fill_n(phase0 + rx * p.plane + rows_of_phase * row_len, p.tail, T(0));
    }
}

// Whether no element of x[0, n) is an infinity or a NaN (the exponent's bits all ones).
template <class T>
bool all_finite(const T* x, size_t n) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr U kExp = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  U bad = 0;
  for (size_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, x + i, sizeof u);
    bad |= U((u & kExp) == kExp);
  }
  return bad == 0;
}

// Note [Phase images in the task]: the phase images of a batch made beforehand go out to
// memory and come back for the products (the CNN's second layer: 4 MB written and read
// again, for products reading 50 KB of them each). Alternated, four pairs: the CNN layer's
// forward 2.20-2.32 -> 2.12-2.26 ms, AlexNet's stem (626 KB a task) 2.59-2.86 -> 2.51-2.65. Where
// the batch's images and groups give every thread tasks enough, and a group's phase images fit in
// three quarters of L2, each task is one image's group instead: it splits that group's channels
// itself, into a buffer of its thread, and runs all the group's products on them while they are in
// cache. Otherwise (one image: the products' blocks are the tasks) the images are split beforehand,
// a chunk of images at a time.
template <class T>
struct PhaseTasks {
  const Geometry& g;
  const PhaseLayout& p;
  const T* x;       // the input, when the tasks split it
  const T* images;  // else the chunk's phase images, images [n0, n1)
  size_t n0, n1;

  // Whether the tasks are whole images' groups (then built with images null).
  static bool whole(const Geometry& g, const PhaseLayout& p) {
    const size_t l2 = cache_sizes().l2;
    return g.n * g.groups >= 2 * num_threads() &&
           g.cg * p.channel() * sizeof(T) <= (l2 > 0 ? l2 / 4 * 3 : size_t{512} << 10);
  }
  // product(n, gi, b, base) for every image n, group gi and block b < blocks of the product,
  // base the group's phase images.
  template <class F>
  void run(size_t blocks, const F& product) const {
    if (images == nullptr) {
      for_each_task((n1 - n0) * g.groups, [&](size_t t) {
        const size_t n = n0 + t / g.groups, gi = t % g.groups, group_images = g.cg * p.channel();
        T* own = scratch<T, 4>(group_images + kInPlaceRowSlack);
        std::fill_n(own + group_images, kInPlaceRowSlack, T(0));
        for (size_t ci = 0; ci < g.cg; ++ci)
          split_phases(g.w, p, x + (n * g.c + gi * g.cg + ci) * g.image(), own + ci * p.channel());
        for (size_t b = 0; b < blocks; ++b) product(n, gi, b, own);
      });
      return;
    }
    for_each_task((n1 - n0) * g.groups * blocks, [&](size_t t) {
      const size_t b = t % blocks, gi = t / blocks % g.groups, n = n0 + t / blocks / g.groups;
      product(n, gi, b, images + ((n - n0) * g.c + gi * g.cg) * p.channel());
    });
  }
};

// Flat positions per task of the phase route: the block of C [og, cols] and the B block of
// one k block [<= 256, cols] in about 256 KiB; whole 64-column pieces (slivers of every
// kernel).
template <class T>
size_t phase_cols(const Geometry& g) {
  return std::max<size_t>(
      64, (size_t{256} << 10) / sizeof(T) / (std::min<size_t>(g.ck(), 256) + g.og) / 64 * 64);
}

// Forward through phase images (Note [Phase images]), images [n0, n1) of the batch whose
// phase images (all channels) are `images`.
// Note [Copy-out by channel]: a task's product block [og, cols] is copied to the output
// channel by channel, each channel's valid runs in turn, so the stores walk one output plane
// at a time. Row by row, as before, every output row touched og planes a plane's size
// apart, and the store misses of those interleaved streams held the copy to about a third
// of one core's store rate: at the 28 x 28 stem of a CNN on grey images ([128, 1, 28, 28] *
// [32, 1, 3, 3], 12.8 MB of output from a product of depth 9), the copy took 63% of the
// forward's time and the GEMM 31%; channel by channel the forward took 1.8 -> 1.4 ms on two
// threads (AMD EPYC, alternated runs). The epilogue still runs on each output row across
// the channels, after the copy, on rows still in cache.
template <class T>
void forward_phases(const Geometry& g, const PhaseLayout& p, const GroupWeights<T>& a,
                    const PhaseTasks<T>& tasks, T* y, const GemmEpilogue<T>* ep) {
  const Window3& w = g.w;
  const size_t L = g.l, og = g.og;
  const size_t cols = phase_cols<T>(g);
  const size_t blocks = (p.flat + cols - 1) / cols;
  tasks.run(blocks, [&](size_t n, size_t gi, size_t b, const T* base) {
    const size_t f0 = b * cols, ncur = std::min(cols, p.flat - f0);
    T* cb = scratch<T, 2>(og * ncur);
    static EMBER_THREAD_LOCAL std::vector<const T*> rows;
    rows.resize(g.ck());
    for (size_t r = 0; r < g.ck(); ++r) rows[r] = base + p.off[r] + ptrdiff_t(f0);
    gemm_packed_a_in_place(ncur, a[gi], rows.data(), cb, ptrdiff_t(ncur));
    // The valid columns, channel by channel and each channel's output rows in turn, so the
    // stores run along one output plane at a time (Note [Copy-out by channel]).
    T* yc = y + (n * g.o + gi * og) * L;
    const size_t pw = p.ext[2], ph = p.ext[1];
    const auto each_row = [&](auto&& fn) {
      for (size_t r = f0 / pw; r * pw < f0 + ncur; ++r) {
        const size_t oy = r % ph, oz = r / ph;
        if (oy >= w.out[1] || oz >= w.out[0]) continue;
        const size_t s0 = std::max(f0, r * pw), s1 = std::min(f0 + ncur, r * pw + w.out[2]);
        if (s1 <= s0) continue;
        fn((oz * w.out[1] + oy) * w.out[2] + (s0 - r * pw), s0 - f0, s1 - s0);
      }
    };
    for (size_t i = 0; i < og; ++i) {
      each_row([&](size_t l0, size_t c0, size_t len) {
        copy_run(yc + i * L + l0, cb + i * ncur + c0, len);
      });
    }
    if (ep) {
      each_row([&](size_t l0, size_t, size_t len) {
        ep->apply(ep->ctx, n, gi * og, l0, yc + l0, ptrdiff_t(L), og, len);
      });
    }
  });
}

// Note [Output rows as tiles]
// The phase route's product W_g [og, CK] x B [CK, flat] tiles C by the micro-kernel's 12
// rows of output channels and 32 flat positions: a small map wastes much of its tiles. The
// CNN's second layer ([128, 32, 14, 14] * [64, 32, 3, 3]) computes 15 flat positions a row
// for 14 outputs, a row of the phase image's 210 in 7 slivers of 32 (224), and its input
// gradient (a forward of 64 to 32 channels) the same: 87.5% of the multiply-adds useful,
// where oneDNN's direct convolution runs at the GEMM's peak. Transposed, the product is
// C^T [positions, og] = B^T A^T, and B^T's columns are the same runs read in place: a tile of
// positions (14 a tile, the rows of gemm_cols_in_place's kernel, Note [A columns in place]
// in gemm.hpp) is a piece of one output row, read from each run at that row's flat offset,
// and the output channels are whole slivers of 32. Cut evenly (a row of 14 one tile, of 56
// four), nothing is computed for the dropped flat positions or past the channels, so the
// CNN's layer computes only useful multiply-adds. The block of C^T goes to the output
// transposed (transpose_rows), and the epilogue meets it there. The weight is packed as
// PrepackedB (W_g^T) instead of PackedA, cached as its own variant. Each element sums the
// same products in the same order as the phase route (the k blocks are the GEMM's), so the
// results are bit for bit the same; the route is taken where it computes at least 5% fewer
// multiply-adds (rows_route: tiles counted as the kernels compute them).
constexpr size_t kRowsBlockBytes = size_t{128} << 10;  // C^T block of one task

Atomic<int> g_force_rows{-1};  // detail::conv_force_rows

// The multiply-adds (in tiles computed) of each route per image and group, and whether the
// rows route is taken.
template <class T>
bool rows_route(const Geometry& g, const PhaseLayout& p) {
  if (p.flat == 0 || g.og == 0) return false;
  if (const int forced = g_force_rows.load(std::memory_order_relaxed); forced >= 0)
    return forced == 1;
  // The phase route: output channels by flat positions in blocks of phase_cols.
  const size_t rows_old = gemm_rows_computed<T>(g.og), block = phase_cols<T>(g);
  size_t cols_old = 0;
  for (size_t f0 = 0; f0 < p.flat; f0 += block)
    cols_old += gemm_cols_computed<T>(std::min(block, p.flat - f0));
  // This route: each output row in the tiles gemm_cols_in_place cuts it into, by whole
  // slivers of channels (as the packed W^T's columns).
  const size_t rows_new = g.w.out[0] * g.w.out[1] * gemm_cols_rows<T>(g.w.out[2]);
  const size_t cols_new = PrepackedB<T>(g.ck(), g.og).n_padded();
  return rows_new * cols_new * 20 < rows_old * cols_old * 19;
}

// Output rows per product of the rows route over `images` images: a block of C^T
// [rows * ow, np] in about kRowsBlockBytes, and blocks enough for every thread.
size_t rows_per_task(const Geometry& g, size_t np, size_t elem, size_t images) {
  const size_t ow = g.w.out[2], out_rows = g.w.out[0] * g.w.out[1];
  size_t per =
      std::clamp<size_t>(kRowsBlockBytes / elem / std::max<size_t>(ow * np, 1), 1, out_rows);
  const size_t tasks = images * g.groups, threads = num_threads();
  if (tasks > 0 && tasks < threads) {
    const size_t blocks = std::max((out_rows + per - 1) / per, (threads + tasks - 1) / tasks);
    per = std::max<size_t>(1, (out_rows + blocks - 1) / blocks);
  }
  return per;
}

// Forward through phase images by output rows (Note [Output rows as tiles]).
template <class T>
void forward_rows(const Geometry& g, const PhaseLayout& p, const GroupWeights<T>& a,
                  const PhaseTasks<T>& tasks, T* y, const GemmEpilogue<T>* ep) {
  const Window3& w = g.w;
  const size_t L = g.l, og = g.og, ow = w.out[2], out_rows = w.out[0] * w.out[1];
  const size_t np = a.transposed_at(0).n_padded();
  const size_t per_task = rows_per_task(g, np, sizeof(T), tasks.n1 - tasks.n0);
  const size_t blocks = (out_rows + per_task - 1) / per_task;
  tasks.run(blocks, [&](size_t n, size_t gi, size_t b, const T* base) {
    const size_t r0 = b * per_task, r1 = std::min(out_rows, r0 + per_task), P = (r1 - r0) * ow;
    static EMBER_THREAD_LOCAL std::vector<const T*> cols;
    static EMBER_THREAD_LOCAL std::vector<ColsPiece> pieces;
    cols.resize(g.ck());
    for (size_t r = 0; r < g.ck(); ++r) cols[r] = base + p.off[r];
    pieces.clear();
    for (size_t r = r0; r < r1; ++r) pieces.push_back({p.row_at(r, w.out[1]), ow, (r - r0) * ow});
    T* ct = scratch<T, 2>(P * np);
    gemm_cols_in_place(pieces.data(), pieces.size(), cols.data(), a.transposed_at(gi), ct,
                       ptrdiff_t(np));
    T* yc = y + (n * g.o + gi * og) * L + r0 * ow;
    transpose_rows([&](size_t j) { return ct + j * np; }, P, og, yc, L);
    if (ep) ep->apply(ep->ctx, n, gi * og, r0 * ow, yc, ptrdiff_t(L), og, P);
  });
}

// The forward of x through phase images (Note [Phase images]) with g's packed weight a.
template <class T>
void forward_by_phases(CpuContext& ctx, const Geometry& g, const PhaseLayout& p,
                       const GroupWeights<T>& a, const T* x, T* y, const GemmEpilogue<T>* ep) {
  if (PhaseTasks<T>::whole(g, p)) {
    const PhaseTasks<T> tasks{g, p, x, nullptr, 0, g.n};
    return a.transposed() ? forward_rows(g, p, a, tasks, y, ep)
                          : forward_phases(g, p, a, tasks, y, ep);
  }
  // Images a chunk at a time: their phase images in at most kPhaseBudget bytes.
  const size_t per_image = g.c * p.channel();
  const size_t chunk = std::clamp<size_t>(kPhaseBudget / sizeof(T) / per_image, 1, g.n);
  const auto buf = ctx.empty(Shape{chunk * per_image + kInPlaceRowSlack},
                             sizeof(T) == 4 ? DType::F32 : DType::F64);
  T* images = buf->template data_as<T>();
  std::fill_n(images + chunk * per_image, kInPlaceRowSlack, T(0));
  for (size_t n0 = 0; n0 < g.n; n0 += chunk) {
    const size_t n1 = std::min(g.n, n0 + chunk);
    parallel_for(0, (n1 - n0) * g.c, std::max<size_t>(1, (size_t{1} << 14) / p.channel()),
                 [&](size_t b, size_t e) {
                   for (size_t i = b; i < e; ++i)
                     split_phases(g.w, p, x + (n0 * g.c + i) * g.image(), images + i * p.channel());
                 });
    const PhaseTasks<T> tasks{g, p, x, images, n0, n1};
    if (a.transposed())
      forward_rows(g, p, a, tasks, y, ep);
    else
      forward_phases(g, p, a, tasks, y, ep);
  }
}

// wt is the weight's tensor, given whether it is the op's own (not a contiguous copy).
template <class T>
void forward(CpuContext& ctx, const Geometry& g, const T* x, const CpuTensor& wt, bool given, T* y,
             const GemmEpilogue<T>* ep) {
  const size_t ck = g.ck(), L = g.l;
  const PhaseLayout p = phase_layout(g);
  const bool by_rows = rows_route<T>(g, p);
  // W_g [og, ck], row-major.
  const auto packed =
      packed_weights<T>(ctx, wt, given, ir::ConvPass::Forward, false, by_rows, g.groups, [&] {
        return std::make_shared<const GroupWeights<T>>(
            ctx, g.groups, g.og, ck, wt.data_as<const T>(), ptrdiff_t(g.og * ck), ptrdiff_t(ck),
            ptrdiff_t(1), nullptr, by_rows);
      });
  const GroupWeights<T>& a = *packed;
  if (p.flat > 0) return forward_by_phases(ctx, g, p, a, x, y, ep);
  for_each_task(g.n * g.groups, [&](size_t t) {
    const size_t n = t / g.groups, gi = t % g.groups;
    const T* planes = x + (n * g.c + gi * g.cg) * g.image();
    T* c = y + (n * g.o + gi * g.og) * L;
    const ShiftedEpilogue<T> shifted{ep, n, gi * g.og};
    const GemmEpilogue<T> shifted_ep{&ShiftedEpilogue<T>::apply, &shifted};
    const GemmEpilogue<T>* e = ep ? &shifted_ep : nullptr;
    if (g.pointwise()) {
      gemm_packed_a(L, a[gi], planes, ptrdiff_t(L), 1, c, ptrdiff_t(L), false, e);
      return;
    }
    const PaddedImage<T> image(g, planes);
    const ColsOperand<T> cols{&image.g, image.planes};
    gemm_packed_a(L, a[gi], PackedB<T>{&ColsOperand<T>::pack_cols, &cols}, c, ptrdiff_t(L), false,
                  e);
  });
}

// Note [Fold by image rows]
// The fold adds each column-matrix row (c, ky, kx) onto its image plane. Walked row after
// row, the three kx offsets of one (c, ky) add to the same image row shifted by one
// element each, so every vector load overlaps the stores of the offset before at another
// alignment: the store cannot be forwarded and each load waits for it to retire (the fold
// was 6% of the demo's step, most of it in those loads). fold_by_rows instead takes one
// image row at a time and adds its kernel offsets in the walk's order (ky, kx), each over
// the same range of the row — the positions every offset reaches, in vectors — with the
// edge entries on their own. Every entry receives the same terms in the same order as in
// the walk, so the sums are bit for bit the walk's. For 2-D windows of stride 1 and
// dilation 1, when one run of positions covers the whole output (the walk's run loop has
// one pass, so its order is the rows' alone).
bool folds_by_rows(const Geometry& g) {
  const Window3& w = g.w;
  return w.in[0] == 1 && w.kernel[0] == 1 && w.stride[1] == 1 && w.stride[2] == 1 &&
         w.dilation[1] == 1 && w.dilation[2] == 1 && w.out[1] > 0 && w.out[2] > 0;
}

// planes[c][iy][ix] += dcols[(c kh + ky) kw + kx][(iy + pad - ky) ow + ix + pad - kx] over
// the offsets in (ky, kx) order, for every (c, iy) (Note [Fold by image rows]); dcols holds
// all L positions.
template <class T>
void fold_by_rows(const Geometry& g, const T* dcols, T* planes) {
  const Window3& w = g.w;
  const int64_t kh = int64_t(w.kernel[1]), kw = int64_t(w.kernel[2]), ih = int64_t(w.in[1]),
                iw = int64_t(w.in[2]), oh = int64_t(w.out[1]), ow = int64_t(w.out[2]),
                ph = int64_t(w.padding[1]), pw = int64_t(w.padding[2]);
  // Offset kx reaches image columns [kx - pw, ow + kx - pw) within [0, iw); all of them reach
  // [c0, c1).
  const int64_t c0 = std::max<int64_t>(0, kw - 1 - pw), c1 = std::min<int64_t>(iw, ow - pw);
  for (size_t c = 0; c < g.cg; ++c) {
    for (int64_t iy = 0; iy < ih; ++iy) {
      T* xr = planes + (int64_t(c) * ih + iy) * iw;
      for (int64_t ky = 0; ky < kh; ++ky) {
        const int64_t oy = iy + ph - ky;
        if (oy < 0 || oy >= oh) continue;
        for (int64_t kx = 0; kx < kw; ++kx) {
          const int64_t shift = kx - pw;  // image column = position column + shift
          const T* d = dcols + ((int64_t(c) * kh + ky) * kw + kx) * int64_t(g.l) + oy * ow;
          const int64_t lo = std::max<int64_t>(0, shift), hi = std::min<int64_t>(iw, ow + shift);
          const int64_t mid_lo = std::clamp(c0, lo, std::max(lo, hi)),
                        mid_hi = std::clamp(c1, mid_lo, std::max(mid_lo, hi));
          for (int64_t ix = lo; ix < mid_lo; ++ix) xr[ix] += d[ix - shift];
          for (int64_t ix = mid_lo; ix < mid_hi; ++ix) xr[ix] += d[ix - shift];
          for (int64_t ix = mid_hi; ix < hi; ++ix) xr[ix] += d[ix - shift];
        }
      }
    }
  }
}

// Note [Input grad as a forward]
// With stride 1, the input gradient is a forward convolution of the output gradient:
//   dx[n, c, i] = sum_{o, t} gy[n, o, i + p - t d] w[o, c, t]
//               = sum_{o, t'} gy_padded[n, o, i + t' d] w[o, c, k - 1 - t'],
// a window of the same kernel and dilation over gy padded by d (k - 1) - p a side, with the
// weight's spatial dims flipped and its channel dims swapped: [C, O / G, *kernel] per
// group. So it runs through the forward's phase images (Note [Phase images]) where its
// padding is not negative, instead of the column product and fold; the sums of each element
// run over (o, t') in order, fixed by the sizes alone as before (not bit for bit the fold's
// order, which the tests' f64 reference does not need). The flipped weight is made and
// packed once, and cached with the weight's buffer (Note [Packed weight cache], `flipped`).
// The geometry of that forward (image gy, output dx), or none (n == 0) where it does not
// apply.
bool input_grad_as_forward(const Geometry& g, Geometry& f) {
  const Window3& w = g.w;
  Window3 fw = w;
  for (int d = 0; d < 3; ++d) {
    const size_t reach = w.dilation[d] * (w.kernel[d] - 1);
    if (w.stride[d] != 1 || w.padding[d] > reach) return false;
    fw.in[d] = w.out[d];
    fw.out[d] = w.in[d];
    fw.padding[d] = reach - w.padding[d];
  }
  f = g;
  f.w = fw;
  f.w.planes = g.n * g.o;
  f.c = g.o;
  f.o = g.c;
  f.cg = g.og;
  f.og = g.cg;
  f.l = g.image();
  return !g.pointwise();
}

template <class T>
void input_grad(CpuContext& ctx, const Geometry& g, const T* gy, const CpuTensor& wt, bool given,
                T* dx) {
  const size_t ck = g.ck(), L = g.l, s = g.w.stride[2];
  if (Geometry f; input_grad_as_forward(g, f)) {
    if (const PhaseLayout p = phase_layout(f); p.flat > 0) {
      const size_t K = g.k, per_group = g.cg * g.og * K;
      const bool by_rows = rows_route<T>(f, p);
      const auto packed =
          packed_weights<T>(ctx, wt, given, ir::ConvPass::InputGrad, true, by_rows, g.groups, [&] {
            // Group gi's [C/G, O/G * K]: row c, column (o, t') is w[gi O/G + o, c, K - 1 - t'].
            auto flipped =
                ctx.empty(Shape{g.groups * per_group}, sizeof(T) == 4 ? DType::F32 : DType::F64);
            T* dst = flipped->template data_as<T>();
            const T* src = wt.data_as<const T>();
            for (size_t gi = 0; gi < g.groups; ++gi)
              for (size_t c = 0; c < g.cg; ++c)
                for (size_t o = 0; o < g.og; ++o) {
                  const T* from = src + ((gi * g.og + o) * g.cg + c) * K;
                  T* to = dst + gi * per_group + (c * g.og + o) * K;
                  for (size_t t = 0; t < K; ++t) to[t] = from[K - 1 - t];
                }
            return std::make_shared<const GroupWeights<T>>(
                ctx, g.groups, g.cg, g.og * K, dst, ptrdiff_t(per_group), ptrdiff_t(g.og * K),
                ptrdiff_t(1), std::move(flipped), by_rows);
          });
      return forward_by_phases<T>(ctx, f, p, *packed, gy, dx, nullptr);
    }
  }
  // Window positions per run: dcols [ck, run] of about 256 KiB, at least 64 positions.
  const size_t run =
      std::min(L, std::max<size_t>(64, (size_t{256} << 10) / sizeof(T) / std::max<size_t>(ck, 1)));
  // W_g^T [ck, og]: W_g [og, ck] read transposed.
  const auto packed =
      packed_weights<T>(ctx, wt, given, ir::ConvPass::InputGrad, false, false, g.groups, [&] {
        return std::make_shared<const GroupWeights<T>>(ctx, g.groups, ck, g.og,
                                                       wt.data_as<const T>(), ptrdiff_t(g.og * ck),
                                                       ptrdiff_t(1), ptrdiff_t(ck));
      });
  const GroupWeights<T>& a = *packed;
  for_each_task(g.n * g.groups, [&](size_t t) {
    const size_t n = t / g.groups, gi = t % g.groups;
    T* planes = dx + (n * g.c + gi * g.cg) * g.image();
    const T* b = gy + (n * g.o + gi * g.og) * L;
    if (g.pointwise()) {
      gemm_packed_a(L, a[gi], b, ptrdiff_t(L), 1, planes, ptrdiff_t(L), false);
      return;
    }
    std::fill(planes, planes + g.cg * g.image(), T(0));
    T* dcols = scratch<T>(ck * run);
    for (size_t l0 = 0; l0 < L; l0 += run) {
      const size_t len = std::min(run, L - l0);
      gemm_packed_a(len, a[gi], b + l0, ptrdiff_t(L), 1, dcols, ptrdiff_t(len), false);
      if (len == L && folds_by_rows(g)) {
        fold_by_rows(g, dcols, planes);
        continue;
      }
      for (size_t r = 0; r < ck; ++r) {
        const T* d = dcols + r * len;
        walk_row(g, r, l0, len, [&](size_t i, size_t count, int64_t src) {
          if (src < 0) return;
          T* xr = planes + src;
          if (s == 1) {
            for (size_t q = 0; q < count; ++q) xr[q] += d[i + q];
          } else {
            for (size_t q = 0; q < count; ++q) xr[q * s] += d[i + q];
          }
        });
      }
    }
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
  const PhaseLayout p = phase_layout(g);
  // Note [Weight gradient by rows]
  // Through phase images, dW_g = gy_g [og, flat] cols^T [flat, ck] packed cols^T, transposing
  // every run of every image (14% of the CNN's second layer's weight gradient). Transposed,
  // dW_g^T = cols [ck, flat] gy_g^T [flat, og] has cols for A, whose rows are the runs: the
  // micro-kernel reads them in place (gemm_rows_in_place, Note [A rows in place] in gemm.hpp)
  // and packs only gy (og rows, not ck). The partial sums are dW_g^T, summed over the chunks
  // in chunk order as before and transposed into dw at the end. The flat positions past each
  // output row now meet the images' own elements, times gy's zeros: where the group's phase
  // images hold an infinity or a NaN (0 x inf is NaN), its rows are copied with those
  // positions zero instead, so no element outside a window enters a sum. Each element sums
  // the same products in the same order as through packed cols^T (a product with a zero
  // there, or with +0 at a position past a row, leaves a sum unchanged, and a sum starting at
  // +0 is never -0), so the results are the same bit for bit. The CNN's second layer's
  // weight gradient: 2.81-2.82 -> 2.44-2.49 ms (alternated).
  const bool by_rows = p.flat > 0;
  // The partial sums, from the backend's pool (a fresh heap block would be page-faulted in
  // on every call); every element is written before it is read.
  const bool buffered = chunks > 1 || by_rows;
  const auto partial_buf =
      buffered ? ctx.empty(Shape{chunks * total}, sizeof(T) == 4 ? DType::F32 : DType::F64)
               : nullptr;
  T* const partial = buffered ? partial_buf->template data_as<T>() : nullptr;
  for_each_task(chunks * g.groups, [&](size_t t) {
    const size_t ch = t / g.groups, gi = t % g.groups;
    const size_t n0 = g.n * ch / chunks, n1 = g.n * (ch + 1) / chunks;
    T* out = (buffered ? partial + ch * total : dw) + gi * per_group;
    for (size_t n = n0; n < n1; ++n) {
      const T* planes = x + (n * g.c + gi * g.cg) * g.image();
      const T* a = gy + (n * g.o + gi * g.og) * L;
      // out [og, ck] += gy[n, g] [og, L] * cols^T [L, ck].
      if (p.flat > 0) {
        // Over flat positions: the group's phase images, gy laid over them (zeros past
        // each output row).
        T* images = scratch<T, 4>(g.cg * p.channel());
        for (size_t c = 0; c < g.cg; ++c)
          split_phases(g.w, p, planes + c * g.image(), images + c * p.channel());
        // A flat row d: output row r's values from src + at(r), zero at every other position.
        const size_t ow = g.w.out[2], oh = g.w.out[1];
        const auto lay_over_flat = [&](T* d, const T* src, auto&& at) {
          std::fill(d, d + p.flat, T(0));
          for (size_t r = 0; r < g.w.out[0] * oh; ++r)
            std::memcpy(d + p.row_at(r, oh), src + at(r), ow * sizeof(T));
        };
        T* af = scratch<T, 5>(g.og * p.flat);
        for (size_t o = 0; o < g.og; ++o)
          lay_over_flat(af + o * p.flat, a + o * L, [&](size_t r) { return r * ow; });
        // out^T [ck, og] += cols [ck, flat] * af^T [flat, og], cols' rows the runs in place;
        // copies without the dropped positions where the images hold an infinity or NaN.
        static EMBER_THREAD_LOCAL std::vector<const T*> rows;
        rows.resize(ck);
        if (all_finite(images, g.cg * p.channel())) {
          for (size_t r = 0; r < ck; ++r) rows[r] = images + p.off[r];
        } else {
          T* kept = scratch<T, 6>(ck * p.flat);
          for (size_t r = 0; r < ck; ++r) {
            rows[r] = kept + r * p.flat;
            lay_over_flat(kept + r * p.flat, images + p.off[r],
                          [&](size_t q) { return p.row_at(q, oh); });
          }
        }
        gemm_rows_in_place(ck, g.og, p.flat, rows.data(), af, 1, ptrdiff_t(p.flat), out,
                           ptrdiff_t(g.og), n > n0);
      } else if (g.pointwise()) {
        gemm(g.og, ck, L, a, ptrdiff_t(L), 1, planes, 1, ptrdiff_t(L), out, ptrdiff_t(ck), n > n0);
      } else {
        const PaddedImage<T> image(g, planes);
        const ColsOperand<T> cols{&image.g, image.planes};
        gemm_packed(g.og, ck, L, a, ptrdiff_t(L), 1,
                    PackedB<T>{&ColsOperand<T>::pack_cols_t, &cols}, out, ptrdiff_t(ck), n > n0);
      }
    }
  });
  if (!buffered) return;
  // Each element sums its chunks in chunk order, ((p0 + p1) + p2) + ...; the chunk loop
  // outside, so the adds run along contiguous rows of the partials (vectorized) rather than
  // as one dependent chain per element down a column (a ResNet step's folds took 4% of it).
  T* const sum = by_rows ? partial : dw;
  parallel_for(0, total, 4096, [&](size_t b, size_t e) {
    if (!by_rows) std::copy(partial + b, partial + e, dw + b);
    for (size_t ch = 1; ch < chunks; ++ch) {
      const T* pc = partial + ch * total;
      for (size_t i = b; i < e; ++i) sum[i] += pc[i];
    }
  });
  if (!by_rows) return;
  for (size_t gi = 0; gi < g.groups; ++gi) {
    const T* src = partial + gi * per_group;
    transpose_rows([&](size_t j) { return src + j * g.og; }, ck, g.og, dw + gi * per_group, ck);
  }
}

}  // namespace

template <class T>
void conv_forward_into(CpuContext& ctx, const ir::Conv& op, T* out, const GemmEpilogue<T>* ep) {
  auto x = contiguous(ctx, op.x);
  auto w = contiguous(ctx, op.w);
  const Geometry g = geometry(x->shape(), op.window, w->shape()[0], op.groups);
  if (g.direct_forward())
    forward_per_channel<T>(g, x->data_as<const T>(), w->data_as<const T>(), out, ep);
  else
    forward<T>(ctx, g, x->data_as<const T>(), *w, w.get() == op.w.get(), out, ep);
}
template void conv_forward_into<float>(CpuContext&, const ir::Conv&, float*,
                                       const GemmEpilogue<float>*);
template void conv_forward_into<double>(CpuContext&, const ir::Conv&, double*,
                                        const GemmEpilogue<double>*);

namespace detail {
void conv_force_rows(int rows) { g_force_rows.store(rows, std::memory_order_relaxed); }
}  // namespace detail

ir::Handle run(CpuContext& ctx, ir::Conv& op) {
  auto out = ctx.empty(ir::out_shape(op), op.x->dtype());
  if (out->shape().num_elements() == 0) return out;
  if (op.pass == ir::ConvPass::Forward &&
      (op.x->dtype() == DType::F32 || op.x->dtype() == DType::F64)) {
    if (op.x->dtype() == DType::F64)
      conv_forward_into<double>(ctx, op, out->data_as<double>(), nullptr);
    else
      conv_forward_into<float>(ctx, op, out->data_as<float>(), nullptr);
    return out;
  }
  auto x = contiguous(ctx, op.x);
  auto w = contiguous(ctx, op.w);
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    switch (op.pass) {
      case ir::ConvPass::Forward:  // (run by conv_forward_into above)
        break;
      case ir::ConvPass::InputGrad: {
        const Geometry g = geometry(out->shape(), op.window, x->shape()[1], op.groups);
        Geometry f;
        if (g.per_channel() && g.og == 1 && input_grad_as_forward(g, f)) {
          // Note [Input grad as a forward], depthwise: the flipped kernels on the direct path.
          const size_t K = g.k;
          const T* src = w->data_as<const T>();
          std::vector<T> flipped(g.o * K);
          for (size_t oc = 0; oc < g.o; ++oc)
            for (size_t t = 0; t < K; ++t) flipped[oc * K + t] = src[oc * K + K - 1 - t];
          forward_per_channel<T>(f, x->data_as<const T>(), flipped.data(), out->data_as<T>(),
                                 nullptr);
        } else if (g.per_channel())
          input_grad_per_channel<T>(g, x->data_as<const T>(), w->data_as<const T>(),
                                    out->data_as<T>());
        else
          input_grad<T>(ctx, g, x->data_as<const T>(), *w, w.get() == op.w.get(),
                        out->data_as<T>());
        break;
      }
      case ir::ConvPass::WeightGrad:
      case ir::ConvPass::Count_: {
        const Geometry g = geometry(x->shape(), op.window, w->shape()[1], op.groups);
        if (g.direct_weight_grad())
          weight_grad_per_channel<T>(g, x->data_as<const T>(), w->data_as<const T>(),
                                     out->data_as<T>());
        else
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
