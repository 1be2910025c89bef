// The Autodiff decorator: a Backend that wraps any other backend and records, for the
// float tensors that require a gradient or depend on one, the graph that reverse mode
// walks. It knows only the Backend interface of what it wraps; the tensor layer reaches
// its extra capabilities through backend::AutodiffBackend. Registered as "autodiff"
// (Checkpointing::None) and "autodiff_balanced" (Checkpointing::Balanced) in
// src/registry.cpp.
#pragma once

#include <cstdint>
#include <memory>

#include "ember/backend/autodiff_interface.hpp"
#include "ember/backend/backend.hpp"

namespace ember::autodiff {

std::shared_ptr<backend::Backend> make_autodiff_backend(
    std::shared_ptr<backend::Backend> inner,
    backend::Checkpointing checkpointing = backend::Checkpointing::None);

// Anomaly detection (Note [Detecting NaN] in src/autodiff/nan_check.hpp): with it on,
// the Autodiff decorator reads back every float output of every op it runs, forward and
// backward, and the first op that produces a NaN (NonFinite: or an infinity) throws an
// ember::Error naming it. A debugging mode: each op costs a copy to the host. The initial
// mode comes from the environment: EMBER_DETECT_NAN=1 is Nan, EMBER_DETECT_NAN=inf (or 2)
// NonFinite, unset or 0 Off.
enum class NanCheck : std::uint8_t { Off, Nan, NonFinite };
NanCheck detect_nan();
void set_detect_nan(NanCheck mode);

}  // namespace ember::autodiff
