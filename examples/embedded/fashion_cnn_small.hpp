// The Fashion-MNIST CNN of the firmware example: the demo's model itself
// (examples/fashion_cnn_model.hpp: the same layers, field names, forward and config) at a
// size for a microcontroller's flash — 8 and 16 channels, 32 hidden units: 26,746
// parameters, 104.5 KiB as f32, against the demo's 421,834:
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

#include "../fashion_cnn_model.hpp"

namespace fashion_small {

using namespace ember;

using fashion::kClasses;
using fashion::kHeight;
using fashion::kWidth;
using Cnn = fashion::Cnn;
using CnnConfig = fashion::CnnConfig;

// The firmware's size of the demo's network.
inline CnnConfig small_config() {
  return CnnConfig{}.with_channels_1(8).with_channels_2(16).with_hidden(32).with_dropout(0.1);
}

// Pixels 0..255 to the network's input, (p / 255 - mean) / std with Fashion-MNIST's mean
// and standard deviation, as data::MnistBatcher computes it in training (one multiply-add a
// pixel, the same operations, so host and firmware inputs agree bit for bit).
inline constexpr float kMean = 0.2860f, kStd = 0.3530f;
inline void normalize(const std::uint8_t* pixels, std::size_t n, float* out) {
  const float a = 1.0f / (255.0f * kStd), b = -kMean / kStd;
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(pixels[i]) * a + b;
}

}  // namespace fashion_small
