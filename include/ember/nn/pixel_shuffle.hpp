// PixelShuffle and PixelUnshuffle, as torch.nn.PixelShuffle / PixelUnshuffle (no
// parameters): [N, C r^2, H, W] <-> [N, C, H r, W r].
#pragma once

#include <cstddef>

#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

namespace detail {
DynTensor pixel_shuffle(const DynTensor& x, std::size_t r);
DynTensor pixel_unshuffle(const DynTensor& x, std::size_t r);
}  // namespace detail

struct PixelShuffle {
  std::size_t upscale_factor = 1;
  EMBER_MODULE(PixelShuffle, upscale_factor)
  template <class K>
  Tensor<4, K> forward(const Tensor<4, K>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<4, K> {
      return Tensor<4, K>(detail::pixel_shuffle(x.dyn(), upscale_factor));
    });
  }
};

struct PixelUnshuffle {
  std::size_t downscale_factor = 1;
  EMBER_MODULE(PixelUnshuffle, downscale_factor)
  template <class K>
  Tensor<4, K> forward(const Tensor<4, K>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<4, K> {
      return Tensor<4, K>(detail::pixel_unshuffle(x.dyn(), downscale_factor));
    });
  }
};

}  // namespace ember::nn
