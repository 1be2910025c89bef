// Scaled dot-product attention (ir::Attention) and its gradient (ir::AttentionGrad) as
// flash-style kernels: FlashAttention-2's tiling on CUDA cores, the scores of a block of
// queries against a tile of keys made in registers and never stored, the forward's
// softmax online (a running row maximum and sum), the backward recomputing each
// probability from the saved log-sum-exp.
//
// Note [Attention warps]: a block is 8 warps; each warp owns one row (a query of the
// forward and of the dq pass, a key of the dk/dv pass) and the block streams tiles of 32
// rows of the other side through shared memory. Lane l makes the score of the owner's row
// against tile row l (a dot product over the head dim, reading tile rows of stride DM + 1
// floats, so the 32 lanes hit 32 banks), the warp reduces the tile's maximum and sum with
// shuffles, and each lane then accumulates head-dim columns lane, lane + 32, ... of the
// owner's output row, taking the tile rows' weights from their lanes by shuffles. DM, the
// head dims' bound, is 32, 64 or 128 (64 for f64), so a row's accumulator is DM / 32
// registers a lane and every tile fits the 48 KB of static shared memory; larger head
// dims stay on the composite (CudaBackend::supports). Rows and columns past the extents
// are zero in shared memory, so dot products run over DM unconditionally.
//
// Kernels (stage), each a grid-stride loop over its work items, 256 threads a block:
//   0 forward: (const T* q, const T* k, const T* v, const void* mask, int mask_kind,
//      EmGeo mg, i64 mrs, i64 mcs, i64 B, i64 Lq, i64 Lk, i64 E, i64 Ev, int causal,
//      double scale, T* out, C* lse) — items (b, block of 8 queries);
//   1 rowdot: (const T* g, const T* y, C* d, i64 rows, i64 Ev) — D = rowsum(g o y), a warp
//      a row;
//   2 dk/dv: (q, k, v, mask, mask_kind, mg, mrs, mcs, B, Lq, Lk, E, Ev, causal, scale,
//      const T* g, const C* lse, const C* d, T* dk, T* dv) — items (b, block of 8 keys),
//      each key's rows of dk and dv summed by its own warp over every query tile;
//   3 dq: the same arguments with T* dq for dk, dv — items (b, block of 8 queries).
// The backward is two passes (2 and 3) so that every output row has one writer: its
// sums run in one fixed order, and results do not change from run to run.
// The mask (mask_kind 0 none, 1 Bool as bytes, 2 additive of dtype T): element (b, i, j)
// at em_attn_moff(mg, b) + i * mrs + j * mcs, mg holding the batch dims and the mask's
// strides along them (0 where it broadcasts). C (the compute type, float or double) is
// also the lse's and D's storage type: f32 for f32, f16 and bf16 q, f64 for f64.
#include <algorithm>
#include <string>
#include <vector>

#include "cuda/codegen.hpp"
#include "cuda/codegen/printer.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {

using namespace codegen;

namespace {

// Helpers shared by every attention kernel of a program (all_kernels() prints many into
// one), so guarded.
constexpr const char* kHelpers = R"(#ifndef EM_ATTN_HELPERS
#define EM_ATTN_HELPERS
__device__ __forceinline__ float em_attn_fma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double em_attn_fma(double a, double b, double c) { return fma(a, b, c); }
template <class C> __device__ __forceinline__ C em_attn_wmax(C v) {
  for (int o = 16; o > 0; o >>= 1) { const C u = __shfl_xor_sync(0xffffffffu, v, o); v = u > v ? u : v; }
  return v;
}
template <class C> __device__ __forceinline__ C em_attn_wsum(C v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// The mask's offset of batch index b (row-major over the batch dims mg.shape[0, rank)).
__device__ __forceinline__ i64 em_attn_moff(const EmGeo& mg, i64 b) {
  i64 off = 0;
  for (int d = mg.rank - 1; d >= 0; --d) {
    off += (b % mg.shape[d]) * mg.st[0][d];
    b /= mg.shape[d];
  }
  return off;
}
#endif
)";

// Note [Attention on tensor cores]: the f16 / bf16 forward for head dims that are multiples
// of 16 (stage kAttentionForwardMma): FlashAttention-2's forward with mma.sync.m16n8k16 (f32
// accumulation). A block is 8 warps and 128 queries, 16 a warp (kQueryWarps: each k and v
// tile a block reads serves 128 queries, halving the L2 traffic of 64); key tiles of 64 rows
// of k and v pass through shared memory as stored (16-bit, rows padded by 8 elements so that
// the 8 rows an ldmatrix reads start in 8 different banks). A warp holds its queries' A
// fragments in registers for the whole row, makes S = q k^T [16, 64] as 8 C fragments,
// applies the scale and masks element by element (the element of C fragment register r of
// lane L is row L / 4 + 8 (r / 2), column 2 (L % 4) + r % 2 of its 16 x 8 tile, as the PTX
// ISA lays out m16n8k16), keeps the running maximum of its two rows (the 4 lanes of a quad
// share a row: two xor shuffles) and per-lane partial sums (reduced at the end), rounds P to
// the 16-bit type and reuses the C fragments as A fragments of P v (the FlashAttention-2
// register identity: C tiles 2kk and 2kk + 1 are A fragment kk). The scores and the softmax
// are f32; P is rounded to 16 bits for the product, as FlashAttention does. The backward's
// passes (kAttentionGradKVMma, kAttentionGradQMma) are built the same way: the owner's rows
// (keys or queries, 16 a warp) against tiles of the other side, S and dP as C fragments, P
// and dS = P (dP - D) rounded to 16 bits and reused as A fragments.
//
// Note [Attention tile pipeline]: every fragment read from shared memory is an ldmatrix
// (em_attn_ldb for a tile stored n-major, em_attn_ldbt transposed for one stored k-major,
// em_attn_lda for A fragments), four 8 x 8 matrices an instruction. In the forward the tiles
// arrive by cp.async in two halves: k's tile j0 is in flight at the loop's top, v's tile j0
// is fetched while the scores and the softmax of tile j0 run, and k's next tile while the
// product with v runs. Two barriers a tile, as before: the first makes k's tile visible and
// frees vs, the second makes v's visible and frees ks. Tiles where no row of the warp has a
// masked or missing key (no mask, inside the extents, below the causal diagonal) skip the
// per-element test. The dq pass the same way round: v's tile j0 lands first, for dP = g v^T;
// then v's next tile is issued and k's tile j0 waited for (wait_group 1: all but the copy
// issued last), for S, dS and dq += dS k, after which k's next tile is issued: each copy
// runs under the other tile's products. Every tile commits its groups, empty or not, so the
// counts of wait_group hold.
constexpr const char* kMmaHelpers = R"(#ifndef EM_ATTN_MMA
#define EM_ATTN_MMA
__device__ __forceinline__ void em_attn_mma_bf16(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void em_attn_mma_f16(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
#ifndef EM_ATTN_PACK
#define EM_ATTN_PACK
__device__ __forceinline__ unsigned em_attn_pack(h16 lo, h16 hi) { return (unsigned)lo | ((unsigned)hi << 16); }
#endif
#ifndef EM_ATTN_LDSM
#define EM_ATTN_LDSM
__device__ __forceinline__ void em_attn_ldsm(unsigned* r, const h16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((unsigned)__cvta_generic_to_shared(p)) : "memory");
}
__device__ __forceinline__ void em_attn_ldsm_t(unsigned* r, const h16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((unsigned)__cvta_generic_to_shared(p)) : "memory");
}
// B fragments of rows row0 .. row0 + 7 (the n side) of the shared tile t (ld elements a
// row), as stored k-contiguous: r[0..1] over columns col0 .. col0 + 15, r[2..3] over
// col0 + 16 .. col0 + 31.
__device__ __forceinline__ void em_attn_ldb(unsigned* r, const h16* t, int ld, int row0, int col0) {
  const int lane = threadIdx.x & 31;
  em_attn_ldsm(r, t + (row0 + (lane & 7)) * ld + col0 + (lane >> 3) * 8);
}
// B fragments of a tile stored k-major (rows row0 .. row0 + 15 are k): r[0..1] for columns
// col0 .. col0 + 7, r[2..3] for col0 + 8 .. col0 + 15.
__device__ __forceinline__ void em_attn_ldbt(unsigned* r, const h16* t, int ld, int row0, int col0) {
  const int lane = threadIdx.x & 31;
  em_attn_ldsm_t(r, t + (row0 + ((lane >> 3) & 1) * 8 + (lane & 7)) * ld + col0 + (lane >> 4) * 8);
}
// The A fragment of rows row0 .. row0 + 15, columns col0 .. col0 + 15.
__device__ __forceinline__ void em_attn_lda(unsigned* r, const h16* t, int ld, int row0, int col0) {
  const int lane = threadIdx.x & 31;
  em_attn_ldsm(r, t + (row0 + ((lane >> 3) & 1) * 8 + (lane & 7)) * ld + col0 + (lane >> 4) * 8);
}
// 16 bytes from global to shared memory, asynchronously; zeros where !full (src is then
// any readable address). em_attn_cp_wait waits for every copy this thread issued.
__device__ __forceinline__ void em_attn_cp16(h16* dst, const h16* src, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(full ? 16 : 0) : "memory");
}
__device__ __forceinline__ void em_attn_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void em_attn_cp_wait() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
// Waits for all but the group committed last.
__device__ __forceinline__ void em_attn_cp_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
#endif
)";

// Whether key j takes part in query i's row, and its score s (scale q.k already in s):
// the causal order, the Bool mask, or the additive mask added. `ok` holds the extents'
// test on entry. Note [Score tiles] (cpu/kernels/attention.cpp): the forward and both
// backward passes make the same scores.
std::string take_code(DType dt) {
  return "      if (ok && causal && j > i) ok = false;\n"
         "      if (ok && mask_kind != 0) {\n"
         "        const i64 mo = moff + i * mrs + j * mcs;\n"
         "        if (mask_kind == 1) ok = ((const u8*)mask)[mo] != 0;\n"
         "        else s += " +
         load(dt, "((const T*)mask)[mo]") +
         ";\n"
         "      }\n";
}

// Loads rows [r0, r0 + n) of the [rows, cols] matrix src (element (r, c) at base + r * cols
// + c) into dst[n][stride], zero past the extents; every thread of the block takes part.
std::string tile_load(DType dt, const std::string& dst, const std::string& src,
                      const std::string& base, const std::string& r0, const std::string& rows,
                      const std::string& cols, int n) {
  return "    for (int x = threadIdx.x; x < " + std::to_string(n) +
         " * DM; x += 256) {\n"
         "      const int r = x / DM, c = x % DM;\n"
         "      const i64 rr = " +
         r0 + " + r;\n      " + dst + "[r][c] = (rr < " + rows + " && c < " + cols + ") ? " +
         load(dt, src + "[(" + base + " + rr) * " + cols + " + c]") + " : (C)0;\n    }\n";
}

const char* kCommonParams =
    "const $T* __restrict__ q, const $T* __restrict__ k, const $T* __restrict__ v, "
    "const void* __restrict__ mask, int mask_kind, EmGeo mg, i64 mrs, i64 mcs, i64 B, i64 Lq, "
    "i64 Lk, i64 E, i64 Ev, int causal, double scale";

std::string forward(DType dt, const std::string& name) {
  return std::string("extern \"C\" __global__ void __launch_bounds__(256) ") + name + "(" +
         kCommonParams +
         ", $T* __restrict__ out, $C* __restrict__ lse) {\n$TYPEDEFS"
         "  __shared__ C ks[32][DM + 1];\n"
         "  __shared__ C vs[32][DM];\n"
         "  __shared__ C qs[8][DM];\n"
         "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
         "  const C sc = (C)scale, ninf = -(C)EM_INF;\n"
         "  const i64 tiles = (Lq + 7) / 8;\n"
         "  for (i64 item = blockIdx.x; item < B * tiles; item += gridDim.x) {\n"
         "    const i64 b = item / tiles, i0 = (item % tiles) * 8, i = i0 + w;\n"
         "    const bool row = i < Lq;\n"
         "    const i64 moff = mask_kind != 0 ? em_attn_moff(mg, b) : 0;\n"
         "    __syncthreads();  // the last item's readers of qs, ks and vs are done\n" +
         tile_load(dt, "qs", "q", "b * Lq", "i0", "Lq", "E", 8) +
         "    C m = ninf, l = (C)0, acc[NT];\n"
         "#pragma unroll\n"
         "    for (int t = 0; t < NT; ++t) acc[t] = (C)0;\n"
         "    const i64 last = (i0 + 8 < Lq ? i0 + 8 : Lq) - 1;\n"
         "    const i64 kend = causal ? (last + 1 < Lk ? last + 1 : Lk) : Lk;  // keys any row "
         "takes\n"
         "    for (i64 j0 = 0; j0 < kend; j0 += 32) {\n"
         "      __syncthreads();  // ks, vs free; qs written\n" +
         tile_load(dt, "ks", "k", "b * Lk", "j0", "Lk", "E", 32) +
         tile_load(dt, "vs", "v", "b * Lk", "j0", "Lk", "Ev", 32) +
         "      __syncthreads();\n"
         "      const i64 j = j0 + lane;\n"
         "      C s = (C)0;\n"
         "#pragma unroll 16\n"
         "      for (int c = 0; c < DM; ++c) s = em_attn_fma(qs[w][c], ks[lane][c], s);\n"
         "      s = s * sc;\n"
         "      bool ok = row && j < Lk;\n" +
         take_code(dt) +
         "      if (!ok) s = ninf;\n"
         "      const C tm = em_attn_wmax(s), mn = tm > m ? tm : m;\n"
         "      // Note [Rows with every key masked]: while the row has no key, mn is -inf and\n"
         "      // every p is 0; alpha is 0 for the first keys (m -inf, mn finite).\n"
         "      const C p = s == ninf ? (C)0 : m_exp(s - mn);\n"
         "      const C alpha = mn == ninf ? (C)1 : m_exp(m - mn);\n"
         "      l = l * alpha + em_attn_wsum(p);\n"
         "      m = mn;\n"
         "#pragma unroll\n"
         "      for (int t = 0; t < NT; ++t) acc[t] = acc[t] * alpha;\n"
         "      for (int jj = 0; jj < 32; ++jj) {\n"
         "        const C pj = __shfl_sync(0xffffffffu, p, jj);\n"
         "#pragma unroll\n"
         "        for (int t = 0; t < NT; ++t) acc[t] = em_attn_fma(pj, vs[jj][lane + 32 * t], "
         "acc[t]);\n"
         "      }\n"
         "    }\n"
         "    if (row) {\n"
         "      const C inv = l > (C)0 ? (C)1 / l : (C)0;  // a row with no key: 0\n"
         "#pragma unroll\n"
         "      for (int t = 0; t < NT; ++t) {\n"
         "        const int c = lane + 32 * t;\n"
         "        if (c < Ev) out[(b * Lq + i) * Ev + c] = " +
         store(dt, "acc[t] * inv") +
         ";\n"
         "      }\n"
         "      if (lane == 0) lse[b * Lq + i] = l > (C)0 ? m + m_log(l) : ninf;\n"
         "    }\n"
         "  }\n"
         "}\n";
}

// Copies rows [r0, r0 + n) of src into the 16-bit shared tile dst[n][DM + 8] as stored, 0
// past the extents; `threads` threads take part. Rows of exactly DM elements from a 16-byte
// aligned src move 8 elements (16 bytes) a load (a shared row is (DM + 8) * 2 bytes, a
// multiple of 16); others one at a time. With `async`, the 16-byte moves are cp.async
// copies that the caller waits for (em_attn_cp_wait) before its barrier; the others are
// stores, done when the code returns.
std::string raw_tile(const std::string& dst, const std::string& src, const std::string& base,
                     const std::string& r0, const std::string& rows, const std::string& cols, int n,
                     int threads, bool async = false) {
  const std::string nn = std::to_string(n), th = std::to_string(threads);
  const std::string move =
      async ? "          em_attn_cp16(&" + dst + "[r][c], " + src + " + (" + base + " + (rr < " +
                  rows + " ? rr : 0)) * DM + c, rr < " + rows + ");\n"
            : "          uint4 val = make_uint4(0u, 0u, 0u, 0u);\n"
              "          if (rr < " +
                  rows + ") val = *(const uint4*)(" + src + " + (" + base + " + rr) * DM + c);\n" +
                  "          *(uint4*)&" + dst + "[r][c] = val;\n";
  return "      if (" + cols + " == DM && ((u64)" + src +
         " & 15) == 0) {\n"
         "        for (int x = threadIdx.x; x < " +
         nn + " * (DM / 8); x += " + th +
         ") {\n"
         "          const int r = x / (DM / 8), c = (x % (DM / 8)) * 8;\n"
         "          const i64 rr = " +
         r0 + " + r;\n" + move +
         "        }\n"
         "      } else {\n"
         "        for (int x = threadIdx.x; x < " +
         nn + " * DM; x += " + th +
         ") {\n"
         "          const int r = x / DM, c = x % DM;\n"
         "          const i64 rr = " +
         r0 + " + r;\n          " + dst + "[r][c] = (rr < " + rows + " && c < " + cols + ") ? " +
         src + "[(" + base + " + rr) * " + cols + " + c] : (h16)0;\n        }\n      }\n";
}

// A fragment loaders of the tensor-core kernels (Note [Attention on tensor cores]).
// Rows r0 + gq and r0 + gq + 8 of the [rows, cols] matrix src (element (r, c) at
// (base + r) * cols + c) as A fragments over DM columns, 0 past the extents.
std::string a_frags(const std::string& dst, const std::string& src, const std::string& base,
                    const std::string& r0, const std::string& rows, const std::string& cols) {
  return "    unsigned " + dst +
         "[DM / 16][4];\n"
         "#pragma unroll\n"
         "    for (int kk = 0; kk < DM / 16; ++kk) {\n"
         "#pragma unroll\n"
         "      for (int r = 0; r < 4; ++r) {\n"
         "        const i64 ri = " +
         r0 +
         " + gq + 8 * (r & 1);\n"
         "        const int c = kk * 16 + 2 * tq + 8 * (r >> 1);\n"
         "        const h16 lo = (ri < " +
         rows + " && c < " + cols + ") ? " + src + "[(" + base + " + ri) * " + cols +
         " + c] : (h16)0;\n"
         "        const h16 hi = (ri < " +
         rows + " && c + 1 < " + cols + ") ? " + src + "[(" + base + " + ri) * " + cols +
         " + c + 1] : (h16)0;\n"
         "        " +
         dst +
         "[kk][r] = em_attn_pack(lo, hi);\n"
         "      }\n"
         "    }\n";
}

// The tensor-core kernels that own queries (the forward, the dq pass): kQueryWarps warps of
// 16 queries a block, so a block's k and v tiles serve 16 kQueryWarps queries (the dk / dv
// pass keeps 4 warps: its shared tiles would not fit twice as many keys).
constexpr int kQueryWarps = 8;
std::string query_rows(const std::string& body) {
  return subst(subst(body, "EM_AROWS", std::to_string(16 * kQueryWarps)), "EM_ATHREADS",
               std::to_string(32 * kQueryWarps));
}

std::string forward_mma(DType dt, const std::string& name) {
  const std::string mma = dt == DType::BF16 ? "em_attn_mma_bf16" : "em_attn_mma_f16";
  return query_rows(
      std::string("extern \"C\" __global__ void __launch_bounds__(EM_ATHREADS) ") + name + "(" +
      kCommonParams +
      ", $T* __restrict__ out, $C* __restrict__ lse) {\n$TYPEDEFS"
      "  __shared__ __align__(16) h16 ks[64][DM + 8];\n"
      "  __shared__ __align__(16) h16 vs[64][DM + 8];\n"
      "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
      "  const int gq = lane >> 2, tq = lane & 3;  // the fragment's row group, column pair\n"
      "  const C sc = (C)scale, ninf = -(C)EM_INF;\n"
      "  const i64 tiles = (Lq + EM_AROWS - 1) / EM_AROWS;\n"
      "  for (i64 item = blockIdx.x; item < B * tiles; item += gridDim.x) {\n"
      "    const i64 b = item / tiles, i0 = (item % tiles) * EM_AROWS, iw = i0 + 16 * w;\n"
      "    const i64 moff = mask_kind != 0 ? em_attn_moff(mg, b) : 0;\n" +
      a_frags("qa", "q", "b * Lq", "iw", "Lq", "E") +
      "    float o[DM / 8][4];\n"
      "#pragma unroll\n"
      "    for (int n = 0; n < DM / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;\n"
      "    C m[2] = {ninf, ninf}, l[2] = {(C)0, (C)0};  // rows gq, gq + 8: max, lane's sum\n"
      "    const i64 last = (i0 + EM_AROWS < Lq ? i0 + EM_AROWS : Lq) - 1;\n"
      "    const i64 kend = causal ? (last + 1 < Lk ? last + 1 : Lk) : Lk;\n"
      "    // Note [Attention tile pipeline]: k's tile j0 is in flight at the loop's top; v's\n"
      "    // is fetched during the scores and the next k tile during the product with v.\n"
      "    if (kend > 0) {\n" +
      raw_tile("ks", "k", "b * Lk", "(i64)0", "Lk", "E", 64, 32 * kQueryWarps, true) +
      "      em_attn_cp_commit();\n"
      "    }\n"
      "    for (i64 j0 = 0; j0 < kend; j0 += 64) {\n"
      "      em_attn_cp_wait();\n"
      "      __syncthreads();  // ks holds tile j0; vs is free\n" +
      raw_tile("vs", "v", "b * Lk", "j0", "Lk", "Ev", 64, 32 * kQueryWarps, true) +
      "      em_attn_cp_commit();\n"
      "      float sf[8][4];\n"
      "#pragma unroll\n"
      "      for (int n = 0; n < 8; ++n) {\n"
      "        sf[n][0] = sf[n][1] = sf[n][2] = sf[n][3] = 0.f;\n"
      "#pragma unroll\n"
      "        for (int kk = 0; kk < DM / 16; kk += 2) {\n"
      "          unsigned kb[4];\n"
      "          em_attn_ldb(kb, &ks[0][0], DM + 8, n * 8, kk * 16);\n"
      "          " +
      mma + "(sf[n], qa[kk], kb);\n          " + mma +
      "(sf[n], qa[kk + 1], kb + 2);\n"
      "        }\n"
      "      }\n"
      "      C tm[2] = {ninf, ninf};\n"
      "      // A tile every key of which every row of the warp takes, unmasked: the scores\n"
      "      // are the scaled products (the general path gives the same for it).\n"
      "      const bool plain = mask_kind == 0 && j0 + 64 <= Lk && iw + 16 <= Lq &&\n"
      "                         (!causal || j0 + 63 <= iw);\n"
      "      if (plain) {\n"
      "#pragma unroll\n"
      "        for (int n = 0; n < 8; ++n) {\n"
      "#pragma unroll\n"
      "          for (int r = 0; r < 4; ++r) {\n"
      "            const C s = (C)sf[n][r] * sc;\n"
      "            sf[n][r] = s;\n"
      "            tm[r >> 1] = s > tm[r >> 1] ? s : tm[r >> 1];\n"
      "          }\n"
      "        }\n"
      "      } else {\n"
      "#pragma unroll\n"
      "      for (int n = 0; n < 8; ++n) {\n"
      "#pragma unroll\n"
      "        for (int r = 0; r < 4; ++r) {\n"
      "          const i64 i = iw + gq + 8 * (r >> 1), j = j0 + n * 8 + 2 * tq + (r & 1);\n"
      "          C s = (C)sf[n][r] * sc;\n"
      "          bool ok = i < Lq && j < Lk;\n" +
      take_code(dt) +
      "          if (!ok) s = ninf;\n"
      "          sf[n][r] = s;\n"
      "          tm[r >> 1] = s > tm[r >> 1] ? s : tm[r >> 1];\n"
      "        }\n"
      "      }\n"
      "      }\n"
      "      C alpha[2];\n"
      "#pragma unroll\n"
      "      for (int h = 0; h < 2; ++h) {\n"
      "        C t = tm[h];\n"
      "        t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, 1));\n"
      "        t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, 2));\n"
      "        const C mn = t > m[h] ? t : m[h];\n"
      "        // Note [Rows with every key masked], as the SIMT forward.\n"
      "        alpha[h] = mn == ninf ? (C)1 : m_exp(m[h] - mn);\n"
      "        m[h] = mn;\n"
      "        l[h] = l[h] * alpha[h];\n"
      "      }\n"
      "      unsigned pa[4][4];  // P's A fragments, 16 keys each\n"
      "#pragma unroll\n"
      "      for (int n = 0; n < 8; ++n) {\n"
      "        C p[4];\n"
      "#pragma unroll\n"
      "        for (int r = 0; r < 4; ++r) {\n"
      "          const int h = r >> 1;\n"
      "          p[r] = sf[n][r] == ninf ? (C)0 : m_exp(sf[n][r] - m[h]);\n"
      "        }\n"
      "        const h16 p0 = " +
      store(dt, "p[0]") + ", p1 = " + store(dt, "p[1]") + ", p2 = " + store(dt, "p[2]") +
      ", p3 = " + store(dt, "p[3]") +
      ";\n"
      "        // The sum of what the product multiplies: P as rounded.\n"
      "        l[0] = l[0] + " +
      load(dt, "p0") + " + " + load(dt, "p1") +
      ";\n"
      "        l[1] = l[1] + " +
      load(dt, "p2") + " + " + load(dt, "p3") +
      ";\n"
      "        pa[n >> 1][2 * (n & 1)] = em_attn_pack(p0, p1);\n"
      "        pa[n >> 1][2 * (n & 1) + 1] = em_attn_pack(p2, p3);\n"
      "      }\n"
      "      em_attn_cp_wait();\n"
      "      __syncthreads();  // vs holds tile j0; every warp is done with ks\n"
      "      if (j0 + 64 < kend) {\n" +
      raw_tile("ks", "k", "b * Lk", "(j0 + 64)", "Lk", "E", 64, 32 * kQueryWarps, true) +
      "        em_attn_cp_commit();\n"
      "      }\n"
      "#pragma unroll\n"
      "      for (int dn = 0; dn < DM / 8; dn += 2) {\n"
      "#pragma unroll\n"
      "        for (int d = dn; d < dn + 2; ++d) {\n"
      "          o[d][0] *= alpha[0]; o[d][1] *= alpha[0];\n"
      "          o[d][2] *= alpha[1]; o[d][3] *= alpha[1];\n"
      "        }\n"
      "#pragma unroll\n"
      "        for (int kk = 0; kk < 4; ++kk) {\n"
      "          unsigned vb[4];\n"
      "          em_attn_ldbt(vb, &vs[0][0], DM + 8, kk * 16, dn * 8);\n"
      "          " +
      mma + "(o[dn], pa[kk], vb);\n          " + mma +
      "(o[dn + 1], pa[kk], vb + 2);\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "#pragma unroll\n"
      "    for (int h = 0; h < 2; ++h) {\n"
      "      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);\n"
      "      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);\n"
      "    }\n"
      "#pragma unroll\n"
      "    for (int h = 0; h < 2; ++h) {\n"
      "      const i64 i = iw + gq + 8 * h;\n"
      "      if (i >= Lq) continue;\n"
      "      const C inv = l[h] > (C)0 ? (C)1 / l[h] : (C)0;  // a row with no key: 0\n"
      "#pragma unroll\n"
      "      for (int dn = 0; dn < DM / 8; ++dn) {\n"
      "        const int c = dn * 8 + 2 * tq;\n"
      "        if (c < Ev) out[(b * Lq + i) * Ev + c] = " +
      store(dt, "o[dn][2 * h] * inv") +
      ";\n"
      "        if (c + 1 < Ev) out[(b * Lq + i) * Ev + c + 1] = " +
      store(dt, "o[dn][2 * h + 1] * inv") +
      ";\n"
      "      }\n"
      "      if (tq == 0) lse[b * Lq + i] = l[h] > (C)0 ? m[h] + m_log(l[h]) : ninf;\n"
      "    }\n"
      "  }\n"
      "}\n");
}

// The tensor-core dq pass: warp w owns queries iw .. iw + 15 (64 a block); key tiles of
// 64. S = q k^T and dP = g v^T as C fragments, dS = P (dP - D) rounded to 16 bits as A
// fragments (the register identity of the forward), dq += dS k.
std::string grad_q_mma(DType dt, const std::string& name) {
  const std::string mma = dt == DType::BF16 ? "em_attn_mma_bf16" : "em_attn_mma_f16";
  return query_rows(
      std::string("extern \"C\" __global__ void __launch_bounds__(EM_ATHREADS) ") + name + "(" +
      kCommonParams +
      ", const $T* __restrict__ g, const $C* __restrict__ lse, const $C* __restrict__ dsum, "
      "$T* __restrict__ dq) {\n$TYPEDEFS"
      "  __shared__ __align__(16) h16 ks[64][DM + 8];\n"
      "  __shared__ __align__(16) h16 vs[64][DM + 8];\n"
      "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
      "  const int gq = lane >> 2, tq = lane & 3;\n"
      "  const C sc = (C)scale, ninf = -(C)EM_INF;\n"
      "  const i64 tiles = (Lq + EM_AROWS - 1) / EM_AROWS;\n"
      "  for (i64 item = blockIdx.x; item < B * tiles; item += gridDim.x) {\n"
      "    const i64 b = item / tiles, i0 = (item % tiles) * EM_AROWS, iw = i0 + 16 * w;\n"
      "    const i64 moff = mask_kind != 0 ? em_attn_moff(mg, b) : 0;\n" +
      a_frags("qa", "q", "b * Lq", "iw", "Lq", "E") +
      a_frags("ga", "g", "b * Lq", "iw", "Lq", "Ev") +
      "    C li[2], di[2];\n"
      "#pragma unroll\n"
      "    for (int h = 0; h < 2; ++h) {\n"
      "      const i64 i = iw + gq + 8 * h;\n"
      "      li[h] = i < Lq ? lse[b * Lq + i] : ninf;\n"
      "      di[h] = i < Lq ? dsum[b * Lq + i] : (C)0;\n"
      "    }\n"
      "    float acc[DM / 8][4];\n"
      "#pragma unroll\n"
      "    for (int n = 0; n < DM / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = "
      "0.f;\n"
      "    const i64 last = (i0 + EM_AROWS < Lq ? i0 + EM_AROWS : Lq) - 1;\n"
      "    const i64 kend = causal ? (last + 1 < Lk ? last + 1 : Lk) : Lk;\n"
      "    // Note [Attention tile pipeline], the dq pass: v's tile and k's tile each in\n"
      "    // flight while the other's products run.\n"
      "    if (kend > 0) {\n" +
      raw_tile("vs", "v", "b * Lk", "(i64)0", "Lk", "Ev", 64, 32 * kQueryWarps, true) +
      "      em_attn_cp_commit();\n" +
      raw_tile("ks", "k", "b * Lk", "(i64)0", "Lk", "E", 64, 32 * kQueryWarps, true) +
      "      em_attn_cp_commit();\n"
      "    }\n"
      "    for (i64 j0 = 0; j0 < kend; j0 += 64) {\n"
      "      em_attn_cp_wait1();\n"
      "      __syncthreads();  // vs holds tile j0\n"
      "      float pf[8][4];  // dP = g v^T\n"
      "#pragma unroll\n"
      "      for (int n = 0; n < 8; ++n) {\n"
      "        pf[n][0] = pf[n][1] = pf[n][2] = pf[n][3] = 0.f;\n"
      "#pragma unroll\n"
      "        for (int kk = 0; kk < DM / 16; kk += 2) {\n"
      "          unsigned vb[4];\n"
      "          em_attn_ldb(vb, &vs[0][0], DM + 8, n * 8, kk * 16);\n"
      "          " +
      mma + "(pf[n], ga[kk], vb);\n          " + mma +
      "(pf[n], ga[kk + 1], vb + 2);\n"
      "        }\n"
      "      }\n"
      "      __syncthreads();  // every warp is done with vs\n"
      "      if (j0 + 64 < kend) {\n" +
      raw_tile("vs", "v", "b * Lk", "(j0 + 64)", "Lk", "Ev", 64, 32 * kQueryWarps, true) +
      "      }\n"
      "      em_attn_cp_commit();\n"
      "      em_attn_cp_wait1();\n"
      "      __syncthreads();  // ks holds tile j0\n"
      "      unsigned da[4][4];\n"
      "#pragma unroll\n"
      "      for (int n = 0; n < 8; ++n) {\n"
      "        float sf[4] = {0.f, 0.f, 0.f, 0.f};\n"
      "#pragma unroll\n"
      "        for (int kk = 0; kk < DM / 16; kk += 2) {\n"
      "          unsigned kb[4];\n"
      "          em_attn_ldb(kb, &ks[0][0], DM + 8, n * 8, kk * 16);\n"
      "          " +
      mma + "(sf, qa[kk], kb);\n          " + mma +
      "(sf, qa[kk + 1], kb + 2);\n"
      "        }\n"
      "        h16 dh[4];\n"
      "#pragma unroll\n"
      "        for (int r = 0; r < 4; ++r) {\n"
      "          const int h = r >> 1;\n"
      "          const i64 i = iw + gq + 8 * h, j = j0 + n * 8 + 2 * tq + (r & 1);\n"
      "          C s = (C)sf[r] * sc;\n"
      "          bool ok = i < Lq && j < Lk;\n" +
      take_code(dt) +
      "          const C p = (ok && li[h] != ninf && s != ninf) ? m_exp(s - li[h]) : (C)0;\n"
      "          dh[r] = " +
      store(dt, "p * ((C)pf[n][r] - di[h])") +
      ";\n"
      "        }\n"
      "        da[n >> 1][2 * (n & 1)] = em_attn_pack(dh[0], dh[1]);\n"
      "        da[n >> 1][2 * (n & 1) + 1] = em_attn_pack(dh[2], dh[3]);\n"
      "      }\n"
      "#pragma unroll\n"
      "      for (int dn = 0; dn < DM / 8; dn += 2) {\n"
      "#pragma unroll\n"
      "        for (int kk = 0; kk < 4; ++kk) {\n"
      "          unsigned kb[4];\n"
      "          em_attn_ldbt(kb, &ks[0][0], DM + 8, kk * 16, dn * 8);\n"
      "          " +
      mma + "(acc[dn], da[kk], kb);\n          " + mma +
      "(acc[dn + 1], da[kk], kb + 2);\n"
      "        }\n"
      "      }\n"
      "      __syncthreads();  // every warp is done with ks\n"
      "      if (j0 + 64 < kend) {\n" +
      raw_tile("ks", "k", "b * Lk", "(j0 + 64)", "Lk", "E", 64, 32 * kQueryWarps, true) +
      "      }\n"
      "      em_attn_cp_commit();\n"
      "    }\n"
      "#pragma unroll\n"
      "    for (int h = 0; h < 2; ++h) {\n"
      "      const i64 i = iw + gq + 8 * h;\n"
      "      if (i >= Lq) continue;\n"
      "#pragma unroll\n"
      "      for (int dn = 0; dn < DM / 8; ++dn) {\n"
      "        const int c = dn * 8 + 2 * tq;\n"
      "        if (c < E) dq[(b * Lq + i) * E + c] = " +
      store(dt, "acc[dn][2 * h] * sc") +
      ";\n"
      "        if (c + 1 < E) dq[(b * Lq + i) * E + c + 1] = " +
      store(dt, "acc[dn][2 * h + 1] * sc") +
      ";\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n");
}

// The tensor-core dk / dv pass: warp w owns keys jw .. jw + 15 (64 a block, their rows of
// v kept in shared memory, of k in registers); query tiles of 32. S^T = k q^T and
// dP^T = v g^T as C fragments, P^T and dS^T rounded to 16 bits as A fragments,
// dv += P^T g and dk += dS^T q.
std::string grad_kv_mma(DType dt, const std::string& name) {
  const std::string mma = dt == DType::BF16 ? "em_attn_mma_bf16" : "em_attn_mma_f16";
  return std::string("extern \"C\" __global__ void __launch_bounds__(128) ") + name + "(" +
         kCommonParams +
         ", const $T* __restrict__ g, const $C* __restrict__ lse, const $C* __restrict__ dsum, "
         "$T* __restrict__ dk, $T* __restrict__ dv) {\n$TYPEDEFS"
         "  __shared__ __align__(16) h16 vv[64][DM + 8];\n"
         "  __shared__ __align__(16) h16 qs[32][DM + 8];\n"
         "  __shared__ __align__(16) h16 gs[32][DM + 8];\n"
         "  __shared__ C ls[32], ds[32];\n"
         "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
         "  const int gq = lane >> 2, tq = lane & 3;\n"
         "  const C sc = (C)scale, ninf = -(C)EM_INF;\n"
         "  const i64 tiles = (Lk + 63) / 64;\n"
         "  for (i64 item = blockIdx.x; item < B * tiles; item += gridDim.x) {\n"
         "    const i64 b = item / tiles, j0 = (item % tiles) * 64, jw = j0 + 16 * w;\n"
         "    const i64 moff = mask_kind != 0 ? em_attn_moff(mg, b) : 0;\n"
         "    __syncthreads();  // the last item's readers of vv are done\n" +
         raw_tile("vv", "v", "b * Lk", "j0", "Lk", "Ev", 64, 128) +
         a_frags("ka", "k", "b * Lk", "jw", "Lk", "E") +
         "    float dka[DM / 8][4], dva[DM / 8][4];\n"
         "#pragma unroll\n"
         "    for (int n = 0; n < DM / 8; ++n) {\n"
         "      dka[n][0] = dka[n][1] = dka[n][2] = dka[n][3] = 0.f;\n"
         "      dva[n][0] = dva[n][1] = dva[n][2] = dva[n][3] = 0.f;\n"
         "    }\n"
         "    // Causal: queries before j0 see none of these keys.\n"
         "    const i64 ibeg = causal ? (j0 < Lq ? j0 : Lq) : 0;\n"
         "    for (i64 i0 = ibeg; i0 < Lq; i0 += 32) {\n"
         "      __syncthreads();  // qs, gs, ls, ds free; vv written\n" +
         raw_tile("qs", "q", "b * Lq", "i0", "Lq", "E", 32, 128) +
         raw_tile("gs", "g", "b * Lq", "i0", "Lq", "Ev", 32, 128) +
         "      if (threadIdx.x < 32) {\n"
         "        const i64 r = i0 + threadIdx.x;\n"
         "        ls[threadIdx.x] = r < Lq ? lse[b * Lq + r] : ninf;\n"
         "        ds[threadIdx.x] = r < Lq ? dsum[b * Lq + r] : (C)0;\n"
         "      }\n"
         "      __syncthreads();\n"
         "      unsigned pa[2][4], da[2][4];\n"
         "#pragma unroll\n"
         "      for (int n = 0; n < 4; ++n) {\n"
         "        float sf[4] = {0.f, 0.f, 0.f, 0.f}, pf[4] = {0.f, 0.f, 0.f, 0.f};\n"
         "#pragma unroll\n"
         "        for (int kk = 0; kk < DM / 16; kk += 2) {\n"
         "          unsigned qb[4], gb[4], va[2][4];\n"
         "          em_attn_ldb(qb, &qs[0][0], DM + 8, n * 8, kk * 16);\n"
         "          em_attn_ldb(gb, &gs[0][0], DM + 8, n * 8, kk * 16);\n"
         "          em_attn_lda(va[0], &vv[0][0], DM + 8, 16 * w, kk * 16);\n"
         "          em_attn_lda(va[1], &vv[0][0], DM + 8, 16 * w, kk * 16 + 16);\n"
         "          " +
         mma + "(sf, ka[kk], qb);\n          " + mma + "(sf, ka[kk + 1], qb + 2);\n          " +
         mma + "(pf, va[0], gb);\n          " + mma +
         "(pf, va[1], gb + 2);\n"
         "        }\n"
         "        h16 ph[4], dh[4];\n"
         "#pragma unroll\n"
         "        for (int r = 0; r < 4; ++r) {\n"
         "          const i64 j = jw + gq + 8 * (r >> 1);\n"
         "          const int ic = n * 8 + 2 * tq + (r & 1);\n"
         "          const i64 i = i0 + ic;\n"
         "          C s = (C)sf[r] * sc;\n"
         "          bool ok = i < Lq && j < Lk;\n" +
         take_code(dt) +
         "          const C li = ls[ic];\n"
         "          const C p = (ok && li != ninf && s != ninf) ? m_exp(s - li) : (C)0;\n"
         "          ph[r] = " +
         store(dt, "p") +
         ";\n"
         "          dh[r] = " +
         store(dt, "p * ((C)pf[r] - ds[ic])") +
         ";\n"
         "        }\n"
         "        pa[n >> 1][2 * (n & 1)] = em_attn_pack(ph[0], ph[1]);\n"
         "        pa[n >> 1][2 * (n & 1) + 1] = em_attn_pack(ph[2], ph[3]);\n"
         "        da[n >> 1][2 * (n & 1)] = em_attn_pack(dh[0], dh[1]);\n"
         "        da[n >> 1][2 * (n & 1) + 1] = em_attn_pack(dh[2], dh[3]);\n"
         "      }\n"
         "#pragma unroll\n"
         "      for (int dn = 0; dn < DM / 8; dn += 2) {\n"
         "#pragma unroll\n"
         "        for (int kk = 0; kk < 2; ++kk) {\n"
         "          unsigned gb[4], qb[4];\n"
         "          em_attn_ldbt(gb, &gs[0][0], DM + 8, kk * 16, dn * 8);\n"
         "          em_attn_ldbt(qb, &qs[0][0], DM + 8, kk * 16, dn * 8);\n"
         "          " +
         mma + "(dva[dn], pa[kk], gb);\n          " + mma +
         "(dva[dn + 1], pa[kk], gb + 2);\n          " + mma + "(dka[dn], da[kk], qb);\n          " +
         mma +
         "(dka[dn + 1], da[kk], qb + 2);\n"
         "        }\n"
         "      }\n"
         "    }\n"
         "#pragma unroll\n"
         "    for (int h = 0; h < 2; ++h) {\n"
         "      const i64 j = jw + gq + 8 * h;\n"
         "      if (j >= Lk) continue;\n"
         "#pragma unroll\n"
         "      for (int dn = 0; dn < DM / 8; ++dn) {\n"
         "        const int c = dn * 8 + 2 * tq;\n"
         "        if (c < E) dk[(b * Lk + j) * E + c] = " +
         store(dt, "dka[dn][2 * h] * sc") +
         ";\n"
         "        if (c + 1 < E) dk[(b * Lk + j) * E + c + 1] = " +
         store(dt, "dka[dn][2 * h + 1] * sc") +
         ";\n"
         "        if (c < Ev) dv[(b * Lk + j) * Ev + c] = " +
         store(dt, "dva[dn][2 * h]") +
         ";\n"
         "        if (c + 1 < Ev) dv[(b * Lk + j) * Ev + c + 1] = " +
         store(dt, "dva[dn][2 * h + 1]") +
         ";\n"
         "      }\n"
         "    }\n"
         "  }\n"
         "}\n";
}

std::string rowdot(DType dt, const std::string& name) {
  return "extern \"C\" __global__ void __launch_bounds__(256) " + name +
         "(const $T* __restrict__ g, const $T* __restrict__ y, $C* __restrict__ d, i64 rows, "
         "i64 Ev) {\n$TYPEDEFS"
         "  const int lane = threadIdx.x & 31;\n"
         "  const i64 warps = (i64)gridDim.x * 8;\n"
         "  for (i64 r = (i64)blockIdx.x * 8 + (threadIdx.x >> 5); r < rows; r += warps) {\n"
         "    C a = (C)0;\n"
         "    for (i64 c = lane; c < Ev; c += 32) a = em_attn_fma(" +
         load(dt, "g[r * Ev + c]") + ", " + load(dt, "y[r * Ev + c]") +
         ", a);\n"
         "    a = em_attn_wsum(a);\n"
         "    if (lane == 0) d[r] = a;\n"
         "  }\n"
         "}\n";
}

// dk and dv: warp w owns key j = j0 + w; lane l takes query i0 + l of each tile.
std::string grad_kv(DType dt, const std::string& name) {
  return std::string("extern \"C\" __global__ void __launch_bounds__(256) ") + name + "(" +
         kCommonParams +
         ", const $T* __restrict__ g, const $C* __restrict__ lse, const $C* __restrict__ dsum, "
         "$T* __restrict__ dk, $T* __restrict__ dv) {\n$TYPEDEFS"
         "  __shared__ C qs[32][DM + 1];\n"
         "  __shared__ C gs[32][DM + 1];\n"
         "  __shared__ C kk[8][DM];\n"
         "  __shared__ C vv[8][DM];\n"
         "  __shared__ C ls[32], ds[32];\n"
         "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
         "  const C sc = (C)scale, ninf = -(C)EM_INF;\n"
         "  const i64 tiles = (Lk + 7) / 8;\n"
         "  for (i64 item = blockIdx.x; item < B * tiles; item += gridDim.x) {\n"
         "    const i64 b = item / tiles, j0 = (item % tiles) * 8, j = j0 + w;\n"
         "    const bool col = j < Lk;\n"
         "    const i64 moff = mask_kind != 0 ? em_attn_moff(mg, b) : 0;\n"
         "    __syncthreads();  // the last item's readers of kk and vv are done\n" +
         tile_load(dt, "kk", "k", "b * Lk", "j0", "Lk", "E", 8) +
         tile_load(dt, "vv", "v", "b * Lk", "j0", "Lk", "Ev", 8) +
         "    C dka[NT], dva[NT];\n"
         "#pragma unroll\n"
         "    for (int t = 0; t < NT; ++t) { dka[t] = (C)0; dva[t] = (C)0; }\n"
         "    // Causal: queries before j0 see none of these keys.\n"
         "    const i64 ibeg = causal ? (j0 < Lq ? j0 : Lq) : 0;\n"
         "    for (i64 i0 = ibeg; i0 < Lq; i0 += 32) {\n"
         "      __syncthreads();  // qs, gs, ls, ds free; kk, vv written\n" +
         tile_load(dt, "qs", "q", "b * Lq", "i0", "Lq", "E", 32) +
         tile_load(dt, "gs", "g", "b * Lq", "i0", "Lq", "Ev", 32) +
         "      if (threadIdx.x < 32) {\n"
         "        const i64 r = i0 + threadIdx.x;\n"
         "        ls[threadIdx.x] = r < Lq ? lse[b * Lq + r] : ninf;\n"
         "        ds[threadIdx.x] = r < Lq ? dsum[b * Lq + r] : (C)0;\n"
         "      }\n"
         "      __syncthreads();\n"
         "      const i64 i = i0 + lane;\n"
         "      C s = (C)0, dp = (C)0;\n"
         "#pragma unroll 16\n"
         "      for (int c = 0; c < DM; ++c) {\n"
         "        s = em_attn_fma(qs[lane][c], kk[w][c], s);\n"
         "        dp = em_attn_fma(gs[lane][c], vv[w][c], dp);\n"
         "      }\n"
         "      s = s * sc;\n"
         "      bool ok = col && i < Lq;\n" +
         take_code(dt) +
         "      const C li = ls[lane];\n"
         "      const C p = (ok && li != ninf && s != ninf) ? m_exp(s - li) : (C)0;\n"
         "      const C dsv = p * (dp - ds[lane]);\n"
         "      for (int ii = 0; ii < 32; ++ii) {\n"
         "        const C pi = __shfl_sync(0xffffffffu, p, ii);\n"
         "        const C si = __shfl_sync(0xffffffffu, dsv, ii);\n"
         "#pragma unroll\n"
         "        for (int t = 0; t < NT; ++t) {\n"
         "          dva[t] = em_attn_fma(pi, gs[ii][lane + 32 * t], dva[t]);\n"
         "          dka[t] = em_attn_fma(si, qs[ii][lane + 32 * t], dka[t]);\n"
         "        }\n"
         "      }\n"
         "    }\n"
         "    if (col) {\n"
         "#pragma unroll\n"
         "      for (int t = 0; t < NT; ++t) {\n"
         "        const int c = lane + 32 * t;\n"
         "        if (c < E) dk[(b * Lk + j) * E + c] = " +
         store(dt, "dka[t] * sc") +
         ";\n"
         "        if (c < Ev) dv[(b * Lk + j) * Ev + c] = " +
         store(dt, "dva[t]") +
         ";\n"
         "      }\n"
         "    }\n"
         "  }\n"
         "}\n";
}

// dq: warp w owns query i = i0 + w; lane l takes key j0 + l of each tile.
std::string grad_q(DType dt, const std::string& name) {
  return std::string("extern \"C\" __global__ void __launch_bounds__(256) ") + name + "(" +
         kCommonParams +
         ", const $T* __restrict__ g, const $C* __restrict__ lse, const $C* __restrict__ dsum, "
         "$T* __restrict__ dq) {\n$TYPEDEFS"
         "  __shared__ C qq[8][DM];\n"
         "  __shared__ C gg[8][DM];\n"
         "  __shared__ C ks[32][DM + 1];\n"
         "  __shared__ C vs[32][DM + 1];\n"
         "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
         "  const C sc = (C)scale, ninf = -(C)EM_INF;\n"
         "  const i64 tiles = (Lq + 7) / 8;\n"
         "  for (i64 item = blockIdx.x; item < B * tiles; item += gridDim.x) {\n"
         "    const i64 b = item / tiles, i0 = (item % tiles) * 8, i = i0 + w;\n"
         "    const bool row = i < Lq;\n"
         "    const i64 moff = mask_kind != 0 ? em_attn_moff(mg, b) : 0;\n"
         "    const C li = row ? lse[b * Lq + i] : ninf;\n"
         "    const C di = row ? dsum[b * Lq + i] : (C)0;\n"
         "    __syncthreads();  // the last item's readers of qq and gg are done\n" +
         tile_load(dt, "qq", "q", "b * Lq", "i0", "Lq", "E", 8) +
         tile_load(dt, "gg", "g", "b * Lq", "i0", "Lq", "Ev", 8) +
         "    C dqa[NT];\n"
         "#pragma unroll\n"
         "    for (int t = 0; t < NT; ++t) dqa[t] = (C)0;\n"
         "    const i64 last = (i0 + 8 < Lq ? i0 + 8 : Lq) - 1;\n"
         "    const i64 kend = causal ? (last + 1 < Lk ? last + 1 : Lk) : Lk;\n"
         "    for (i64 j0 = 0; j0 < kend; j0 += 32) {\n"
         "      __syncthreads();  // ks, vs free; qq, gg written\n" +
         tile_load(dt, "ks", "k", "b * Lk", "j0", "Lk", "E", 32) +
         tile_load(dt, "vs", "v", "b * Lk", "j0", "Lk", "Ev", 32) +
         "      __syncthreads();\n"
         "      const i64 j = j0 + lane;\n"
         "      C s = (C)0, dp = (C)0;\n"
         "#pragma unroll 16\n"
         "      for (int c = 0; c < DM; ++c) {\n"
         "        s = em_attn_fma(qq[w][c], ks[lane][c], s);\n"
         "        dp = em_attn_fma(gg[w][c], vs[lane][c], dp);\n"
         "      }\n"
         "      s = s * sc;\n"
         "      bool ok = row && j < Lk;\n" +
         take_code(dt) +
         "      const C p = (ok && li != ninf && s != ninf) ? m_exp(s - li) : (C)0;\n"
         "      const C dsv = p * (dp - di);\n"
         "      for (int jj = 0; jj < 32; ++jj) {\n"
         "        const C sj = __shfl_sync(0xffffffffu, dsv, jj);\n"
         "#pragma unroll\n"
         "        for (int t = 0; t < NT; ++t) dqa[t] = em_attn_fma(sj, ks[jj][lane + 32 * t], "
         "dqa[t]);\n"
         "      }\n"
         "    }\n"
         "    if (row) {\n"
         "#pragma unroll\n"
         "      for (int t = 0; t < NT; ++t) {\n"
         "        const int c = lane + 32 * t;\n"
         "        if (c < E) dq[(b * Lq + i) * E + c] = " +
         store(dt, "dqa[t] * sc") +
         ";\n"
         "      }\n"
         "    }\n"
         "  }\n"
         "}\n";
}

// Static shared memory of a kernel, in compute-type elements (the declarations above).
std::size_t shared_elems(int stage, int dm) {
  const auto d = static_cast<std::size_t>(dm);
  switch (stage) {
    case kAttentionForward:
      return 32 * (d + 1) + 32 * d + 8 * d;
    case kAttentionGradKV:
      return 2 * 32 * (d + 1) + 2 * 8 * d + 64;
    case kAttentionGradQ:
      return 2 * 8 * d + 2 * 32 * (d + 1);
    case kAttentionForwardMma:  // 16-bit elements: half a float each
    case kAttentionGradQMma:
      return (2 * 64 * (d + 8) + 1) / 2;
    case kAttentionGradKVMma:
      return (64 * (d + 8) + 2 * 32 * (d + 8) + 1) / 2 + 64;
    default:
      return 0;
  }
}

}  // namespace

int attention_mma_warps(int stage) { return stage == kAttentionGradKVMma ? 4 : kQueryWarps; }

int attention_head_dim_bound(DType dt, std::size_t e, std::size_t ev) {
  const std::size_t n = std::max(e, ev);
  const std::size_t most = dt == DType::F64 ? 64 : 128;
  if (n > most) return 0;
  for (int dm = 32;; dm *= 2)
    if (n <= static_cast<std::size_t>(dm)) return dm;
}

KernelSource gen_attention(DType dt, int stage, int dm) {
  EMBER_ASSERT(is_float(dt) && dm >= 32 && dm <= 128 && dm % 32 == 0);
  EMBER_ASSERT(shared_elems(stage, dm) * size_of(dt == DType::F64 ? DType::F64 : DType::F32) <=
               48 * 1024);
  static const char* kStage[] = {"fwd", "rowdot", "dkdv", "dq", "fwd_mma", "dkdv_mma", "dq_mma"};
  EMBER_ASSERT(stage >= 0 && stage < 7);
  EMBER_ASSERT(stage < kAttentionForwardMma || is_half(dt));
  KernelSource k;
  k.name = std::string("em_attention_") + kStage[stage] + "_" + dname(dt) +
           (stage == kAttentionRowDot ? std::string() : "_d" + std::to_string(dm));
  std::string body;
  switch (stage) {
    case kAttentionForward:
      body = forward(dt, k.name);
      break;
    case kAttentionRowDot:
      body = rowdot(dt, k.name);
      break;
    case kAttentionGradKV:
      body = grad_kv(dt, k.name);
      break;
    case kAttentionForwardMma:
      body = std::string(kMmaHelpers) + forward_mma(dt, k.name);
      break;
    case kAttentionGradKVMma:
      body = std::string(kMmaHelpers) + grad_kv_mma(dt, k.name);
      break;
    case kAttentionGradQMma:
      body = std::string(kMmaHelpers) + grad_q_mma(dt, k.name);
      break;
    default:
      body = grad_q(dt, k.name);
      break;
  }
  // T (storage) and C (compute) are typedefs inside the kernel; DM and NT macros defined
  // before it and undefined after, so that many kernels share one program.
  body = subst(body, "$TYPEDEFS",
               std::string("  typedef ") + storage_type(dt) + " T;\n  typedef " + compute_type(dt) +
                   " C;\n");
  body = subst(subst(body, "$T", storage_type(dt)), "$C", compute_type(dt));
  k.body = std::string(kHelpers) + "#define DM " + std::to_string(dm) + "\n#define NT (DM / 32)\n" +
           body + "#undef DM\n#undef NT\n";
  return k;
}

template <>
std::vector<AttentionKernel> AttentionKernel::variants() {
  std::vector<AttentionKernel> out;
  for (DType dt : kAllDTypes) {
    if (!is_float(dt)) continue;
    out.emplace_back(dt, kAttentionRowDot, 32);
    for (int dm = 32; dm <= (dt == DType::F64 ? 64 : 128); dm *= 2) {
      out.emplace_back(dt, kAttentionForward, dm);
      out.emplace_back(dt, kAttentionGradKV, dm);
      out.emplace_back(dt, kAttentionGradQ, dm);
      if (is_half(dt)) {
        out.emplace_back(dt, kAttentionForwardMma, dm);
        out.emplace_back(dt, kAttentionGradKVMma, dm);
        out.emplace_back(dt, kAttentionGradQMma, dm);
      }
    }
  }
  return out;
}

}  // namespace ember::cuda
