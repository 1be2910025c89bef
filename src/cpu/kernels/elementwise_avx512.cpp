// The element-wise row kernels compiled for avx512 (flags set in CMakeLists.txt).
#define EMBER_ISA_NS isa_avx512
#define EMBER_ISA_NAME "avx512"
#include "cpu/kernels/elementwise_rows.inc"
