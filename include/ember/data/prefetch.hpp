// PrefetchPipeline: runs numbered tasks first..end-1 on worker threads, at most `depth`
// ahead of the consumer, and hands them back in order. The DataLoader's engine; it knows
// nothing of datasets or batches (the task writes its result where the caller wants it).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ember::data {

class PrefetchPipeline {
 public:
  using Task = std::function<void(std::size_t task)>;

  // With workers == 0 no thread starts and wait(t) runs task t on the caller's thread.
  // Otherwise `workers` threads take tasks in increasing order while fewer than `depth`
  // (>= 1) finished or running tasks wait for the consumer.
  PrefetchPipeline(std::size_t first, std::size_t end, std::size_t workers, std::size_t depth,
                   Task task);
  // Stops handing out tasks and joins the workers (after their current task).
  ~PrefetchPipeline();
  PrefetchPipeline(const PrefetchPipeline&) = delete;
  PrefetchPipeline& operator=(const PrefetchPipeline&) = delete;

  // Blocks until task t (the next one in order: first, first + 1, ...) has run, then
  // rethrows the exception it threw, if any. After wait(t) the task's writes are visible.
  void wait(std::size_t t);

 private:
  void work();

  std::size_t first_, end_, depth_;
  Task task_;
  std::mutex mu_;
  std::condition_variable can_start_, finished_;
  std::size_t next_ = 0;      // the next task to hand to a worker
  std::size_t consumed_ = 0;  // tasks before this one were waited for
  bool stop_ = false;
  std::vector<char> done_;  // per task, relative to first_
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

}  // namespace ember::data
