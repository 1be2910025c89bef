// The Fashion-MNIST CNN of the demo (examples/fashion_cnn_model.hpp: layers, forward,
// config), shared by the training program (fashion_mnist.cpp) and the inference program
// (fashion_mnist_infer.cpp), with the Learner's steps, which need data/ and train/.
#pragma once

#include <ember/data/data.hpp>
#include <ember/ember.hpp>
#include <ember/train/train.hpp>

#include "fashion_cnn_model.hpp"

namespace fashion {

// The loss and what the metrics read.
inline train::StepOutput Cnn::train_step(const data::ImageBatch& b) const {
  auto logits = forward(b.images);
  auto loss = nn::loss::cross_entropy(logits, b.labels);
  return {std::move(loss), logits.dyn(), b.labels.dyn()};
}
inline train::StepOutput Cnn::valid_step(const data::ImageBatch& b) const { return train_step(b); }

}  // namespace fashion
