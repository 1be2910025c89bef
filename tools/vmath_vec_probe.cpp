// One loop per vmath function, compiled by tools/check_vmath_vec.sh to confirm that GCC
// auto-vectorizes each of them (f32) at the project's target flags.
#include "../src/cpu/kernels/vmath.hpp"

namespace vm = ember::cpu::vmath;

#define EMBER_PROBE(fn)                                                    \
  void probe_##fn(float* __restrict y, const float* __restrict x, int n) { \
    for (int i = 0; i < n; ++i) y[i] = vm::fn(x[i]);                       \
  }
EMBER_PROBE(exp)
EMBER_PROBE(expm1)
EMBER_PROBE(log)
EMBER_PROBE(log1p)
EMBER_PROBE(sin)
EMBER_PROBE(cos)
EMBER_PROBE(tan)
EMBER_PROBE(tanh)
EMBER_PROBE(sinh)
EMBER_PROBE(cosh)
EMBER_PROBE(asin)
EMBER_PROBE(acos)
EMBER_PROBE(atan)
EMBER_PROBE(erf)
EMBER_PROBE(sigmoid)
EMBER_PROBE(softplus)
EMBER_PROBE(gelu)
EMBER_PROBE(gelu_tanh)
EMBER_PROBE(silu)
EMBER_PROBE(mish)

void probe_atan2(float* __restrict r, const float* __restrict y, const float* __restrict x, int n) {
  for (int i = 0; i < n; ++i) r[i] = vm::atan2(y[i], x[i]);
}
