// The int8 GEMM (gemm_i8.hpp): the int8 kernels' packed layouts (microkernel.hpp) for the
// dot-product driver (dot_driver.hpp), the portable kernel, and the choice of kernel. Compiled for
// the baseline ISA; the kernels with dot-product instructions live in microkernel_avx512vnni.cpp
// and microkernel_amx_int8.cpp.
#include "cpu/gemm/gemm_i8.hpp"

#include <algorithm>
#include <cstring>

#include "cpu/gemm/dot_driver.hpp"
#include "cpu/gemm/microkernel.hpp"
#include "cpu/gemm/packing.hpp"
#include "cpu/isa.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/base/config.hpp"

namespace ember::cpu {
namespace {

using detail::I8Kernel;
using std::int32_t;
using std::int8_t;
using std::ptrdiff_t;
using std::size_t;
using std::uint8_t;

Atomic<I8Kernel> g_forced{I8Kernel::Auto};

I8Kernel resolve_kernel() {
  const I8Kernel forced = g_forced.load(std::memory_order_relaxed);
  if (forced != I8Kernel::Auto && detail::gemm_u8s8_supported(forced)) return forced;
  if (active_isa() != Isa::Avx512) return I8Kernel::Portable;
  if (active_dot_isa() == DotIsa::Amx && int8_dot_supported(Int8Dot::Amx)) return I8Kernel::Amx;
  if (int8_dot_supported(Int8Dot::Avx512Vnni)) return I8Kernel::Avx512Vnni;
  return I8Kernel::Portable;
}

// The portable kernel on the quad layout: products widened to int32, sums in uint32 so that
// they wrap as the instructions' do (Note [int8 sums]).
void ukernel_portable(size_t kq, const uint8_t* a, const int8_t* b, int32_t* c, ptrdiff_t c_rs,
                      size_t m, size_t n, bool load_c) {
  constexpr int MR = detail::kI8Mr, NR = detail::kI8Nr;
  std::uint32_t acc[MR][NR] = {};
  for (size_t q = 0; q < kq; ++q, a += 4 * MR, b += 4 * NR) {
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        std::int32_t s = 0;
        for (int t = 0; t < 4; ++t) s += std::int32_t(a[4 * i + t]) * std::int32_t(b[4 * j + t]);
        acc[i][j] += static_cast<std::uint32_t>(s);
      }
    }
  }
  for (size_t i = 0; i < m; ++i) {
    int32_t* row = c + static_cast<ptrdiff_t>(i) * c_rs;
    for (size_t j = 0; j < n; ++j) {
      const std::uint32_t v = load_c ? static_cast<std::uint32_t>(row[j]) + acc[i][j] : acc[i][j];
      row[j] = static_cast<int32_t>(v);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Packing (layouts in microkernel.hpp). A block rows x kc of A becomes ceil(rows / MR)
// slivers of MR * kp bytes, kp = kc rounded up to the kernel's k step; B's block kc x cols
// ceil(cols / NR) slivers of NR * kp. Rows, columns and k steps past the block are zeros.

template <int MR>
void pack_a_quads(uint8_t* dst, const uint8_t* a, ptrdiff_t rs, ptrdiff_t cs, size_t rows,
                  size_t kc, size_t kp) {
  for (size_t s = 0; s < rows; s += MR, dst += MR * kp) {
    const size_t r = std::min<size_t>(MR, rows - s);
    const uint8_t* src = a + static_cast<ptrdiff_t>(s) * rs;
    if (r == MR && cs == 1) {
      // Rows contiguous along k: a quad of k steps is one 32-bit word of a row, so the
      // sliver's whole quads are a transpose of words (detail::transpose_rows).
      const float* words[MR];
      for (int i = 0; i < MR; ++i) words[i] = reinterpret_cast<const float*>(src + i * rs);
      detail::transpose_rows<MR>(reinterpret_cast<float*>(dst), words, kc / 4);
      for (size_t p = kc / 4 * 4; p < kp; ++p) {  // a short last quad, then the padding
        uint8_t* d = dst + (p / 4) * 4 * MR + (p % 4);
        for (int i = 0; i < MR; ++i) d[4 * i] = p < kc ? src[i * rs + ptrdiff_t(p)] : uint8_t{0};
      }
      continue;
    }
    for (size_t p = 0; p < kp; ++p) {
      uint8_t* d = dst + (p / 4) * 4 * MR + (p % 4);
      if (p >= kc) {
        for (int i = 0; i < MR; ++i) d[4 * i] = 0;
        continue;
      }
      const uint8_t* col = src + static_cast<ptrdiff_t>(p) * cs;
      for (size_t i = 0; i < r; ++i) d[4 * i] = col[static_cast<ptrdiff_t>(i) * rs];
      for (size_t i = r; i < MR; ++i) d[4 * i] = 0;
    }
  }
}

template <int MR>
void pack_a_rows(uint8_t* dst, const uint8_t* a, ptrdiff_t rs, ptrdiff_t cs, size_t rows, size_t kc,
                 size_t kp) {
  for (size_t s = 0; s < rows; s += MR, dst += MR * kp) {
    const size_t r = std::min<size_t>(MR, rows - s);
    for (size_t i = 0; i < MR; ++i) {
      uint8_t* d = dst + i * kp;
      if (i >= r) {
        std::memset(d, 0, kp);
        continue;
      }
      const uint8_t* row = a + static_cast<ptrdiff_t>(s + i) * rs;
      if (cs == 1) {
        std::memcpy(d, row, kc);
      } else {
        for (size_t p = 0; p < kc; ++p) d[p] = row[static_cast<ptrdiff_t>(p) * cs];
      }
      std::memset(d + kc, 0, kp - kc);
    }
  }
}

// Slivers [s_begin, s_end) of B's kc x cols block.
template <int NR>
void pack_b_quads(int8_t* dst, const int8_t* b, ptrdiff_t rs, ptrdiff_t cs, size_t cols, size_t kc,
                  size_t kp, size_t s_begin, size_t s_end) {
  for (size_t s = s_begin; s < s_end; ++s) {
    int8_t* d = dst + s * NR * kp;
    const size_t j0 = s * NR;
    const size_t w = std::min<size_t>(NR, cols - j0);
    for (size_t p = 0; p < kp; ++p) {
      int8_t* out = d + (p / 4) * 4 * NR + (p % 4);
      if (p >= kc) {
        for (int j = 0; j < NR; ++j) out[4 * j] = 0;
        continue;
      }
      const int8_t* row = b + static_cast<ptrdiff_t>(p) * rs + static_cast<ptrdiff_t>(j0) * cs;
      if (cs == 1) {
        for (size_t j = 0; j < w; ++j) out[4 * j] = row[j];
      } else {
        for (size_t j = 0; j < w; ++j) out[4 * j] = row[static_cast<ptrdiff_t>(j) * cs];
      }
      for (size_t j = w; j < NR; ++j) out[4 * j] = 0;
    }
  }
}

using KernelInfo = detail::DotKernel<uint8_t, int8_t, int32_t>;

// Block sizes: a kc-deep B sliver (32 columns of bytes at kc 1024: 32 KiB) stays in L1 while
// A's MC x KC block streams from L2 — gemm_bf16.cpp's bytes at twice the depth.
KernelInfo kernel_for(I8Kernel kernel) {
  using namespace detail;
  switch (kernel) {
#if EMBER_HAS_X86_KERNELS
    case I8Kernel::Amx:
      return {kAmxI8Mr,
              kAmxI8Nr,
              kAmxI8K,
              4,
              1024,
              256,
              4096,
              &ukernel_amx_u8s8,
              &pack_a_rows<kAmxI8Mr>,
              &pack_b_quads<kAmxI8Nr>};
    case I8Kernel::Avx512Vnni:
      return {kI8Mr,
              kI8Nr,
              4,
              4,
              1024,
              192,
              4096,
              &ukernel_avx512vnni_u8s8,
              &pack_a_quads<kI8Mr>,
              &pack_b_quads<kI8Nr>};
#endif
    default:
      return {kI8Mr,
              kI8Nr,
              4,
              4,
              1024,
              96,
              4096,
              &ukernel_portable,
              &pack_a_quads<kI8Mr>,
              &pack_b_quads<kI8Nr>};
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
constexpr size_t kMinParallelMacs = size_t{1} << 21;

}  // namespace

void gemm_u8s8(size_t batch, size_t m, size_t n, size_t k, const uint8_t* a, ptrdiff_t a_bs,
               ptrdiff_t a_rs, ptrdiff_t a_cs, const int8_t* b, ptrdiff_t b_bs, ptrdiff_t b_rs,
               ptrdiff_t b_cs, int32_t* c, ptrdiff_t c_bs, ptrdiff_t c_rs) {
  const KernelInfo kr = kernel_for(resolve_kernel());
  for (size_t t = 0; t < batch; ++t) {
    const auto bi = static_cast<ptrdiff_t>(t);
    detail::dot_gemm<Buffers>(kr, kMinParallelMacs, m, n, k, a + bi * a_bs, a_rs, a_cs,
                              b + bi * b_bs, b_rs, b_cs, c + bi * c_bs, c_rs);
  }
}

namespace detail {

void gemm_u8s8_force(I8Kernel kernel) { g_forced.store(kernel, std::memory_order_relaxed); }

bool gemm_u8s8_supported(I8Kernel kernel) {
  switch (kernel) {
    case I8Kernel::Auto:
    case I8Kernel::Portable:
      return true;
    case I8Kernel::Avx512Vnni:
      return EMBER_HAS_X86_KERNELS && int8_dot_supported(Int8Dot::Avx512Vnni);
    case I8Kernel::Amx:
      return EMBER_HAS_X86_KERNELS && int8_dot_supported(Int8Dot::Amx);
  }
  return false;
}

I8Kernel gemm_u8s8_active() { return resolve_kernel(); }

}  // namespace detail
}  // namespace ember::cpu
