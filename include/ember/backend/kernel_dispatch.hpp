// The one dispatch of IR ops to a backend's kernels. A backend declares one kernel per op
// struct of EMBER_IR_OPS, all named `run` and taking its context:
//
//   #define EMBER_CPU_KERNEL(T) backend::KernelResult<ir::T> run(CpuContext& ctx, ir::T& op);
//   EMBER_IR_OPS(EMBER_CPU_KERNEL)
//
// so the declarations come from the op list itself, and dispatch(ctx, op) visits the op
// and calls the overload for its struct: an op added to the IR without a kernel on some
// backend fails to link there (declared, never defined), and one whose kernel has the
// wrong signature fails to compile. A kernel returns its one output, or every output of
// a multi-output op (ir::MultiOutput: Sort's values and indices).
#pragma once

#include <type_traits>
#include <variant>
#include <vector>

#include "ember/ir/infer.hpp"
#include "ember/ir/ops.hpp"

namespace ember::backend {

template <class T>
using KernelResult = std::conditional_t<ir::MultiOutput<T>, std::vector<ir::Handle>, ir::Handle>;

// Runs op with the kernel `run(ctx, op-struct&)` found by argument-dependent lookup in the
// context's namespace.
template <class Context>
std::vector<ir::Handle> dispatch(Context& ctx, ir::Op& op) {
  return std::visit(
      [&](auto& o) -> std::vector<ir::Handle> {
        using T = std::remove_cvref_t<decltype(o)>;
        static_assert(std::is_same_v<decltype(run(ctx, o)), KernelResult<T>>,
                      "a kernel returns one handle, or a vector for a multi-output op");
        if constexpr (ir::MultiOutput<T>) {
          return run(ctx, o);
        } else {
          return {run(ctx, o)};
        }
      },
      op);
}

}  // namespace ember::backend
