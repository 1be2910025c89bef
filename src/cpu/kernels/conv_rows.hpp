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

// The weight gradient's counterpart of a tap row, over one row of n positions:
//   out[t] += sum_{i < n} g[i] * x[off[t] + i], for t < taps,
// every index inside x. Each sum runs in an order fixed by n and the ISA's vector width.
template <class T>
using TapDots = void (*)(std::size_t n, const T* g, const T* x, const std::ptrdiff_t* off,
                         std::size_t taps, T* out);

// One plane of a 3x3 convolution of one input channel (depthwise), stride s (1 or 2), no
// dilation, `pt` / `pl` rows / columns of zeros before the image (the extents oh x ow say
// how many after):
//   y[oy][ox] = sum_{ky, kx < 3} w[3 ky + kx] * x[oy s + ky - pt][ox s + kx - pl],
// entries outside the h x w image zero, each sum over the taps inside in the order 3 ky +
// kx, as tap_row's. Reads the image where it lies (no padded copy); for ow of at least a
// vector (64 bytes) of outputs.
template <class T>
using Depthwise3x3 = void (*)(const T* x, std::size_t h, std::size_t w, const T* k, std::size_t s,
                              std::size_t pt, std::size_t pl, T* y, std::size_t oh, std::size_t ow);

namespace isa_generic {
void tap_dots_f32(std::size_t, const float*, const float*, const std::ptrdiff_t*, std::size_t,
                  float*);
void tap_dots_f64(std::size_t, const double*, const double*, const std::ptrdiff_t*, std::size_t,
                  double*);
void tap_row_f32(std::size_t, std::size_t, const float*, const std::ptrdiff_t*, const float*,
                 std::size_t, float*);
void tap_row_f64(std::size_t, std::size_t, const double*, const std::ptrdiff_t*, const double*,
                 std::size_t, double*);
void depthwise3x3_f32(const float*, std::size_t, std::size_t, const float*, std::size_t,
                      std::size_t, std::size_t, float*, std::size_t, std::size_t);
void depthwise3x3_f64(const double*, std::size_t, std::size_t, const double*, std::size_t,
                      std::size_t, std::size_t, double*, std::size_t, std::size_t);
}  // namespace isa_generic
namespace isa_avx2 {
void tap_dots_f32(std::size_t, const float*, const float*, const std::ptrdiff_t*, std::size_t,
                  float*);
void tap_dots_f64(std::size_t, const double*, const double*, const std::ptrdiff_t*, std::size_t,
                  double*);
void tap_row_f32(std::size_t, std::size_t, const float*, const std::ptrdiff_t*, const float*,
                 std::size_t, float*);
void tap_row_f64(std::size_t, std::size_t, const double*, const std::ptrdiff_t*, const double*,
                 std::size_t, double*);
void depthwise3x3_f32(const float*, std::size_t, std::size_t, const float*, std::size_t,
                      std::size_t, std::size_t, float*, std::size_t, std::size_t);
void depthwise3x3_f64(const double*, std::size_t, std::size_t, const double*, std::size_t,
                      std::size_t, std::size_t, double*, std::size_t, std::size_t);
}  // namespace isa_avx2
namespace isa_avx512 {
void tap_dots_f32(std::size_t, const float*, const float*, const std::ptrdiff_t*, std::size_t,
                  float*);
void tap_dots_f64(std::size_t, const double*, const double*, const std::ptrdiff_t*, std::size_t,
                  double*);
void tap_row_f32(std::size_t, std::size_t, const float*, const std::ptrdiff_t*, const float*,
                 std::size_t, float*);
void tap_row_f64(std::size_t, std::size_t, const double*, const std::ptrdiff_t*, const double*,
                 std::size_t, double*);
void depthwise3x3_f32(const float*, std::size_t, std::size_t, const float*, std::size_t,
                      std::size_t, std::size_t, float*, std::size_t, std::size_t);
void depthwise3x3_f64(const double*, std::size_t, std::size_t, const double*, std::size_t,
                      std::size_t, std::size_t, double*, std::size_t, std::size_t);
}  // namespace isa_avx512

}  // namespace ember::cpu
