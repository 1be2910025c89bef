// The Cuda backend's host-side profile, on with EMBER_CUDA_PROFILE=1: per IR op kind the
// number of execute() calls and the host time spent in them (fallbacks apart), and counts
// of what costs host time or stalls the stream — kernel launches, cuBLASLt matmuls and
// algorithm queries, cuDNN calls, syncs (and the time the host waited in them), transfers,
// fused groups. Printed to stderr when the process exits. Off, each hook is one load of a
// flag.
#pragma once

#include <chrono>
#include <cstdint>

#include "ember/ir/ops.hpp"

namespace ember::cuda::profile {

enum class Counter : std::uint8_t {
  Launch,         // cudaLaunchKernel
  Gemm,           // cublasLtMatmul
  GemmHeuristic,  // cublasLtMatmulAlgoGetHeuristic (a plan not in the plan cache)
  Cudnn,          // a cuDNN convolution call
  Sync,           // a wait for the stream (to_data, sync, fallbacks)
  Copy,           // a layout copy made to feed a kernel (contiguous())
  kCount
};

bool enabled();
void count(Counter c, std::uint64_t n = 1);
// ns of host time in an op of kind k (fallback: run on the host through copies).
void op(ir::OpKind k, std::uint64_t ns, bool fallback);
// ns of host time in a fused group, a transfer, or a sync's wait.
void fused(std::uint64_t ns);
void transfer(bool to_host, std::uint64_t ns);
void sync_wait(std::uint64_t ns);

inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace ember::cuda::profile
