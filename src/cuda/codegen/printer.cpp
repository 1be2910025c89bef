// The Cuda generators' shared printing vocabulary and the device prelude (printer.hpp).
#include "cuda/codegen/printer.hpp"

#include <string>

#include "cuda/codegen.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {
namespace {

// The shared device code. No headers: NVRTC on the GPU machine has no toolkit includes,
// so 16-bit conversions use PTX and integer types are typedefs.
const char* const kPrelude = R"(
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
)";

}  // namespace

const char* storage_type(DType t) {
  switch (t) {
    case DType::F64:
      return "double";
    case DType::F32:
      return "float";
    case DType::F16:
    case DType::BF16:
      return "h16";
    case DType::I64:
      return "i64";
    case DType::I32:
      return "i32";
    case DType::I16:
      return "i16";
    case DType::I8:
      return "i8";
    case DType::U8:
    case DType::Bool:
      return "u8";
  }
  return "u8";
}

const std::string& prelude() {
  static const std::string p = kPrelude;
  return p;
}

std::string full_source(const KernelSource& k) { return prelude() + k.body; }

namespace codegen {

K kind(DType t) {
  if (t == DType::Bool) return K::Bool;
  return is_float(t) ? K::Float : K::Int;
}

const char* compute_type(DType t) {
  switch (t) {
    case DType::F64:
      return "double";
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return "float";
    case DType::Bool:
      return "bool";
    default:
      return storage_type(t);
  }
}
const char* unsigned_type(DType t) { return t == DType::I64 ? "u64" : "unsigned int"; }

std::string load(DType t, const std::string& e) {
  switch (t) {
    case DType::F16:
      return "em_h2f(" + e + ")";
    case DType::BF16:
      return "em_b2f(" + e + ")";
    case DType::Bool:
      return "(" + e + " != 0)";
    default:
      return e;
  }
}
std::string store(DType t, const std::string& v) {
  switch (t) {
    case DType::F16:
      return "em_f2h(" + v + ")";
    case DType::BF16:
      return "em_f2b(" + v + ")";
    case DType::Bool:
      return "(u8)((" + v + ") ? 1 : 0)";
    default:
      return std::string("(") + storage_type(t) + ")(" + v + ")";
  }
}

std::string sat(const char* ty, const char* lo, const char* hi, const char* tlo, const char* thi,
                const std::string& v) {
  return std::string("em_sat<") + ty + ">(" + v + ", " + lo + ", " + hi + ", (" + ty + ")(" + tlo +
         "), (" + ty + ")(" + thi + "))";
}
// The storage value of double v for dtype t, as convert_elements' from_f64.
std::string from_f64(DType t, const std::string& v) {
  switch (t) {
    case DType::F64:
      return v;
    case DType::F32:
      return "(float)(" + v + ")";
    case DType::F16:
      return "em_f2h((float)(" + v + "))";
    case DType::BF16:
      return "em_f2b((float)(" + v + "))";
    case DType::Bool:
      return "(u8)((" + v + ") != 0.0 ? 1 : 0)";
    case DType::I64:
      return sat("i64", "-9223372036854775808.0", "9223372036854775807.0",
                 "-9223372036854775807LL - 1", "9223372036854775807LL", v);
    case DType::I32:
      return sat("i32", "-2147483648.0", "2147483647.0", "-2147483647 - 1", "2147483647", v);
    case DType::I16:
      return sat("i16", "-32768.0", "32767.0", "-32768", "32767", v);
    case DType::I8:
      return sat("i8", "-128.0", "127.0", "-128", "127", v);
    case DType::U8:
      return sat("u8", "0.0", "255.0", "0", "255", v);
  }
  return v;
}
// Storage value s of dtype t as double (to_f64).
std::string to_f64(DType t, const std::string& s) {
  switch (t) {
    case DType::F16:
      return "(double)em_h2f(" + s + ")";
    case DType::BF16:
      return "(double)em_b2f(" + s + ")";
    default:
      return "(double)(" + s + ")";
  }
}

std::string lower(const char* s) { return s; }
std::string dname(DType t) { return name(t); }

std::string typedefs(DType t) {
  return std::string("  typedef ") + compute_type(t) + " C;\n  typedef " + unsigned_type(t) +
         " U;\n  (void)sizeof(C); (void)sizeof(U);\n";
}

// Bytes of a storage type name as printed by storage_type / sized_type.
std::size_t sized_bytes(const std::string& t) {
  if (t == "double" || t == "i64" || t == "u64") return 8;
  if (t == "float" || t == "i32" || t == "unsigned int") return 4;
  if (t == "h16" || t == "i16") return 2;
  return 1;
}

// Replaces every occurrence of token in s with by.
std::string subst(std::string s, const std::string& token, const std::string& by) {
  for (std::size_t at = s.find(token); at != std::string::npos; at = s.find(token, at + by.size()))
    s.replace(at, token.size(), by);
  return s;
}

// The shared element-wise skeleton: a grid-stride loop computing operand offsets o0..o2
// (contiguous: all i) and running `body`, which reads operand k as $Xk and writes $Y.
// Strided kernels read x<k>[o<k>] and write `y_strided`. Note [Vector loads]: contiguous
// kernels move vector_width(...) elements per thread and iteration with one 16-byte (or
// narrower) load per operand when every pointer is aligned to it, and finish the tail (or
// misaligned views) one element at a time.
// Contiguous kernels may take operands in scalar_mask (bit k: operand k) as one element
// broadcast over the output (x + 2.0): read once, never vector-loaded.
std::string ew_kernel(const std::string& name, const char* out_t,
                      const std::array<const char*, 3>& in_t, int n_in, bool contiguous,
                      const std::string& pre, const std::string& body, const std::string& y_strided,
                      unsigned scalar_mask) {
  std::string s = "extern \"C\" __global__ void " + name + "(EmGeo g, " + out_t +
                  "* __restrict__ y, const " + in_t[0] + "* __restrict__ x0, const " + in_t[1] +
                  "* __restrict__ x1, const " + in_t[2] +
                  "* __restrict__ x2, double p0, double p1, int* err) {\n" + pre +
                  "  (void)x0; (void)x1; (void)x2; (void)p0; (void)p1; (void)err;\n";
  std::string scalar = body;
  std::string vec = body;
  for (int k = 0; k < n_in; ++k) {
    if (!contiguous || !(scalar_mask >> k & 1u)) continue;
    const std::string ks = std::to_string(k);
    s += "  const " + std::string(in_t[k]) + " s" + ks + " = x" + ks + "[0];\n";
    scalar = subst(scalar, "$X" + ks, "s" + ks);
    vec = subst(vec, "$X" + ks, "s" + ks);
  }
  for (int k = 0; k < 3; ++k) {
    const std::string ks = std::to_string(k);
    scalar = subst(scalar, "$X" + ks, "x" + ks + "[o" + ks + "]");
  }
  scalar = subst(scalar, "$Y", contiguous ? "y[i]" : y_strided);
  if (contiguous) {
    std::size_t widest = 1;
    for (int k = 0; k < n_in; ++k) widest = std::max(widest, sized_bytes(in_t[k]));
    widest = std::max(widest, sized_bytes(out_t));
    const std::string V = std::to_string(vector_width(widest));
    std::string aligned = "((u64)y % (sizeof(" + std::string(out_t) + ") * " + V + ") == 0)";
    std::string loads;
    for (int k = 0; k < n_in; ++k) {
      if (scalar_mask >> k & 1u) continue;
      const std::string ks = std::to_string(k);
      const std::string vt = "em_vec<" + std::string(in_t[k]) + ", " + V + ">";
      aligned += " && ((u64)x" + ks + " % sizeof(" + vt + ") == 0)";
      loads += "    const " + vt + " v" + ks + " = ((const " + vt + "*)x" + ks + ")[q];\n";
      vec = subst(vec, "$X" + ks, "v" + ks + ".v[u]");
    }
    vec = subst(vec, "$Y", "r.v[u]");
    const std::string yt = "em_vec<" + std::string(out_t) + ", " + V + ">";
    s += "  const i64 nv = (" + aligned + ") ? g.n / " + V +
         " : 0;\n"
         "  for (i64 q = EM_GID; q < nv; q += EM_GSTRIDE) {\n" +
         loads + "    " + yt +
         " r;\n"
         "#pragma unroll\n"
         "    for (int u = 0; u < " +
         V + "; ++u) {\n      const i64 i = q * " + V +
         " + u; (void)i;\n"
         "      const i64 o0 = i, o1 = i, o2 = i; (void)o0; (void)o1; (void)o2;\n" +
         vec + "    }\n    ((" + yt + "*)y)[q] = r;\n  }\n" + "  for (i64 i = nv * " + V +
         " + EM_GID; i < g.n; i += EM_GSTRIDE) {\n"
         "    const i64 o0 = i, o1 = i, o2 = i;\n";
  } else {
    s += "  for (i64 i = EM_GID; i < g.n; i += EM_GSTRIDE) {\n"
         "    i64 o0, o1, o2;\n    em_offsets(g, i, o0, o1, o2);\n";
  }
  s += "    (void)o0; (void)o1; (void)o2;\n" + scalar + "  }\n}\n";
  return s;
}

const char* layout_suffix(bool contiguous) { return contiguous ? "_c" : "_s"; }
std::string scalar_suffix(bool contiguous, unsigned scalar_mask) {
  if (!contiguous || scalar_mask == 0) return "";
  std::string s = "k";  // (built by append: "k" + std::string trips GCC 12's -Wrestrict)
  s += std::to_string(scalar_mask);
  return s;
}

const char* sized_type(std::size_t elem) {
  switch (elem) {
    case 1:
      return "u8";
    case 2:
      return "h16";
    case 4:
      return "unsigned int";
    default:
      return "u64";
  }
}

// Reduces each thread's `v` (type C) across the block with `op` over v and o (identity
// `ident`): warp shuffles, then one warp over the per-warp results in sv[32]. Every thread
// ends with the result in v. Needs lane, warp, nwarps and __shared__ C sv[32] in scope.
std::string block_reduce(const std::string& op, const std::string& ident) {
  return "    { const C ident = " + ident + ";\n" +
         "    for (int off = 16; off > 0; off >>= 1) { const C o = em_shfl(v, off); v = " + op +
         "; }\n"
         "    if (lane == 0) sv[warp] = v;\n"
         "    __syncthreads();\n"
         "    if (warp == 0) {\n"
         "      v = lane < nwarps ? sv[lane] : ident;\n"
         "      for (int off = 16; off > 0; off >>= 1) { const C o = em_shfl(v, off); v = " +
         op +
         "; }\n"
         "      if (lane == 0) sv[0] = v;\n"
         "    }\n"
         "    __syncthreads();\n"
         "    v = sv[0];\n"
         "    __syncthreads(); }\n";
}

}  // namespace codegen
}  // namespace ember::cuda
