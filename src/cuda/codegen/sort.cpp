// The sort kernels (kernels/sort.cpp, Note [Device sort] there), nonzero's count and
// write (kernels/indexing.cpp), and the multi-pass exclusive scan of an i64 array they use.
#include "cuda/codegen.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "cuda/codegen/printer.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {

using namespace codegen;  // NOLINT: the generators are written in the printer's vocabulary

// ---- sort (kernels/sort.cpp) and nonzero (kernels/indexing.cpp) ----

namespace {
// The sort order as device lambdas over keys in C and original positions: `less` puts NaN
// after everything (the Cpu's comparison), `before` is that order — reversed for desc —
// with ties broken by position, and positions >= n (padding) last. A strict total order,
// so any sorting network gives the stable sort.
std::string sort_order() {
  return "  auto less = [](C a, C b) -> bool { return (b != b) ? (a == a) : ((a != a) ? false "
         ": a < b); };\n"
         "  auto before = [&](C ka, i64 ia, C kb, i64 ib) -> bool {\n"
         "    if (ia >= n || ib >= n) return ia < ib;\n"
         "    const bool lt = desc ? less(kb, ka) : less(ka, kb);\n"
         "    const bool gt = desc ? less(ka, kb) : less(kb, ka);\n"
         "    return lt || (!gt && ia < ib);\n"
         "  };\n"
         "  (void)less;\n";
}
// The first element of row r and its stride (see codegen.hpp).
const char* const kSortRowBase = "(r / inner) * n * inner + r % inner";

// Exclusive scan across the block of the i64 `c` of each thread: defines `excl` (the sum
// of c over lower threads) and `total`. Every thread of the block must reach it; needs
// `__shared__ i64 em_ws[32]`, lane, warp and nwarps.
std::string block_exclusive_scan() {
  return "    i64 inc = c;\n"
         "    for (int o = 1; o < 32; o <<= 1) {\n"
         "      const i64 u = __shfl_up_sync(0xffffffffu, inc, o);\n"
         "      if (lane >= o) inc += u;\n"
         "    }\n"
         "    if (lane == 31) em_ws[warp] = inc;\n"
         "    __syncthreads();\n"
         "    if (warp == 0) {\n"
         "      i64 w = lane < nwarps ? em_ws[lane] : 0;\n"
         "      for (int o = 1; o < 32; o <<= 1) {\n"
         "        const i64 u = __shfl_up_sync(0xffffffffu, w, o);\n"
         "        if (lane >= o) w += u;\n"
         "      }\n"
         "      if (lane < nwarps) em_ws[lane] = w;\n"
         "    }\n"
         "    __syncthreads();\n"
         "    const i64 excl = inc - c + (warp > 0 ? em_ws[warp - 1] : 0);\n"
         "    const i64 total = em_ws[nwarps - 1];\n"
         "    __syncthreads();\n"
         "    (void)excl; (void)total;\n";
}
std::string scan_block_setup() {
  return "  __shared__ i64 em_ws[32];\n"
         "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
         "  const int nwarps = blockDim.x >> 5;\n"
         "  const i64 tile_n = " +
         std::to_string(kScanTile) + ";\n  const int per = (int)(tile_n / blockDim.x);\n";
}
// Each thread of a tile owns `per` consecutive elements from p0, so a thread's count and
// the block's exclusive scan give row-major output positions.
const char* const kTileLoop =
    "  for (i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {\n"
    "    const i64 p0 = tile * tile_n + (i64)threadIdx.x * per;\n";
}  // namespace

KernelSource gen_sort_rows(DType dt) {
  KernelSource k;
  k.name = "em_sort_rows_" + dname(dt);
  const std::string T = storage_type(dt);
  const std::string cap = std::to_string(kSortSharedMax);
  k.body = "extern \"C\" __global__ void " + k.name + "(const " + T + "* __restrict__ x, " + T +
           "* __restrict__ values, i64* __restrict__ indices, i64 rows, i64 n, i64 inner, i64 "
           "np2, int desc) {\n" +
           typedefs(dt) + "  __shared__ C sk[" + cap + "];\n  __shared__ int si[" + cap + "];\n" +
           sort_order() +
           "  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {\n"
           "    const i64 base = " +
           kSortRowBase +
           ";\n"
           "    for (int p = threadIdx.x; p < np2; p += blockDim.x) {\n"
           "      si[p] = p;\n"
           "      sk[p] = p < n ? " +
           load(dt, "x[base + p * inner]") +
           " : (C)0;\n"
           "    }\n"
           "    __syncthreads();\n"
           "    for (int k = 2; k <= np2; k <<= 1) {\n"
           "      for (int j = k >> 1; j > 0; j >>= 1) {\n"
           "        for (int q = threadIdx.x; q < np2 / 2; q += blockDim.x) {\n"
           "          const int i = (q / j) * 2 * j + q % j, l = i + j;\n"
           "          const bool sw = (i & k) == 0 ? before(sk[l], si[l], sk[i], si[i])\n"
           "                                       : before(sk[i], si[i], sk[l], si[l]);\n"
           "          if (sw) {\n"
           "            const C tk = sk[i]; sk[i] = sk[l]; sk[l] = tk;\n"
           "            const int ti = si[i]; si[i] = si[l]; si[l] = ti;\n"
           "          }\n"
           "        }\n"
           "        __syncthreads();\n"
           "      }\n"
           "    }\n"
           "    for (int p = threadIdx.x; p < n; p += blockDim.x) {\n"
           "      const i64 src = si[p];\n"
           "      values[base + p * inner] = x[base + src * inner];\n"
           "      indices[base + p * inner] = src;\n"
           "    }\n"
           "    __syncthreads();\n"
           "  }\n}\n";
  return k;
}

KernelSource gen_sort_init() {
  KernelSource k;
  k.name = "em_sort_init";
  k.body = "extern \"C\" __global__ void " + k.name +
           "(i64* __restrict__ ord, i64 rows, i64 np2) {\n"
           "  for (i64 t = EM_GID; t < rows * np2; t += EM_GSTRIDE) ord[t] = t % np2;\n}\n";
  return k;
}

KernelSource gen_sort_stage(DType dt) {
  KernelSource k;
  k.name = "em_sort_stage_" + dname(dt);
  const std::string T = storage_type(dt);
  k.body = "extern \"C\" __global__ void " + k.name + "(const " + T +
           "* __restrict__ x, i64* __restrict__ ord, i64 rows, i64 n, i64 inner, i64 np2, i64 "
           "k, i64 j, int desc) {\n" +
           typedefs(dt) + sort_order() +
           "  const i64 half = np2 >> 1;\n"
           "  for (i64 t = EM_GID; t < rows * half; t += EM_GSTRIDE) {\n"
           "    const i64 r = t / half, q = t % half;\n"
           "    const i64 i = (q / j) * 2 * j + q % j, l = i + j;\n"
           "    const i64 base = " +
           kSortRowBase +
           ";\n"
           "    i64* o = ord + r * np2;\n"
           "    const i64 ia = o[i], il = o[l];\n"
           "    const C ka = ia < n ? " +
           load(dt, "x[base + ia * inner]") +
           " : (C)0;\n"
           "    const C kl = il < n ? " +
           load(dt, "x[base + il * inner]") +
           " : (C)0;\n"
           "    if ((i & k) == 0 ? before(kl, il, ka, ia) : before(ka, ia, kl, il)) {\n"
           "      o[i] = il; o[l] = ia;\n"
           "    }\n"
           "  }\n}\n";
  return k;
}

KernelSource gen_sort_write(std::size_t elem) {
  KernelSource k;
  k.name = "em_sort_write_s" + std::to_string(elem);
  const std::string t = sized_type(elem);
  k.body = "extern \"C\" __global__ void " + k.name + "(const " + t +
           "* __restrict__ x, const i64* __restrict__ ord, " + t +
           "* __restrict__ values, i64* __restrict__ indices, i64 rows, i64 n, i64 inner, i64 "
           "np2) {\n"
           "  for (i64 t = EM_GID; t < rows * n; t += EM_GSTRIDE) {\n"
           "    const i64 r = t / n, p = t % n;\n"
           "    const i64 base = " +
           kSortRowBase +
           ";\n"
           "    const i64 src = ord[r * np2 + p];\n"
           "    values[base + p * inner] = x[base + src * inner];\n"
           "    indices[base + p * inner] = src;\n"
           "  }\n}\n";
  return k;
}

KernelSource gen_nonzero_count(DType dt) {
  KernelSource k;
  k.name = "em_nonzero_count_" + dname(dt);
  const std::string T = storage_type(dt);
  k.body = "extern \"C\" __global__ void " + k.name + "(const " + T +
           "* __restrict__ x, i64 n, i64* __restrict__ counts, i64 tiles) {\n" + typedefs(dt) +
           scan_block_setup() + kTileLoop +
           "    i64 c = 0;\n"
           "    for (int e = 0; e < per; ++e) {\n"
           "      const i64 p = p0 + e;\n"
           "      if (p < n && " +
           load(dt, "x[p]") +
           " != (C)0) ++c;\n"
           "    }\n" +
           block_exclusive_scan() +
           "    if (threadIdx.x == 0) counts[tile] = total;\n"
           "  }\n}\n";
  return k;
}

KernelSource gen_nonzero_write(DType dt) {
  KernelSource k;
  k.name = "em_nonzero_write_" + dname(dt);
  const std::string T = storage_type(dt);
  k.body = "extern \"C\" __global__ void " + k.name + "(EmGeo g, const " + T +
           "* __restrict__ x, const i64* __restrict__ offsets, i64* __restrict__ y) {\n" +
           typedefs(dt) + scan_block_setup() +
           "  const i64 n = g.n, tiles = (n + tile_n - 1) / tile_n;\n" + kTileLoop +
           "    i64 c = 0;\n"
           "    for (int e = 0; e < per; ++e) {\n"
           "      const i64 p = p0 + e;\n"
           "      if (p < n && " +
           load(dt, "x[p]") +
           " != (C)0) ++c;\n"
           "    }\n" +
           block_exclusive_scan() +
           "    i64 pos = offsets[tile] + excl;\n"
           "    for (int e = 0; e < per && c > 0; ++e) {\n"
           "      const i64 p = p0 + e;\n"
           "      if (p >= n || !(" +
           load(dt, "x[p]") +
           " != (C)0)) continue;\n"
           "      i64 rest = p;\n"
           "      for (int d = g.rank - 1; d >= 0; --d) {\n"
           "        y[pos * g.rank + d] = rest % g.shape[d];\n"
           "        rest /= g.shape[d];\n"
           "      }\n"
           "      ++pos;\n"
           "    }\n"
           "  }\n}\n";
  return k;
}

KernelSource gen_scan_tiles() {
  KernelSource k;
  k.name = "em_scan_tiles_i64";
  k.body = "extern \"C\" __global__ void " + k.name +
           "(i64* __restrict__ a, i64 n, i64* __restrict__ sums) {\n" + scan_block_setup() +
           "  const i64 tiles = (n + tile_n - 1) / tile_n;\n" + kTileLoop +
           "    i64 c = 0;\n"
           "    for (int e = 0; e < per; ++e) c += p0 + e < n ? a[p0 + e] : 0;\n" +
           block_exclusive_scan() +
           "    i64 run = excl;\n"
           "    for (int e = 0; e < per; ++e) {\n"
           "      if (p0 + e >= n) break;\n"
           "      const i64 v = a[p0 + e];\n"
           "      a[p0 + e] = run;\n"
           "      run += v;\n"
           "    }\n"
           "    if (threadIdx.x == 0) sums[tile] = total;\n"
           "  }\n}\n";
  return k;
}

KernelSource gen_add_tile_offsets() {
  KernelSource k;
  k.name = "em_add_tile_offsets_i64";
  k.body = "extern \"C\" __global__ void " + k.name +
           "(i64* __restrict__ a, i64 n, const i64* __restrict__ offsets) {\n"
           "  for (i64 i = EM_GID; i < n; i += EM_GSTRIDE) a[i] += offsets[i / " +
           std::to_string(kScanTile) + "];\n}\n";
  return k;
}

// ---- variants (Note [Kernel specs] in codegen.hpp) ----

namespace {
template <class Spec>
std::vector<Spec> each_dtype() {
  std::vector<Spec> out;
  for (DType dt : kAllDTypes) out.emplace_back(dt);
  return out;
}
}  // namespace

template <>
std::vector<SortRowsKernel> SortRowsKernel::variants() {
  return each_dtype<SortRowsKernel>();
}
template <>
std::vector<SortInitKernel> SortInitKernel::variants() {
  return {SortInitKernel()};
}
template <>
std::vector<SortStageKernel> SortStageKernel::variants() {
  return each_dtype<SortStageKernel>();
}
template <>
std::vector<SortWriteKernel> SortWriteKernel::variants() {
  std::vector<SortWriteKernel> out;
  for (std::size_t e : {1, 2, 4, 8}) out.emplace_back(e);
  return out;
}
template <>
std::vector<NonzeroCountKernel> NonzeroCountKernel::variants() {
  return each_dtype<NonzeroCountKernel>();
}
template <>
std::vector<NonzeroWriteKernel> NonzeroWriteKernel::variants() {
  return each_dtype<NonzeroWriteKernel>();
}
template <>
std::vector<ScanTilesKernel> ScanTilesKernel::variants() {
  return {ScanTilesKernel()};
}
template <>
std::vector<AddTileOffsetsKernel> AddTileOffsetsKernel::variants() {
  return {AddTileOffsetsKernel()};
}

}  // namespace ember::cuda
