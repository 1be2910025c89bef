// The creation kernels: fill, arange, random.
#include "cuda/codegen.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "cuda/codegen/printer.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {

using namespace codegen;  // NOLINT: the generators are written in the printer's vocabulary

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

// ---- variants (Note [Kernel specs] in codegen.hpp) ----

template <>
std::vector<FillKernel> FillKernel::variants() {
  std::vector<FillKernel> out;
  for (std::size_t e : {1, 2, 4, 8}) out.emplace_back(e);
  return out;
}

template <>
std::vector<ArangeKernel> ArangeKernel::variants() {
  std::vector<ArangeKernel> out;
  for (DType dt : kAllDTypes) out.emplace_back(dt);
  return out;
}

template <>
std::vector<RandomKernel> RandomKernel::variants() {
  std::vector<RandomKernel> out;
  for (DType dt : kAllDTypes) out.emplace_back(dt);
  return out;
}

}  // namespace ember::cuda
