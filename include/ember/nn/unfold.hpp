// Unfold and Fold, as torch.nn.Unfold / torch.nn.Fold (no parameters): sliding blocks of a
// [N, C, H, W] image as columns [N, C kh kw, L], and columns summed back into an image.
#pragma once

#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"
#include "ember/tensor/module_ops.hpp"

namespace ember::nn {

struct Unfold {
  module_ops::Size2 kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  EMBER_MODULE(Unfold, kernel, stride, padding, dilation)
  Tensor<3> forward(const Tensor<4>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<3> {
      return module_ops::unfold(x, kernel, {stride, padding, dilation});
    });
  }
};

struct UnfoldConfig {
  module_ops::Size2 kernel;
  module_ops::Size2 stride = {1, 1}, padding = {0, 0}, dilation = {1, 1};
  EMBER_CONFIG(UnfoldConfig, kernel, stride, padding, dilation)
  Unfold init() const { return {kernel, stride, padding, dilation}; }
};

struct Fold {
  module_ops::Size2 output_size{1, 1}, kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  EMBER_MODULE(Fold, output_size, kernel, stride, padding, dilation)
  Tensor<4> forward(const Tensor<3>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<4> {
      return module_ops::fold(x, output_size, kernel, {stride, padding, dilation});
    });
  }
};

struct FoldConfig {
  module_ops::Size2 output_size;
  module_ops::Size2 kernel;
  module_ops::Size2 stride = {1, 1}, padding = {0, 0}, dilation = {1, 1};
  EMBER_CONFIG(FoldConfig, output_size, kernel, stride, padding, dilation)
  Fold init() const { return {output_size, kernel, stride, padding, dilation}; }
};

}  // namespace ember::nn
