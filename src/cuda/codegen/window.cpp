// The sliding-window kernels over the canonical 3-d window (backend/window.hpp): unfold,
// fold and pool.
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

// ---- variants (Note [Kernel specs] in codegen.hpp) ----

template <>
std::vector<UnfoldKernel> UnfoldKernel::variants() {
  std::vector<UnfoldKernel> out;
  for (bool wide : {false, true}) {
    for (std::size_t e : {1, 2, 4, 8}) out.emplace_back(e, wide);
  }
  return out;
}

template <>
std::vector<FoldKernel> FoldKernel::variants() {
  std::vector<FoldKernel> out;
  for (DType dt : kAllDTypes) {
    if (!is_float(dt)) continue;
    out.emplace_back(dt, false);
    out.emplace_back(dt, true);
  }
  return out;
}

template <>
std::vector<PoolKernel> PoolKernel::variants() {
  std::vector<PoolKernel> out;
  for (DType dt : kAllDTypes) {
    if (dt == DType::Bool) continue;
    for (bool max : {false, true}) {
      out.emplace_back(dt, max, false);
      out.emplace_back(dt, max, true);
    }
  }
  return out;
}

}  // namespace ember::cuda
