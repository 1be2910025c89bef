// Deformable convolution, as torchvision.ops.DeformConv2d / deform_conv2d: every kernel tap
// of every output position reads the input at its regular position moved by a learned
// offset, sampled bilinearly (zero outside the image), optionally scaled by a modulation
// mask (DCNv2), and the sampled columns are multiplied by the weight as a convolution's.
// Built from gather, element-wise ops and one batched matmul, so it runs on every backend
// and under autodiff (offsets, mask, input, weight and bias all get gradients).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <optional>

#include "ember/nn/config.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

struct DeformConv2dGeometry {
  std::array<std::size_t, 2> stride = {1, 1};
  std::array<std::size_t, 2> padding = {0, 0};
  std::array<std::size_t, 2> dilation = {1, 1};
};

// torchvision.ops.deform_conv2d: input [N, C, H, W], offset [N, 2 G kh kw, Ho, Wo] ((dy, dx)
// per tap, offset groups G dividing C), weight [O, C / groups, kh, kw] (groups = C /
// weight.shape[1]), bias [O], mask [N, G kh kw, Ho, Wo] -> [N, O, Ho, Wo]. One dtype and
// device for all. `layer` names the caller in errors.
DynTensor deform_conv2d(const DynTensor& input, const DynTensor& offset, const DynTensor& weight,
                        const std::optional<DynTensor>& bias, const std::optional<DynTensor>& mask,
                        const DeformConv2dGeometry& geometry = {},
                        const char* layer = "nn::deform_conv2d");

struct DeformConv2d {
  Param<Tensor<4>> weight;               // [out, in / groups, kh, kw]
  std::optional<Param<Tensor<1>>> bias;  // [out]
  std::array<std::size_t, 2> stride, padding, dilation;
  std::size_t groups = 1;
  EMBER_MODULE(DeformConv2d, weight, bias, stride, padding, dilation, groups)

  // x [N, in, H, W], offset [N, 2 G kh kw, Ho, Wo], mask (v2) [N, G kh kw, Ho, Wo].
  Tensor<4> forward(const Tensor<4>& x, const Tensor<4>& offset) const;
  Tensor<4> forward(const Tensor<4>& x, const Tensor<4>& offset, const Tensor<4>& mask) const;
};

struct DeformConv2dConfig {
  std::size_t channels_in;
  std::size_t channels_out;
  std::array<std::size_t, 2> kernel_size;
  std::array<std::size_t, 2> stride = {1, 1};
  std::array<std::size_t, 2> padding = {0, 0};
  std::array<std::size_t, 2> dilation = {1, 1};
  std::size_t groups = 1;
  bool bias = true;
  // torchvision's default: kaiming_uniform(a = sqrt(5)); the bias U(±1/sqrt(fan_in)).
  Initializer initializer = Initializer::kaiming_uniform(std::sqrt(5.0));
  EMBER_CONFIG(DeformConv2dConfig, channels_in, channels_out, kernel_size, stride, padding,
               dilation, groups, bias, initializer)

  DeformConv2d init(const Device& device) const;
};

}  // namespace ember::nn
