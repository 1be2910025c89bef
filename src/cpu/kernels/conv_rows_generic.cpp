// The direct convolution row kernel compiled for generic (flags set in CMakeLists.txt).
#define EMBER_ISA_NS isa_generic
#include "cpu/kernels/conv_rows.inc"
