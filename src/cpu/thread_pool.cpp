#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <pthread.h>

namespace ember::cpu {
namespace {

thread_local bool t_inside_parallel = false;

// The integer an environment variable holds, when it holds one within [lo, hi].
std::optional<long> env_integer(const char* name, long lo, long hi) {
  const char* env = std::getenv(name);
  if (env == nullptr) return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (end == env || v < lo) return std::nullopt;
  return std::min(v, hi);
}

// How long an idle thread spins before it sleeps (Note [Spinning]): EMBER_SPIN_US, in
// microseconds; 0 sleeps at once.
std::chrono::nanoseconds configured_spin() {
  return std::chrono::microseconds(env_integer("EMBER_SPIN_US", 0, 100000).value_or(300));
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or `spin` has passed (the caller then checks again under its mutex).
template <class Done>
void spin_until(std::chrono::nanoseconds spin, Done&& done) {
  const auto t0 = std::chrono::steady_clock::now();
  for (unsigned i = 1; spin.count() > 0 && !done(); ++i) {
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() - t0 > spin) return;
  }
}

std::size_t configured_threads() {
  if (const auto v = env_integer("EMBER_NUM_THREADS", 1, 256)) return static_cast<std::size_t>(*v);
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : hc;
}

// Workers wait for a generation counter to change, then each takes chunks from a shared
// cursor guarded by the mutex (chunks are coarse, so contention is negligible).
//
// Note [Spinning]: a training step runs thousands of small parallel regions a few
// microseconds apart. Sleeping on the condition variable between them cost a futex wake in
// the caller and a context switch in each worker per region, and the caller's own sleep
// until the last chunk was done another: a fifth of an LSTM step's time went to the
// scheduler. So an idle worker first spins on the generation counter, and the caller on
// the count of chunks left, for EMBER_SPIN_US (300 µs by default) before sleeping as
// before; a region posted to spinning workers needs no wake. The counters are atomics
// changed under the mutex, so a thread that goes to sleep never misses a change (it checks
// again under the mutex), and the caller wakes workers only if one sleeps.
//
// Note [Fork]: a forked child has the forking thread alone. A lock another thread held at
// the fork stays held in the child forever, and a worker still starting (inside the C
// library or a sanitizer's runtime) may hold locks the child's first allocation needs. So
// fork waits, in the prepare handler, until no parallel region runs and every worker is
// parked in its wait, and keeps both mutexes across the fork; the parked workers cannot wake
// without the mutex. The child then unlocks them and runs every region on its one thread:
// its worker objects name threads it does not have, so they are left unjoined.
class ThreadPool {
 public:
  explicit ThreadPool(std::size_t n)
      : n_threads_(n),
        spin_(configured_spin()),
        workers_(std::make_unique<std::vector<std::thread>>()) {
    for (std::size_t i = 1; i < n; ++i) workers_->emplace_back([this] { worker_loop(); });
  }
  ~ThreadPool() {
    if (!workers_) return;  // a forked child: the threads are not here to join
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : *workers_) w.join();
  }
  std::size_t size() const { return n_threads_; }

  void run(std::size_t n_chunks, const std::function<void(std::size_t)>* job) {
    std::unique_lock run_lk(run_mu_);  // one parallel region at a time
    bool wake;
    {
      std::lock_guard lk(mu_);
      job_ = job;
      next_chunk_ = 0;
      n_chunks_ = n_chunks;
      pending_ = n_chunks;
      error_ = nullptr;
      ++generation_;
      wake = parked_ > 0;
    }
    if (wake) cv_.notify_all();
    work_until_done();
    spin_until(spin_, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  // The fork handlers (Note [Fork]). A fork from inside a parallel region's chunk would wait
  // for its own region, so there the handlers stand aside.
  void before_fork() {
    if (t_inside_parallel) return;
    run_mu_.lock();
    std::unique_lock lk(mu_);
    parked_cv_.wait(lk, [&] { return parked_ == workers_->size(); });
    (void)lk.release();  // mu_ stays locked until after the fork
    held_over_fork_ = true;
  }
  void after_fork_in_parent() {
    if (!held_over_fork_) return;
    held_over_fork_ = false;
    mu_.unlock();
    run_mu_.unlock();
  }
  void after_fork_in_child() {
    if (!held_over_fork_) return;
    held_over_fork_ = false;
    (void)workers_.release();  // std::thread objects of threads the child lacks: not joined
    n_threads_ = 1;
    mu_.unlock();
    run_mu_.unlock();
  }

 private:
  void work_until_done() {
    for (;;) {
      std::size_t chunk;
      const std::function<void(std::size_t)>* job;
      {
        std::lock_guard lk(mu_);
        if (job_ == nullptr || next_chunk_ >= n_chunks_) return;
        chunk = next_chunk_++;
        job = job_;
      }
      try {
        t_inside_parallel = true;
        (*job)(chunk);
        t_inside_parallel = false;
      } catch (...) {
        t_inside_parallel = false;
        std::lock_guard lk(mu_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard lk(mu_);
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
  void worker_loop() {
    std::uint64_t seen = 0;
    for (;;) {
      spin_until(spin_, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      {
        std::unique_lock lk(mu_);
        if (!stop_ && generation_ == seen) {
          ++parked_;
          parked_cv_.notify_all();
          cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
          --parked_;
        }
        if (stop_) return;
        seen = generation_;
      }
      work_until_done();
    }
  }

  std::size_t n_threads_;
  std::chrono::nanoseconds spin_;
  std::unique_ptr<std::vector<std::thread>> workers_;
  std::mutex run_mu_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_, parked_cv_;
  bool stop_ = false;
  bool held_over_fork_ = false;
  std::size_t parked_ = 0;  // workers asleep, waiting for a generation
  // Changed under mu_; read without it while spinning (Note [Spinning]).
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::size_t> pending_{0};
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t next_chunk_ = 0, n_chunks_ = 0;
  std::exception_ptr error_;
};

ThreadPool* make_pool() {
  static ThreadPool p(configured_threads());
  pthread_atfork([] { p.before_fork(); }, [] { p.after_fork_in_parent(); },
                 [] { p.after_fork_in_child(); });
  return &p;
}

ThreadPool& pool() {
  static ThreadPool* p = make_pool();
  return *p;
}

}  // namespace

std::size_t num_threads() { return pool().size(); }

void parallel_for(std::size_t begin, std::size_t end, std::size_t grain, RangeFn fn) {
  if (end <= begin) return;
  const std::size_t n = end - begin;
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t threads = t_inside_parallel ? 1 : num_threads();
  const std::size_t chunks = std::min(threads, (n + grain - 1) / grain);
  if (chunks <= 1) {
    fn(begin, end);
    return;
  }
  const std::size_t per = (n + chunks - 1) / chunks;
  const std::function<void(std::size_t)> job = [&](std::size_t c) {
    const std::size_t b = begin + c * per;
    const std::size_t e = std::min(end, b + per);
    if (b < e) fn(b, e);
  };
  pool().run(chunks, &job);
}

}  // namespace ember::cpu
