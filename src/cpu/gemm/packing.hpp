// What the GEMM drivers (gemm.cpp, dot_driver.hpp) share: block arithmetic, the split of work
// over threads, per-thread packing buffers and the transpose of row-major 32-bit elements into
// k-major slivers. Included only by files compiled for the baseline ISA (see microkernel.hpp's
// note).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "cpu/thread_pool.hpp"
#include "ember/base/config.hpp"
#include "ember/base/error.hpp"

namespace ember::cpu::detail {

inline std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
inline std::size_t round_up(std::size_t a, std::size_t b) { return ceil_div(a, b) * b; }

// Runs work(i0, i1) over [0, count): on the thread pool, or inline when threads <= 1.
template <class F>
void run_split(std::size_t threads, std::size_t count, std::size_t grain, F&& work) {
  if (threads <= 1) return work(std::size_t{0}, count);
  parallel_for(0, count, grain, work);
}

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

// MR rows of 32-bit elements, row i at rp[i], written k-major: dst[p * MR + i] = rp[i][p] for
// p < kc. SSE2 is part of the x86-64 baseline, and a 4x4 transpose moves several elements per
// instruction where the plain loop below it moves one; shuffles move bits and never compute
// on them, so the elements may be any 32-bit data (f32 values, pairs of bf16).
template <int MR>
void transpose_rows(float* dst, const float* const* rp, std::size_t kc) {
  std::size_t p = 0;
#if defined(__SSE2__)
  if constexpr (MR % 2 == 0) {
    for (; p + 4 <= kc; p += 4) {
      float* d = dst + p * MR;
      int i = 0;
      for (; i + 4 <= MR; i += 4) {
        __m128 r0 = _mm_loadu_ps(rp[i] + p), r1 = _mm_loadu_ps(rp[i + 1] + p);
        __m128 r2 = _mm_loadu_ps(rp[i + 2] + p), r3 = _mm_loadu_ps(rp[i + 3] + p);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_storeu_ps(d + i, r0);
        _mm_storeu_ps(d + MR + i, r1);
        _mm_storeu_ps(d + 2 * MR + i, r2);
        _mm_storeu_ps(d + 3 * MR + i, r3);
      }
      if (i < MR) {  // the last two rows when MR % 4 == 2
        const __m128 r0 = _mm_loadu_ps(rp[i] + p), r1 = _mm_loadu_ps(rp[i + 1] + p);
        const __m128 lo = _mm_unpacklo_ps(r0, r1), hi = _mm_unpackhi_ps(r0, r1);
        _mm_storel_pi(reinterpret_cast<__m64*>(d + i), lo);
        _mm_storeh_pi(reinterpret_cast<__m64*>(d + MR + i), lo);
        _mm_storel_pi(reinterpret_cast<__m64*>(d + 2 * MR + i), hi);
        _mm_storeh_pi(reinterpret_cast<__m64*>(d + 3 * MR + i), hi);
      }
    }
  }
#endif
  // (memcpy: the rows of 32-bit words may be bf16 pairs at 2-byte alignment.)
  for (; p < kc; ++p)
    for (int i = 0; i < MR; ++i) std::memcpy(dst + p * MR + i, rp[i] + p, sizeof(float));
}

}  // namespace ember::cpu::detail
