#include "cpu/isa.hpp"

#include <cstdlib>
#include <string>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "ember/base/error.hpp"

namespace ember::cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// F16C from CPUID leaf 1 (clang before 15 has no "f16c" for __builtin_cpu_supports).
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
#endif

bool detect(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return avx2;
    case Isa::Avx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  }
  return false;
#else
  return isa == Isa::Scalar;
#endif
}

Isa best_supported() {
  if (isa_supported(Isa::Avx512)) return Isa::Avx512;
  if (isa_supported(Isa::Avx2)) return Isa::Avx2;
  return Isa::Scalar;
}

std::string supported_list() {
  std::string out;
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (isa_supported(i)) out += std::string(out.empty() ? "" : ", ") + isa_name(i);
  }
  return out;
}

Isa resolve() {
  const char* env = std::getenv("EMBER_CPU_ISA");
  if (env == nullptr || *env == '\0') return best_supported();
  const std::string want = env;
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (want != isa_name(i)) continue;
    EMBER_CHECK(isa_supported(i), "EMBER_CPU_ISA=" + want + ": this CPU cannot run the " + want +
                                      " kernels (it supports " + supported_list() + ")");
    return i;
  }
  fail("EMBER_CPU_ISA=" + want +
       ": unknown ISA (expected scalar, avx2 or avx512; this CPU "
       "supports " +
       supported_list() + ")");
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  static const bool avx2 = detect(Isa::Avx2), avx512 = detect(Isa::Avx512);
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return avx2;
    case Isa::Avx512:
      return avx512;
  }
  return false;
}

Isa active_isa() {
  static const Isa isa = resolve();
  return isa;
}

}  // namespace ember::cpu
