// The per-thread free lists of Note [Value blocks].
#include "fusion/block_pool.hpp"

#include <array>

#if defined(__SANITIZE_ADDRESS__)
#define EMBER_BLOCK_POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMBER_BLOCK_POOL_ASAN 1
#endif
#endif
#ifdef EMBER_BLOCK_POOL_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace ember::fusion::block_pool {

namespace {

constexpr std::size_t bytes_of(std::size_t c) { return (c + 1) * kGranule; }

struct FreeBlock {
  FreeBlock* next;
};

// Trivially destructible, so it stays usable for the whole life of its thread, after the
// Drain below has run too (then `closed` sends every block to the heap).
struct Lists {
  std::array<FreeBlock*, kClasses> head{};
  std::array<std::size_t, kClasses> count{};
  bool armed = false;   // the Drain of this thread is registered, and has not run
  bool closed = false;  // the Drain has run
};
// The initial-exec model: an access is an offset from the thread pointer rather than a call
// of __tls_get_addr (a third of the pool's cost per block). It takes static TLS space,
// which for a library opened with dlopen comes from the loader's small reserve; these few
// bytes fit in it.
__attribute__((tls_model("initial-exec"))) thread_local Lists tls_lists;

void poison(void* p, std::size_t c) {
#ifdef EMBER_BLOCK_POOL_ASAN
  ASAN_POISON_MEMORY_REGION(p, bytes_of(c));
#else
  (void)p, (void)c;
#endif
}
void unpoison(void* p, std::size_t c) {
#ifdef EMBER_BLOCK_POOL_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, bytes_of(c));
#else
  (void)p, (void)c;
#endif
}

// Gives this thread's listed blocks back to the heap when the thread ends.
struct Drain {
  ~Drain() {
    Lists& l = tls_lists;
    l.armed = false;
    l.closed = true;
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = l.head[c]) {
        unpoison(b, c);
        l.head[c] = b->next;
        ::operator delete(b);  // unsized: clang before 16 declares no sized delete by default
      }
      l.count[c] = 0;
    }
  }
};
thread_local Drain tls_drain;

}  // namespace

void* take(std::size_t c) {
  Lists& l = tls_lists;
  if (FreeBlock* b = l.head[c]) {
    unpoison(b, c);
    l.head[c] = b->next;
    --l.count[c];
    return b;
  }
  return ::operator new(bytes_of(c));
}

namespace {
// give() when this thread's list is full, not armed yet, or gone.
[[gnu::noinline]] void give_slow(void* p, std::size_t c) noexcept {
  Lists& l = tls_lists;
  if (!l.armed && !l.closed) {
    (void)&tls_drain;  // constructs it, so that its destructor runs at this thread's end
    l.armed = true;
  }
  if (!l.armed || l.count[c] >= kMaxFree) {
    ::operator delete(p);
    return;
  }
  give(p, c);
}
}  // namespace

void give(void* p, std::size_t c) noexcept {
  Lists& l = tls_lists;
  if (!l.armed || l.count[c] >= kMaxFree) return give_slow(p, c);
  auto* b = static_cast<FreeBlock*>(p);
  b->next = l.head[c];
  l.head[c] = b;
  ++l.count[c];
  poison(b, c);
}

}  // namespace ember::fusion::block_pool
