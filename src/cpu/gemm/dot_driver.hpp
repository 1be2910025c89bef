// The driver the dot-product GEMMs share (gemm_bf16.cpp: bf16 pairs into f32; gemm_i8.cpp: u8
// x s8 quads into int32): gemm.cpp's blocking — NC columns of B, KC-deep panels, MC rows of A —
// over a kernel family's packed layouts (microkernel.hpp), with B's panel packed by every
// thread and A's row blocks as tasks. Included only by files compiled for the baseline ISA.
#pragma once

#include <algorithm>
#include <cstddef>

#include "cpu/gemm/packing.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/base/config.hpp"

namespace ember::cpu::detail {

// A kernel family: its tile (mr x nr), the k steps its packed layout pads kc to, its block
// sizes (upper bounds), the tile kernel (kq = kp / group packed k groups: bf16 pairs, int8
// quads) and its packers.
template <class TA, class TB, class TC>
struct DotKernel {
  std::size_t mr, nr, k_step, group;
  std::size_t kc, mc, nc;
  void (*ukernel)(std::size_t kq, const TA* a, const TB* b, TC* c, std::ptrdiff_t c_rs,
                  std::size_t m, std::size_t n, bool load_c);
  void (*pack_a)(TA*, const TA*, std::ptrdiff_t, std::ptrdiff_t, std::size_t, std::size_t,
                 std::size_t);
  void (*pack_b)(TB*, const TB*, std::ptrdiff_t, std::ptrdiff_t, std::size_t, std::size_t,
                 std::size_t, std::size_t, std::size_t);
};

// C[i*c_rs + j] = sum_p A(i, p) B(p, j) for one product, by kernel family kr; products of
// fewer than min_parallel_macs multiply-adds run on the calling thread. Buffers::a() and
// Buffers::b() are the running thread's packing buffers, for A's blocks and B's panel: kept
// between products, 64-byte aligned (AMX's tile loads), never zeroed first. (Thread-locals
// at namespace scope in the caller's file: as function-local statics of this template the
// pool threads' buffers were reported leaked by LeakSanitizer.)
template <class Buffers, class TA, class TB, class TC>
void dot_gemm(const DotKernel<TA, TB, TC>& kr, std::size_t min_parallel_macs, std::size_t m,
              std::size_t n, std::size_t k, const TA* a, std::ptrdiff_t a_rs, std::ptrdiff_t a_cs,
              const TB* b, std::ptrdiff_t b_rs, std::ptrdiff_t b_cs, TC* c, std::ptrdiff_t c_rs) {
  using std::ptrdiff_t;
  using std::size_t;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (size_t i = 0; i < m; ++i) std::fill_n(c + static_cast<ptrdiff_t>(i) * c_rs, n, TC(0));
    return;
  }
  // k blocks balanced as gemm.cpp's k_block (k = 600 runs as 2 x 300, not 512 + 88).
  const size_t kb = round_up(ceil_div(k, ceil_div(k, kr.kc)), kr.k_step);
  const size_t threads = m * n * k >= min_parallel_macs ? num_threads() : 1;
  for (size_t jc = 0; jc < n; jc += kr.nc) {
    const size_t ncur = std::min(kr.nc, n - jc);
    const size_t slivers = ceil_div(ncur, kr.nr);
    for (size_t pc = 0; pc < k; pc += kb) {
      const size_t kcur = std::min(kb, k - pc);
      const size_t kp = round_up(kcur, kr.k_step);
      auto* panel = static_cast<TB*>(Buffers::b().get(slivers * kr.nr * kp * sizeof(TB)));
      const TB* bsrc = b + static_cast<ptrdiff_t>(pc) * b_rs + static_cast<ptrdiff_t>(jc) * b_cs;
      run_split(threads, slivers, 1, [&](size_t s0, size_t s1) {
        kr.pack_b(panel, bsrc, b_rs, b_cs, ncur, kcur, kp, s0, s1);
      });
      // Tasks: row blocks of at most MC rows, as many as a multiple of the threads and equal
      // to within one MR sliver (11 blocks of 192 rows over 2 threads would leave one idle
      // for a twelfth of the product), each split into column groups where there are fewer
      // row blocks than threads, so a short product still spreads over every thread.
      const size_t m_slivers = ceil_div(m, kr.mr);
      size_t row_blocks = ceil_div(m, kr.mc);
      if (row_blocks >= threads) row_blocks = std::min(m_slivers, round_up(row_blocks, threads));
      const size_t groups = row_blocks < threads ? std::min(slivers, threads) : 1;
      const size_t per_group = ceil_div(slivers, groups);
      const bool load_c = pc > 0;
      const auto work = [&](size_t t0, size_t t1) {
        for (size_t t = t0; t < t1; ++t) {
          const size_t rb = t / groups, g = t % groups;
          const size_t ic = m_slivers * rb / row_blocks * kr.mr;
          const size_t mcur = std::min(m, m_slivers * (rb + 1) / row_blocks * kr.mr) - ic;
          const size_t s0 = g * per_group, s1 = std::min(slivers, s0 + per_group);
          if (s0 >= s1 || mcur == 0) continue;
          auto* pa = static_cast<TA*>(Buffers::a().get(round_up(mcur, kr.mr) * kp * sizeof(TA)));
          kr.pack_a(pa, a + static_cast<ptrdiff_t>(ic) * a_rs + static_cast<ptrdiff_t>(pc) * a_cs,
                    a_rs, a_cs, mcur, kcur, kp);
          for (size_t s = s0; s < s1; ++s) {
            const size_t j = s * kr.nr;
            const size_t w = std::min(kr.nr, ncur - j);
            for (size_t i = 0; i < mcur; i += kr.mr) {
              kr.ukernel(kp / kr.group, pa + i * kp, panel + s * kr.nr * kp,
                         c + static_cast<ptrdiff_t>(ic + i) * c_rs + static_cast<ptrdiff_t>(jc + j),
                         c_rs, std::min(kr.mr, mcur - i), w, load_c);
            }
          }
        }
      };
      run_split(threads, row_blocks * groups, 1, work);
    }
  }
}

}  // namespace ember::cpu::detail
