// The Fashion-MNIST CNN of the firmware example: the demo's model (examples/fashion_cnn.hpp)
// with the same layers, field names and forward, at a size for a microcontroller's flash
// (26,746 parameters, 104.5 KiB as f32, against the demo's 421,834):
//
//   conv 1->8 3x3 pad 1, batch norm, relu, max pool 2      [N, 8, 14, 14]
//   conv 8->16 3x3 pad 1, batch norm, relu, max pool 2     [N, 16, 7, 7]
//   flatten 784, dropout, linear 784->32, relu, linear 32->10
//
// Included by the host program that trains it and computes the reference predictions
// (fashion_small.cpp) and by the firmware that runs it (tests/embedded/firmware_model.cpp),
// so both run this code. It needs nn alone (no data, train or files).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ember/nn/activation.hpp"
#include "ember/nn/config.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/dropout.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/module.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/pool.hpp"

namespace fashion_small {

using namespace ember;

inline constexpr std::size_t kHeight = 28, kWidth = 28, kClasses = 10;

struct Cnn {
  nn::Conv2d conv1;
  nn::BatchNorm bn1;
  nn::Conv2d conv2;
  nn::BatchNorm bn2;
  nn::Dropout dropout;
  nn::Linear fc1, fc2;
  nn::MaxPool2d pool;
  EMBER_MODULE(Cnn, conv1, bn1, conv2, bn2, dropout, fc1, fc2, pool)

  // images [N, 1, 28, 28] normalized as normalize() does -> logits [N, 10].
  Tensor<2> forward(const Tensor<4>& x) const {
    auto h = pool.forward(activation::relu(bn1.forward(conv1.forward(x))));
    h = pool.forward(activation::relu(bn2.forward(conv2.forward(h))));
    const std::size_t n = h.dims()[0];
    auto flat = h.reshape<2>(Shape{n, h.shape().num_elements() / n});
    return fc2.forward(activation::relu(fc1.forward(dropout.forward(flat))));
  }
};

struct CnnConfig {
  std::size_t classes = kClasses;
  std::size_t channels_1 = 8, channels_2 = 16, hidden = 32;
  double dropout = 0.1;
  EMBER_CONFIG(CnnConfig, classes, channels_1, channels_2, hidden, dropout)

  Cnn init(const Device& dev) const {
    return {
        nn::Conv2dConfig{1, channels_1, {3, 3}}.with_padding(nn::Padding{1, 1}).init(dev),
        nn::BatchNormConfig{channels_1}.init(dev),
        nn::Conv2dConfig{channels_1, channels_2, {3, 3}}.with_padding(nn::Padding{1, 1}).init(dev),
        nn::BatchNormConfig{channels_2}.init(dev),
        nn::DropoutConfig{dropout}.init(),
        nn::LinearConfig{channels_2 * (kHeight / 4) * (kWidth / 4), hidden}.init(dev),
        nn::LinearConfig{hidden, classes}.init(dev),
        nn::MaxPool2dConfig{{2, 2}}.init()};
  }
};

// Pixels 0..255 to the network's input, (p / 255 - mean) / std with Fashion-MNIST's mean
// and standard deviation, as data::MnistBatcher computes it in training (one multiply-add a
// pixel, the same operations, so host and firmware inputs agree bit for bit).
inline constexpr float kMean = 0.2860f, kStd = 0.3530f;
inline void normalize(const std::uint8_t* pixels, std::size_t n, float* out) {
  const float a = 1.0f / (255.0f * kStd), b = -kMean / kStd;
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(pixels[i]) * a + b;
}

}  // namespace fashion_small
