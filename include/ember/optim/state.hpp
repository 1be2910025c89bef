// OptimizerState: an optimizer's or a learning-rate scheduler's state as a plain in-memory
// record — named tensors plus scalar metadata — that the record layer saves and loads, and
// that load_state() turns back into an optimizer that continues exactly where the saved
// one stopped. Note [Optimizer state] in optimizer.hpp gives the keys.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ember/nn/config.hpp"
#include "ember/tensor/dyn_tensor.hpp"

namespace ember::optim {

struct OptimizerState {
  // (key, tensor): "fc.weight.exp_avg" — a param's path, a dot, the slot's name.
  std::vector<std::pair<std::string, DynTensor>> tensors;
  // Scalars: the optimizer's name and each param's step count (schedulers: their step).
  nn::Json meta = nn::Json::object();

  // The tensor named `key`, or null.
  const DynTensor* find(std::string_view key) const;
};

// A scheduler's state has no tensors, only meta.
using SchedulerState = OptimizerState;

}  // namespace ember::optim
