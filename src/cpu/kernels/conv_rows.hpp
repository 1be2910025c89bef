// The row kernel of the Cpu convolution's direct path (conv.cpp: every output channel reads
// one input channel, as in a depthwise convolution), compiled once per ISA from
// conv_rows.inc (conv_rows_{generic,avx2,avx512}.cpp, each with its ISA's flags) and chosen
// by cpu::active_isa(). Only declarations live here (see gemm/microkernel.hpp's note).
#pragma once

#include <cstddef>

namespace ember::cpu {

// One output row of a sum of shifted, scaled image rows:
//   y[i] = sum_{t < taps} w[t] * x[off[t] + i * s], for i < n,
// with every index inside x (the caller pads the image). Each y[i] sums its taps in the
// order t = 0, 1, ..., so every ISA gives the same result up to the FMA's rounding.
template <class T>
using TapRow = void (*)(std::size_t n, std::size_t s, const T* x, const std::ptrdiff_t* off,
                        const T* w, std::size_t taps, T* y);

namespace isa_generic {
void tap_row_f32(std::size_t, std::size_t, const float*, const std::ptrdiff_t*, const float*,
                 std::size_t, float*);
void tap_row_f64(std::size_t, std::size_t, const double*, const std::ptrdiff_t*, const double*,
                 std::size_t, double*);
}  // namespace isa_generic
namespace isa_avx2 {
void tap_row_f32(std::size_t, std::size_t, const float*, const std::ptrdiff_t*, const float*,
                 std::size_t, float*);
void tap_row_f64(std::size_t, std::size_t, const double*, const std::ptrdiff_t*, const double*,
                 std::size_t, double*);
}  // namespace isa_avx2
namespace isa_avx512 {
void tap_row_f32(std::size_t, std::size_t, const float*, const std::ptrdiff_t*, const float*,
                 std::size_t, float*);
void tap_row_f64(std::size_t, std::size_t, const double*, const std::ptrdiff_t*, const double*,
                 std::size_t, double*);
}  // namespace isa_avx512

}  // namespace ember::cpu
