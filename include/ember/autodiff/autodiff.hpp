// The Autodiff decorator: a Backend that wraps any other backend and records, for the
// float tensors that require a gradient or depend on one, the graph that reverse mode
// walks. It knows only the Backend interface of what it wraps; the tensor layer reaches
// its extra capabilities through backend::AutodiffBackend. Registered as "autodiff"
// (Checkpointing::None) and "autodiff_balanced" (Checkpointing::Balanced) in
// src/registry.cpp.
#pragma once

#include <memory>

#include "ember/backend/autodiff_interface.hpp"
#include "ember/backend/backend.hpp"

namespace ember::autodiff {

std::shared_ptr<backend::Backend> make_autodiff_backend(
    std::shared_ptr<backend::Backend> inner,
    backend::Checkpointing checkpointing = backend::Checkpointing::None);

}  // namespace ember::autodiff
