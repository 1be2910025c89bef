// What a model provides to be trained by a Learner (Burn's TrainStep and InferenceStep):
//
//   struct Net {
//     ...
//     train::StepOutput train_step(const data::ImageBatch& b) const;   // on the autodiff device
//     train::StepOutput valid_step(const data::ImageBatch& b) const;   // on net.valid()
//   };
//
// A step runs the forward pass and the loss and returns them with what the metrics read
// (the model's output and the targets). The Learner does the rest: backward, gradient
// accumulation and clipping, the optimizer and scheduler steps, metrics, logs, checkpoints.
// A custom loop calls the same steps (or none of this) and feeds metrics through
// StepOutput::metric_input.
#pragma once

#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ember/base/tensor_data.hpp"
#include "ember/tensor/tensor.hpp"
#include "ember/train/metric.hpp"

namespace ember::train {

struct StepOutput {
  // The batch's mean loss, one element. A train step's loss lives on the autodiff device
  // (the Learner calls backward on it); a valid step's anywhere.
  Tensor<1> loss;
  // What the metrics read: logits [N, C], scores, predictions; labels or targets.
  std::optional<DynTensor> output = {};
  std::optional<DynTensor> target = {};
  // Items in the batch; 0 takes the output's (else the target's) first dim, else 1.
  std::size_t items = 0;
  // Decoded text for text metrics (CER, WER, BLEU), when the model produces text.
  std::vector<std::string> text_output = {}, text_target = {};
};

// A StepOutput's values on the host, and the MetricInput that points into them.
class HostStep {
 public:
  // Reads the loss (a sync point) and copies output and target to the host.
  explicit HostStep(const StepOutput& out);
  double loss() const { return loss_; }
  std::size_t items() const { return items_; }
  // The input for the metrics; lr, grad_norm and seconds as given.
  MetricInput metric_input(double lr = kNoValue, double grad_norm = kNoValue,
                           double seconds = kNoValue) const;

 private:
  double loss_ = kNoValue;
  std::size_t items_ = 0;
  std::optional<TensorData> output_, target_;
  std::vector<std::string> text_output_, text_target_;
};

template <class M, class B>
concept TrainStep = requires(const M& model, const B& batch) {
  { model.train_step(batch) } -> std::same_as<StepOutput>;
};
template <class M, class B>
concept ValidStep = requires(const M& model, const B& batch) {
  { model.valid_step(batch) } -> std::same_as<StepOutput>;
};

}  // namespace ember::train
