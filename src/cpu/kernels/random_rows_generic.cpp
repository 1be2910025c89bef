// The random generator's row compiled for the baseline ISA (flags set in CMakeLists.txt).
#define EMBER_ISA_NS isa_generic
#include "cpu/kernels/random_rows.inc"
