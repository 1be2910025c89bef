// Kernel generators of the Cuda backend: each prints the CUDA C of one kernel for an IR op
// family (codegen/<family>.cpp, around the shared vocabulary of codegen/printer.hpp), and
// launchers ask for a kernel by its spec (Note [Kernel specs] below). A kernel's name is structural
// — op, function, dtypes and layout class — never sizes: extents and strides are kernel arguments,
// so one compiled kernel serves every shape. Generators depend on nothing but the IR, so they are
// compiled and tested with NVRTC on machines without a GPU (tests/cuda/test_cuda_codegen.cpp).
//
// Every kernel source is prelude() + body; the prelude (codegen/prelude.cuh) holds the shared
// device helpers (16-bit float conversions, the math primitives and integer semantics that the
// scalar expressions of ir/scalar_table.hpp call, tuned forms) and the EmGeo argument struct, so
// many bodies can share one program.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "ember/backend/fused_group.hpp"
#include "ember/base/dtype.hpp"
#include "ember/base/error.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cuda {

// Most dims a strided kernel takes after collapsing (EmGeo in the prelude).
inline constexpr int kMaxDims = 8;
// Most operands an element-wise kernel reads (where: cond, a, b).
inline constexpr int kMaxOperands = 3;

// Host mirror of the prelude's EmGeo: the output's shape and each input's element strides,
// passed to strided kernels by value.
struct Geo {
  std::int32_t rank = 0;
  std::int32_t pad = 0;
  std::int64_t n = 0;  // number of output elements
  std::int64_t shape[kMaxDims] = {};
  std::int64_t st[kMaxOperands][kMaxDims] = {};
};

// Elements per thread and iteration of a contiguous element-wise kernel whose widest operand
// (or output) element has `bytes` bytes: one 16-byte access per operand (Note [Vector
// loads] in codegen/printer.cpp).
constexpr int vector_width(std::size_t bytes) {
  return bytes >= 16 ? 1 : static_cast<int>(16 / bytes);
}

struct KernelSource {
  std::string name;  // the extern "C" entry point, also the structural key
  std::string body;  // CUDA C, to follow prelude()
};

const std::string& prelude();
std::string full_source(const KernelSource& k);  // prelude() + body

// Whether fn is defined for dtype (ir/scalar_table.hpp), so gen_unary / gen_binary print it.
bool unary_supported(ir::UnaryFn fn, DType dt);
bool binary_supported(ir::BinaryFn fn, DType dt);

// Element-wise. `contiguous`: every operand is contiguous with the output's shape (index
// i everywhere); else offsets are unravelled from EmGeo.
// Signature: (EmGeo g, Out* y, const In* x0, const In* x1, const In* x2, double p0,
// double p1, int* err) for every element-wise kernel, unused pointers null.
KernelSource gen_unary(ir::UnaryFn fn, DType dt, bool contiguous);
// scalar_mask (contiguous kernels only): bit k set when operand k is one element broadcast
// over the output, as in x + 2.0; not every operand.
KernelSource gen_binary(ir::BinaryFn fn, DType dt, bool contiguous, unsigned scalar_mask = 0);
// where: x0 = cond; the kernel moves elements of elem_size bytes, whatever their dtype.
KernelSource gen_where(std::size_t elem_size, bool contiguous, unsigned scalar_mask = 0);
KernelSource gen_cast(DType from, DType to, bool contiguous);
// copy: x0 to y at operand 1's offsets (the destination may be a strided view).
KernelSource gen_copy(std::size_t elem_size, bool contiguous);

// A fused element-wise group (backend/fused_group.hpp) as one kernel (codegen/fused.cpp):
// each instruction printed by the same code as its single-op kernel (printer.hpp's
// unary_code, binary_code, cast_value, where_value), its result held in its dtype's storage
// type — so a 16-bit value is rounded after each instruction, as if stored — and only the
// outputs written, each at the element index (outputs are contiguous; one may be an input's
// buffer: every thread reads its element of every input before writing that element).
// Variants: `contiguous`, every input walks the output linearly or is one element
// (scalar_mask, bit k: input k), with 16-byte vector accesses when aligned (Note [Vector
// loads]); else strided, offsets unravelled from at most kMaxDims collapsed dims.
struct FusedSpec {
  std::vector<DType> inputs;  // each input's dtype
  std::vector<backend::FusedInstr> code;
  std::vector<std::int32_t> outputs;  // value ids, as FusedGroup::outputs
  std::vector<bool> row_values;       // backend::row_values (Note [Row epilogues])
  bool contiguous = false;
  std::uint32_t scalar_mask = 0;
  std::string name;  // the entry point: structural, from the group's key and the variant
};
// The kernel's one argument: EmWords<words> (64-bit words) by value — n, rank, the
// collapsed shape (8 words), then, from `strides` (strided kernels only), each input's
// strides (8 words an input), the input pointers, the output pointers, the error flag,
// and the instructions' parameters from `params`: two words (double bits) each, four for a
// Random (a, b, its seed and first counter); param[i] is instruction i's first word.
struct FusedArgs {
  int strides = -1, inputs = 0, outputs = 0, err = 0, params = 0, words = 0;
  std::vector<int> param;
};
FusedArgs fused_args(const FusedSpec& s);
// The bytes CUDA allows a kernel's arguments: a group whose words do not fit runs op by op.
inline constexpr std::size_t kMaxArgBytes = 4096;
std::string fused_name(std::uint64_t key, bool contiguous, std::uint32_t scalar_mask);
// The spec of group g's program (its inputs' dtypes, code, outputs; the variant and name
// still to be set), and whether every instruction is defined for its dtypes.
FusedSpec fused_spec(const backend::FusedGroup& g);
bool fused_supported(const FusedSpec& s);
// A group may end in a Reduce along rows (Note [Fused row reductions] in codegen/fused.cpp):
// the rows variant of the Reduce kernel computing its elements from the group's inputs
// (contiguous variant only; w[1] the rows, w[2] their length). fused_reduces_rows: the
// functions and operand dtypes it takes.
bool fused_reduces_rows(ir::ReduceFn fn, DType dt);
// Whether the row instruction is a Reduce (printed by gen_fused, with its epilogue: Note
// [Fused row epilogues] in codegen/fused.cpp).
bool has_row_reduction(const FusedSpec& s);
KernelSource gen_fused(const FusedSpec& s);
// A group with a Softmax or LayerNorm along contiguous rows that fit in registers (and its
// epilogue), as the row op's rows-in-registers kernel (Note [Fused rows in registers] in
// codegen/fused.cpp) with rows_in_registers' ept and vec.
bool has_row_norm(const FusedSpec& s);
KernelSource gen_fused_rows(const FusedSpec& s, int ept, int vec);

// Reductions over [outer, n, inner]: (const In* x, Out* y, i64 outer, i64 n, i64 inner).
// `rows`: inner == 1, one block per output row with warp shuffles; else one thread per
// output element walking the reduced dim.
KernelSource gen_reduce(ir::ReduceFn fn, DType dt, bool rows);
// Softmax (or log-softmax) of contiguous rows of a float dtype.
KernelSource gen_softmax(DType dt, bool log);
// Rows held in registers (Note [Rows in registers] in codegen/rows.cpp): `ept` (a power of two)
// elements per thread in chunks of `vec` consecutive ones, blockDim * ept >= n; one block
// walks rows.
// softmax: (const T* x, T* y, i64 rows, i64 n)
// layer norm: (const T* x, const T* w, const T* b, double eps, T* y, i64 rows, i64 n)
// At most 8 per thread (4 for f64), so that two blocks of 512 threads fit an SM.
inline int rows_max_ept(DType dt) { return size_of(dt) > 4 ? 4 : 8; }
// The longest row held in registers: 512 threads of rows_max_ept.
inline std::int64_t rows_max_in_registers(DType dt) { return std::int64_t(512) * rows_max_ept(dt); }
KernelSource gen_softmax_regs(DType dt, bool log, int ept, int vec);
KernelSource gen_layer_norm_regs(DType dt, int ept, int vec);
// The same kernels over rows computed by a fused group's prologue (Note [Fused rows in
// registers] in codegen/fused.cpp): `params` is the kernel's parameter list and `setup`
// declares rows, n, the row output y (where store_y), em_row(R), em_pro(R, j, st), with an
// epilogue em_epi(R, j, y) (Note [Row epilogues]), and, for layer norm, w, b and eps.
struct RowSource {
  std::string name, params, setup;
  bool store_y = true;    // the row result is an output
  bool epilogue = false;  // each stored element goes through em_epi
};
KernelSource gen_softmax_regs_from(const RowSource& src, DType dt, bool log, int ept, int vec);
KernelSource gen_layer_norm_regs_from(const RowSource& src, DType dt, int ept, int vec);
// (block, ept, vec) for rows of n elements of dtype dt: about 8 per thread, at most 512
// threads; block 0 when the row is too long to hold in registers. `aligned`: every row
// pointer the kernel reads or writes is 16-byte aligned, so chunks may be vector accesses.
struct RowsInRegisters {
  unsigned block;
  int ept;
  int vec;
};
RowsInRegisters rows_in_registers(std::int64_t n, DType dt, bool aligned);
// Note [Long rows] (kernels/norm.cpp): layer norm's and RMS norm's rows longer than registers
// hold and fewer than kSplitRowsPerSm a multiprocessor are each split over several blocks.
constexpr std::int64_t kSplitRowsPerSm = 4;
inline bool split_rows(std::int64_t rows, std::int64_t n, DType dt, int sm_count) {
  return n > rows_max_in_registers(dt) && rows < kSplitRowsPerSm * sm_count;
}
// Whether every pointer is aligned to 16 bytes (null pointers count as aligned).
bool aligned16(std::initializer_list<const void*> ptrs);
// Layer norm of contiguous rows of a float dtype: (const T* x, const T* w, const T* b,
// double eps, T* y, i64 rows, i64 n), the order of gen_layer_norm_regs; w and b (n
// elements) may be null.
KernelSource gen_layer_norm(DType dt);
// RMS norm (codegen/rows.cpp): rows in registers, (const T* x, const T* w, double eps, T* y,
// i64 rows, i64 n) as gen_layer_norm_regs less b; and gen_rms_norm's `stage`:
// 0 the forward over rows of any length (the same parameters);
// 1 dx, a block per row: (const T* x, const T* w, const T* g, double eps, T* dx,
//   double* rstd, i64 rows, i64 n), each row's rstd kept for stage 2;
// 2 dweight's partial sums: (const T* x, const T* g, const double* rstd, double* part,
//   i64 rows, i64 n, i64 chunk), part[s * n + j] = sum over rows [s chunk, (s + 1) chunk)
//   of g x rstd, a thread per (s, j);
// 3 dweight: (const double* part, T* dw, i64 n, i64 S), the S partials of each column in
//   order. w may be null (ones).
KernelSource gen_rms_norm_regs(DType dt, int ept, int vec);
KernelSource gen_rms_norm(DType dt, int stage);
// Batch norm and its gradient over x [N, C, *], two launches each (Note [Channel splits] in
// codegen/batch_norm.cpp); `grad` picks BatchNormGrad's kernels; `unroll` (1 or 4) values a
// thread loads at a time.
// sums:  (const T* x, const T* g, const T* w, const T* stats, double* part, i64 NC, i64 L,
//         i64 M, i64 S, i64 chunk, i64 per), the two sums `kind` names over each chunk;
//         operands a kind does not name may be null;
// apply: (const T* x, const T* g, const T* w, const T* b, const T* stats, const double* part,
//         double eps, T* y, T* out2, i64 NC, i64 L, i64 M, i64 S, i64 chunk) — out2 the [2, C]
//         statistics (forward) or dweight and dbias (gradient); w, b may be null.
enum class NormSums : std::uint8_t {
  kShifted,  // d and d^2, d = x - the channel's first value: the forward statistics
  kGrad,     // g and g (x - mean), channel c's mean stats[c / per] (1 for batch norm; group
             // norm's runs, Note [Group splits])
  kSquares,  // x^2 and g w x, w[m] for the value m of the channel's M (a row's position, Note
             // [Long rows]); g null: 0, w null: ones
};
KernelSource gen_batch_norm_sums(DType dt, NormSums kind, int unroll);
KernelSource gen_batch_norm_apply(DType dt, bool grad, int unroll);
// Group norm and its gradient over x [N, C, *] in G groups of K = C / G channels of L =
// prod(*) elements, NG = N G units of M = K L values (Note [Group splits] in
// codegen/batch_norm.cpp), after gen_batch_norm_sums:
// apply:  (const T* x, const T* g, const T* w, const T* b, const T* stats, const double* part,
//          double eps, T* y, T* out2, double* rs, i64 NG, i64 G, i64 K, i64 L, i64 M, i64 S,
//          i64 chunk, i64 SR) — forward: part the units' sums in S chunks each, out2 the
//          [2, NG] statistics (or null); gradient (`grad`): stats GroupNorm's, part the
//          (sample, channel) runs' sums in SR chunks each, y dx; g, b, stats for their pass
//          only; w, b may be null. `rms`: RMS norm of the units (Note [Long rows]), part
//          their kSquares sums in S chunks each, y = x rstd w (forward) or dx (`grad`, rs the
//          units' rstd or null); b, stats, out2 and SR unused;
// affine_grad: (const T* stats, const double* part, double eps, T* dwb, i64 N, i64 NCh, i64 G,
//          i64 SR) — dwb [2, C] (dweight, dbias) from the runs' partials, a thread a channel.
KernelSource gen_group_norm_apply(DType dt, bool grad, bool rms, int unroll);
KernelSource gen_group_norm_affine_grad(DType dt);
// Inclusive scan over [outer, n, inner], one thread per (outer, inner) line.
KernelSource gen_scan(ir::ScanFn fn, DType dt);

// Creation. fill: (T* y, i64 n, u64 bits); arange: (T* y, i64 n, double start, double
// step); random: (T* y, i64 n, u64 key, u64 base, int kind, double a, double b).
KernelSource gen_fill(std::size_t elem_size);
KernelSource gen_arange(DType dt);
KernelSource gen_random(DType dt);

// Indexing; every kernel reports an out-of-range index through err (see prelude em_flag).
// gather: (EmGeo g /*index shape, st[0] = x strides*/, T* y, const T* x, const i64* idx,
//          int dim, i64 extent, int* err)
KernelSource gen_gather(std::size_t elem_size);
// scatter: (EmGeo g /*index shape, st[0] = out strides*/, T* y, const i64* idx, const T* src,
//           int dim, i64 extent, int* err); `add` accumulates with atomics.
KernelSource gen_scatter(DType dt, bool add);
bool scatter_add_supported(DType dt);
// index_select: (T* y, const T* x, const i64* idx, i64 outer, i64 n, i64 k, i64 inner, int* err)
KernelSource gen_index_select(std::size_t elem_size);
// index_add: (T* y /*copy of x*/, const i64* idx, const T* src, i64 outer, i64 n, i64 k,
//             i64 inner, int* err). `rows` false: one thread per (outer, inner) column,
// adding src rows in index order; true: one thread per element of y (outer, row, inner)
// scanning the index for its row, in index order too (the same sums, bit for bit), for
// small outputs (Note [Index add by rows] in kernels/indexing.cpp).
KernelSource gen_index_add(DType dt, bool rows);

// Sort (kernels/sort.cpp, see Note [Device sort] there) and nonzero (kernels/indexing.cpp).
// A row of the sort is the n elements at base + p * inner (base = (r / inner) * n * inner +
// r % inner). Every kernel takes `desc` (0/1): ties keep the original order either way.
// Rows of at most kSortSharedMax elements, one block per row, bitonic in shared memory:
//   (const T* x, T* values, i64* indices, i64 rows, i64 n, i64 inner, i64 np2, int desc)
inline constexpr std::int64_t kSortSharedMax = 2048;
KernelSource gen_sort_rows(DType dt);
// Longer rows: a bitonic network over ord, [rows, np2] i64 original positions (>= n pads):
//   init:  (i64* ord, i64 rows, i64 np2)
//   stage: (const T* x, i64* ord, i64 rows, i64 n, i64 inner, i64 np2, i64 k, i64 j, int desc)
//   write: (const T* x, const i64* ord, T* values, i64* indices, i64 rows, i64 n, i64 inner,
//           i64 np2)
KernelSource gen_sort_init();
KernelSource gen_sort_stage(DType dt);
KernelSource gen_sort_write(std::size_t elem_size);
// Nonzero, in tiles of kScanTile elements (one block of kScanBlock threads per tile):
//   count: (const T* x, i64 n, i64* counts, i64 tiles) — non-zeros of each tile
//   write: (EmGeo g /*shape*/, const T* x, const i64* offsets, i64* y) — coordinates
// and the multi-pass exclusive scan of an i64 array they use:
//   scan_tiles: (i64* a, i64 n, i64* sums) — each tile scanned in place, its total in sums
//   add_offsets: (i64* a, i64 n, const i64* offsets) — a[i] += offsets[i / kScanTile]
inline constexpr int kScanBlock = 256;
inline constexpr std::int64_t kScanTile = 1024;  // kScanBlock threads x 4 elements
KernelSource gen_nonzero_count(DType dt);
KernelSource gen_nonzero_write(DType dt);
KernelSource gen_scan_tiles();
KernelSource gen_add_tile_offsets();
// Sliding windows over the canonical 3-d window (backend/window.hpp), one thread per output
// element. Host mirror of the prelude's EmWin, passed by value.
struct Win {
  std::int64_t planes = 0, K = 0, L = 0, image = 0;
  std::int64_t in[3] = {}, k[3] = {}, s[3] = {}, p[3] = {}, d[3] = {}, out[3] = {};
};
// unfold: (EmWin w, T* y, const T* x, u64 pad_bits) — pad_bits hold the padding element.
// `wide`: 64-bit index arithmetic, needed when an index of the image or the columns
// reaches 2^31 (window_index_wide in kernels/unfold.cpp).
KernelSource gen_unfold(std::size_t elem_size, bool wide);
// fold: (EmWin w, T* y, const T* x) — float dtypes; each image element sums its entries.
KernelSource gen_fold(DType dt, bool wide);
// pool: (EmWin w, T* y, const T* x) — the max (max) or the sum of each window position's
// entries inside the image; every dtype but bool.
KernelSource gen_pool(DType dt, bool max, bool wide);

// Scaled dot-product attention and its gradient (codegen/attention.cpp, Note [Attention
// warps]): the stage (forward, the backward's D = rowsum(g o y) pre-pass, its dk/dv pass, its
// dq pass) of dtype dt for head dims up to dm (32, 64 or 128; 64 for f64). Arguments as
// that file's header lists them.
inline constexpr int kAttentionForward = 0;
inline constexpr int kAttentionRowDot = 1;
inline constexpr int kAttentionGradKV = 2;
inline constexpr int kAttentionGradQ = 3;
// The f16 / bf16 forward on tensor cores (Note [Attention on tensor cores]), for head dims
// that are multiples of 16 (E and Ev; dm as above), on sm_80 and later.
inline constexpr int kAttentionForwardMma = 4;
// The backward's dk / dv and dq passes on tensor cores, under the same conditions.
inline constexpr int kAttentionGradKVMma = 5;
inline constexpr int kAttentionGradQMma = 6;
KernelSource gen_attention(DType dt, int stage, int dm);
// Warps a block of a tensor-core stage, each owning 16 rows (queries, or keys in the dk / dv
// pass).
int attention_mma_warps(int stage);
// The dm of the kernels for head dims e (q, k) and ev (v) of dtype dt: the least of 32, 64
// and 128 holding both; 0 when none does (f64 above 64, others above 128).
int attention_head_dim_bound(DType dt, std::size_t e, std::size_t ev);

// The CUDA C storage type of a dtype ("float", "h16", "i64", ...).
const char* storage_type(DType dt);

// Note [Kernel specs]: a launcher asks for a generated kernel by its spec, the typed
// arguments of its generator: UnaryKernel{fn, dt, contiguous} is KernelSpec<gen_unary>,
// holding (UnaryFn, DType, bool). The spec gives both the kernel's structural cache key
// (key(): the spec's place in KernelSpecs, then every argument in a field of its own) and
// its source (source(): the generator applied to the same arguments), so a key cannot stand
// for two sources, and it lists every variant its launchers can ask for (variants(), next
// to the generator), which all_kernels() gathers for the NVRTC compile test. A spec missing
// from KernelSpecs has no key (a compile error where it is launched); one without
// variants() does not link.
namespace spec_detail {
template <class G>
struct Signature;
template <class... A>
struct Signature<KernelSource (*)(A...)> {
  using Args = std::tuple<A...>;
};
template <class T, class Tuple>
struct IndexOf;
template <class T, class... Ts>
struct IndexOf<T, std::tuple<Ts...>> {
  static constexpr std::size_t value = [] {
    constexpr bool match[] = {std::is_same_v<T, Ts>...};
    std::size_t i = 0;
    while (i < sizeof...(Ts) && !match[i]) ++i;
    return i;
  }();
  static_assert(value < sizeof...(Ts), "a kernel spec missing from KernelSpecs (codegen.hpp)");
};
// Bits of an argument's key field: a bool 1, an enum or an integer 8 (a value that does
// not fit stops the launch: it would give two sources one key).
template <class A>
constexpr int field_bits() {
  if constexpr (std::is_same_v<A, bool>) {
    return 1;
  } else {
    static_assert(std::is_integral_v<A> || (std::is_enum_v<A> && sizeof(A) == 1),
                  "a kernel spec argument must be a bool, an 8-bit enum or an integer");
    return 8;
  }
}
template <class A>
std::uint64_t field_value(A a) {
  if constexpr (std::is_enum_v<A>) {
    return static_cast<std::uint64_t>(a);
  } else if constexpr (std::is_same_v<A, bool>) {
    return a ? 1 : 0;
  } else {
    EMBER_ASSERT(a >= 0 && static_cast<std::uint64_t>(a) < 256);
    return static_cast<std::uint64_t>(a);
  }
}
}  // namespace spec_detail

template <auto Gen>
class KernelSpec {
 public:
  using Args = typename spec_detail::Signature<decltype(Gen)>::Args;
  template <class... A>
  requires(sizeof...(A) == std::tuple_size_v<Args>) explicit KernelSpec(A... a) : args_(a...) {}

  std::uint64_t key() const;
  KernelSource source() const { return std::apply(Gen, args_); }
  // Every spec of this generator that a launcher can ask for.
  static std::vector<KernelSpec> variants();

 private:
  Args args_;
};

// Every kernel family, by generator. The variants() of each are defined next to it.
using UnaryKernel = KernelSpec<gen_unary>;  // codegen/elementwise.cpp
using BinaryKernel = KernelSpec<gen_binary>;
using WhereKernel = KernelSpec<gen_where>;
using CastKernel = KernelSpec<gen_cast>;
using CopyKernel = KernelSpec<gen_copy>;
using ReduceKernel = KernelSpec<gen_reduce>;  // codegen/reduce.cpp
using ScanKernel = KernelSpec<gen_scan>;
using SoftmaxKernel = KernelSpec<gen_softmax>;  // codegen/rows.cpp
using SoftmaxRegsKernel = KernelSpec<gen_softmax_regs>;
using LayerNormKernel = KernelSpec<gen_layer_norm>;
using LayerNormRegsKernel = KernelSpec<gen_layer_norm_regs>;
using RmsNormRegsKernel = KernelSpec<gen_rms_norm_regs>;
using RmsNormKernel = KernelSpec<gen_rms_norm>;
using FillKernel = KernelSpec<gen_fill>;  // codegen/creation.cpp
using ArangeKernel = KernelSpec<gen_arange>;
using RandomKernel = KernelSpec<gen_random>;
using GatherKernel = KernelSpec<gen_gather>;  // codegen/indexing.cpp
using ScatterKernel = KernelSpec<gen_scatter>;
using IndexSelectKernel = KernelSpec<gen_index_select>;
using IndexAddKernel = KernelSpec<gen_index_add>;
using SortRowsKernel = KernelSpec<gen_sort_rows>;  // codegen/sort.cpp
using SortInitKernel = KernelSpec<gen_sort_init>;
using SortStageKernel = KernelSpec<gen_sort_stage>;
using SortWriteKernel = KernelSpec<gen_sort_write>;
using NonzeroCountKernel = KernelSpec<gen_nonzero_count>;
using NonzeroWriteKernel = KernelSpec<gen_nonzero_write>;
using ScanTilesKernel = KernelSpec<gen_scan_tiles>;
using AddTileOffsetsKernel = KernelSpec<gen_add_tile_offsets>;
using UnfoldKernel = KernelSpec<gen_unfold>;  // codegen/window.cpp
using FoldKernel = KernelSpec<gen_fold>;
using PoolKernel = KernelSpec<gen_pool>;
using BatchNormSumsKernel = KernelSpec<gen_batch_norm_sums>;  // codegen/batch_norm.cpp
using BatchNormApplyKernel = KernelSpec<gen_batch_norm_apply>;
using GroupNormApplyKernel = KernelSpec<gen_group_norm_apply>;
using GroupNormAffineGradKernel = KernelSpec<gen_group_norm_affine_grad>;
using AttentionKernel = KernelSpec<gen_attention>;  // codegen/attention.cpp
using KernelSpecs =
    std::tuple<UnaryKernel, BinaryKernel, WhereKernel, CastKernel, CopyKernel, ReduceKernel,
               ScanKernel, SoftmaxKernel, SoftmaxRegsKernel, LayerNormKernel, LayerNormRegsKernel,
               FillKernel, ArangeKernel, RandomKernel, GatherKernel, ScatterKernel,
               IndexSelectKernel, IndexAddKernel, SortRowsKernel, SortInitKernel, SortStageKernel,
               SortWriteKernel, NonzeroCountKernel, NonzeroWriteKernel, ScanTilesKernel,
               AddTileOffsetsKernel, UnfoldKernel, FoldKernel, PoolKernel, BatchNormSumsKernel,
               BatchNormApplyKernel, AttentionKernel, RmsNormRegsKernel, RmsNormKernel,
               GroupNormApplyKernel, GroupNormAffineGradKernel>;
static_assert(std::tuple_size_v<KernelSpecs> < 256, "the family field of a key is 8 bits");
template <>
std::vector<UnaryKernel> UnaryKernel::variants();
template <>
std::vector<BinaryKernel> BinaryKernel::variants();
template <>
std::vector<WhereKernel> WhereKernel::variants();
template <>
std::vector<CastKernel> CastKernel::variants();
template <>
std::vector<CopyKernel> CopyKernel::variants();
template <>
std::vector<ReduceKernel> ReduceKernel::variants();
template <>
std::vector<ScanKernel> ScanKernel::variants();
template <>
std::vector<SoftmaxKernel> SoftmaxKernel::variants();
template <>
std::vector<SoftmaxRegsKernel> SoftmaxRegsKernel::variants();
template <>
std::vector<LayerNormKernel> LayerNormKernel::variants();
template <>
std::vector<LayerNormRegsKernel> LayerNormRegsKernel::variants();
template <>
std::vector<RmsNormRegsKernel> RmsNormRegsKernel::variants();
template <>
std::vector<RmsNormKernel> RmsNormKernel::variants();
template <>
std::vector<FillKernel> FillKernel::variants();
template <>
std::vector<ArangeKernel> ArangeKernel::variants();
template <>
std::vector<RandomKernel> RandomKernel::variants();
template <>
std::vector<GatherKernel> GatherKernel::variants();
template <>
std::vector<ScatterKernel> ScatterKernel::variants();
template <>
std::vector<IndexSelectKernel> IndexSelectKernel::variants();
template <>
std::vector<IndexAddKernel> IndexAddKernel::variants();
template <>
std::vector<SortRowsKernel> SortRowsKernel::variants();
template <>
std::vector<SortInitKernel> SortInitKernel::variants();
template <>
std::vector<SortStageKernel> SortStageKernel::variants();
template <>
std::vector<SortWriteKernel> SortWriteKernel::variants();
template <>
std::vector<NonzeroCountKernel> NonzeroCountKernel::variants();
template <>
std::vector<NonzeroWriteKernel> NonzeroWriteKernel::variants();
template <>
std::vector<ScanTilesKernel> ScanTilesKernel::variants();
template <>
std::vector<AddTileOffsetsKernel> AddTileOffsetsKernel::variants();
template <>
std::vector<UnfoldKernel> UnfoldKernel::variants();
template <>
std::vector<FoldKernel> FoldKernel::variants();
template <>
std::vector<PoolKernel> PoolKernel::variants();
template <>
std::vector<BatchNormSumsKernel> BatchNormSumsKernel::variants();
template <>
std::vector<BatchNormApplyKernel> BatchNormApplyKernel::variants();
template <>
std::vector<AttentionKernel> AttentionKernel::variants();
template <>
std::vector<GroupNormApplyKernel> GroupNormApplyKernel::variants();
template <>
std::vector<GroupNormAffineGradKernel> GroupNormAffineGradKernel::variants();

template <auto Gen>
std::uint64_t KernelSpec<Gen>::key() const {
  constexpr std::uint64_t family = spec_detail::IndexOf<KernelSpec, KernelSpecs>::value;
  static_assert(
      std::apply([](auto... a) { return 8 + (0 + ... + spec_detail::field_bits<decltype(a)>()); },
                 Args{}) <= 64,
      "a kernel spec's arguments do not fit its 64-bit key");
  std::uint64_t key = family;
  int shift = 8;
  std::apply(
      [&](const auto&... a) {
        ((key |= spec_detail::field_value(a) << shift,
          shift += spec_detail::field_bits<std::decay_t<decltype(a)>>()),
         ...);
      },
      args_);
  return key;
}
// Calls f(std::type_identity<Spec>{}) for every Spec in KernelSpecs.
template <class F>
void for_each_kernel_spec(F&& f) {
  [&]<class... S>(std::tuple<S...>*) {
    (f(std::type_identity<S>{}), ...);
  }(static_cast<KernelSpecs*>(nullptr));
}
// Every variant of every family in KernelSpecs: what the codegen test compiles.
std::vector<KernelSource> all_kernels();

}  // namespace ember::cuda
