// The row walk every sliding-window kernel shares (unfold.cpp, conv.cpp): for each kernel
// offset and outer window position of one image plane, the image row it reads and the range
// of innermost positions that fall inside the image, so a copy or a sum along the row needs
// no bounds check per element.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ember/backend/window.hpp"

namespace ember::cpu::window_rows {

using backend::Window3;
using std::int64_t;

// Image coordinate of window position o at kernel offset k along dim `d`; may be outside
// [0, in) (in the padding).
inline int64_t coord(const Window3& g, int d, std::size_t o, std::size_t k) {
  return int64_t(o * g.stride[d] + k * g.dilation[d]) - int64_t(g.padding[d]);
}

// The positions [lo, hi) along the innermost dim whose coordinate at kernel offset k lies
// inside the image.
inline void inner_range(const Window3& g, std::size_t k, std::size_t& lo, std::size_t& hi) {
  const int64_t a = int64_t(k * g.dilation[2]) - int64_t(g.padding[2]);  // coord of o = 0
  const auto s = int64_t(g.stride[2]), in = int64_t(g.in[2]), out = int64_t(g.out[2]);
  const int64_t l = a >= 0 ? 0 : (-a + s - 1) / s;
  const int64_t h = in - a <= 0 ? 0 : (in - a + s - 1) / s;  // first o with coord >= in
  lo = static_cast<std::size_t>(std::min(l, out));
  hi = static_cast<std::size_t>(std::clamp(h, int64_t(lo), out));
}

// Calls f(kernel offset k, position row r, image row or -1, ox range lo, hi) for every
// (kernel offset, outer position) row of one plane.
template <class F>
inline void for_each_window_row(const Window3& g, F&& f) {
  std::size_t k = 0;
  for (std::size_t kz = 0; kz < g.kernel[0]; ++kz) {
    for (std::size_t ky = 0; ky < g.kernel[1]; ++ky) {
      for (std::size_t kx = 0; kx < g.kernel[2]; ++kx, ++k) {
        std::size_t lo = 0, hi = 0;
        inner_range(g, kx, lo, hi);
        for (std::size_t oz = 0; oz < g.out[0]; ++oz) {
          const int64_t iz = coord(g, 0, oz, kz);
          for (std::size_t oy = 0; oy < g.out[1]; ++oy) {
            const int64_t iy = coord(g, 1, oy, ky);
            const bool inside =
                iz >= 0 && iz < int64_t(g.in[0]) && iy >= 0 && iy < int64_t(g.in[1]);
            const int64_t row = inside ? (iz * int64_t(g.in[1]) + iy) * int64_t(g.in[2]) : -1;
            f(k, oz * g.out[1] + oy, row, kx, lo, hi);
          }
        }
      }
    }
  }
}

}  // namespace ember::cpu::window_rows
