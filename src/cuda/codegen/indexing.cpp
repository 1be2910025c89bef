// The indexing kernels: gather, scatter (and scatter-add), index_select, index_add.
#include "cuda/codegen.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "cuda/codegen/printer.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {

using namespace codegen;  // NOLINT: the generators are written in the printer's vocabulary

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

// ---- variants (Note [Kernel specs] in codegen.hpp) ----

template <>
std::vector<GatherKernel> GatherKernel::variants() {
  std::vector<GatherKernel> out;
  for (std::size_t e : {1, 2, 4, 8}) out.emplace_back(e);
  return out;
}

template <>
std::vector<ScatterKernel> ScatterKernel::variants() {
  std::vector<ScatterKernel> out;
  for (DType dt : kAllDTypes) {
    out.emplace_back(dt, false);
    out.emplace_back(dt, true);
  }
  return out;
}

template <>
std::vector<IndexSelectKernel> IndexSelectKernel::variants() {
  std::vector<IndexSelectKernel> out;
  for (std::size_t e : {1, 2, 4, 8}) out.emplace_back(e);
  return out;
}

template <>
std::vector<IndexAddKernel> IndexAddKernel::variants() {
  std::vector<IndexAddKernel> out;
  for (DType dt : kAllDTypes) {
    out.emplace_back(dt, false);
    out.emplace_back(dt, true);
  }
  return out;
}

}  // namespace ember::cuda
