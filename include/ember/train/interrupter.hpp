// Interrupter: asks a running Learner to stop cleanly after the current optimizer step (it
// then saves a checkpoint that `resume` continues from). Copies share one flag, so a copy
// handed to another thread, a callback or a test stops the same run. While a Learner
// fits, Ctrl-C (SIGINT) sets the flag too (SigintGuard); a second Ctrl-C restores the
// default handler's behaviour and ends the program at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <limits>
#include <memory>

namespace ember::train {

class Interrupter {
 public:
  Interrupter();
  // Requests a stop (thread-safe, async-signal-safe on the flag).
  void stop();
  // Requests a stop once `steps` optimizer steps have run in total (for budgets, tests).
  void stop_at_step(std::size_t steps);
  // Clears both requests.
  void reset();
  // Whether the run should stop now, having completed `steps` optimizer steps in total.
  bool should_stop(std::size_t steps) const;
  bool stop_requested() const;

 private:
  friend class SigintGuard;
  struct State {
    std::atomic<bool> stop{false};
    std::atomic<std::size_t> at_step{std::numeric_limits<std::size_t>::max()};
  };
  std::shared_ptr<State> state_;
};

// Installs a SIGINT handler for its lifetime that stops `interrupter` (the previous handler
// is restored on destruction). Guards nest: the innermost one receives the signal.
class SigintGuard {
 public:
  explicit SigintGuard(const Interrupter& interrupter);
  ~SigintGuard();
  SigintGuard(const SigintGuard&) = delete;
  SigintGuard& operator=(const SigintGuard&) = delete;

 private:
  Interrupter interrupter_;
  SigintGuard* previous_guard_ = nullptr;
  void* previous_action_ = nullptr;  // struct sigaction, owned
};

}  // namespace ember::train
