// Per-thread free lists of fixed-size blocks for the Fusion decorator's values and handles'
// control blocks (std::allocate_shared with BlockAllocator). Private to src/fusion/.
//
// Note [Value blocks]: every recorded op makes a Value and the control block of its user
// handle, and a flush frees them a stream's worth at a time (up to 256 records); malloc's
// per-thread cache holds only a few blocks of a size, so the rest went through its slower
// shared bins both ways, a large part of the recording path's cost per op. Here a freed
// block goes onto the freeing thread's list of its size class and the next allocation of
// that class on that thread takes it back: a push and a pop. A list holds at most
// kMaxFree blocks (the rest go back to the heap), so a burst does not stay reserved. A
// block may be freed on another thread than the one that allocated it (a handle dropped
// there); it then joins that thread's list, and every block is plain ::operator new memory
// of its class's size, so any list or the heap may take it. A thread's lists go back to
// the heap when it ends; a block freed after that (by a later thread_local destructor of
// the same thread) goes straight to the heap. Under AddressSanitizer a listed block is
// poisoned, so a use after its free is still reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace ember::fusion {

namespace block_pool {

constexpr std::size_t kGranule = 64;  // block sizes are multiples of this
constexpr std::size_t kClasses = 8;   // so blocks of up to 512 bytes are listed
constexpr std::size_t kMaxFree = 2048;

constexpr std::size_t class_of(std::size_t bytes) { return (bytes + kGranule - 1) / kGranule - 1; }

// A block of class c (c < kClasses): from this thread's list, else from the heap.
void* take(std::size_t c);
// Returns a block of class c to this thread's list (or the heap when the list is full or
// the thread's lists are gone).
void give(void* p, std::size_t c) noexcept;

}  // namespace block_pool

template <class T>
struct BlockAllocator {
  using value_type = T;
  BlockAllocator() = default;
  template <class U>
  BlockAllocator(const BlockAllocator<U>&) {}  // NOLINT: rebinding, as allocators do

  static constexpr std::size_t kClass = block_pool::class_of(sizeof(T));
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);

  T* allocate(std::size_t n) {
    if (n != 1 || kClass >= block_pool::kClasses) return std::allocator<T>().allocate(n);
    return static_cast<T*>(block_pool::take(kClass));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n != 1 || kClass >= block_pool::kClasses) return std::allocator<T>().deallocate(p, n);
    block_pool::give(p, kClass);
  }
  template <class U>
  bool operator==(const BlockAllocator<U>&) const {
    return true;
  }
};

}  // namespace ember::fusion
