// The conversion of a double to an element of T as the creation kernels store it (fill,
// arange, random): floats rounded, bool as v != 0, integers saturating with NaN as 0, so
// that no value is undefined behaviour.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

namespace ember::cpu {

// (Always inlined: random_rows.inc uses it under ISA flags, Note in that file.)
template <class T>
[[gnu::always_inline]] inline T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    // Saturating, and NaN -> 0, so no value is undefined behaviour.
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

}  // namespace ember::cpu
