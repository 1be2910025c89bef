// The optimizer-step workloads (benches/optim_workloads.cpp): an Adam and an AdamW step over
// a 10M-parameter model on the CPU and a 100M-parameter one on the GPU. Listed in
// benches/workloads.cpp.
#pragma once

#include "workloads.hpp"

namespace ember::bench {

Case adam_step_case(SizeKind s, const Device& dev);
Case adamw_step_case(SizeKind s, const Device& dev);

}  // namespace ember::bench
