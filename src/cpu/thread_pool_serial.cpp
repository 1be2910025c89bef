// parallel_for without threads, for builds that have none (EMBER_EMBEDDED; the build
// compiles this file in place of thread_pool.cpp): every range runs on the calling thread.
#include "cpu/thread_pool.hpp"

namespace ember::cpu {

std::size_t num_threads() { return 1; }

void parallel_for(std::size_t begin, std::size_t end, std::size_t /*grain*/, RangeFn fn) {
  if (end > begin) fn(begin, end);
}

}  // namespace ember::cpu
