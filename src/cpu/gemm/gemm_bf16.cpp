// The bf16 GEMM (gemm_bf16.hpp): the bf16 kernels' packed layouts (microkernel.hpp) for the
// dot-product driver (dot_driver.hpp), the portable model of vdpbf16ps's arithmetic, and the
// choice of kernel. Compiled for the baseline ISA; the kernels live in
// microkernel_avx512bf16.cpp and microkernel_amx.cpp.
#include "cpu/gemm/gemm_bf16.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cpu/gemm/dot_driver.hpp"
#include "cpu/gemm/microkernel.hpp"
#include "cpu/gemm/packing.hpp"
#include "cpu/isa.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/base/config.hpp"
#include "ember/base/error.hpp"

namespace ember::cpu {
namespace {

using detail::Bf16Kernel;
using std::ptrdiff_t;
using std::size_t;
using std::uint16_t;

Atomic<Bf16Kernel> g_forced{Bf16Kernel::Auto};

// The forced family where this CPU runs it, else the one of cpu::active_dot_isa(), else Auto
// (none: bf16 products are widened).
Bf16Kernel resolve_kernel() {
  const Bf16Kernel forced = g_forced.load(std::memory_order_relaxed);
  if (forced != Bf16Kernel::Auto && detail::gemm_bf16_supported(forced)) return forced;
  const DotIsa dot = active_dot_isa();
  const Bf16Kernel active = dot == DotIsa::Amx          ? Bf16Kernel::Amx
                            : dot == DotIsa::Avx512Bf16 ? Bf16Kernel::Avx512Bf16
                                                        : Bf16Kernel::Auto;
  return detail::gemm_bf16_supported(active) ? active : Bf16Kernel::Auto;
}

// ---------------------------------------------------------------------------------------
// The portable model of one vdpbf16ps step (Note [bf16 dot products] in gemm_bf16.hpp).

// A bf16 input as vdpbf16ps reads it: below f32's normal range, a zero of its sign.
float daz(uint16_t h) {
  std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// A result as vdpbf16ps writes it: below f32's normal range, a zero of its sign.
float ftz(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }

void ukernel_emulated(size_t kq, const uint16_t* a, const uint16_t* b, float* c, ptrdiff_t c_rs,
                      size_t m, size_t n, bool load_c) {
  constexpr int MR = detail::kBf16Mr, NR = detail::kBf16Nr;
  float acc[MR][NR] = {};
  for (size_t q = 0; q < kq; ++q, a += 2 * MR, b += 2 * NR) {
    for (int i = 0; i < MR; ++i) {
      const float a_even = daz(a[2 * i]), a_odd = daz(a[2 * i + 1]);
      for (int j = 0; j < NR; ++j) {
        // Products of bf16 values are exact in f32: one fma is the step's one rounding.
        const float t = ftz(std::fma(a_odd, daz(b[2 * j + 1]), acc[i][j]));
        acc[i][j] = ftz(std::fma(a_even, daz(b[2 * j]), t));
      }
    }
  }
  for (size_t i = 0; i < m; ++i) {
    float* row = c + static_cast<ptrdiff_t>(i) * c_rs;
    for (size_t j = 0; j < n; ++j) row[j] = load_c ? row[j] + acc[i][j] : acc[i][j];
  }
}

// ---------------------------------------------------------------------------------------
// Packing (layouts in microkernel.hpp). A block rows x kc of A becomes ceil(rows / MR)
// slivers of MR * kp elements, kp = kc rounded up to the kernel's k step; B's block kc x cols
// ceil(cols / NR) slivers of NR * kp. Rows, columns and k steps past the block are zeros.

template <int MR>
void pack_a_pairs(uint16_t* dst, const uint16_t* a, ptrdiff_t rs, ptrdiff_t cs, size_t rows,
                  size_t kc, size_t kp) {
  for (size_t s = 0; s < rows; s += MR, dst += MR * kp) {
    const size_t r = std::min<size_t>(MR, rows - s);
    const uint16_t* src = a + static_cast<ptrdiff_t>(s) * rs;
    if (r == MR && cs == 1) {
      // Rows contiguous along k: a pair of k steps is one 32-bit word of a row, so the
      // sliver's whole pairs are a transpose of words (detail::transpose_rows).
      const uint16_t* rp[MR];
      const float* words[MR];
      for (int i = 0; i < MR; ++i) {
        rp[i] = src + i * rs;
        words[i] = reinterpret_cast<const float*>(rp[i]);
      }
      detail::transpose_rows<MR>(reinterpret_cast<float*>(dst), words, kc / 2);
      for (size_t p = kc / 2 * 2; p < kp; ++p) {  // an odd last k step, then the padding
        uint16_t* d = dst + (p / 2) * 2 * MR + (p % 2);
        for (int i = 0; i < MR; ++i) d[2 * i] = p < kc ? rp[i][p] : uint16_t{0};
      }
      continue;
    }
    for (size_t p = 0; p < kp; ++p) {
      uint16_t* d = dst + (p / 2) * 2 * MR + (p % 2);
      if (p >= kc) {
        for (int i = 0; i < MR; ++i) d[2 * i] = 0;
        continue;
      }
      const uint16_t* col = src + static_cast<ptrdiff_t>(p) * cs;
      for (size_t i = 0; i < r; ++i) d[2 * i] = col[static_cast<ptrdiff_t>(i) * rs];
      for (size_t i = r; i < MR; ++i) d[2 * i] = 0;
    }
  }
}

template <int MR>
void pack_a_rows(uint16_t* dst, const uint16_t* a, ptrdiff_t rs, ptrdiff_t cs, size_t rows,
                 size_t kc, size_t kp) {
  for (size_t s = 0; s < rows; s += MR, dst += MR * kp) {
    const size_t r = std::min<size_t>(MR, rows - s);
    for (size_t i = 0; i < MR; ++i) {
      uint16_t* d = dst + i * kp;
      if (i >= r) {
        std::fill_n(d, kp, uint16_t{0});
        continue;
      }
      const uint16_t* row = a + static_cast<ptrdiff_t>(s + i) * rs;
      if (cs == 1) {
        std::memcpy(d, row, kc * sizeof(uint16_t));
      } else {
        for (size_t p = 0; p < kc; ++p) d[p] = row[static_cast<ptrdiff_t>(p) * cs];
      }
      std::fill(d + kc, d + kp, uint16_t{0});
    }
  }
}

// Slivers [s_begin, s_end) of B's kc x cols block.
template <int NR>
void pack_b_pairs(uint16_t* dst, const uint16_t* b, ptrdiff_t rs, ptrdiff_t cs, size_t cols,
                  size_t kc, size_t kp, size_t s_begin, size_t s_end) {
  for (size_t s = s_begin; s < s_end; ++s) {
    uint16_t* d = dst + s * NR * kp;
    const size_t j0 = s * NR;
    const size_t w = std::min<size_t>(NR, cols - j0);
    for (size_t p = 0; p < kp; ++p) {
      uint16_t* out = d + (p / 2) * 2 * NR + (p % 2);
      if (p >= kc) {
        for (int j = 0; j < NR; ++j) out[2 * j] = 0;
        continue;
      }
      const uint16_t* row = b + static_cast<ptrdiff_t>(p) * rs + static_cast<ptrdiff_t>(j0) * cs;
#if defined(__SSE2__)
      // Rows p and p + 1 of a full sliver of row-major B: interleaved 8 columns at a time.
      if (cs == 1 && w == NR && p % 2 == 0 && p + 1 < kc) {
        static_assert(NR % 8 == 0);
        const uint16_t* next = row + rs;
        for (int j = 0; j < NR; j += 8) {
          const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j));
          const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(next + j));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * j), _mm_unpacklo_epi16(lo, hi));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * j + 8), _mm_unpackhi_epi16(lo, hi));
        }
        ++p;  // both rows of the pair are written
        continue;
      }
#endif
      if (cs == 1) {
        for (size_t j = 0; j < w; ++j) out[2 * j] = row[j];
      } else {
        for (size_t j = 0; j < w; ++j) out[2 * j] = row[static_cast<ptrdiff_t>(j) * cs];
      }
      for (size_t j = w; j < NR; ++j) out[2 * j] = 0;
    }
  }
}

using KernelInfo = detail::DotKernel<uint16_t, uint16_t, float>;

// Block sizes: a kc-deep B sliver (32 columns of bf16 at kc 512: 32 KiB) stays in L1 while
// A's MC x KC block streams from L2 — the bytes of gemm.cpp's f32 blocks at twice the depth.
// Note [Deep bf16 blocks]: AVX512_BF16's kernel takes k blocks of 2048 instead. Every k block
// past the first reads and writes the f32 C again, and with products at twice f32's rate
// that traffic weighs twice as much: at 2048^3, C (16 MB, a row block's 1.5 MB past L2) went
// through memory four times at kc 512. At kc 2048 (A's block 96 x 2048 bf16, 384 KiB, and a
// 128 KiB B sliver in L2) the product took 19.8-21.0 -> 18.2-19.0 ms on an AMD Zen 5
// (alternated, four pairs; PyTorch's oneDNN bf16 matmul 18.4-20.2 in the same runs).
KernelInfo kernel_for(Bf16Kernel kernel) {
  using namespace detail;
  switch (kernel) {
#if EMBER_HAS_X86_KERNELS
    case Bf16Kernel::Amx:
      return {kAmxMr,
              kAmxNr,
              kAmxK,
              2,
              512,
              256,
              4096,
              &ukernel_amx_bf16,
              &pack_a_rows<kAmxMr>,
              &pack_b_pairs<kAmxNr>};
    case Bf16Kernel::Avx512Bf16:  // Note [Deep bf16 blocks]
      return {kBf16Mr,
              kBf16Nr,
              2,
              2,
              2048,
              96,
              4096,
              &ukernel_avx512bf16,
              &pack_a_pairs<kBf16Mr>,
              &pack_b_pairs<kBf16Nr>};
#endif
    default:  // the model of vdpbf16ps: Avx512Bf16's blocks, so its sums are in the same order
      return {kBf16Mr,
              kBf16Nr,
              2,
              2,
              2048,
              96,
              4096,
              &ukernel_emulated,
              &pack_a_pairs<kBf16Mr>,
              &pack_b_pairs<kBf16Nr>};
  }
}

// The packing buffers of each thread (dot_driver.hpp).
EMBER_THREAD_LOCAL detail::AlignedBuffer t_pack_a;
EMBER_THREAD_LOCAL detail::AlignedBuffer t_pack_b;
struct Buffers {
  static detail::AlignedBuffer& a() { return t_pack_a; }
  static detail::AlignedBuffer& b() { return t_pack_b; }
};

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr size_t kMinParallelMacs = size_t{1} << 20;

}  // namespace

void gemm_bf16(size_t batch, size_t m, size_t n, size_t k, const uint16_t* a, ptrdiff_t a_bs,
               ptrdiff_t a_rs, ptrdiff_t a_cs, const uint16_t* b, ptrdiff_t b_bs, ptrdiff_t b_rs,
               ptrdiff_t b_cs, float* c, ptrdiff_t c_bs, ptrdiff_t c_rs) {
  Bf16Kernel kernel = resolve_kernel();
  if (kernel == Bf16Kernel::Auto) kernel = Bf16Kernel::Emulated;
  const KernelInfo kr = kernel_for(kernel);
  for (size_t t = 0; t < batch; ++t) {
    const auto bi = static_cast<ptrdiff_t>(t);
    detail::dot_gemm<Buffers>(kr, kMinParallelMacs, m, n, k, a + bi * a_bs, a_rs, a_cs,
                              b + bi * b_bs, b_rs, b_cs, c + bi * c_bs, c_rs);
  }
}

bool gemm_bf16_native() { return resolve_kernel() != Bf16Kernel::Auto; }

namespace detail {

void gemm_bf16_force(Bf16Kernel kernel) { g_forced.store(kernel, std::memory_order_relaxed); }

bool gemm_bf16_supported(Bf16Kernel kernel) {
  switch (kernel) {
    case Bf16Kernel::Auto:
    case Bf16Kernel::Emulated:
      return true;
    case Bf16Kernel::Avx512Bf16:
      return EMBER_HAS_X86_KERNELS && dot_isa_supported(DotIsa::Avx512Bf16);
    case Bf16Kernel::Amx:
      return EMBER_HAS_X86_KERNELS && dot_isa_supported(DotIsa::Amx);
  }
  return false;
}

Bf16Kernel gemm_bf16_active() { return resolve_kernel(); }

}  // namespace detail
}  // namespace ember::cpu
