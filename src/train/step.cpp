// HostStep: a step's loss, output and target copied to the host for the metrics.
#include "ember/train/step.hpp"

#include "ember/base/error.hpp"

namespace ember::train {

HostStep::HostStep(const StepOutput& out)
    : text_output_(out.text_output), text_target_(out.text_target) {
  EMBER_CHECK(out.loss.shape().num_elements() == 1,
              "train::StepOutput: the loss must have one element, got shape " +
                  out.loss.shape().to_string());
  loss_ = out.loss.into_scalar<double>();
  if (out.output) output_ = out.output->to_data();
  if (out.target) target_ = out.target->to_data();
  items_ = out.items;
  if (items_ == 0 && output_ && output_->shape().rank() > 0) items_ = output_->shape()[0];
  if (items_ == 0 && target_ && target_->shape().rank() > 0) items_ = target_->shape()[0];
  if (items_ == 0) items_ = 1;
}

MetricInput HostStep::metric_input(double lr, double grad_norm, double seconds) const {
  MetricInput in;
  in.loss = loss_;
  in.items = items_;
  in.lr = lr;
  in.grad_norm = grad_norm;
  in.seconds = seconds;
  in.output = output_ ? &*output_ : nullptr;
  in.target = target_ ? &*target_ : nullptr;
  in.text_output = text_output_.empty() ? nullptr : &text_output_;
  in.text_target = text_target_.empty() ? nullptr : &text_target_;
  return in;
}

}  // namespace ember::train
