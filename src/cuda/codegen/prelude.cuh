
typedef long long i64;
typedef unsigned long long u64;
typedef int i32;
typedef short i16;
typedef signed char i8;
typedef unsigned char u8;
typedef unsigned short h16;
#define EM_INF __int_as_float(0x7f800000)
#define EM_GID (blockIdx.x * (i64)blockDim.x + threadIdx.x)
#define EM_GSTRIDE ((i64)gridDim.x * blockDim.x)

struct EmGeo { int rank; int pad; i64 n; i64 shape[8]; i64 st[3][8]; };
// A sliding window over 3 spatial dims (backend/window.hpp): planes = N * C, K = kernel
// size, L = window positions, image = prod(in).
struct EmWin { i64 planes, K, L, image; i64 in[3], k[3], s[3], p[3], d[3], out[3]; };
// The argument block of a fused group's kernel (FusedArgs in codegen.hpp).
template <int N> struct EmWords { i64 w[N]; };
// V elements moved by one aligned load or store (Note [Vector loads] in codegen/printer.cpp).
template <class T, int V> struct alignas(sizeof(T) * V) em_vec { T v[V]; };

__device__ __forceinline__ float em_h2f(h16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ h16 em_f2h(float f) { h16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float em_b2f(h16 b) { return __uint_as_float(((unsigned)b) << 16); }
// Round to nearest even, NaN kept quiet: the same bits as ember::bf16(float).
__device__ __forceinline__ h16 em_f2b(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (h16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (h16)(u >> 16);
}

#define EM_M1(n) \
  __device__ __forceinline__ float m_##n(float x) { return n##f(x); } \
  __device__ __forceinline__ double m_##n(double x) { return n(x); }
#define EM_M2(n) \
  __device__ __forceinline__ float m_##n(float x, float y) { return n##f(x, y); } \
  __device__ __forceinline__ double m_##n(double x, double y) { return n(x, y); }
EM_M1(fabs) EM_M1(sqrt) EM_M1(exp) EM_M1(log) EM_M1(log1p) EM_M1(expm1) EM_M1(sin) EM_M1(cos)
EM_M1(tan) EM_M1(sinh) EM_M1(cosh) EM_M1(tanh) EM_M1(asin) EM_M1(acos) EM_M1(atan) EM_M1(erf)
EM_M1(erfc) EM_M1(floor) EM_M1(ceil) EM_M1(rint) EM_M1(trunc)
EM_M2(pow) EM_M2(atan2) EM_M2(fmod) EM_M2(nextafter)

// The tuned f32 gelu, printed instead of the table's expression for f32, f16 and bf16.
// gelu(x) = x Phi(x) in f32 at about half erfcf's cost: erfc(z) = t exp(-z^2 + P(t)) for
// z = |x| / sqrt(2), t = 1 / (1 + z / 2), P of degree 9 fitted to log(erfc(z) / t) + z^2 on
// z in [0, 10.5] (error 5e-8); -x^2 / 2 is split exactly (sh + sl) so the exponential sees
// the true argument. Phi(x) = erfc(z) / 2 for x <= 0, 1 - erfc(z) / 2 above: at most 7.1 ulp
// from the exact value (a float model of these steps with exact reciprocal and exp, checked
// over every float); with rcp.approx's and expf's documented error bounds, about 13 ulp.
// |x| is clamped at 40 (the result is -0 below, x above), which NaN passes through.
__device__ __forceinline__ float em_gelu(float x) {
  const float xc = x < -40.f ? -40.f : (x > 40.f ? 40.f : x);
  const float hx = 0.5f * xc;
  const float z = fabsf(xc) * 0.70710678118654752f;
  float t;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(fmaf(0.5f, z, 1.f)));
  float p = 0x1.2a81dcp-3f;
  p = fmaf(p, t, -0x1.5f03fap-1f);
  p = fmaf(p, t, 0x1.2b2af0p+0f);
  p = fmaf(p, t, -0x1.6d280ap-1f);
  p = fmaf(p, t, -0x1.0af9dcp-4f);
  p = fmaf(p, t, -0x1.e6bdeap-8f);
  p = fmaf(p, t, 0x1.35d7d2p-5f);
  p = fmaf(p, t, 0x1.8b2a9ap-2f);
  p = fmaf(p, t, 0x1.ff5910p-1f);
  p = fmaf(p, t, -0x1.43f4bap+0f);
  const float sh = __fmul_rn(-hx, xc), sl = fmaf(-hx, xc, -sh);  // never fused: exact split
  const float ah = sh + p, al = ((sh - ah) + p) + sl;
  float e = expf(ah);
  e = fmaf(e, al, e);
  const float ec = t * e;
  return x > 0.f ? fmaf(-hx, ec, x) : hx * ec;
}
template <class T> struct em_u { typedef unsigned int t; };
template <> struct em_u<i64> { typedef u64 t; };
// Integer division: zero divisors are flagged by the kernel; MIN / -1 wraps.
// Note [Integer selects on sm_90] (ir/scalar_expr.cpp): an identity that ptxas keeps
// (a byte permute), between integer selects so that no two are joined into a VIMNMX3.
template <class T> __device__ __forceinline__ T em_keep(T x) { return x; }
__device__ __forceinline__ int em_keep(int x) { int y; asm("prmt.b32 %0, %1, 0, 0x3210;" : "=r"(y) : "r"(x)); return y; }
__device__ __forceinline__ unsigned em_keep(unsigned x) { unsigned y; asm("prmt.b32 %0, %1, 0, 0x3210;" : "=r"(y) : "r"(x)); return y; }
__device__ __forceinline__ short em_keep(short x) { return (short)em_keep((int)x); }
__device__ __forceinline__ signed char em_keep(signed char x) { return (signed char)em_keep((int)x); }
__device__ __forceinline__ unsigned char em_keep(unsigned char x) { return (unsigned char)em_keep((unsigned)x); }
template <class T> __device__ __forceinline__ T em_idiv(T a, T b) {
  if (b == T(0)) return T(0);
  if ((T)-1 < (T)0 && b == (T)-1) return (T)(0u - (typename em_u<T>::t)a);
  return (T)(a / b);
}
// The truncated remainder of the scalar expressions: 0 for the divisors 0 and -1.
template <class T> __device__ __forceinline__ T em_imod(T a, T b) {
  if (b == T(0)) return T(0);
  if ((T)-1 < (T)0 && b == (T)-1) return T(0);
  return (T)(a % b);
}
template <class T> __device__ __forceinline__ T em_shl(T a, T b) {
  const int bits = (int)sizeof(T) * 8;
  return (b < T(0) || (i64)b >= bits) ? T(0) : (T)((typename em_u<T>::t)a << (int)b);
}
template <class T> __device__ __forceinline__ T em_shr(T a, T b) {
  const int bits = (int)sizeof(T) * 8;
  return (b < T(0) || (i64)b >= bits) ? (a < T(0) ? (T)-1 : T(0)) : (T)(a >> (int)b);
}
// Float -> int without undefined values: NaN gives 0, out-of-range values saturate.
template <class T> __device__ __forceinline__ T em_sat(double v, double lo, double hi, T tlo, T thi) {
  if (v != v) return T(0);
  if (v <= lo) return tlo;
  if (v >= hi) return thi;
  return (T)v;
}
// Reports a bad value (an index out of range, a zero divisor) to the host: the first
// report wins; the host reads it at the next sync point and raises ember::Error.
__device__ void em_flag(int* err, int code, i64 value) {
  if (atomicCAS(err, 0, code) == 0) ((i64*)err)[1] = value;
}
__device__ __forceinline__ void em_offsets(const EmGeo& g, i64 i, i64& o0, i64& o1, i64& o2) {
  if (g.rank == 1) {  // one collapsed dim (e.g. a broadcast scalar): no 64-bit div/mod
    o0 = i * g.st[0][0]; o1 = i * g.st[1][0]; o2 = i * g.st[2][0];
    return;
  }
  o0 = 0; o1 = 0; o2 = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const i64 e = g.shape[d];
    const i64 c = i % e;
    i /= e;
    o0 += c * g.st[0][d]; o1 += c * g.st[1][d]; o2 += c * g.st[2][d];
  }
}
// Warp shuffles for every accumulator type (narrow integers travel as int).
__device__ __forceinline__ float em_shfl(float v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ double em_shfl(double v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ i64 em_shfl(i64 v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ int em_shfl(int v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
__device__ __forceinline__ i16 em_shfl(i16 v, int o) { return (i16)__shfl_down_sync(0xffffffffu, (int)v, o); }
__device__ __forceinline__ i8 em_shfl(i8 v, int o) { return (i8)__shfl_down_sync(0xffffffffu, (int)v, o); }
__device__ __forceinline__ u8 em_shfl(u8 v, int o) { return (u8)__shfl_down_sync(0xffffffffu, (int)v, o); }
__device__ __forceinline__ bool em_shfl(bool v, int o) { return __shfl_down_sync(0xffffffffu, (int)v, o) != 0; }
// Arg reductions: whether (v, i) beats (bv, bi) — NaN is the extreme, ties go to the lower
// index, i < 0 marks an empty slot. A total order, so any combining order gives the
// sequential answer.
template <class T> __device__ __forceinline__ bool em_arg_better(T v, i64 i, T bv, i64 bi, bool mx) {
  if (i < 0) return false;
  if (bi < 0) return true;
  const bool vn = v != v, bn = bv != bv;
  if (vn || bn) return (vn && bn) ? i < bi : vn;
  if (v == bv) return i < bi;
  return mx ? v > bv : v < bv;
}
__device__ __forceinline__ u64 em_mix(u64 key, u64 ctr) {
  u64 z = key ^ (ctr * 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  z = (z ^ (z >> 29)) * 0xbf58476d1ce4e5b9ULL;
  return z ^ (z >> 32);
}
__device__ __forceinline__ double em_uniform01(u64 bits) { return (double)(bits >> 11) * 0x1.0p-53; }
