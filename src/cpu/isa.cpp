#include "cpu/isa.hpp"

#include <cstdlib>
#include <cstring>
#include <string>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "ember/base/error.hpp"
#include "ember/cpu/cpu.hpp"

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

#if defined(__x86_64__) || defined(__i386__)
// XCR0: the register state the OS saves and restores.
unsigned long long xcr0() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & bit_OSXSAVE) == 0) return 0;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}
#endif

// Note [AMX permission]: Linux enables the AMX tile data (XFEATURE 18, 8 KiB of state a
// thread) only for processes that ask for it, once, with arch_prctl(ARCH_REQ_XCOMP_PERM);
// a tile instruction before that raises SIGILL. Asked when the dot ISA is first resolved,
// before any thread runs a tile kernel; the permission covers every thread of the process.
#if defined(__x86_64__) || defined(__i386__)
bool amx_permitted() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif

#if defined(__x86_64__) || defined(__i386__)
// Whether AMX tiles run here: AMX-TILE (CPUID leaf 7's edx, given), the tile state saved by
// the OS, and this process permitted to use it (Note [AMX permission]).
bool amx_tiles(unsigned leaf7_edx) {
  const unsigned long long tile_state = (1ull << 17) | (1ull << 18);  // XTILECFG, XTILEDATA
  return (leaf7_edx & (1u << 24)) != 0 && (xcr0() & tile_state) == tile_state && amx_permitted();
}
#endif

bool detect_dot(DotIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == DotIsa::None) return true;
  if (!detect(Isa::Avx512)) return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) == 0) return false;
  const bool bf16 = (a & (1u << 5)) != 0;  // AVX512_BF16
  if (isa == DotIsa::Avx512Bf16) return bf16;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return bf16 && (d & (1u << 22)) != 0 && amx_tiles(d);  // AMX-BF16
#else
  return isa == DotIsa::None;
#endif
}

bool detect_int8(Int8Dot dot) {
#if defined(__x86_64__) || defined(__i386__)
  if (dot == Int8Dot::None) return true;
  if (!detect(Isa::Avx512)) return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  if (dot == Int8Dot::Avx512Vnni) return (c & (1u << 11)) != 0;  // AVX512_VNNI
  return (d & (1u << 25)) != 0 && amx_tiles(d);                  // AMX-INT8
#else
  return dot == Int8Dot::None;
#endif
}

// Whether the CPU's vendor string (CPUID leaf 0) is AMD's.
bool is_amd() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return false;
  char vendor[12];
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  return std::memcmp(vendor, "AuthenticAMD", 12) == 0;
#else
  return false;
#endif
}

#if defined(__x86_64__) || defined(__i386__)
// The caches one deterministic-cache-parameters leaf lists (Intel's leaf 4, AMD's
// 0x8000001D: the same layout), by level; false where the leaf lists none.
bool caches_of_leaf(unsigned leaf, CacheSizes& out) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(leaf & 0x80000000u, &a, &b, &c, &d) == 0 || a < leaf) return false;
  bool any = false;
  for (unsigned i = 0; i < 16; ++i) {
    __cpuid_count(leaf, i, a, b, c, d);
    const unsigned type = a & 0x1f, level = (a >> 5) & 0x7;
    if (type == 0) break;
    if (type == 2) continue;  // an instruction cache
    const std::size_t bytes = std::size_t((b >> 22) + 1) * (((b >> 12) & 0x3ff) + 1) *
                              ((b & 0xfff) + 1) * (std::size_t(c) + 1);
    if (level == 1) out.l1d = bytes;
    if (level == 2) out.l2 = bytes;
    if (level == 3) out.l3 = bytes;
    any = true;
  }
  return any;
}
#endif

CacheSizes detect_caches() {
  CacheSizes s;
#if defined(__x86_64__) || defined(__i386__)
  if (!caches_of_leaf(4, s)) caches_of_leaf(0x8000001Du, s);
#endif
  return s;
}

Isa best_supported() {
  if (isa_supported(Isa::Avx512)) return Isa::Avx512;
  if (isa_supported(Isa::Avx2)) return Isa::Avx2;
  return Isa::Scalar;
}

struct Resolved {
  Isa vec;
  DotIsa dot;
};

// Note [Dot kernels by default]: where EMBER_CPU_ISA is unset, AMX's kernels run wherever the
// CPU has them; AVX512_BF16's on AMD CPUs, and elsewhere only where EMBER_CPU_ISA=avx512bf16
// names them. On the Intel Xeon of the GPU machines (Sapphire Rapids class, 2 threads,
// 2026-12-07) a bf16 matmul of 2048^3 took 34 ms on AMX tiles, 121 ms on vdpbf16ps and 92 ms
// widened to f32 (vdpbf16ps issues once a cycle where f32 FMAs issue twice, so it saves
// memory, not time, there). AMD's cores issue vdpbf16ps as fast as an f32 FMA of the same
// width, each doing twice the multiply-adds: on an AMD EPYC (Zen 5, 2 threads, 2026-12-07)
// the same product took 21 ms on vdpbf16ps against 38 ms widened (PyTorch 2.15's oneDNN:
// 20 ms). Both kernels pass their tests on both machines (tests/cpu/test_gemm_bf16.cpp).
DotIsa best_dot() {
  if (dot_isa_supported(DotIsa::Amx)) return DotIsa::Amx;
  if (dot_isa_supported(DotIsa::Avx512Bf16) && is_amd()) return DotIsa::Avx512Bf16;
  return DotIsa::None;
}

// EMBER_CPU_ISA's names: a vector ISA alone, or a bf16 dot product with the avx512 kernels.
struct Choice {
  const char* name;
  Resolved isa;
};
constexpr Choice kChoices[] = {{"scalar", {Isa::Scalar, DotIsa::None}},
                               {"avx2", {Isa::Avx2, DotIsa::None}},
                               {"avx512", {Isa::Avx512, DotIsa::None}},
                               {"avx512bf16", {Isa::Avx512, DotIsa::Avx512Bf16}},
                               {"amx", {Isa::Avx512, DotIsa::Amx}}};

bool runs(const Resolved& r) { return isa_supported(r.vec) && dot_isa_supported(r.dot); }

Resolved resolve() {
  const char* env = std::getenv("EMBER_CPU_ISA");
  if (env == nullptr || *env == '\0') return {best_supported(), best_dot()};
  const std::string want = env;
  std::string names, supported;
  for (const Choice& c : kChoices) {
    names += std::string(names.empty() ? "" : ", ") + c.name;
    if (runs(c.isa)) supported += std::string(supported.empty() ? "" : ", ") + c.name;
  }
  for (const Choice& c : kChoices) {
    if (want != c.name) continue;
    EMBER_CHECK(runs(c.isa), "EMBER_CPU_ISA=" + want + ": this CPU cannot run the " + want +
                                 " kernels (it supports " + supported + ")");
    return c.isa;
  }
  fail("EMBER_CPU_ISA=" + want + ": unknown ISA (expected one of " + names +
       "; this CPU supports " + supported + ")");
}

const Resolved& resolved() {
  static const Resolved r = resolve();
  return r;
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

Isa active_isa() { return resolved().vec; }

const char* dot_isa_name(DotIsa isa) {
  switch (isa) {
    case DotIsa::None:
      return "none";
    case DotIsa::Avx512Bf16:
      return "avx512bf16";
    case DotIsa::Amx:
      return "amx";
  }
  return "?";
}

bool dot_isa_supported(DotIsa isa) {
  static const bool bf16 = detect_dot(DotIsa::Avx512Bf16), amx = detect_dot(DotIsa::Amx);
  switch (isa) {
    case DotIsa::None:
      return true;
    case DotIsa::Avx512Bf16:
      return bf16;
    case DotIsa::Amx:
      return amx;
  }
  return false;
}

DotIsa active_dot_isa() { return resolved().dot; }

bool int8_dot_supported(Int8Dot dot) {
  static const bool vnni = detect_int8(Int8Dot::Avx512Vnni), amx = detect_int8(Int8Dot::Amx);
  switch (dot) {
    case Int8Dot::None:
      return true;
    case Int8Dot::Avx512Vnni:
      return vnni;
    case Int8Dot::Amx:
      return amx;
  }
  return false;
}

const CacheSizes& cache_sizes() {
  static const CacheSizes s = detect_caches();
  return s;
}

std::string kernel_isa() {
  std::string out = isa_name(active_isa());
  if (active_dot_isa() != DotIsa::None) out += std::string("+") + dot_isa_name(active_dot_isa());
  return out;
}

}  // namespace ember::cpu
