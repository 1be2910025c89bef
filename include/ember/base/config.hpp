// ember's build configuration: the one place that says what the platform offers.
//
// A hosted build (the default) has threads, exceptions, run-time type information, a
// filesystem and backend libraries loaded at run time. An embedded build (EMBER_EMBEDDED
// defined by the build, e.g. bare-metal Cortex-M with -fno-exceptions -fno-rtti; see
// docs/embedded.md) has none of them: its Cpu backend runs on the calling thread, errors go
// to the fail handler the application installs (set_fail_handler, base/error.hpp), and the
// stand-ins below take the place of the thread primitives. Code that differs between the
// two reads the switches here, never the compiler's own macros.
#pragma once

#include <cstddef>

#if defined(EMBER_EMBEDDED)
#define EMBER_HOSTED 0
#else
#define EMBER_HOSTED 1
#endif

// Exceptions follow the compiler (an embedded build is compiled with -fno-exceptions).
#if defined(__cpp_exceptions)
#define EMBER_HAS_EXCEPTIONS 1
#else
#define EMBER_HAS_EXCEPTIONS 0
#endif

#include <atomic>  // std::memory_order (and std::atomic in a hosted build)
#if EMBER_HOSTED
#include <mutex>
#endif

// The x86 kernel variants (AVX2, AVX-512 element-wise rows, GEMM micro-kernels, GEMV) are
// compiled and dispatched to only in a hosted x86 build; elsewhere the portable kernels run.
#if EMBER_HOSTED && (defined(__x86_64__) || defined(__i386__))
#define EMBER_HAS_X86_KERNELS 1
#else
#define EMBER_HAS_X86_KERNELS 0
#endif

namespace ember {

#if EMBER_HOSTED
// Thread-local state; in an embedded build (one thread) plain static storage. A block-scope
// variable is declared `static EMBER_THREAD_LOCAL`, so it is static in both builds.
#define EMBER_THREAD_LOCAL thread_local
using Mutex = std::mutex;
template <class T>
using Atomic = std::atomic<T>;
#else
#define EMBER_THREAD_LOCAL
// One thread: locking is nothing. Satisfies Lockable, so std::lock_guard takes it.
struct Mutex {
  void lock() {}
  void unlock() {}
  bool try_lock() { return true; }
};
// The subset of std::atomic that ember uses, for one thread (Cortex-M4 has no 64-bit
// atomics, and no other thread could race).
template <class T>
class Atomic {
 public:
  constexpr Atomic(T v = T{}) : v_(v) {}  // NOLINT(google-explicit-constructor)
  Atomic(const Atomic&) = delete;
  Atomic& operator=(const Atomic&) = delete;
  T load(std::memory_order = std::memory_order_seq_cst) const { return v_; }
  void store(T v, std::memory_order = std::memory_order_seq_cst) { v_ = v; }
  T fetch_add(T d, std::memory_order = std::memory_order_seq_cst) {
    const T old = v_;
    v_ = static_cast<T>(v_ + d);
    return old;
  }
  T exchange(T v, std::memory_order = std::memory_order_seq_cst) {
    const T old = v_;
    v_ = v;
    return old;
  }
  bool compare_exchange_strong(T& expected, T desired,
                               std::memory_order = std::memory_order_seq_cst) {
    if (v_ == expected) {
      v_ = desired;
      return true;
    }
    expected = v_;
    return false;
  }
  operator T() const { return v_; }  // NOLINT(google-explicit-constructor)
  Atomic& operator=(T v) {
    v_ = v;
    return *this;
  }

 private:
  T v_;
};
#endif

}  // namespace ember
