#include "ember/backend/window.hpp"

#include "ember/base/error.hpp"
#include "ember/ir/infer.hpp"

namespace ember::backend {

Window3 window3(const Shape& image, const ir::Window& w) {
  const std::size_t sp = w.kernel.size();
  EMBER_ASSERT(sp >= 1 && sp <= 3 && image.rank() == sp + 2);
  Window3 g;
  g.planes = image[0] * image[1];
  for (std::size_t i = 0; i < 3; ++i) {
    if (i < 3 - sp) {
      g.in[i] = g.kernel[i] = g.stride[i] = g.dilation[i] = g.out[i] = 1;
      g.padding[i] = 0;
      continue;
    }
    const std::size_t j = i - (3 - sp);
    g.in[i] = image[2 + j];
    g.kernel[i] = w.kernel[j];
    g.stride[i] = w.stride[j];
    g.padding[i] = w.padding[j];
    g.dilation[i] = w.dilation[j];
    g.out[i] = ir::window_positions(g.in[i], g.kernel[i], g.stride[i], g.padding[i], g.dilation[i]);
  }
  return g;
}

}  // namespace ember::backend
