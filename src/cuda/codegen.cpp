// The Cuda kernel generators of the families not split out yet: softmax and layer norm
// (rows in registers and the row-walking kernels), creation, indexing, sort and nonzero,
// sliding windows, and each family's variants() for the NVRTC test. The shared printing helpers and
// the prelude are in codegen/printer.*, the element-wise generators in codegen/elementwise.cpp, the
// reductions and scans in codegen/reduce.cpp.
#include "cuda/codegen.hpp"

#include <array>
#include <string>
#include <vector>

#include "cuda/codegen/printer.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {

using namespace codegen;  // NOLINT: the generators are written in the printer's vocabulary
using ir::BinaryFn;
using ir::ReduceFn;
using ir::ScanFn;
using ir::UnaryFn;

// Softmax / log-softmax of contiguous rows: one block per row, three passes over the row
// (max, sum of exp(x - max), write), each reduced across the block with warp shuffles;
// the row is re-read from L2 rather than kept, so any row length works.
KernelSource gen_softmax(DType dt, bool log) {
  KernelSource k;
  k.name = std::string("em_") + (log ? "log_softmax_" : "softmax_") + dname(dt);
  const std::string T = storage_type(dt);
  const std::string max_op = combine(ReduceFn::Max, dt, "v", "o");
  std::string s = "extern \"C\" __global__ void " + k.name + "(const " + T + "* __restrict__ x, " +
                  T + "* __restrict__ y, i64 rows, i64 n) {\n" + typedefs(dt) +
                  "  __shared__ C sv[32];\n"
                  "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
                  "  const int nwarps = (blockDim.x + 31) >> 5;\n"
                  "  const C inf = (C)1 / (C)0;\n"
                  "  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {\n"
                  "    const " +
                  T +
                  "* xr = x + row * n;\n"
                  "    " +
                  T +
                  "* yr = y + row * n;\n"
                  "    C v = -inf;\n"
                  "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) { const C o = " +
                  load(dt, "xr[j]") + "; v = " + max_op + "; }\n" +
                  block_reduce(max_op, reduce_init(ReduceFn::Max, dt)) +
                  "    const C m = v;\n"
                  "    v = (C)0;\n"
                  "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) v += m_exp(" +
                  load(dt, "xr[j]") + " - m);\n" + block_reduce("v + o", "(C)0");
  if (log) {
    s += "    const C l = m + m_log(v);\n"
         "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) yr[j] = " +
         store(dt, load(dt, "xr[j]") + " - l") + ";\n";
  } else {
    s += "    const C inv = (C)1 / v;\n"
         "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) yr[j] = " +
         store(dt, "m_exp(" + load(dt, "xr[j]") + " - m) * inv") + ";\n";
  }
  s += "  }\n}\n";
  k.body = std::move(s);
  return k;
}

// Note [Rows in registers]: a row of up to blockDim * ept elements is held in registers, so
// it is read once and written once. Thread t holds ept / V chunks of V consecutive
// elements, chunk c starting at element (t + c * blockDim) * V: with V > 1 (the row length
// a multiple of V and every pointer aligned to V elements; the host picks V) a chunk is one
// 16-byte load or store, as in Note [Vector loads]. Each block walks rows with a grid
// stride and loads its next row (and that row's first element) before reducing the current
// one, so the loads' latency overlaps the block's reductions. This prints the kernel's
// frame: `params` (may be empty) after x, `prologue` (before the row loop: per-column
// values a block keeps for every row), the prefetch, `body`, and the store. The body sees
// the row in r[] (elements past n hold `pad`), its first element in `first`, and the block
// reduction helpers (block_reduce over `v`), and leaves the output row in r[].
// With V > 1 one thread also asks the copy engine to bring the row after the next into L2
// (cp.async.bulk.prefetch, sm_90), so a block has two rows' loads in flight while holding
// one in registers. Kernels are bounded to 512 threads and two blocks per SM (at most 64
// registers a thread) and launched as one wave (CudaContext::kOneWave).
// The host picks blockDim, ept and V with ept * blockDim >= n and V dividing ept.
std::string regs_row_kernel(const std::string& name, DType dt, int ept, int vec,
                            const std::string& params, const std::string& pad,
                            const std::string& prologue, const std::string& body) {
  const std::string E = std::to_string(ept);
  const std::string V = std::to_string(vec);
  const std::string T = storage_type(dt);
  const std::string VT = "em_vec<" + T + ", " + V + ">";
  const std::string chunk_j =
      "      const i64 j = ((i64)threadIdx.x + (i64)c * blockDim.x) * " + V + ";\n";
  const std::string row_bytes = "(n * (i64)sizeof(" + T + "))";
  const std::string pf_row = "row + 2 * (i64)gridDim.x";
  const std::string l2_prefetch =
      vec == 1
          ? ""
          : "#if __CUDA_ARCH__ >= 900\n"
            "    if (threadIdx.x == 0 && " +
                row_bytes + " % 16 == 0 && " + pf_row +
                " < rows) {\n"
                "      asm volatile(\"cp.async.bulk.prefetch.L2.global [%0], %1;\" :: \"l\"(x + (" +
                pf_row + ") * n), \"r\"((unsigned)" + row_bytes +
                ") : \"memory\");\n"
                "    }\n"
                "#endif\n";
  std::string s = "extern \"C\" __global__ void __launch_bounds__(512, 2) " + name + "(const " + T +
                  "* __restrict__ x, " + (params.empty() ? "" : params + ", ") + T +
                  "* __restrict__ y, i64 rows, i64 n) {\n" + typedefs(dt) +
                  "  __shared__ C sv[32];\n"
                  "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
                  "  const int nwarps = (blockDim.x + 31) >> 5;\n"
                  "  const C inf = (C)1 / (C)0;\n"
                  "  (void)inf;\n"
                  "#define EM_ROW_LOAD(dst, src, ok, padv) \\\n"
                  "  _Pragma(\"unroll\") for (int c = 0; c < " +
                  E + " / " + V +
                  "; ++c) { \\\n"
                  "    const i64 j = ((i64)threadIdx.x + (i64)c * blockDim.x) * " +
                  V +
                  "; \\\n"
                  "    if ((ok) && j < n) { \\\n"
                  "      const " +
                  VT + " t = *(const " + VT +
                  "*)((src) + j); \\\n"
                  "      _Pragma(\"unroll\") for (int u = 0; u < " +
                  V + "; ++u) dst[c * " + V + " + u] = " + load(dt, "t.v[u]") +
                  "; \\\n"
                  "    } else { \\\n"
                  "      _Pragma(\"unroll\") for (int u = 0; u < " +
                  V + "; ++u) dst[c * " + V +
                  " + u] = (padv); \\\n"
                  "    } \\\n"
                  "  }\n" +
                  prologue + "  C nx[" + E + "];\n  i64 row = blockIdx.x;\n" +
                  "  EM_ROW_LOAD(nx, x + row * n, row < rows, " + pad +
                  ");\n"
                  "  C nfirst = row < rows ? " +
                  load(dt, "x[row * n]") +
                  " : (C)0;\n"
                  "  for (; row < rows; row += gridDim.x) {\n" +
                  l2_prefetch + "    C r[" + E +
                  "];\n"
                  "#pragma unroll\n"
                  "    for (int e = 0; e < " +
                  E +
                  "; ++e) r[e] = nx[e];\n"
                  "    const C first = nfirst;\n    (void)first;\n"
                  "    const i64 next = row + gridDim.x;\n"
                  "    EM_ROW_LOAD(nx, x + next * n, next < rows, " +
                  pad +
                  ");\n"
                  "    nfirst = next < rows ? " +
                  load(dt, "x[next * n]") + " : (C)0;\n" + body + "    " + T +
                  "* yr = y + row * n;\n"
                  "#pragma unroll\n"
                  "    for (int c = 0; c < " +
                  E + " / " + V + "; ++c) {\n" + chunk_j +
                  "      if (j < n) {\n"
                  "        " +
                  VT +
                  " t;\n"
                  "#pragma unroll\n"
                  "        for (int u = 0; u < " +
                  V + "; ++u) t.v[u] = " + store(dt, "r[c * " + V + " + u]") +
                  ";\n"
                  "        *(" +
                  VT +
                  "*)(yr + j) = t;\n"
                  "      }\n"
                  "    }\n"
                  "  }\n"
                  "#undef EM_ROW_LOAD\n"
                  "}\n";
  return s;
}

bool aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

RowsInRegisters rows_in_registers(std::int64_t n, DType dt, bool aligned) {
  // Measured on an H200 for 16384 x 4096 f32 rows (ms, softmax / layer norm; 0.128 is the
  // copy bound): one element per access at (512, 8) 0.196 / 0.182; 16-byte chunks 0.192 /
  // 0.179; with the L2 prefetch 0.169 / 0.171; at two blocks per SM (launch bounds) 0.155 /
  // 0.152; (256, 16) 0.174 / 0.188. A block holds two rows' worth (the row and the next)
  // plus, for layer norm, weight and bias: 8 per thread (4 for f64) fit two blocks of 512
  // threads per SM without spilling; longer rows take the three-pass kernels.
  if (n > std::int64_t(512) * rows_max_ept(dt)) return {0, 0, 1};
  RowsInRegisters r{32, 1, 1};
  while (r.block < 512 && std::int64_t(r.block) * rows_max_ept(dt) < n) r.block *= 2;
  while (std::int64_t(r.block) * r.ept < n) r.ept *= 2;
  if (aligned) {
    r.vec = vector_width(size_of(dt));
    while (r.vec > 1 && (n % r.vec != 0 || r.vec > r.ept)) r.vec /= 2;
  }
  return r;
}

// A loop over the row's elements held by this thread (Note [Rows in registers]); `j` is
// the element's index in the row, r[e] its value.
std::string each_elem(int ept, int vec, const std::string& stmt) {
  const std::string V = std::to_string(vec);
  return "#pragma unroll\n"
         "    for (int e = 0; e < " +
         std::to_string(ept) +
         "; ++e) {\n"
         "      const i64 j = ((i64)threadIdx.x + (i64)(e / " +
         V + ") * blockDim.x) * " + V + " + e % " + V +
         ";\n"
         "      if (j < n) { " +
         stmt + " }\n    }\n";
}

std::string regs_suffix(int ept, int vec) {
  return "_r" + std::to_string(ept) + (vec > 1 ? "v" + std::to_string(vec) : "");
}

// Softmax of rows held in registers (Note [Rows in registers]).
KernelSource gen_softmax_regs(DType dt, bool log, int ept, int vec) {
  KernelSource k;
  k.name =
      std::string("em_") + (log ? "log_softmax_" : "softmax_") + dname(dt) + regs_suffix(ept, vec);
  const std::string max_op = combine(ReduceFn::Max, dt, "v", "o");
  std::string body =
      "    C v = -inf;\n" + each_elem(ept, vec, "const C o = r[e]; v = " + max_op + ";") +
      block_reduce(max_op, reduce_init(ReduceFn::Max, dt)) + "    const C m = v;\n    v = (C)0;\n";
  body +=
      each_elem(ept, vec, log ? "v += m_exp(r[e] - m);" : "r[e] = m_exp(r[e] - m); v += r[e];") +
      block_reduce("v + o", "(C)0");
  body += log ? "    const C l = m + m_log(v);\n" : "    const C inv = (C)1 / v;\n";
  body += each_elem(ept, vec, log ? "r[e] = r[e] - l;" : "r[e] = r[e] * inv;");
  k.body = regs_row_kernel(k.name, dt, ept, vec, "", "-inf", "", body);
  return k;
}

// Layer norm of rows held in registers (Note [Rows in registers]): the mean, then the sum
// of squared deviations from it (two reductions over registers, no cancellation), then the
// write. Weight and bias (n elements each, may be null: 1 and -0, which keep every value,
// -0 included) are loaded once per block and kept in registers for every row it normalises.
KernelSource gen_layer_norm_regs(DType dt, int ept, int vec) {
  KernelSource k;
  k.name = "em_layer_norm_" + dname(dt) + regs_suffix(ept, vec);
  const std::string T = storage_type(dt);
  const std::string E = std::to_string(ept);
  const std::string prologue = "  C wr[" + E + "], br[" + E +
                               "];\n"
                               "  EM_ROW_LOAD(wr, w, w != nullptr, (C)1);\n"
                               "  EM_ROW_LOAD(br, b, b != nullptr, -(C)0);\n";
  // The mean is summed relative to the row's first element (exact differences for values
  // of one magnitude), so a large common offset does not swamp the deviations, as the Cpu.
  std::string body = "    C v = (C)0;\n" + each_elem(ept, vec, "v += r[e] - first;") +
                     block_reduce("v + o", "(C)0") +
                     "    const C mean = first + v / (C)n;\n"
                     "    v = (C)0;\n" +
                     each_elem(ept, vec, "const C d = r[e] - mean; v += d * d;") +
                     block_reduce("v + o", "(C)0") +
                     "    const C rstd = (C)(1.0 / sqrt((double)(v / (C)n) + eps));\n" +
                     each_elem(ept, vec, "r[e] = (r[e] - mean) * rstd * wr[e] + br[e];");
  k.body = regs_row_kernel(
      k.name, dt, ept, vec,
      "const " + T + "* __restrict__ w, const " + T + "* __restrict__ b, double eps", "(C)0",
      prologue, body);
  return k;
}

// Layer norm of contiguous rows: one block per row, three passes over the row (the sum
// for the mean, the sum of squared deviations for the variance, the write), reduced in
// the compute type; the row is re-read from L2, so any row length works. weight and bias
// may be null.
KernelSource gen_layer_norm(DType dt) {
  KernelSource k;
  k.name = "em_layer_norm_" + dname(dt);
  const std::string T = storage_type(dt);
  const std::string xj = load(dt, "xr[j]");
  std::string s = "extern \"C\" __global__ void " + k.name + "(const " + T +
                  "* __restrict__ x, const " + T + "* __restrict__ w, const " + T +
                  "* __restrict__ b, " + T + "* __restrict__ y, i64 rows, i64 n, double eps) {\n" +
                  typedefs(dt) +
                  "  __shared__ C sv[32];\n"
                  "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
                  "  const int nwarps = (blockDim.x + 31) >> 5;\n"
                  "  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {\n"
                  "    const " +
                  T +
                  "* xr = x + row * n;\n"
                  "    " +
                  T +
                  "* yr = y + row * n;\n"
                  "    const C sh = " +
                  load(dt, "xr[0]") +
                  ";  // a shift, as in gen_layer_norm_regs\n"
                  "    C v = (C)0;\n"
                  "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) v += " +
                  xj + " - sh;\n" + block_reduce("v + o", "(C)0") +
                  "    const C mean = sh + v / (C)n;\n"
                  "    v = (C)0;\n"
                  "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) { const C d = " +
                  xj + " - mean; v += d * d; }\n" + block_reduce("v + o", "(C)0") +
                  "    const C rstd = (C)(1.0 / sqrt((double)(v / (C)n) + eps));\n"
                  "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) {\n"
                  "      C r = (" +
                  xj +
                  " - mean) * rstd;\n"
                  "      if (w) r = r * " +
                  load(dt, "w[j]") +
                  ";\n"
                  "      if (b) r = r + " +
                  load(dt, "b[j]") +
                  ";\n"
                  "      yr[j] = " +
                  store(dt, "r") +
                  ";\n"
                  "    }\n"
                  "  }\n}\n";
  k.body = std::move(s);
  return k;
}

KernelSource gen_fill(std::size_t elem) {
  KernelSource k;
  k.name = "em_fill_s" + std::to_string(elem);
  const std::string t = sized_type(elem);
  k.body = "extern \"C\" __global__ void " + k.name + "(" + t +
           "* __restrict__ y, i64 n, u64 bits) {\n"
           "  for (i64 i = EM_GID; i < n; i += EM_GSTRIDE) y[i] = (" +
           t + ")bits;\n}\n";
  return k;
}

KernelSource gen_arange(DType dt) {
  KernelSource k;
  k.name = "em_arange_" + dname(dt);
  k.body = "extern \"C\" __global__ void " + k.name + "(" + storage_type(dt) +
           "* __restrict__ y, i64 n, double start, double step) {\n"
           "  for (i64 i = EM_GID; i < n; i += EM_GSTRIDE) {\n"
           "    const double v = start + (double)i * step;\n"
           "    y[i] = " +
           from_f64(dt, "v") + ";\n  }\n}\n";
  return k;
}

KernelSource gen_random(DType dt) {
  KernelSource k;
  k.name = "em_random_" + dname(dt);
  std::string s =
      "extern \"C\" __global__ void " + k.name + "(" + storage_type(dt) +
      "* __restrict__ y, i64 n, u64 key, u64 base, int kind, double a, double b) {\n"
      "  for (i64 i = EM_GID; i < n; i += EM_GSTRIDE) {\n"
      "    const u64 r = em_mix(key, base + (u64)i);\n"
      "    double v;\n"
      "    if (kind == 2) {  // normal: Box-Muller from two uniforms of one counter\n"
      "      const double u1 = 1.0 - em_uniform01(r);\n"
      "      const double u2 = em_uniform01(em_mix(key ^ 0x6a09e667f3bcc909ULL, base + (u64)i));\n"
      "      v = a + b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);\n"
      "    } else if (kind == 3) {\n"
      "      v = em_uniform01(r) < a ? 1.0 : 0.0;\n"
      "    } else if (kind == 1) {\n"
      "      v = a + (b - a) * em_uniform01(r);\n"
      "    } else {\n"
      "      v = em_uniform01(r);\n"
      "    }\n";
  if (kind(dt) == K::Float) {
    // Rounding may carry a value up to the excluded upper bound; keep [a, b) as the Cpu.
    s += std::string("    typedef ") + compute_type(dt) +
         " T;\n"
         "    T t = (T)v;\n"
         "    if (kind != 2 && kind != 3) {\n"
         "      const T hi = (T)(kind == 1 ? b : 1.0), lo = (T)(kind == 1 ? a : 0.0);\n"
         "      if (t >= hi && hi > lo) t = m_nextafter(hi, -(T)EM_INF);\n"
         "    }\n"
         "    y[i] = " +
         store(dt, "t") + ";\n";
  } else {
    s += "    y[i] = " + from_f64(dt, "floor(v)") + ";\n";
  }
  s += "  }\n}\n";
  k.body = std::move(s);
  return k;
}

KernelSource gen_gather(std::size_t elem) {
  KernelSource k;
  k.name = "em_gather_s" + std::to_string(elem);
  const std::string t = sized_type(elem);
  k.body = "extern \"C\" __global__ void " + k.name + "(EmGeo g, " + t +
           "* __restrict__ y, const " + t +
           "* __restrict__ x, const i64* __restrict__ idx, int dim, i64 extent, int* err) {\n"
           "  for (i64 i = EM_GID; i < g.n; i += EM_GSTRIDE) {\n"
           "    i64 r = i, off = 0;\n"
           "    for (int d = g.rank - 1; d >= 0; --d) {\n"
           "      i64 c = r % g.shape[d];\n"
           "      r /= g.shape[d];\n"
           "      if (d == dim) {\n"
           "        c = idx[i];\n"
           "        if (c < 0 || c >= extent) { em_flag(err, 1, c); c = 0; }\n"
           "      }\n"
           "      off += c * g.st[0][d];\n"
           "    }\n"
           "    y[i] = x[off];\n  }\n}\n";
  return k;
}

bool scatter_add_supported(DType) { return true; }

// Add as the Cpu's add_values: bool is or, integers wrap, floats add in C.
std::string add_values(DType dt, const std::string& a, const std::string& b) {
  if (dt == DType::Bool) return "(" + a + " || " + b + ")";
  if (kind(dt) == K::Int) return "(C)((U)" + a + " + (U)" + b + ")";
  return a + " + " + b;
}

KernelSource gen_scatter(DType dt, bool add) {
  // One thread per line along dim: the line's writes happen in index order, as the Cpu's
  // sequential loop, and distinct lines never write the same element — no atomics, and
  // duplicate indices resolve deterministically (the last write wins).
  KernelSource k;
  k.name = std::string(add ? "em_scatter_add_" : "em_scatter_") + dname(dt);
  const std::string t = storage_type(dt);
  std::string write =
      add ? "y[yo] = " + store(dt, add_values(dt, load(dt, "y[yo]"), load(dt, "src[so]"))) + ";"
          : "y[yo] = src[so];";
  k.body = "extern \"C\" __global__ void " + k.name + "(EmGeo g, " + t +
           "* __restrict__ y, const i64* __restrict__ idx, const " + t +
           "* __restrict__ src, int dim, i64 extent, int* err) {\n" + typedefs(dt) +
           "  const i64 len = g.shape[dim];\n"
           "  const i64 lines = len == 0 ? 0 : g.n / len;\n"
           "  for (i64 l = EM_GID; l < lines; l += EM_GSTRIDE) {\n"
           "    i64 r = l, yb = 0, ib = 0, sb = 0;\n"
           "    for (int d = g.rank - 1; d >= 0; --d) {\n"
           "      if (d == dim) continue;\n"
           "      const i64 c = r % g.shape[d];\n"
           "      r /= g.shape[d];\n"
           "      yb += c * g.st[0][d]; ib += c * g.st[1][d]; sb += c * g.st[2][d];\n"
           "    }\n"
           "    for (i64 j = 0; j < len; ++j) {\n"
           "      const i64 v = idx[ib + j * g.st[1][dim]];\n"
           "      if (v < 0 || v >= extent) { em_flag(err, 1, v); continue; }\n"
           "      const i64 yo = yb + v * g.st[0][dim], so = sb + j * g.st[2][dim];\n"
           "      " +
           write +
           "\n"
           "    }\n  }\n}\n";
  return k;
}

KernelSource gen_index_select(std::size_t elem) {
  KernelSource k;
  k.name = "em_index_select_s" + std::to_string(elem);
  const std::string t = sized_type(elem);
  k.body = "extern \"C\" __global__ void " + k.name + "(" + t + "* __restrict__ y, const " + t +
           "* __restrict__ x, const i64* __restrict__ idx, i64 outer, i64 n, i64 k, i64 inner, "
           "int* err) {\n"
           "  const i64 total = outer * k * inner;\n"
           "  for (i64 t = EM_GID; t < total; t += EM_GSTRIDE) {\n"
           "    const i64 o = t / (k * inner), rem = t % (k * inner), j = rem / inner, i = rem % "
           "inner;\n"
           "    i64 v = idx[j];\n"
           "    if (v < 0 || v >= n) { em_flag(err, 1, v); v = 0; }\n"
           "    y[t] = x[(o * n + v) * inner + i];\n  }\n}\n";
  return k;
}

KernelSource gen_index_add(DType dt, bool rows) {
  KernelSource k;
  const std::string t = storage_type(dt);
  if (rows) {
    // One thread per output element (o, r, i), adding in index order the src entries whose
    // index is r: the same additions in the same order as the column kernel below, with
    // no thread writing another's element. Threads of row 0 flag out-of-range indices.
    k.name = "em_index_add_rows_" + dname(dt);
    k.body = "extern \"C\" __global__ void " + k.name + "(" + t +
             "* __restrict__ y, const i64* __restrict__ idx, const " + t +
             "* __restrict__ src, i64 outer, i64 n, i64 k, i64 inner, int* err) {\n" +
             typedefs(dt) +
             "  for (i64 c = EM_GID; c < outer * n * inner; c += EM_GSTRIDE) {\n"
             "    const i64 o = c / (n * inner), r = c / inner % n, i = c % inner;\n"
             "    " +
             t +
             " acc = y[c];\n"
             "    for (i64 j = 0; j < k; ++j) {\n"
             "      const i64 v = idx[j];\n"
             "      if (v == r) {\n"
             "        acc = " +
             store(dt, add_values(dt, load(dt, "acc"), load(dt, "src[(o * k + j) * inner + i]"))) +
             ";\n"
             "      } else if (r == 0 && (v < 0 || v >= n)) {\n"
             "        em_flag(err, 1, v);\n"
             "      }\n"
             "    }\n"
             "    y[c] = acc;\n"
             "  }\n}\n";
    return k;
  }
  // One thread per (outer, inner) column, adding src rows in index order: deterministic and
  // the Cpu's order, with no two threads writing one element.
  k.name = "em_index_add_" + dname(dt);
  k.body = "extern \"C\" __global__ void " + k.name + "(" + t +
           "* __restrict__ y, const i64* __restrict__ idx, const " + t +
           "* __restrict__ src, i64 outer, i64 n, i64 k, i64 inner, int* err) {\n" + typedefs(dt) +
           "  for (i64 c = EM_GID; c < outer * inner; c += EM_GSTRIDE) {\n"
           "    const i64 o = c / inner, i = c % inner;\n"
           "    for (i64 j = 0; j < k; ++j) {\n"
           "      const i64 v = idx[j];\n"
           "      if (v < 0 || v >= n) { em_flag(err, 1, v); continue; }\n"
           "      const i64 yo = (o * n + v) * inner + i, so = (o * k + j) * inner + i;\n"
           "      y[yo] = " +
           store(dt, add_values(dt, load(dt, "y[yo]"), load(dt, "src[so]"))) +
           ";\n"
           "    }\n  }\n}\n";
  return k;
}

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

// Index arithmetic of the sliding-window kernels (IX): 32-bit when every index fits (integer
// division, several per element, is a long instruction sequence at 64 bits), else 64-bit.
// The window's geometry in the index type IX (kd kernel, od positions, in image extents,
// st stride, pd padding, dl dilation, each per dim), read once from EmWin w.
std::string window_geometry(bool wide) {
  return std::string(wide ? "  typedef i64 IX;\n" : "  typedef int IX;\n") +
         "  IX kd[3], od[3], in[3], st[3], pd[3], dl[3];\n"
         "  for (int d = 0; d < 3; ++d) {\n"
         "    kd[d] = (IX)w.k[d]; od[d] = (IX)w.out[d]; in[d] = (IX)w.in[d];\n"
         "    st[d] = (IX)w.s[d]; pd[d] = (IX)w.p[d]; dl[d] = (IX)w.d[d];\n"
         "  }\n";
}

KernelSource gen_unfold(std::size_t elem, bool wide) {
  // One thread per column entry: decode (plane, kernel offset, position), read the image
  // element under it or the padding value.
  KernelSource k;
  k.name = "em_unfold_s" + std::to_string(elem) + (wide ? "_w" : "");
  const std::string t = sized_type(elem);
  k.body = "extern \"C\" __global__ void " + k.name + "(EmWin w, " + t +
           "* __restrict__ y, const " + t + "* __restrict__ x, u64 pad_bits) {\n" +
           window_geometry(wide) + "  const " + t + " pad = (" + t +
           ")pad_bits;\n"
           "  const IX L = (IX)w.L, K = (IX)w.K;\n"
           "  for (i64 i = EM_GID; i < w.planes * w.K * w.L; i += EM_GSTRIDE) {\n"
           "    const IX ii = (IX)i, l = ii % L, r = ii / L, kk = r % K, p = r / K;\n"
           "    IX c[3], o[3], q = kk, m = l;\n"
           "    for (int d = 2; d >= 0; --d) { c[d] = q % kd[d]; q /= kd[d];\n"
           "                                   o[d] = m % od[d]; m /= od[d]; }\n"
           "    IX off = 0; bool inside = true;\n"
           "    for (int d = 0; d < 3; ++d) {\n"
           "      const IX v = o[d] * st[d] - pd[d] + c[d] * dl[d];\n"
           "      inside = inside && v >= 0 && v < in[d];\n"
           "      off = off * in[d] + (v >= 0 && v < in[d] ? v : 0);  // at most the image size\n"
           "    }\n"
           "    y[i] = inside ? x[(i64)p * w.image + off] : pad;\n"
           "  }\n}\n";
  return k;
}

KernelSource gen_fold(DType dt, bool wide) {
  // One thread per image element, gathering every column entry that reads it in a fixed
  // order (kernel offsets row-major): deterministic, no atomics. Along a dim, kernel
  // offset c reads the element at position o = (v + p - c d) / s when that divides.
  EMBER_CHECK(is_float(dt), std::string("fold: no Cuda kernel for dtype ") + name(dt));
  KernelSource k;
  k.name = "em_fold_" + dname(dt) + (wide ? "_w" : "");
  const std::string t = storage_type(dt);
  k.body = "extern \"C\" __global__ void " + k.name + "(EmWin w, " + t +
           "* __restrict__ y, const " + t + "* __restrict__ x) {\n" + typedefs(dt) +
           window_geometry(wide) + "  const IX image = (IX)w.image;\n" +
           "  for (i64 i = EM_GID; i < w.planes * w.image; i += EM_GSTRIDE) {\n"
           "    const IX ii = (IX)i, p = ii / image;\n"
           "    IX v[3], m = ii % image;\n"
           "    for (int d = 2; d >= 0; --d) { v[d] = m % in[d]; m /= in[d]; }\n"
           "    C acc = (C)0;\n"
           "    const " +
           t +
           "* col = x + (i64)p * w.K * w.L;\n"
           "    for (IX c0 = 0; c0 < kd[0]; ++c0) {\n"
           "      const IX n0 = v[0] + pd[0] - c0 * dl[0];\n"
           "      if (n0 < 0) break;\n"
           "      if (n0 % st[0] != 0 || n0 / st[0] >= od[0]) continue;\n"
           "      for (IX c1 = 0; c1 < kd[1]; ++c1) {\n"
           "        const IX n1 = v[1] + pd[1] - c1 * dl[1];\n"
           "        if (n1 < 0) break;\n"
           "        if (n1 % st[1] != 0 || n1 / st[1] >= od[1]) continue;\n"
           "        for (IX c2 = 0; c2 < kd[2]; ++c2) {\n"
           "          const IX n2 = v[2] + pd[2] - c2 * dl[2];\n"
           "          if (n2 < 0) break;\n"
           "          if (n2 % st[2] != 0 || n2 / st[2] >= od[2]) continue;\n"
           "          const IX kk = (c0 * kd[1] + c1) * kd[2] + c2;\n"
           "          const IX l = ((n0 / st[0]) * od[1] + n1 / st[1]) * od[2] + n2 / st[2];\n"
           "          acc += " +
           load(dt, "col[(i64)kk * w.L + l]") +
           ";\n"
           "        }\n      }\n    }\n"
           "    y[i] = " +
           store(dt, "acc") +
           ";\n"
           "  }\n}\n";
  return k;
}

KernelSource gen_pool(DType dt, bool max, bool wide) {
  // One thread per output element: decode (plane, position), then visit the window's
  // entries that lie in the image in row-major kernel order (the Cpu's order), combined as
  // the reductions combine (reduce_init, combine: NaN propagates, integers wrap).
  EMBER_CHECK(dt != DType::Bool, "pool: bool tensors have no pooling");
  KernelSource k;
  k.name = std::string("em_pool_") + (max ? "max_" : "sum_") + dname(dt) + (wide ? "_w" : "");
  const std::string t = storage_type(dt);
  const ReduceFn fn = max ? ReduceFn::Max : ReduceFn::Sum;
  k.body = "extern \"C\" __global__ void " + k.name + "(EmWin w, " + t +
           "* __restrict__ y, const " + t + "* __restrict__ x) {\n" + typedefs(dt) +
           window_geometry(wide) +
           "  const IX L = (IX)w.L;\n"
           "  for (i64 i = EM_GID; i < w.planes * w.L; i += EM_GSTRIDE) {\n"
           "    const IX ii = (IX)i, p = ii / L;\n"
           "    IX o[3], m = ii % L;\n"
           "    for (int d = 2; d >= 0; --d) { o[d] = m % od[d]; m /= od[d]; }\n"
           "    const " +
           t +
           "* src = x + (i64)p * w.image;\n"
           "    C acc = " +
           reduce_init(fn, dt) +
           ";\n"
           "    for (IX c0 = 0; c0 < kd[0]; ++c0) {\n"
           "      const IX v0 = o[0] * st[0] - pd[0] + c0 * dl[0];\n"
           "      if (v0 < 0 || v0 >= in[0]) continue;\n"
           "      for (IX c1 = 0; c1 < kd[1]; ++c1) {\n"
           "        const IX v1 = o[1] * st[1] - pd[1] + c1 * dl[1];\n"
           "        if (v1 < 0 || v1 >= in[1]) continue;\n"
           "        const " +
           t +
           "* xr = src + ((i64)v0 * in[1] + v1) * in[2];\n"
           "        for (IX c2 = 0; c2 < kd[2]; ++c2) {\n"
           "          const IX v2 = o[2] * st[2] - pd[2] + c2 * dl[2];\n"
           "          if (v2 < 0 || v2 >= in[2]) continue;\n"
           "          const C v = " +
           load(dt, "xr[v2]") +
           ";\n"
           "          acc = " +
           combine(fn, dt, "acc", "v") +
           ";\n"
           "        }\n      }\n    }\n"
           "    y[i] = " +
           store(dt, "acc") +
           ";\n"
           "  }\n}\n";
  return k;
}

namespace {
DType of_size(std::size_t e) {
  return e == 1 ? DType::U8 : e == 2 ? DType::F16 : e == 4 ? DType::F32 : DType::F64;
}
}  // namespace

std::vector<KernelSource> variants(Family family) {
  std::vector<KernelSource> out;
  const auto each_size = [&](auto gen) {
    for (std::size_t e : {1, 2, 4, 8}) out.push_back(gen(e));
  };
  switch (family) {
    case Family::Unary:
      for (bool c : {true, false}) {
        for (std::size_t f = 0; f < static_cast<std::size_t>(UnaryFn::Count_); ++f) {
          for (DType dt : kAllDTypes) {
            if (unary_supported(static_cast<UnaryFn>(f), dt))
              out.push_back(gen_unary(static_cast<UnaryFn>(f), dt, c));
          }
        }
      }
      break;
    case Family::Binary:
      for (bool c : {true, false}) {
        for (std::size_t f = 0; f < static_cast<std::size_t>(BinaryFn::Count_); ++f) {
          for (DType dt : kAllDTypes) {
            if (!binary_supported(static_cast<BinaryFn>(f), dt)) continue;
            for (unsigned m : {0u, 1u, 2u}) {
              if (c || m == 0) out.push_back(gen_binary(static_cast<BinaryFn>(f), dt, c, m));
            }
          }
        }
      }
      break;
    case Family::Where:
      for (bool c : {true, false}) {
        for (std::size_t e : {1, 2, 4, 8}) {
          for (unsigned m = 0; m < 7; ++m) {
            if (c || m == 0) out.push_back(gen_where(of_size(e), c, m));
          }
        }
      }
      break;
    case Family::Cast:
      for (bool c : {true, false}) {
        for (DType a : kAllDTypes) {
          for (DType b : kAllDTypes) out.push_back(gen_cast(a, b, c));
        }
      }
      break;
    case Family::Copy:
      for (bool c : {true, false}) each_size([&](std::size_t e) { return gen_copy(e, c); });
      break;
    case Family::Reduce:
      for (DType dt : kAllDTypes) {
        for (std::size_t f = 0; f < static_cast<std::size_t>(ReduceFn::Count_); ++f) {
          const auto fn = static_cast<ReduceFn>(f);
          if (!reduce_supported(fn, dt)) continue;
          out.push_back(gen_reduce(fn, dt, true));
          out.push_back(gen_reduce(fn, dt, false));
        }
      }
      break;
    case Family::Softmax:
    case Family::LayerNorm:
      for (DType dt : kAllDTypes) {
        if (!is_float(dt)) continue;
        const bool softmax = family == Family::Softmax;
        if (softmax) {
          out.push_back(gen_softmax(dt, false));
          out.push_back(gen_softmax(dt, true));
        } else {
          out.push_back(gen_layer_norm(dt));
        }
        for (int ept = 1; ept <= rows_max_ept(dt); ept *= 2) {
          for (int vec = 1; vec <= std::min(ept, vector_width(size_of(dt))); vec *= 2) {
            if (softmax) {
              out.push_back(gen_softmax_regs(dt, false, ept, vec));
              out.push_back(gen_softmax_regs(dt, true, ept, vec));
            } else {
              out.push_back(gen_layer_norm_regs(dt, ept, vec));
            }
          }
        }
      }
      break;
    case Family::Fill:
      each_size([](std::size_t e) { return gen_fill(e); });
      break;
    case Family::Scan:
      for (DType dt : kAllDTypes) {
        if (dt == DType::Bool) continue;
        for (std::size_t f = 0; f < static_cast<std::size_t>(ScanFn::Count_); ++f) {
          out.push_back(gen_scan(static_cast<ScanFn>(f), dt));
        }
      }
      break;
    case Family::Arange:
      for (DType dt : kAllDTypes) out.push_back(gen_arange(dt));
      break;
    case Family::Random:
      for (DType dt : kAllDTypes) out.push_back(gen_random(dt));
      break;
    case Family::Gather:
      each_size([](std::size_t e) { return gen_gather(e); });
      break;
    case Family::Scatter:
      for (DType dt : kAllDTypes) {
        out.push_back(gen_scatter(dt, false));
        out.push_back(gen_scatter(dt, true));
      }
      break;
    case Family::IndexSelect:
      each_size([](std::size_t e) { return gen_index_select(e); });
      break;
    case Family::IndexAdd:
      for (DType dt : kAllDTypes) {
        out.push_back(gen_index_add(dt));
        out.push_back(gen_index_add(dt, true));
      }
      break;
    case Family::SortRows:
      for (DType dt : kAllDTypes) out.push_back(gen_sort_rows(dt));
      break;
    case Family::SortInit:
      out.push_back(gen_sort_init());
      break;
    case Family::SortStage:
      for (DType dt : kAllDTypes) out.push_back(gen_sort_stage(dt));
      break;
    case Family::SortWrite:
      each_size([](std::size_t e) { return gen_sort_write(e); });
      break;
    case Family::NonzeroCount:
      for (DType dt : kAllDTypes) out.push_back(gen_nonzero_count(dt));
      break;
    case Family::NonzeroWrite:
      for (DType dt : kAllDTypes) out.push_back(gen_nonzero_write(dt));
      break;
    case Family::ScanTiles:
      out.push_back(gen_scan_tiles());
      break;
    case Family::AddTileOffsets:
      out.push_back(gen_add_tile_offsets());
      break;
    case Family::Unfold:
      for (bool wide : {false, true}) {
        each_size([&](std::size_t e) { return gen_unfold(e, wide); });
      }
      break;
    case Family::Fold:
      for (DType dt : kAllDTypes) {
        if (!is_float(dt)) continue;
        out.push_back(gen_fold(dt, false));
        out.push_back(gen_fold(dt, true));
      }
      break;
    case Family::Pool:
      for (DType dt : kAllDTypes) {
        if (dt == DType::Bool) continue;
        for (bool max : {false, true}) {
          out.push_back(gen_pool(dt, max, false));
          out.push_back(gen_pool(dt, max, true));
        }
      }
      break;
    case Family::Count_:
      break;
  }
  return out;
}

std::vector<KernelSource> all_kernels() {
  std::vector<KernelSource> out;
  for (std::size_t f = 0; f < static_cast<std::size_t>(Family::Count_); ++f) {
    for (auto& k : variants(static_cast<Family>(f))) out.push_back(std::move(k));
  }
  return out;
}

}  // namespace ember::cuda
