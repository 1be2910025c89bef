// The random generator's row compiled for avx512 (flags set in CMakeLists.txt).
#define EMBER_ISA_NS isa_avx512
#include "cpu/kernels/random_rows.inc"
