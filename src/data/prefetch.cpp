#include "ember/data/prefetch.hpp"

#include "ember/base/error.hpp"

namespace ember::data {

PrefetchPipeline::PrefetchPipeline(std::size_t first, std::size_t end, std::size_t workers,
                                   std::size_t depth, Task task)
    : first_(first),
      end_(end < first ? first : end),
      depth_(depth < 1 ? 1 : depth),
      task_(std::move(task)),
      next_(first),
      consumed_(first),
      done_(end_ - first_, 0),
      errors_(end_ - first_) {
  EMBER_ASSERT(task_ != nullptr);
  threads_.reserve(workers);
  for (std::size_t w = 0; w < workers; ++w) threads_.emplace_back([this] { work(); });
}

PrefetchPipeline::~PrefetchPipeline() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  can_start_.notify_all();
  for (auto& t : threads_) t.join();
}

void PrefetchPipeline::work() {
  for (;;) {
    std::size_t t;
    {
      std::unique_lock lk(mu_);
      can_start_.wait(lk, [&] { return stop_ || next_ >= end_ || next_ < consumed_ + depth_; });
      if (stop_ || next_ >= end_) return;
      t = next_++;
    }
    std::exception_ptr error;
    try {
      task_(t);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lk(mu_);
      done_[t - first_] = 1;
      errors_[t - first_] = std::move(error);
    }
    finished_.notify_all();
  }
}

void PrefetchPipeline::wait(std::size_t t) {
  EMBER_ASSERT(t == consumed_ && t < end_);
  if (threads_.empty()) {
    consumed_ = t + 1;
    task_(t);
    return;
  }
  std::exception_ptr error;
  {
    std::unique_lock lk(mu_);
    finished_.wait(lk, [&] { return done_[t - first_] != 0; });
    consumed_ = t + 1;
    error = std::move(errors_[t - first_]);
  }
  can_start_.notify_all();
  if (error) std::rethrow_exception(error);
}

}  // namespace ember::data
