// Optimizer and scheduler states through the record layer's own calls, as modules:
//
//   record::save(opt.state(), "opt.ember");                       // or "opt.safetensors"
//   opt.load_state(record::load(optim::OptimizerState{}, "opt.ember", dev));
//   record::save(sched.state(), "sched.ember");                   // SchedulerState: meta only
//
// The tensors are saved under their keys ("fc1.weight.exp_avg") and the meta (optimizer
// name, step counts, a scheduler's position) as the file's config (.ember metadata,
// safetensors' "ember.config"), so a state file is an ordinary record file: record::inspect
// lists it. Loading one into an optimizer then continues exactly as if never stopped.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ember/optim/state.hpp"
#include "ember/record/record.hpp"

namespace ember::record {

// Writes the state's tensors and meta; the format by the options or the path's extension.
// options.config must be empty: the state's meta is the config.
void save(const optim::OptimizerState& state, const std::string& path,
          const SaveOptions& options = {});
std::vector<std::byte> save_bytes(const optim::OptimizerState& state, Format format,
                                  const SaveOptions& options = {});
// The state in the file (what `into` held is replaced), its tensors placed on `dev`. A
// file without a state's meta (a model file) is an ember::Error naming the file.
optim::OptimizerState load(optim::OptimizerState&& into, const std::string& path, const Device& dev,
                           const LoadOptions& options = {});
optim::OptimizerState load(optim::OptimizerState&& into, std::span<const std::byte> bytes,
                           const Device& dev, const LoadOptions& options = {});

}  // namespace ember::record
