// The geometry of a sliding window (ir::Unfold, ir::Fold, ir::Pool) in the one form every backend's
// kernel takes: exactly 3 spatial dims, a problem with fewer being padded in front with
// dims of extent 1 and a window of 1 there. So one kernel serves 1-, 2- and 3-d windows.
#pragma once

#include <array>
#include <cstddef>

#include "ember/base/shape.hpp"
#include "ember/ir/ops.hpp"

namespace ember::backend {

struct Window3 {
  std::size_t planes = 0;  // N * C
  std::array<std::size_t, 3> in{}, kernel{}, stride{}, padding{}, dilation{}, out{};
  std::size_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
  std::size_t positions() const { return out[0] * out[1] * out[2]; }  // L
  std::size_t image_size() const { return in[0] * in[1] * in[2]; }
};

// `image` is the image side's shape [N, C, *spatial]: Unfold's and Pool's input, Fold's
// output. (The ops' output shapes are ir::out_shape's.)
Window3 window3(const Shape& image, const ir::Window& w);

}  // namespace ember::backend
