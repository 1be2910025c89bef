// The AMX micro-kernels of the bf16 and int8 GEMMs (see microkernel.hpp for the contracts and
// the Amx layouts). Compiled with the AVX-512 flags and -mamx-tile -mamx-bf16 -mamx-int8, and
// only called after a run-time check (cpu::dot_isa_supported, cpu::int8_dot_supported, which
// also asked the kernel for the tile state: Note [AMX permission] in cpu/isa.cpp); it defines
// nothing with external or vague linkage besides the kernels.
#include <immintrin.h>

#include <cstdint>

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

}  // namespace

// Loads the tile configuration on this thread before its first tile kernel (both kernels'
// tiles have the one shape the configuration gives).
static inline __attribute__((always_inline)) void configure() {
  if (!t_configured) {
    static const TileConfig config;
    _tile_loadconfig(&config);
    t_configured = true;
  }
}

void ukernel_amx_bf16(std::size_t kq, const std::uint16_t* a, const std::uint16_t* b, float* c,
                      std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c) {
  configure();
  const std::size_t kc = 2 * kq;  // a multiple of K
  const long a_stride = static_cast<long>(kc * sizeof(std::uint16_t));
  const long b_stride = static_cast<long>(NR * 2 * sizeof(std::uint16_t));
  const bool full = m == static_cast<std::size_t>(MR) && n == static_cast<std::size_t>(NR);
  const long c_stride = static_cast<long>(c_rs * static_cast<std::ptrdiff_t>(sizeof(float)));
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
    const std::uint16_t* bp = b + p * NR;  // pair row p / 2 of the sliver
    _tile_loadd(4, a + p, a_stride);
    _tile_loadd(5, a + 16 * kc + p, a_stride);
    _tile_loadd(6, bp, b_stride);
    _tile_loadd(7, bp + 32, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (full) {
    _tile_stored(0, c, c_stride);
    _tile_stored(1, c + 16, c_stride);
    _tile_stored(2, c + 16 * c_rs, c_stride);
    _tile_stored(3, c + 16 * c_rs + 16, c_stride);
    memory_barrier();
    return;
  }
  alignas(64) float out[MR][NR];
  constexpr long out_stride = NR * sizeof(float);
  _tile_stored(0, &out[0][0], out_stride);
  _tile_stored(1, &out[0][16], out_stride);
  _tile_stored(2, &out[16][0], out_stride);
  _tile_stored(3, &out[16][16], out_stride);
  memory_barrier();
  for (std::size_t i = 0; i < m; ++i) {
    float* row = c + static_cast<std::ptrdiff_t>(i) * c_rs;
    for (std::size_t j = 0; j < n; ++j) row[j] = load_c ? row[j] + out[i][j] : out[i][j];
  }
}

// The int8 kernel: tiles 0-3 C's four 16 x 16 int32 blocks, 4-5 A's two 16-row blocks (16 x 64
// u8), 6-7 B's two 16-column blocks (16 quads of rows x 16 columns x 4 s8); tdpbusd adds
// each lane's four products, wrapping (Note [int8 sums] in gemm_i8.hpp).
void ukernel_amx_u8s8(std::size_t kq, const std::uint8_t* a, const std::int8_t* b, std::int32_t* c,
                      std::ptrdiff_t c_rs, std::size_t m, std::size_t n, bool load_c) {
  constexpr int IMR = kAmxI8Mr, INR = kAmxI8Nr, IK = kAmxI8K;
  configure();
  const std::size_t kc = 4 * kq;  // a multiple of IK
  const long a_stride = static_cast<long>(kc);
  const long b_stride = static_cast<long>(INR * 4);
  const bool full = m == static_cast<std::size_t>(IMR) && n == static_cast<std::size_t>(INR);
  const long c_stride = static_cast<long>(c_rs * static_cast<std::ptrdiff_t>(sizeof(std::int32_t)));
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
  for (std::size_t p = 0; p < kc; p += IK) {
    const std::int8_t* bp = b + p * INR;  // quad row p / 4 of the sliver
    _tile_loadd(4, a + p, a_stride);
    _tile_loadd(5, a + 16 * kc + p, a_stride);
    _tile_loadd(6, bp, b_stride);
    _tile_loadd(7, bp + 64, b_stride);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  if (full) {
    _tile_stored(0, c, c_stride);
    _tile_stored(1, c + 16, c_stride);
    _tile_stored(2, c + 16 * c_rs, c_stride);
    _tile_stored(3, c + 16 * c_rs + 16, c_stride);
    memory_barrier();
    return;
  }
  alignas(64) std::int32_t out[IMR][INR];
  constexpr long out_stride = INR * sizeof(std::int32_t);
  _tile_stored(0, &out[0][0], out_stride);
  _tile_stored(1, &out[0][16], out_stride);
  _tile_stored(2, &out[16][0], out_stride);
  _tile_stored(3, &out[16][16], out_stride);
  memory_barrier();
  for (std::size_t i = 0; i < m; ++i) {
    std::int32_t* row = c + static_cast<std::ptrdiff_t>(i) * c_rs;
    for (std::size_t j = 0; j < n; ++j) {
      const auto o = static_cast<std::uint32_t>(out[i][j]);
      row[j] = static_cast<std::int32_t>(load_c ? static_cast<std::uint32_t>(row[j]) + o : o);
    }
  }
}

}  // namespace ember::cpu::detail
