// The Fashion-MNIST CNN of the demo, shared by the training program (fashion_mnist.cpp)
// and the inference program (fashion_mnist_infer.cpp):
//
//   conv 1->32 3x3 pad 1, batch norm, relu, max pool 2     [N, 32, 14, 14]
//   conv 32->64 3x3 pad 1, batch norm, relu, max pool 2    [N, 64, 7, 7]
//   flatten 3136, dropout, linear 3136->128, relu, linear 128->10
//
// Field names are the record keys (and PyTorch's state_dict keys of the same module).
#pragma once

#include <ember/data/data.hpp>
#include <ember/ember.hpp>
#include <ember/train/train.hpp>

namespace fashion {

using namespace ember;

struct Cnn {
  nn::Conv2d conv1;
  nn::BatchNorm bn1;
  nn::Conv2d conv2;
  nn::BatchNorm bn2;
  nn::Dropout dropout;
  nn::Linear fc1, fc2;
  nn::MaxPool2d pool;
  EMBER_MODULE(Cnn, conv1, bn1, conv2, bn2, dropout, fc1, fc2, pool)

  Tensor<2> forward(const Tensor<4>& x) const {
    auto h = pool.forward(activation::relu(bn1.forward(conv1.forward(x))));
    h = pool.forward(activation::relu(bn2.forward(conv2.forward(h))));
    const std::size_t n = h.dims()[0];
    auto flat = h.reshape<2>(Shape{n, h.shape().num_elements() / n});
    return fc2.forward(activation::relu(fc1.forward(dropout.forward(flat))));
  }
  // The Learner's steps (train/step.hpp): the loss and what the metrics read.
  train::StepOutput train_step(const data::ImageBatch& b) const {
    auto logits = forward(b.images);
    auto loss = nn::loss::cross_entropy(logits, b.labels);
    return {std::move(loss), logits.dyn(), b.labels.dyn()};
  }
  train::StepOutput valid_step(const data::ImageBatch& b) const { return train_step(b); }
};

struct CnnConfig {
  std::size_t classes = 10;
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
        nn::LinearConfig{channels_2 * 7 * 7, hidden}.init(dev),
        nn::LinearConfig{hidden, classes}.init(dev),
        nn::MaxPool2dConfig{{2, 2}}.init()};
  }
};

}  // namespace fashion
