// Interrupter and SigintGuard: a shared stop flag, and Ctrl-C routed to it.
#include "ember/train/interrupter.hpp"

#include <csignal>

namespace ember::train {

Interrupter::Interrupter() : state_(std::make_shared<State>()) {}
void Interrupter::stop() { state_->stop.store(true); }
void Interrupter::stop_at_step(std::size_t steps) { state_->at_step.store(steps); }
void Interrupter::reset() {
  state_->stop.store(false);
  state_->at_step.store(std::numeric_limits<std::size_t>::max());
}
bool Interrupter::should_stop(std::size_t steps) const {
  return state_->stop.load() || steps >= state_->at_step.load();
}
bool Interrupter::stop_requested() const { return state_->stop.load(); }

namespace {
// The flag the handler sets: the innermost guard's. A lock-free atomic pointer to a
// lock-free atomic bool is what a signal handler may touch.
std::atomic<std::atomic<bool>*> g_flag{nullptr};
SigintGuard* g_guard = nullptr;  // the innermost guard (main-thread bookkeeping only)

extern "C" void on_sigint(int) {
  std::atomic<bool>* flag = g_flag.load();
  if (flag == nullptr || flag->load()) {
    // A second Ctrl-C (or one with no run to stop): the default action, now.
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  flag->store(true);
}
}  // namespace

SigintGuard::SigintGuard(const Interrupter& interrupter) : interrupter_(interrupter) {
  static_assert(std::atomic<std::atomic<bool>*>::is_always_lock_free);
  static_assert(std::atomic<bool>::is_always_lock_free);
  previous_guard_ = g_guard;
  g_guard = this;
  g_flag.store(&interrupter_.state_->stop);
  auto* old = new struct sigaction;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking read returns, the loop sees the flag
  sigaction(SIGINT, &sa, old);
  previous_action_ = old;
}

SigintGuard::~SigintGuard() {
  auto* old = static_cast<struct sigaction*>(previous_action_);
  sigaction(SIGINT, old, nullptr);
  delete old;
  g_guard = previous_guard_;
  g_flag.store(previous_guard_ ? &previous_guard_->interrupter_.state_->stop : nullptr);
}

}  // namespace ember::train
