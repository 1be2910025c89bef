// The element-wise row kernels compiled for avx2 (flags set in CMakeLists.txt).
#define EMBER_ISA_NS isa_avx2
#define EMBER_ISA_NAME "avx2"
#include "cpu/kernels/elementwise_rows.inc"
