// The row kernels of softmax and layer norm: rows held in registers (Note [Rows in
// registers]) and the row-walking kernels for longer rows.
#include "cuda/codegen.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "cuda/codegen/printer.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {

using namespace codegen;  // NOLINT: the generators are written in the printer's vocabulary
using ir::ReduceFn;

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
// With `src` (Note [Fused rows in registers] in codegen/fused.cpp) the rows are computed,
// not loaded: the kernel's parameters are src->params, src->setup declares rows, n, y,
// em_row(R) (called before row R's elements: the row's input offsets) and em_pro(R, j, st),
// element j of row R (st: also store the group's other outputs there), and the chunks are
// filled in the loads' order; with src->epilogue each stored element also goes through
// em_epi(R, j, y) (Note [Fused row epilogues]), and without src->store_y the row result
// itself is not stored.
std::string regs_row_kernel(const std::string& name, DType dt, int ept, int vec,
                            const std::string& params, const std::string& pad,
                            const std::string& prologue, const std::string& body,
                            const RowSource* src = nullptr) {
  const std::string E = std::to_string(ept);
  const std::string V = std::to_string(vec);
  const std::string T = storage_type(dt);
  const std::string VT = "em_vec<" + T + ", " + V + ">";
  const std::string chunk_j =
      "      const i64 j = ((i64)threadIdx.x + (i64)c * blockDim.x) * " + V + ";\n";
  const std::string row_bytes = "(n * (i64)sizeof(" + T + "))";
  const std::string pf_row = "row + 2 * (i64)gridDim.x";
  const std::string l2_prefetch =
      vec == 1 || src
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
  const std::string head = src ? src->params + ") {\n" + src->setup
                               : "const " + T + "* __restrict__ x, " +
                                     (params.empty() ? "" : params + ", ") + T +
                                     "* __restrict__ y, i64 rows, i64 n) {\n";
  // The row's store (where the row result is an output) and its epilogue (Note [Row
  // epilogues]: em_epi(R, j, y) computes and stores the epilogue of element j of row R from
  // its stored value y; em_row(R) first sets the epilogue inputs' offsets to this row, the
  // prefetch of the next row having moved them).
  const bool sy = !src || src->store_y;
  const bool ep = src && src->epilogue;
  const std::string store_y_row = sy ? "    " + T + "* yr = y + row * n;\n" : "";
  const std::string store_y = sy ? "        *(" + VT + "*)(yr + j) = t;\n" : "";
  const std::string epi_row = ep ? "    em_row(row);\n" : "";
  const std::string epi = ep ? "#pragma unroll\n"
                               "        for (int u = 0; u < " +
                                   V + "; ++u) em_epi(row, j + u, t.v[u]);\n"
                             : "";
  // EM_ROW_SRC(dst, R, ok): row R's chunks into dst (pad where !ok or past n); EM_ROW_FIRST(R):
  // its first element.
  const std::string source =
      src ? "#define EM_ROW_SRC(dst, R, ok) \\\n"
            "  em_row(R); \\\n"
            "  _Pragma(\"unroll\") for (int c = 0; c < " +
                E + " / " + V +
                "; ++c) { \\\n"
                "    _Pragma(\"unroll\") for (int u = 0; u < " +
                V +
                "; ++u) { \\\n"
                "      const i64 j = ((i64)threadIdx.x + (i64)c * blockDim.x) * " +
                V +
                " + u; \\\n"
                "      dst[c * " +
                V + " + u] = ((ok) && j < n) ? " + load(dt, "em_pro((R), j, true)") + " : (" + pad +
                "); \\\n"
                "    } \\\n"
                "  }\n"
                "#define EM_ROW_FIRST(R) " +
                load(dt, "(em_row(R), em_pro((R), 0, false))") + "\n"
          : "#define EM_ROW_SRC(dst, R, ok) EM_ROW_LOAD(dst, x + (R) * n, ok, " + pad +
                ")\n"
                "#define EM_ROW_FIRST(R) " +
                load(dt, "x[(R) * n]") + "\n";
  std::string s =
      "extern \"C\" __global__ void __launch_bounds__(512, 2) " + name + "(" + head + typedefs(dt) +
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
      source + prologue + "  C nx[" + E +
      "];\n  i64 row = blockIdx.x;\n"
      "  EM_ROW_SRC(nx, row, row < rows);\n"
      "  C nfirst = row < rows ? EM_ROW_FIRST(row) : (C)0;\n"
      "  for (; row < rows; row += gridDim.x) {\n" +
      l2_prefetch + "    C r[" + E +
      "];\n"
      "#pragma unroll\n"
      "    for (int e = 0; e < " +
      E +
      "; ++e) r[e] = nx[e];\n"
      "    const C first = nfirst;\n    (void)first;\n"
      "    const i64 next = row + gridDim.x;\n"
      "    EM_ROW_SRC(nx, next, next < rows);\n"
      "    nfirst = next < rows ? EM_ROW_FIRST(next) : (C)0;\n" +
      body + store_y_row + epi_row +
      "#pragma unroll\n"
      "    for (int c = 0; c < " +
      E + " / " + V + "; ++c) {\n" + chunk_j +
      "      if (j < n) {\n"
      "        " +
      VT +
      " t;\n"
      "#pragma unroll\n"
      "        for (int u = 0; u < " +
      V + "; ++u) t.v[u] = " + store(dt, "r[c * " + V + " + u]") + ";\n" + store_y + epi +
      "      }\n"
      "    }\n"
      "  }\n"
      "#undef EM_ROW_LOAD\n#undef EM_ROW_SRC\n#undef EM_ROW_FIRST\n"
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
  if (n > rows_max_in_registers(dt)) return {0, 0, 1};
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
  std::string s = "_r";
  s += std::to_string(ept);
  if (vec > 1) {
    s += 'v';
    s += std::to_string(vec);
  }
  return s;
}

// Softmax of rows held in registers (Note [Rows in registers]), loaded from x or computed
// (src).
KernelSource softmax_regs(DType dt, bool log, int ept, int vec, const RowSource* src) {
  KernelSource k;
  k.name = src ? src->name
               : std::string("em_") + (log ? "log_softmax_" : "softmax_") + dname(dt) +
                     regs_suffix(ept, vec);
  const std::string max_op = combine(ReduceFn::Max, dt, "v", "o");
  std::string body =
      "    C v = -inf;\n" + each_elem(ept, vec, "const C o = r[e]; v = " + max_op + ";") +
      block_reduce(max_op, reduce_init(ReduceFn::Max, dt)) + "    const C m = v;\n    v = (C)0;\n";
  body +=
      each_elem(ept, vec, log ? "v += m_exp(r[e] - m);" : "r[e] = m_exp(r[e] - m); v += r[e];") +
      block_reduce("v + o", "(C)0");
  body += log ? "    const C l = m + m_log(v);\n" : "    const C inv = (C)1 / v;\n";
  body += each_elem(ept, vec, log ? "r[e] = r[e] - l;" : "r[e] = r[e] * inv;");
  k.body = regs_row_kernel(k.name, dt, ept, vec, "", "-inf", "", body, src);
  return k;
}

KernelSource gen_softmax_regs(DType dt, bool log, int ept, int vec) {
  return softmax_regs(dt, log, ept, vec, nullptr);
}
KernelSource gen_softmax_regs_from(const RowSource& src, DType dt, bool log, int ept, int vec) {
  return softmax_regs(dt, log, ept, vec, &src);
}

// Layer norm of rows held in registers (Note [Rows in registers]): the mean, then the sum
// of squared deviations from it (two reductions over registers, no cancellation), then the
// write. Weight and bias (n elements each, may be null: 1 and -0, which keep every value,
// -0 included) are loaded once per block and kept in registers for every row it normalises.
// With src, its setup declares w, b (null when absent) and eps.
KernelSource layer_norm_regs(DType dt, int ept, int vec, const RowSource* src) {
  KernelSource k;
  k.name = src ? src->name : "em_layer_norm_" + dname(dt) + regs_suffix(ept, vec);
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
      prologue, body, src);
  return k;
}

KernelSource gen_layer_norm_regs(DType dt, int ept, int vec) {
  return layer_norm_regs(dt, ept, vec, nullptr);
}
KernelSource gen_layer_norm_regs_from(const RowSource& src, DType dt, int ept, int vec) {
  return layer_norm_regs(dt, ept, vec, &src);
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
                  "* __restrict__ b, double eps, " + T + "* __restrict__ y, i64 rows, i64 n) {\n" +
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

// RMS norm of rows held in registers (Note [Rows in registers]): the sum of squares, then
// the write; the weight (null: ones) kept in registers as layer norm's.
KernelSource gen_rms_norm_regs(DType dt, int ept, int vec) {
  KernelSource k;
  k.name = "em_rms_norm_" + dname(dt) + regs_suffix(ept, vec);
  const std::string T = storage_type(dt);
  const std::string prologue = "  C wr[" + std::to_string(ept) +
                               "];\n"
                               "  EM_ROW_LOAD(wr, w, w != nullptr, (C)1);\n";
  const std::string body = "    C v = (C)0;\n" + each_elem(ept, vec, "v += r[e] * r[e];") +
                           block_reduce("v + o", "(C)0") +
                           "    const C rstd = (C)(1.0 / sqrt((double)(v / (C)n) + eps));\n" +
                           each_elem(ept, vec, "r[e] = r[e] * rstd * wr[e];");
  k.body = regs_row_kernel(k.name, dt, ept, vec, "const " + T + "* __restrict__ w, double eps",
                           "(C)0", prologue, body);
  return k;
}

// RMS norm's row-walking kernels (codegen.hpp lists the stages): a block per row for the
// forward and dx, each row re-read from L2 (any length); dweight as column sums over row
// chunks, then the chunks' partials added in order (no atomics: the same bits every run),
// each with a grid stride (the launch caps the grid; n may pass the threads of a wave).
KernelSource gen_rms_norm(DType dt, int stage) {
  KernelSource k;
  const std::string T = storage_type(dt);
  const std::string suffix[] = {"", "_grad", "_dweight_part", "_dweight"};
  k.name = "em_rms_norm" + suffix[stage] + "_" + dname(dt);
  const std::string head = "extern \"C\" __global__ void " + k.name + "(";
  const std::string rows_frame = typedefs(dt) +
                                 "  __shared__ C sv[32];\n"
                                 "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
                                 "  const int nwarps = (blockDim.x + 31) >> 5;\n"
                                 "  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {\n"
                                 "    const " +
                                 T + "* xr = x + row * n;\n";
  const std::string xj = load(dt, "xr[j]");
  const std::string wj = "(w ? " + load(dt, "w[j]") + " : (C)1)";
  std::string s;
  if (stage == 0) {
    s = head + "const " + T + "* __restrict__ x, const " + T + "* __restrict__ w, double eps, " +
        T + "* __restrict__ y, i64 rows, i64 n) {\n" + rows_frame +
        "    C v = (C)0;\n"
        "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) { const C o = " +
        xj + "; v += o * o; }\n" + block_reduce("v + o", "(C)0") +
        "    const C rstd = (C)(1.0 / sqrt((double)(v / (C)n) + eps));\n"
        "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) y[row * n + j] = " +
        store(dt, xj + " * rstd * " + wj) + ";\n  }\n}\n";
  } else if (stage == 1) {
    s = head + "const " + T + "* __restrict__ x, const " + T + "* __restrict__ w, const " + T +
        "* __restrict__ g, double eps, " + T +
        "* __restrict__ dx, double* __restrict__ rs, i64 rows, i64 n) {\n" + rows_frame +
        "    const " + T +
        "* gr = g + row * n;\n"
        "    C v = (C)0;\n"
        "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) { const C o = " +
        xj + "; v += o * o; }\n" + block_reduce("v + o", "(C)0") +
        "    const C ss = v;\n"
        "    v = (C)0;\n"
        "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) v += " +
        load(dt, "gr[j]") + " * " + wj + " * " + xj + ";\n" + block_reduce("v + o", "(C)0") +
        "    const double rd = 1.0 / sqrt((double)(ss / (C)n) + eps);\n"
        "    const C rstd = (C)rd, k = (C)(rd * rd * rd * (double)v / (double)n);\n"
        "    if (threadIdx.x == 0) rs[row] = rd;\n"
        "    for (i64 j = threadIdx.x; j < n; j += blockDim.x) dx[row * n + j] = " +
        store(dt, "rstd * " + load(dt, "gr[j]") + " * " + wj + " - k * " + xj) + ";\n  }\n}\n";
  } else if (stage == 2) {
    s = head + "const " + T + "* __restrict__ x, const " + T +
        "* __restrict__ g, const double* __restrict__ rs, double* __restrict__ part, i64 rows, "
        "i64 n, i64 chunk) {\n" +
        typedefs(dt) +
        "  const i64 S = (rows + chunk - 1) / chunk;\n"
        "  for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < S * n;"
        " t += (i64)gridDim.x * blockDim.x) {\n"
        "    const i64 sidx = t / n, j = t % n;\n"
        "    const i64 r1 = min(rows, (sidx + 1) * chunk);\n"
        "    double acc = 0;\n"
        "    for (i64 r = sidx * chunk; r < r1; ++r)\n"
        "      acc += (double)" +
        load(dt, "g[r * n + j]") + " * (double)" + load(dt, "x[r * n + j]") +
        " * rs[r];\n"
        "    part[t] = acc;\n  }\n}\n";
  } else {
    s = head + "const double* __restrict__ part, " + T + "* __restrict__ dw, i64 n, i64 S) {\n" +
        typedefs(dt) +
        "  for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < n;"
        " j += (i64)gridDim.x * blockDim.x) {\n"
        "    double acc = 0;\n"
        "    for (i64 sidx = 0; sidx < S; ++sidx) acc += part[sidx * n + j];\n"
        "    dw[j] = " +
        store(dt, "(C)acc") + ";\n  }\n}\n";
  }
  k.body = std::move(s);
  return k;
}

// ---- variants (Note [Kernel specs] in codegen.hpp) ----

template <>
std::vector<SoftmaxKernel> SoftmaxKernel::variants() {
  std::vector<SoftmaxKernel> out;
  for (DType dt : kAllDTypes) {
    if (!is_float(dt)) continue;
    out.emplace_back(dt, false);
    out.emplace_back(dt, true);
  }
  return out;
}

// f(dt, ept, vec) for every float dtype and every (ept, vec) that rows_in_registers can
// pick: the rows-in-registers kernels' variants.
template <class F>
void each_regs_shape(F&& f) {
  for (DType dt : kAllDTypes) {
    if (!is_float(dt)) continue;
    for (int ept = 1; ept <= rows_max_ept(dt); ept *= 2) {
      for (int vec = 1; vec <= std::min(ept, vector_width(size_of(dt))); vec *= 2) f(dt, ept, vec);
    }
  }
}

template <>
std::vector<SoftmaxRegsKernel> SoftmaxRegsKernel::variants() {
  std::vector<SoftmaxRegsKernel> out;
  each_regs_shape([&](DType dt, int ept, int vec) {
    out.emplace_back(dt, false, ept, vec);
    out.emplace_back(dt, true, ept, vec);
  });
  return out;
}

template <>
std::vector<LayerNormKernel> LayerNormKernel::variants() {
  std::vector<LayerNormKernel> out;
  for (DType dt : kAllDTypes) {
    if (is_float(dt)) out.emplace_back(dt);
  }
  return out;
}

template <>
std::vector<LayerNormRegsKernel> LayerNormRegsKernel::variants() {
  std::vector<LayerNormRegsKernel> out;
  each_regs_shape([&](DType dt, int ept, int vec) { out.emplace_back(dt, ept, vec); });
  return out;
}

template <>
std::vector<RmsNormRegsKernel> RmsNormRegsKernel::variants() {
  std::vector<RmsNormRegsKernel> out;
  each_regs_shape([&](DType dt, int ept, int vec) { out.emplace_back(dt, ept, vec); });
  return out;
}

template <>
std::vector<RmsNormKernel> RmsNormKernel::variants() {
  std::vector<RmsNormKernel> out;
  for (DType dt : kAllDTypes) {
    if (!is_float(dt)) continue;
    for (int stage = 0; stage < 4; ++stage) out.emplace_back(dt, stage);
  }
  return out;
}

}  // namespace ember::cuda
