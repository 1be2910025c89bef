// The one CPU ISA detection of the Cpu backend. Every kernel family compiled for more than
// one ISA (element-wise rows, GEMM micro-kernels, GEMV) asks active_isa() which to run, so
// they always agree, and EMBER_CPU_ISA overrides it for all of them at once.
#pragma once

#include <cstddef>

namespace ember::cpu {

// The kernel variants the Cpu backend compiles. Each is a superset of the one before.
//   Scalar: the baseline x86-64 (or other) ISA, no run-time requirement;
//   Avx2:   AVX2 + FMA + F16C (the flags of the *_avx2.cpp files);
//   Avx512: AVX-512 F/VL/BW/DQ + AVX2 + FMA + F16C (the flags of the *_avx512.cpp files).
enum class Isa { Scalar, Avx2, Avx512 };

// "scalar", "avx2", "avx512": EMBER_CPU_ISA's spelling.
const char* isa_name(Isa isa);

// The bf16 dot-product instructions the bf16 GEMM (cpu/gemm/gemm_bf16.hpp) may use, beside
// the vector ISA: each a superset of the one before, as Isa's levels.
//   None:       no bf16 dot product; bf16 products are widened to f32 and run as f32;
//   Avx512Bf16: AVX-512 + AVX512_BF16 (vdpbf16ps);
//   Amx:        AVX512_BF16 + AMX-TILE + AMX-BF16 (tdpbf16ps), with the kernel's permission
//               to use the tile data (arch_prctl, asked once).
enum class DotIsa { None, Avx512Bf16, Amx };
const char* dot_isa_name(DotIsa isa);
bool dot_isa_supported(DotIsa isa);
// The one EMBER_CPU_ISA names: "avx512bf16" and "amx" run the avx512 vector kernels with that
// dot product; "scalar", "avx2" and "avx512" run none. Unset: amx where the CPU has it, else
// none (Note [Dot kernels by default] in isa.cpp).
DotIsa active_dot_isa();

// The int8 dot-product instructions the int8 GEMM (cpu/gemm/gemm_i8.hpp) may use, beside the
// vector ISA: Avx512Vnni, AVX-512 + AVX512_VNNI (vpdpbusd); Amx, AMX-TILE + AMX-INT8
// (tdpbusd), with the kernel's permission to use the tile data (Note [AMX permission]).
// The int8 GEMM takes AMX where the bf16 one does (active_dot_isa() is Amx), else VNNI where
// the active vector ISA is AVX-512, else its portable loop.
enum class Int8Dot { None, Avx512Vnni, Amx };
bool int8_dot_supported(Int8Dot dot);

// The data caches of one core as CPUID describes them (bytes; 0 where the CPU does not say,
// or off x86): the level-1 data cache, the level-2 cache, and the level-3 cache it shares.
// Read once. Kernels size their blocks from them (Note [Tile size] in kernels/fused.cpp).
struct CacheSizes {
  std::size_t l1d = 0, l2 = 0, l3 = 0;
};
const CacheSizes& cache_sizes();

// Whether this CPU (and OS) can run `isa`'s kernels.
bool isa_supported(Isa isa);

// The best ISA this CPU supports, or the one EMBER_CPU_ISA names (scalar|avx2|avx512, or
// avx512bf16|amx, which run the avx512 kernels), read once. An unknown name, or an ISA this CPU
// lacks, is an ember::Error naming the variable, the value and what this CPU supports.
Isa active_isa();

}  // namespace ember::cpu
