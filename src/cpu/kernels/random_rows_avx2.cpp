// The random generator's row compiled for avx2 (flags set in CMakeLists.txt).
#define EMBER_ISA_NS isa_avx2
#include "cpu/kernels/random_rows.inc"
