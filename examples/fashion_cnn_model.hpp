// The Fashion-MNIST CNN of the demo as a model alone: its layers, field names (the record
// keys, and PyTorch's state_dict keys of the same module), forward and config, with nn as
// its only dependency. Two programs build on it:
//
//   examples/fashion_cnn.hpp                 the demo (training and inference programs),
//                                            which adds the Learner's steps (data/, train/);
//   examples/embedded/fashion_cnn_small.hpp  the firmware example, the same network at a
//                                            size for a microcontroller (8, 16, 32).
//
//   conv 1->c1 3x3 pad 1, batch norm, relu, max pool 2     [N, c1, 14, 14]
//   conv c1->c2 3x3 pad 1, batch norm, relu, max pool 2    [N, c2, 7, 7]
//   flatten c2 * 49, dropout, linear -> hidden, relu, linear hidden -> classes
#pragma once

#include <cstddef>

#include "ember/nn/activation.hpp"
#include "ember/nn/config.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/dropout.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/module.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/pool.hpp"

namespace ember::data {
struct ImageBatch;
}
namespace ember::train {
struct StepOutput;
}

namespace fashion {

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

  // images [N, 1, 28, 28] -> logits [N, classes].
  Tensor<2> forward(const Tensor<4>& x) const {
    auto h = pool.forward(activation::relu(bn1.forward(conv1.forward(x))));
    h = pool.forward(activation::relu(bn2.forward(conv2.forward(h))));
    const std::size_t n = h.dims()[0];
    auto flat = h.reshape<2>(Shape{n, h.shape().num_elements() / n});
    return fc2.forward(activation::relu(fc1.forward(dropout.forward(flat))));
  }
  // The Learner's steps (train/step.hpp), defined by examples/fashion_cnn.hpp: a program
  // that does not train (the firmware) neither includes nor links them.
  train::StepOutput train_step(const data::ImageBatch& b) const;
  train::StepOutput valid_step(const data::ImageBatch& b) const;
};

// The demo's size by default.
struct CnnConfig {
  std::size_t classes = kClasses;
  std::size_t channels_1 = 32, channels_2 = 64, hidden = 128;
  double dropout = 0.25;
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

}  // namespace fashion
