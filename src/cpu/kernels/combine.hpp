// Combine<F, T>: the identity and the step of reduction F (sum, mean, prod, max, min) in
// element type T, shared by every Cpu kernel that reduces (reductions, scans, pooling).
// Both come from the reduction's definition in ir/scalar_table.hpp (ir::sx::reduction):
// the identity expression, and the element-wise function that combines, so integer sums
// and products wrap and max and min propagate NaN exactly as the binary ops do.
#pragma once

#include "cpu/kernels/scalar_eval.hpp"

namespace ember::cpu {

// Accumulator type: sums and products of small ints and floats stay in their own type, as
// PyTorch's keep-dtype reductions do.
template <ir::ReduceFn F, class T>
struct Combine {
  static T init() { return eval<ReduceIdentity<F>, T>(T(0), T(0), T(0), T(0)); }
  static T apply(T acc, T x) { return eval<ReduceStep<F, T>, T>(acc, x, T(0), T(0)); }
};

}  // namespace ember::cpu
