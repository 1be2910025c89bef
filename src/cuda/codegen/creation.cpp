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

// Note [Bernoulli in its own type]: a Bernoulli draw is its 0 or 1 selected in the element's
// own type, never a double 1.0 : 0.0 converted after. The two doubles share their low word,
// so ptxas 13.0 (sm_90, -O3) selects only the high word, and in a group's unrolled vector
// loop its later passes then took one lane's conversion of that register pair for another's
// (the pair's low register unchanged, its high one redefined between them): in the f16 group
// `where(bernoulli(0.4) > x, bernoulli, x)` lane 3 of every vector got lane 0's draw (seed
// 82000253 of the differential, one element of 50). The PTX was right; ptxas at -O1 kept
// all eight conversions, at -O2 and -O3 seven (found in nvdisasm's listing of the cubin).
std::string codegen::random_code(DType dt, const std::string& kind, const std::string& key,
                                 const std::string& ctr, const std::string& a, const std::string& b,
                                 const std::string& y) {
  std::string s =
      "    {\n"
      "    const u64 r_ = em_mix(" +
      key + ", " + ctr +
      ");\n"
      "    double v_ = 0.0;\n"
      "    bool b_ = false;  // a Bernoulli draw (Note [Bernoulli in its own type])\n"
      "    if (" +
      kind +
      " == 2) {  // normal: Box-Muller from two uniforms of one counter\n"
      "      const double u1 = 1.0 - em_uniform01(r_);\n"
      "      const double u2 = em_uniform01(em_mix(" +
      key + " ^ 0x6a09e667f3bcc909ULL, " + ctr +
      "));\n"
      "      v_ = " +
      a + " + " + b +
      " * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);\n"
      "    } else if (" +
      kind +
      " == 3) {\n"
      "      b_ = em_uniform01(r_) < " +
      a +
      ";\n"
      "    } else if (" +
      kind +
      " == 1) {\n"
      "      v_ = " +
      a + " + (" + b + " - " + a +
      ") * em_uniform01(r_);\n"
      "    } else {\n"
      "      v_ = em_uniform01(r_);\n"
      "    }\n";
  if (codegen::kind(dt) == K::Float) {
    // Rounding may carry a value up to the excluded upper bound; keep [a, b) as the Cpu.
    s += std::string("    typedef ") + compute_type(dt) +
         " T;\n"
         "    T t = (T)v_;\n"
         "    if (" +
         kind +
         " == 3) {\n"
         "      t = b_ ? (T)1 : (T)0;\n"
         "    } else if (" +
         kind +
         " != 2) {\n"
         "      const T hi = (T)(" +
         kind + " == 1 ? " + b + " : 1.0), lo = (T)(" + kind + " == 1 ? " + a +
         " : 0.0);\n"
         "      if (t >= hi && hi > lo) t = m_nextafter(hi, -(T)EM_INF);\n"
         "    }\n"
         "    " +
         y + " = " + store(dt, "t") + ";\n";
  } else {
    s += "    " + y + " = " + kind + " == 3 ? (b_ ? " + from_f64(dt, "1.0") + " : " +
         from_f64(dt, "0.0") + ") : " + from_f64(dt, "floor(v_)") + ";\n";
  }
  return s + "    }\n";
}

KernelSource gen_random(DType dt) {
  KernelSource k;
  k.name = "em_random_" + dname(dt);
  k.body = "extern \"C\" __global__ void " + k.name + "(" + storage_type(dt) +
           "* __restrict__ y, i64 n, u64 key, u64 base, int kind, double a, double b) {\n"
           "  for (i64 i = EM_GID; i < n; i += EM_GSTRIDE) {\n" +
           random_code(dt, "kind", "key", "base + (u64)i", "a", "b", "y[i]") + "  }\n}\n";
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
