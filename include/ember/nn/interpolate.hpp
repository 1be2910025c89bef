// Interpolate, as torch.nn.Upsample / torch.nn.functional.interpolate: resamples
// [N, C, *spatial] inputs (1 to 3 spatial dims) to a size or by a scale factor.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"
#include "ember/tensor/module_ops.hpp"

namespace ember::nn {

struct Interpolate;

// Exactly one of size and scale_factor (one entry for every spatial dim, or one per dim);
// mode is PyTorch's name: "nearest", "nearest-exact", "linear" / "bilinear" / "trilinear"
// (by the input's number of spatial dims) or "bicubic".
struct InterpolateConfig {
  std::vector<std::size_t> size = {};
  std::vector<double> scale_factor = {};
  std::string mode = "nearest";
  bool align_corners = false;
  EMBER_CONFIG(InterpolateConfig, size, scale_factor, mode, align_corners)
  Interpolate init() const;
};

struct Interpolate {
  InterpolateConfig config;
  EMBER_MODULE(Interpolate, config)
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<D> {
      static_assert(D >= 3 && D <= 5,
                    "Interpolate takes [N, C, *spatial] with 1 to 3 spatial dims");
      return Tensor<D>(module_ops::interpolate(
          x.dyn(), {config.size, config.scale_factor,
                    module_ops::interpolate_mode(config.mode, D - 2), config.align_corners}));
    });
  }
};

inline Interpolate InterpolateConfig::init() const {
  EMBER_CHECK(size.empty() != scale_factor.empty(),
              "nn::Interpolate: give exactly one of size and scale_factor");
  const char* modes[] = {"nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic"};
  bool known = false;
  for (const char* m : modes) known = known || mode == m;
  EMBER_CHECK(known, "nn::Interpolate: unknown mode \"" + mode +
                         "\" (expected nearest, nearest-exact, linear, bilinear, trilinear or "
                         "bicubic)");
  return {*this};
}

}  // namespace ember::nn
