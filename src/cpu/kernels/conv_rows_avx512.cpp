// The direct convolution row kernel compiled for avx512 (flags set in CMakeLists.txt).
#define EMBER_ISA_NS isa_avx512
#include "cpu/kernels/conv_rows.inc"
