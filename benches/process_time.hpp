// The process's CPU time in milliseconds, for the one-thread drivers (fusion_chain_cpu,
// fusion_matmul_cpu): steadier than wall time on a shared machine.
#pragma once

#include <ctime>

namespace ember::bench {

inline double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) / 1e6;
}

}  // namespace ember::bench
