// The element-wise fuser: groups a flushed stream's records greedily, in order, into
// element-wise chains over one iteration space and runs each through the inner backend's
// Backend::run_fused; every other record runs alone. Private to src/fusion/.
#pragma once

#include <vector>

#include "fusion/stream.hpp"

namespace ember::fusion {

// Runs records (in order); `why` is the reason of the flush (the last group's close).
void run_records(Shared& shared, std::vector<Record>& records, backend::CloseReason why);
// Runs one record op by op on the inner backend.
void run_alone(Shared& shared, Record& r);

}  // namespace ember::fusion
