// Combine<F, T>: the identity and the step of reduction F (sum, mean, prod, max, min) in
// element type T, shared by every Cpu kernel that reduces (reductions, scans, pooling):
// integer sums and products wrap, max and min propagate NaN.
#pragma once

#include <limits>
#include <type_traits>

#include "ember/ir/ops.hpp"

namespace ember::cpu {

// Accumulator type: sums and products of small ints and floats stay in their own type, as
// PyTorch's keep-dtype reductions do.
template <ir::ReduceFn F, class T>
struct Combine {
  static T init() {
    if constexpr (F == ir::ReduceFn::Sum || F == ir::ReduceFn::Mean) return T(0);
    if constexpr (F == ir::ReduceFn::Prod) return T(1);
    // Floats start at -inf / +inf, not lowest() / max(): max of [-inf] is -inf.
    if constexpr (F == ir::ReduceFn::Max) {
      if constexpr (std::is_floating_point_v<T>)
        return -std::numeric_limits<T>::infinity();
      else
        return std::numeric_limits<T>::lowest();
    }
    if constexpr (F == ir::ReduceFn::Min) {
      if constexpr (std::is_floating_point_v<T>)
        return std::numeric_limits<T>::infinity();
      else
        return std::numeric_limits<T>::max();
    }
  }
  static T apply(T acc, T x) {
    if constexpr (F == ir::ReduceFn::Sum || F == ir::ReduceFn::Mean) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        using W = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<W>(static_cast<W>(acc) + static_cast<W>(x)));
      } else {
        return acc + x;
      }
    } else if constexpr (F == ir::ReduceFn::Prod) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        using W = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<W>(static_cast<W>(acc) * static_cast<W>(x)));
      } else {
        return acc * x;
      }
    } else if constexpr (F == ir::ReduceFn::Max) {
      if constexpr (std::is_floating_point_v<T>)
        return (acc != acc || acc > x) ? acc : x;
      else
        return acc > x ? acc : x;
    } else {
      if constexpr (std::is_floating_point_v<T>)
        return (acc != acc || acc < x) ? acc : x;
      else
        return acc < x ? acc : x;
    }
  }
};

}  // namespace ember::cpu
