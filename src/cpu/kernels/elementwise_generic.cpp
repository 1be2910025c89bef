// The element-wise row kernels compiled for generic (flags set in CMakeLists.txt).
#define EMBER_ISA_NS isa_generic
#define EMBER_ISA_NAME "generic"
#include "cpu/kernels/elementwise_rows.inc"
