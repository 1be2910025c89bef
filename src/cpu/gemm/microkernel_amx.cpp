// The AMX micro-kernels of the bf16 and int8 GEMMs (see microkernel.hpp for the contracts and
// the Amx layouts). Compiled with the AVX-512 flags and -mamx-tile -mamx-bf16 -mamx-int8, and
// only called after a run-time check (cpu::dot_isa_supported, cpu::int8_dot_supported, which
// also asked the kernel for the tile state: Note [AMX permission] in cpu/isa.cpp); it defines
// nothing with external or vague linkage besides the kernels.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "cpu/gemm/microkernel.hpp"

namespace ember::cpu::detail {
namespace {

constexpr int MR = kAmxMr, NR = kAmxNr, K = kAmxK;

// Palette 1: tiles 0-3 hold C's four 16 x 16 f32 blocks, 4-5 A's two 16-row blocks (16 x 32
// bf16), 6-7 B's two 16-column blocks (16 pairs of rows x 16 columns x 2 bf16). Every tile is
// 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// The tile configuration is per thread; each thread loads it before its first tile kernel.
thread_local bool t_configured = false;

// The tile instructions are asm statements that name no memory: these keep the compiler's
// own loads and stores of the same memory on their side.
inline __attribute__((always_inline)) void memory_barrier() { __asm__ volatile("" ::: "memory"); }

// Loads the tile configuration on this thread before its first tile kernel (both kernels'
// tiles have the one shape the configuration gives).
inline __attribute__((always_inline)) void configure() {
  if (!t_configured) {
    static const TileConfig config;
    _tile_loadconfig(&config);
    t_configured = true;
  }
}

// The four tile products of one k step: C's blocks (tiles 0-3) += A's two row blocks (4, 5)
// times B's two column blocks (6, 7).
struct DotBf16 {
  static inline __attribute__((always_inline)) void four() {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
};
struct DotU8S8 {  // tdpbusd adds each lane's four products, wrapping (Note [int8 sums])
  static inline __attribute__((always_inline)) void four() {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
};

// C's 32 x 32 block (four 16 x 16 tiles of 32-bit sums) of a packed A sliver (row-major, 64
// bytes of k a tile row) times a packed B sliver (groups of G k steps a 32-bit word, 16
// columns a tile row), kq groups deep, C overwritten or (load_c) added to, rows i < m and
// columns j < n only. Every tile is 16 rows of 64 bytes.
template <class Dot, std::size_t G, class TA, class TB, class TC>
inline __attribute__((always_inline)) void tile_product(std::size_t kq, const TA* a, const TB* b,
                                                        TC* c, std::ptrdiff_t c_rs, std::size_t m,
                                                        std::size_t n, bool load_c) {
  static_assert(sizeof(TC) == 4 && G * sizeof(TB) == 4);
  constexpr std::size_t MR = 32, NR = 32, K = 64 / sizeof(TA);
  configure();
  const std::size_t kc = G * kq;  // a multiple of K
  const long a_stride = static_cast<long>(kc * sizeof(TA));
  const long b_stride = static_cast<long>(NR * G * sizeof(TB));
  const bool full = m == MR && n == NR;
  const long c_stride = static_cast<long>(c_rs * static_cast<std::ptrdiff_t>(sizeof(TC)));
  memory_barrier();
  if (full && load_c) {
    _tile_loadd(0, c, c_stride);
    _tile_loadd(1, c + 16, c_stride);
    _tile_loadd(2, c + 16 * c_rs, c_stride);
    _tile_loadd(3, c + 16 * c_rs + 16, c_stride);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (std::size_t p = 0; p < kc; p += K) {
    const TB* bp = b + p * NR;  // group row p / G of the sliver
    _tile_loadd(4, a + p, a_stride);
    _tile_loadd(5, a + 16 * kc + p, a_stride);
    _tile_loadd(6, bp, b_stride);
    _tile_loadd(7, bp + 64 / sizeof(TB), b_stride);
    Dot::four();
  }
  if (full) {
    _tile_stored(0, c, c_stride);
    _tile_stored(1, c + 16, c_stride);
    _tile_stored(2, c + 16 * c_rs, c_stride);
    _tile_stored(3, c + 16 * c_rs + 16, c_stride);
    memory_barrier();
    return;
  }
  alignas(64) TC out[MR][NR];
  constexpr long out_stride = NR * sizeof(TC);
  _tile_stored(0, &out[0][0], out_stride);
  _tile_stored(1, &out[0][16], out_stride);
  _tile_stored(2, &out[16][0], out_stride);
  _tile_stored(3, &out[16][16], out_stride);
  memory_barrier();
  for (std::size_t i = 0; i < m; ++i) {
    TC* row = c + static_cast<std::ptrdiff_t>(i) * c_rs;
    for (std::size_t j = 0; j < n; ++j) {
      if constexpr (std::is_integral_v<TC>) {  // (added as unsigned: wrapping, as the tiles add)
        const auto o = static_cast<std::uint32_t>(out[i][j]);
        row[j] = static_cast<TC>(load_c ? static_cast<std::uint32_t>(row[j]) + o : o);
      } else {
        row[j] = load_c ? row[j] + out[i][j] : out[i][j];
      }
    }
  }
}

}  // namespace

void ukernel_amx_bf16(std::size_t kq, const std::uint16_t* a, const std::uint16_t* b, float* c,
                      std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c) {
  static_assert(MR == 32 && NR == 32 && K == 32);
  tile_product<DotBf16, 2>(kq, a, b, c, c_rs, m, n, load_c);
}

void ukernel_amx_u8s8(std::size_t kq, const std::uint8_t* a, const std::int8_t* b, std::int32_t* c,
                      std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c) {
  static_assert(kAmxI8Mr == 32 && kAmxI8Nr == 32 && kAmxI8K == 64);
  tile_product<DotU8S8, 4>(kq, a, b, c, c_rs, m, n, load_c);
}

}  // namespace ember::cpu::detail
