// The GEMM drivers' per-thread packing buffers and block arithmetic (gemm.cpp, gemm_bf16.cpp).
// Included only by files compiled for the baseline ISA (see microkernel.hpp's note).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>

#include "ember/base/config.hpp"
#include "ember/base/error.hpp"

namespace ember::cpu::detail {

inline std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
inline std::size_t round_up(std::size_t a, std::size_t b) { return ceil_div(a, b) * b; }

// A packing buffer: grown on demand, 64-byte aligned so packed slivers start on cache lines,
// and released with its owner (a thread_local one when the thread exits).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(ptr_); }

  void* get(std::size_t bytes) {
    if (bytes > cap_) {
      std::free(ptr_);
      ptr_ = nullptr;
      cap_ = 0;
      const std::size_t rounded = round_up(bytes, 64);
      ptr_ = ::aligned_alloc(64, rounded);
#if EMBER_HAS_EXCEPTIONS
      if (ptr_ == nullptr) throw std::bad_alloc();
#else
      EMBER_CHECK(ptr_ != nullptr, "matmul: out of memory allocating a " + std::to_string(rounded) +
                                       "-byte packing buffer");
#endif
      cap_ = rounded;
    }
    return ptr_;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t cap_ = 0;
};

}  // namespace ember::cpu::detail
