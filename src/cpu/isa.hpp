// The one CPU ISA detection of the Cpu backend. Every kernel family compiled for more than
// one ISA (element-wise rows, GEMM micro-kernels, GEMV) asks active_isa() which to run, so
// they always agree, and EMBER_CPU_ISA overrides it for all of them at once.
#pragma once

namespace ember::cpu {

// The kernel variants the Cpu backend compiles. Each is a superset of the one before.
//   Scalar: the baseline x86-64 (or other) ISA, no run-time requirement;
//   Avx2:   AVX2 + FMA + F16C (the flags of the *_avx2.cpp files);
//   Avx512: AVX-512 F/VL/BW/DQ + AVX2 + FMA + F16C (the flags of the *_avx512.cpp files).
enum class Isa { Scalar, Avx2, Avx512 };

// "scalar", "avx2", "avx512": EMBER_CPU_ISA's spelling.
const char* isa_name(Isa isa);

// Whether this CPU (and OS) can run `isa`'s kernels.
bool isa_supported(Isa isa);

// The best ISA this CPU supports, or the one EMBER_CPU_ISA names (scalar|avx2|avx512),
// read once. An unknown name, or an ISA this CPU lacks, is an ember::Error naming the
// variable, the value and what this CPU supports.
Isa active_isa();

}  // namespace ember::cpu
