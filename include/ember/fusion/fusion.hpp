// The Fusion decorator: a Backend that wraps any other backend and records IR ops in a
// lazy stream per device and thread instead of running them, then runs what it recorded
// at a flush — element-wise chains as fused groups (backend/fused_group.hpp) that the
// inner backend executes as one program, everything else op by op. It knows only the
// Backend interface of what it wraps. Registered as "fusion" in src/registry.cpp, so
// Device::cpu().fusion() and Device::parse("cpu+fusion") reach it. docs/fusion.md explains
// the stream, the grouping and the report.
#pragma once

#include <cstddef>
#include <memory>

#include "ember/backend/backend.hpp"

namespace ember::fusion {

struct Options {
  bool enabled = true;            // false: a pass-through (EMBER_FUSION=0)
  int log = 0;                    // EMBER_FUSION_LOG: 0 none, 1 flushes, 2 groups, 3 decisions
  std::size_t max_records = 256;  // a stream this long flushes (EMBER_FUSION_MAX_RECORDS)
  // Pending outputs a handle still refers to — what a flush must allocate — that flush the
  // stream (EMBER_FUSION_MAX_PENDING_MB); outputs already dropped do not count: a fused
  // group never writes them.
  std::size_t max_pending_bytes = std::size_t{4096} << 20;
  std::size_t max_group_inputs = 16;
  std::size_t max_group_ops = 64;
};
// The options the environment variables above set (defaults elsewhere).
Options options_from_env();

// Wraps inner. Throws ember::Error when inner is (or wraps) an autodiff device: autodiff
// goes outside fusion (Device::cpu().fusion().autodiff()).
std::shared_ptr<backend::Backend> make_fusion_backend(std::shared_ptr<backend::Backend> inner,
                                                      const Options& options = options_from_env());

}  // namespace ember::fusion
