// The Cpu backend's thread pool: a fixed set of workers (EMBER_NUM_THREADS, default
// the hardware's core count) and one primitive, parallel_for, that splits [begin, end)
// into contiguous chunks of at least `grain` items. Nested calls run serially on the
// calling thread, so kernels may call parallel_for without knowing their caller.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace ember::cpu {

// A non-owning reference to a callable `void(size_t begin, size_t end)`; cheaper than
// std::function and never allocates.
class RangeFn {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(F&& f)  // NOLINT(google-explicit-constructor)
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, std::size_t b, std::size_t e) {
          (*static_cast<std::remove_reference_t<F>*>(o))(b, e);
        }) {}
  void operator()(std::size_t b, std::size_t e) const { call_(obj_, b, e); }

 private:
  void* obj_;
  void (*call_)(void*, std::size_t, std::size_t);
};

// Number of threads parallel_for may use (workers + the caller).
std::size_t num_threads();

// Runs fn over [begin, end) split into at most num_threads() chunks of >= grain items.
// Blocks until every chunk is done. Exceptions thrown by fn are rethrown here.
void parallel_for(std::size_t begin, std::size_t end, std::size_t grain, RangeFn fn);

}  // namespace ember::cpu
