// CRC-32 (IEEE 802.3, reflected, zlib's crc32) for the hosted build: carry-less multiply
// folding where the CPU has PCLMULQDQ (chosen at run time), zlib's crc32 elsewhere. Both
// compute the same function — the one every .ember file's checksums were written with — so
// the choice never changes what a file means. byte_io_none.cpp has the embedded build's
// table-driven CRC of the same polynomial.
//
// Note [CRC folding]: a message is a polynomial over GF(2), its first bit the highest term;
// the CRC register after it is (M(x) * x^32) mod P(x). In the reflected layout a 16-byte
// block loaded little-endian has bit j as the coefficient of x^(127 - j), so its low
// quadword H holds the terms x^127..x^64 and its high quadword L the terms x^63..x^0. Moving
// the block D bits further into the message multiplies it by x^D; mod P that is
//   H * (x^(D + 64) mod P) + L * (x^D mod P),
// each product below 96 terms, so the block folds onto the one D bits later with two
// carry-less multiplies and an XOR. A reflected carry-less multiply of two quadwords gives
// their product times x (bit m of the 128-bit result is the term x^(127 - m), one more
// than the product's), so the constants are x^(D + 63) and x^(D - 1) mod P, each bit
// reversed into the high half of a quadword (kconst). Four blocks fold in parallel 512 bits
// at a time (eight 1024 bits at a time, two per 256-bit register, where the CPU has
// VPCLMULQDQ: crc32_vpclmul), then onto one another in message order and block by block; the last
// block's 16 bytes are a message whose CRC from a zero register is the register for everything
// folded, and zlib finishes that block and the tail. The initial register (~crc) is XORed into the
// first 32 bits, which is what starting the register there does. The constants are computed here
// from P, not copied: bit-exactness with zlib is tested (test_record's Crc32 cases) on
// lengths and alignments around every loop boundary.
#include <zlib.h>

#include <climits>
#include <cstddef>
#include <cstdint>

#include "record/byte_io.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define EMBER_CRC_PCLMUL 1
#endif

namespace ember::record::detail {

namespace {

std::uint32_t crc32_zlib(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  while (n > 0) {
    const auto k = static_cast<uInt>(n < UINT_MAX ? n : UINT_MAX);
    crc = static_cast<std::uint32_t>(::crc32(crc, p, k));
    p += k;
    n -= k;
  }
  return crc;
}

#ifdef EMBER_CRC_PCLMUL

// x^n mod P, P = x^32 + 0x04C11DB7's terms (bit d: the term x^d).
constexpr std::uint32_t x_pow_mod_p(unsigned n) {
  std::uint32_t v = 1;
  for (unsigned i = 0; i < n; ++i) v = (v & 0x80000000u) != 0 ? (v << 1) ^ 0x04C11DB7u : v << 1;
  return v;
}
constexpr std::uint32_t reverse32(std::uint32_t v) {
  std::uint32_t r = 0;
  for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1u) << (31 - i);
  return r;
}
// x^n mod P in a reflected quadword (bit j: the term x^(63 - j)).
constexpr std::uint64_t kconst(unsigned n) {
  return static_cast<std::uint64_t>(reverse32(x_pow_mod_p(n))) << 32;
}

__attribute__((target("pclmul,sse4.1"))) inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  const __m128i h = _mm_clmulepi64_si128(x, k, 0x00);  // low quadword x constant for H
  const __m128i l = _mm_clmulepi64_si128(x, k, 0x11);  // high quadword x constant for L
  return _mm_xor_si128(_mm_xor_si128(h, l), next);
}

// The end both foldings share: the remaining whole 16-byte blocks folded into x, then the
// CRC of x's 16 bytes from a zero register (zlib's crc argument ~0) and of the tail.
__attribute__((target("pclmul,sse4.1"))) std::uint32_t finish_fold(__m128i x, __m128i k128,
                                                                   const unsigned char* p,
                                                                   std::size_t n) {
  for (; n >= 16; p += 16, n -= 16)
    x = fold(x, k128, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  alignas(16) unsigned char last[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(last), x);
  return crc32_zlib(crc32_zlib(0xffffffffu, last, 16), p, n);
}

__attribute__((target("pclmul,sse4.1"))) std::uint32_t crc32_pclmul(std::uint32_t crc,
                                                                    const unsigned char* p,
                                                                    std::size_t n) {
  // Folding by D bits: the low lane multiplies H, the high lane L (Note [CRC folding]).
  static constexpr std::uint64_t k512_h = kconst(512 + 63), k512_l = kconst(512 - 1);
  static constexpr std::uint64_t k128_h = kconst(128 + 63), k128_l = kconst(128 - 1);
  const __m128i k512 =
      _mm_set_epi64x(static_cast<long long>(k512_l), static_cast<long long>(k512_h));
  const __m128i k128 =
      _mm_set_epi64x(static_cast<long long>(k128_l), static_cast<long long>(k128_h));
  const auto load = [](const unsigned char* q) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  };
  __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(~crc)));
  __m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    x0 = fold(x0, k512, load(p));
    x1 = fold(x1, k512, load(p + 16));
    x2 = fold(x2, k512, load(p + 32));
    x3 = fold(x3, k512, load(p + 48));
  }
  return finish_fold(fold(fold(fold(x0, k128, x1), k128, x2), k128, x3), k128, p, n);
}

// The same folding over 256-bit registers (VPCLMULQDQ, on AVX2 machines that have it): four
// registers of two blocks each, every block folded 1024 bits on per 128 bytes; the eight
// blocks then fold onto each other in message order as the four of crc32_pclmul do.
#define EMBER_VPCLMUL_TARGET __attribute__((target("vpclmulqdq,avx2,pclmul,sse4.1")))
EMBER_VPCLMUL_TARGET inline __m256i load256(const unsigned char* q) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
}
EMBER_VPCLMUL_TARGET inline __m256i fold256(__m256i x, __m256i k, __m256i next) {
  const __m256i h = _mm256_clmulepi64_epi128(x, k, 0x00);
  const __m256i l = _mm256_clmulepi64_epi128(x, k, 0x11);
  return _mm256_xor_si256(_mm256_xor_si256(h, l), next);
}

EMBER_VPCLMUL_TARGET std::uint32_t crc32_vpclmul(std::uint32_t crc, const unsigned char* p,
                                                 std::size_t n) {
  static constexpr std::uint64_t k1024_h = kconst(1024 + 63), k1024_l = kconst(1024 - 1);
  static constexpr std::uint64_t k128_h = kconst(128 + 63), k128_l = kconst(128 - 1);
  const __m256i k1024 =
      _mm256_set_epi64x(static_cast<long long>(k1024_l), static_cast<long long>(k1024_h),
                        static_cast<long long>(k1024_l), static_cast<long long>(k1024_h));
  const __m128i k128 =
      _mm_set_epi64x(static_cast<long long>(k128_l), static_cast<long long>(k128_h));
  __m256i y0 = _mm256_xor_si256(load256(p),
                                _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  __m256i y1 = load256(p + 32), y2 = load256(p + 64), y3 = load256(p + 96);
  p += 128;
  n -= 128;
  for (; n >= 128; p += 128, n -= 128) {
    y0 = fold256(y0, k1024, load256(p));
    y1 = fold256(y1, k1024, load256(p + 32));
    y2 = fold256(y2, k1024, load256(p + 64));
    y3 = fold256(y3, k1024, load256(p + 96));
  }
  __m128i x = fold(_mm256_castsi256_si128(y0), k128, _mm256_extracti128_si256(y0, 1));
  x = fold(fold(x, k128, _mm256_castsi256_si128(y1)), k128, _mm256_extracti128_si256(y1, 1));
  x = fold(fold(x, k128, _mm256_castsi256_si128(y2)), k128, _mm256_extracti128_si256(y2, 1));
  x = fold(fold(x, k128, _mm256_castsi256_si128(y3)), k128, _mm256_extracti128_si256(y3, 1));
  return finish_fold(x, k128, p, n);
}
#undef EMBER_VPCLMUL_TARGET

bool has_vpclmul() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return yes;
}

bool has_pclmul() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return yes;
}

#endif

}  // namespace

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
#ifdef EMBER_CRC_PCLMUL
  if (n >= 128 && has_vpclmul()) return crc32_vpclmul(crc, p, n);
  if (n >= 64 && has_pclmul()) return crc32_pclmul(crc, p, n);
#endif
  return crc32_zlib(crc, p, n);
}

}  // namespace ember::record::detail
